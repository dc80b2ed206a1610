/*-------------------------------------------------------------------------
 *
 * recovery.c
 *		Recovery of lost leases: the sweep's (expired leases) and
 *		instance_start()'s (leases of a dead incarnation).
 *
 * Inbox records whose lease is lost go back to pending (due now; token,
 * owner and attempts kept), or to dead when the record used its last
 * attempt, so that a message that kills its handler every time cannot loop
 * forever.  Sends whose lease is lost (state sending) become unknown: the
 * provider may or may not have delivered them, so they are never resent by
 * themselves.
 *
 * Fencing (lessons.md #1, River #1302).  The statements pick their rows with
 *	  chosen: ARRAY(SELECT id ... WHERE state = 'leased' AND <lost>
 *					ORDER BY ... LIMIT n FOR NO KEY UPDATE SKIP LOCKED)
 *	  WHERE id = ANY (chosen) AND state = 'leased' AND <lost>
 * The row lock is taken on the row's latest version and the outer condition
 * is re-checked on it, so a completion or a fresh takeover that committed
 * after the statement's snapshot was taken is never overwritten: recovery
 * only moves a record whose lease is still the lost one it looked at.
 * SKIP LOCKED means recovery never waits for a row that a confirmation or a
 * claim holds (that record is someone else's business this time round),
 * or that an outbox_begin/outbox_enqueue fenced by the record's lease holds
 * until its commit (FOR SHARE, or the derived key's counter update: moving
 * the lease would break the fence),
 * two concurrent sweeps never move the same record, and since recovery
 * locks only rows it does not wait for, it cannot take part in a deadlock.
 * FOR NO KEY UPDATE, the lock the UPDATE takes anyway (it changes no
 * column a foreign key can reference): a record that a foreign key of yours
 * holds FOR KEY SHARE (a row of your table inserted beside the handler's
 * work) is recovered, not passed over.
 * Under REPEATABLE READ a record changed after the caller's snapshot makes
 * the statement fail with a serialization error rather than overwrite it.
 *
 * The ARRAY() form makes the locking scan run once, after
 * which the outer statement probes the primary key for exactly those rows:
 * the cost of a batch is the batch.  (With "id IN (subquery)" the planner
 * may join against a scan of every lost row, which makes clearing a backlog
 * quadratic.)  Lost leases are found among the open records only: inbox
 * records through inbox_unfinished_idx (INBOX_OPEN_SCAN), sends in state
 * sending through outbox_chat_unfinished_idx.
 *
 * One record whose recovery fails (a trigger of yours that raises on it, a
 * constraint you added) must not stop the recovery of every other lost
 * lease, pass after pass: the sweep runs each journal's batch in a
 * subtransaction and, when it fails, finds the records that fail by halving
 * the batch (isolate.c), and this process passes over them for
 * RECOVERY_SKIP_RETRY_MS.  instance_start() is all or
 * nothing instead: its caller sees the error and can run it again.
 *
 * IDENTIFICATION
 *	  src/recovery.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "isolate.h"
#include "sweep.h"

/* Why a lost lease was recovered, as its dead record's error says it. */
#define RECOVERY_REASON_EXPIRED		"lease expired"
#define RECOVERY_REASON_RESTARTED	"instance restarted"

/*
 * How long this process passes over the records whose recovery failed, and
 * how many per journal it remembers one by one (DurableSkipList; the mark
 * is the newest failure's lease expiry).  A lost lease waits for its
 * recovery, so failures are tried again sooner than the purge's.
 */
#define RECOVERY_SKIP_RETRY_MS	(60 * 1000)
#define RECOVERY_SKIP_MAX		DURABLE_SWEEP_BATCH

/* Which lost leases a recovery statement moves. */
typedef enum RecoveryScope
{
	RECOVER_EXPIRED,			/* expired before now, oldest lease first, but
								 * those this process passes over */
	RECOVER_OWNER,				/* held under an instance, in journal order */
	RECOVER_KEYS				/* the records of some keys, if their lease
								 * expired */
} RecoveryScope;

/*
 * The records a recovery statement chose and did not move: a BEFORE UPDATE
 * trigger of the DBA's returned NULL for them (only the sweep's statements
 * fire the journals' triggers).  They stay leased and lost, the oldest of
 * all, so unless the sweep passes over them they would fill every batch
 * and stop the recovery of every other lost lease without a word.
 */
typedef struct RecoveryHeld
{
	DurableSkipList *skip;		/* where this process remembers them */
	int			count;
	char		first[DURABLE_MAX_ID_BYTES + 1];	/* the first one's id or key */
} RecoveryHeld;

/* A recovery statement's arguments beyond now and limit; each scope reads its own. */
typedef struct RecoveryArgs
{
	Datum		skip;			/* EXPIRED: the keys passed over (an array) */
	TimestampTz from;			/* EXPIRED: and every lease that ran out before
								 * this (durable_skip_from) */
	Datum		owner;			/* OWNER: the instance (text) */
	Datum		keys;			/* KEYS: the records' ids (int8[]) or keys (text[]) */
} RecoveryArgs;

/*
 * The inbox recovery statement, for a "lost lease" condition given as a
 * column of alias c (the candidate scan) and of alias i (the re-check on
 * the locked row version).  $1 now, $2 limit (NULL: all), $3
 * durable.inbox_max_attempts, $4 the reason, $5-$8 RecoveryArgs.  It
 * returns the moved records in id order so that notifications go out in a
 * stable order, then the records it chose and did not move, with their
 * lease: every one it chose is locked and still lost, so the UPDATE skipped
 * them only because a BEFORE UPDATE trigger of the DBA's returned NULL
 * (RecoveryHeld).  That second scan runs only when fewer moved than were
 * chosen (a one-time filter), so it costs a batch nothing otherwise.
 */
#define RECOVERY_INBOX_SQL(lost_c, lost_i, order_c) \
	"WITH chosen AS MATERIALIZED (" \
	" SELECT ARRAY(SELECT c.id FROM ONLY durable.inbox c" \
	"               WHERE " INBOX_OPEN_SCAN("c") \
	"                 AND c.state = 'leased' AND " lost_c \
	"               ORDER BY " order_c " LIMIT $2" \
	"               FOR NO KEY UPDATE SKIP LOCKED) AS ids)," \
	" moved AS (" \
	" UPDATE ONLY durable.inbox i" \
	"    SET state = CASE WHEN i.attempts >= $3 THEN 'dead' ELSE 'pending' END," \
	"        not_before = CASE WHEN i.attempts >= $3 THEN i.not_before ELSE $1 END," \
	"        error = CASE WHEN i.attempts >= $3" \
	"                THEN pg_catalog.format('%s after %s %s', $4, i.attempts," \
	"                       CASE WHEN i.attempts = 1 THEN 'attempt' ELSE 'attempts' END)" \
	"                ELSE i.error END," \
	"        lease_until = NULL," \
	"        finished_at = CASE WHEN i.attempts >= $3 THEN $1 END" \
	"  WHERE i.id = ANY ((SELECT ids FROM chosen)::pg_catalog.int8[])" \
	"    AND i.state = 'leased' AND " lost_i \
	"  RETURNING i.id, i.state, i.error)" \
	" SELECT m.id, m.state = 'dead', m.error, false, NULL::pg_catalog.timestamptz" \
	"   FROM moved m" \
	" UNION ALL" \
	" SELECT h.id, false, NULL, true, h.lease_until FROM ONLY durable.inbox h" \
	"  WHERE h.id = ANY ((SELECT ids FROM chosen)::pg_catalog.int8[]) AND h.id NOT IN (SELECT id FROM moved)" \
	"    AND (SELECT pg_catalog.count(*) FROM moved)" \
	"        < pg_catalog.cardinality((SELECT ids FROM chosen))" \
	" ORDER BY 4, 1"
#define RECOVERY_INBOX_NARGS 8

/*
 * The outbox recovery statement, same shape and answer: $1 now, $2 limit,
 * $3-$6 RecoveryArgs.  Owner, token and attempts stay: they say who was
 * sending and how many tries the provider saw.
 */
#define RECOVERY_OUTBOX_SQL(lost_c, lost_o, order_c) \
	"WITH chosen AS MATERIALIZED (" \
	" SELECT ARRAY(SELECT c.key FROM ONLY durable.outbox c" \
	"               WHERE c.state = 'sending' AND " lost_c \
	"               ORDER BY " order_c " LIMIT $2" \
	"               FOR NO KEY UPDATE SKIP LOCKED) AS keys)," \
	" flagged AS (" \
	" UPDATE ONLY durable.outbox o" \
	"    SET state = 'unknown', lease_until = NULL" \
	"  WHERE o.key = ANY ((SELECT keys FROM chosen)::pg_catalog.text[])" \
	"    AND o.state = 'sending' AND " lost_o \
	"  RETURNING o.id, o.key, o.chat_id)" \
	" SELECT f.key, f.chat_id, f.id, false, NULL::pg_catalog.timestamptz" \
	"   FROM flagged f" \
	" UNION ALL" \
	" SELECT h.key, h.chat_id, h.id, true, h.lease_until FROM ONLY durable.outbox h" \
	"  WHERE h.key = ANY ((SELECT keys FROM chosen)::pg_catalog.text[]) AND h.key NOT IN (SELECT key FROM flagged)" \
	"    AND (SELECT pg_catalog.count(*) FROM flagged)" \
	"        < pg_catalog.cardinality((SELECT keys FROM chosen))" \
	" ORDER BY 4, 3"
#define RECOVERY_OUTBOX_NARGS 6

/*
 * One journal's recovery, as the sweep isolates it: how to recover, its
 * oldest expired leases for the search of the records that fail ($1 now,
 * $2 limit, $3 the skip array, $4 durable_skip_from; key and lease_until), and the
 * records this process passes over.
 */
typedef struct RecoveryJournal
{
	const char *what;			/* for the WARNING: "inbox record", "send" */
	DurableQueue queue;			/* its journal (durable_queue_names) */
	int			(*recover) (TimestampTz now, RecoveryScope scope, const RecoveryArgs *args,
							int limit, RecoveryHeld *held);
	const char *candidates_sql;
	SPIPlanPtr	candidates_plan;
	DurableSkipList skip;		/* records whose recovery failed lately */
	int64		momentary_warned_at;	/* the last WARNING of failures of the moment */
} RecoveryJournal;

static int	recovery_inbox(TimestampTz now, RecoveryScope scope, const RecoveryArgs *args,
						   int limit, RecoveryHeld *held);
static int	recovery_outbox(TimestampTz now, RecoveryScope scope, const RecoveryArgs *args,
							int limit, RecoveryHeld *held);

static RecoveryJournal recovery_journals[] = {
	{
		.what = "inbox record",
		.queue = DQ_INBOX,
		.recover = recovery_inbox,
		.candidates_sql = "SELECT c.id, c.lease_until FROM ONLY durable.inbox c"
		" WHERE " INBOX_OPEN_SCAN("c") " AND c.state = 'leased' AND c.lease_until < $1"
		"   AND c.id <> ALL ($3) AND c.lease_until >= $4"
		" ORDER BY c.lease_until LIMIT $2",
		.skip = DURABLE_SKIP_LIST(INT8OID, RECOVERY_SKIP_MAX, RECOVERY_SKIP_RETRY_MS),
	},
	{
		.what = "send",
		.queue = DQ_OUTBOX,
		.recover = recovery_outbox,
		.candidates_sql = "SELECT c.key, c.lease_until FROM ONLY durable.outbox c"
		" WHERE c.state = 'sending' AND c.lease_until < $1"
		"   AND c.key <> ALL ($3) AND c.lease_until >= $4"
		" ORDER BY c.lease_until LIMIT $2",
		.skip = DURABLE_SKIP_LIST(TEXTOID, RECOVERY_SKIP_MAX, RECOVERY_SKIP_RETRY_MS),
	},
};

/* $2 limit as a datum: NULL (no LIMIT) for 0. */
static void
recovery_limit_param(int limit, Datum *value, char *null)
{
	*value = Int64GetDatum((int64) limit);
	*null = (limit > 0) ? ' ' : 'n';
}

/*
 * RecoveryArgs as the statements' parameters from `first` on: the skip array
 * and its start, owner, keys; those the scope does not read are NULL.
 */
static void
recovery_args_params(RecoveryScope scope, const RecoveryArgs *args, Datum *values, char *nulls)
{
	values[0] = args->skip;
	values[1] = TimestampTzGetDatum(args->from);
	values[2] = args->owner;
	values[3] = args->keys;
	nulls[0] = nulls[1] = (scope == RECOVER_EXPIRED) ? ' ' : 'n';
	nulls[2] = (scope == RECOVER_OWNER) ? ' ' : 'n';
	nulls[3] = (scope == RECOVER_KEYS) ? ' ' : 'n';
}

/*
 * Row `row` of a recovery statement's answer, a record it chose and did not
 * move (columns 4 and 5: held, lease_until): note it in `held`, which the
 * sweep passes; instance_start's statements cannot meet one (it refuses a
 * journal with such a trigger).
 */
static void
recovery_note_held(RecoveryHeld *held, uint64 row)
{
	if (held == NULL)
		return;
	if (held->count++ == 0)
		strlcpy(held->first, SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1),
				sizeof(held->first));
	durable_skip_remember(held->skip, durable_col(row, 1),
						  DatumGetTimestampTz(durable_col(row, 5)));
}

static int
recovery_inbox(TimestampTz now, RecoveryScope scope, const RecoveryArgs *args, int limit,
			   RecoveryHeld *held)
{
	static SPIPlanPtr plans[3];
	static const char *const sql[3] = {
		[RECOVER_EXPIRED] = RECOVERY_INBOX_SQL("c.lease_until < $1 AND c.id <> ALL ($5)"
											   " AND c.lease_until >= $6",
											   "i.lease_until < $1", "c.lease_until"),
		[RECOVER_OWNER] = RECOVERY_INBOX_SQL("c.owner = $7", "i.owner = $7", "c.id"),
		[RECOVER_KEYS] = RECOVERY_INBOX_SQL("c.id = ANY ($8) AND c.lease_until < $1",
										   "i.lease_until < $1", "c.id"),
	};
	static const Oid types[RECOVERY_INBOX_NARGS] = {
		TIMESTAMPTZOID, INT8OID, INT4OID, TEXTOID,
		INT8ARRAYOID, TIMESTAMPTZOID, TEXTOID, INT8ARRAYOID
	};
	Datum		values[RECOVERY_INBOX_NARGS];
	char		nulls[RECOVERY_INBOX_NARGS] = {' ', ' ', ' ', ' '};
	uint64		n = 0;
	uint64		row;
	int64		dead = 0;

	values[0] = TimestampTzGetDatum(now);
	recovery_limit_param(limit, &values[1], &nulls[1]);
	values[2] = Int32GetDatum(durable_inbox_max_attempts);
	values[3] = CStringGetTextDatum(scope == RECOVER_OWNER ? RECOVERY_REASON_RESTARTED
									: RECOVERY_REASON_EXPIRED);
	recovery_args_params(scope, args, &values[4], &nulls[4]);
	durable_exec(durable_plan(&plans[scope], sql[scope], RECOVERY_INBOX_NARGS, types),
				 values, nulls, SPI_OK_SELECT, 0);

	for (row = 0; row < SPI_processed; row++)
	{
		if (DatumGetBool(durable_col(row, 4)))
		{
			recovery_note_held(held, row);
			continue;
		}
		n++;
		if (!DatumGetBool(durable_col(row, 2)))
			continue;
		dead++;
		durable_notify_dead_inbox(durable_col_int64(row, 1),
								  durable_text_to_cstring_datum(durable_col(row, 3)));
	}
	if (dead > 0)
		durable_count(DC_INBOUND_DEAD, dead);

	/*
	 * Pending records are claimable again, and a dead one no longer holds
	 * back the younger records of its chat.
	 */
	if (n > 0)
	{
		durable_claim_floor_lower(DQ_INBOX, durable_col_int64(0, 1));
		durable_wake_at_commit(DQ_INBOX);
	}
	/* The search for the records that fail runs many of these in one pass. */
	SPI_freetuptable(SPI_tuptable);
	return (int) n;
}

static int
recovery_outbox(TimestampTz now, RecoveryScope scope, const RecoveryArgs *args, int limit,
				RecoveryHeld *held)
{
	static SPIPlanPtr plans[3];
	static const char *const sql[3] = {
		[RECOVER_EXPIRED] = RECOVERY_OUTBOX_SQL("c.lease_until < $1 AND c.key <> ALL ($3)"
												" AND c.lease_until >= $4",
												"o.lease_until < $1", "c.lease_until"),
		[RECOVER_OWNER] = RECOVERY_OUTBOX_SQL("c.owner = $5", "o.owner = $5", "c.id"),
		[RECOVER_KEYS] = RECOVERY_OUTBOX_SQL("c.key = ANY ($6) AND c.lease_until < $1",
											"o.lease_until < $1", "c.id"),
	};
	static const Oid types[RECOVERY_OUTBOX_NARGS] = {
		TIMESTAMPTZOID, INT8OID, TEXTARRAYOID, TIMESTAMPTZOID, TEXTOID, TEXTARRAYOID
	};
	Datum		values[RECOVERY_OUTBOX_NARGS];
	char		nulls[RECOVERY_OUTBOX_NARGS] = {' ', ' '};
	uint64		n = 0;
	uint64		row;

	values[0] = TimestampTzGetDatum(now);
	recovery_limit_param(limit, &values[1], &nulls[1]);
	recovery_args_params(scope, args, &values[2], &nulls[2]);
	durable_exec(durable_plan(&plans[scope], sql[scope], RECOVERY_OUTBOX_NARGS, types),
				 values, nulls, SPI_OK_SELECT, 0);

	for (row = 0; row < SPI_processed; row++)
	{
		if (DatumGetBool(durable_col(row, 4)))
		{
			recovery_note_held(held, row);
			continue;
		}
		n++;
		durable_notify_ambiguous(durable_col_int64(row, 3),
								 durable_text_to_cstring_datum(durable_col(row, 1)),
								 durable_text_to_cstring_datum(durable_col(row, 2)));
	}
	if (n > 0)
	{
		durable_count(DC_OUTBOX_AMBIGUOUS, (int64) n);
		/* unknown does not hold back its chat: younger sends may go. */
		durable_claim_floor_finished(DQ_OUTBOX, durable_col_int64(0, 3));
		durable_wake_at_commit(DQ_OUTBOX);
	}
	SPI_freetuptable(SPI_tuptable);
	return (int) n;
}

int
durable_recover_instance_inbox(TimestampTz now, Datum owner)
{
	RecoveryArgs args = {.owner = owner};

	return recovery_inbox(now, RECOVER_OWNER, &args, 0, NULL);
}

int
durable_recover_instance_outbox(TimestampTz now, Datum owner)
{
	RecoveryArgs args = {.owner = owner};

	return recovery_outbox(now, RECOVER_OWNER, &args, 0, NULL);
}

/* A recovery attempt for durable_try: its arguments and what it moved. */
typedef struct RecoveryCall
{
	RecoveryJournal *journal;
	TimestampTz now;
	RecoveryScope scope;
	RecoveryArgs args;
	int			limit;
	RecoveryHeld *held;
	int			moved;
} RecoveryCall;

static void
recovery_call(void *arg)
{
	RecoveryCall *call = (RecoveryCall *) arg;

	call->moved = call->journal->recover(call->now, call->scope, &call->args, call->limit,
										 call->held);
}

/* The search for the records that fail: its journal and what it found. */
typedef struct RecoveryHalves
{
	RecoveryJournal *journal;
	RecoveryHeld *held;
	int			moved;
	int			failed;			/* records that failed alone */
	int			lasting;		/* of them, those remembered (not of the moment) */
	ErrorData  *first;			/* the first one's error */
} RecoveryHalves;

static void
recovery_apply_keys(void *arg, const Datum *keys, int nkeys)
{
	RecoveryHalves *halves = (RecoveryHalves *) arg;
	RecoveryJournal *j = halves->journal;
	RecoveryArgs args = {.keys = durable_key_array(keys, nkeys, j->skip.key_type)};

	halves->moved += j->recover(GetCurrentTimestamp(), RECOVER_KEYS, &args, 0, halves->held);
}

static void
recovery_key_failed(void *arg, Datum key, TimestampTz lease_until, ErrorData *edata)
{
	RecoveryHalves *halves = (RecoveryHalves *) arg;

	halves->failed++;
	if (!durable_error_is_momentary(edata))
	{
		durable_skip_remember(&halves->journal->skip, key, lease_until);
		halves->lasting++;
	}
	durable_keep_first_error(&halves->first, edata);
}

/*
 * After a batch failed: recover up to `limit` of the journal's oldest
 * expired leases by halves (durable_try_halves), passing over those that
 * fail and remembering those that are not of the moment.  `expired` holds
 * the batch's skip array and start, which the candidates leave out too.
 */
static void
recovery_halves(RecoveryHalves *halves, const RecoveryArgs *expired, int limit)
{
	RecoveryJournal *j = halves->journal;
	Oid			types[4] = {TIMESTAMPTZOID, INT8OID,
		j->skip.key_type == INT8OID ? INT8ARRAYOID : TEXTARRAYOID, TIMESTAMPTZOID};
	Datum		values[4];

	values[0] = TimestampTzGetDatum(GetCurrentTimestamp());
	values[1] = Int64GetDatum((int64) limit);
	values[2] = expired->skip;
	values[3] = TimestampTzGetDatum(expired->from);
	durable_exec(durable_plan(&j->candidates_plan, j->candidates_sql, 4, types),
				 values, NULL, SPI_OK_SELECT, 0);
	durable_try_halves(recovery_apply_keys, recovery_key_failed, halves);
}

/* The records a trigger kept, when there are: they are remembered already. */
static void
recovery_warn_held(const RecoveryJournal *j, const RecoveryHeld *held)
{
	if (held->count == 0)
		return;
	ereport(WARNING,
			(errmsg("durable: lease recovery passed over %d expired %s%s that a trigger kept",
					held->count, j->what, held->count == 1 ? "" : "s"),
			 held->count == 1 ?
			 errdetail("A BEFORE UPDATE trigger on durable.%s returned NULL for it (%s %s).",
					   durable_queue_names[j->queue], j->what, held->first) :
			 errdetail("A BEFORE UPDATE trigger on durable.%s returned NULL for them (the first: %s %s).",
					   durable_queue_names[j->queue], j->what, held->first),
			 errhint("They stay leased until the trigger lets them go: this process passes over them for up to a minute, then tries them again.")));
}

/*
 * The sweep's recovery of one journal's expired leases, at most `limit`
 * records, oldest lease first: a batch in a subtransaction, passing over the
 * records this process failed to recover lately; when the batch fails, its
 * records by halves, with a WARNING naming the first failure.  Errors
 * that are not about a record (durable_error_is_global) are thrown on.  Returns
 * how many records moved; *full is set when a batch moved as many as it
 * could, so that more may wait.  Caller must be connected to SPI.
 *
 * Each statement judges leases by the clock when it runs, not when the
 * pass began: a pass can wait long before it gets here (for the journals'
 * lock behind a REINDEX, in a trigger of yours), and a clock set back
 * meanwhile would make a lease granted since look as old as the step, and
 * recover it from a live holder.
 */
static int
recovery_isolated(RecoveryJournal *j, int limit, bool *full)
{
	RecoveryHeld held = {.skip = &j->skip};
	RecoveryCall call = {.journal = j, .scope = RECOVER_EXPIRED,
	.limit = limit, .held = &held};
	RecoveryHalves halves = {.journal = j, .held = &held};
	ErrorData  *edata;
	ErrorData  *first;
	DurableQueueRels rels;

	durable_queue_rels(j->queue, &rels);
	(void) durable_skip_forget_due(&j->skip, rels.heap);
	call.args.skip = durable_skip_array(&j->skip);
	call.args.from = durable_skip_from(&j->skip);
	call.now = GetCurrentTimestamp();
	edata = durable_try(recovery_call, &call);
	if (edata == NULL)
	{
		/* Held records count: the next pass, which passes over them, comes at once. */
		*full = *full || call.moved + held.count >= limit;
		recovery_warn_held(j, &held);
		return call.moved;
	}
	FreeErrorData(edata);

	/*
	 * Full after a search only when it moved a whole batch, however many it
	 * tried: otherwise the worker could run pass after pass without its
	 * pause, meeting the same failures.
	 */
	recovery_halves(&halves, &call.args, limit);
	*full = *full || halves.moved + held.count >= limit;
	recovery_warn_held(j, &held);
	first = halves.first;

	/*
	 * New lasting failures are logged when they are met (they are passed
	 * over afterwards); failures of the moment, which come back at the next
	 * pass if their cause stays, once a minute.
	 */
	if (first != NULL && halves.lasting == 0 &&
		!durable_warn_due(&j->momentary_warned_at, 60 * USECS_PER_SEC))
	{
		FreeErrorData(first);
		first = NULL;
	}
	if (first != NULL)
	{
		ereport(WARNING,
				(errcode(first->sqlerrcode),
				 errmsg("durable: lease recovery could not recover %d expired %s%s: %s",
						halves.failed, j->what, halves.failed == 1 ? "" : "s",
						first->message),
				 first->detail ? errdetail_internal("%s", first->detail) : 0,
				 errhint("The other expired leases were recovered.  Those that failed stay as they are until the cause is removed: this process passes over them for up to a minute, then tries them again (after a deadlock or a lock timeout, at the next pass).")));
		FreeErrorData(first);
	}
	return halves.moved;
}

bool
durable_recover_expired(int *inbox_expired, int *outbox_ambiguous)
{
	bool		full = false;

	*inbox_expired = recovery_isolated(&recovery_journals[0], DURABLE_SWEEP_BATCH, &full);
	*outbox_ambiguous = recovery_isolated(&recovery_journals[1], DURABLE_SWEEP_BATCH, &full);
	return full;
}
