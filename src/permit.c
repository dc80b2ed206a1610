/*-------------------------------------------------------------------------
 *
 * permit.c
 *		Shared pacing: permit(bucket, max, per), a sliding-window rate limit
 *		that every process and replica using the database shares, and the
 *		sweep's expiry of the permits it leaves behind.
 *
 * A bucket grants at most `max` permits in any window of length `per`.
 * Every grant is a row of durable.permits (bucket, granted_at); a call
 * grants when fewer than `max` grants are younger than `per`, and otherwise
 * answers how long until enough of them leave the window, consuming nothing.
 *
 * Locking protocol.  Each bucket has one row in durable.permit_buckets, and
 * its row lock serialises the bucket's calls:
 *	1. INSERT ... ON CONFLICT DO UPDATE creates or locks the bucket row (and
 *	   records the call's `per`);
 *	2. only then is "now" read (GetCurrentTimestamp), so the grants of one
 *	   bucket are stamped in lock order;
 *	3. a new statement, hence (in READ COMMITTED) a new snapshot taken under
 *	   the lock, deletes the grants that left the window and counts the rest:
 *	   every earlier grant has committed or rolled back by then;
 *	4. a grant inserts its row and stamps the bucket's last_granted_at.
 * The lock is held until the caller's transaction ends, so the count of a
 * call includes every grant before it.  By induction, each grant saw fewer
 * than `max` others in (now - per, now], hence no half-open window of length
 * `per` ever holds more than `max` grants.
 *
 * Clock steps.  After the clock stepped back, the grants stamped before the
 * step lie ahead of now.  Each call restamps those of its bucket to its
 * now: every one of them was made before the call, so the stamp only moves
 * later than the grant really was, and the grant stays in the window for
 * `per` at least (callers wait longer, never get too many) — but no longer
 * than `per` after the step, where keeping the old stamp would block the
 * bucket for as long as the clock had been ahead (hours, after a bad NTP
 * step: a gateway that cannot Identify).
 *
 * Because step 1 always writes the bucket row, a REPEATABLE READ or
 * SERIALIZABLE caller whose snapshot predates another grant gets a
 * serialization failure (40001) at step 1 instead of counting with a stale
 * snapshot, and may retry; one whose snapshot predates the sweep's drop of
 * the idle bucket gets it at step 3 (the bucket's old grants, deleted
 * since).  READ COMMITTED callers never do.
 *
 * The caller's transaction owns the grant: a rolled-back permit is not
 * consumed, and the bucket stays locked until the caller commits.  Callers
 * should therefore call permit() in a transaction of its own (autocommit).
 *
 * Expiry.  A bucket in use trims its own old grants at every call, so it
 * holds at most about `max` rows.  A bucket no longer used keeps its last
 * grants until the sweep (durable_permit_expire) drops it: once its last
 * grant is older than its `per`, every grant it holds has left the window.
 * The sweep locks such buckets with SKIP LOCKED (it never waits for a
 * caller), re-checks on the locked row version, and deletes the grants in a
 * later statement whose snapshot sees every grant that committed before the
 * lock; a grant that commits later would need the lock first.  Each call
 * deletes a bounded number of rows, so a bucket with many grants may take
 * several passes (the walk below stays on its window meanwhile).  Each call
 * also reads a bounded number of buckets: it
 * walks them in key order, PERMIT_EXPIRE_WINDOW at a time from where the
 * process's previous call stopped, and from the first again after the
 * last; a table of many buckets in use is gone round over several passes
 * instead of read whole at every one (with 300,000 in use, a pass took
 * 37 ms here; 5 ms with the walk).
 *
 * IDENTIFICATION
 *	  src/permit.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "isolate.h"
#include "permit.h"
#include "sweep.h"

PG_FUNCTION_INFO_V1(durable_permit);

/* Limits of the arguments (documented in the README). */
#define PERMIT_MAX_MAX			1000000
#define PERMIT_MIN_PER_US		(1000)	/* 1 ms */
#define PERMIT_MAX_PER_US		(7 * USECS_PER_DAY)

/* Buckets the sweep's expiry reads per call (file header: Expiry). */
#define PERMIT_EXPIRE_WINDOW	5000

/*
 * Idle buckets whose drop failed are passed over by this process for the
 * sweep's DURABLE_SWEEP_SKIP_RETRY_MS, up to this many by name.
 */
#define PERMIT_SKIP_MAX			1000

/* The bucket the process's walk of durable_permit_expire goes on after; NULL: the first. */
static char *permit_expire_after = NULL;

/*
 * The idle buckets whose drop failed lately (a key of a trusted table that
 * references one, a trigger that raises), by name; past PERMIT_SKIP_MAX of
 * them, every idle bucket whose last grant is not after the newest
 * failure's.  (No relation to tell an extension created again by: a name
 * passed over in the new table is at worst dropped 10 minutes late.)
 */
static DurableSkipList permit_skip = DURABLE_SKIP_LIST(TEXTOID, PERMIT_SKIP_MAX,
													   DURABLE_SWEEP_SKIP_RETRY_MS);

/*
 * permit(bucket, max, per) → '0' when a permit was free (it is consumed by
 * the caller's transaction), else the time until one will be (nothing is
 * consumed).  See the file header for the locking protocol; the caller's
 * transaction holds the bucket's row lock until it ends.
 */
Datum
durable_permit(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr lock_plan = NULL;
	static SPIPlanPtr count_plan = NULL;
	static SPIPlanPtr grant_plan = NULL;
	static SPIPlanPtr oldest_plan = NULL;
	static const Oid lock_types[2] = {TEXTOID, INTERVALOID};
	static const Oid count_types[3] = {TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	static const Oid oldest_types[3] = {TEXTOID, TIMESTAMPTZOID, INT8OID};
	Datum		bucket;
	int32		max;
	int64		per_us;
	Datum		args[3];
	TimestampTz now;
	TimestampTz cutoff;
	int64		in_window;
	int64		wait_us;

	bucket = durable_arg_id(fcinfo, 0, "bucket");
	max = durable_arg_int32(fcinfo, 1, "max");
	if (max < 1 || max > PERMIT_MAX_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max must be between 1 and %d", PERMIT_MAX_MAX)));
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("per cannot be null")));
	per_us = durable_arg_interval_us(fcinfo, 2, "per", 0, PERMIT_MIN_PER_US, PERMIT_MAX_PER_US);

	SPI_connect();

	/* 1. Create or lock the bucket row; it stays locked to our commit. */
	args[0] = bucket;
	args[1] = durable_interval_datum(per_us);
	durable_exec(durable_plan(&lock_plan,
							  "INSERT INTO durable.permit_buckets AS b (bucket, per)"
							  " VALUES ($1, $2)"
							  " ON CONFLICT (bucket) DO UPDATE SET per = EXCLUDED.per",
							  2, lock_types),
				 args, NULL, SPI_OK_INSERT, 0);
	if (SPI_processed != 1)
		durable_write_skipped("permit_buckets");

	/*
	 * Plan the statements of steps 3 and 4, or check that their plans are
	 * still valid, before reading the clock (step 2): planned between the
	 * stamp and the grant (a connection's first call, and the first after
	 * an ANALYZE of durable.permits invalidated them), they made the caller
	 * learn of its permit up to a millisecond after the stamp that the window
	 * counts.  Done under the bucket lock, this also takes their relations'
	 * locks, so no invalidation arriving later is processed before the grant.
	 */
	durable_plan_build(durable_plan(&count_plan,
					"WITH gone AS ("
					"  DELETE FROM ONLY durable.permits p"
					"   WHERE p.bucket = $1 AND p.granted_at <= $2),"
					" ahead AS ("
					"  UPDATE ONLY durable.permits p SET granted_at = $3"
					"   WHERE p.bucket = $1 AND p.granted_at > $3),"
					" last AS ("
					"  UPDATE ONLY durable.permit_buckets b SET last_granted_at = $3"
					"   WHERE b.bucket = $1 AND b.last_granted_at > $3)"
					" SELECT pg_catalog.count(*) FROM ONLY durable.permits p"
					"  WHERE p.bucket = $1 AND p.granted_at > $2",
					3, count_types));
	durable_plan_build(durable_plan(&grant_plan,
					"WITH p AS ("
					"  INSERT INTO durable.permits (bucket, granted_at)"
					"  VALUES ($1, $2) RETURNING 1),"
					" b AS ("
					"  UPDATE ONLY durable.permit_buckets b SET last_granted_at = $2"
					"   WHERE b.bucket = $1 RETURNING 1)"
					" SELECT (SELECT pg_catalog.count(*) FROM p),"
					"        (SELECT pg_catalog.count(*) FROM b)",
					2, count_types));
	durable_plan_build(durable_plan(&oldest_plan,
					"SELECT p.granted_at FROM ONLY durable.permits p"
					" WHERE p.bucket = $1 AND p.granted_at > $2"
					" ORDER BY p.granted_at OFFSET $3 LIMIT 1",
					3, oldest_types));

	/* 2. Only now, under the lock, read the clock. */
	now = GetCurrentTimestamp();
	cutoff = now - per_us;

	/*
	 * 3. Forget the grants that left the window, bring back to now those
	 * stamped ahead of it (file header: clock steps), and count the others.
	 */
	args[1] = TimestampTzGetDatum(cutoff);
	args[2] = TimestampTzGetDatum(now);
	durable_exec(count_plan, args, NULL, SPI_OK_SELECT, 0);
	in_window = durable_col_int64(0, 1);

	if (in_window < max)
	{
		/*
		 * 4. Grant: one row, and the bucket's last grant for the sweep.  A
		 * grant that was not written (a trigger that returned NULL) would
		 * not count against the next calls: an error instead.
		 */
		args[1] = TimestampTzGetDatum(now);
		durable_exec(grant_plan, args, NULL, SPI_OK_SELECT, 0);
		if (durable_col_int64(0, 1) != 1)
			durable_write_skipped("permits");
		if (durable_col_int64(0, 2) != 1)
			durable_write_skipped("permit_buckets");
		wait_us = 0;
	}
	else
	{
		/*
		 * Refused.  A permit frees up when the grant that would leave exactly
		 * max - 1 in the window leaves it: the (in_window - max + 1)-th
		 * oldest, which is the oldest unless max was lowered.
		 */
		TimestampTz frees_at;

		args[2] = Int64GetDatum(in_window - max);
		durable_exec(oldest_plan, args, NULL, SPI_OK_SELECT, 0);
		if (SPI_processed != 1)
			elog(ERROR, "durable: permit window changed while locked");
		frees_at = DatumGetTimestampTz(durable_col(0, 1)) + per_us;
		/* Positive, as granted_at > cutoff; never 0, which means granted. */
		wait_us = Max(frees_at - now, 1);
	}
	SPI_finish();

	PG_RETURN_DATUM(durable_interval_datum(wait_us));
}

/* Where the process's next durable_permit_expire starts (NULL: the first bucket). */
static void
permit_expire_set_after(const char *bucket)
{
	char	   *copy = bucket ? MemoryContextStrdup(TopMemoryContext, bucket) : NULL;

	if (permit_expire_after != NULL)
		pfree(permit_expire_after);
	permit_expire_after = copy;
}

/*
 * The last bucket of this call's window: the PERMIT_EXPIRE_WINDOW-th after
 * `after`, else the last of all (*wraps set: the next call starts from the
 * first), found by the primary key's index.  NULL when no bucket follows
 * `after`.  The window's size is written into the statement, so that the
 * generic plan knows how few rows it reads.
 */
static char *
permit_expire_window_end(const char *after, bool *wraps)
{
	static SPIPlanPtr end_plan = NULL;
	static SPIPlanPtr last_plan = NULL;
	static const Oid types[1] = {TEXTOID};
	Datum		args[1];

	args[0] = CStringGetTextDatum(after ? after : "");
	durable_exec(durable_plan(&end_plan,
							  "SELECT w.bucket FROM ONLY durable.permit_buckets w"
							  " WHERE w.bucket > $1 ORDER BY w.bucket"
							  " OFFSET " CppAsString2(PERMIT_EXPIRE_WINDOW) " - 1 LIMIT 1",
							  1, types),
				 args, NULL, SPI_OK_SELECT, 0);
	*wraps = (SPI_processed == 0);
	if (!*wraps)
		return TextDatumGetCString(durable_col(0, 1));
	durable_exec(durable_plan(&last_plan,
							  "SELECT pg_catalog.max(w.bucket) FROM ONLY durable.permit_buckets w"
							  " WHERE w.bucket > $1",
							  1, types),
				 args, NULL, SPI_OK_SELECT, 0);
	return durable_col_isnull(0, 1) ? NULL : TextDatumGetCString(durable_col(0, 1));
}

/* What a call of durable_permit_expire's drops have done so far. */
typedef struct PermitDrop
{
	int64		limit;			/* grants the call may delete */
	int64		grants;			/* deleted */
	int64		buckets;		/* dropped */
	int			failed;			/* buckets whose drop failed alone */
	ErrorData  *first;			/* the first of those failures */
} PermitDrop;

/*
 * Delete the grants of the locked idle buckets buckets[0..n), as many as
 * the call's limit leaves, then drop those of them left without a grant.
 * New statements: their snapshots, taken while we hold the locks, see every
 * grant of these buckets (in READ COMMITTED; under a transaction snapshot,
 * a grant after ours would have made the lock fail).  Every grant of an
 * idle bucket has left the window: a later one would have moved
 * last_granted_at.  Grants that the delete chose and kept (a trigger of
 * yours returned NULL for them, a policy hid them) fail the buckets: they
 * would be chosen first again at every pass, and the limit spent on them
 * (found by review, 2026-12-07).
 */
static void
permit_drop(void *arg, const Datum *buckets, int n)
{
	static SPIPlanPtr grants_plan = NULL;
	static SPIPlanPtr drop_plan = NULL;
	static const Oid types[2] = {TEXTARRAYOID, INT8OID};
	PermitDrop *drop = (PermitDrop *) arg;
	Datum		args[2];
	int64		grants;

	args[0] = durable_key_array(buckets, n, TEXTOID);
	args[1] = Int64GetDatum(drop->limit - drop->grants);
	durable_exec(durable_plan(&grants_plan,
							  "WITH chosen AS ("
							  "  SELECT pg_catalog.array_agg(q.ctid) AS ctids FROM ("
							  "    SELECT q.ctid FROM ONLY durable.permits q"
							  "     WHERE q.bucket = ANY ($1) LIMIT $2) q),"
							  " p AS ("
							  "  DELETE FROM ONLY durable.permits p"
							  "   WHERE p.ctid = ANY ((SELECT c.ctids FROM chosen c)::pg_catalog.tid[])"
							  "  RETURNING 1)"
							  " SELECT pg_catalog.count(*),"
							  "        (SELECT pg_catalog.cardinality(c.ctids) FROM chosen c)"
							  "   FROM p",
							  2, types),
				 args, NULL, SPI_OK_SELECT, 0);
	grants = durable_col_int64(0, 1);
	if (!durable_col_isnull(0, 2) && grants < durable_col_int64(0, 2))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a trigger or policy on durable.permits kept " INT64_FORMAT " old grant%s of idle buckets from being deleted",
						durable_col_int64(0, 2) - grants, durable_col_int64(0, 2) - grants == 1 ? "" : "s"),
				 errdetail("A BEFORE DELETE trigger returned NULL for them, or a row-level security policy hides them from durable's owner.")));
	durable_exec(durable_plan(&drop_plan,
							  "WITH b AS ("
							  "  DELETE FROM ONLY durable.permit_buckets b"
							  "   WHERE b.bucket = ANY ($1)"
							  "     AND NOT EXISTS (SELECT FROM ONLY durable.permits p"
							  "                      WHERE p.bucket = b.bucket)"
							  "  RETURNING 1)"
							  " SELECT pg_catalog.count(*) FROM b",
							  1, types),
				 args, NULL, SPI_OK_SELECT, 0);
	drop->grants += grants;
	drop->buckets += durable_col_int64(0, 1);
}

/* A bucket whose drop failed alone: passed over for a while (permit_skip). */
static void
permit_drop_failed(void *arg, Datum bucket, TimestampTz last_granted_at, ErrorData *edata)
{
	PermitDrop *drop = (PermitDrop *) arg;

	drop->failed++;
	durable_skip_remember(&permit_skip, bucket, last_granted_at);
	durable_keep_first_error(&drop->first, edata);
}

/*
 * Drop buckets whose grants have all left their window: locks at most
 * `limit` such buckets, deletes at most `limit` of their grants, then the
 * locked buckets left without grants, among the PERMIT_EXPIRE_WINDOW
 * buckets after where the process's previous call stopped (file header).
 * Returns how many rows (grants and buckets) it deleted; a result below
 * `limit` means nothing else was due in that window, apart from buckets
 * that callers held or that this process passes over.  Buckets locked by a
 * caller are skipped, never waited for.  The drop runs in a
 * subtransaction; when it fails, the buckets that fail are found by halves
 * (isolate.c), the others dropped, and those passed over for 10 minutes:
 * *nfailed says how many, *failure the first one's error (the caller frees
 * it).  Caller must have SPI connected, in a transaction.
 */
int64
durable_permit_expire(int limit, int *nfailed, ErrorData **failure)
{
	static SPIPlanPtr idle_plan = NULL;
	static const Oid idle_types[6] = {TIMESTAMPTZOID, INT4OID, TEXTOID, TEXTOID,
	TEXTARRAYOID, TIMESTAMPTZOID};
	Datum		args[6];
	Datum	   *buckets;
	TimestampTz *last_granted;
	char	   *window_start = permit_expire_after;
	char	   *window_end;
	char	   *next_after;
	bool		wraps;
	uint64		n;
	uint64		i;
	PermitDrop	drop = {.limit = limit};

	*nfailed = 0;
	*failure = NULL;
	if (limit <= 0)
		return 0;

	/*
	 * The caller's delete check (sweep.c, sweep_permits_isolated) has taken
	 * the deletes' lock on durable.permit_buckets already, before this read
	 * (durable_lock_journal_for_write says why that order matters).
	 */

	/*
	 * This call's window: the PERMIT_EXPIRE_WINDOW buckets after where the
	 * previous one stopped ('' sorts before every bucket, which is never
	 * empty); from the first when none follow.
	 */
	window_end = permit_expire_window_end(window_start, &wraps);
	if (window_end == NULL && window_start != NULL)
	{
		window_start = NULL;
		window_end = permit_expire_window_end(NULL, &wraps);
	}
	if (window_end == NULL)
	{
		permit_expire_set_after(NULL);
		return 0;
	}

	/*
	 * Lock the idle buckets of the window, but those passed over.  The
	 * condition reads the bucket row only, so that READ COMMITTED rechecks
	 * it on the latest version of a row that a grant changed meanwhile (a
	 * grant always stamps last_granted_at).  By the clock of now, not of the
	 * pass's start: a pass's earlier steps can take long (a trigger of yours,
	 * a lock wait), and a clock set back meanwhile would make a grant made
	 * since look as old as the step, the bucket idle, and its window free for
	 * `max` more.
	 */
	(void) durable_skip_forget_due(&permit_skip, InvalidOid);
	args[0] = TimestampTzGetDatum(GetCurrentTimestamp());
	args[1] = Int32GetDatum(limit);
	args[2] = CStringGetTextDatum(window_start ? window_start : "");
	args[3] = CStringGetTextDatum(window_end);
	args[4] = durable_skip_array(&permit_skip);
	args[5] = TimestampTzGetDatum(durable_skip_from(&permit_skip));
	durable_exec(durable_plan(&idle_plan,
							  "SELECT b.bucket, COALESCE(b.last_granted_at, '-infinity')"
							  "  FROM ONLY durable.permit_buckets b"
							  " WHERE b.bucket > $3 AND b.bucket <= $4"
							  "   AND (b.last_granted_at IS NULL"
							  "        OR b.last_granted_at <= $1 - b.per)"
							  "   AND b.bucket <> ALL ($5)"
							  "   AND COALESCE(b.last_granted_at, '-infinity') >= $6"
							  " ORDER BY b.bucket LIMIT $2 FOR UPDATE SKIP LOCKED",
							  6, idle_types),
				 args, NULL, SPI_OK_SELECT, 0);
	n = SPI_processed;

	/*
	 * The next call goes on after this window (from the first bucket after
	 * the last), or after the last bucket locked when the limit stopped this
	 * one short of the window's end.
	 */
	if (n > 0 && n == (uint64) limit)
		next_after = TextDatumGetCString(durable_col(n - 1, 1));
	else
		next_after = wraps ? NULL : window_end;
	if (n == 0)
	{
		permit_expire_set_after(next_after);
		return 0;
	}

	buckets = (Datum *) palloc(sizeof(Datum) * n);
	last_granted = (TimestampTz *) palloc(sizeof(TimestampTz) * n);
	for (i = 0; i < n; i++)
	{
		buckets[i] = durable_col_copy(i, 1);
		last_granted[i] = DatumGetTimestampTz(durable_col(i, 2));
		/* (a bucket never granted: -infinity would read as "no mark" past PERMIT_SKIP_MAX) */
		if (last_granted[i] == DT_NOBEGIN)
			last_granted[i] = DT_NOBEGIN + 1;
	}
	durable_try_keys(permit_drop, permit_drop_failed, &drop, buckets, last_granted, (int) n);

	/*
	 * Grants left over in the locked buckets: the next call (at once, as
	 * this one filled its batch) reads this window again, instead of a
	 * round of the whole table later.
	 */
	if (drop.grants >= limit)
		next_after = window_start;

	pfree(last_granted);
	pfree(buckets);
	permit_expire_set_after(next_after);
	*nfailed = drop.failed;
	*failure = drop.first;
	return drop.grants + drop.buckets;
}
