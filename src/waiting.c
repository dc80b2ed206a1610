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
 * One such time is not in the journal when the claimer reads it: the lease
 * of a record admitted with an instance (leased at once, so its admit wakes
 * nobody) after the claimer's attempt.  If that bot dies, the record comes
 * due when its lease ends.  Such an admit publishes its lease's end at commit
 * into the slot (inbox_lease_end keeps the earliest), and waiting claimers
 * bound their sleeps by it too, reading it at every look.  The first claimer
 * to find it passed clears it and wakes them all; their attempts read with
 * snapshots taken after the clearing, so they see every admit that
 * published before (an admit publishes after its commit became visible),
 * and the lease ends the slot did not keep are in the journal for their
 * next due times.  A lease published after the clearing is kept for the
 * next look.  So each waiting claimer attempts about once per lease length
 * more under a busy bot path, rather than at every admit.  (A lease taken
 * in a transaction that is prepared is not published; COMMIT PREPARED
 * wakes the claimers, worker.c, and they read it from the journal.)
 * Claims, and an admit that leases its pending duplicate, publish nothing:
 * the records they lease were due, so a waiting claimer either leased them
 * itself, or found them changed in flight and re-checks (below), or reads
 * their lease from the journal.
 *
 * Without shared_preload_libraries there are no condition variables; a
 * waiting claim then re-checks every 100 ms (documented in the README).
 *
 * Snapshots.  Each attempt reads with a snapshot of its own (direct.c's
 * claim, then SPI for the next due time);
 * only the calling statement's snapshot would stay registered while the
 * claimer sleeps, and it would hold back vacuum's horizon (every dead tuple
 * of the database) for as long as the wait.  When nothing but the claim
 * itself can read with that snapshot after the wait -- READ COMMITTED, and a
 * statement that is exactly one SELECT over the claim function calling no
 * function that is not immutable, with no plan node above the function scan
 * but a Result, whose snapshot no other portal shares, and no other snapshot
 * registered (an open cursor) -- the claimer stops advertising its xmin
 * before it sleeps, as a backend does between statements, and the next
 * attempt's snapshot advertises a new one.  In any other context (REPEATABLE
 * READ, a claim inside a PL/pgSQL function called by a statement, a query
 * that also reads tables, a transaction with an open cursor) the snapshot
 * is kept, and the wait holds the horizon back.
 *
 * Locks and the client.  A claim holds its journal's relation locks until
 * its transaction ends, the wait included; DDL that needs the journal to
 * itself (CREATE INDEX, ALTER TABLE, VACUUM FULL, ...) would queue behind
 * it, and every admit and claim behind the DDL, for as long as the wait.
 * So at least once a second a waiting claim that has leased nothing looks
 * whether someone waits for a lock on its journal or one of its indexes
 * that conflicts with its own, and if so returns at once, empty (a look is
 * not an attempt: the journal is not read again until a wake or due time).
 * It also looks whether its client is still connected: a claim whose client
 * has gone must not lease the next record (nobody would handle it until its
 * lease expired), so it ends the backend, as client_connection_check_interval
 * would.
 *
 * IDENTIFICATION
 *	  src/waiting.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/table.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/proclist.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "tcop/pquery.h"
#include "executor/spi.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/typcache.h"
#include "utils/wait_event.h"

#include "shmem.h"

/*
 * From libpq/libpq.h (PostgreSQL 14 and later), which cannot be included
 * here: it pulls in libpq-be.h and with it the GSSAPI headers of the
 * server's build, which the server-dev package does not require.
 */
extern bool pq_check_connection(void);

/* Re-check interval of a waiting claim without shared memory. */
#define WAITING_POLL_MS 100

/*
 * Longest sleep between two looks at the client's connection and at the
 * locks others wait for (waiting_should_end).
 */
#define WAITING_LOOK_MS 1000

/*
 * Re-checks of a claim held back by a change in flight: after 1 ms,
 * doubling up to 1 s.
 */
#define WAITING_IN_FLIGHT_FIRST_US 1000
#define WAITING_IN_FLIGHT_MAX_US 1000000

static bool waiting_wake_pending[DQ_NUM_QUEUES];
/* The earliest lease end this transaction's admits took (0: none). */
static TimestampTz waiting_lease_end_pending = 0;
static bool waiting_callback_registered = false;
static bool waiting_prepared = false;

/* Whether the current waiting claim may give up its statement's snapshot while it sleeps. */
static bool waiting_release_snapshot = false;

/*
 * Lower the slot's inbox_lease_end to lease_end (file header).  Runs after
 * this transaction's commit became visible; the barrier keeps the read
 * below from being done before it, which would let a claimer clear the
 * value and attempt without seeing the commit, while this read saw the
 * value not cleared yet and wrote nothing.
 */
static void
waiting_publish_lease_end(DurableDbSlot *slot, TimestampTz lease_end)
{
	uint64		cur;

	pg_memory_barrier();
	cur = pg_atomic_read_u64(&slot->inbox_lease_end);
	while (cur == 0 || (TimestampTz) cur > lease_end)
	{
		if (pg_atomic_compare_exchange_u64(&slot->inbox_lease_end, &cur, (uint64) lease_end))
			break;
	}
}

/*
 * A waiting claimer found lease_end passed: clear it (unless another
 * claimer did since) and wake every inbox claimer.  The slot kept only the
 * earliest lease end; each woken claimer's next attempt reads the others
 * from the journal (inbox_next_due), with a snapshot taken after this
 * clearing.  Waking only this claimer would lose them whenever it leaves
 * without sleeping again (it claims, its wait ends, it is cancelled).
 */
static void
waiting_clear_lease_end(DurableDbSlot *slot, TimestampTz lease_end)
{
	uint64		expected = (uint64) lease_end;

	if (pg_atomic_compare_exchange_u64(&slot->inbox_lease_end, &expected, 0))
		ConditionVariableBroadcast(&slot->queue_cv[DQ_INBOX]);
}

static void
waiting_xact_callback(XactEvent event, void *arg)
{
	int			q;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			{
				DurableDbSlot *slot = NULL;
				bool		pending = (waiting_lease_end_pending != 0);

				/*
				 * Only a transaction that used durable looks up the slot: a
				 * backend's later transactions may run after DROP EXTENSION,
				 * and the lookup takes a slot for a database without one.
				 */
				for (q = 0; q < DQ_NUM_QUEUES; q++)
					pending |= waiting_wake_pending[q];
				if (pending)
					slot = durable_my_slot();
				for (q = 0; q < DQ_NUM_QUEUES; q++)
				{
					if (waiting_wake_pending[q] && slot != NULL)
						ConditionVariableBroadcast(&slot->queue_cv[q]);
					waiting_wake_pending[q] = false;
				}
				if (waiting_lease_end_pending != 0 && slot != NULL)
					waiting_publish_lease_end(slot, waiting_lease_end_pending);
				waiting_lease_end_pending = 0;
				break;
			}
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			for (q = 0; q < DQ_NUM_QUEUES; q++)
				waiting_wake_pending[q] = false;
			waiting_lease_end_pending = 0;
			break;
		default:
			break;
	}
}

static void
waiting_register_callback(void)
{
	if (!waiting_callback_registered)
	{
		RegisterXactCallback(waiting_xact_callback, NULL);
		waiting_callback_registered = true;
	}
}

void
durable_wake_at_commit(DurableQueue queue)
{
	if (!durable_shmem_available())
		return;
	waiting_register_callback();
	waiting_wake_pending[queue] = true;
}

void
durable_inbox_lease_at_commit(TimestampTz lease_until)
{
	if (!durable_shmem_available())
		return;
	waiting_register_callback();
	if (waiting_lease_end_pending == 0 || lease_until < waiting_lease_end_pending)
		waiting_lease_end_pending = lease_until;
}

/*
 * A claimer is on its queue's wake-up list while it attempts and while it
 * sleeps (waiting_prepare puts it back before each attempt), unless another
 * condition variable took it off during its attempt (PostgreSQL's own
 * waits do, WaitIO for a buffer being read): its sleep then returns at
 * once, ConditionVariableTimedSleep finding it not prepared, and it
 * attempts again -- a change that let it sleep without preparing again
 * would lose wake-ups here.  One that is not on the list when this returns
 * false takes its next attempt's snapshot after the call; if that snapshot
 * does not see the caller's commit, the claimer is on the list by the time
 * the caller's wake at commit is sent.
 * So a caller told that nobody waits may skip working out whether its
 * change unblocks anyone, as long as it wakes at commit regardless.  False
 * without shared memory, where there is no wake either.
 */
bool
durable_claimers_waiting(DurableQueue queue)
{
	DurableDbSlot *slot;
	ConditionVariable *cv;
	bool		waiting;

	if (!durable_shmem_available() || (slot = durable_my_slot()) == NULL)
		return false;
	cv = &slot->queue_cv[queue];
	SpinLockAcquire(&cv->mutex);
	waiting = !proclist_is_empty(&cv->wakeup);
	SpinLockRelease(&cv->mutex);
	return waiting;
}

/*
 * check_functions_in_node callback: a function that may read tables with the
 * statement's snapshot -- any but an immutable one.  Built-in ones do too:
 * query_to_xml(), lo_get(), ts_stat() (until 2026-12-05 only functions that
 * were not built in counted, and such a statement read with a snapshot
 * vacuum no longer respected).
 */
static bool
waiting_reading_function(Oid func, void *context)
{
	return func_volatile(func) != PROVOLATILE_IMMUTABLE;
}

/*
 * Whether an expression may read tables after the claim: a function that
 * is not immutable, or code that check_functions_in_node does not name --
 * a domain's CHECK constraints (they may call any function), a subscripting
 * handler of a type of yours, and the output function of a value of a type
 * of yours, in a column or a row or array built in one, which runs as the
 * row is sent (until 2026-12-05 these released the snapshot too).
 */
static bool
waiting_calls_reading_function(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, waiting_reading_function, context))
		return true;
	if (IsA(node, CoerceToDomain) && DomainHasConstraints(((CoerceToDomain *) node)->resulttype))
		return true;
	if (IsA(node, SubscriptingRef) &&
		((SubscriptingRef *) node)->refcontainertype >= FirstNormalObjectId)
		return true;
	if (IsA(node, TargetEntry) && exprType((Node *) ((TargetEntry *) node)->expr) >= FirstNormalObjectId)
		return true;
	if (IsA(node, RowExpr) || IsA(node, ArrayExpr))
	{
		ListCell   *lc;

		foreach(lc, IsA(node, RowExpr) ? ((RowExpr *) node)->args : ((ArrayExpr *) node)->elements)
			if (exprType((Node *) lfirst(lc)) >= FirstNormalObjectId)
				return true;
	}
	return expression_tree_walker(node, waiting_calls_reading_function, context);
}

/*
 * Whether a plan node or one below it may evaluate a function that is not
 * immutable (which could read tables with the statement's snapshot), or
 * calls a function of its own other than `self` in a function scan.  Only
 * function scans and Result nodes are looked into; any other node (a
 * sort, an aggregate, a limit, a window) may call functions its
 * expressions do not show -- a sort operator, an aggregate's transition
 * function -- and counts as calling others.  The arguments of the call of
 * `self` are not looked at: they are evaluated before the claim runs.
 */
static bool
waiting_plan_calls_others(Plan *plan, Oid self)
{
	if (plan == NULL)
		return false;
	if (!IsA(plan, FunctionScan) && !IsA(plan, Result))
		return true;
	if (IsA(plan, FunctionScan))
	{
		FunctionScan *scan = (FunctionScan *) plan;
		RangeTblFunction *rtfunc;

		if (list_length(scan->functions) != 1)
			return true;
		rtfunc = linitial_node(RangeTblFunction, scan->functions);
		if (!IsA(rtfunc->funcexpr, FuncExpr) ||
			((FuncExpr *) rtfunc->funcexpr)->funcid != self)
			return true;
	}
	if (waiting_calls_reading_function((Node *) plan->targetlist, NULL) ||
		waiting_calls_reading_function((Node *) plan->qual, NULL))
		return true;
	return waiting_plan_calls_others(plan->lefttree, self) ||
		waiting_plan_calls_others(plan->righttree, self);
}

/*
 * Whether `snapshot` is the oldest this backend uses: no statement below the
 * claim's, on the active snapshot stack, runs on another one.  (Where
 * snapshots carry an LSN, old_snapshot_threshold, GetOldestSnapshot compares
 * those, and equal ones would not tell: no.  PostgreSQL 18 has no
 * GetOldestSnapshot: no, the claim then keeps its snapshot.)
 */
static bool
waiting_snapshot_is_oldest(Snapshot snapshot)
{
#if PG_VERSION_NUM < 170000
	if (old_snapshot_threshold >= 0)
		return false;
#endif
#if PG_VERSION_NUM < 180000
	return GetOldestSnapshot() == snapshot;
#else
	return false;
#endif
}

/*
 * Whether the statement that called the claim function `self` reads nothing
 * with its snapshot once the claim returns: READ COMMITTED, and the active
 * portal runs one SELECT whose only range table entry is a function scan
 * (which the plan shows to be of `self`), with no subplan and no function
 * that is not immutable; and that snapshot is that portal's alone --
 * registered by its query descriptor and by its executor, and pushed once
 * by the portal's run.  A claim in a FOR loop of a STABLE PL/pgSQL function
 * runs in a portal of its own that shares the calling statement's snapshot
 * (registered and pushed twice), which the rest of the function and the
 * caller read again after the wait; SQL-level EXECUTE pushes it twice too.
 * And no enclosing statement runs on an older snapshot, unless PL/pgSQL
 * runs non-atomically (a DO block or a procedure called outside a
 * transaction block), which copies the values it keeps: an atomic one (in
 * BEGIN ... COMMIT, or called by a function) keeps values it read before the
 * claim as pointers to their TOAST data, which only the enclosing
 * statement's snapshot keeps from vacuum (vacuumed during the wait, they
 * read as "unexpected chunk number", XX001).  Called before the claim's own
 * SPI_connect, so that SPI_inside_nonatomic_context speaks of its caller.
 */
static bool
waiting_statement_is_claim_only(Oid self)
{
	PlannedStmt *stmt;
	Snapshot	snapshot;

	if (IsolationUsesXactSnapshot() || ActivePortal == NULL ||
		list_length(ActivePortal->stmts) != 1 || !ActiveSnapshotSet())
		return false;
	snapshot = GetActiveSnapshot();
	if (ActivePortal->queryDesc == NULL || ActivePortal->queryDesc->snapshot != snapshot ||
		snapshot->regd_count != 2 || snapshot->active_count != 1)
		return false;
	if (!waiting_snapshot_is_oldest(snapshot) && !SPI_inside_nonatomic_context())
		return false;
	stmt = linitial_node(PlannedStmt, ActivePortal->stmts);
	if (stmt->commandType != CMD_SELECT || stmt->utilityStmt != NULL ||
		stmt->subplans != NIL || list_length(stmt->rtable) != 1 ||
		linitial_node(RangeTblEntry, stmt->rtable)->rtekind != RTE_FUNCTION)
		return false;
	return !waiting_plan_calls_others(stmt->planTree, self);
}

static void
waiting_begin(FunctionCallInfo fcinfo)
{
	waiting_release_snapshot = waiting_statement_is_claim_only(fcinfo->flinfo->fn_oid);
}

static void
waiting_prepare(DurableQueue queue)
{
	DurableDbSlot *slot = durable_my_slot();

	if (slot == NULL)
	{
		/*
		 * The slot went to another database since the last attempt: leave
		 * its wait list, where this claimer would make its confirmations
		 * look for waiters and its wakes set our latch.
		 */
		if (waiting_prepared)
			ConditionVariableCancelSleep();
		waiting_prepared = false;
		return;
	}
	ConditionVariablePrepareToSleep(&slot->queue_cv[queue]);
	waiting_prepared = true;
}

/*
 * Whether another backend waits for a lock on relation relid in a mode that
 * conflicts with the weak locks a claim holds (ShareLock or stronger, which
 * only DDL takes; VACUUM's and ANALYZE's ShareUpdateExclusiveLock does not
 * conflict).  A waiter's waitLock is stable under the partition lock of the
 * lock it waits on, which is the one held here for relid's tag; a pointer
 * read for another partition's lock may be stale, but such a lock never
 * carries this tag.  (LockHasWaiters cannot tell: a weak lock taken by the
 * fast path has no entry of ours in the shared lock table to look at.)
 */
static bool
waiting_lock_awaited(Oid relid)
{
	LOCKTAG		tag;
	LWLock	   *partition;
	bool		awaited = false;
	uint32		i;

	SET_LOCKTAG_RELATION(tag, MyDatabaseId, relid);
	partition = LockHashPartitionLock(LockTagHashCode(&tag));
	LWLockAcquire(partition, LW_SHARED);
	for (i = 0; i < ProcGlobal->allProcCount && !awaited; i++)
	{
		volatile PGPROC *proc = &ProcGlobal->allProcs[i];
		LOCK	   *lock = proc->waitLock;

		if (lock != NULL && proc != MyProc && proc->waitLockMode >= ShareLock &&
			memcmp(&lock->tag, &tag, sizeof(LOCKTAG)) == 0)
			awaited = true;
	}
	LWLockRelease(partition);
	return awaited;
}

/* Whether this transaction holds any lock on relation relid. */
static bool
waiting_holds_lock(Oid relid)
{
	LOCKTAG		tag;

	SET_LOCKTAG_RELATION(tag, MyDatabaseId, relid);
#if PG_VERSION_NUM >= 170000
	return LockHeldByMe(&tag, AccessShareLock, true);
#else
	for (LOCKMODE mode = AccessShareLock; mode <= MaxLockMode; mode++)
	{
		if (LockHeldByMe(&tag, mode))
			return true;
	}
	return false;
#endif
}

/*
 * Whether a waiting claim must stop (file header): DDL waits for a lock on
 * the journal `journal` or one of its indexes.  A client that has gone ends
 * the backend, as ProcessInterrupts does when client_connection_check_interval
 * finds it gone.
 *
 * The caller looked the journal up once: a look that reloaded durable's
 * relations after an invalidation (a VACUUM or ANALYZE of a journal sends
 * one) opened every index of both journals, and waited behind DDL on one
 * of the other journal's.  Its indexes are listed at every look (the
 * relation cache's list, read again only after an invalidation): one
 * created during the wait, which an attempt may have locked since, counts.
 */
static bool
waiting_should_end(Oid journal)
{
	Relation	heap;
	List	   *indexes;
	ListCell   *lc;
	bool		awaited;

	if (MyProcPort != NULL && whereToSendOutput == DestRemote && !pq_check_connection())
	{
		whereToSendOutput = DestNone;
		ereport(FATAL,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("connection to client lost"),
				 errdetail("A waiting claim found its client gone, and claimed nothing.")));
	}
	CHECK_FOR_INTERRUPTS();

	awaited = waiting_lock_awaited(journal);
	/* Opened without a lock (one would queue behind DDL): the attempts took one. */
	if (!awaited && waiting_holds_lock(journal))
	{
		heap = table_open(journal, NoLock);
		indexes = RelationGetIndexList(heap);
		table_close(heap, NoLock);
		foreach(lc, indexes)
		{
			if ((awaited = waiting_lock_awaited(lfirst_oid(lc))))
				break;
		}
		list_free(indexes);
	}
	if (awaited)
		ereport(DEBUG1,
				(errmsg_internal("durable: waiting claim returns early: DDL waits for its journal")));
	return awaited;
}

/*
 * Sleep until a wake for `queue`, next_due (wall clock; 0: none known), the
 * end of a lease admitted since (inbox; file header) or the deadline
 * (durable_clock_us), whichever is first: true then, for
 * another attempt.  False once the deadline has passed, or when the claim
 * must stop (waiting_should_end, looked at after every sleep and at least
 * once every WAITING_LOOK_MS: the looks alone do not make an attempt).
 */
static bool
waiting_sleep(DurableQueue queue, Oid journal, int64 deadline, TimestampTz next_due)
{
	DurableDbSlot *slot = durable_my_slot();

	for (;;)
	{
		int64		left_us = deadline - durable_clock_us();
		TimestampTz now = GetCurrentTimestamp();
		TimestampTz due = next_due;
		TimestampTz lease_end = 0;
		long		timeout_ms;
		bool		timed_out;
		bool		reached;

		if (left_us <= 0)
			return false;

		/*
		 * The launcher gave the slot to another database (this one gets no
		 * worker: a template, closed to connections): its wakes no longer
		 * come to this database's claimers.  Another attempt, whose sleep
		 * looks the slot up again or polls without one.
		 */
		if (slot != NULL && slot->dboid != MyDatabaseId)
			return true;

		/*
		 * Stop holding back vacuum's horizon while asleep (file header),
		 * before each sleep: a look may have read the catalogs.  The
		 * catalog snapshot goes first: it would otherwise be reused after
		 * the wait with an xmin nobody protects any more.  Then the
		 * statement's snapshot must be the only one registered: another
		 * one (an open cursor of the same transaction, an exported
		 * snapshot) will be read again, so the horizon stays.
		 */
		if (waiting_release_snapshot)
		{
			InvalidateCatalogSnapshot();
			if (ThereAreNoPriorRegisteredSnapshots())
				MyProc->xmin = InvalidTransactionId;
		}
		if (queue == DQ_INBOX && slot != NULL)
		{
			lease_end = (TimestampTz) pg_atomic_read_u64(&slot->inbox_lease_end);
			if (lease_end != 0 && lease_end < now)
			{
				waiting_clear_lease_end(slot, lease_end);
				return true;
			}
			if (lease_end != 0 && (due == 0 || lease_end < due))
				due = lease_end;
		}
		if (due != 0)
		{
			/*
			 * (t/025_due_during_attempt.pl reads this: not above 0 after an
			 * attempt that ran past the due time it had read.)
			 */
			ereport(DEBUG2,
					(errmsg_internal("durable: waiting claim sleeps; the next due time is in %lld ms",
									 (long long) ((due - now) / 1000))));
			left_us = Min(left_us, due - now);
		}
		/* Round up, so that we wake after the due time rather than just before it. */
		timeout_ms = (long) Min((left_us + 999) / 1000, (int64) INT_MAX);
		if (timeout_ms < 1)
			timeout_ms = 1;
		reached = timeout_ms <= WAITING_LOOK_MS;
		timeout_ms = Min(timeout_ms, WAITING_LOOK_MS);

		if (slot != NULL)
			timed_out = ConditionVariableTimedSleep(&slot->queue_cv[queue], timeout_ms,
													PG_WAIT_EXTENSION);
		else
		{
			/* Without shared memory: poll (file header). */
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 Min(timeout_ms, WAITING_POLL_MS), PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			timed_out = false;
		}
		CHECK_FOR_INTERRUPTS();
		if (waiting_should_end(journal))
			return false;
		/* (a sleep the deadline ended may not have reached lease_end) */
		if (timed_out && reached && lease_end != 0 && lease_end < GetCurrentTimestamp())
			waiting_clear_lease_end(slot, lease_end);
		if (!timed_out || reached)
			return true;

		/*
		 * Only a look: sleep on.  pq_check_connection reset the latch, which
		 * a wake since the sleep may have set; set it again, so that the
		 * next sleep finds out (by its wait list) whether one came.
		 */
		SetLatch(MyLatch);
	}
}

static void
waiting_done(void)
{
	waiting_release_snapshot = false;
	if (waiting_prepared)
	{
		ConditionVariableCancelSleep();
		waiting_prepared = false;
	}
}

/*
 * A claim with wait > 0: attempts until one claims something or the wait
 * is over.  It prepares to sleep before each attempt, so that a wake-up
 * landing between the attempt and the sleep is not lost; each attempt runs
 * with a fresh snapshot (which assumes READ COMMITTED) and its memory is
 * freed before the next, since a wait may last an hour.
 *
 * It ends early, empty, when DDL waits for its journal, and ends the
 * backend when its client has gone (waiting_should_end, after each sleep
 * and at least once a second).
 *
 * An attempt that passed a record over only because of a change in flight
 * (durable_claim_direct's in_flight) sleeps at most 1 ms, then 2, 4 ... up to 1 s
 * while that lasts.  The change's own wake cannot be relied on: a
 * completion that looked for a later record of its chat before that
 * record's admit committed wakes nobody, and the admit's wake came while
 * the completion was not yet committed; a claim or a confirmation that
 * rolls back wakes nobody.  Such changes last as long as their
 * transaction, milliseconds for a bot's confirmations; behind one held
 * open (a prepared transaction, a forgotten FOR UPDATE) the re-checks
 * slow down to one a second.  Under REPEATABLE READ and SERIALIZABLE every
 * attempt reads with the transaction's snapshot, in which the change of an
 * older record of the chat never lands: only a record locked by another
 * transaction is checked again, which that transaction's rollback gives
 * back to the snapshot (until 2026-12-06 it waited out its wait, found by
 * review).
 */
static void
waiting_claim(FunctionCallInfo fcinfo, DurableQueue queue, int64 wait_us,
			  const DurableClaimCall *call)
{
	int64		deadline = durable_clock_us() + wait_us;
	MemoryContext attempt_cxt;
	MemoryContext old;
	bool		claimed;
	bool		in_flight;
	int64		recheck_us = WAITING_IN_FLIGHT_FIRST_US;
	TimestampTz now;
	TimestampTz next_due;
	DurableQueueRels rels;

	waiting_begin(fcinfo);
	SPI_connect();
	durable_queue_rels(queue, &rels);
	attempt_cxt = AllocSetContextCreate(CurrentMemoryContext, "durable claim attempt",
										ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		waiting_prepare(queue);
		old = MemoryContextSwitchTo(attempt_cxt);
		in_flight = false;
		/* (t/018_waiting_yields.pl counts these.) */
		ereport(DEBUG2, (errmsg_internal("durable: waiting claim attempts")));
		/*
		 * One clock reading for the attempt and the next due time: work that
		 * came due between two readings would be neither claimed nor waited
		 * for.
		 */
		now = GetCurrentTimestamp();
		claimed = call->attempt(fcinfo, call, now, &in_flight) > 0;
		next_due = claimed ? 0 : call->next_due(now);
		if (!claimed && in_flight)
		{
			TimestampTz recheck = GetCurrentTimestamp() + recheck_us;

			if (next_due == 0 || recheck < next_due)
				next_due = recheck;
			/* (t/015_late_wake.pl counts these.) */
			ereport(DEBUG2,
					(errmsg_internal("durable: waiting claim checks again in %d ms: a change in flight held a record back",
									 (int) (recheck_us / 1000))));
			recheck_us = Min(recheck_us * 2, WAITING_IN_FLIGHT_MAX_US);
		}
		else
			recheck_us = WAITING_IN_FLIGHT_FIRST_US;
		MemoryContextSwitchTo(old);
		MemoryContextReset(attempt_cxt);
		if (claimed || !waiting_sleep(queue, rels.heap, deadline, next_due))
			break;
	}
	waiting_done();
	MemoryContextDelete(attempt_cxt);
	SPI_finish();
}

void
durable_claim(FunctionCallInfo fcinfo, DurableQueue queue, int32 max_claim,
			  DurableClaimCall *call)
{
	int32		max;
	int64		wait_us;

	call->instance = durable_arg_id(fcinfo, 0, "instance");
	max = durable_arg_int32(fcinfo, 1, "max");
	call->lease_us = durable_arg_lease_us(fcinfo, 2);
	wait_us = durable_arg_wait_us(fcinfo, 3);
	if (max < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max must be at least 1")));
	call->max = Min(max, max_claim);

	durable_srf_init(fcinfo);
	durable_lock_journal_for_claim(queue);
	if (wait_us == 0)
		(void) call->attempt(fcinfo, call, GetCurrentTimestamp(), NULL);
	else
		waiting_claim(fcinfo, queue, wait_us, call);
}
