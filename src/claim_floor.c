/*-------------------------------------------------------------------------
 *
 * claim_floor.c
 *		Where the inbox's claimable records begin, shared by the claimers
 *		of a database.
 *
 * A claim scans inbox_unfinished_idx in id order from its head.  Behind a
 * long transaction (a report, pg_dump, a standby with hot_standby_feedback)
 * the entries of records finished since it began can be neither vacuumed
 * nor marked dead, and every claim walked all of them: the queue path fell
 * to a quarter of its speed within a minute of holding one transaction open.
 * The claim floor is an id below which no record is claimable now; claims
 * start their scan there.
 *
 * The floor never hides a claimable record:
 *  - it is advanced (at most every FLOOR_REFRESH_MS, by one claimer at a
 *    time) by a scan with a dirty snapshot, which stops at the first record
 *    that is due now or is being written by a transaction in progress (an
 *    admit or a completion not yet committed);
 *  - records the scan passed over (held under a lease, or pending with a
 *    future not_before) come due by the clock: from the earliest of those
 *    times, claims scan from the first record passed over instead;
 *  - a heartbeat that shortens a lease below the floor brings that time
 *    forward;
 *  - every transition that makes a record claimable out of the clock's order
 *    lowers the floor to that record: release, fail, replay, recovery, and an
 *    admit whose id lies below the floor (an admit draws its id before it
 *    inserts its index entries, and may do so while a refresh scans);
 *  - an admit compares its id with the floor after inserting, and a refresh
 *    publishes the floor it is about to set before a second scan of the
 *    range it passed: one of the two sees the other (both sides order their
 *    write before their read with a memory barrier);
 *  - every FLOOR_MAX_AGE_MS the floor is recomputed from the head.
 * Changes made to durable.inbox by hand (an UPDATE of lease_until or
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
#include "access/itup.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "executor/tuptable.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
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

/* What one floor scan found. */
typedef struct FloorScan
{
	int64		needed;			/* first record a claim must see */
	int64		first_skipped;	/* first record passed over (needed: none) */
	TimestampTz due;			/* earliest time one passed over comes due (0: none) */
} FloorScan;

/* The inbox and index a floor scan reads, and the inbox's attributes it reads. */
typedef struct FloorRels
{
	Oid			heap;
	Oid			index;			/* inbox_unfinished_idx: the id comes from it */
	AttrNumber	state;
	AttrNumber	lease_until;
	AttrNumber	not_before;
} FloorRels;

/* Look up the relations of this database's inbox; false when there are none. */
static bool
floor_find_rels(FloorRels *rels)
{
	Oid			nsp = get_namespace_oid("durable", true);

	if (!OidIsValid(nsp))
		return false;
	rels->heap = get_relname_relid("inbox", nsp);
	rels->index = get_relname_relid("inbox_unfinished_idx", nsp);
	if (!OidIsValid(rels->heap) || !OidIsValid(rels->index))
		return false;
	rels->state = get_attnum(rels->heap, "state");
	rels->lease_until = get_attnum(rels->heap, "lease_until");
	rels->not_before = get_attnum(rels->heap, "not_before");
	return rels->state != InvalidAttrNumber &&
		rels->lease_until != InvalidAttrNumber &&
		rels->not_before != InvalidAttrNumber;
}

/*
 * Scan inbox_unfinished_idx from id `from` (up to `below`, exclusive; 0: no
 * bound) with a dirty snapshot.
 */
static void
floor_scan(const FloorRels *rels, int64 from, int64 below, TimestampTz now, FloorScan *out)
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

	out->needed = from;
	out->first_skipped = 0;
	out->due = 0;

	heap = table_open(rels->heap, AccessShareLock);
	index = index_open(rels->index, AccessShareLock);
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

		/* Finished (or never committed) for good: an entry vacuum has yet to remove. */
		if (!index_fetch_heap(scan, slot))
			continue;

		/* Being written by a transaction in progress: it may become claimable. */
		if (TransactionIdIsValid(dirty.xmin) || TransactionIdIsValid(dirty.xmax))
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
		else if (!isnull && durable_text_equal_cstring(state, "pending"))
		{
			Datum		d = slot_getattr(slot, rels->not_before, &isnull);

			if (!isnull)
				due = DatumGetTimestampTz(d);
		}
		if (due <= now)
		{
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

/* The floor claims use now; caller holds the slot's floor_mutex. */
static int64
floor_effective(DurableDbSlot *slot, TimestampTz now)
{
	if (slot->floor_due != 0 && now >= slot->floor_due)
		return slot->floor_fallback;
	return (int64) pg_atomic_read_u64(&slot->floor);
}

/*
 * Publish the floor a refresh is about to set.  Only a refresher presumed
 * gone (FLOOR_REFRESH_TIMEOUT_MS) lets two overlap: the higher of their
 * floors stays published until its own refresher withdraws it.
 */
static void
floor_publish(DurableDbSlot *slot, uint64 raising)
{
	uint64		seen = pg_atomic_read_u64(&slot->floor_raising);

	while (seen < raising &&
		   !pg_atomic_compare_exchange_u64(&slot->floor_raising, &seen, raising))
		;
}

static void
floor_unpublish(DurableDbSlot *slot, uint64 raising)
{
	uint64		expected = raising;

	(void) pg_atomic_compare_exchange_u64(&slot->floor_raising, &expected, 0);
}

/*
 * Refresh the floor of `slot` (this backend is its one refresher): from
 * `from`, or from the head when the inbox is not the one the floor was
 * computed for (the extension was dropped and created again).  Without an
 * inbox the floor is 0.  `now` is the wall clock the records' times are
 * compared with, `clock` durable_clock_us() for the refresh's own pacing.
 */
static void
floor_refresh(DurableDbSlot *slot, int64 from, Oid relid, uint64 gen, TimestampTz now,
			  int64 clock)
{
	FloorRels	rels;
	FloorScan	first = {0, 0, 0};
	FloorScan	again;
	uint64		published = 0;

	if (!floor_find_rels(&rels))
		rels.heap = InvalidOid;
	else
	{
		if (rels.heap != relid)
			from = 0;
		floor_scan(&rels, from, 0, now, &first);
		if (first.needed > from)
		{
			/* Publish, then look again at what the first scan passed over. */
			published = (uint64) first.needed;
			floor_publish(slot, published);
			pg_memory_barrier();
			floor_scan(&rels, from, first.needed, now, &again);
			if (again.needed < first.needed)
			{
				first.needed = again.needed;
				first.first_skipped = Min(first.first_skipped, again.first_skipped);
				if (again.due != 0 && (first.due == 0 || again.due < first.due))
					first.due = again.due;
			}
		}
	}

	SpinLockAcquire(&slot->floor_mutex);
	if (slot->floor_gen == gen)
	{
		pg_atomic_write_u64(&slot->floor, (uint64) first.needed);

		/*
		 * A scan from above the first record passed over earlier (the floor
		 * moving on) keeps what the earlier scans passed over; one from
		 * there or below saw all of it again.
		 */
		if (from > slot->floor_fallback)
		{
			if (first.due != 0 && (slot->floor_due == 0 || first.due < slot->floor_due))
				slot->floor_due = first.due;
		}
		else
		{
			slot->floor_fallback = Min(first.first_skipped, first.needed);
			slot->floor_due = first.due;
		}
		slot->floor_relid = rels.heap;
		if (from == 0)
			slot->floor_from_head_at = clock;
	}
	slot->floor_busy_until = 0;
	slot->floor_next_refresh = clock + (int64) FLOOR_REFRESH_MS * 1000;
	SpinLockRelease(&slot->floor_mutex);
	if (published != 0)
		floor_unpublish(slot, published);
}

int64
durable_claim_floor(TimestampTz now)
{
	DurableDbSlot *slot = durable_my_slot();
	int64		clock;
	int64		current;
	int64		from;
	Oid			relid;
	uint64		gen;

	if (slot == NULL || !durable_claim_floor_enabled)
		return 0;

	clock = durable_clock_us();
	SpinLockAcquire(&slot->floor_mutex);
	current = floor_effective(slot, now);
	if (clock < slot->floor_next_refresh || clock < slot->floor_busy_until)
	{
		SpinLockRelease(&slot->floor_mutex);
		return current;
	}
	slot->floor_busy_until = clock + (int64) FLOOR_REFRESH_TIMEOUT_MS * 1000;
	gen = slot->floor_gen;
	relid = slot->floor_relid;
	from = (clock >= slot->floor_from_head_at + (int64) FLOOR_MAX_AGE_MS * 1000) ? 0 : current;
	SpinLockRelease(&slot->floor_mutex);

	PG_TRY();
	{
		floor_refresh(slot, from, relid, gen, now, clock);
	}
	PG_CATCH();
	{
		SpinLockAcquire(&slot->floor_mutex);
		slot->floor_busy_until = 0;
		SpinLockRelease(&slot->floor_mutex);
		PG_RE_THROW();
	}
	PG_END_TRY();

	SpinLockAcquire(&slot->floor_mutex);
	current = floor_effective(slot, now);
	SpinLockRelease(&slot->floor_mutex);
	/* t/009_claim_floor reads this line. */
	elog(DEBUG2, "durable: claim floor " INT64_FORMAT "%s", current,
		 from == 0 ? " (from the head)" : "");
	return current;
}

void
durable_claim_floor_lower(int64 id)
{
	DurableDbSlot *slot = durable_my_slot();

	if (slot == NULL)
		return;
	SpinLockAcquire(&slot->floor_mutex);
	if ((uint64) id < pg_atomic_read_u64(&slot->floor))
		pg_atomic_write_u64(&slot->floor, (uint64) id);
	slot->floor_fallback = Min(slot->floor_fallback, id);
	slot->floor_gen++;
	SpinLockRelease(&slot->floor_mutex);
}

void
durable_claim_floor_comes_due(int64 id, TimestampTz due)
{
	DurableDbSlot *slot = durable_my_slot();

	if (slot == NULL)
		return;
	SpinLockAcquire(&slot->floor_mutex);
	if ((uint64) id < pg_atomic_read_u64(&slot->floor) &&
		(slot->floor_due == 0 || due < slot->floor_due))
	{
		slot->floor_due = due;
		slot->floor_fallback = Min(slot->floor_fallback, id);
		slot->floor_gen++;
	}
	SpinLockRelease(&slot->floor_mutex);
}

void
durable_claim_floor_admitted(int64 id)
{
	DurableDbSlot *slot = durable_my_slot();

	if (slot == NULL)
		return;
	/*
	 * The raise in progress first, then the floor: a refresh writes its new
	 * floor before it unpublishes the raise, so one of the two reads sees it
	 * (read in the other order, both could miss it).
	 */
	pg_memory_barrier();
	if ((uint64) id < pg_atomic_read_u64(&slot->floor_raising))
	{
		durable_claim_floor_lower(id);
		return;
	}
	pg_read_barrier();
	if ((uint64) id < pg_atomic_read_u64(&slot->floor))
		durable_claim_floor_lower(id);
}
