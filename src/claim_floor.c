/*-------------------------------------------------------------------------
 *
 * claim_floor.c
 *		Where each queue's claimable records begin, shared by the claimers
 *		of a database: the inbox's and the outbox's.
 *
 * An inbox claim scans inbox_unfinished_idx in id order from its head, an
 * outbox claim outbox_waiting_idx.  Behind a long transaction (a report,
 * pg_dump, a standby with hot_standby_feedback) the entries of records
 * claimed or finished since it began can be neither vacuumed nor marked
 * dead, and every claim walked all of them: the queue path fell to a
 * quarter of its speed within a minute of holding one transaction open, a
 * sender loop (outbox_enqueue, outbox_claim, outbox_sent) to 0.23 of it.
 * The claim floor is an id below which no record is claimable now; claims
 * start their scan there.  Each queue has its own (DurableFloor).
 *
 * The floor never hides a claimable record:
 *  - it is advanced (at most every FLOOR_REFRESH_MS, by one claimer at a
 *    time) by a scan with a dirty snapshot, which stops at the first record
 *    that is due now or is being written by a transaction in progress (an
 *    admit or a completion not yet committed; the refresher's own
 *    transaction included, whose changes a dirty snapshot shows as done,
 *    even a record it took out of the index);
 *  - records the scan passed over (held under a lease, or pending with a
 *    future not_before) come due by the clock: from the earliest of those
 *    times, claims scan from the first record passed over instead;
 *  - a record due by the clock is passed over while an older record of its
 *    chat is unfinished (a send: pending, sending or failed) and no
 *    transaction is writing it: it becomes claimable when that record
 *    finishes.  Completions watch for that (held_watch, published before the
 *    probe that allows the pass; each completion reads it after its update):
 *    inbox_complete and outbox_sent note the chat's next record as freed:
 *    claims look at the freed records before they scan from the floor, until
 *    they find one taken or finished, or a refresh that began after it was
 *    noted looked at it (with too many noted, the completion lowers the
 *    floor instead); a send dead, discarded or flagged unknown lowers the
 *    floor (durable_claim_floor_finished), and inbox_fail and recovery lower
 *    it anyway.  Such passes last FLOOR_HELD_MS after the refresh that last
 *    looked at them all (a refresh from above them does not renew them);
 *    then claims scan from the first of them;
 *  - a heartbeat that shortens a lease below the floor brings that time
 *    forward;
 *  - every transition that makes a record claimable out of the clock's order
 *    lowers the floor to that record: release, fail, replay, recovery,
 *    outbox_retry, and an admit or enqueue whose id lies below the floor (an
 *    insert draws its id before it inserts its index entries, and may do so
 *    while a refresh scans); outbox_failed brings the due time of its send
 *    forward, as a heartbeat does;
 *  - an insert compares its id with the floor after inserting, and a refresh
 *    publishes the floor it is about to set before a second scan of the
 *    range it passed: one of the two sees the other (both sides order their
 *    write before their read with a memory barrier);
 *  - every FLOOR_MAX_AGE_MS the floor is recomputed from the head.
 * Changes made to the journals by hand (an UPDATE of lease_until or
 * not_before) are not seen by the floor until then; durable.claim_floor =
 * off makes a session's claims scan from the head.  Without shared memory
 * (durable not preloaded) claims scan from the head.
 *
 * IDENTIFICATION
 *	  src/claim_floor.c
 *
 *-------------------------------------------------------------------------
 */
#include "shmem.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/multixact.h"
#include "access/htup_details.h"
#include "access/itup.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/ipc.h"
#include "executor/tuptable.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

/* A claimer refreshes the floor at most this often (per database). */
#define FLOOR_REFRESH_MS	10
/* The floor is recomputed from the head at least this often. */
#define FLOOR_MAX_AGE_MS	5000
/* A refresher that has not finished after this long is presumed gone. */
#define FLOOR_REFRESH_TIMEOUT_MS 10000
/* One floor scan examines at most this many records. */
#define FLOOR_SCAN_LIMIT	10000
/*
 * Records passed over as held by their chat stay passed over for at most
 * this long after the refresh that last looked at them all began (longer
 * than FLOOR_MAX_AGE_MS: the recompute from the head renews it), and
 * completions look for records held behind theirs as long.
 */
#define FLOOR_HELD_MS		15000
/*
 * Completions watch this much longer than claims pass held records: a claim
 * reads the clock before it takes its snapshot, and a completion that found
 * the watch over just before that snapshot would otherwise go unseen by it.
 */
#define FLOOR_HELD_WATCH_MARGIN_MS 1000
/* A held record's probe reads at most this many older entries of its chat. */
#define FLOOR_HELD_PROBE_LIMIT 16

/* What one floor scan found. */
typedef struct FloorScan
{
	int64		needed;			/* first record a claim must see */
	int64		first_skipped;	/* first record passed over (needed: none) */
	TimestampTz due;			/* earliest time one passed over comes due (0: none) */
	int64		held_first;		/* first record passed over as held by its chat (0: none) */
} FloorScan;

/*
 * A refresh's probes of the chats of due records (floor_chat_holds),
 * across its scans: the per-chat index, opened at the first probe, and when
 * the refresh told completions to watch (0: not yet).
 */
typedef struct FloorHeld
{
	DurableFloor *f;
	Relation	index;
	TupleTableSlot *slot;
	int64		watched_from;
	DurableChatSet chats;		/* found held since watched_from */
} FloorHeld;

/*
 * A floor scan reads the queue's journal through the index its claims walk
 * in id order (durable_queue_rels, from direct.c's relations): the inbox's
 * open records, the outbox's waiting sends (pending and failed; a send
 * being sent is claimable again only through outbox_failed or
 * outbox_retry, which lower the floor).
 */
/* Whether this transaction wrote or locked the heap tuple `tuple`. */
static bool
floor_tuple_written_here(HeapTupleHeader tuple)
{
	uint16		infomask = tuple->t_infomask;
	TransactionId xmax = HeapTupleHeaderGetRawXmax(tuple);
	MultiXactMember *members;
	int			nmembers;
	bool		mine = false;

	if (TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(tuple)))
		return true;
	if (infomask & HEAP_XMAX_INVALID)
		return false;
	if (!(infomask & HEAP_XMAX_IS_MULTI))
		return TransactionIdIsCurrentTransactionId(xmax);

	/*
	 * A multixact (a foreign key's FOR KEY SHARE alongside a lease, say): ours
	 * only if one of its members is.  Treating every multixact as ours would
	 * stop the floor at a version another transaction left, for as long as it
	 * is not pruned.
	 */
	if (HEAP_LOCKED_UPGRADED(infomask))
		return false;
	nmembers = GetMultiXactIdMembers(xmax, &members, false, HEAP_XMAX_IS_LOCKED_ONLY(infomask));
	for (int i = 0; i < nmembers && !mine; i++)
		mine = TransactionIdIsCurrentTransactionId(members[i].xid);
	if (nmembers > 0)
		pfree(members);
	return mine;
}

/*
 * Whether the heap tuple in `slot` (just fetched) was written or locked by
 * this transaction.  A dirty snapshot shows this transaction's own changes
 * as if committed: a record that an earlier claim of the same transaction
 * leased looks held, and is pending again if the transaction rolls back.
 */
static bool
floor_written_here(TupleTableSlot *slot)
{
	BufferHeapTupleTableSlot *bslot = (BufferHeapTupleTableSlot *) slot;
	bool		mine;

	Assert(TTS_IS_BUFFERTUPLE(slot));
	LockBuffer(bslot->buffer, BUFFER_LOCK_SHARE);
	mine = floor_tuple_written_here(bslot->base.tuple->t_data);
	LockBuffer(bslot->buffer, BUFFER_LOCK_UNLOCK);
	return mine;
}

/*
 * Whether any version in the HOT chain at `root` was written or locked by
 * this transaction.  For an index entry no version of which a dirty
 * snapshot shows: this transaction may have moved the record out of the
 * index (a completion, or a send's lease, is not a HOT update), and a
 * rollback puts it back.
 */
static bool
floor_chain_written_here(Relation heap, ItemPointer root)
{
	ItemPointerData tid = *root;
	Buffer		buffer = ReadBuffer(heap, ItemPointerGetBlockNumber(&tid));
	HeapTupleData version;
	bool		first = true;
	bool		mine = false;

	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	while (!mine && heap_hot_search_buffer(&tid, heap, buffer, SnapshotAny, &version, NULL, first))
	{
		mine = floor_tuple_written_here(version.t_data);
		first = false;
	}
	UnlockReleaseBuffer(buffer);
	return mine;
}

/* Set `value` to `to` unless it holds more already. */
static void
floor_atomic_raise(pg_atomic_uint64 *value, uint64 to)
{
	uint64		seen = pg_atomic_read_u64(value);

	while (seen < to && !pg_atomic_compare_exchange_u64(value, &seen, to))
		;
}

/* *at becomes the earlier of itself and `due` (0, for either: none). */
static inline void
floor_earlier_due(TimestampTz *at, TimestampTz due)
{
	if (due != 0 && (*at == 0 || due < *at))
		*at = due;
}

/*
 * Whether the live version in `slot`, found through the chat index, is of
 * an unfinished record: finished_at is NULL (the index's predicate, read on
 * the version itself).  The outbox has no finished_at: its chat index holds
 * only unfinished sends (pending, sending, failed) by their state.
 */
static bool
floor_version_unfinished(const DurableQueueRels *rels, TupleTableSlot *slot)
{
	bool		isnull;

	if (rels->finished_at == InvalidAttrNumber)
		return true;
	(void) slot_getattr(slot, rels->finished_at, &isnull);
	return isnull;
}

/*
 * Whether the due record `id`, of chat `chat_id`, waits behind an older
 * unfinished record of its chat that no transaction is changing: no claim
 * can take it before that record finishes.  The chat's index is read
 * backward from the record with a dirty snapshot: the nearest older entry is
 * one of the chat's backlog or its head.  Unsure (an older record being
 * written, by another transaction or by this one, which may roll back; only
 * entries of finished records within FLOOR_HELD_PROBE_LIMIT): false.
 */
static bool
floor_chat_holds(FloorHeld *held, const DurableQueueRels *rels, Relation heap, Datum chat_id,
				 int64 id, bool wrote_here)
{
	SnapshotData dirty;
	ScanKeyData keys[2];
	IndexScanDesc scan;
	int			examined = 0;
	bool		holds = false;

	if (held->index == NULL)
	{
		held->index = durable_index_open(rels->chat_idx, AccessShareLock);
		held->slot = table_slot_create(heap, NULL);
	}
	InitDirtySnapshot(dirty);
	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   held->index->rd_indcollation[0], F_TEXTEQ, chat_id);
	ScanKeyInit(&keys[1], 2, BTLessStrategyNumber, F_INT8LT, Int64GetDatum(id));
	scan = index_beginscan(heap, held->index, &dirty, 2, 0);
	index_rescan(scan, keys, 2, NULL, 0);
	while (examined++ < FLOOR_HELD_PROBE_LIMIT &&
		   index_getnext_tid(scan, BackwardScanDirection) != NULL)
	{
		if (!index_fetch_heap(scan, held->slot))
		{
			if (wrote_here && floor_chain_written_here(heap, &scan->xs_heaptid))
				break;
			continue;
		}
		if (TransactionIdIsValid(dirty.xmin) || TransactionIdIsValid(dirty.xmax) ||
			(wrote_here && floor_written_here(held->slot)))
			break;
		if (floor_version_unfinished(rels, held->slot))
		{
			holds = true;
			break;
		}
	}
	index_endscan(scan);
	return holds;
}

/*
 * Whether the floor may pass over the due waiting record (pending, or a
 * failed send) in `slot` (id `id`): it is held by its chat
 * (floor_chat_holds).  Before the refresh's first such pass, completions
 * are told to watch (held_watch) and the record's chat is probed again: a
 * completion either updated the record that holds it before that probe,
 * which then sees the change, or reads the watch after, and tells the floor
 * itself (durable_claim_floor_held_watched).
 */
static bool
floor_held_passes(FloorHeld *held, const DurableQueueRels *rels, Relation heap,
				  TupleTableSlot *slot, int64 id, bool wrote_here)
{
	bool		isnull;
	Datum		chat_id;
	const char *key;

	if (!OidIsValid(rels->chat_idx))
		return false;
	chat_id = slot_getattr(slot, rels->chat_id, &isnull);
	if (isnull)
		return false;

	/*
	 * A chat found held since the watch began is held by a record older than
	 * every later one of the chat: a completion of that record notes the
	 * chat's next record as freed (or lowers the floor, which discards this
	 * refresh's result), and a claim that takes that record from below the
	 * floor before this refresh ends tells it when the lease ends
	 * (durable_claim_floor_leased).  Within one scan only (floor_refresh
	 * empties the set before the second): that scan starts again below the
	 * records that put a chat here, and one older than them may have become
	 * due since (a send that was being sent, failed with a retry due at
	 * once, which only brings the floor's due time forward).
	 */
	key = durable_chat_set_key(chat_id);
	if (durable_chat_set_has(&held->chats, key))
		return true;
	if (!floor_chat_holds(held, rels, heap, chat_id, id, wrote_here))
		return false;
	if (held->watched_from == 0)
	{
		held->watched_from = durable_clock_us();
		floor_atomic_raise(&held->f->held_watch,
						   (uint64) (held->watched_from +
									 (int64) (FLOOR_HELD_MS + FLOOR_HELD_WATCH_MARGIN_MS) * 1000));
		pg_memory_barrier();
		if (!floor_chat_holds(held, rels, heap, chat_id, id, wrote_here))
			return false;
	}
	if (key != NULL)
		durable_chat_set_add(&held->chats, key);
	return true;
}

/*
 * Scan the claim's index from id `from` (up to `below`, exclusive; 0: no
 * bound) with a dirty snapshot.  A leased inbox record comes due at its
 * lease_until, a pending one (or a failed send) at its not_before.
 */
static void
floor_scan(const DurableQueueRels *rels, int64 from, int64 below, TimestampTz now,
		   FloorHeld *held, FloorScan *out)
{
	Relation	heap;
	Relation	index;
	SnapshotData dirty;
	ScanKeyData key;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	int			examined = 0;
	int64		last = from - 1;
	bool		stopped = false;
	bool		budget_spent = true;
	bool		wrote_here = TransactionIdIsValid(GetTopTransactionIdIfAny());

	out->needed = from;
	out->first_skipped = 0;
	out->due = 0;
	out->held_first = 0;

	heap = table_open(rels->heap, AccessShareLock);
	index = durable_index_open(rels->index, AccessShareLock);
	InitDirtySnapshot(dirty);
	ScanKeyInit(&key, 1, BTGreaterEqualStrategyNumber, F_INT8GE, Int64GetDatum(from));
	scan = index_beginscan(heap, index, &dirty, 1, 0);
	scan->xs_want_itup = true;	/* the id of entries whose record is gone, too */
	index_rescan(scan, &key, 1, NULL, 0);
	slot = table_slot_create(heap, NULL);

	while (examined < FLOOR_SCAN_LIMIT)
	{
		bool		isnull;
		int64		id;
		Datum		state;
		TimestampTz due = 0;
		bool		waiting = false;	/* pending, or a failed send */

		if (index_getnext_tid(scan, ForwardScanDirection) == NULL)
		{
			budget_spent = false;
			break;
		}
		id = DatumGetInt64(index_getattr(scan->xs_itup, 1, scan->xs_itupdesc, &isnull));
		if (below != 0 && id >= below)
		{
			budget_spent = false;
			break;
		}
		examined++;
		last = id;

		/*
		 * Finished (or never committed) for good: an entry vacuum has yet
		 * to remove.  Unless finished by this transaction, which may roll
		 * back.
		 */
		if (!index_fetch_heap(scan, slot))
		{
			if (wrote_here && floor_chain_written_here(heap, &scan->xs_heaptid))
			{
				stopped = true;
				break;
			}
			continue;
		}

		/*
		 * Being written by a transaction in progress, this one included
		 * (only possible once it has an xid): it may become claimable.
		 */
		if (TransactionIdIsValid(dirty.xmin) || TransactionIdIsValid(dirty.xmax) ||
			(wrote_here && floor_written_here(slot)))
		{
			stopped = true;
			break;
		}
		state = slot_getattr(slot, rels->state, &isnull);
		if (!isnull && durable_text_equal_cstring(state, "leased"))
		{
			Datum		d = slot_getattr(slot, rels->lease_until, &isnull);

			if (!isnull)
				due = DatumGetTimestampTz(d);
		}
		else if (!isnull && (durable_text_equal_cstring(state, "pending") ||
							 durable_text_equal_cstring(state, "failed")))
		{
			Datum		d = slot_getattr(slot, rels->not_before, &isnull);

			waiting = true;
			if (!isnull)
				due = DatumGetTimestampTz(d);
		}
		if (due <= now)
		{
			if (waiting && floor_held_passes(held, rels, heap, slot, id, wrote_here))
			{
				if (out->held_first == 0)
					out->held_first = id;
				continue;
			}
			stopped = true;
			break;
		}
		if (out->first_skipped == 0)
			out->first_skipped = id;
		if (out->due == 0 || due < out->due)
			out->due = due;
	}

	/*
	 * Stopped at a record: it is the floor.  Spent the scan's budget: the
	 * records up to the last one examined were passed over.  Ran out of
	 * records: the whole range was (ids are drawn in increasing order; an
	 * admit of a lower id lowers the floor itself).
	 */
	if (stopped)
		out->needed = last;
	else if (budget_spent || below == 0)
		out->needed = last + 1;
	else
		out->needed = below;
	if (out->first_skipped == 0)
		out->first_skipped = out->needed;

	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
}

/*
 * The floor claims use at `now` (durable_clock_us() `clock`): from the first
 * record passed over by the clock once it comes due, and from the first
 * passed over as held once held_until passed.  Caller holds f->mutex.
 */
static int64
floor_effective(DurableFloor *f, TimestampTz now, int64 clock)
{
	int64		by_clock = (f->due != 0 && now >= f->due) ?
		f->fallback : (int64) pg_atomic_read_u64(&f->floor);

	if (f->held_from != 0 && clock >= f->held_until)
		return Min(by_clock, f->held_from);
	return by_clock;
}

/*
 * Publish the floor a refresh is about to set.  Only a refresher presumed
 * gone (FLOOR_REFRESH_TIMEOUT_MS) lets two overlap: the higher of their
 * floors stays published until its own refresher withdraws it, and when
 * that is the one presumed gone, the other's result is discarded
 * (floor_withdraw_mine): its own raise was withdrawn with it.
 */
static void
floor_publish(DurableFloor *f, uint64 raising)
{
	floor_atomic_raise(&f->raising, raising);
}

/* Whether the raise published was `raising` (and is withdrawn now). */
static bool
floor_unpublish(DurableFloor *f, uint64 raising)
{
	uint64		expected = raising;

	return pg_atomic_compare_exchange_u64(&f->raising, &expected, 0);
}

/*
 * The floor this backend's refresh has published (0: none), withdrawn by
 * the refresh when it ends, by durable_claim_floor when it fails, or as the
 * backend exits (floor_end_at_exit): a cancel or a statement_timeout can end
 * its second scan (the index scan checks for interrupts), and a floor left
 * published would make every admit below it bump the generation and throw
 * away concurrent refreshes until a higher one replaced it.
 */
static uint64 floor_published = 0;
static uint64 floor_published_by = 0;	/* the refresh's number (DurableFloor.refreshes) */

/*
 * The refresh this backend runs (NULL: none), ended as the backend exits if
 * it dies in it: its busy mark would otherwise stop every refresh of the
 * floor until FLOOR_REFRESH_TIMEOUT_MS presumed it gone.
 */
static DurableFloor *floor_refreshing_in = NULL;
static uint64 floor_refreshing = 0;

/*
 * Withdraw this backend's published raise from `f`, unless the slot went to
 * another database since, whose refresher may have published the same
 * value.  A refresh presumed gone, withdrawing a raise that stood for a
 * newer refresh's as well (no higher than it), discards that one's result:
 * an admit below its raise would no longer see it.  Caller holds f's mutex,
 * as dshm_slot_reset does to hand it on.
 */
static void
floor_withdraw_mine(DurableFloor *f)
{
	if (floor_published != 0 && f->dboid == MyDatabaseId &&
		floor_unpublish(f, floor_published) && f->refreshes != floor_published_by)
		f->gen++;
	floor_published = 0;
}

/*
 * Refresh number `refresh` of `f`, by this backend, ends (done, or failed:
 * next_refresh 0): no longer busy, and its raise withdrawn -- unless the
 * slot went to another database during the refresh (dshm_slot_reset), whose
 * floor and refresher's marks are not this refresh's to touch.  A refresh
 * presumed gone that ends after another began leaves the busy mark to that
 * one: cleared, it would let a third refresh run beside the second under the
 * same generation, and the third's withdrawal of its raise could leave an
 * admit below the second's raise unseen.  Caller holds f's mutex.
 */
static void
floor_refresh_ended(DurableFloor *f, int64 next_refresh, uint64 refresh)
{
	if (f->dboid == MyDatabaseId && f->refreshes == refresh)
	{
		f->busy_until = 0;
		if (next_refresh != 0)
			f->next_refresh = next_refresh;
	}
	floor_withdraw_mine(f);
}

/*
 * A backend that ends mid-refresh (FATAL: a terminate, a lost client) ends
 * its refresh as a failed one, and withdraws its floor.
 */
static void
floor_end_at_exit(int code, Datum arg)
{
	if (floor_refreshing_in != NULL)
	{
		SpinLockAcquire(&floor_refreshing_in->mutex);
		floor_refresh_ended(floor_refreshing_in, 0, floor_refreshing);
		SpinLockRelease(&floor_refreshing_in->mutex);
		floor_refreshing_in = NULL;
	}
}

static void
floor_register_exit(void)
{
	static bool registered = false;

	if (!registered)
		before_shmem_exit(floor_end_at_exit, (Datum) 0);
	registered = true;
}

/*
 * Publish `raising` as this backend's refresh of `f` (floor_published),
 * unless the floor is no longer the one this refresh began on: lowered
 * since (the refresh's result would not be written), or its slot handed to
 * another database (dshm_slot_reset, under the floor's mutex like this
 * check), whose floor a raise of ours must not hold back.
 */
static bool
floor_publish_mine(DurableFloor *f, uint64 raising, uint64 gen, uint64 refresh)
{
	bool		mine;

	SpinLockAcquire(&f->mutex);
	mine = (f->dboid == MyDatabaseId && f->gen == gen);
	if (mine)
	{
		floor_published = raising;
		floor_published_by = refresh;
		floor_publish(f, raising);
	}
	SpinLockRelease(&f->mutex);
	return mine;
}

/*
 * Note the records a refresh from `from` passed over as held (first:
 * held_first, 0: none), which it may pass until `until`.  A refresh from
 * above the first held record passed over earlier keeps those passed over,
 * without making them last longer: it did not look at them again.  Caller
 * holds f->mutex.
 */
static void
floor_held_set(DurableFloor *f, int64 from, int64 held_first, int64 until)
{
	if (f->held_from != 0 && from > f->held_from)
	{
		if (held_first != 0)
			f->held_until = Min(f->held_until, until);
	}
	else
	{
		f->held_from = held_first;
		f->held_until = (held_first != 0) ? until : 0;
	}
}

/* Forget f's freed record at `i`.  Caller holds f->mutex. */
static void
floor_freed_forget(DurableFloor *f, int i)
{
	int			last = --f->freed.n;

	f->freed.id[i] = f->freed.id[last];
	f->freed.stamp[i] = f->freed.stamp[last];
}

/*
 * A refresh from `from`, begun when `seen` records had been noted freed,
 * looked at each of those from `from` on: one freed since stopped it (or
 * one being written did), and a claim scans from there; one it passed is
 * taken, finished or held again (a completion rolled back).  Those are
 * forgotten; records noted since it began are not.  Caller holds f->mutex.
 */
static void
floor_freed_looked_at(DurableFloor *f, int64 from, uint64 seen)
{
	for (int i = f->freed.n - 1; i >= 0; i--)
		if (f->freed.stamp[i] <= seen && f->freed.id[i] >= from)
			floor_freed_forget(f, i);
}

/* Copy f's freed records below `floor` to *out, ascending.  Caller holds f->mutex. */
static void
floor_freed_copy(const DurableFloor *f, int64 floor, DurableFloorFreed *out)
{
	out->n = 0;
	for (int i = 0; i < f->freed.n; i++)
	{
		int			j;

		if (f->freed.id[i] >= floor)
			continue;
		for (j = out->n; j > 0 && out->id[j - 1] > f->freed.id[i]; j--)
		{
			out->id[j] = out->id[j - 1];
			out->stamp[j] = out->stamp[j - 1];
		}
		out->id[j] = f->freed.id[i];
		out->stamp[j] = f->freed.stamp[i];
		out->n++;
	}
}

/*
 * Refresh the floor `f` of `queue` (this backend is its one refresher): from
 * `from`, or from the head when the journal is not the one the floor was
 * computed for (the extension was dropped and created again).  A journal
 * that is missing or damaged raises the error the claim would raise next.
 * `now` is the wall clock the records' times are
 * compared with, `clock` durable_clock_us() for the refresh's own pacing;
 * `freed_seen`: records noted freed when it began.  Returns whether it
 * scanned from the head.
 */
static bool
floor_refresh(DurableQueue queue, DurableFloor *f, int64 from, Oid relid, uint64 gen,
			  uint64 refresh, uint64 freed_seen, TimestampTz now, int64 clock)
{
	DurableQueueRels rels;
	FloorScan	first = {0, 0, 0, 0};
	FloorScan	again;
	FloorHeld	held = {0};
	MemoryContext cxt;
	MemoryContext caller_cxt;

	durable_queue_rels(queue, &rels);
	if (rels.heap != relid)
		from = 0;
	/* (t/009_claim_floor stalls refreshes here) */
	DURABLE_FAIL_POINT("floor_refresh");
	/* A refresh may probe thousands of chats: what it allocates goes at its end. */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "durable claim floor refresh",
								ALLOCSET_DEFAULT_SIZES);
	caller_cxt = MemoryContextSwitchTo(cxt);
	held.f = f;
	held.chats.cxt = cxt;
	floor_scan(&rels, from, 0, now, &held, &first);
	/* (and between its scans) */
	DURABLE_FAIL_POINT("floor_publish");
	if (first.needed > from && floor_publish_mine(f, (uint64) first.needed, gen, refresh))
	{
		/* Published: look again at what the first scan passed over. */
		pg_memory_barrier();
		durable_chat_set_clear(&held.chats);
		floor_scan(&rels, from, first.needed, now, &held, &again);

		/*
		 * What the second scan passed over counts too, even when it stopped
		 * no lower: a record inserted between the scans and committed, not
		 * yet due, is in it and nowhere else.
		 */
		first.needed = Min(first.needed, again.needed);
		first.first_skipped = Min(first.first_skipped, again.first_skipped);
		if (again.due != 0 && (first.due == 0 || again.due < first.due))
			first.due = again.due;
		if (again.held_first != 0 && (first.held_first == 0 || again.held_first < first.held_first))
			first.held_first = again.held_first;
	}
	if (held.index != NULL)
	{
		ExecDropSingleTupleTableSlot(held.slot);
		index_close(held.index, AccessShareLock);
	}
	MemoryContextSwitchTo(caller_cxt);
	MemoryContextDelete(cxt);
	/* (and once its scans are done) */
	DURABLE_FAIL_POINT("floor_write");

	SpinLockAcquire(&f->mutex);
	if (f->gen == gen)
	{
		pg_atomic_write_u64(&f->floor, (uint64) first.needed);

		/*
		 * A scan from above the first record passed over earlier (the floor
		 * moving on) keeps what the earlier scans passed over; one from
		 * there or below saw all of it again.
		 */
		if (from > f->fallback)
		{
			floor_earlier_due(&f->due, first.due);
		}
		else
		{
			f->fallback = Min(first.first_skipped, first.needed);
			f->due = first.due;
		}
		floor_earlier_due(&f->due, f->late_due);
		f->fallback = Min(f->fallback, f->late_fallback);
		floor_held_set(f, from, first.held_first,
					   held.watched_from + (int64) FLOOR_HELD_MS * 1000);
		floor_freed_looked_at(f, from, freed_seen);
		f->relid = rels.heap;
		if (from == 0)
			f->from_head_at = clock;
	}
	floor_refresh_ended(f, clock + (int64) FLOOR_REFRESH_MS * 1000, refresh);
	SpinLockRelease(&f->mutex);
	return from == 0;
}

/* This database's floor of `queue`, or NULL without shared memory. */
static DurableFloor *
floor_of(DurableQueue queue)
{
	DurableDbSlot *slot = durable_my_slot();

	return slot == NULL ? NULL : &slot->floors[queue];
}

int64
durable_claim_floor(DurableQueue queue, TimestampTz now, DurableFloorFreed *freed)
{
	DurableFloor *f = floor_of(queue);
	int64		clock;
	int64		current;
	int64		from;
	bool		from_head = false;
	Oid			relid;
	uint64		gen;
	uint64		refresh;
	uint64		freed_seen;

	freed->n = 0;
	if (f == NULL || !durable_claim_floor_enabled)
		return 0;
	/*
	 * A journal truncated in this transaction has an index of its own: a
	 * floor learnt from it would hide every other session's records once
	 * the transaction rolls back (found by review).  Scan from the head.
	 */
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
	{
		DurableQueueRels rels;

		durable_queue_rels(queue, &rels);
		if (durable_storage_is_new(rels.heap))
			return 0;
	}

	clock = durable_clock_us();
	SpinLockAcquire(&f->mutex);
	/* Handed to another database since floor_of looked: scan from the head. */
	if (f->dboid != MyDatabaseId)
	{
		SpinLockRelease(&f->mutex);
		return 0;
	}
	current = floor_effective(f, now, clock);
	if (clock < f->next_refresh || clock < f->busy_until)
	{
		floor_freed_copy(f, current, freed);
		SpinLockRelease(&f->mutex);
		return current;
	}
	/*
	 * A refresher presumed gone (busy_until passed) may still be running,
	 * e.g. queued behind a lock: its raise can be withdrawn by ours before
	 * it ends, so its result must not be written.
	 */
	if (f->busy_until != 0)
		f->gen++;
	f->busy_until = clock + (int64) FLOOR_REFRESH_TIMEOUT_MS * 1000;
	f->late_due = 0;
	f->late_fallback = PG_INT64_MAX;
	refresh = ++f->refreshes;
	freed_seen = f->freed_stamps;
	gen = f->gen;
	relid = f->relid;
	from = (clock >= f->from_head_at + (int64) FLOOR_MAX_AGE_MS * 1000) ? 0 : current;
	floor_refreshing_in = f;
	floor_refreshing = refresh;
	SpinLockRelease(&f->mutex);
	/* (not under the spinlock; nothing between can end the backend) */
	floor_register_exit();

	PG_TRY();
	{
		from_head = floor_refresh(queue, f, from, relid, gen, refresh, freed_seen, now, clock);
	}
	PG_CATCH();
	{
		SpinLockAcquire(&f->mutex);
		floor_refresh_ended(f, 0, refresh);
		SpinLockRelease(&f->mutex);
		floor_refreshing_in = NULL;
		PG_RE_THROW();
	}
	PG_END_TRY();
	floor_refreshing_in = NULL;

	/* (the slot may have gone to another database during the refresh) */
	SpinLockAcquire(&f->mutex);
	current = (f->dboid == MyDatabaseId) ? floor_effective(f, now, durable_clock_us()) : 0;
	floor_freed_copy(f, current, freed);
	SpinLockRelease(&f->mutex);
	/*
	 * t/009_claim_floor reads this line: a refresh from the head (the
	 * periodic recompute, a floor of 0, a journal created anew) finds every
	 * claimable record whether the floor was lowered for it or not.
	 */
	elog(DEBUG2, "durable: %s claim floor " INT64_FORMAT "%s", durable_queue_names[queue],
		 current, from_head ? " (from the head)" : "");
	return current;
}

/*
 * The floor as it stands at `now`, without refreshing it, and through
 * *below_due the earliest time a record below it comes due by the clock
 * (0: none).  Once the floor's due time passed, claims scan from the
 * fallback, below which no record comes due by the clock.  The due time may
 * be early (a record passed over since finished or its lease renewed): a
 * waiting claim wakes, finds nothing, and asks again.
 */
int64
durable_claim_floor_known(DurableQueue queue, TimestampTz now, TimestampTz *below_due)
{
	DurableFloor *f = floor_of(queue);
	DurableQueueRels rels;
	int64		floor = 0;

	*below_due = 0;
	if (f == NULL || !durable_claim_floor_enabled)
		return 0;
	durable_queue_rels(queue, &rels);
	SpinLockAcquire(&f->mutex);
	/* (a floor computed for an earlier journal, the extension created anew, is not this one's) */
	if (f->dboid == MyDatabaseId && f->relid == rels.heap)
	{
		floor = floor_effective(f, now, durable_clock_us());
		if (f->due != 0 && now < f->due)
			*below_due = f->due;
	}
	SpinLockRelease(&f->mutex);
	return floor;
}

/* Lower `f` to `id`, discarding the refresh under way; caller holds f->mutex. */
static void
floor_lower_locked(DurableFloor *f, int64 id)
{
	if ((uint64) id < pg_atomic_read_u64(&f->floor))
		pg_atomic_write_u64(&f->floor, (uint64) id);
	f->fallback = Min(f->fallback, id);
	f->gen++;
}

void
durable_claim_floor_lower(DurableQueue queue, int64 id)
{
	DurableFloor *f = floor_of(queue);

	if (f == NULL)
		return;
	SpinLockAcquire(&f->mutex);
	floor_lower_locked(f, id);
	SpinLockRelease(&f->mutex);
}

/*
 * Nothing to do when no refresh is under way (one that began before the
 * caller's update may have passed over `next`; one that begins after sees
 * it) and the floor has not passed `next`.  Otherwise `next` is noted as
 * freed, stamped anew if it was already (a refresh that began before this
 * completion's update may have passed it once more), in the place of `id`
 * if that was noted (a draining chat keeps one place: a claim told the
 * floor when `id`'s lease ends, and its completion ends it).  A refresh
 * under way may still pass `next` as held (its chat found held before this
 * update) while a claim from below the floor takes it:
 * durable_claim_floor_leased.  Only when too many are noted is the floor
 * lowered, which discards the refresh under way and makes claims walk the
 * rest of the chat's backlog.  Ordered after the update by
 * durable_claim_floor_held_watched's barrier.
 */
void
durable_claim_floor_freed(DurableQueue queue, int64 id, int64 next)
{
	DurableFloor *f = floor_of(queue);
	int			i;

	if (f == NULL)
		return;
	SpinLockAcquire(&f->mutex);
	if (f->dboid == MyDatabaseId &&
		(f->busy_until != 0 || (uint64) next < pg_atomic_read_u64(&f->floor)))
	{
		for (i = 0; i < f->freed.n && f->freed.id[i] != next; i++)
			;
		if (i == f->freed.n)
			for (i = 0; i < f->freed.n && f->freed.id[i] != id; i++)
				;
		if (i < DURABLE_FLOOR_FREED_MAX)
		{
			if (i == f->freed.n)
				f->freed.n++;
			f->freed.id[i] = next;
			f->freed.stamp[i] = ++f->freed_stamps;
		}
		else
			floor_lower_locked(f, id);
	}
	SpinLockRelease(&f->mutex);
}

/*
 * A record noted again since the claim read it (a newer stamp) is kept: the
 * claim may have looked before the completion that noted it again.  (Stamps
 * are never reused, not even when the slot goes to another database.)
 */
void
durable_claim_floor_unfree(DurableQueue queue, const DurableFloorFreed *stale)
{
	DurableFloor *f = floor_of(queue);

	if (f == NULL)
		return;
	SpinLockAcquire(&f->mutex);
	for (int s = 0; s < stale->n; s++)
		for (int i = 0; i < f->freed.n; i++)
			if (f->freed.id[i] == stale->id[s] && f->freed.stamp[i] == stale->stamp[s])
			{
				floor_freed_forget(f, i);
				break;
			}
	SpinLockRelease(&f->mutex);
}

/*
 * Whether a refresh under way is about to raise the floor past `id`: it may
 * have passed over the record before the caller's change to it.  The
 * caller's change is ordered before this read, as the refresh orders its
 * publishing before its second scan: one of the two sees the other.  Read
 * before the floor: a refresh writes its new floor before it unpublishes
 * the raise, so one of the two reads sees it (in the other order, both
 * could miss it).
 */
static bool
floor_raise_passes(DurableFloor *f, int64 id)
{
	pg_memory_barrier();
	return (uint64) id < pg_atomic_read_u64(&f->raising);
}

/*
 * Whether the floor, or the raise of a refresh under way, lies above `id`:
 * the raise first, then the floor (floor_raise_passes).
 */
static bool
floor_passes(DurableFloor *f, int64 id)
{
	if (floor_raise_passes(f, id))
		return true;
	pg_read_barrier();
	return (uint64) id < pg_atomic_read_u64(&f->floor);
}

void
durable_claim_floor_comes_due(DurableQueue queue, int64 id, TimestampTz due)
{
	DurableFloor *f = floor_of(queue);
	bool		in_flight;

	if (f == NULL)
		return;

	/* A refresh under way may have passed the record before the caller's change. */
	in_flight = floor_raise_passes(f, id);
	SpinLockAcquire(&f->mutex);
	if (in_flight || (uint64) id < pg_atomic_read_u64(&f->floor))
	{
		/*
		 * The fallback may lie above `id`: the refreshes need not have
		 * passed over this record (a send being sent has no entry they can
		 * see).  Nothing changes for a due time no earlier than the known
		 * one and above the fallback.
		 */
		if (in_flight || f->due == 0 || due < f->due || id < f->fallback)
		{
			floor_earlier_due(&f->due, due);
			f->fallback = Min(f->fallback, id);

			/*
			 * A refresh under way writes its own due time and fallback over
			 * these: it merges what was reported meanwhile.  (It used to be
			 * discarded instead, by a new generation; while chats drained,
			 * each lease of a freed record discarded the one under way, and
			 * the recompute from the head could take many tries to end.)
			 */
			if (f->busy_until != 0)
			{
				floor_earlier_due(&f->late_due, due);
				f->late_fallback = Min(f->late_fallback, id);
			}
		}
	}
	SpinLockRelease(&f->mutex);
}

/*
 * A record below the floor (a freed one) is leased: the floor learns when
 * the lease ends.  So is one that a refresh under way may have passed as
 * held, its chat probed before the completion that freed it
 * (durable_claim_floor_freed): the refresh would raise the floor past the
 * lease without knowing when it ends.  The claim's update is ordered
 * before the read of the raise, as the refresh orders its raise before its
 * second scan: either that scan sees the lease, or the refresh merges the
 * lease's end into its result (durable_claim_floor_comes_due); and the
 * floor is read after the raise (floor_passes), for a refresh that ended in
 * between.  (Discarding every refresh under way at each note of a freed
 * record instead kept the 5 s recompute from the head from ever ending
 * while a chat drained: 160 claims a second.)
 */
void
durable_claim_floor_leased(DurableQueue queue, int64 id, TimestampTz lease_until)
{
	DurableFloor *f = floor_of(queue);

	if (f != NULL && floor_passes(f, id))
		durable_claim_floor_comes_due(queue, id, lease_until);
}

void
durable_claim_floor_admitted(DurableQueue queue, int64 id)
{
	DurableFloor *f = floor_of(queue);

	if (f != NULL && floor_passes(f, id))
		durable_claim_floor_lower(queue, id);
}

void
durable_claim_floor_finished(DurableQueue queue, int64 id)
{
	if (durable_claim_floor_held_watched(queue))
		durable_claim_floor_lower(queue, id);
}

bool
durable_claim_floor_held_watched(DurableQueue queue)
{
	DurableFloor *f = floor_of(queue);

	if (f == NULL)
		return false;
	/* The caller's update is ordered before this read, as a refresh orders its watch before its probe. */
	pg_memory_barrier();
	return durable_clock_us() < (int64) pg_atomic_read_u64(&f->held_watch);
}
