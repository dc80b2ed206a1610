/*-------------------------------------------------------------------------
 *
 * isolate.c
 *		Keeping the records that fail from holding back the others.
 *
 * The sweep works on batches of records in one statement each.  A record
 * whose work fails (a trigger of yours that raises on it, a foreign key of
 * yours that a purge would break) makes the whole statement fail, and
 * would do so at every pass, so that no other record of the batch were
 * ever done.  Each batch therefore runs in a subtransaction (durable_try);
 * when it fails, the records that fail are found by halving the batch
 * (durable_try_halves), and the process passes over them for a while
 * (DurableSkipList).
 *
 * Halving, not one record at a time: every subtransaction that writes and
 * commits takes an xid that stays in this backend's PGPROC until the
 * transaction ends, and past 64 of them the subxid cache overflows: every
 * other backend's snapshot is then marked suboverflowed and looks up
 * pg_subtrans for its visibility checks, until this transaction ends.
 * Records done one by one in a batch of 1,000 with one failure commit 999
 * subtransactions; halving commits one per level (the half that succeeds),
 * O(failures x log n).  (A subtransaction that fails rolls back, and its
 * xid leaves the cache.)  Ranges of HALVES_ONE_BY_ONE records or fewer are
 * tried one record at a time: when most records fail, halving down to
 * single records would try each about twice, and fire the triggers of the
 * records that go with a failing one at every level.
 *
 * IDENTIFICATION
 *	  src/isolate.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timeout.h"

#include "isolate.h"

/*
 * Run fn(arg) in a subtransaction.  When it fails, the subtransaction is
 * rolled back and its error returned (the caller frees it); NULL when it
 * succeeded.  An error that cannot be about the rows fn worked on is thrown
 * on instead, after the rollback (durable_error_is_global): a cancel
 * (statement_timeout, pg_cancel_backend) ends the caller's statement as it
 * would anywhere else.
 */
ErrorData *
durable_try(void (*fn) (void *), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;
	bool		timeout_armed = get_timeout_active(STATEMENT_TIMEOUT);

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		/*
		 * Roll the subtransaction back before anything is thrown on: a
		 * handler above (the caller's transaction, a PL/pgSQL EXCEPTION
		 * block) must not find it still open and roll back the wrong level.
		 */
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();

	/*
	 * A statement_timeout that fired while fn ran is the caller's, whatever
	 * became of its error on the way (PL/Python, say, re-raises a cancel
	 * from its own function): the timer is disarmed when it fires.
	 */
	if (edata != NULL &&
		(durable_error_is_global(edata) ||
		 (timeout_armed && !get_timeout_active(STATEMENT_TIMEOUT))))
		ReThrowError(edata);
	return edata;
}

/*
 * A trigger of the user's can raise any SQLSTATE for a reason of its own
 * (an archive table on a full disk, a remote server's statement timeout
 * passed on by postgres_fdw), so the codes that mean "this transaction" are
 * believed only when the backend's own state says the same: a cancel or a
 * lock timeout raised by ProcessInterrupts (statement_timeout,
 * pg_cancel_backend, the caller's lock_timeout), a write refused in a
 * read-only transaction, a serialization failure under a transaction
 * snapshot.
 */
bool
durable_error_is_global(const ErrorData *edata)
{
	switch (edata->sqlerrcode)
	{
		case ERRCODE_QUERY_CANCELED:
		case ERRCODE_LOCK_NOT_AVAILABLE:
			return edata->funcname == NULL ||
				strcmp(edata->funcname, "ProcessInterrupts") == 0;
		case ERRCODE_READ_ONLY_SQL_TRANSACTION:
			return XactReadOnly;
		case ERRCODE_T_R_SERIALIZATION_FAILURE:
			return IsolationUsesXactSnapshot();
		default:
			return false;
	}
}

bool
durable_error_is_momentary(const ErrorData *edata)
{
	return edata->sqlerrcode == ERRCODE_T_R_DEADLOCK_DETECTED ||
		edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE ||
		edata->sqlerrcode == ERRCODE_T_R_SERIALIZATION_FAILURE;
}

/* Ranges this small are tried one record at a time, not halved. */
#define HALVES_ONE_BY_ONE	8

/* durable_try_halves' state: the keys and what to do with them. */
typedef struct HalvesCall
{
	Datum	   *keys;
	TimestampTz *orders;
	DurableApplyKeys apply;
	DurableKeyFailed failed;
	void	   *arg;
	int			lo;				/* the range durable_try is running */
	int			hi;
} HalvesCall;

static void
halves_apply(void *arg)
{
	HalvesCall *call = (HalvesCall *) arg;

	call->apply(call->arg, call->keys + call->lo, call->hi - call->lo);
}

/* Do keys[lo..hi) in a subtransaction; NULL, or its error. */
static ErrorData *
halves_try(HalvesCall *call, int lo, int hi)
{
	call->lo = lo;
	call->hi = hi;
	return durable_try(halves_apply, call);
}

/*
 * Keys[lo..hi) failed together (their error freed): find those that fail,
 * one at a time in a small range, else in its halves.
 */
static void
halves_search(HalvesCall *call, int lo, int hi)
{
	int			i;

	check_stack_depth();
	if (hi - lo <= HALVES_ONE_BY_ONE)
	{
		for (i = lo; i < hi; i++)
		{
			ErrorData  *edata = halves_try(call, i, i + 1);

			if (edata != NULL)
				call->failed(call->arg, call->keys[i], call->orders[i], edata);
		}
		return;
	}
	for (i = 0; i < 2; i++)
	{
		int			from = (i == 0) ? lo : lo + (hi - lo) / 2;
		int			to = (i == 0) ? lo + (hi - lo) / 2 : hi;
		ErrorData  *edata = halves_try(call, from, to);

		if (edata == NULL)
			continue;
		FreeErrorData(edata);
		halves_search(call, from, to);
	}
}

void
durable_try_keys(DurableApplyKeys apply, DurableKeyFailed failed, void *arg,
				 Datum *keys, TimestampTz *orders, int nkeys)
{
	HalvesCall	call = {.keys = keys, .orders = orders, .apply = apply, .failed = failed, .arg = arg};
	ErrorData  *edata;

	if (nkeys <= 0)
		return;
	edata = halves_try(&call, 0, nkeys);
	if (edata == NULL)
		return;
	FreeErrorData(edata);
	halves_search(&call, 0, nkeys);
}

void
durable_try_halves(DurableApplyKeys apply, DurableKeyFailed failed, void *arg)
{
	HalvesCall	call = {.apply = apply, .failed = failed, .arg = arg};
	int			n = (int) SPI_processed;
	int			i;

	call.keys = palloc(sizeof(Datum) * Max(n, 1));
	call.orders = palloc(sizeof(TimestampTz) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		call.keys[i] = durable_col_copy(i, 1);
		call.orders[i] = DatumGetTimestampTz(durable_col(i, 2));
	}
	SPI_freetuptable(SPI_tuptable);

	/* The whole set just failed. */
	if (n > 0)
		halves_search(&call, 0, n);
	pfree(call.keys);
	pfree(call.orders);
}

/* The lists the transaction callbacks look after: the sweep's few. */
#define SKIP_LISTS_MAX	8
static DurableSkipList *skip_lists[SKIP_LISTS_MAX];
static int	skip_nlists = 0;

static void
skip_free(DurableSkipList *list)
{
	int			i;

	if (!list->key_byval)
		for (i = 0; i < list->nkeys; i++)
			pfree(DatumGetPointer(list->keys[i]));
	pfree(list->keys);
	pfree(list->subids);
	list->keys = NULL;
	list->subids = NULL;
	list->nkeys = 0;
	list->mark = DT_NOBEGIN;
	list->mark_subid = InvalidSubTransactionId;
}

/*
 * Forget the failures met in subtransaction `since` and those below it (a
 * rollback of it); they are the list's last (their ids are the highest of
 * the open ones).  TopSubTransactionId: the whole transaction's.
 */
static void
skip_drop_since(DurableSkipList *list, SubTransactionId since)
{
	int			n = list->nkeys;

	if (list->keys == NULL)
		return;
	while (n > 0 && list->subids[n - 1] >= since)
	{
		n--;
		if (!list->key_byval)
			pfree(DatumGetPointer(list->keys[n]));
	}
	if (n < list->nkeys || list->mark_subid >= since)
		list->dropped = true;
	list->nkeys = n;
	/* (a mark raised in the rolled-back work is dropped whole: it is only ever a saving) */
	if (list->mark_subid >= since)
	{
		list->mark = DT_NOBEGIN;
		list->mark_subid = InvalidSubTransactionId;
	}
	if (list->nkeys == 0 && list->mark == DT_NOBEGIN)
		skip_free(list);
}

/* The failures of subtransaction `since` and below now belong to `to`. */
static void
skip_pass_up(DurableSkipList *list, SubTransactionId since, SubTransactionId to)
{
	int			i;

	if (list->keys == NULL)
		return;
	for (i = list->nkeys - 1; i >= 0 && list->subids[i] >= since; i--)
		list->subids[i] = to;
	if (list->mark_subid >= since)
		list->mark_subid = to;
}

static void
skip_xact_callback(XactEvent event, void *arg)
{
	int			i;

	for (i = 0; i < skip_nlists; i++)
		switch (event)
		{
			case XACT_EVENT_COMMIT:
			case XACT_EVENT_PARALLEL_COMMIT:
				skip_pass_up(skip_lists[i], TopSubTransactionId, InvalidSubTransactionId);
				break;
			case XACT_EVENT_ABORT:
			case XACT_EVENT_PARALLEL_ABORT:
				/* (a prepared transaction may yet roll back: forgetting costs a retry) */
			case XACT_EVENT_PREPARE:
				skip_drop_since(skip_lists[i], TopSubTransactionId);
				break;
			default:
				break;
		}
}

static void
skip_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	int			i;

	for (i = 0; i < skip_nlists; i++)
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			skip_pass_up(skip_lists[i], mySubid, parentSubid);
		else if (event == SUBXACT_EVENT_ABORT_SUB)
			skip_drop_since(skip_lists[i], mySubid);
}

static void
skip_register(DurableSkipList *list)
{
	if (list->registered)
		return;
	if (skip_nlists == SKIP_LISTS_MAX)
		elog(ERROR, "durable: too many lists of records passed over");
	if (skip_nlists == 0)
	{
		RegisterXactCallback(skip_xact_callback, NULL);
		RegisterSubXactCallback(skip_subxact_callback, NULL);
	}
	skip_lists[skip_nlists++] = list;
	list->registered = true;
}

void
durable_skip_remember(DurableSkipList *list, Datum key, TimestampTz order)
{
	MemoryContext old;

	skip_register(list);
	if (list->keys == NULL)
	{
		get_typlenbyval(list->key_type, &list->key_len, &list->key_byval);
		list->keys = MemoryContextAlloc(TopMemoryContext, sizeof(Datum) * list->max);
		list->subids = MemoryContextAlloc(TopMemoryContext, sizeof(SubTransactionId) * list->max);
		list->nkeys = 0;
		list->retry_at = durable_clock_us() + (int64) list->retry_ms * 1000;
	}
	if (list->nkeys >= list->max)
	{
		list->mark = Max(list->mark, order);
		list->mark_subid = Max(list->mark_subid, GetCurrentSubTransactionId());
		return;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	list->subids[list->nkeys] = GetCurrentSubTransactionId();
	list->keys[list->nkeys++] = datumCopy(key, list->key_byval, list->key_len);
	MemoryContextSwitchTo(old);
}

void
durable_keep_first_error(ErrorData **first, ErrorData *edata)
{
	if (*first == NULL)
		*first = edata;
	else
		FreeErrorData(edata);
}

bool
durable_skip_forget_due(DurableSkipList *list, Oid journal)
{
	/* (keys remembered before any pass named its journal are taken as this one's) */
	bool		same_journal = (list->journal == journal || !OidIsValid(list->journal));
	bool		dropped = list->dropped;

	list->journal = journal;
	list->dropped = false;
	if (list->keys == NULL || (same_journal && durable_clock_us() < list->retry_at))
		return dropped;
	skip_free(list);
	return true;
}

/*
 * The keys are handed over in a copy: construct_array() may replace
 * elements with detoasted copies in the current memory context.
 */
Datum
durable_key_array(const Datum *keys, int nkeys, Oid key_type)
{
	Datum	   *copy = palloc(sizeof(Datum) * Max(nkeys, 1));
	int16		typlen;
	bool		typbyval;
	char		typalign;

	if (nkeys > 0)
		memcpy(copy, keys, sizeof(Datum) * nkeys);
	get_typlenbyvalalign(key_type, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_array(copy, nkeys, key_type, typlen, typbyval, typalign));
}

Datum
durable_skip_array(const DurableSkipList *list)
{
	return durable_key_array(list->keys, list->nkeys, list->key_type);
}

TimestampTz
durable_skip_from(const DurableSkipList *list)
{
	return (list->mark == DT_NOBEGIN) ? DT_NOBEGIN : list->mark + 1;
}
