/*-------------------------------------------------------------------------
 *
 * token.c
 *		Fencing tokens that stay above every token handed out before a crash.
 *
 * Tokens come from durable.token_seq.  A sequence writes its WAL ahead of
 * the values it hands out, but that WAL is flushed only with a commit that
 * waits for it (or by the WAL writer): a crash loses the values handed out
 * since the last flushed record, and the sequence hands them out again.  A
 * client may hold such a token all the same: from a claim whose commit was
 * asynchronous (synchronous_commit = off) and lost, from a claim in a
 * transaction that never committed, or from a primary whose last commits
 * never reached the standby promoted in its place.  Handed out again for
 * the same record to another replica, it would fence nothing: the old
 * holder's confirmation would pass.
 *
 * So before its first token, each server start (crash restarts and
 * promotions included: shared memory starts anew) lifts the sequence of
 * each database to the wall clock in microseconds, when the clock is
 * ahead.  Between two starts the tokens handed out number fewer than the
 * microseconds between them (one per microsecond, sustained, is far beyond
 * any server), so every token of a start is above every token of the starts
 * before it, even if the clock was set back by less than the earlier
 * start's uptime.  Without shared memory (durable not preloaded), every
 * backend lifts it before its first token: the same floor, looked at more
 * often.
 *
 * IDENTIFICATION
 *	  src/token.c
 *
 *-------------------------------------------------------------------------
 */
#include "shmem.h"

#include "commands/sequence.h"
#include "utils/fmgrprotos.h"

/* This backend lifted the sequence, or saw it lifted, since the server started. */
static bool token_lifted = false;

/*
 * Move durable.token_seq up to the wall clock, never down.  The value
 * taken to compare is a token like any other (a gap in the tokens is
 * harmless); a token handed out by another backend between that value and
 * the lift is below the clock, so the lift stays above it too.
 */
static void
token_lift(Oid token_seq)
{
	int64		last = nextval_internal(token_seq, true);
	int64		clock_us = GetCurrentTimestamp();

	if (clock_us > last)
		DirectFunctionCall2(setval_oid, ObjectIdGetDatum(token_seq), Int64GetDatum(clock_us));
}

void
durable_token_fence(void)
{
	DurableDbSlot *slot;

	if (likely(token_lifted))
		return;
	slot = durable_shmem_available() ? durable_my_slot() : NULL;
	if (slot != NULL && pg_atomic_read_u32(&slot->tokens_lifted) != 0)
	{
		token_lifted = true;
		return;
	}
	token_lift(durable_token_seq());
	if (slot != NULL)
		pg_atomic_write_u32(&slot->tokens_lifted, 1);
	token_lifted = true;
}
