/*-------------------------------------------------------------------------
 *
 * sweep.c
 *		The sweep pass (the worker's and sweep()'s): lease recovery, due-work
 *		announcements, retention (and purge()).
 *
 * A sweep pass, run by the background worker every durable.naptime or by
 * hand (sweep()), has four steps, each one statement bounded by
 * DURABLE_SWEEP_BATCH rows:
 *	1. expired inbox leases go back to pending (due now; token, owner and
 *	   attempts kept), or to dead when the record used its last attempt, so
 *	   that a message that kills its handler every time cannot loop forever;
 *	2. expired outbox leases (state sending) become unknown: the provider may
 *	   or may not have delivered the send, so it is never resent by itself;
 *	3. work that came due since the previous pass (pending inbox records,
 *	   pending and failed sends, whose not_before lies after their
 *	   created_at, i.e. deferred or retried work) is announced with one
 *	   NOTIFY durable_ready per kind, never one per record;
 *	4. retention: done inbox and sent outbox records older than
 *	   durable.retention are deleted, and expired permits dropped.
 *
 * Steps 1 and 2 are recovery.c's: fenced (a record is moved only while its
 * lease is still the lost one), never waiting for a row lock, each journal
 * in a subtransaction so that one record whose recovery fails does not stop
 * the others'.  instance_start() runs the same statements with "held by
 * this instance" in place of "expired".
 *
 * Retention deletes through the partial indexes inbox_done_at_idx
 * (done_at WHERE done_at IS NOT NULL) and outbox_sent_at_idx (sent_at WHERE
 * state = 'sent'), oldest first: the cost of a batch is the batch, whatever
 * the number of live records or of older backlog.  It deletes directly
 * (direct.c), skipping a record that a concurrent transaction holds (a
 * replay) after re-checking its state; a journal it cannot write directly
 * is purged by the same fencing statement shape (SKIP LOCKED, re-check).
 * One purge() call is one pass per journal in the caller's
 * transaction; to delete a large backlog without holding many row locks for
 * long, call it again (each call its own transaction) until it returns 0.
 *
 * "Due since the previous pass" uses a watermark (the worker's kept in its
 * database's slot, sweep()'s in durable.sweep_windows, or in its process
 * when another pass in progress holds those rows): the window is
 * (previous check, now], where the previous check is moved back to the
 * start of the oldest transaction that was open then and may journal work
 * (deferred work committed after its due time is announced when it is
 * seen), but never more than 30 s before the previous check
 * (sweep_announce_due).  Work still
 * unclaimed in an overlap is announced again.  Several sweepers each
 * announce with their own window;
 * a duplicate durable_ready is harmless, and a listener must re-check
 * anyway (a NOTIFY is a hint, not a queue).  A pass whose transaction
 * rolls back takes its NOTIFY and its window with it, and the next pass
 * announces that window: a worker copies its window into the slot only
 * after its commit (an error ends the worker), and sweep()'s row in
 * durable.sweep_windows rolls back with the call.  Only a sweep() that
 * announced with its own process's window (rows held by another pass,
 * REPEATABLE READ) keeps it through a rollback: a hint lost, never work.
 *
 * IDENTIFICATION
 *	  src/sweep.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "isolate.h"
#include "permit.h"
#include "sweep.h"

PG_FUNCTION_INFO_V1(durable_sweep);
PG_FUNCTION_INFO_V1(durable_purge);

/* purge()'s batch when the argument is NULL (the SQL default). */
#define SWEEP_PURGE_DEFAULT_BATCH	10000

/* Longest older_than purge() accepts (1000 years): keeps now - older_than in range. */
#define SWEEP_MAX_AGE_US	(INT64CONST(1000) * 36525 * USECS_PER_DAY / 100)

/*
 * Where the next due-work window of each journal starts for this process's
 * sweep() calls when it cannot use durable.sweep_windows (0: none yet).
 * The worker keeps its own in its database's slot, so that a worker
 * restarted goes on where the one before it ended.
 */
static TimestampTz sweep_windows[DQ_NUM_QUEUES];

/*
 * sweep()'s windows kept in the database, so that a scheduler connecting
 * anew for each call goes on where the previous call ended: the rows are
 * locked for the pass, never waiting (a row another pass in progress holds
 * is left to it), and written where the next window starts.  A row that is
 * missing (the unlogged table emptied by a crash, or rows deleted by hand)
 * is written anew, unless another pass wrote it first.
 */
#define SWEEP_WINDOWS_LOCK_SQL \
	"SELECT w.kind = 'outbox', w.next_from FROM ONLY durable.sweep_windows w" \
	" FOR NO KEY UPDATE SKIP LOCKED"
#define SWEEP_WINDOWS_SAVE_SQL \
	"UPDATE ONLY durable.sweep_windows w SET next_from = $2 WHERE w.kind = $1"
#define SWEEP_WINDOWS_ADD_SQL \
	"INSERT INTO durable.sweep_windows (kind, next_from)" \
	" SELECT $1, $2 WHERE NOT EXISTS" \
	"  (SELECT FROM ONLY durable.sweep_windows w WHERE w.kind = $1)" \
	" ON CONFLICT (kind) DO NOTHING"

/*
 * Work that came due in ($1, $2], counted for sweep_announce_due: inbox
 * records retried or deferred (due later than admitted; one is enough to
 * announce, and this scans every open record), and sends, on
 * outbox_not_before_idx.
 */
#define SWEEP_INBOX_DUE_SQL \
	"SELECT pg_catalog.count(*) FROM" \
	" (SELECT 1 FROM ONLY durable.inbox i" \
	"   WHERE " INBOX_OPEN_SCAN("i") " AND i.state = 'pending'" \
	"     AND i.not_before > $1 AND i.not_before <= $2" \
	"     AND i.not_before > i.created_at LIMIT 1) d"
#define SWEEP_OUTBOX_DUE_SQL \
	"SELECT pg_catalog.count(*) FROM" \
	" (SELECT 1 FROM ONLY durable.outbox o" \
	"   WHERE o.state = ANY (ARRAY['pending', 'failed']::pg_catalog.text[])" \
	"     AND o.not_before > $1 AND o.not_before <= $2" \
	"     AND o.not_before > o.created_at" \
	"   LIMIT " CppAsString2(DURABLE_SWEEP_BATCH) ") d"

/*
 * The start of the oldest transaction in this database, other than this
 * one, that has an xid (it may have journaled work not yet committed) or
 * is running a statement (it may be about to), or the preparation of the
 * oldest prepared one (its start is not kept).  A walsender streaming
 * changes and an autovacuum worker run "statements" that never journal
 * work: counted, a connected logical walsender (always active, with no
 * transaction start) held every window SWEEP_READY_LOOKBACK_US long.
 *
 * A statement reports itself active a moment before its transaction
 * starts and reports its start: that transaction begins at the statement's
 * start (query_start), not at an unknown time.  Taken for unknown, any
 * session starting statements at a high rate (a pool's health checks, an
 * isolation tester's lock polls) made a window now and then reach back its
 * longest, and work already announced was announced again.  Only without
 * an xid: a transaction that turned track_activities off and on again
 * shows no start but its latest statement's, and may have journaled work
 * before that one.
 */
#define SWEEP_OLDEST_WRITER_SQL \
	"SELECT pg_catalog.min(t) FROM" \
	" (SELECT COALESCE(a.xact_start," \
	"                   CASE WHEN a.backend_xid IS NULL THEN a.query_start END," \
	"                   '-infinity') AS t" \
	"   FROM pg_catalog.pg_stat_activity a" \
	"   WHERE a.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()" \
	"     AND (a.backend_xid IS NOT NULL" \
	"          OR (a.state OPERATOR(pg_catalog.=) 'active'" \
	"              AND a.wait_event_type IS DISTINCT FROM 'Extension'" \
	"              AND a.backend_type OPERATOR(pg_catalog.<>)" \
	"                  ALL (ARRAY['walsender', 'autovacuum worker']::pg_catalog.text[])))" \
	"     AND a.pid OPERATOR(pg_catalog.<>) pg_catalog.pg_backend_pid()" \
	"  UNION ALL" \
	"  SELECT '-infinity' FROM pg_catalog.pg_prepared_xacts p" \
	"   WHERE p.database OPERATOR(pg_catalog.=) pg_catalog.current_database()) w"

/* How far back an announcement window reaches at most. */
#define SWEEP_READY_LOOKBACK_US (30 * USECS_PER_SEC)

/*
 * When the oldest transaction of this database that may still journal
 * work began, or DT_NOEND if none: work it deferred may be due already, and
 * nobody saw it.  That is one with an xid, or a prepared one, or one
 * running a statement (a writer reads the clock for a due time before its
 * first write gives it an xid) but for a statement asleep in an extension's
 * wait (a claim waiting in the server journals nothing, and bots wait so
 * all the time: counted, they kept every window SWEEP_READY_LOOKBACK_US
 * long, and the same work was announced at every pass).  When it began is
 * not known of a prepared transaction (pg_prepared_xacts has the PREPARE's
 * time) nor with track_activities off (no xact_start, no query_start):
 * -infinity, which the window's clamp makes SWEEP_READY_LOOKBACK_US.  This
 * pass's own transaction is not counted.  Caller must be connected to SPI.
 */
static TimestampTz
sweep_oldest_writer(void)
{
	static SPIPlanPtr plan = NULL;
	bool		isnull;
	Datum		oldest;

	/*
	 * Under REPEATABLE READ or SERIALIZABLE the counts read the transaction's
	 * snapshot: a writer that committed since is neither seen nor open now,
	 * and when it began is not known.
	 */
	if (IsolationUsesXactSnapshot())
		return DT_NOBEGIN;
	/* A statement earlier in this transaction may have cached the activity table. */
	pgstat_clear_backend_activity_snapshot();
	durable_exec(durable_plan(&plan, SWEEP_OLDEST_WRITER_SQL, 0, NULL), NULL, NULL,
				 SPI_OK_SELECT, 1);
	oldest = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? DT_NOEND : DatumGetTimestampTz(oldest);
}

/*
 * Announce the work of one journal that came due in this pass's window, up
 * to now: `count_sql` ($1 since, $2 now) counts it (up to
 * DURABLE_SWEEP_BATCH), and when there is some, NOTIFY durable_ready
 * {"kind": kind} and wake the claimers waiting on `queue`.  Returns the
 * count.  Caller must be connected to SPI.
 *
 * The window starts where the previous one ended (*checked_at), however
 * long ago that was (passes far apart: a long naptime, a pass that waited
 * for a lock, a worker restarted); a first pass reaches
 * SWEEP_READY_LOOKBACK_US back.  The next one starts now
 * or, earlier, where `oldest_writer` began, but at most
 * SWEEP_READY_LOOKBACK_US back: a transaction still open may commit work
 * whose due time has passed.  Work still unclaimed in an overlap is
 * announced again.  A clock that went backwards gives one empty window,
 * not a second announcement of old work, and the next starts at the new
 * time.
 */
static int64
sweep_announce_due(TimestampTz *checked_at, TimestampTz now, TimestampTz oldest_writer,
				   SPIPlanPtr *plan, const char *count_sql, DurableQueue queue)
{
	static const Oid types[2] = {TIMESTAMPTZOID, TIMESTAMPTZOID};
	TimestampTz since = (*checked_at == 0) ? now - SWEEP_READY_LOOKBACK_US :
		Min(*checked_at, now);
	TimestampTz next = since;
	Datum		values[2];
	int64		due = 0;

	if (since < now)
	{
		values[0] = TimestampTzGetDatum(since);
		values[1] = TimestampTzGetDatum(now);
		durable_exec(durable_plan(plan, count_sql, 2, types),
					 values, NULL, SPI_OK_SELECT, 1);
		due = durable_col_int64(0, 1);
		next = now;
	}
	*checked_at = Min(next, Max(oldest_writer, next - SWEEP_READY_LOOKBACK_US));

	if (due > 0)
	{
		StringInfoData payload;

		initStringInfo(&payload);
		durable_json_str(&payload, "kind", durable_queue_names[queue]);
		durable_notify_json("durable_ready", &payload);
		pfree(payload.data);
		durable_wake_at_commit(queue);
	}
	return due;
}

/*
 * When this process last warned that durable_delete_check forbade deletes
 * from a table, found a table it needs locked, or failed (durable_clock_us();
 * each kind at most every SWEEP_UNSAFE_WARN_MS).
 */
typedef struct SweepCheckWarned
{
	int64		unsafe;
	int64		busy;
	int64		failed;
} SweepCheckWarned;

/* Where a process's purge resumes (sweep_purge_from). */
typedef struct SweepResume
{
	TimestampTz from;			/* finish time of the last record deleted */
	TransactionId xid;			/* the (sub)transaction that deleted it;
								 * FrozenTransactionId once seen committed */
	int64		set_at;			/* durable_clock_us() when it was set */
	int64		full_walk_at;	/* durable_clock_us() of the last walk from the oldest */
} SweepResume;

/*
 * A journal's retention purge: how to delete its finished records directly
 * (direct.c) and, when it cannot be written directly, the statements that
 * do it.  The batch and candidate statements take $1 the cutoff, $2 the
 * limit, $3 the keys to pass over (an array) and $4 where the records not
 * passed over by the mark begin (durable_skip_from), and their
 * %s the journal's foreign-key guards (durable_delete_check) on the candidate
 * alias c.
 */
typedef struct SweepJournal
{
	const char *name;			/* schema-qualified, for the guards and messages */
	/* -1: use the statements */
	int64		(*purge_direct) (TimestampTz from, TimestampTz cutoff, int64 limit,
								 TimestampTz *last);
	const char *batch_sql;		/* deletes up to $2 records, returning
								 * their finish times */
	SPIPlanPtr	batch_plan;		/* cached while no key needs guarding */
	const char *candidates_sql; /* key and finish time of up to $2 records,
								 * oldest first */
	SPIPlanPtr	candidates_plan;
	const char *delete_keys_sql;	/* deletes the records of keys $2 (an
									 * array), never waiting; returns the key,
									 * finish time and whether it went of each
									 * record it locked */
	SPIPlanPtr	delete_keys_plan;
	DurableQueue queue;
	int64		held;			/* this pass: records it kept */
	DurableSkipList skip;		/* records whose delete failed lately */
	SweepResume pass_resume;	/* where this process's passes resume */
	SweepResume call_resume;	/* where its next purge() call resumes */
	SweepCheckWarned warned;	/* this process's last WARNINGs of its check */
	char	   *guards;			/* this pass's (or call's) guards, from
								 * sweep_pass_may_delete or
								 * sweep_call_may_delete */
	List	   *guard_relations;	/* what a statement with them may read */
} SweepJournal;

/*
 * A record whose delete fails (a trigger that raises, a cascade that another
 * key refuses) is passed over by this process's later batches for
 * DURABLE_SWEEP_SKIP_RETRY_MS, then tried again (its cause may be gone).
 * Without this, every pass met it again: the batch failed, its records
 * were searched for the one that fails, and the same WARNING was logged,
 * every naptime.  At most SWEEP_SKIP_MAX per journal are remembered one by one;
 * past that, the newest failure's finish time is the mark (DurableSkipList).
 */
#define SWEEP_SKIP_MAX			1000

/*
 * The delete of listed records (table, key column, finish-time column,
 * finished state): $1 the cutoff, $2 the keys.  It reports every record it
 * locked, and whether that record went: one locked and not deleted was kept
 * by a BEFORE DELETE trigger (sweep_remember_held).  Telling them in the
 * statement that locked them leaves out a record another transaction held
 * and let go in the meantime.  The ARRAY() keeps the delete a probe of the
 * key's index (RECOVERY_INBOX_SQL's reason).
 */
#define SWEEP_DELETE_KEYS_SQL(table, key, finished_at, state) \
	"WITH locked AS MATERIALIZED (" \
	" SELECT c." key ", c." finished_at " FROM ONLY " table " c" \
	"  WHERE c." key " = ANY ($2) AND c.state = '" state "' AND c." finished_at " < $1" \
	"  FOR UPDATE SKIP LOCKED)," \
	" gone AS (" \
	" DELETE FROM ONLY " table " d" \
	"  WHERE d." key " = ANY (ARRAY(SELECT l." key " FROM locked l))" \
	"    AND d.state = '" state "' AND d." finished_at " < $1" \
	"  RETURNING d." key ")" \
	" SELECT l." key ", l." finished_at ", g." key " IS NOT NULL" \
	"   FROM locked l LEFT JOIN gone g ON g." key " = l." key

static SweepJournal sweep_journals[] = {
	{
		.name = "durable.inbox",
		.purge_direct = durable_inbox_purge_direct,
		.batch_sql = "DELETE FROM ONLY durable.inbox d"
		" WHERE d.id = ANY (ARRAY(SELECT c.id FROM ONLY durable.inbox c"
		"                         WHERE c.done_at < $1 AND c.state = 'done'"
		"                           AND c.done_at >= $4 AND c.id <> ALL ($3)%s"
		"                         ORDER BY c.done_at LIMIT $2"
		"                         FOR UPDATE SKIP LOCKED))"
		"   AND d.state = 'done' AND d.done_at < $1"
		" RETURNING d.done_at",
		.candidates_sql = "SELECT c.id, c.done_at FROM ONLY durable.inbox c"
		" WHERE c.done_at < $1 AND c.state = 'done'"
		"   AND c.done_at >= $4 AND c.id <> ALL ($3)%s"
		" ORDER BY c.done_at LIMIT $2",
		.delete_keys_sql = SWEEP_DELETE_KEYS_SQL("durable.inbox", "id", "done_at", "done"),
		.queue = DQ_INBOX,
		.skip = DURABLE_SKIP_LIST(INT8OID, SWEEP_SKIP_MAX, DURABLE_SWEEP_SKIP_RETRY_MS),
	},
	{
		.name = "durable.outbox",
		.purge_direct = durable_outbox_purge_direct,
		.batch_sql = "DELETE FROM ONLY durable.outbox d"
		" WHERE d.key = ANY (ARRAY(SELECT c.key FROM ONLY durable.outbox c"
		"                          WHERE c.state = 'sent' AND c.sent_at < $1"
		"                            AND c.sent_at >= $4 AND c.key <> ALL ($3)%s"
		"                          ORDER BY c.sent_at LIMIT $2"
		"                          FOR UPDATE SKIP LOCKED))"
		"   AND d.state = 'sent' AND d.sent_at < $1"
		" RETURNING d.sent_at",
		.candidates_sql = "SELECT c.key, c.sent_at FROM ONLY durable.outbox c"
		" WHERE c.state = 'sent' AND c.sent_at < $1"
		"   AND c.sent_at >= $4 AND c.key <> ALL ($3)%s"
		" ORDER BY c.sent_at LIMIT $2",
		.delete_keys_sql = SWEEP_DELETE_KEYS_SQL("durable.outbox", "key", "sent_at", "sent"),
		.queue = DQ_OUTBOX,
		.skip = DURABLE_SKIP_LIST(TEXTOID, SWEEP_SKIP_MAX, DURABLE_SWEEP_SKIP_RETRY_MS),
	},
};

static Oid
sweep_key_array_type(const SweepJournal *j)
{
	return j->skip.key_type == INT8OID ? INT8ARRAYOID : TEXTARRAYOID;
}

/* How long a pass's statement with guards waits for a lock. */
#define SWEEP_GUARD_LOCK_TIMEOUT_MS 1000

/*
 * Run a journal's batch or candidates statement (`sql`) for up to `limit`
 * records finished before cutoff and not before `from`, passing over those
 * of `skip` (NULL: none).  Its %s takes the journal's foreign-key guards, which the
 * pass's (or call's) delete check found (j->guards); its plan is cached in
 * *plan only while there are none.
 */
static void
sweep_journal_exec(const SweepJournal *j, const char *sql, SPIPlanPtr *plan,
				   TimestampTz cutoff, int64 limit, const DurableSkipList *skip,
				   TimestampTz from, int expected)
{
	Oid			types[4] = {TIMESTAMPTZOID, INT8OID, sweep_key_array_type(j), TIMESTAMPTZOID};
	Datum		values[4];
	char	   *guards = j->guards;
	volatile int rc;

	values[0] = TimestampTzGetDatum(cutoff);
	values[1] = Int64GetDatum(limit);
	values[2] = skip ? durable_skip_array(skip) : durable_key_array(NULL, 0, j->skip.key_type);
	values[3] = TimestampTzGetDatum(skip ? Max(durable_skip_from(skip), from) : from);
	if (guards[0] == '\0')
		durable_exec(durable_plan(plan, psprintf(sql, ""), 4, types),
					 values, NULL, expected, 0);
	else
	{
		char	   *guarded = psprintf(sql, guards);
		int			nestlevel = NewGUCNestLevel();
		MemoryContext cxt = CurrentMemoryContext;

		/*
		 * A pass waits for no lock on a table of yours (the check takes its
		 * locks without waiting), and the guards' tables are locked by the
		 * check already: a wait here is for a relation the guards' names
		 * came to mean since (a schema renamed), which its owner could hold
		 * for good.  Its timeout is this statement's failure, not the
		 * caller's (isolate.c takes a lock timeout for the caller's), and
		 * the pass skips the journal.  (An error ends the pass's
		 * subtransaction, and with it the setting.)
		 */
		bool		own_timeout = skip != NULL &&
			(LockTimeout == 0 || LockTimeout > SWEEP_GUARD_LOCK_TIMEOUT_MS);

		if (own_timeout)
			(void) set_config_option("lock_timeout", CppAsString2(SWEEP_GUARD_LOCK_TIMEOUT_MS),
									 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
		/* (parsed at once: nothing else is parsed in between) */
		durable_guarded_expect(j->guard_relations);
		PG_TRY();
		{
			rc = SPI_execute_with_args(guarded, 4, types, values, NULL, false, 0);
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			durable_guarded_expect(NIL);
			MemoryContextSwitchTo(cxt);
			edata = CopyErrorData();
			if (!own_timeout || edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE ||
				!durable_error_is_global(edata))
				PG_RE_THROW();
			FlushErrorState();
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("a table that the retention purge's foreign-key guards name is locked"),
					 errdetail("The guards name the tables that reference %s, and the check locked those: another relation has the name now (a schema was renamed).",
							   j->name),
					 errhint("The next pass checks again.")));
		}
		PG_END_TRY();
		durable_guarded_expect(NIL);
		AtEOXact_GUC(true, nestlevel);
		if (rc != expected)
			elog(ERROR, "durable: retention purge of %s failed: %s", j->name, SPI_result_code_string(rc));
	}
}

/*
 * Where a pass's direct purge of a journal starts: the finish time of the
 * last record this process's passes deleted, or the oldest (DT_NOBEGIN).
 * Behind a long transaction (a pg_dump, say) vacuum cannot remove the index
 * entries of the records purged since it began, and a walk from the oldest
 * crosses all of them at every pass (12 ms, then 43 ms after 177,000
 * deletions, and on for as long as the transaction stays open); resuming
 * keeps a pass's walk to about its batch.  The records resumed walks pass
 * by — one a replay held when its turn came, one whose completion committed
 * after newer ones were purged, one edited by hand — are found by a walk
 * from the oldest at least every SWEEP_FULL_WALK_MS.  A resume point counts
 * only once the (sub)transaction that deleted up to it has committed.
 */
#define SWEEP_FULL_WALK_MS	(60 * 1000)
#define SWEEP_RESUME_CHECK_MS	(10 * 60 * 1000)

static TimestampTz
sweep_purge_from(SweepResume *r, TimestampTz cutoff)
{
	int64		now = durable_clock_us();

	/*
	 * Once the (sub)transaction that set the resume point has ended, look
	 * up whether it committed, and only while it is recent (its status is
	 * surely still in pg_xact): a point that committed is kept, as
	 * FrozenTransactionId, over walks from the oldest that delete nothing,
	 * or quiet passes would all walk from the oldest.
	 */
	if (TransactionIdIsNormal(r->xid) && !TransactionIdIsCurrentTransactionId(r->xid))
		r->xid = (now - r->set_at < (int64) SWEEP_RESUME_CHECK_MS * 1000 &&
				  TransactionIdDidCommit(r->xid))
			? FrozenTransactionId : InvalidTransactionId;

	if (r->full_walk_at == 0 || now - r->full_walk_at >= (int64) SWEEP_FULL_WALK_MS * 1000 ||
		!TransactionIdIsValid(r->xid) || r->from >= cutoff)
	{
		r->full_walk_at = now;
		return DT_NOBEGIN;
	}
	return r->from;
}

/*
 * Where the next pass resumes after this one deleted up to `last`, walking
 * from `from`.  A walk from the oldest that reached the cutoff (deleted
 * fewer than its limit) keeps a later committed point: moved back to the
 * few records such a walk finds, the point would have the next passes
 * cross again everything the walk crossed (the records a foreign key
 * keeps, say).
 */
static void
sweep_resume_at(SweepResume *r, TimestampTz from, TimestampTz last, bool reached_cutoff)
{
	if (from == DT_NOBEGIN && reached_cutoff &&
		r->xid == FrozenTransactionId && r->from > last)
		return;
	r->from = last;
	r->xid = GetCurrentTransactionIdIfAny();
	r->set_at = durable_clock_us();
}

/*
 * Whether durable may delete from a table of its own: not while a key of a
 * table of another role would run that role's code with durable's
 * privileges (durable_delete_check, references.c).  The check runs in the
 * pass's (or the call's) transaction itself, not in the subtransactions of
 * the deletes: the locks it takes keep what it found true until the
 * transaction ends.  A pass deletes nothing from the table then, with a
 * WARNING at most every SWEEP_UNSAFE_WARN_MS; purge() by hand fails.
 */
#define SWEEP_UNSAFE_WARN_MS	(10 * 60 * 1000)

static void
sweep_report_unsafe(const char *table, const char *unsafe, int elevel)
{
	durable_delete_refused(elevel, table,
						   psprintf("durable does not delete from %s: %s takes part in its deletes",
									table, unsafe));
}

/*
 * A pass skips `table`'s purge because of edata (freed here), with a
 * WARNING at most every SWEEP_UNSAFE_WARN_MS; `cause` comes before the
 * error's message.
 */
static void
sweep_warn_skipped(const char *table, int64 *warned_at, ErrorData *edata, const char *cause)
{
	if (durable_warn_due(warned_at, (int64) SWEEP_UNSAFE_WARN_MS * 1000))
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("durable does not delete from %s in this pass: %s%s",
						table, cause, edata->message),
				 errhint("%s%sIt is tried again at the next pass; this WARNING comes at most every 10 minutes.",
						 edata->hint ? edata->hint : "", edata->hint ? " " : "")));
	FreeErrorData(edata);
}

/* durable_delete_check for durable_try. */
typedef struct SweepCheckCall
{
	const char *table;
	DurableDeleteCheck check;
} SweepCheckCall;

static void
sweep_check_call(void *arg)
{
	SweepCheckCall *call = (SweepCheckCall *) arg;

	durable_delete_check(call->table, true, &call->check);

	/* Busy: roll back the locks taken so far, which the pass would keep for nothing. */
	if (call->check.busy != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("%s is locked", call->check.busy)));
}

/*
 * A pass's check, in a subtransaction of its own (whose locks pass to the
 * pass's transaction when it succeeds), and without waiting for a lock on
 * a table of yours: a pass runs every naptime, whether there is anything
 * to delete or not, and must not wait behind your CREATE INDEX (nor
 * deadlock with your ALTER TABLE ... ADD FOREIGN KEY).  A table it cannot
 * lock at once, or a failure, skips the table for this pass, with a
 * WARNING at most every SWEEP_UNSAFE_WARN_MS.  Sets *guards when the table
 * may be deleted from.
 */
static bool
sweep_pass_may_delete(const char *table, SweepCheckWarned *warned, char **guards,
					  List **guard_relations)
{
	SweepCheckCall call = {.table = table};
	ErrorData  *edata = durable_try(sweep_check_call, &call);

	if (edata != NULL && call.check.busy != NULL)
	{
		FreeErrorData(edata);
		if (durable_warn_due(&warned->busy, (int64) SWEEP_UNSAFE_WARN_MS * 1000))
			ereport(WARNING,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("durable does not delete from %s in this pass: %s, which references it, is locked",
							table, call.check.busy),
					 errhint("It is tried again at every pass; this WARNING comes at most every 10 minutes.")));
		return false;
	}
	if (edata != NULL)
	{
		sweep_warn_skipped(table, &warned->failed, edata,
						   "the foreign keys that reference it could not be checked: ");
		return false;
	}
	if (call.check.unsafe != NULL)
	{
		if (durable_warn_due(&warned->unsafe, (int64) SWEEP_UNSAFE_WARN_MS * 1000))
			sweep_report_unsafe(table, call.check.unsafe, WARNING);
		return false;
	}
	*guards = call.check.guards;
	*guard_relations = call.check.guard_relations;
	return true;
}

/* purge() by hand: the check in the call's transaction, an error when it forbids. */
static void
sweep_call_may_delete(SweepJournal *j)
{
	DurableDeleteCheck check;

	durable_delete_check(j->name, false, &check);
	if (check.unsafe != NULL)
		sweep_report_unsafe(j->name, check.unsafe, ERROR);
	j->guards = check.guards;
	j->guard_relations = check.guard_relations;
}

/*
 * A BEFORE DELETE trigger of the DBA's that returns NULL keeps a record (a
 * "legal hold") without an error.  The records it kept are remembered and
 * passed over like records whose delete fails, or the oldest of them would
 * fill every pass's batch and, once there were a batch's worth, stop the
 * journal's retention without a word.
 */
static void
sweep_remember_held(SweepJournal *j, Datum key, TimestampTz finished_at)
{
	durable_skip_remember(&j->skip, key, finished_at);
	j->held++;
}

/*
 * Delete the records of `keys`, never waiting, remembering those a trigger
 * kept.  Returns how many were deleted.
 */
static int64
sweep_delete_listed(SweepJournal *j, TimestampTz cutoff, const Datum *keys, int nkeys)
{
	Oid			types[2] = {TIMESTAMPTZOID, sweep_key_array_type(j)};
	Datum		values[2];
	int64		deleted = 0;
	uint64		i;

	values[0] = TimestampTzGetDatum(cutoff);
	values[1] = durable_key_array(keys, nkeys, j->skip.key_type);
	durable_exec(durable_plan(&j->delete_keys_plan, j->delete_keys_sql, 2, types),
				 values, NULL, SPI_OK_SELECT, 0);
	for (i = 0; i < SPI_processed; i++)
	{
		if (DatumGetBool(durable_col(i, 3)))
			deleted++;
		else
			sweep_remember_held(j, durable_col(i, 1), DatumGetTimestampTz(durable_col(i, 2)));
	}
	SPI_freetuptable(SPI_tuptable);
	return deleted;
}

/*
 * A pass's batch on a journal whose trigger may keep records: the
 * candidates first, so that those kept can be told (sweep_remember_held).
 */
static int64
sweep_purge_listed(SweepJournal *j, TimestampTz cutoff, int64 limit)
{
	int			n;
	int			i;
	Datum	   *keys;
	int64		deleted;

	sweep_journal_exec(j, j->candidates_sql, &j->candidates_plan, cutoff, limit, &j->skip,
					   DT_NOBEGIN, SPI_OK_SELECT);
	n = (int) SPI_processed;
	if (n == 0)
		return 0;
	keys = palloc(sizeof(Datum) * n);
	for (i = 0; i < n; i++)
		keys[i] = durable_col_copy(i, 1);
	SPI_freetuptable(SPI_tuptable);
	deleted = sweep_delete_listed(j, cutoff, keys, n);
	pfree(keys);
	return deleted;
}

/*
 * Delete up to `limit` of a journal's finished records older than cutoff,
 * oldest first: directly, or with its statement when the journal cannot be
 * written directly (a foreign key references it, say: the records it
 * references are kept).  Resumes where the process's previous batch ended
 * (sweep_purge_from): a `pass` where its previous pass's did, a purge()
 * call where its previous call's did.  A pass goes round the records this
 * process failed to delete.  Sets *walked_from to where it began (may be
 * NULL).  Returns how many were deleted.
 */
static int64
sweep_purge_journal(SweepJournal *j, TimestampTz cutoff, int64 limit, bool pass,
					TimestampTz *walked_from)
{
	SweepResume *resume = pass ? &j->pass_resume : &j->call_resume;
	DurableSkipList *skip = pass ? &j->skip : NULL;
	int64		deleted = -1;
	TimestampTz from = DT_NOBEGIN;
	bool		from_known = false;
	TimestampTz last = DT_NOBEGIN;
	uint64		i;

	if (skip == NULL || !durable_skip_any(skip))
	{
		/* (once a call: a walk from the oldest it chooses is noted as made) */
		from = sweep_purge_from(resume, cutoff);
		from_known = true;
		deleted = j->purge_direct(from, cutoff, limit, &last);
	}
	if (deleted < 0)
	{
		/* (a policy that hides a record from DELETE keeps it as a trigger does) */
		if (pass && (durable_journal_has_before_trigger(j->queue, TRIGGER_TYPE_DELETE) ||
					 durable_journal_rls_binds(j->queue)))
			return sweep_purge_listed(j, cutoff, limit);

		/*
		 * The statement resumes too: the records a foreign key keeps are
		 * passed over one by one, and a walk from the oldest would cross
		 * every one of them at every pass (a kept record is kept for good).
		 */
		if (!from_known)
			from = sweep_purge_from(resume, cutoff);
		sweep_journal_exec(j, j->batch_sql, &j->batch_plan, cutoff, limit, skip, from,
						   SPI_OK_DELETE_RETURNING);
		deleted = (int64) SPI_processed;
		for (i = 0; i < SPI_processed; i++)
			last = Max(last, DatumGetTimestampTz(durable_col(i, 1)));
	}
	if (deleted > 0)
		sweep_resume_at(resume, from, last, deleted < limit);
	if (walked_from != NULL)
		*walked_from = from;
	return deleted;
}

/*
 * The finish time before which records `age_us` old are purged, read when
 * a batch runs: a batch held up (a trigger on DELETE that waits) while the
 * wall clock is set back must not make the next batch judge records
 * finished since by the clock from before the step.
 */
static TimestampTz
sweep_cutoff(int64 age_us)
{
	return GetCurrentTimestamp() - age_us;
}

/*
 * A journal's part of a purge() call.  It resumes where the process's
 * previous call ended: a loop that calls purge() until it returns 0 would
 * otherwise walk from the oldest at every call, and behind a long
 * transaction, whose snapshot keeps vacuum from removing the index entries
 * of the records deleted since it began, every call would cross all that
 * the calls before it deleted.  A call that reaches the cutoff from where
 * it resumed walks from the oldest for the rest of its limit, so that 0
 * still means that nothing is left to delete (a completion that committed
 * late, a finish time edited by hand).
 */
static int64
sweep_purge_journal_call(SweepJournal *j, int64 age_us, int64 limit)
{
	TimestampTz from;
	int64		deleted = sweep_purge_journal(j, sweep_cutoff(age_us), limit, false, &from);

	if (deleted < limit && from != DT_NOBEGIN)
	{
		SweepResume resumed = j->call_resume;

		j->call_resume.full_walk_at = 0;
		deleted += sweep_purge_journal(j, sweep_cutoff(age_us), limit - deleted, false, NULL);
		/* (the next call resumes where the resumed walk ended) */
		resumed.full_walk_at = j->call_resume.full_walk_at;
		j->call_resume = resumed;
	}
	return deleted;
}

/*
 * purge() by hand: delete up to `limit` finished records older than age_us,
 * done inbox records first, then sent outbox records with what is left of
 * the limit, all or nothing (the records the passes go round included).
 * Returns how many were deleted.  Caller must be connected to SPI.
 */
static int64
sweep_purge(int64 age_us, int64 limit)
{
	int64		deleted = 0;
	int			i;

	for (i = 0; i < lengthof(sweep_journals); i++)
		sweep_call_may_delete(&sweep_journals[i]);
	for (i = 0; i < lengthof(sweep_journals) && deleted < limit; i++)
		deleted += sweep_purge_journal_call(&sweep_journals[i], age_us, limit - deleted);
	return deleted;
}

/* A purge batch for durable_try: its arguments and what it deleted. */
typedef struct SweepPurgeCall
{
	TimestampTz cutoff;
	int64		limit;
	SweepJournal *journal;
	int64		deleted;
} SweepPurgeCall;

static void
sweep_purge_batch_call(void *arg)
{
	SweepPurgeCall *call = (SweepPurgeCall *) arg;

	call->deleted = sweep_purge_journal(call->journal, call->cutoff, call->limit, true, NULL);
}

/* The search for the records that fail: its journal and what it found. */
typedef struct SweepHalves
{
	SweepJournal *journal;
	int64		age_us;
	int64		deleted;
	int64	   *failed;			/* records that failed alone */
	ErrorData **first;			/* the first one's error */
} SweepHalves;

static void
sweep_delete_keys(void *arg, const Datum *keys, int nkeys)
{
	SweepHalves *halves = (SweepHalves *) arg;

	halves->deleted += sweep_delete_listed(halves->journal, sweep_cutoff(halves->age_us),
										   keys, nkeys);
}

/*
 * Failures of the moment (a deadlock, a lock timeout in a trigger) are
 * remembered too: tried again at every pass, a batch of them would be
 * searched and logged at every pass.
 */
static void
sweep_key_failed(void *arg, Datum key, TimestampTz finished_at, ErrorData *edata)
{
	SweepHalves *halves = (SweepHalves *) arg;

	(*halves->failed)++;
	durable_skip_remember(&halves->journal->skip, key, finished_at);
	durable_keep_first_error(halves->first, edata);
}

/* A journal's candidates statement for durable_try (its rows stay in SPI_tuptable). */
typedef struct SweepCandidatesCall
{
	SweepJournal *journal;
	TimestampTz cutoff;
	int64		limit;
} SweepCandidatesCall;

static void
sweep_candidates_call(void *arg)
{
	SweepCandidatesCall *call = (SweepCandidatesCall *) arg;
	SweepJournal *j = call->journal;

	sweep_journal_exec(j, j->candidates_sql, &j->candidates_plan, call->cutoff, call->limit,
					   &j->skip, DT_NOBEGIN, SPI_OK_SELECT);
}

/*
 * After a batch failed: delete up to `limit` of the journal's oldest
 * finished records by halves (durable_try_halves), so that the records
 * whose delete fails (a trigger that raises, a cascade another key refuses)
 * are passed over instead of holding back all the others.  Counts the
 * failures in *failed and keeps the first one's error in *first.  Returns
 * how many were deleted.
 */
static int64
sweep_purge_halves(SweepJournal *j, int64 age_us, int64 limit,
				   int64 *failed, ErrorData **first)
{
	SweepHalves halves = {.journal = j, .age_us = age_us, .failed = failed, .first = first};
	SweepCandidatesCall call = {.journal = j, .cutoff = sweep_cutoff(age_us), .limit = limit};
	ErrorData  *edata = durable_try(sweep_candidates_call, &call);

	/*
	 * The candidates failing too is not about a record (a guard over a table
	 * the role cannot read, say): skip the journal's purge for this pass, as
	 * a failed delete check does, rather than end the pass and lease
	 * recovery with it.
	 */
	if (edata != NULL)
	{
		sweep_warn_skipped(j->name, &j->warned.failed, edata, "");
		return 0;
	}
	durable_try_halves(sweep_delete_keys, sweep_key_failed, &halves);
	return halves.deleted;
}

/*
 * The retention step of a pass: each journal's batch runs in its own
 * subtransaction, passing over the records this process failed to delete.
 * When it fails (a trigger on DELETE that raises, a cascade that another
 * key refuses, a row that your table began to reference mid-purge), the
 * rest of the pass — lease recovery above all, and the other journal's
 * purge — still commits, and the batch's records are deleted by halves,
 * passing over those that fail, with a WARNING naming the first failure.
 * The records deleted and those that failed, in both journals, stay
 * within `limit`.  Errors that are not about a
 * record (durable_error_is_global) are thrown on.
 * Returns how many records were purged, and in *passed_over how many it
 * passed over (failed, or kept by a trigger).  Caller must be connected to SPI.
 */
static int64
sweep_purge_isolated(int64 age_us, int64 limit, int64 *passed_over)
{
	/*
	 * The inbox with half the limit, the outbox with what is left, then the
	 * inbox again with the rest: a backlog in one journal does not hold the
	 * other's purge back, pass after pass.
	 */
	static const int order[] = {0, 1, 0};
	bool		more[lengthof(sweep_journals)];
	ErrorData  *first = NULL;
	int64		failed = 0;
	int64		held = 0;
	int64		purged = 0;
	int			step;

	for (step = 0; step < lengthof(sweep_journals); step++)
	{
		SweepJournal *j = &sweep_journals[step];
		DurableQueueRels rels;

		/*
		 * Records gone round until now are tried again at once: by a walk
		 * from the oldest, for the resume point may be past them.
		 */
		durable_queue_rels(j->queue, &rels);
		if (durable_skip_forget_due(&j->skip, rels.heap))
			j->pass_resume.full_walk_at = 0;
		j->held = 0;
		more[step] = sweep_pass_may_delete(j->name, &j->warned, &j->guards, &j->guard_relations);
	}

	/*
	 * Before the first batch takes its snapshot; from here on, a load waits
	 * for this transaction to end before it can commit.
	 */
	if (durable_purge_on_hold())
	{
		*passed_over = 0;
		return 0;
	}
	for (step = 0; step < lengthof(order) && purged + failed + held < limit; step++)
	{
		SweepJournal *j = &sweep_journals[order[step]];
		int64		budget = (step == 0) ? (limit + 1) / 2 : limit - purged - failed - held;
		SweepPurgeCall call = {.cutoff = sweep_cutoff(age_us), .limit = budget, .journal = j};
		int64		held_before = j->held;
		ErrorData  *edata;

		if (!more[order[step]])
			continue;

		edata = durable_try(sweep_purge_batch_call, &call);
		if (edata == NULL)
		{
			purged += call.deleted;
			held += j->held - held_before;
			more[order[step]] = call.deleted + (j->held - held_before) >= budget;
			continue;
		}
		FreeErrorData(edata);
		purged += sweep_purge_halves(j, age_us, budget, &failed, &first);
		held += j->held - held_before;
		more[order[step]] = false;
	}
	for (step = 0; step < lengthof(sweep_journals); step++)
		if (sweep_journals[step].held > 0)
			ereport(WARNING,
					(errmsg("durable: a trigger or policy on %s kept %lld finished record%s from the retention purge",
							sweep_journals[step].name, (long long) sweep_journals[step].held,
							sweep_journals[step].held == 1 ? "" : "s"),
					 errdetail("A BEFORE DELETE trigger returned NULL for them, or a row-level security policy hides them from the DELETE of durable's owner."),
					 errhint("They are passed over, and tried again every 10 minutes. To keep records on purpose, reference them with a foreign key from a table owned by durable's owner or a superuser: the purge passes over those without a warning.")));
	if (first != NULL)
	{
		ereport(WARNING,
				(errcode(first->sqlerrcode),
				 errmsg("durable: the retention purge could not delete %lld finished record%s: %s",
						(long long) failed, failed == 1 ? "" : "s", first->message),
				 first->detail ? errdetail_internal("%s", first->detail) : 0,
				 errhint("They stay until the cause is removed, and are tried again every 10 minutes (past 1,000 of them, with the records finished before the newest); the other records were purged, and lease recovery went on.")));
		FreeErrorData(first);
	}
	*passed_over = failed + held;
	return purged;
}

/* durable_permit_expire for durable_try: what it dropped, and the buckets that failed. */
typedef struct SweepPermitCall
{
	int64		dropped;
	int			failed;
	ErrorData  *failure;
} SweepPermitCall;

static void
sweep_permit_call(void *arg)
{
	SweepPermitCall *call = (SweepPermitCall *) arg;

	call->dropped = durable_permit_expire(DURABLE_SWEEP_BATCH, &call->failed, &call->failure);
}

/*
 * Drop idle rate-limit buckets, in a subtransaction: a failure there (a
 * trigger or a publication added to durable.permits by hand) is a WARNING,
 * not the end of the pass's lease recovery.  Buckets whose drop fails alone
 * (a key of a trusted table that references one, a trigger that raises on
 * one) are passed over for 10 minutes, the others dropped.
 */
static int64
sweep_permits_isolated(void)
{
	static SweepCheckWarned warned;
	static int64 drop_warned;
	SweepPermitCall call = {0};
	ErrorData  *edata;
	char	   *guards;
	List	   *guard_relations;

	/*
	 * Nothing grants REFERENCES on durable.permit_buckets, but a key of a
	 * table of another role there would act on the drop as on a journal's
	 * purge.  The drop takes no guards: a bucket that a key of a trusted
	 * table references (NO ACTION) fails alone, and is passed over.
	 */
	if (!sweep_pass_may_delete("durable.permit_buckets", &warned, &guards, &guard_relations))
		return 0;
	edata = durable_try(sweep_permit_call, &call);

	if (edata == NULL && call.failure != NULL)
	{
		ereport(WARNING,
				(errcode(call.failure->sqlerrcode),
				 errmsg("durable: could not drop %d idle rate-limit bucket%s: %s",
						call.failed, call.failed == 1 ? "" : "s", call.failure->message),
				 call.failure->detail ? errdetail_internal("%s", call.failure->detail) : 0,
				 errhint("They are passed over, and tried again every 10 minutes; the other idle buckets were dropped.")));
		FreeErrorData(call.failure);
	}
	if (edata == NULL)
		return call.dropped;
	if (durable_warn_due(&drop_warned, (int64) SWEEP_UNSAFE_WARN_MS * 1000))
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("durable: could not drop idle rate-limit buckets: %s", edata->message),
				 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
				 errhint("They are tried again at every pass, lease recovery going on; this WARNING comes at most every 10 minutes.")));
	FreeErrorData(edata);
	return 0;
}

/*
 * A purge (purge(), or a pass's purge step) keeps its state in
 * sweep_journals (the guards among it, allocated in its SPI context): one
 * inside another (a trigger of yours on a journal calling purge() or
 * sweep()) would leave the outer one with the inner's freed memory (found by
 * review, 2026-12-07).  The rest of a pass (lease recovery, announcements)
 * sets none of it and may be nested.
 */
static bool sweep_running = false;

/*
 * A purge, none running: a pass's, whose records that fail are passed over
 * and counted in *passed_over, or (passed_over NULL) purge()'s, all or
 * nothing.
 */
static int64
sweep_purge_alone(int64 age_us, int64 limit, int64 *passed_over)
{
	int64		purged = 0;

	if (sweep_running)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("durable.purge() and durable.sweep() cannot run inside a purge"),
				 errdetail("A trigger on a journal, or a function it calls, called one of them while the journal was being purged."),
				 errhint("Call them from outside the journals' triggers.")));
	sweep_running = true;
	PG_TRY();
	{
		if (passed_over != NULL)
			purged = sweep_purge_isolated(age_us, limit, passed_over);
		else
			purged = sweep_purge(age_us, limit);
	}
	PG_FINALLY();
	{
		sweep_running = false;
	}
	PG_END_TRY();
	return purged;
}

void
durable_sweep_pass(bool scan_open, TimestampTz *windows,
				   DurableSweepResult *result)
{
	static SPIPlanPtr outbox_due_plan = NULL;
	int64		outbox_due;
	int64		permits;
	int64		passed_over = 0;
	TimestampTz oldest_writer;
	TimestampTz now;
	int64		started;

	memset(result, 0, sizeof(*result));

	/*
	 * The lock of the pass's writes, before its first read of either
	 * journal; taken here, outside the steps' subtransactions, it also
	 * outlives a step that fails and is searched by halves.
	 */
	durable_lock_journal_for_write(DQ_INBOX);
	durable_lock_journal_for_write(DQ_OUTBOX);
	started = durable_clock_us();

	/*
	 * Announcements come after recovery, so that records it just made
	 * pending (due now) are announced in this pass.  The inbox's scans every
	 * open record and is skipped with recovery; its next window covers the
	 * skipped one.
	 */
	if (scan_open)
		result->recovery_full = durable_recover_expired(&result->inbox_expired,
														&result->outbox_ambiguous);

	/*
	 * The windows end at a time read before the look for open writers: a
	 * transaction that begins later journals nothing due by then (a due
	 * time that announces lies after its record's creation, which is not
	 * before its transaction began), and one that began earlier is either
	 * open at the look, holding the next windows back to its start, or
	 * committed, its work seen by the counts that follow.  Read the other
	 * way round, a writer beginning between the two and committing after
	 * the counts had its work fall between two windows.
	 */
	now = GetCurrentTimestamp();
	oldest_writer = sweep_oldest_writer();
	if (scan_open)
	{
		static SPIPlanPtr inbox_due_plan = NULL;

		(void) sweep_announce_due(&windows[DQ_INBOX], now, oldest_writer,
								  &inbox_due_plan, SWEEP_INBOX_DUE_SQL, DQ_INBOX);
		result->scanned_open = true;
		result->scan_us = durable_clock_us() - started;
	}

	outbox_due = sweep_announce_due(&windows[DQ_OUTBOX], now, oldest_writer,
									&outbox_due_plan, SWEEP_OUTBOX_DUE_SQL, DQ_OUTBOX);
	result->outbox_due = (int) Min(outbox_due, (int64) PG_INT32_MAX);

	result->purged = sweep_purge_alone((int64) durable_retention_s * USECS_PER_SEC,
									   DURABLE_PURGE_BATCH, &passed_over);
	permits = sweep_permits_isolated();

	/*
	 * Records passed over fill a batch too: the next pass, at once, goes on
	 * past them, or many of them would hold the newer ones back for longer
	 * than they are remembered.
	 */
	result->purge_full = result->purged + passed_over >= DURABLE_PURGE_BATCH ||
		permits >= DURABLE_SWEEP_BATCH;

	DURABLE_FAIL_POINT("sweep");
}

/*
 * Start `windows` where the previous sweep() pass ended: from the rows of
 * durable.sweep_windows this pass could lock (from_table), else from this
 * process's previous pass.  Under REPEATABLE READ and SERIALIZABLE the
 * table is not read: a row another pass wrote since this transaction's
 * snapshot would fail the call with a serialization error.  Caller must be
 * connected to SPI.
 */
static void
sweep_windows_take(TimestampTz *windows, bool *from_table)
{
	static SPIPlanPtr plan = NULL;

	memcpy(windows, sweep_windows, sizeof(sweep_windows));
	memset(from_table, 0, sizeof(bool) * DQ_NUM_QUEUES);
	if (IsolationUsesXactSnapshot())
		return;
	durable_exec(durable_plan(&plan, SWEEP_WINDOWS_LOCK_SQL, 0, NULL), NULL, NULL,
				 SPI_OK_SELECT, 0);
	for (uint64 row = 0; row < SPI_processed; row++)
	{
		DurableQueue queue = DatumGetBool(durable_col(row, 1)) ? DQ_OUTBOX : DQ_INBOX;

		from_table[queue] = true;
		windows[queue] = durable_col_isnull(row, 2) ? 0 :
			DatumGetTimestampTz(durable_col(row, 2));
	}
}

/*
 * Whether this pass may write missing window rows: only one pass at a time,
 * never waiting for another.  An insert that met another transaction's
 * uncommitted row of the same kind would wait for that transaction -- a
 * pass in a long transaction right after a crash emptied the table, while
 * this one held the journal rows it had just recovered.  The lock is on the
 * table's object tag, not its relation lock: it conflicts with nothing but
 * itself, and is held until the transaction ends.
 */
static bool
sweep_windows_may_add(void)
{
	Oid			relid = get_relname_relid("sweep_windows", get_namespace_oid("durable", false));

	return OidIsValid(relid) &&
		ConditionalLockDatabaseObject(RelationRelationId, relid, 0, ExclusiveLock);
}

/*
 * Keep where the next windows start: in the rows this pass locked, or in
 * rows written anew where there were none (not where another pass holds
 * them, which the insert sees), else in this process.  A window kept in the
 * table is not also kept in the process, which goes on from its own last
 * window: should this pass roll back, its window is announced again by the
 * next pass whichever window that one uses (until 2026-12-07 a row written
 * anew kept it in the process too, and a rollback of that pass lost it:
 * found by review).
 */
static void
sweep_windows_keep(const TimestampTz *windows, const bool *from_table)
{
	static SPIPlanPtr save_plan = NULL;
	static SPIPlanPtr add_plan = NULL;
	static const Oid types[2] = {TEXTOID, TIMESTAMPTZOID};
	bool		may_add = false;
	bool		add_checked = false;

	if (IsolationUsesXactSnapshot())
	{
		memcpy(sweep_windows, windows, sizeof(sweep_windows));
		return;
	}

	for (int queue = 0; queue < DQ_NUM_QUEUES; queue++)
	{
		Datum		values[2];

		values[0] = CStringGetTextDatum(durable_queue_names[queue]);
		values[1] = TimestampTzGetDatum(windows[queue]);
		if (from_table[queue])
			durable_exec(durable_plan(&save_plan, SWEEP_WINDOWS_SAVE_SQL, 2, types),
						 values, NULL, SPI_OK_UPDATE, 0);
		else
		{
			if (!add_checked)
				may_add = sweep_windows_may_add();
			add_checked = true;
			if (may_add)
				durable_exec(durable_plan(&add_plan, SWEEP_WINDOWS_ADD_SQL, 2, types),
							 values, NULL, SPI_OK_INSERT, 0);
			if (!may_add || SPI_processed == 0)
				sweep_windows[queue] = windows[queue];
		}
	}
}

/*
 * sweep() -> (inbox_expired, outbox_ambiguous, outbox_due, purged)
 *
 * One pass of what the background worker does, in the caller's
 * transaction.  Works without shared_preload_libraries (then nothing is
 * counted and no waiting claimer needs waking).
 */
Datum
durable_sweep(PG_FUNCTION_ARGS)
{
	TimestampTz windows[DQ_NUM_QUEUES];
	bool		from_table[DQ_NUM_QUEUES];
	DurableSweepResult res;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};

	durable_srf_init(fcinfo);
	/*
	 * Before anything reads the windows' unlogged table, which a standby
	 * cannot open: there the call is refused as in any read-only transaction.
	 */
	PreventCommandIfReadOnly("sweep()");
	SPI_connect();
	sweep_windows_take(windows, from_table);
	/* (each step reads the clock after the rows are this pass's: its window ends after the previous pass's) */
	durable_sweep_pass(true, windows, &res);
	sweep_windows_keep(windows, from_table);
	SPI_finish();

	values[0] = Int32GetDatum(res.inbox_expired);
	values[1] = Int32GetDatum(res.outbox_ambiguous);
	values[2] = Int32GetDatum(res.outbox_due);
	values[3] = Int64GetDatum(res.purged);
	durable_srf_put(fcinfo, values, nulls);
	return (Datum) 0;
}

/*
 * purge(older_than, batch) -> rows deleted
 *
 * Deletes at most `batch` done inbox and sent outbox records finished more
 * than older_than ago (NULL: durable.retention; batch NULL: 10000, the SQL
 * default); dead records stay.  Call it again until it returns 0 to clear a
 * backlog (see the file header).
 */
Datum
durable_purge(PG_FUNCTION_ARGS)
{
	int64		older_than_us = durable_arg_interval_us(fcinfo, 0, "older_than",
														(int64) durable_retention_s * USECS_PER_SEC,
														0, SWEEP_MAX_AGE_US);
	int32		batch = PG_ARGISNULL(1) ? SWEEP_PURGE_DEFAULT_BATCH : PG_GETARG_INT32(1);
	int64		deleted;

	if (batch < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch must be at least 1")));

	SPI_connect();
	deleted = sweep_purge_alone(older_than_us, batch, NULL);
	SPI_finish();
	PG_RETURN_INT64(deleted);
}
