/*-------------------------------------------------------------------------
 *
 * waiting.c
 *		Claims that wait in the server: claimers sleep on a condition
 *		variable of their database's slot, and a transaction that admitted or
 *		enqueued work broadcasts on it right after it commits.
 *
 * The broadcast happens in an XACT_EVENT_COMMIT callback, which runs after
 * the commit is visible to other snapshots, so a woken claimer's next
 * attempt sees the new record.  A claimer prepares to sleep *before* each
 * attempt; a broadcast that lands between the attempt and the sleep makes
 * the sleep return at once, so no wake-up is lost.  Work that becomes due
 * by time (a deferral or a backoff ending, a lease expiring) is not
 * broadcast: the claimer bounds its sleep by the next due time it found.
 *
 * Without shared_preload_libraries there are no condition variables; a
 * waiting claim then re-checks every 100 ms (documented in the README).
 *
 * IDENTIFICATION
 *	  src/waiting.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/wait_event.h"

#include "shmem.h"

/* Re-check interval of a waiting claim without shared memory. */
#define WAITING_POLL_MS 100

static bool waiting_wake_pending[DQ_NUM_QUEUES];
static bool waiting_callback_registered = false;
static bool waiting_prepared = false;

static void
waiting_xact_callback(XactEvent event, void *arg)
{
	int			q;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			{
				DurableDbSlot *slot = durable_my_slot();

				for (q = 0; q < DQ_NUM_QUEUES; q++)
				{
					if (waiting_wake_pending[q] && slot != NULL)
						ConditionVariableBroadcast(&slot->queue_cv[q]);
					waiting_wake_pending[q] = false;
				}
				break;
			}
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			for (q = 0; q < DQ_NUM_QUEUES; q++)
				waiting_wake_pending[q] = false;
			break;
		default:
			break;
	}
}

void
durable_wake_at_commit(DurableQueue queue)
{
	if (!durable_shmem_available())
		return;
	if (!waiting_callback_registered)
	{
		RegisterXactCallback(waiting_xact_callback, NULL);
		waiting_callback_registered = true;
	}
	waiting_wake_pending[queue] = true;
}

void
durable_wait_prepare(DurableQueue queue)
{
	DurableDbSlot *slot = durable_my_slot();

	if (slot == NULL)
		return;
	ConditionVariablePrepareToSleep(&slot->queue_cv[queue]);
	waiting_prepared = true;
}

bool
durable_wait_sleep(DurableQueue queue, TimestampTz deadline, TimestampTz next_due)
{
	DurableDbSlot *slot = durable_my_slot();
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz until = deadline;
	long		timeout_ms;

	if (now >= deadline)
		return false;
	if (next_due != 0 && next_due < until)
		until = next_due;
	/* Round up, so that we wake after the due time rather than just before it. */
	timeout_ms = (long) ((until - now + 999) / 1000);
	if (timeout_ms < 1)
		timeout_ms = 1;

	if (slot != NULL)
		(void) ConditionVariableTimedSleep(&slot->queue_cv[queue], timeout_ms,
										   PG_WAIT_EXTENSION);
	else
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(timeout_ms, WAITING_POLL_MS), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	CHECK_FOR_INTERRUPTS();
	return true;
}

void
durable_wait_done(void)
{
	if (waiting_prepared)
	{
		ConditionVariableCancelSleep();
		waiting_prepared = false;
	}
}
