/*-------------------------------------------------------------------------
 *
 * shmem.c
 *		Allocation of durable's shared memory and lookup of database slots.
 *
 * The layout and locking rules are in shmem.h.  Shared memory exists only
 * when durable is in shared_preload_libraries; every caller copes with
 * durable_my_slot() returning NULL.
 *
 * IDENTIFICATION
 *	  src/shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "shmem.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"

DurableShared *durable_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static DurableDbSlot *dshm_my_slot = NULL;

static Size
dshm_size(void)
{
	return MAXALIGN(add_size(offsetof(DurableShared, slots),
							 mul_size(sizeof(DurableDbSlot), durable_max_databases)));
}

static void
dshm_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(dshm_size());
	RequestNamedLWLockTranche("durable", 1);
}

static void
dshm_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	durable_shared = ShmemInitStruct("durable", dshm_size(), &found);
	if (!found)
	{
		int			i;

		memset(durable_shared, 0, dshm_size());
		durable_shared->lock = &(GetNamedLWLockTranche("durable"))->lock;
		SpinLockInit(&durable_shared->mutex);
		durable_shared->launcher_latch = NULL;
		for (i = 0; i < durable_max_databases; i++)
		{
			DurableDbSlot *slot = &durable_shared->slots[i];
			int			c;
			int			q;

			slot->dboid = InvalidOid;
			SpinLockInit(&slot->mutex);
			for (c = 0; c < DC_NUM_COUNTERS; c++)
				pg_atomic_init_u64(&slot->counters[c], 0);
			pg_atomic_init_u32(&slot->tokens_lifted_seq, InvalidOid);
			pg_atomic_init_u64(&slot->inbox_lease_end, 0);
			for (q = 0; q < DQ_NUM_QUEUES; q++)
			{
				ConditionVariableInit(&slot->queue_cv[q]);
				SpinLockInit(&slot->floors[q].mutex);
				pg_atomic_init_u64(&slot->floors[q].floor, 0);
				pg_atomic_init_u64(&slot->floors[q].raising, 0);
				pg_atomic_init_u64(&slot->floors[q].held_watch, 0);
			}
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

void
durable_shmem_install_hooks(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = dshm_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = dshm_startup;
}

bool
durable_shmem_available(void)
{
	return durable_shared != NULL;
}

void
durable_require_shmem(void)
{
	if (durable_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("durable must be loaded via shared_preload_libraries"),
				 errhint("Add durable to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/* The live block record of dboid, or NULL; caller holds the lock. */
static DurableDbBlock *
dshm_db_block(Oid dboid, int64 now)
{
	for (int i = 0; i < DURABLE_DB_BLOCKS; i++)
	{
		DurableDbBlock *b = &durable_shared->db_blocks[i];

		if (b->dboid == dboid && b->until > now)
			return b;
	}
	return NULL;
}

/* Forget the block records of dboid; caller holds the lock exclusively. */
static void
dshm_forget_db_blocks(Oid dboid)
{
	for (int i = 0; i < DURABLE_DB_BLOCKS; i++)
	{
		DurableDbBlock *b = &durable_shared->db_blocks[i];

		if (b->dboid == dboid)
			memset(b, 0, sizeof(*b));
	}
}

/* Reset a slot's contents for a new database; caller holds the lock exclusively. */
static void
dshm_slot_reset(DurableDbSlot *slot, Oid dboid)
{
	int			c;
	int			q;
	DurableDbBlock *block = dshm_db_block(dboid, durable_clock_us());

	for (c = 0; c < DC_NUM_COUNTERS; c++)
		pg_atomic_write_u64(&slot->counters[c], 0);
	pg_atomic_write_u32(&slot->tokens_lifted_seq, InvalidOid);
	pg_atomic_write_u64(&slot->inbox_lease_end, 0);
	SpinLockAcquire(&slot->mutex);
	slot->dboid = dboid;
	slot->since = GetCurrentTimestamp();
	slot->worker_pid = 0;
	slot->worker_starting = false;
	slot->worker_blocked_until = block ? block->until : 0;
	slot->worker_checked_at = 0;
	slot->extension_absent = false;
	slot->not_swept = false;
	slot->installs = 0;
	for (q = 0; q < DQ_NUM_QUEUES; q++)
		slot->worker_windows[q] = 0;
	slot->worker_passed = false;
	slot->worker_failed_starts = 0;
	slot->worker_stop_asked = false;
	slot->installed_since_claim = false;
	SpinLockRelease(&slot->mutex);
	for (q = 0; q < DQ_NUM_QUEUES; q++)
	{
		DurableFloor *f = &slot->floors[q];

		SpinLockAcquire(&f->mutex);
		f->dboid = dboid;
		pg_atomic_write_u64(&f->floor, 0);
		pg_atomic_write_u64(&f->raising, 0);
		pg_atomic_write_u64(&f->held_watch, 0);
		f->gen++;
		f->relid = InvalidOid;
		f->fallback = 0;
		f->due = 0;
		f->held_from = 0;
		f->held_until = 0;
		f->from_head_at = 0;
		f->next_refresh = 0;
		f->busy_until = 0;
		f->late_due = 0;
		f->late_fallback = PG_INT64_MAX;
		f->freed.n = 0;
		SpinLockRelease(&f->mutex);
	}
}

DurableDbSlot *
durable_db_slot_find(Oid dboid)
{
	int			i;

	for (i = 0; i < durable_max_databases; i++)
	{
		if (durable_shared->slots[i].dboid == dboid)
			return &durable_shared->slots[i];
	}
	return NULL;
}

/*
 * A slot of a database without durable (unswept false) or of one the
 * launcher does not sweep (true) that no worker is checking, or NULL.
 */
static DurableDbSlot *
dshm_givable_slot(bool unswept, int64 *checked_at)
{
	for (int i = 0; i < durable_max_databases; i++)
	{
		DurableDbSlot *slot = &durable_shared->slots[i];
		bool		givable;
		int64		last_check;

		if (slot->dboid == InvalidOid)
			continue;
		SpinLockAcquire(&slot->mutex);
		givable = (unswept ? slot->not_swept : slot->extension_absent) &&
			slot->worker_pid == 0 && !slot->worker_starting;
		last_check = slot->worker_checked_at;
		SpinLockRelease(&slot->mutex);
		if (givable)
		{
			*checked_at = unswept ? 0 : last_check;
			return slot;
		}
	}
	return NULL;
}

DurableDbSlot *
durable_db_slot_take_absent(Oid dboid, bool take_unswept, Oid *absent_db, int64 *checked_at)
{
	DurableDbSlot *taken;

	Assert(LWLockHeldByMeInMode(durable_shared->lock, LW_EXCLUSIVE));
	*absent_db = InvalidOid;
	*checked_at = 0;
	taken = durable_db_slot_find(dboid);
	if (taken != NULL)
		return taken;

	/*
	 * A database without durable first: one not swept may still have users
	 * (a backend in template1), whose counters and waiting claims go with it.
	 */
	taken = dshm_givable_slot(false, checked_at);
	if (taken == NULL && take_unswept)
		taken = dshm_givable_slot(true, checked_at);
	if (taken == NULL)
		return NULL;
	*absent_db = taken->dboid;
	dshm_slot_reset(taken, dboid);
	for (int q = 0; q < DQ_NUM_QUEUES; q++)
		ConditionVariableBroadcast(&taken->queue_cv[q]);
	return taken;
}

/*
 * This database uses durable and found every slot taken: take the slot of
 * one without durable, as the launcher would a moment later.  Without this,
 * the backend that just ran CREATE EXTENSION (and every durable call in it
 * for a second) found no slot: a WARNING, and metrics() failed with 53400.
 * The launcher learns the database given up and its last check through
 * handed_dboid, so that it keeps to that database's recheck time instead of
 * starting a worker there at once (or warning that it cannot).  There is
 * one such record: until the launcher, woken, has collected it, the next
 * backend in this position waits for the launcher too.  Slots of databases
 * not swept are the launcher's to hand on, to a database it sweeps: the
 * backends of two such databases would take each other's in turn.
 */
static DurableDbSlot *
dshm_take_absent_slot(void)
{
	DurableDbSlot *taken = NULL;
	Oid			absent_db = InvalidOid;
	int64		checked_at = 0;
	bool		record_free;
	Latch	   *latch = NULL;

	if (durable_shared == NULL)
		return NULL;
	LWLockAcquire(durable_shared->lock, LW_EXCLUSIVE);
	SpinLockAcquire(&durable_shared->mutex);
	record_free = !OidIsValid(durable_shared->handed_dboid);
	SpinLockRelease(&durable_shared->mutex);
	if (record_free)
		taken = durable_db_slot_take_absent(MyDatabaseId, false, &absent_db, &checked_at);
	if (OidIsValid(absent_db))
	{
		SpinLockAcquire(&durable_shared->mutex);
		durable_shared->handed_dboid = absent_db;
		durable_shared->handed_checked_at = checked_at;
		latch = durable_shared->launcher_latch;
		SpinLockRelease(&durable_shared->mutex);
	}
	LWLockRelease(durable_shared->lock);
	/* The launcher frees the record, and starts this database's worker. */
	if (latch != NULL)
		SetLatch(latch);
	if (OidIsValid(absent_db))
		ereport(DEBUG1,
				(errmsg_internal("durable: database %u takes the slot of database %u, which has no durable",
								 MyDatabaseId, absent_db)));
	return taken;
}

DurableDbSlot *
durable_db_slot(Oid dboid, bool create)
{
	DurableDbSlot *slot;

	if (durable_shared == NULL || !OidIsValid(dboid))
		return NULL;

	LWLockAcquire(durable_shared->lock, LW_SHARED);
	slot = durable_db_slot_find(dboid);
	LWLockRelease(durable_shared->lock);
	if (slot != NULL || !create)
		return slot;

	LWLockAcquire(durable_shared->lock, LW_EXCLUSIVE);
	slot = durable_db_slot_find(dboid);
	if (slot == NULL && (slot = durable_db_slot_find(InvalidOid)) != NULL)
		dshm_slot_reset(slot, dboid);
	LWLockRelease(durable_shared->lock);
	return slot;
}

DurableDbSlot *
durable_my_slot(void)
{
	static int64 no_slot_until = 0;	/* durable_clock_us(): a wall clock set
										 * back must not hold the look back */
	static bool warned = false;

	/*
	 * The launcher gives the slot of a database without durable to another
	 * database when every slot is taken: a slot looked up before the
	 * extension was created here may belong to another database since.
	 */
	if (dshm_my_slot != NULL && dshm_my_slot->dboid != MyDatabaseId)
		dshm_my_slot = NULL;
	if (dshm_my_slot != NULL || durable_shared == NULL || !OidIsValid(MyDatabaseId))
		return dshm_my_slot;

	/*
	 * Every slot taken: each call would take the lock exclusively to look
	 * again, and warn.  Look again once a second, and warn once per backend.
	 */
	if (no_slot_until != 0 && durable_clock_us() < no_slot_until)
		return NULL;
	dshm_my_slot = durable_db_slot(MyDatabaseId, true);
	if (dshm_my_slot == NULL)
		dshm_my_slot = dshm_take_absent_slot();
	if (dshm_my_slot == NULL)
	{
		no_slot_until = durable_clock_us() + USECS_PER_SEC;
		if (!warned)
			ereport(WARNING,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("durable tracks at most %d databases; database %u has no counters, waiting claims or worker",
							durable_max_databases, MyDatabaseId),
					 errhint("Raise \"durable.max_databases\" (it takes a server restart), or drop the extension where it is not used.")));
		warned = true;
	}
	else
		no_slot_until = 0;
	return dshm_my_slot;
}

void
durable_db_slot_free(Oid dboid)
{
	DurableDbSlot *slot;

	if (durable_shared == NULL)
		return;
	LWLockAcquire(durable_shared->lock, LW_EXCLUSIVE);
	slot = durable_db_slot_find(dboid);
	if (slot != NULL)
	{
		SpinLockAcquire(&slot->mutex);
		slot->dboid = InvalidOid;
		SpinLockRelease(&slot->mutex);
	}
	dshm_forget_db_blocks(dboid);
	LWLockRelease(durable_shared->lock);
}

DurableDbSlot *
durable_db_block(Oid dboid, int64 until, uint64 *generation)
{
	DurableDbSlot *slot;
	DurableDbBlock *block;
	int64		now = durable_clock_us();

	*generation = 0;
	if (durable_shared == NULL)
		return NULL;
	LWLockAcquire(durable_shared->lock, LW_EXCLUSIVE);
	block = dshm_db_block(dboid, now);
	for (int i = 0; block == NULL && i < DURABLE_DB_BLOCKS; i++)
	{
		DurableDbBlock *b = &durable_shared->db_blocks[i];

		/* (a free one, or one that ran out: its commands ended by FATAL, or waited past it) */
		if (b->until <= now)
		{
			block = b;
			block->dboid = dboid;
			block->holders = 0;
			block->generation = ++durable_shared->db_block_generations;
		}
	}
	if (block != NULL)
	{
		block->until = Max(block->until, until);
		block->holders++;
		*generation = block->generation;
	}
	slot = durable_db_slot_find(dboid);
	if (slot != NULL)
	{
		SpinLockAcquire(&slot->mutex);
		slot->worker_blocked_until = Max(slot->worker_blocked_until, until);
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(durable_shared->lock);
	if (block == NULL && slot == NULL)
		ereport(WARNING,
				(errmsg("durable could not keep its worker away from database %u during this command", dboid),
				 errdetail("%d commands that need a database to themselves are running already.",
						   DURABLE_DB_BLOCKS),
				 errhint("If the command fails because the database is being accessed by other users, run it again.")));
	return slot;
}

void
durable_db_unblock(Oid dboid, uint64 generation)
{
	DurableDbSlot *slot;
	DurableDbBlock *block;

	if (durable_shared == NULL)
		return;
	LWLockAcquire(durable_shared->lock, LW_EXCLUSIVE);
	block = dshm_db_block(dboid, durable_clock_us());
	/* Another command still needs the database: the block stays. */
	if (block != NULL && (block->generation != generation || --block->holders > 0))
	{
		LWLockRelease(durable_shared->lock);
		return;
	}
	dshm_forget_db_blocks(dboid);
	slot = durable_db_slot_find(dboid);
	if (slot != NULL)
	{
		SpinLockAcquire(&slot->mutex);
		slot->worker_blocked_until = 0;
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(durable_shared->lock);
}

bool
durable_slot_lock_for(DurableDbSlot *slot, Oid dboid)
{
	SpinLockAcquire(&slot->mutex);
	if (slot->dboid == dboid)
		return true;
	SpinLockRelease(&slot->mutex);
	return false;
}
