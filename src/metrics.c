/*-------------------------------------------------------------------------
 *
 * metrics.c
 *		Observing: event counters in shared memory (metrics(),
 *		metrics_reset()) and gauges read from the journals (standing()).
 *
 * Counters are per database and live in the database's shared-memory slot
 * (shmem.h).  Two kinds:
 *	- counters of journal changes (records journaled, replayed, retried,
 *	  made dead or ambiguous) count when the transaction that made the
 *	  change commits, since a change rolled back never happened: a send
 *	  enqueued in a business transaction that rolls back was never
 *	  journaled.  A subtransaction rolled back takes its counts with it;
 *	  PREPARE TRANSACTION counts them (a prepared transaction is expected
 *	  to commit).
 *	- counters of calls (duplicates answered, keys deduplicated, bypasses,
 *	  divergent repeats, stale confirmations) count the moment the call
 *	  happens, even when its transaction later rolls back: a rejected stale
 *	  confirmation must show up although the error aborts its transaction.
 *
 * IDENTIFICATION
 *	  src/metrics.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "shmem.h"

PG_FUNCTION_INFO_V1(durable_metrics);
PG_FUNCTION_INFO_V1(durable_metrics_reset);
PG_FUNCTION_INFO_V1(durable_standing);

/* The counters of journal changes, which count at commit. */
static const bool metrics_at_commit[DC_NUM_COUNTERS] = {
	[DC_INBOUND_JOURNALED] = true,
	[DC_INBOUND_REPLAYED] = true,
	[DC_INBOUND_DEAD] = true,
	[DC_OUTBOX_JOURNALED] = true,
	[DC_OUTBOX_RETRIED] = true,
	[DC_OUTBOX_DEFERRED] = true,
	[DC_OUTBOX_DEAD] = true,
	[DC_OUTBOX_AMBIGUOUS] = true,
};

/* What one (sub)transaction level counted, waiting for it to commit. */
typedef struct MetricsPending
{
	int			level;			/* transaction nesting level */
	int64		n[DC_NUM_COUNTERS];
} MetricsPending;

/* A stack of levels, innermost last, in TopMemoryContext. */
static MetricsPending *metrics_pending = NULL;
static int	metrics_npending = 0;
static int	metrics_maxpending = 0;
static bool metrics_callbacks_registered = false;

static void
metrics_add(DurableCounter counter, int64 n)
{
	DurableDbSlot *slot = durable_my_slot();

	if (slot != NULL)
		pg_atomic_fetch_add_u64(&slot->counters[counter], (uint64) n);
}

static void
metrics_xact_callback(XactEvent event, void *arg)
{
	int			i;
	int			c;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			for (i = 0; i < metrics_npending; i++)
				for (c = 0; c < DC_NUM_COUNTERS; c++)
					if (metrics_pending[i].n[c] != 0)
						metrics_add((DurableCounter) c, metrics_pending[i].n[c]);
			metrics_npending = 0;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			metrics_npending = 0;
			break;
		default:
			break;
	}
}

/*
 * A subtransaction ends (the callback runs while it is still the current
 * one; any deeper level has ended before it): rolled back, its counts go;
 * committed, they move to its parent's level.
 */
static void
metrics_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	MetricsPending *top;
	MetricsPending *parent;
	int			c;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	Assert(metrics_npending == 0 || metrics_pending[metrics_npending - 1].level <= level);
	if (metrics_npending == 0 || metrics_pending[metrics_npending - 1].level != level)
		return;					/* it counted nothing */
	top = &metrics_pending[metrics_npending - 1];
	parent = (metrics_npending > 1) ? &metrics_pending[metrics_npending - 2] : NULL;
	if (event == SUBXACT_EVENT_COMMIT_SUB && (parent == NULL || parent->level < level - 1))
		top->level = level - 1;
	else
	{
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			for (c = 0; c < DC_NUM_COUNTERS; c++)
				parent->n[c] += top->n[c];
		metrics_npending--;
	}
}

/* The counts of the current (sub)transaction level, pushed if new. */
static MetricsPending *
metrics_current_level(void)
{
	int			level = GetCurrentTransactionNestLevel();
	MetricsPending *top;

	if (!metrics_callbacks_registered)
	{
		RegisterXactCallback(metrics_xact_callback, NULL);
		RegisterSubXactCallback(metrics_subxact_callback, NULL);
		metrics_callbacks_registered = true;
	}
	if (metrics_npending > 0 && metrics_pending[metrics_npending - 1].level == level)
		return &metrics_pending[metrics_npending - 1];
	if (metrics_npending == metrics_maxpending)
	{
		int			grown = Max(4, metrics_maxpending * 2);

		metrics_pending = (metrics_pending == NULL) ?
			MemoryContextAlloc(TopMemoryContext, grown * sizeof(MetricsPending)) :
			repalloc(metrics_pending, grown * sizeof(MetricsPending));
		metrics_maxpending = grown;
	}
	top = &metrics_pending[metrics_npending++];
	memset(top, 0, sizeof(*top));
	top->level = level;
	return top;
}

void
durable_count(DurableCounter counter, int64 n)
{
	if (metrics_at_commit[counter] && IsTransactionState())
		metrics_current_level()->n[counter] += n;
	else
		metrics_add(counter, n);
}

/* The current database's slot, or an error saying durable must be preloaded. */
static DurableDbSlot *
metrics_slot(void)
{
	DurableDbSlot *slot;

	durable_require_shmem();
	slot = durable_my_slot();
	if (slot == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("durable has no counters for this database"),
				 errdetail("durable tracks at most %d databases.", durable_max_databases),
				 errhint("Raise \"durable.max_databases\" (it takes a server restart), or drop the extension where it is not used.")));
	return slot;
}

/*
 * metrics() → one row of counters and the time they were last reset.
 */
Datum
durable_metrics(PG_FUNCTION_ARGS)
{
	DurableDbSlot *slot = metrics_slot();
	TupleDesc	tupdesc;
	Datum		values[DC_NUM_COUNTERS + 1];
	bool		nulls[DC_NUM_COUNTERS + 1];
	int			c;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "durable: return type must be a row type");

	memset(nulls, 0, sizeof(nulls));
	for (c = 0; c < DC_NUM_COUNTERS; c++)
		values[c] = Int64GetDatum((int64) pg_atomic_read_u64(&slot->counters[c]));
	SpinLockAcquire(&slot->mutex);
	values[DC_NUM_COUNTERS] = TimestampTzGetDatum(slot->since);
	SpinLockRelease(&slot->mutex);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * metrics_reset() zeroes this database's counters.
 */
Datum
durable_metrics_reset(PG_FUNCTION_ARGS)
{
	DurableDbSlot *slot = metrics_slot();
	int			c;

	for (c = 0; c < DC_NUM_COUNTERS; c++)
		pg_atomic_write_u64(&slot->counters[c], 0);
	SpinLockAcquire(&slot->mutex);
	slot->since = GetCurrentTimestamp();
	SpinLockRelease(&slot->mutex);
	PG_RETURN_VOID();
}

/*
 * standing() → gauges from the journals.  Each count is answered by a
 * partial index: the open inbox records (inbox_unfinished_idx, read once
 * for all of their figures), the dead ones (inbox_dead_idx: its predicate
 * alone, so that the scan is index-only; dead records pile up, and testing
 * their state read each one), the outbox's by state (the parked ones from
 * outbox_parked_idx, index-only since 0.14).  "Waiting" means due work
 * that nobody holds yet: inbox pending plus outbox pending and failed
 * whose not_before has come.  A record
 * deferred to later (outbox_enqueue's not_before, a retry's delay) is not
 * waiting for anyone until then, and waits from its due time on: else a
 * reminder scheduled for tomorrow would hold the journal over bound_age
 * all day.  An inbox lease that ran out and that no sweep has moved yet is
 * waiting too, from the end of its lease, when it has attempts left: a
 * claim would take it over, and a fleet that died holding its records, with
 * no worker to sweep them (not preloaded, or failing), must show as over
 * bound, not as nothing waiting.  (One on its last attempt is the sweep's
 * to make dead, and an outbox send whose lease ran out becomes unknown: no
 * claim takes either.)  The state counts still count every record in the
 * state.
 */
#define STANDING_INBOX_DUE \
	"(i.state = 'pending' AND i.not_before <= $1)" \
	" OR (i.state = 'leased' AND i.lease_until < $1 AND i.attempts < $2)"

Datum
durable_standing(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[2] = {TIMESTAMPTZOID, INT4OID};
	TupleDesc	tupdesc;
	Datum		values[11];
	bool		nulls[11];
	Datum		args[2];
	int64		waiting;
	TimestampTz oldest;
	TimestampTz now = GetCurrentTimestamp();
	StringInfoData why;
	int			i;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "durable: return type must be a row type");

	args[0] = TimestampTzGetDatum(now);
	args[1] = Int32GetDatum(durable_inbox_max_attempts);
	SPI_connect();
	durable_exec(durable_plan(&plan,
							  "SELECT open.pending, open.leased,"
							  " (SELECT pg_catalog.count(*) FROM ONLY durable.inbox"
							  "   WHERE finished_at IS NOT NULL AND done_at IS NULL),"
							  " (SELECT pg_catalog.count(*) FROM ONLY durable.outbox WHERE state = 'pending'),"
							  " (SELECT pg_catalog.count(*) FROM ONLY durable.outbox WHERE state = 'sending'),"
							  " (SELECT pg_catalog.count(*) FROM ONLY durable.outbox WHERE state = 'failed'),"
							  " (SELECT pg_catalog.count(*) FROM ONLY durable.outbox WHERE state = 'dead'),"
							  " (SELECT pg_catalog.count(*) FROM ONLY durable.outbox WHERE state = 'unknown'),"
							  " LEAST(open.oldest, sends.oldest), open.due + sends.due"
							  " FROM (SELECT pg_catalog.count(*) FILTER (WHERE i.state = 'pending'),"
							  "              pg_catalog.count(*) FILTER (WHERE i.state = 'leased'),"
							  "              pg_catalog.count(*) FILTER (WHERE " STANDING_INBOX_DUE "),"
							  "              pg_catalog.min(CASE i.state WHEN 'pending'"
							  "                             THEN GREATEST(i.created_at, i.not_before)"
							  "                             ELSE i.lease_until END)"
							  "                FILTER (WHERE " STANDING_INBOX_DUE ")"
							  "         FROM ONLY durable.inbox i WHERE " INBOX_OPEN_SCAN("i") ")"
							  "      AS open(pending, leased, due, oldest),"
							  "      (SELECT pg_catalog.count(*), pg_catalog.min(GREATEST(o.created_at, o.not_before))"
							  "         FROM ONLY durable.outbox o"
							  "        WHERE o.state = ANY (ARRAY['pending', 'failed']::pg_catalog.text[])"
							  "          AND o.not_before <= $1)"
							  "      AS sends(due, oldest)",
							  2, types),
				 args, NULL, SPI_OK_SELECT, 1);

	memset(nulls, 0, sizeof(nulls));
	for (i = 0; i < 8; i++)
		values[i] = durable_col(0, i + 1);
	nulls[8] = durable_col_isnull(0, 9);
	oldest = nulls[8] ? 0 : DatumGetTimestampTz(durable_col(0, 9));
	values[8] = TimestampTzGetDatum(oldest);
	waiting = DatumGetInt64(durable_col(0, 10));
	SPI_finish();

	initStringInfo(&why);
	if (waiting > durable_bound_count)
		appendStringInfo(&why, INT64_FORMAT " waiting records exceed durable.bound_count (%d)",
						 waiting, durable_bound_count);
	if (!nulls[8] && now - oldest > (int64) durable_bound_age_s * USECS_PER_SEC)
		appendStringInfo(&why, "%sthe oldest waiting record has waited %lld s, over durable.bound_age (%d s)",
						 why.len > 0 ? "; " : "",
						 (long long) ((now - oldest) / USECS_PER_SEC), durable_bound_age_s);
	values[9] = BoolGetDatum(why.len > 0);
	nulls[10] = (why.len == 0);
	values[10] = nulls[10] ? (Datum) 0 : CStringGetTextDatum(why.data);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
