/*-------------------------------------------------------------------------
 *
 * metrics.c
 *		Observing: event counters in shared memory (metrics(),
 *		metrics_reset()) and gauges read from the journals (standing()).
 *
 * Counters are per database and live in the database's shared-memory slot
 * (shmem.h), so an event is counted the moment it happens, even when the
 * caller's transaction later rolls back: a rejected stale confirmation must
 * show up although the error aborts its transaction.
 *
 * IDENTIFICATION
 *	  src/metrics.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "shmem.h"

PG_FUNCTION_INFO_V1(durable_metrics);
PG_FUNCTION_INFO_V1(durable_metrics_reset);
PG_FUNCTION_INFO_V1(durable_standing);

void
durable_count(DurableCounter counter, int64 n)
{
	DurableDbSlot *slot = durable_my_slot();

	if (slot != NULL)
		pg_atomic_fetch_add_u64(&slot->counters[counter], (uint64) n);
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
				 errdetail("durable tracks at most %d databases.", DURABLE_MAX_DATABASES)));
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
 * for all of their figures), the dead ones (inbox_dead_idx), the outbox's
 * by state.  "Waiting" means due work that nobody holds yet: inbox pending
 * plus outbox pending and failed whose not_before has come.  A record
 * deferred to later (outbox_enqueue's not_before, a retry's delay) is not
 * waiting for anyone until then, and waits from its due time on: else a
 * reminder scheduled for tomorrow would hold the journal over bound_age
 * all day.  The state counts still count every record in the state.
 */
Datum
durable_standing(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[1] = {TIMESTAMPTZOID};
	TupleDesc	tupdesc;
	Datum		values[11];
	bool		nulls[11];
	Datum		now_arg[1];
	int64		waiting;
	TimestampTz oldest;
	TimestampTz now = GetCurrentTimestamp();
	StringInfoData why;
	int			i;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "durable: return type must be a row type");

	now_arg[0] = TimestampTzGetDatum(now);
	SPI_connect();
	durable_exec(durable_plan(&plan,
							  "SELECT open.pending, open.leased,"
							  " (SELECT pg_catalog.count(*) FROM durable.inbox"
							  "   WHERE finished_at IS NOT NULL AND done_at IS NULL AND state = 'dead'),"
							  " (SELECT pg_catalog.count(*) FROM durable.outbox WHERE state = 'pending'),"
							  " (SELECT pg_catalog.count(*) FROM durable.outbox WHERE state = 'sending'),"
							  " (SELECT pg_catalog.count(*) FROM durable.outbox WHERE state = 'failed'),"
							  " (SELECT pg_catalog.count(*) FROM durable.outbox WHERE state = 'dead'),"
							  " (SELECT pg_catalog.count(*) FROM durable.outbox WHERE state = 'unknown'),"
							  " LEAST(open.oldest, sends.oldest), open.due + sends.due"
							  " FROM (SELECT pg_catalog.count(*) FILTER (WHERE i.state = 'pending'),"
							  "              pg_catalog.count(*) FILTER (WHERE i.state = 'leased'),"
							  "              pg_catalog.count(*) FILTER (WHERE i.state = 'pending' AND i.not_before <= $1),"
							  "              pg_catalog.min(GREATEST(i.created_at, i.not_before))"
							  "                FILTER (WHERE i.state = 'pending' AND i.not_before <= $1)"
							  "         FROM durable.inbox i WHERE " INBOX_OPEN_SCAN("i") ")"
							  "      AS open(pending, leased, due, oldest),"
							  "      (SELECT pg_catalog.count(*), pg_catalog.min(GREATEST(o.created_at, o.not_before))"
							  "         FROM durable.outbox o"
							  "        WHERE o.state = ANY (ARRAY['pending', 'failed']::pg_catalog.text[])"
							  "          AND o.not_before <= $1)"
							  "      AS sends(due, oldest)",
							  1, types),
				 now_arg, NULL, SPI_OK_SELECT, 1);

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
