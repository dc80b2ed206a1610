/*-------------------------------------------------------------------------
 *
 * instance.c
 *		instance_start(): a booting replica recovers the leases of its dead
 *		incarnation.
 *
 * An instance id is stable across a replica's restarts and unique among
 * the replicas running at once, so a lease still held under the id when the
 * replica boots belongs to a process that no longer exists.  Waiting for
 * such a lease to expire would only delay the work, so instance_start moves
 * it at once, exactly as the sweep moves an expired lease: inbox records go
 * back to pending (or to dead after their last attempt), outbox sends
 * become unknown, since the dead process may or may not have reached the
 * provider.  The statements are the sweep's (recovery.c), with "held by this
 * instance" in place of "expired", and are fenced the same way: a record
 * that another caller holds locked or changed meanwhile is left alone.
 * Those are usually gone by the next statement (a takeover that commits),
 * but one may stay locked: the dead process's own backend, not yet found
 * gone, inside a handler transaction that holds the record — FOR SHARE for
 * a fenced outbox_enqueue or outbox_begin, by the derived key's counter
 * update, or by a confirmation or heartbeat not yet committed.  Its lease
 * must not move while that transaction may still commit, and waiting for it
 * could hold a booting replica for as long as the server takes to notice
 * the dead connection; so the call counts the leases it left and says so
 * in a WARNING (the sweep recovers them once they are free and expired).
 * A lease the old backend has not yet committed is seen by neither.
 *
 * IDENTIFICATION
 *	  src/instance.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "sweep.h"

PG_FUNCTION_INFO_V1(durable_instance_start);

/* Leases still held under the instance once its recovery has run. */
static void
instance_warn_left(Datum instance)
{
	static SPIPlanPtr left_plan = NULL;
	Oid			types[2] = {TEXTOID, TIMESTAMPTZOID};
	Datum		values[2] = {instance, TimestampTzGetDatum(GetCurrentTimestamp())};
	int64		inbox_left;
	int64		outbox_left;
	int64		expired;

	durable_exec(durable_plan(&left_plan,
							  "SELECT i.n, o.n, i.expired + o.expired FROM"
							  " (SELECT pg_catalog.count(*) AS n,"
							  "         pg_catalog.count(*) FILTER (WHERE c.lease_until < $2) AS expired"
							  "    FROM ONLY durable.inbox c"
							  "   WHERE " INBOX_OPEN_SCAN("c")
							  "     AND c.state = 'leased' AND c.owner = $1) i,"
							  " (SELECT pg_catalog.count(*) AS n,"
							  "         pg_catalog.count(*) FILTER (WHERE c.lease_until < $2) AS expired"
							  "    FROM ONLY durable.outbox c"
							  "   WHERE c.state = 'sending' AND c.owner = $1) o",
							  2, types),
				 values, NULL, SPI_OK_SELECT, 1);
	inbox_left = durable_col_int64(0, 1);
	outbox_left = durable_col_int64(0, 2);
	expired = durable_col_int64(0, 3);
	if (inbox_left + outbox_left == 0)
		return;

	/*
	 * A lease that has run out may be locked by a sweep or another replica's
	 * claim taking it over, which needs nothing from the caller: say so,
	 * rather than send the operator after a previous process that is gone.
	 */
	ereport(WARNING,
			(errmsg("instance_start left %lld lease%s of instance \"%s\" that another transaction holds",
					(long long) (inbox_left + outbox_left), inbox_left + outbox_left == 1 ? "" : "s",
					TextDatumGetCString(instance)),
			 expired == 0 ?
			 errdetail("%lld inbox record%s leased, %lld send%s sending.",
					   (long long) inbox_left, inbox_left == 1 ? "" : "s",
					   (long long) outbox_left, outbox_left == 1 ? "" : "s") :
			 errdetail("%lld inbox record%s leased, %lld send%s sending; %lld of these leases %s run out, "
					   "and a sweep or another replica may be what holds %s, taking %s over.",
					   (long long) inbox_left, inbox_left == 1 ? "" : "s",
					   (long long) outbox_left, outbox_left == 1 ? "" : "s",
					   (long long) expired, expired == 1 ? "has" : "have",
					   expired == 1 ? "it" : "them", expired == 1 ? "it" : "them"),
			 errhint("Another transaction holds them locked: the previous process's, if the server has not yet found its connection gone "
					 "(pg_stat_activity: idle in transaction). End that backend with pg_terminate_backend() before this process claims or begins anything, "
					 "then call instance_start again; otherwise the sweep recovers them when their leases expire.")));
}

/*
 * instance_start(instance) -> (inbox_recovered, outbox_ambiguous)
 *
 * inbox_recovered counts the records whose lease was recovered, whether they
 * went back to pending or, out of attempts, to dead.  Every lease of the
 * instance is recovered in this call (no batch limit: a replica holds as
 * many leases as it claimed).
 */
Datum
durable_instance_start(PG_FUNCTION_ARGS)
{
	Datum		instance = durable_arg_id(fcinfo, 0, "instance");
	TimestampTz now = GetCurrentTimestamp();
	Datum		values[2];
	bool		nulls[2] = {false, false};
	int			inbox_recovered;
	int			outbox_ambiguous;

	durable_srf_init(fcinfo);
	SPI_connect();
	/* A client call like the others: only the sweep's statements fire the journals' triggers. */
	durable_journal_check_writable(DQ_INBOX, TRIGGER_TYPE_UPDATE);
	durable_journal_check_writable(DQ_OUTBOX, TRIGGER_TYPE_UPDATE);
	inbox_recovered = durable_recover_instance_inbox(now, instance);
	outbox_ambiguous = durable_recover_instance_outbox(now, instance);
	instance_warn_left(instance);
	DURABLE_FAIL_POINT("instance_start");
	SPI_finish();

	values[0] = Int32GetDatum(inbox_recovered);
	values[1] = Int32GetDatum(outbox_ambiguous);
	durable_srf_put(fcinfo, values, nulls);
	return (Datum) 0;
}
