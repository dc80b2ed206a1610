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
 * So before its first token, each server start lifts the sequence of
 * each database to the wall clock in microseconds, when the clock is
 * ahead.  Between the first tokens of two starts, the tokens handed out
 * number fewer than the microseconds between them (one per microsecond,
 * sustained, is far beyond any server), so every token of a start is above
 * every token of the starts before it, even if the clock was set back by
 * less than the earlier start's uptime; a sequence ahead of the clock is
 * left as it is, with a LOG line.  A crash restart starts shared memory
 * anew; a standby's shared memory survives its promotion, but no token can
 * be taken before it, so the first one after it lifts.  The lift is keyed
 * by the sequence's OID: a durable dropped and created again, or restored
 * with pg_restore --clean, gets a new sequence, lifted too.  Without shared
 * memory (durable not preloaded), every backend lifts it before its first
 * token: the same floor, looked at more often.
 *
 * IDENTIFICATION
 *	  src/token.c
 *
 *-------------------------------------------------------------------------
 */
#include "shmem.h"

#include "commands/sequence.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/fmgrprotos.h"

/* The sequence this backend lifted, or saw lifted, since the server started. */
static Oid	token_lifted_seq = InvalidOid;

/*
 * Move durable.token_seq up to the wall clock, never down.  One backend at
 * a time (a lock that nextval's does not conflict with): two lifts whose
 * clock readings and setvals crossed would move it down.  The value taken
 * to compare is a token like any other (a gap in the tokens is harmless);
 * a token another backend takes between it and the setval is below the
 * clock, so the lift stays above it too.
 */
static void
token_lift(Oid token_seq)
{
	int64		last;
	int64		clock_us;

	last = nextval_internal(token_seq, true);
	clock_us = GetCurrentTimestamp();
	if (clock_us > last)
		DirectFunctionCall2(setval_oid, ObjectIdGetDatum(token_seq), Int64GetDatum(clock_us));
	else
		ereport(LOG,
				(errmsg("durable: fencing tokens are ahead of the clock (" INT64_FORMAT " > " INT64_FORMAT "), not lifted",
						last, clock_us),
				 errdetail("A token handed out before a crash and lost with it could be handed out again until the clock passes the tokens.")));
}

/* Whether the slot says token_seq was lifted since the server started. */
static bool
token_slot_lifted(DurableDbSlot *slot, Oid token_seq)
{
	return slot != NULL && pg_atomic_read_u32(&slot->tokens_lifted_seq) == token_seq;
}

/*
 * Record the lift in the slot, unless the launcher gave the slot to another
 * database since it was looked up (a reassignment resets it, under the
 * exclusive lock).
 */
static void
token_slot_mark(DurableDbSlot *slot, Oid token_seq)
{
	LWLockAcquire(durable_shared->lock, LW_SHARED);
	if (slot->dboid == MyDatabaseId)
		pg_atomic_write_u32(&slot->tokens_lifted_seq, token_seq);
	LWLockRelease(durable_shared->lock);
}

void
durable_token_fence(Oid token_seq)
{
	DurableDbSlot *slot;

	if (likely(token_lifted_seq == token_seq))
		return;
	/*
	 * nextval() would refuse, but a standby refuses the lock first, with
	 * 55000 where every write of durable's says 25006 (found by review).
	 */
	PreventCommandIfReadOnly("nextval()");
	slot = durable_my_slot();
	if (!token_slot_lifted(slot, token_seq))
	{
		LockRelationOid(token_seq, ShareUpdateExclusiveLock);
		if (!token_slot_lifted(slot, token_seq))
		{
			token_lift(token_seq);
			/* (a rollback would take a lift made in new storage back with it: made again) */
			if (durable_storage_is_new(token_seq))
			{
				UnlockRelationOid(token_seq, ShareUpdateExclusiveLock);
				return;
			}
			if (slot != NULL)
				token_slot_mark(slot, token_seq);
		}
		UnlockRelationOid(token_seq, ShareUpdateExclusiveLock);
	}
	token_lifted_seq = token_seq;
}
