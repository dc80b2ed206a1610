/*-------------------------------------------------------------------------
 *
 * worker.c
 *		The background workers: a launcher that finds, on its own, every
 *		database where durable is installed, one worker per such database
 *		that runs a sweep pass every durable.naptime, and a utility hook
 *		that keeps the workers out of the way of DROP DATABASE and friends.
 *
 * Launcher.  A static worker (registered from _PG_init, restarted by the
 * postmaster bgw_restart_time after it fails) that connects to no database
 * and reads the shared catalog pg_database every naptime, and whenever its
 * latch is set.  For every connectable, non-template database without a
 * running worker it registers a dynamic worker (BGW_NEVER_RESTART: the
 * launcher itself restarts workers, a naptime later, clamped to 1-10 s, so
 * a worker failing at once cannot spin).  It does not wait for a worker to
 * start: it keeps the handle and learns of the worker's start and exit from
 * the postmaster's notifications (bgw_notify_pid), so one slow database
 * never delays the others.  A worker finding no extension in its database
 * records it in the database's slot and exits; the launcher then tries that
 * database again only after durable.absent_recheck, a pause that doubles
 * while the database stays without durable, up to ten times the setting
 * (wkr_absent_pause_end), but at once when CREATE EXTENSION durable commits
 * there (the hook below sets its latch).  When
 * every slot is taken, a database that needs one takes the slot of a
 * database found without the extension, whose next check the launcher then
 * keeps in its own memory (wkr_absent): a cluster of many databases, few of
 * them with durable, never leaves one of those few without a worker.
 *
 * Workers.  A worker claims its database's slot (worker_pid) before it
 * connects, checks in a transaction that the extension exists, then sleeps
 * a naptime before its first pass (the regression suites rely on that with
 * a naptime of one hour) and runs one pass per naptime, each in its own
 * transaction: at once again when lease recovery filled its batch, and
 * after a rest of WKR_PURGE_REST times the pass's length when the purge
 * filled its own (the open-record scans rest by their own cost,
 * WKR_OPEN_SCAN_REST).  Every latch wake makes it check that the extension
 * still exists, so DROP EXTENSION (whose hook wakes it at commit) stops it
 * promptly.  SIGHUP reloads the settings, SIGTERM ends it (die), an error
 * ends it too (there is no error recovery in a worker: ERROR becomes
 * FATAL) and the launcher starts a new one.
 *
 * Utility hook.  DROP DATABASE, ALTER DATABASE ... RENAME / SET TABLESPACE
 * and CREATE DATABASE ... TEMPLATE all fail while another session is
 * connected to the database they name, and our worker is such a session.
 * Before them, the hook blocks the database for WKR_BLOCK_MS (the launcher
 * starts no worker there meanwhile; shmem.c's durable_db_block, which also
 * covers a database without a slot yet, and counts the commands, so that
 * the first of two to end does not lift the other's), sends the worker SIGTERM and
 * waits, at most WKR_STOP_WAIT_MS, until it is gone; the command itself
 * then takes its lock on the database, which keeps a new worker from
 * connecting until the command's transaction ends.  When the command
 * returns or fails, the block is lifted and the launcher woken, so the
 * database has its worker back at once; after a successful DROP DATABASE
 * the slot is freed instead.  Only the database's owner (or a superuser)
 * stops a worker this way, so nobody else can use a doomed DROP DATABASE to
 * keep a database unswept.  The hook first hands every command to
 * durable_ddl_guard (ddl_guard.c), which refuses what would change the
 * journals' column types or queue a lock on them before a permission check;
 * after a REASSIGN OWNED it moves the initial privileges of durable's
 * objects to the new owner (init_privs.c).
 *
 * Slot protocol (fields of DurableDbSlot, under the slot's spinlock):
 *	- worker_starting: set by the launcher when it registers a worker, and
 *	  cleared by that worker when it claims the slot, or by the launcher when
 *	  the worker exits first or cannot be registered (a slot handed to
 *	  another database starts cleared: dshm_slot_reset);
 *	- worker_pid: set by the worker when it claims the slot, unless another
 *	  worker holds it (a duplicate exits) or the slot is blocked; cleared by
 *	  the worker's before_shmem_exit callback, which runs on every exit but
 *	  SIGKILL, and SIGKILL makes the postmaster reinitialize shared memory;
 *	- worker_blocked_until: no worker starts before it (set by the hook, and
 *	  by the launcher after a worker exited, for the restart delay);
 *	- extension_absent, worker_checked_at: the last check a worker made;
 *	- installed_since_claim: set by CREATE EXTENSION durable's commit, and
 *	  cleared by the next worker to claim the slot or by a check that finds
 *	  the extension; while it is set, the exit of the worker that found none
 *	  before the commit holds the next one back for no delay (the commit
 *	  asked for a worker at once).
 * Slots of databases that no longer exist (a DROP DATABASE racing with the
 * launcher) are freed by the launcher when it no longer finds them in
 * pg_database.
 *
 * IDENTIFICATION
 *	  src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include <signal.h>

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/wait_event.h"

#include "init_privs.h"
#include "shmem.h"
#include "sweep.h"
#include "worker.h"

PGDLLEXPORT void durable_launcher_main(Datum main_arg);
PGDLLEXPORT void durable_worker_main(Datum main_arg);

/* The postmaster restarts a failed launcher after this many seconds. */
#define WKR_LAUNCHER_RESTART_S	5

/* A worker that stopped is started again after a naptime, within these bounds... */
#define WKR_RESTART_MIN_MS		1000
#define WKR_RESTART_MAX_MS		10000
/* ...doubled for each worker in a row that ended before finishing a pass, up to this. */
#define WKR_RESTART_BACKOFF_MAX_MS	300000

/*
 * The longest pause between two looks at a database without the
 * extension, in durable.absent_recheck's.
 */
#define WKR_ABSENT_RECHECK_GROWTH	10

/*
 * Workers in flight at most — started, and not yet known to stay (see
 * wkr_workers_in_flight): a quarter of max_worker_processes, from 1 to 8 —
 * and how soon the launcher looks again when it had more to start (it is
 * also woken when one exits).  Most are short-lived checks of databases
 * without durable; started all at once after a restart of a cluster with
 * many databases, they took every background worker slot from parallel
 * query, logical replication and each other ("could not start a worker"
 * for databases the launcher retried).  A fixed 8 did the same under the
 * default max_worker_processes of 8, of which two are taken (the logical
 * replication launcher and durable's).
 */
#define WKR_MAX_IN_FLIGHT		8
#define WKR_START_PACE_MS		100

/*
 * Registrations that fail (every background worker slot in use) are
 * warned of only once they have failed this long without one succeeding:
 * a moment's crowding (parallel query, a burst of checks) is retried in
 * silence (DEBUG1), a lasting shortage is named.  Failures further apart
 * than WKR_NO_ROOM_GAP_MS (a lasting shortage retries every restart delay,
 * at most WKR_RESTART_MAX_MS) are not one shortage.
 */
#define WKR_NO_ROOM_WARN_MS		10000
#define WKR_NO_ROOM_GAP_MS		(2 * WKR_RESTART_MAX_MS)

/*
 * A worker older than this is not counted in flight: one that waits before
 * its check (an uncommitted DROP EXTENSION, a database locked by CREATE
 * DATABASE ... TEMPLATE) is not part of a burst, and must not keep the
 * launcher from starting workers anywhere else.
 */
#define WKR_IN_FLIGHT_MAX_MS	5000

/* The utility hook keeps a database's worker away this long... */
#define WKR_BLOCK_MS			10000
/* ...and waits at most this long for the running one to exit. */
#define WKR_STOP_WAIT_MS		5000

/*
 * After a retention pass that filled its batch, the worker rests this many
 * times as long as the pass took: a backlog is purged with at most a sixth
 * of one core and of the disk's time (1,000,000 records in about a minute).
 * The rest never exceeds a naptime, which lease recovery must keep: a pass
 * slower than a sixth of the naptime (a long transaction makes the purge
 * walk index entries that vacuum may not remove yet) comes once a naptime,
 * as it would without a backlog.
 */
#define WKR_PURGE_REST			5

/*
 * Lease recovery and the inbox's due-work announcement scan every open
 * record (an index on the lease or the due time would make claims non-HOT
 * updates): with a backlog of a million pending records they take 0.4 s.
 * After they ran without filling a batch, passes skip them for this many
 * times as long as they took (at most WKR_OPEN_SCAN_REST_MAX_MS), so they
 * use at most a twentieth of one core.  A healthy queue's few open records
 * are still scanned at every pass; during a backlog, claimers are busy and
 * a lost lease is recovered a few seconds later.
 */
#define WKR_OPEN_SCAN_REST		19
#define WKR_OPEN_SCAN_REST_MAX_MS 30000

/* A database as the launcher saw it in pg_database. */
typedef struct WkrDatabase
{
	Oid			oid;
	NameData	name;
	bool		launchable;		/* connectable, not a template, not invalid */
} WkrDatabase;

/* A worker the launcher registered and has not seen exit yet. */
typedef struct WkrTracked
{
	Oid			dboid;
	BackgroundWorkerHandle *handle;
	int64		started_at;		/* durable_clock_us() when registered */
} WkrTracked;

/* ---- launcher state (launcher process only) ---- */
static WkrTracked *wkr_tracked;	/* durable_max_databases of them */
static int	wkr_ntracked = 0;
static List *wkr_warned_no_slot = NIL;	/* databases warned about, once per
										 * shortage */

/*
 * A database found without the extension, look after look; forgotten once
 * it is found with it, dropped, or durable is created there.
 */
typedef struct WkrAbsent
{
	Oid			dboid;			/* the hash key */
	int64		since;			/* durable_clock_us of the first of those looks */
	int64		given_away_at;	/* the last look, when its slot then went to
								 * another database; else 0 */
} WkrAbsent;

static HTAB *wkr_absent = NULL; /* of WkrAbsent, by dboid */

static List *wkr_warned_no_worker = NIL;
static int64 wkr_no_room_since = 0;	/* first failed registration of a
									 * shortage, or 0 */
static int64 wkr_no_room_last = 0;	/* the latest failed registration */
static Oid	wkr_no_room_db = InvalidOid;	/* where the latest look found no
											 * room: the next starts after it */

/* ---- worker state (worker process only) ---- */
static DurableDbSlot *wkr_slot = NULL;
static char *wkr_dbname = NULL;

/* ---- backend state (the utility hook) ---- */
static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static bool wkr_callback_registered = false;
static bool wkr_wake_launcher_at_commit = false;
static bool wkr_wake_worker_at_commit = false;
/* Durable is gone at commit: record it absent then (wkr_wake_worker). */
static bool wkr_absent_at_commit = false;
/* The slot's install count while durable was gone (0: the slot had none). */
static uint32 wkr_installs_at_drop = 0;
static bool wkr_installs_read = false;

static uint32 wkr_wait_event = PG_WAIT_EXTENSION;

/* Use a named wait event where the server has them (PG17). */
static void
wkr_init_wait_event(const char *name)
{
#if PG_VERSION_NUM >= 170000
	wkr_wait_event = WaitEventExtensionNew(name);
#endif
}

/* Milliseconds from now until `until`, at least 1. */
static long
wkr_ms_until(int64 now, int64 until)
{
	int64		ms;

	if (until <= now)
		return 1;
	ms = (until - now + 999) / 1000;
	return (long) Min(ms, (int64) INT_MAX);
}

/*
 * The delay before a stopped worker is started again: a naptime within
 * bounds, doubled for each earlier worker in a row that ended before it
 * finished a pass (failed_starts counts this one too), so that a pass that
 * fails every time (a broken trigger, say) is not retried, and logged,
 * every second forever.
 */
static int64
wkr_restart_delay_us(int failed_starts)
{
	int64		ms = Min(Max(durable_naptime_ms, WKR_RESTART_MIN_MS), WKR_RESTART_MAX_MS);

	if (failed_starts > 1)
		ms <<= Min(failed_starts - 1, 16);
	return Min(ms, (int64) WKR_RESTART_BACKOFF_MAX_MS) * 1000;
}

/*
 * Register the launcher.  Called from _PG_init while preloading.
 */
void
durable_worker_register_launcher(void)
{
	BackgroundWorker worker;

	MemSet(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = WKR_LAUNCHER_RESTART_S;
	strlcpy(worker.bgw_library_name, "durable", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "durable_launcher_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "durable launcher", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "durable launcher", BGW_MAXLEN);
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
}

/* ========================================================================
 * Launcher
 * ========================================================================
 */

/*
 * Whether a slot is free for another database.  A hint only: another
 * process may take it before we do.
 */
static bool
wkr_free_slot_exists(void)
{
	bool		found;

	LWLockAcquire(durable_shared->lock, LW_SHARED);
	found = (durable_db_slot_find(InvalidOid) != NULL);
	LWLockRelease(durable_shared->lock);
	return found;
}

/* Whether the database is in the list of pg_database's (wkr_list_databases). */
static bool
wkr_database_listed(List *dbs, Oid dboid)
{
	ListCell   *lc;

	foreach(lc, dbs)
	{
		if (((WkrDatabase *) lfirst(lc))->oid == dboid)
			return true;
	}
	return false;
}

/* What the launcher remembers of a database without durable, entered if need be. */
static WkrAbsent *
wkr_absent_enter(Oid dboid, int64 checked_at)
{
	WkrAbsent  *absent;
	bool		found;

	if (wkr_absent == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(WkrAbsent);
		wkr_absent = hash_create("durable databases without the extension", 64, &ctl,
								 HASH_ELEM | HASH_BLOBS);
	}
	absent = (WkrAbsent *) hash_search(wkr_absent, &dboid, HASH_ENTER, &found);
	if (!found)
		absent->given_away_at = 0;
	if (!found || absent->since > checked_at)
		absent->since = checked_at;
	return absent;
}

static WkrAbsent *
wkr_absent_find(Oid dboid)
{
	if (wkr_absent == NULL)
		return NULL;
	return (WkrAbsent *) hash_search(wkr_absent, &dboid, HASH_FIND, NULL);
}

/*
 * When a database found without the extension at checked_at is to be
 * looked at again: after as long as it has been found so, look after look,
 * within durable.absent_recheck and ten times that.  So the first two
 * looks come a setting apart, and the later ones ever further, while a
 * cluster of many databases without durable costs less and less (each look
 * is a connection and a catalog scan); CREATE EXTENSION durable wakes the
 * launcher at once anyway, the looks are only its safety net.  Computed
 * from the setting when asked, so a reload reaches every database.
 */
static int64
wkr_absent_pause_end(const WkrAbsent *absent, int64 checked_at)
{
	int64		least = (int64) durable_absent_recheck_ms * 1000;

	return checked_at + Min(Max(checked_at - absent->since, least),
							least * WKR_ABSENT_RECHECK_GROWTH);
}

/* The same for a database its worker just found without durable at checked_at. */
static int64
wkr_absent_recheck_at(Oid dboid, int64 checked_at)
{
	return wkr_absent_pause_end(wkr_absent_enter(dboid, checked_at), checked_at);
}

/* The database was found with the extension, or dropped: its pauses start over. */
static void
wkr_absent_forget(Oid dboid)
{
	if (wkr_absent != NULL)
		(void) hash_search(wkr_absent, &dboid, HASH_REMOVE, NULL);
}

/*
 * When the database was found without the extension and gave up its slot:
 * when it is due to be checked again, else 0 (also once due: that is
 * forgotten when it gets a slot for the check, or durable is created there).
 * *known tells whether it was found so at all.
 */
static int64
wkr_absent_until(Oid dboid, int64 now, bool *known)
{
	WkrAbsent  *absent = wkr_absent_find(dboid);
	int64		recheck_at;

	*known = (absent != NULL && absent->given_away_at != 0);
	if (!*known)
		return 0;
	/* (its since is no later: wkr_remember_absent entered given_away_at) */
	recheck_at = wkr_absent_pause_end(absent, absent->given_away_at);
	return recheck_at > now ? recheck_at : 0;
}

/*
 * Forget what the launcher remembers of a database where durable was just
 * installed (named by CREATE EXTENSION's hook), so that it gets a slot and
 * a worker at once instead of at its next check.  Installs in several
 * databases since the last look name only the last one: then every
 * database is forgotten, for none may stay known without durable (a
 * database known so is not checked again with the slot of one not swept,
 * and may never be).
 */
static void
wkr_forget_installed(void)
{
	Oid			dboid;
	bool		more;

	SpinLockAcquire(&durable_shared->mutex);
	dboid = durable_shared->installed_dboid;
	more = durable_shared->installed_more;
	durable_shared->installed_dboid = InvalidOid;
	durable_shared->installed_more = false;
	SpinLockRelease(&durable_shared->mutex);
	if (more)
	{
		if (wkr_absent != NULL)
			hash_destroy(wkr_absent);
		wkr_absent = NULL;
	}
	else if (OidIsValid(dboid))
		wkr_absent_forget(dboid);
}

/* Forget the databases of wkr_absent that are no longer in pg_database (dbs). */
static void
wkr_forget_dropped_absent(List *dbs)
{
	HASH_SEQ_STATUS seq;
	WkrAbsent  *absent;

	if (wkr_absent == NULL)
		return;
	hash_seq_init(&seq, wkr_absent);
	while ((absent = (WkrAbsent *) hash_seq_search(&seq)) != NULL)
	{
		/* (removing the entry just returned is allowed) */
		if (!wkr_database_listed(dbs, absent->dboid))
			wkr_absent_forget(absent->dboid);
	}
}

/* Remember that a database without durable gave up its slot, checked at checked_at. */
static void
wkr_remember_absent(Oid dboid, int64 checked_at)
{
	wkr_absent_enter(dboid, checked_at)->given_away_at = checked_at;
}

/*
 * Remember the database whose slot a backend took (durable_my_slot), as
 * wkr_take_absent_slot does for the slots the launcher takes.
 */
static void
wkr_collect_handed_over(void)
{
	Oid			dboid;
	int64		checked_at;

	SpinLockAcquire(&durable_shared->mutex);
	dboid = durable_shared->handed_dboid;
	checked_at = durable_shared->handed_checked_at;
	durable_shared->handed_dboid = InvalidOid;
	SpinLockRelease(&durable_shared->mutex);
	if (OidIsValid(dboid))
		wkr_remember_absent(dboid, checked_at);
}

/*
 * Every slot is taken: give `dboid` (a database the launcher sweeps) the
 * slot of a database whose worker found no extension, and remember that
 * database's next check here; else, with take_unswept, the slot of one the
 * launcher does not sweep, which has no check to remember (it is looked at
 * again once it is swept).  NULL when there is none.
 */
static DurableDbSlot *
wkr_take_absent_slot(Oid dboid, bool take_unswept)
{
	DurableDbSlot *taken;
	Oid			absent_db;
	int64		checked_at;

	LWLockAcquire(durable_shared->lock, LW_EXCLUSIVE);
	taken = durable_db_slot_take_absent(dboid, take_unswept, &absent_db, &checked_at);
	LWLockRelease(durable_shared->lock);

	if (OidIsValid(absent_db) && checked_at != 0)
	{
		wkr_remember_absent(absent_db, checked_at);
		ereport(DEBUG1,
				(errmsg_internal("durable launcher: database %u takes the slot of database %u, which has no durable",
								 dboid, absent_db)));
	}
	else if (OidIsValid(absent_db))
		ereport(DEBUG1,
				(errmsg_internal("durable launcher: database %u takes the slot of database %u, which gets no worker",
								 dboid, absent_db)));
	return taken;
}

/*
 * Every slot is taken by a database with durable (or being checked): warn
 * that this one gets no worker, once until it gets a slot.  The launcher cannot
 * tell whether a database has durable before a worker looked, so the
 * warning names databases without it too, and says so.
 */
static void
wkr_warn_no_slot(const WkrDatabase *db)
{
	MemoryContext old;

	if (list_member_oid(wkr_warned_no_slot, db->oid))
		return;
	ereport(WARNING,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("durable cannot start a worker for database \"%s\"", NameStr(db->name)),
			 errdetail("durable tracks at most %d databases with the extension, and all are taken: "
					   "this database is not swept, nor checked for the extension, until one is free.",
					   durable_max_databases),
			 errhint("Raise \"durable.max_databases\" (it takes a server restart), or drop the extension where it is not used.")));
	old = MemoryContextSwitchTo(TopMemoryContext);
	wkr_warned_no_slot = lappend_oid(wkr_warned_no_slot, db->oid);
	MemoryContextSwitchTo(old);
}

/*
 * The database has a slot: its look from before it gave the slot away no
 * longer counts (since when it has been without durable still does), and it
 * is warned about again should it lose the slot and find none.
 */
static void
wkr_slot_found(Oid dboid)
{
	WkrAbsent  *absent = wkr_absent_find(dboid);

	if (absent != NULL)
		absent->given_away_at = 0;
	wkr_warned_no_slot = list_delete_oid(wkr_warned_no_slot, dboid);
}

/*
 * The slot of a database the launcher wants a worker in, assigned if
 * needed.  NULL, with *absent_until set, when the database was found
 * without durable, gave its slot away and is not due to be checked again.
 * When every slot is taken by a database with durable, warns (once until
 * the database gets a slot) and returns NULL.  A database found without durable is checked
 * again only with a free slot or one of another database without durable:
 * taking the slot of one not swept (a template in use) for that check
 * would take it at every look, and its backends would take back the slot the
 * check gives up, resetting its counters each time.  Creating durable
 * there makes the launcher forget it (wkr_forget_installed).
 */
static DurableDbSlot *
wkr_launcher_slot(const WkrDatabase *db, int64 now, int64 *absent_until)
{
	DurableDbSlot *slot = durable_db_slot(db->oid, false);
	bool		known_absent;

	*absent_until = 0;
	if (slot != NULL)
	{
		/* (its backend took it: durable was created there) */
		wkr_slot_found(db->oid);
		return slot;
	}
	/* A backend may have taken its slot just now. */
	wkr_collect_handed_over();
	*absent_until = wkr_absent_until(db->oid, now, &known_absent);
	if (*absent_until != 0)
		return NULL;
	if (wkr_free_slot_exists())
		slot = durable_db_slot(db->oid, true);
	if (slot == NULL)
		slot = wkr_take_absent_slot(db->oid, !known_absent);
	if (slot != NULL)
		wkr_slot_found(db->oid);
	else if (!known_absent)
		wkr_warn_no_slot(db);
	return slot;
}

/*
 * At launcher start: no worker registered by a previous launcher is known
 * to be starting any more.  One that still starts claims its slot with the
 * duplicate check, so forgetting it can at worst start a worker that exits
 * at once.
 */
static void
wkr_forget_stale_starts(void)
{
	int			i;

	LWLockAcquire(durable_shared->lock, LW_SHARED);
	for (i = 0; i < durable_max_databases; i++)
	{
		DurableDbSlot *slot = &durable_shared->slots[i];

		SpinLockAcquire(&slot->mutex);
		if (slot->worker_pid == 0)
			slot->worker_starting = false;
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(durable_shared->lock);
}

/* before_shmem_exit callback of the launcher: nobody may set its latch now. */
static void
wkr_launcher_exit(int code, Datum arg)
{
	SpinLockAcquire(&durable_shared->mutex);
	if (durable_shared->launcher_latch == MyLatch)
		durable_shared->launcher_latch = NULL;
	SpinLockRelease(&durable_shared->mutex);
}

/*
 * Every database in pg_database, in the current memory context.  Like
 * autovacuum's get_database_list: a heap scan of the shared catalog in a
 * short transaction.
 */
static List *
wkr_list_databases(void)
{
	MemoryContext caller = CurrentMemoryContext;
	List	   *dbs = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database form = (Form_pg_database) GETSTRUCT(tup);
		MemoryContext old = MemoryContextSwitchTo(caller);
		WkrDatabase *db = palloc(sizeof(WkrDatabase));

		db->oid = form->oid;
		db->name = form->datname;
		db->launchable = form->datallowconn && !form->datistemplate;
#ifdef DATCONNLIMIT_INVALID_DB
		/* A database whose DROP DATABASE was interrupted cannot be connected to. */
		if (form->datconnlimit == DATCONNLIMIT_INVALID_DB)
			db->launchable = false;
#endif
		dbs = lappend(dbs, db);
		MemoryContextSwitchTo(old);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	MemoryContextSwitchTo(caller);
	pgstat_report_stat(true);
	return dbs;
}

/*
 * Databases whose slot is in use with no worker running or starting: the
 * candidates for wkr_free_orphan_slots.  Collected before pg_database is
 * read, so that a slot assigned for a database created meanwhile cannot be
 * mistaken for an orphan (the database is committed before a backend can
 * connect to it and take a slot, so a later scan sees it).
 */
static List *
wkr_idle_slot_databases(void)
{
	List	   *oids = NIL;
	int			i;

	LWLockAcquire(durable_shared->lock, LW_SHARED);
	for (i = 0; i < durable_max_databases; i++)
	{
		DurableDbSlot *slot = &durable_shared->slots[i];
		bool		idle;

		if (slot->dboid == InvalidOid)
			continue;
		SpinLockAcquire(&slot->mutex);
		idle = (slot->worker_pid == 0 && !slot->worker_starting);
		SpinLockRelease(&slot->mutex);
		if (idle)
			oids = lappend_oid(oids, slot->dboid);
	}
	LWLockRelease(durable_shared->lock);
	return oids;
}

/* Free the slots of candidates that are no longer in pg_database. */
static void
wkr_free_orphan_slots(List *candidates, List *dbs)
{
	ListCell   *lc;

	foreach(lc, candidates)
	{
		Oid			dboid = lfirst_oid(lc);

		if (!wkr_database_listed(dbs, dboid))
		{
			ereport(DEBUG1,
					(errmsg_internal("durable launcher: freeing the slot of dropped database %u",
									 dboid)));
			durable_db_slot_free(dboid);
		}
	}
}

/*
 * Register a worker for db and track its handle.  Returns false when the
 * postmaster has no room for it (warning once per database, once that has
 * lasted WKR_NO_ROOM_WARN_MS).
 */
static bool
wkr_start_worker(const WkrDatabase *db, int64 now)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	MemoryContext old;
	int64		started_at;
	bool		ok;

	MemSet(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "durable", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "durable_worker_main", BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "durable worker for database %s", NameStr(db->name));
	strlcpy(worker.bgw_type, "durable worker", BGW_MAXLEN);
	worker.bgw_main_arg = ObjectIdGetDatum(db->oid);
	worker.bgw_notify_pid = MyProcPid;

	/* The handle must outlive this loop iteration. */
	old = MemoryContextSwitchTo(TopMemoryContext);
	/* Before the worker can run and check: see wkr_workers_in_flight. */
	started_at = durable_clock_us();
	ok = RegisterDynamicBackgroundWorker(&worker, &handle);
	if (ok)
	{
		wkr_tracked[wkr_ntracked].dboid = db->oid;
		wkr_tracked[wkr_ntracked].handle = handle;
		wkr_tracked[wkr_ntracked].started_at = started_at;
		wkr_ntracked++;
		wkr_warned_no_worker = list_delete_oid(wkr_warned_no_worker, db->oid);
		wkr_no_room_since = 0;
	}
	else
	{
		ereport(DEBUG1,
				(errmsg_internal("durable launcher: no background worker slot for database \"%s\"",
								 NameStr(db->name))));
		if (wkr_no_room_since == 0 ||
			now - wkr_no_room_last > (int64) WKR_NO_ROOM_GAP_MS * 1000)
			wkr_no_room_since = now;
		wkr_no_room_last = now;
		if (now - wkr_no_room_since >= (int64) WKR_NO_ROOM_WARN_MS * 1000 &&
			!list_member_oid(wkr_warned_no_worker, db->oid))
		{
			ereport(WARNING,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("durable could not start a worker for database \"%s\"", NameStr(db->name)),
					 errdetail("All background worker slots have been in use for %d s; durable will try again.",
							   (int) ((now - wkr_no_room_since) / USECS_PER_SEC)),
					 errhint("You may need to increase \"max_worker_processes\".")));
			wkr_warned_no_worker = lappend_oid(wkr_warned_no_worker, db->oid);
		}
	}
	MemoryContextSwitchTo(old);
	if (ok)
		ereport(DEBUG1,
				(errmsg_internal("durable launcher: registered a worker for database \"%s\"",
								 NameStr(db->name))));
	return ok;
}

/* Whether the launcher still tracks a worker of the database. */
static bool
wkr_is_tracked(Oid dboid)
{
	int			i;

	for (i = 0; i < wkr_ntracked; i++)
	{
		if (wkr_tracked[i].dboid == dboid)
			return true;
	}
	return false;
}

/*
 * Stop the worker of a database that no longer takes one (made a template,
 * or closed to connections, after its worker started): it would make
 * CREATE DATABASE ... TEMPLATE fail for every role that does not own it.
 * A worker that an earlier launcher started (this one restarted since) has
 * no handle here: it is signalled through its slot, as the utility hook
 * stops one.  Once no worker runs there, the slot is marked not swept: a
 * database that gets a worker may take it when every slot is taken
 * (durable_db_slot_take_absent).  Without that, durable in template1 (the
 * usual way to give it to every new database), or a database with durable
 * made a template, held a slot for good, and with slots short a database
 * that has durable was never swept.
 */
static void
wkr_stop_unlaunchable(Oid dboid)
{
	int			i;
	bool		tracked = false;
	pid_t		pid = 0;
	DurableDbSlot *slot = durable_db_slot(dboid, false);

	if (slot != NULL && durable_slot_lock_for(slot, dboid))
	{
		if (slot->worker_pid != 0 || slot->worker_starting)
		{
			slot->worker_stop_asked = true;
			pid = slot->worker_pid;
		}
		else
			slot->not_swept = true;
		SpinLockRelease(&slot->mutex);
	}
	for (i = 0; i < wkr_ntracked; i++)
	{
		if (wkr_tracked[i].dboid != dboid)
			continue;
		tracked = true;
		TerminateBackgroundWorker(wkr_tracked[i].handle);
	}
	if (!tracked && pid != 0)
		(void) kill(pid, SIGTERM);
}

/*
 * Forget the workers that exited, and hold their database's next worker
 * back for the restart delay.
 */
static void
wkr_reap_workers(int64 now)
{
	int			i = 0;

	while (i < wkr_ntracked)
	{
		pid_t		pid;
		BgwHandleStatus status = GetBackgroundWorkerPid(wkr_tracked[i].handle, &pid);
		DurableDbSlot *slot;

		if (status == BGWH_POSTMASTER_DIED)
			proc_exit(1);
		if (status != BGWH_STOPPED)
		{
			i++;
			continue;
		}

		slot = durable_db_slot(wkr_tracked[i].dboid, false);
		if (slot != NULL && durable_slot_lock_for(slot, wkr_tracked[i].dboid))
		{
			slot->worker_starting = false;
			if (slot->worker_pid == 0)
			{
				/*
				 * A worker that found no extension did its job (also when
				 * an install has cleared that record since); one that
				 * durable stopped on purpose did not fail.
				 */
				if (slot->worker_passed || slot->extension_absent ||
					slot->installed_since_claim)
					slot->worker_failed_starts = 0;
				else if (!slot->worker_stop_asked)
					slot->worker_failed_starts = Min(slot->worker_failed_starts + 1, 100);
				/*
				 * A stop someone asked for is not delayed again here: its
				 * asker blocks the slot for as long as it needs (a command
				 * that needs the database to itself lifts its block when it
				 * is over, which may be before this reap), and the worker's
				 * exit callback already held the next one back.
				 */
				if (!slot->installed_since_claim && !slot->worker_stop_asked)
					slot->worker_blocked_until = Max(slot->worker_blocked_until,
													 now + wkr_restart_delay_us(slot->worker_failed_starts));
				slot->worker_passed = false;
				slot->worker_stop_asked = false;
			}
			SpinLockRelease(&slot->mutex);
		}
		pfree(wkr_tracked[i].handle);
		wkr_tracked[i] = wkr_tracked[--wkr_ntracked];
	}
}

/*
 * Workers started less than WKR_IN_FLIGHT_MAX_MS ago and not yet known to
 * stay: those that have not checked their database for the extension yet,
 * and those that found none and are on their way out.  Each holds a
 * background worker slot meanwhile.
 */
static int
wkr_workers_in_flight(int64 now)
{
	int			n = 0;
	int			i;

	for (i = 0; i < wkr_ntracked; i++)
	{
		DurableDbSlot *slot;
		bool		in_flight = true;

		if (now - wkr_tracked[i].started_at >= (int64) WKR_IN_FLIGHT_MAX_MS * 1000)
			continue;
		slot = durable_db_slot(wkr_tracked[i].dboid, false);
		if (slot != NULL && durable_slot_lock_for(slot, wkr_tracked[i].dboid))
		{
			in_flight = slot->worker_checked_at < wkr_tracked[i].started_at ||
				slot->extension_absent;
			SpinLockRelease(&slot->mutex);
		}
		if (in_flight)
			n++;
	}
	return n;
}

/*
 * One look at every database: free orphaned slots, start the workers that
 * are missing.  Returns when the launcher should look again at the latest.
 * Runs in the launcher's loop memory context.
 */
static int64
wkr_launch_workers(int64 now)
{
	int64		next = now + (int64) durable_naptime_ms * 1000;
	List	   *idle = wkr_idle_slot_databases();
	List	   *dbs = wkr_list_databases();
	ListCell   *lc;
	int			in_flight = wkr_workers_in_flight(now);
	int			max_in_flight = Max(1, Min(WKR_MAX_IN_FLIGHT, max_worker_processes / 4));
	bool		no_room = false;
	int			ndbs = list_length(dbs);
	int			first = 0;
	int			k;

	wkr_free_orphan_slots(idle, dbs);
	wkr_forget_dropped_absent(dbs);
	wkr_collect_handed_over();
	wkr_forget_installed();

	/*
	 * After a look that found no room, the next starts with the database
	 * after the one that found none: in a lasting shortage, every database
	 * is tried (and named) in turn, not the first in pg_database again and
	 * again.
	 */
	foreach(lc, dbs)
	{
		if (((WkrDatabase *) lfirst(lc))->oid == wkr_no_room_db)
			first = foreach_current_index(lc) + 1;
	}
	wkr_no_room_db = InvalidOid;

	for (k = 0; k < ndbs; k++)
	{
		WkrDatabase *db = (WkrDatabase *) list_nth(dbs, (first + k) % ndbs);
		DurableDbSlot *slot;
		bool		start = false;
		int64		absent_until;
		bool		absent;
		int64		checked_at;
		int64		recheck;

		/*
		 * A tracked worker that has already given up its slot but not yet
		 * been reaped must be reaped first, so that the restart delay
		 * applies.
		 */
		if (!db->launchable)
		{
			wkr_stop_unlaunchable(db->oid);
			continue;
		}
		if (wkr_is_tracked(db->oid))
			continue;

		/*
		 * As many workers as slots: each has a slot of its own (or gave it
		 * up and waits to be reaped), so none is left for this database.
		 */
		if (wkr_ntracked >= durable_max_databases)
		{
			bool		known_absent;

			/*
			 * Workers still checking their database may give their slots
			 * up in a moment (at a server start, the checks of databases
			 * without durable take every slot when there are few): look
			 * again then before warning.
			 */
			if (in_flight > 0)
				next = Min(next, now + (int64) WKR_START_PACE_MS * 1000);
			else if (durable_db_slot(db->oid, false) == NULL &&
					 wkr_absent_until(db->oid, now, &known_absent) == 0 && !known_absent)
				wkr_warn_no_slot(db);
			continue;
		}
		/* After a failed registration, the others would fail too. */
		if (no_room)
			continue;
		if (in_flight >= max_in_flight)
		{
			next = Min(next, now + (int64) WKR_START_PACE_MS * 1000);
			continue;
		}
		slot = wkr_launcher_slot(db, now, &absent_until);
		if (slot == NULL)
		{
			if (absent_until != 0)
				next = Min(next, absent_until);
			continue;
		}

		/* A backend may have given the slot to its own database since. */
		if (!durable_slot_lock_for(slot, db->oid))
			continue;
		absent = slot->extension_absent;
		checked_at = slot->worker_checked_at;
		SpinLockRelease(&slot->mutex);

		/* (the hash of absences is looked up with no spinlock held) */
		recheck = absent ? wkr_absent_recheck_at(db->oid, checked_at) : 0;
		if (!absent && checked_at != 0)
			wkr_absent_forget(db->oid);

		if (!durable_slot_lock_for(slot, db->oid))
			continue;
		slot->not_swept = false;
		if (slot->worker_pid == 0 && !slot->worker_starting)
		{
			if (slot->worker_blocked_until > now)
				next = Min(next, slot->worker_blocked_until);
			else if (slot->extension_absent != absent || slot->worker_checked_at != checked_at)
				next = Min(next, now + (int64) WKR_START_PACE_MS * 1000);	/* (changed meanwhile) */
			else if (recheck > now)
				next = Min(next, recheck);
			else
			{
				slot->worker_starting = true;
				start = true;
			}
		}
		SpinLockRelease(&slot->mutex);

		if (start)
			in_flight++;
		if (start && !wkr_start_worker(db, now))
		{
			no_room = true;
			wkr_no_room_db = db->oid;
			if (durable_slot_lock_for(slot, db->oid))
			{
				slot->worker_starting = false;
				slot->worker_blocked_until = now + wkr_restart_delay_us(0);
				SpinLockRelease(&slot->mutex);
			}
			next = Min(next, now + wkr_restart_delay_us(0));
		}
	}
	return next;
}

/*
 * Entry point of the launcher.
 */
void
durable_launcher_main(Datum main_arg)
{
	MemoryContext loop_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* No database: only the shared catalogs (pg_database) are readable. */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	wkr_init_wait_event("DurableLauncherMain");

	before_shmem_exit(wkr_launcher_exit, (Datum) 0);
	SpinLockAcquire(&durable_shared->mutex);
	durable_shared->launcher_latch = MyLatch;
	SpinLockRelease(&durable_shared->mutex);
	wkr_forget_stale_starts();
	wkr_tracked = MemoryContextAllocZero(TopMemoryContext,
										 sizeof(WkrTracked) * durable_max_databases);

	ereport(LOG, (errmsg("durable launcher started")));

	loop_cxt = AllocSetContextCreate(TopMemoryContext, "durable launcher loop",
									 ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		int64		now;
		int64		next;
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		now = durable_clock_us();
		old = MemoryContextSwitchTo(loop_cxt);
		wkr_reap_workers(now);
		next = wkr_launch_workers(now);
		MemoryContextSwitchTo(old);
		MemoryContextReset(loop_cxt);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 wkr_ms_until(durable_clock_us(), next), wkr_wait_event);
		ResetLatch(MyLatch);
	}
}

/* ========================================================================
 * Per-database worker
 * ========================================================================
 */

/* Set the launcher's latch: it looks at the databases again now. */
static void
wkr_set_launcher_latch(void)
{
	Latch	   *latch;

	SpinLockAcquire(&durable_shared->mutex);
	latch = durable_shared->launcher_latch;
	SpinLockRelease(&durable_shared->mutex);
	/* A latch outlives its process; a stale one only costs a spurious wake. */
	if (latch != NULL)
		SetLatch(latch);
}

/*
 * before_shmem_exit callback of a worker: give up the slot, hold the next
 * worker back for the restart delay, and wake the launcher.  The launcher
 * that started this worker sets the delay too, with its backoff
 * (wkr_reap_workers), and hears of the exit from the postmaster; a
 * launcher started since does not know this worker: without the delay it
 * started the next one at once, and without the wake only at its next
 * look, up to a naptime later (found by review, 2026-12-06).
 */
static void
wkr_worker_exit(int code, Datum arg)
{
	Oid			dboid = DatumGetObjectId(arg);
	bool		gave_up = false;

	if (wkr_slot == NULL || !durable_slot_lock_for(wkr_slot, dboid))
		return;
	if (wkr_slot->worker_pid == MyProcPid)
	{
		wkr_slot->worker_pid = 0;
		if (!wkr_slot->installed_since_claim)
			wkr_slot->worker_blocked_until = Max(wkr_slot->worker_blocked_until,
												 durable_clock_us() + wkr_restart_delay_us(0));
		gave_up = true;
	}
	SpinLockRelease(&wkr_slot->mutex);
	if (gave_up)
		wkr_set_launcher_latch();
}

/*
 * Claim the database's slot for this worker.  Returns false when another
 * worker holds it or the slot is blocked (a DROP DATABASE or the like is
 * under way): this worker must exit.
 */
static bool
wkr_claim_slot(Oid dboid)
{
	int64		now = durable_clock_us();
	bool		claimed = false;

	/* A slot handed to another database since is not this worker's to touch */
	if (!durable_slot_lock_for(wkr_slot, dboid))
		return false;
	wkr_slot->worker_starting = false;
	if (wkr_slot->worker_pid == 0 && wkr_slot->worker_blocked_until <= now)
	{
		wkr_slot->worker_pid = MyProcPid;
		wkr_slot->worker_passed = false;
		wkr_slot->installed_since_claim = false;
		/*
		 * A stop asked of the worker before this one, which no launcher
		 * reaped (one started since), or of this one while it started, for
		 * a command that gave up: this worker runs, and its failure counts.
		 */
		wkr_slot->worker_stop_asked = false;
		claimed = true;
	}
	SpinLockRelease(&wkr_slot->mutex);
	return claimed;
}

/*
 * A database's count of CREATE EXTENSION durable commits
 * (wkr_wake_launcher), from its slot; 0 when the slot went to another.
 */
static uint32
wkr_slot_installs(DurableDbSlot *slot, Oid dboid)
{
	uint32		installs;

	if (!durable_slot_lock_for(slot, dboid))
		return 0;
	installs = slot->installs;
	SpinLockRelease(&slot->mutex);
	return installs;
}

/* The current database's count, from a backend; 0 when it has no slot. */
static uint32
wkr_my_installs(void)
{
	DurableDbSlot *slot = durable_db_slot(MyDatabaseId, false);

	return slot != NULL ? wkr_slot_installs(slot, MyDatabaseId) : 0;
}

/*
 * Record what a check of the extension found, for the launcher; installs
 * is wkr_slot_installs from before the check's transaction.  A
 * check that found none is not recorded, and false returned, when CREATE
 * EXTENSION durable has committed here since: the check may have looked
 * before that commit, and recording "absent" after the commit's wake
 * cleared it would keep the database without a worker until its next
 * check, durable.absent_recheck later or more.
 * (A commit whose wake comes after this record clears it itself.)
 */
static bool
wkr_record_check(bool present, uint32 installs)
{
	int64		now = durable_clock_us();
	bool		recorded = false;

	SpinLockAcquire(&wkr_slot->mutex);
	if (present || wkr_slot->installs == installs)
	{
		wkr_slot->extension_absent = !present;
		wkr_slot->worker_checked_at = now;
		if (present)
			wkr_slot->installed_since_claim = false;
		recorded = true;
	}
	SpinLockRelease(&wkr_slot->mutex);
	return recorded;
}

/*
 * Whether durable is installed in this database; if so, lock it against
 * DROP EXTENSION until the end of the caller's transaction.  DROP EXTENSION
 * takes the extension's lock before it deletes anything, so once we hold
 * our lock and find the extension still there, its tables stay until we
 * commit; without the lock a drop committing between the check and the
 * sweep's statements would make them fail.  Caller must be in a
 * transaction.
 */
static bool
wkr_lock_extension(void)
{
	for (;;)
	{
		Oid			extoid = get_extension_oid("durable", true);

		if (!OidIsValid(extoid))
			return false;
		LockDatabaseObject(ExtensionRelationId, extoid, 0, AccessShareLock);
		/* Taking the lock processed invalidations: this lookup is current. */
		if (get_extension_oid("durable", true) == extoid)
			return true;
	}
}

/*
 * Whether the extension exists in this database, in a transaction of its
 * own.  The first call also learns the database's name for the log.
 */
static bool
wkr_check_extension(void)
{
	bool		present;
	uint32		installs;

	do
	{
		installs = wkr_slot_installs(wkr_slot, MyDatabaseId);
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		present = wkr_lock_extension();
		if (!present)
			DURABLE_FAIL_POINT("extension_check");
		if (wkr_dbname == NULL)
		{
			char	   *name = get_database_name(MyDatabaseId);

			wkr_dbname = MemoryContextStrdup(TopMemoryContext, name ? name : "?");
		}
		PopActiveSnapshot();
		CommitTransactionCommand();
	} while (!wkr_record_check(present, installs));
	if (!present)
		DURABLE_FAIL_POINT("absent_recorded");
	return present;
}

/*
 * Exit so that the launcher starts a worker that connects with the
 * database's new settings of ALTER DATABASE/ROLE ... SET (db_settings.c).
 * Not a failure: no longer restart delay for the next worker.
 */
static void
wkr_exit_for_settings(void)
{
	ereport(LOG,
			(errmsg("durable worker for database \"%s\" restarting to take the settings of ALTER DATABASE or ALTER ROLE ... SET",
					wkr_dbname)));
	SpinLockAcquire(&wkr_slot->mutex);
	wkr_slot->worker_stop_asked = true;
	SpinLockRelease(&wkr_slot->mutex);
	proc_exit(0);
}

/* Exit because DROP EXTENSION removed durable from this database. */
static void
wkr_exit_dropped(void)
{
	ereport(LOG,
			(errmsg("durable worker for database \"%s\" stopping: the extension was dropped",
					wkr_dbname)));
	proc_exit(0);
}

/*
 * Whether this database's durable is the library's version.  If it is not
 * (new binaries installed, ALTER EXTENSION durable UPDATE not yet run), the
 * worker skips its passes and says so once, rather than failing on every
 * pass.  Caller must be in a transaction.
 */
static bool
wkr_schema_current(void)
{
	static bool warned = false;
	char	   *installed;

	if (durable_schema_current(&installed))
		return true;
	if (!warned)
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("durable worker for database \"%s\" is idle: the library is version %s but the database has durable %s",
						wkr_dbname, DURABLE_VERSION, installed),
				 errhint("Run ALTER EXTENSION durable UPDATE in this database.")));
	warned = true;
	return false;
}

/*
 * One sweep pass in a transaction of its own, in worker_spi's order.
 * Returns false when the extension is gone; *res says what it did.
 */
static bool
wkr_pass(bool scan_open, DurableSweepResult *res)
{
	bool		present;
	bool		as_owner = false;
	Oid			save_userid = InvalidOid;
	int			save_sec_context = 0;
	int64		started = durable_clock_us();
	uint32		installs = wkr_slot_installs(wkr_slot, MyDatabaseId);
	TimestampTz windows[DQ_NUM_QUEUES];

	memset(res, 0, sizeof(*res));
	/*
	 * The due-work windows go on from the database's previous worker: one
	 * of its own, starting 30 s back, would miss what came due between that
	 * worker's last pass and this one's first when naptime is long.
	 */
	SpinLockAcquire(&wkr_slot->mutex);
	memcpy(windows, wkr_slot->worker_windows, sizeof(windows));
	SpinLockRelease(&wkr_slot->mutex);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	debug_query_string = "durable sweep";
	pgstat_report_activity(STATE_RUNNING, "durable sweep");

	present = wkr_lock_extension();
	if (present && wkr_schema_current())
	{
		ConstraintsSetStmt *immediate = makeNode(ConstraintsSetStmt);

		/*
		 * SET CONSTRAINTS ALL IMMEDIATE: a deferred constraint trigger of
		 * yours on a journal then fires at the end of each statement, within
		 * the step's subtransaction, so that one record it refuses is passed
		 * over; at commit it would fail the whole pass, at every pass.
		 */
		immediate->deferred = false;
		AfterTriggerSetState(immediate);

		/*
		 * As durable's owner (the role its members belong to: the
		 * extension's, but after a pg_upgrade), as sweep() runs (SECURITY
		 * DEFINER): the pass fires triggers and foreign key actions on the
		 * journals, and references.c trusts the tables of the journals'
		 * owner.  As the bootstrap superuser, an owner no longer superuser
		 * (ALTER ROLE ... NOSUPERUSER, REASSIGN OWNED) would have its own
		 * trigger's code run with a superuser's rights.  Until the commit
		 * is done: what a trigger defers to it (a deferred constraint
		 * trigger after SET CONSTRAINTS ... DEFERRED, a WITH HOLD cursor)
		 * runs then.  An error ends the worker.
		 */
		GetUserIdAndSecContext(&save_userid, &save_sec_context);
		SetUserIdAndSecContext(durable_owner(),
							   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
		as_owner = true;
		durable_sweep_pass(scan_open, windows, res);
	}

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	if (as_owner)
		SetUserIdAndSecContext(save_userid, save_sec_context);
	debug_query_string = NULL;
	pgstat_report_stat(true);
	pgstat_report_activity(STATE_IDLE, NULL);

	/* Not recorded if durable was dropped and installed again meanwhile. */
	(void) wkr_record_check(present, installs);
	if (as_owner)
	{
		SpinLockAcquire(&wkr_slot->mutex);
		memcpy(wkr_slot->worker_windows, windows, sizeof(windows));
		SpinLockRelease(&wkr_slot->mutex);
	}
	if (present)
	{
		/* t/008_worker_pacing reads these lines. */
		ereport(DEBUG1,
				(errmsg_internal("durable worker: swept database \"%s\": %d expired, %d ambiguous, %d due, " INT64_FORMAT " purged; pass %.3f ms, open-record scans %s %.3f ms",
								 wkr_dbname, res->inbox_expired, res->outbox_ambiguous,
								 res->outbox_due, res->purged,
								 (double) (durable_clock_us() - started) / 1000.0,
								 res->scanned_open ? "ran" : "skipped",
								 (double) res->scan_us / 1000.0)));
	}
	return present;
}

/*
 * Entry point of a per-database worker; main_arg is the database's oid.
 */
void
durable_worker_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	MemoryContext pass_cxt;
	int64		last_pass;
	int64		next_pass;
	int64		next_open_scan = 0;
	bool		passed = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* The slot is gone when the database was dropped since the launcher looked. */
	wkr_slot = durable_db_slot(dboid, false);
	if (wkr_slot == NULL)
		proc_exit(0);
	before_shmem_exit(wkr_worker_exit, ObjectIdGetDatum(dboid));
	if (!wkr_claim_slot(dboid))
		proc_exit(0);

	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	wkr_init_wait_event("DurableWorkerMain");
	/* The sweep's statements are schema-qualified; this is belt and braces. */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION);
	/* Generic plans over a large backlog must not be JIT-compiled at every pass. */
	SetConfigOption("jit", "off", PGC_SUSET, PGC_S_SESSION);

	/*
	 * Defaults meant for the database's client sessions must not stop the
	 * sweep, which is maintenance, as autovacuum's is: under REPEATABLE READ
	 * or SERIALIZABLE a pass would fail on every expired lease a claimer took
	 * over while it ran, read-only it could change nothing, a statement or
	 * lock timeout would cut a large purge short, as a replica its deletes
	 * would skip the foreign keys that reference the journals, and with
	 * exit_on_error (which a database owner may set) every record a pass
	 * goes round would end the worker instead.
	 * (Overridden as autovacuum does, so ALTER DATABASE/ROLE ... SET cannot
	 * put them back.)
	 */
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("lock_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("idle_in_transaction_session_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("session_replication_role", "origin", PGC_SUSET, PGC_S_OVERRIDE);
	/* A record's failure, which a pass goes round (isolate.c), must not end the worker. */
	SetConfigOption("exit_on_error", "off", PGC_SUSET, PGC_S_OVERRIDE);
#if PG_VERSION_NUM >= 170000
	SetConfigOption("transaction_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
#endif

	/*
	 * ALTER DATABASE ... SET role (or session_authorization), which the
	 * database's owner may run, reaches the worker at its connection as it
	 * reaches the database's sessions: every pass would run as that role,
	 * and fail on durable's schema.  Back to the role it connected as (the
	 * lookup of a role name needs a transaction).
	 */
	StartTransactionCommand();
	SetConfigOption("session_authorization", GetUserNameFromId(GetAuthenticatedUserId(), false),
					PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("role", "none", PGC_SUSET, PGC_S_OVERRIDE);
	durable_db_settings_remember();
	CommitTransactionCommand();

	if (!wkr_check_extension())
	{
		ereport(DEBUG1,
				(errmsg_internal("durable worker: extension not installed in database \"%s\"",
								 wkr_dbname)));
		proc_exit(0);
	}
	ereport(LOG,
			(errmsg("durable worker started for database \"%s\"", wkr_dbname)));

	pass_cxt = AllocSetContextCreate(TopMemoryContext, "durable worker pass",
									 ALLOCSET_DEFAULT_SIZES);
	last_pass = durable_clock_us();
	next_pass = last_pass + (int64) durable_naptime_ms * 1000;
	for (;;)
	{
		int64		now;
		int64		next;
		MemoryContext old;
		DurableSweepResult res;
		bool		present;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (durable_db_settings_changed())
				wkr_exit_for_settings();
		}

		now = durable_clock_us();
		next = Min(next_pass, last_pass + (int64) durable_naptime_ms * 1000);
		if (now < next)
		{
			int			rc = WaitLatch(MyLatch,
									   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
									   wkr_ms_until(now, next), wkr_wait_event);

			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();

			/*
			 * Any wake may be DROP EXTENSION's (see wkr_wake_worker): look
			 * before sleeping again, also when a SIGHUP came too (one that
			 * came between the DROP's wake and this look shares its latch,
			 * and skipping the look kept the worker a naptime).
			 */
			if ((rc & WL_LATCH_SET) && !wkr_check_extension())
				wkr_exit_dropped();
			continue;
		}

		last_pass = now;
		old = MemoryContextSwitchTo(pass_cxt);
		present = wkr_pass(now >= next_open_scan, &res);
		MemoryContextSwitchTo(old);
		MemoryContextReset(pass_cxt);
		if (!present)
			wkr_exit_dropped();
		/*
		 * A finished pass ends a run of failures here, not only at the
		 * reap: a launcher started since this worker does not reap it, and
		 * the next worker's failure counted on from the old run (a restart
		 * 32 s after a pass, not 1 s; found by review, 2026-12-07).
		 */
		if (!passed)
		{
			SpinLockAcquire(&wkr_slot->mutex);
			wkr_slot->worker_passed = true;
			wkr_slot->worker_failed_starts = 0;
			SpinLockRelease(&wkr_slot->mutex);
			passed = true;
		}

		/*
		 * A full batch means more work is waiting.  Lost leases are
		 * recovered at once.  Retention is not urgent, and deleting a large
		 * backlog back to back competes with the bots for the disk and the
		 * CPU (the bot path's p99 went up fourfold while a million records
		 * were purged back to back; 2.2-fold with this rest): after a full
		 * purge batch the worker rests WKR_PURGE_REST times as long as the
		 * pass took.  The open-record scans rest by their own cost.
		 */
		now = durable_clock_us();
		if (res.scanned_open)
			next_open_scan = now + Min(res.scan_us * WKR_OPEN_SCAN_REST,
									   (int64) WKR_OPEN_SCAN_REST_MAX_MS * 1000);
		if (res.recovery_full)
			next_pass = next_open_scan = now;
		else if (res.purge_full)
			next_pass = now + (now - last_pass) * WKR_PURGE_REST;
		else
			next_pass = last_pass + (int64) durable_naptime_ms * 1000;
	}
}

/* ========================================================================
 * Utility hook
 * ========================================================================
 */

/* Whether the current user owns the database (superusers own everything). */
static bool
wkr_owns_database(Oid dboid)
{
#if PG_VERSION_NUM >= 160000
	return object_ownercheck(DatabaseRelationId, dboid, GetUserId());
#else
	return pg_database_ownercheck(dboid, GetUserId());
#endif
}

/*
 * Whether the current user may copy the database: CREATE DATABASE takes
 * any template from a role with CREATEDB, and any database from its owner
 * if the owner has CREATEDB.
 */
static bool
wkr_may_copy_database(Oid dboid)
{
	HeapTuple	tup;
	bool		template;

	if (!have_createdb_privilege())
		return false;
	if (wkr_owns_database(dboid))
		return true;
	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	if (!HeapTupleIsValid(tup))
		return false;
	template = ((Form_pg_database) GETSTRUCT(tup))->datistemplate;
	ReleaseSysCache(tup);
	return template;
}

/*
 * Lift the block wkr_stop_worker put on a database, once its command is
 * over, and let the launcher know.  A worker it starts now waits at its
 * connection for the lock the command holds until it commits.
 */
static void
wkr_unblock(Oid dboid, uint64 generation)
{
	durable_db_unblock(dboid, generation);
	wkr_set_launcher_latch();
}

/*
 * Wait until the worker of `dboid` (slot `slot`) is gone, signalling it to
 * stop, for up to WKR_STOP_WAIT_MS (then a WARNING).  A cancel of the
 * command ends the wait with its error.
 */
static void
wkr_await_worker_gone(DurableDbSlot *slot, Oid dboid, const char *dbname)
{
	int64		deadline = durable_clock_us() + (int64) WKR_STOP_WAIT_MS * 1000;
	pid_t		signalled = 0;

	for (;;)
	{
		pid_t		pid = 0;
		bool		starting = false;

		if (durable_slot_lock_for(slot, dboid))
		{
			pid = slot->worker_pid;
			starting = slot->worker_starting;
			/*
			 * Also a worker still starting, which finds the slot blocked
			 * and exits: its reap must neither count a failure nor hold
			 * the next back once the command lifted its block.
			 */
			if ((pid != 0 && pid != signalled) || starting)
				slot->worker_stop_asked = true;
			SpinLockRelease(&slot->mutex);
		}

		if (pid == 0 && !starting)
			return;
		if (pid != 0 && pid != signalled)
		{
			if (kill(pid, SIGTERM) == 0)
				ereport(DEBUG1,
						(errmsg_internal("durable: stopping the worker of database \"%s\"",
										 dbname)));
			signalled = pid;
		}
		if (durable_clock_us() >= deadline)
		{
			ereport(WARNING,
					(errmsg("durable worker of database \"%s\" did not stop within %d ms",
							dbname, WKR_STOP_WAIT_MS)));
			return;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Stop the worker of the named database before a command that needs the
 * database to itself, and keep new ones away for WKR_BLOCK_MS (the caller
 * lifts that sooner with wkr_unblock, and so does a cancel of the wait).
 * Does nothing for a missing database, the current one unless the command
 * copies it (PostgreSQL refuses to drop, rename or move the current
 * database, but copies it when no other session is connected to it), or one
 * the user may not act on (owns, or for a copy may copy: the command fails
 * anyway).  Returns the database blocked (its block's generation in
 * *generation, for wkr_unblock), or InvalidOid.
 */
static Oid
wkr_stop_worker(const char *dbname, bool copy, uint64 *generation)
{
	Oid			dboid;
	DurableDbSlot *slot;

	if (dbname == NULL || durable_shared == NULL)
		return InvalidOid;
	dboid = get_database_oid(dbname, true);
	if (!OidIsValid(dboid) || (dboid == MyDatabaseId && !copy) ||
		!(copy ? wkr_may_copy_database(dboid) : wkr_owns_database(dboid)))
		return InvalidOid;
	/*
	 * A database without a slot has no worker, but the launcher may make
	 * it one (a copy of a template with durable, which it has not looked
	 * at yet) before the command locks the database: the block waits for
	 * that slot.
	 */
	slot = durable_db_block(dboid, durable_clock_us() + (int64) WKR_BLOCK_MS * 1000, generation);
	if (slot == NULL)
		return dboid;

	PG_TRY();
	{
		wkr_await_worker_gone(slot, dboid, dbname);
	}
	PG_CATCH();
	{
		/* The command will not run: the database keeps its worker. */
		wkr_unblock(dboid, *generation);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return dboid;
}

/* The value of a DefElem option of a CREATE/ALTER DATABASE, or NULL. */
static const char *
wkr_option(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, name) == 0 && def->arg != NULL)
			return defGetString(def);
	}
	return NULL;
}

/*
 * Whether a DROP statement names the durable extension, or its schema
 * (which takes the extension with it: CASCADE).
 */
static bool
wkr_drops_durable(DropStmt *stmt)
{
	ListCell   *lc;

	if (stmt->removeType != OBJECT_EXTENSION && stmt->removeType != OBJECT_SCHEMA)
		return false;
	foreach(lc, stmt->objects)
	{
		Node	   *name = (Node *) lfirst(lc);

		if (IsA(name, String) && strcmp(strVal(name), "durable") == 0)
			return true;
	}
	return false;
}

/* Wake the launcher: durable was just installed in this database. */
static void
wkr_wake_launcher(void)
{
	DurableDbSlot *slot = durable_my_slot();
	Latch	   *latch;

	if (slot != NULL && durable_slot_lock_for(slot, MyDatabaseId))
	{
		slot->extension_absent = false;
		slot->installs++;
		/* Nothing else can block a database we are connected to. */
		slot->worker_blocked_until = 0;
		slot->worker_failed_starts = 0;
		/*
		 * A worker that found no extension before this commit may still be
		 * on its way out: its exit must not block the slot again.
		 */
		slot->installed_since_claim = true;
		SpinLockRelease(&slot->mutex);
	}
	/*
	 * Named for the launcher too: with every slot taken, the database may
	 * have none, its next check kept in the launcher's memory.
	 */
	SpinLockAcquire(&durable_shared->mutex);
	latch = durable_shared->launcher_latch;
	if (OidIsValid(durable_shared->installed_dboid) &&
		durable_shared->installed_dboid != MyDatabaseId)
		durable_shared->installed_more = true;
	durable_shared->installed_dboid = MyDatabaseId;
	/* A backend took our slot, checked before this install: not absent. */
	if (durable_shared->handed_dboid == MyDatabaseId)
		durable_shared->handed_dboid = InvalidOid;
	SpinLockRelease(&durable_shared->mutex);
	/* A latch outlives its process; a stale one only costs a spurious wake. */
	if (latch != NULL)
		SetLatch(latch);
}

/*
 * Durable was just dropped here: wake this database's worker, and when it
 * is still gone (wkr_absent_at_commit) record it absent for the launcher,
 * which gives only slots recorded absent or not swept to other databases.
 * The record hands the slot on at once; without it, that of a database no
 * worker ever checks (a template: a CREATE and DROP EXTENSION there took a
 * slot) waited for the launcher to mark it not swept.  Not recorded when
 * CREATE EXTENSION durable committed here since (installs changed), as
 * wkr_record_check does.
 */
static void
wkr_wake_worker(void)
{
	DurableDbSlot *slot = durable_db_slot(MyDatabaseId, false);
	pid_t		pid;
	PGPROC	   *proc;
	int64		now = durable_clock_us();

	if (slot == NULL || !durable_slot_lock_for(slot, MyDatabaseId))
		return;
	if (wkr_absent_at_commit && slot->installs == wkr_installs_at_drop)
	{
		slot->extension_absent = true;
		slot->worker_checked_at = now;
	}
	pid = slot->worker_pid;
	SpinLockRelease(&slot->mutex);
	if (pid == 0)
		return;
	proc = BackendPidGetProc(pid);
	if (proc != NULL)
		SetLatch(&proc->procLatch);
}

/*
 * Before commit, with the transaction's last word on durable: a CREATE or
 * DROP undone by ROLLBACK TO SAVEPOINT, or undone by the other in the same
 * transaction, must neither wake the launcher into a database without
 * durable nor record one with durable absent (the launcher would give its
 * slot away).  The install count is read while the drop is uncommitted, so
 * no CREATE can come in between (COMMIT PREPARED read it before the
 * command).
 */
static void
wkr_settle_wakes(void)
{
	bool		exists = OidIsValid(get_extension_oid("durable", true));

	if (!exists)
		wkr_wake_launcher_at_commit = false;
	wkr_absent_at_commit = !exists && wkr_wake_worker_at_commit;
	if (wkr_absent_at_commit && !wkr_installs_read)
		wkr_installs_at_drop = wkr_my_installs();
}

/*
 * Wakes requested by CREATE/DROP EXTENSION happen once the transaction has
 * committed, so that the woken process sees the change.
 */
static void
wkr_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			if (wkr_wake_launcher_at_commit || wkr_wake_worker_at_commit)
				wkr_settle_wakes();
			return;
		case XACT_EVENT_COMMIT:
			if (wkr_wake_launcher_at_commit)
				wkr_wake_launcher();
			if (wkr_wake_worker_at_commit)
				wkr_wake_worker();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			break;
		default:
			return;
	}
	wkr_wake_launcher_at_commit = false;
	wkr_wake_worker_at_commit = false;
	wkr_absent_at_commit = false;
	wkr_installs_read = false;
}

static void
wkr_register_callback(void)
{
	if (!wkr_callback_registered)
	{
		RegisterXactCallback(wkr_xact_callback, NULL);
		wkr_callback_registered = true;
	}
}

/* Durable is created by the current transaction: wake the launcher at commit. */
static void
wkr_installed_at_commit(void)
{
	wkr_register_callback();
	wkr_wake_launcher_at_commit = true;
}

/*
 * Durable is dropped by the current transaction: wake the worker at
 * commit, and record it absent then (wkr_settle_wakes, wkr_wake_worker).
 */
static void
wkr_dropped_at_commit(void)
{
	wkr_register_callback();
	wkr_wake_worker_at_commit = true;
}

/*
 * Whether a command that PostgreSQL runs only outside a transaction block
 * (DROP DATABASE, CREATE DATABASE, ALTER DATABASE SET TABLESPACE) gets
 * past that check.  When it does not, it fails anyway after this hook:
 * stopping the worker of its database would only take that database's
 * sweep away for up to WKR_BLOCK_MS.
 */
static bool
wkr_outside_block(ProcessUtilityContext context)
{
	return context == PROCESS_UTILITY_TOPLEVEL && !IsTransactionBlock();
}

/*
 * The ProcessUtility hook (see the file header), given a tree it may write
 * to when the guard looks at it.
 */
static void
wkr_process_utility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	volatile Oid dropped_db = InvalidOid;
	volatile Oid blocked_db = InvalidOid;
	uint64		block_generation = 0;	/* (set before the PG_TRY) */
	volatile bool durable_existed = false;
	volatile bool copy_into_journal = false;

	durable_ddl_guard(parsetree, context == PROCESS_UTILITY_TOPLEVEL);
	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			{
				DropdbStmt *stmt = (DropdbStmt *) parsetree;

				dropped_db = get_database_oid(stmt->dbname, true);
				if (wkr_outside_block(context))
					blocked_db = wkr_stop_worker(stmt->dbname, false, &block_generation);
				break;
			}
		case T_RenameStmt:
			{
				RenameStmt *stmt = (RenameStmt *) parsetree;

				/*
				 * (RenameDatabase's own checks beyond ownership, which
				 * wkr_stop_worker makes: a rename they refuse would only
				 * stop the worker)
				 */
				if (stmt->renameType == OBJECT_DATABASE && have_createdb_privilege() &&
					!OidIsValid(get_database_oid(stmt->newname, true)))
					blocked_db = wkr_stop_worker(stmt->subname, false, &block_generation);
				break;
			}
		case T_CreatedbStmt:
			{
				const char *template = wkr_option(((CreatedbStmt *) parsetree)->options,
												  "template");

				if (wkr_outside_block(context))
					blocked_db = wkr_stop_worker(template ? template : "template1", true,
											  &block_generation);
				break;
			}
		case T_AlterDatabaseStmt:
			{
				AlterDatabaseStmt *stmt = (AlterDatabaseStmt *) parsetree;

				if (wkr_option(stmt->options, "tablespace") != NULL && wkr_outside_block(context))
					blocked_db = wkr_stop_worker(stmt->dbname, false, &block_generation);
				break;
			}
			/*
			 * IF NOT EXISTS / IF EXISTS make these succeed for any role
			 * that can connect, changing nothing: only a statement that
			 * creates or drops durable wakes anyone (below).
			 */
		case T_CopyStmt:
			copy_into_journal = durable_load_hold_target(parsetree);
			break;
		case T_CreateExtensionStmt:
			/* (durable may come in as another extension's requirement: CASCADE) */
			durable_existed = OidIsValid(get_extension_oid("durable", true));
			break;
		case T_DropStmt:
			if (wkr_drops_durable((DropStmt *) parsetree))
				durable_existed = OidIsValid(get_extension_oid("durable", true));
			break;
		case T_DropOwnedStmt:
			/* (DROP OWNED BY durable's owner CASCADE drops it) */
			durable_existed = OidIsValid(get_extension_oid("durable", true));
			break;
		case T_TransactionStmt:

			/*
			 * A prepared transaction's commit callbacks ran (as PREPARE) in
			 * the backend that prepared it: whatever it admitted or enqueued
			 * wakes waiting claimers when this command commits.  A wake-up
			 * with nothing new is harmless.  (Databases without durable are
			 * left alone: waking would take a slot of shared memory.)
			 */
			if (((TransactionStmt *) parsetree)->kind != TRANS_STMT_COMMIT_PREPARED)
				break;
			durable_existed = OidIsValid(get_extension_oid("durable", true));
			/* (the drop it may commit is committed once the command returns) */
			wkr_installs_at_drop = wkr_my_installs();
			wkr_installs_read = true;
			wkr_register_callback();	/* which forgets it at the end */
			if (durable_existed)
			{
				durable_wake_at_commit(DQ_INBOX);
				durable_wake_at_commit(DQ_OUTBOX);
			}
			break;
		default:
			break;
	}

	PG_TRY();
	{
		if (prev_ProcessUtility)
			prev_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
									queryEnv, dest, qc);
	}
	PG_CATCH();
	{
		/* The command failed: the database keeps its worker after all. */
		if (OidIsValid(blocked_db))
			wkr_unblock(blocked_db, block_generation);
		PG_RE_THROW();
	}
	PG_END_TRY();

	/* A dropped database's slot is freed instead (below). */
	if (OidIsValid(blocked_db) && !OidIsValid(dropped_db))
		wkr_unblock(blocked_db, block_generation);

	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			if (OidIsValid(dropped_db))
				durable_db_slot_free(dropped_db);
			break;
		case T_CreateExtensionStmt:
			if (!durable_existed && OidIsValid(get_extension_oid("durable", true)))
				wkr_installed_at_commit();
			break;
		case T_ReassignOwnedStmt:
			durable_init_privs_reassigned((ReassignOwnedStmt *) parsetree);
			break;
		case T_CopyStmt:
			/* (after the COPY ran: one refused, by a role without INSERT, holds nothing) */
			if (copy_into_journal)
				durable_load_hold_take();
			break;
		case T_DropStmt:
		case T_DropOwnedStmt:
			/* (durable_existed: set above only for a statement that may drop durable) */
			if (durable_existed && !OidIsValid(get_extension_oid("durable", true)))
				wkr_dropped_at_commit();
			break;
		case T_TransactionStmt:

			/*
			 * The prepared transaction may have created or dropped durable:
			 * its commit callbacks ran at PREPARE, which wakes nobody.  The
			 * catalog snapshot of the look before the command predates the
			 * commit.
			 */
			if (((TransactionStmt *) parsetree)->kind == TRANS_STMT_COMMIT_PREPARED)
			{
				bool		exists;

				InvalidateCatalogSnapshot();
				exists = OidIsValid(get_extension_oid("durable", true));
				if (exists && !durable_existed)
					wkr_installed_at_commit();
				else if (!exists && durable_existed)
					wkr_dropped_at_commit();
			}
			break;
		default:
			break;
	}
}

/* The guard pins the names it looked up (ddl_guard.c): it needs a tree of its own. */
static void
wkr_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
				   bool readOnlyTree, ProcessUtilityContext context,
				   ParamListInfo params, QueryEnvironment *queryEnv,
				   DestReceiver *dest, QueryCompletion *qc)
{
	if (readOnlyTree && durable_ddl_guard_applies(pstmt->utilityStmt))
	{
		pstmt = copyObject(pstmt);
		readOnlyTree = false;
	}
	wkr_process_utility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
}

/*
 * Install the utility hook.  Called from _PG_init while preloading.
 */
void
durable_worker_install_hooks(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = wkr_ProcessUtility;
}
