/*-------------------------------------------------------------------------
 *
 * shmem.h
 *		durable's shared memory: one slot per database holding its counters,
 *		the condition variables its waiting claimers sleep on, and the state
 *		of its background worker; plus the launcher's state.
 *
 * Locking: slots are assigned and freed under DurableShared->lock
 * (exclusive).  A backend keeps a pointer to its slot (durable_my_slot),
 * checking at each use that the slot is still its database's: when every
 * slot is taken, the launcher gives the slot of a database found without
 * durable to another database, and durable may have been installed there
 * since the check.  A backend that used its slot in that window (a claim
 * waiting on its condition variable, a floor refresh) may act on the other
 * database's slot once: a missed wake-up or a floor to refresh again, not a
 * lost record.  Counters are atomics.
 * `since` and the worker fields are protected by the slot's spinlock.
 *
 * IDENTIFICATION
 *	  src/shmem.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_SHMEM_H
#define DURABLE_SHMEM_H

#include "durable.h"

#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/spin.h"


/* A queue's claim floor (claim_floor.c); mutex protects the plain fields. */
typedef struct DurableFloor
{
	slock_t		mutex;
	Oid			dboid;			/* the slot's database, copied under mutex at a reset */
	pg_atomic_uint64 floor;		/* no record below this id is claimable now */
	pg_atomic_uint64 raising;	/* the floor a refresh is about to set (0: none) */
	uint64		gen;			/* bumped when the floor is lowered */
	Oid			relid;			/* the journal the floor was computed for */
	int64		fallback;		/* where claims scan from once `due` passed */
	TimestampTz due;			/* a record below the floor comes due (0: none) */
	int64		held_from;		/* first record passed over as held by its chat (0: none) */
	/* These on durable_clock_us(): */
	int64		held_until;		/* where claims scan from held_from on (0: none) */
	pg_atomic_uint64 held_watch;	/* completions look for records held behind theirs until this */
	int64		from_head_at;	/* last refresh that scanned from the head */
	int64		next_refresh;	/* no refresh before this */
	int64		busy_until;		/* a refresh runs (until this at most) */
	uint64		refreshes;		/* refreshes begun: the last one clears busy_until */
	/* Reported to comes_due while a refresh runs, merged into its result (late_due 0: none) */
	TimestampTz late_due;
	int64		late_fallback;
	DurableFloorFreed freed;	/* records freed below the floor (unordered) */
	uint64		freed_stamps;	/* entries noted so far: the last one's stamp */
} DurableFloor;

typedef struct DurableDbSlot
{
	Oid			dboid;			/* InvalidOid: free; written under both locks */
	slock_t		mutex;			/* protects since and the worker fields */
	TimestampTz since;			/* when the counters were last reset */
	pg_atomic_uint64 counters[DC_NUM_COUNTERS];
	ConditionVariable queue_cv[DQ_NUM_QUEUES];	/* waiting claimers */
	/* Earliest end of an inbox lease admitted since waiting claimers last looked (0: none; waiting.c) */
	pg_atomic_uint64 inbox_lease_end;
	DurableFloor floors[DQ_NUM_QUEUES]; /* where each queue's claims scan from */
	pg_atomic_uint32 tokens_lifted_seq; /* the token_seq token.c lifted since the start */

	/* The database's background worker (worker.c). */
	pid_t		worker_pid;		/* 0: none running */
	bool		worker_starting;	/* the launcher asked for one */
	int64		worker_blocked_until;	/* no new worker before this (durable_clock_us) */
	int64		worker_checked_at;	/* last time a worker looked here (durable_clock_us) */
	bool		extension_absent;	/* the last worker found no extension */
	bool		not_swept;		/* the launcher starts no worker here: a
								 * template, closed to connections, invalid */
	bool		worker_passed;	/* the running worker finished a pass */
	bool		worker_stop_asked;	/* durable stopped it on purpose (a hook, the launcher) */
	bool		installed_since_claim;	/* CREATE EXTENSION committed since a
										 * worker last claimed the slot */
	int			worker_failed_starts;	/* workers in a row that ended before one */
	uint32		installs;		/* CREATE EXTENSION durable commits seen here */
	/* Where the worker's due-work windows ended, by queue (0: none; sweep.c) */
	TimestampTz worker_windows[DQ_NUM_QUEUES];
} DurableDbSlot;

/*
 * A block the utility hook put on a database (durable_db_block): its slot,
 * or the slot made for it later, is blocked until `until`
 * (durable_clock_us; an entry past it is free), and the block is lifted
 * when the last of its `holders` (commands) is over.
 */
typedef struct DurableDbBlock
{
	Oid			dboid;
	int64		until;
	int			holders;
	uint64		generation;		/* tells a record from one that took its place */
} DurableDbBlock;

#define DURABLE_DB_BLOCKS 16

typedef struct DurableShared
{
	LWLock	   *lock;			/* assigns and frees slots */
	slock_t		mutex;			/* protects launcher_latch, installed_*, handed_* */
	Latch	   *launcher_latch; /* set to wake the launcher */
	Oid			installed_dboid;	/* durable was just installed there */
	bool		installed_more; /* ... and in another database before */
	/* A backend took this database's slot (found without durable), checked then */
	Oid			handed_dboid;
	int64		handed_checked_at;	/* durable_clock_us */
	DurableDbBlock db_blocks[DURABLE_DB_BLOCKS];	/* under lock */
	uint64		db_block_generations;	/* under lock */
	DurableDbSlot slots[FLEXIBLE_ARRAY_MEMBER]; /* durable_max_databases */
} DurableShared;

extern DurableShared *durable_shared;

/* Called from _PG_init when preloading. */
extern void durable_shmem_install_hooks(void);

/* Whether the library was preloaded (shared memory exists). */
extern bool durable_shmem_available(void);

/*
 * The slot of a database; with create, assign one if there is none.
 * Returns NULL without preloading, or when all slots are taken.
 */
extern DurableDbSlot *durable_db_slot(Oid dboid, bool create);

/* The current database's slot, cached; NULL as above. */
extern DurableDbSlot *durable_my_slot(void);

/*
 * Take the spinlock of a slot that durable_db_slot(dboid, false) returned,
 * if the slot still belongs to dboid; else return false, not holding it.
 * Without the slots' lock, a slot may go to another database between the
 * lookup and the spinlock: the launcher, or a backend in durable_my_slot,
 * gives away the slots of databases without durable.  A slot's dboid is
 * written under both locks.
 */
extern bool durable_slot_lock_for(DurableDbSlot *slot, Oid dboid);

/* The slot of dboid (InvalidOid: a free slot), or NULL; caller holds the slots' lock. */
extern DurableDbSlot *durable_db_slot_find(Oid dboid);

/* Free a database's slot (DROP DATABASE), and forget the blocks on it. */
extern void durable_db_slot_free(Oid dboid);

/*
 * Keep new workers away from database `dboid` until `until`
 * (durable_clock_us) for one more command: a block recorded apart from the
 * slots, which the database's slot, or one made for it later, takes on (a
 * worker needs a slot; the lookup and the record are made under the
 * slots' lock, so that no slot comes between them).  Returns the slot, or
 * NULL when there was none (no worker can run there).  With no room for
 * the record, a database with a slot is blocked through it alone (the
 * first of its commands to end lifts it), and one without is not blocked
 * (a WARNING).
 */
extern DurableDbSlot *durable_db_block(Oid dboid, int64 until, uint64 *generation);

/*
 * One command that durable_db_block blocked dboid for (*generation it set)
 * is over: lift the block after the last.  A command whose record ran out
 * and was taken by a later command's, or that had none while another
 * command has one, leaves that block alone.
 */
extern void durable_db_unblock(Oid dboid, uint64 generation);

/*
 * Every slot taken: give `dboid` the slot of a database whose last worker
 * found no extension, else, with take_unswept, of one that the launcher
 * does not sweep (not_swept), and that no worker is checking; set
 * *absent_db to that database, and *checked_at to that check (0 for one
 * not swept).  Returns dboid's slot if it has one (*absent_db invalid),
 * NULL when no slot can be taken.  Caller holds the slots' lock
 * exclusively.  Sleepers on the slot's condition variables are woken: they
 * wait for the database that had it.
 */
extern DurableDbSlot *durable_db_slot_take_absent(Oid dboid, bool take_unswept,
												  Oid *absent_db, int64 *checked_at);

/* Raise a clear error if the library was not preloaded. */
extern void durable_require_shmem(void);

#endif							/* DURABLE_SHMEM_H */
