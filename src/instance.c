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
 *
 * IDENTIFICATION
 *	  src/instance.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "sweep.h"

PG_FUNCTION_INFO_V1(durable_instance_start);

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
	inbox_recovered = durable_recover_instance_inbox(now, instance);
	outbox_ambiguous = durable_recover_instance_outbox(now, instance);
	DURABLE_FAIL_POINT("instance_start");
	SPI_finish();

	values[0] = Int32GetDatum(inbox_recovered);
	values[1] = Int32GetDatum(outbox_ambiguous);
	durable_srf_put(fcinfo, values, nulls);
	return (Datum) 0;
}
