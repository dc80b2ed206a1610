/*-------------------------------------------------------------------------
 *
 * isolate.h
 *		Keeping the records that fail from holding back the others:
 *		subtransactions, the search for the records that fail, and the
 *		lists of records a process passes over afterwards.  Used by the
 *		sweep's lease recovery, retention purge and drop of idle rate-limit
 *		buckets.
 *
 * IDENTIFICATION
 *	  src/isolate.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_ISOLATE_H
#define DURABLE_ISOLATE_H

#include "durable.h"

/* ---- Subtransactions ---- */

/*
 * Run fn(arg) in a subtransaction: NULL when it succeeded, else its error
 * (rolled back; the caller frees it).  An error that cannot be about the
 * rows fn worked on (durable_error_is_global) is thrown on after the
 * rollback instead of returned.
 */
extern ErrorData *durable_try(void (*fn) (void *), void *arg);

/*
 * Whether an error concerns the whole transaction rather than a row: this
 * backend's cancel, a write in a read-only transaction, a serialization
 * failure under REPEATABLE READ or SERIALIZABLE (the caller must retry its
 * transaction).  Passing over rows one by one cannot get around those.
 */
extern bool durable_error_is_global(const ErrorData *edata);

/*
 * Whether an error may well not come again: a deadlock, a lock not
 * available, a serialization failure (raised by a trigger, say).
 */
extern bool durable_error_is_momentary(const ErrorData *edata);

/* ---- Finding the records that fail ---- */

/* Does the work on the records of keys[0..nkeys); raises when one fails. */
typedef void (*DurableApplyKeys) (void *arg, const Datum *keys, int nkeys);

/*
 * The record of `key`, whose order value (lease expiry, finish time) is
 * `order`, failed alone with edata, which the callee now owns.
 */
typedef void (*DurableKeyFailed) (void *arg, Datum key, TimestampTz order, ErrorData *edata);

/*
 * After a statement over a set of records failed: do its work on halves of
 * the candidates, each in a subtransaction (durable_try), halving again the
 * halves that fail (small ones are tried one record at a time), until the
 * records that fail alone are found; `failed` is called for each of them,
 * in the candidates' order.  The candidates are the rows of SPI_tuptable,
 * key in column 1 and order value (timestamptz) in column 2, oldest first;
 * the tuptable is freed.  Errors about the transaction are thrown on.
 */
extern void durable_try_halves(DurableApplyKeys apply, DurableKeyFailed failed, void *arg);

/*
 * Do apply's work on keys[0..nkeys) (order values in orders) in one
 * subtransaction; when that fails, find the keys that fail alone as
 * durable_try_halves does.
 */
extern void durable_try_keys(DurableApplyKeys apply, DurableKeyFailed failed, void *arg,
							 Datum *keys, TimestampTz *orders, int nkeys);

/* ---- Records a process passes over ---- */

/*
 * The records whose work failed in this process lately, which its batches
 * leave out until retry_at: up to `max` keys one by one, and past them a
 * mark, the order value (lease expiry, finish time) of the newest failure,
 * up to which the batches leave out every record (older records that could
 * be done wait for the retry with the failures; without the mark, a pass
 * would meet `max` unremembered failures first, every time, and never
 * reach the others).  Keys and the list live in TopMemoryContext.
 *
 * A failure is remembered with the (sub)transaction that met it, and
 * forgotten when that rolls back (or is prepared, and may yet roll back): the failure may have been the rolled-back
 * work's own (a trigger created in it, a row it changed), and the session
 * that ran it would otherwise pass the record over, 10 minutes for a
 * purge.  Failures are appended in their subtransactions' order, so a
 * transaction's own are the list's last ones.
 */
typedef struct DurableSkipList
{
	Oid			key_type;		/* INT8OID or TEXTOID */
	int16		key_len;		/* the type's, read at the first failure (the */
	bool		key_byval;		/* abort callbacks must not read the catalog) */
	int			max;			/* keys remembered one by one at most */
	int			retry_ms;		/* from the first failure to the retry */
	Datum	   *keys;			/* NULL: none remembered */
	SubTransactionId *subids;	/* each key's (sub)transaction, while it is
								 * open; InvalidSubTransactionId once it
								 * committed */
	int			nkeys;
	TimestampTz mark;			/* DT_NOBEGIN: none */
	SubTransactionId mark_subid;	/* the mark's (sub)transaction, as subids */
	int64		retry_at;		/* durable_clock_us() when all are tried again */
	Oid			journal;		/* the journal whose records the keys name */
	bool		dropped;		/* a rollback made it forget failures */
	bool		registered;		/* known to the transaction callbacks */
} DurableSkipList;

#define DURABLE_SKIP_LIST(type, max_keys, retry) \
	{.key_type = (type), .max = (max_keys), .retry_ms = (retry), .mark = DT_NOBEGIN}

/*
 * Pass over the record of `key`, whose order value is `order`; records are
 * remembered in their order, oldest first, so a key past `max` is the
 * newest failure.
 */
extern void durable_skip_remember(DurableSkipList *list, Datum key, TimestampTz order);

/*
 * Forget the list once its retry time has come: all are tried again; or at
 * once when it was filled for another journal than `journal` (the extension
 * dropped and created again: the same ids name other records).  Called
 * before each pass over the journal.  True when it forgot failures, or a
 * rollback did since the last call: records passed over are due again.
 */
extern bool durable_skip_forget_due(DurableSkipList *list, Oid journal);

/*
 * Keep edata as *first when no failure was kept yet, else free it: a call
 * that passes over failed records reports the first one's error and a count.
 */
extern void durable_keep_first_error(ErrorData **first, ErrorData *edata);

/* Whether the list leaves any record out. */
static inline bool
durable_skip_any(const DurableSkipList *list)
{
	return list->keys != NULL;
}

/* The keys as an array datum (int8[] or text[]), in the current memory context. */
extern Datum durable_skip_array(const DurableSkipList *list);

/*
 * Where the records not passed over by the mark begin (order values at or
 * after it): DT_NOBEGIN when there is no mark, so that a batch's
 * "order >= from" leaves nothing out, -infinity included.
 */
extern TimestampTz durable_skip_from(const DurableSkipList *list);

/* keys[0..nkeys) of type key_type as an array datum, in the current memory context. */
extern Datum durable_key_array(const Datum *keys, int nkeys, Oid key_type);

#endif							/* DURABLE_ISOLATE_H */
