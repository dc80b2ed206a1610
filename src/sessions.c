/*-------------------------------------------------------------------------
 *
 * sessions.c
 *		Resumable gateway sessions: session_save() and session_load().
 *
 * A chat gateway (Discord's, for example) lets a client that lost its
 * connection resume its session, and so receive the events it missed,
 * instead of identifying anew.  A bot replica that restarts can do the same
 * if it finds the session of each of its shards: session_save() keeps one
 * snapshot per (bot, shard), replaced on every save, and session_load()
 * hands it back only while it is still usable.
 *
 * Reasons a saved snapshot is not usable, reported in `ignored` (a program
 * can switch on them); when several apply, the first of this list wins:
 *	'expired'		saved longer ago than max_age;
 *	'future'		saved more than 5 s after "now" (clock skew between
 *					servers, or a dump restored on a machine whose clock is
 *					behind): its age cannot be trusted;
 *	'resume_url'	saved for another gateway URL;
 *	'total_shards'	saved for another shard count (the gateway would refuse
 *					the resume after a resharding).
 * 'expired' and 'future' exclude each other (max_age is never negative).
 * An ignored row carries session_id and sequence NULL, so that nothing
 * resumable comes back; saved_at stays, for the caller's log.
 *
 * Session ids are secrets: whoever holds one can take the session over.
 * Hence: durable.sessions is readable by its owner alone (nothing is granted
 * on it, and it must never be); the two functions are granted apart from
 * the client role (see the README); each role has sessions of its own
 * (owned_by, since 0.10): a save writes, and a load reads, the row of the
 * role that calls, so that two gateways of two teams that share a database
 * can neither take over, replace nor block each other's sessions; no
 * message of this file ever includes
 * a value of session_id (a length error names its byte count only); and
 * the table carries no CHECK constraint, whose violation message would
 * print the failing row.  Statements pass every value as a $n parameter.
 * What this file cannot control is the caller's own statement: the server
 * logs the text of a failing statement (log_min_error_statement), so
 * clients must send the session id as a bind parameter, never as a literal
 * (parameters are not logged on error by default).
 *
 * Limits: bot and session_id as ids (non-empty, at most 512 bytes),
 * resume_url at most 2048 bytes, total_shards from 1 to 16384, shard from 0
 * to total_shards - 1, sequence not negative, max_age from 0 to 366 days.
 *
 * Time is the wall clock at the call (GetCurrentTimestamp), as everywhere
 * in durable, so that a caller's long transaction does not age snapshots.
 *
 * IDENTIFICATION
 *	  src/sessions.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(durable_session_save);
PG_FUNCTION_INFO_V1(durable_session_load);

/* Shards of one bot, as far as gateways go (Discord's largest bots use thousands). */
#define SESSION_MAX_TOTAL_SHARDS	16384

/* A gateway URL may be longer than an id. */
#define SESSION_MAX_URL_BYTES		2048

/* A snapshot saved further than this in the future is not trusted. */
#define SESSION_MAX_FUTURE_US		(5 * USECS_PER_SEC)

/* Default and largest max_age of session_load. */
#define SESSION_DEFAULT_MAX_AGE_US	(60 * USECS_PER_SEC)
#define SESSION_MAX_MAX_AGE_US		DURABLE_MAX_DELAY_US

/* A save's own statement takes far less: older, its stamp predates a wait. */
#define SESSION_RESTAMP_AFTER_US	(10 * 1000)

/*
 * The resume_url argument: non-NULL, non-empty text of at most
 * SESSION_MAX_URL_BYTES.  Returns the detoasted datum.
 */
static Datum
session_arg_url(FunctionCallInfo fcinfo, int argno)
{
	text	   *t;
	Size		len;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("resume_url cannot be null")));
	t = PG_GETARG_TEXT_PP(argno);
	len = VARSIZE_ANY_EXHDR(t);
	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("resume_url cannot be empty")));
	if (len > SESSION_MAX_URL_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("resume_url is too long (%zu bytes)", len),
				 errdetail("A resume URL is limited to %d bytes.", SESSION_MAX_URL_BYTES)));
	return PointerGetDatum(t);
}

/* The shard argument: non-NULL and not negative (its upper bound comes later). */
static int32
session_arg_shard(FunctionCallInfo fcinfo, int argno)
{
	int32		shard = durable_arg_int32(fcinfo, argno, "shard");

	if (shard < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("shard cannot be negative")));
	return shard;
}

/*
 * The total_shards argument, from 1 to SESSION_MAX_TOTAL_SHARDS, and the
 * upper bound of the shard checked before: at most total_shards - 1.
 */
static int32
session_arg_total_shards(FunctionCallInfo fcinfo, int argno, int32 shard)
{
	int32		total_shards = durable_arg_int32(fcinfo, argno, "total_shards");

	if (total_shards < 1 || total_shards > SESSION_MAX_TOTAL_SHARDS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("total_shards must be between 1 and %d", SESSION_MAX_TOTAL_SHARDS)));
	if (shard >= total_shards)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("shard must be less than total_shards"),
				 errdetail("Shard %d does not exist: with %d shards they are numbered from 0 to %d.",
						   shard, total_shards, total_shards - 1)));
	return total_shards;
}

/*
 * Whose sessions a call reads and writes, and the switch to durable's owner
 * for its statements.  The two functions are SECURITY INVOKER (0.10), so
 * that the caller is the current user at the call, as every identity
 * switch of PostgreSQL's has set it: the owner of a SECURITY DEFINER
 * function of another role that calls them, the table's owner when ANALYZE
 * runs an index expression that calls them.  (Inside a SECURITY DEFINER
 * function the current user is the function's owner, and the one outside
 * all of them, GetOuterUserId, is the session's role: code of another role
 * run by ANALYZE or autovacuum would read that role's sessions.)  The
 * statements run as durable's owner, as a SECURITY DEFINER function would
 * run them; an error restores the caller with the (sub)transaction.
 */
typedef struct SessionCall
{
	Datum		caller;			/* the caller's role name (name) */
	Oid			saved_userid;
	int			saved_sec_context;
} SessionCall;

static void
session_begin(SessionCall *call)
{
	char	   *role = GetUserNameFromId(GetUserId(), false);

	call->caller = DirectFunctionCall1(namein, CStringGetDatum(role));
	GetUserIdAndSecContext(&call->saved_userid, &call->saved_sec_context);
	SetUserIdAndSecContext(durable_owner(),
						   call->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

static void
session_end(const SessionCall *call)
{
	SetUserIdAndSecContext(call->saved_userid, call->saved_sec_context);
}

/*
 * session_save(bot, shard, session_id, sequence, resume_url, total_shards)
 * stores the shard's session, replacing the one saved before, stamped with
 * the wall clock, in the caller's role's row.  Saves of one (bot, shard)
 * by one role are serialised by the upsert; the last to commit stands.  A
 * row saved before 0.10 (owned_by '') of the bot and shard is replaced:
 * deleted in the same statement, unless another transaction holds it (its
 * own save is replacing it), which is skipped, not waited for: two roles'
 * saves never wait for each other.
 */
Datum
durable_session_save(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static SPIPlanPtr restamp_plan = NULL;
	static const Oid argtypes[7] = {
		TEXTOID, INT4OID, TEXTOID, INT8OID, TEXTOID, INT4OID, NAMEOID
	};
	Datum		values[7];
	SessionCall call;
	Datum		bot;
	Datum		session_id;
	Datum		resume_url;
	int32		shard;
	int32		total_shards;
	int64		sequence;

	/* Every check comes first, in argument order. */
	bot = durable_arg_id(fcinfo, 0, "bot");
	shard = session_arg_shard(fcinfo, 1);
	session_id = durable_arg_id(fcinfo, 2, "session_id");
	sequence = durable_arg_int64(fcinfo, 3, "sequence");
	if (sequence < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("sequence cannot be negative")));
	resume_url = session_arg_url(fcinfo, 4);
	total_shards = session_arg_total_shards(fcinfo, 5, shard);

	values[0] = bot;
	values[1] = Int32GetDatum(shard);
	values[2] = session_id;
	values[3] = Int64GetDatum(sequence);
	values[4] = resume_url;
	values[5] = Int32GetDatum(total_shards);

	/*
	 * saved_at is read from the clock when the row is ours: a save that
	 * waited for another one and commits after it is the newer.  The DO
	 * UPDATE reads it after the row lock; a save that waited for another
	 * transaction's first save of the shard, which rolled back, inserts the
	 * VALUES read before the wait, and stamps them again.
	 */
	session_begin(&call);
	values[6] = call.caller;
	SPI_connect();
	durable_exec(durable_plan(&plan,
							  "WITH before_0_10 AS ("
							  " DELETE FROM ONLY durable.sessions o WHERE o.ctid = ANY (ARRAY("
							  "  SELECT l.ctid FROM ONLY durable.sessions l"
							  "   WHERE l.owned_by = '' AND l.bot = $1 AND l.shard = $2"
							  "   FOR UPDATE SKIP LOCKED)))"
							  " INSERT INTO durable.sessions AS s"
							  " (bot, shard, session_id, sequence, resume_url, total_shards, saved_at, owned_by)"
							  " VALUES ($1, $2, $3, $4, $5, $6, pg_catalog.clock_timestamp(), $7)"
							  " ON CONFLICT (owned_by, bot, shard) DO UPDATE SET"
							  " session_id = EXCLUDED.session_id,"
							  " sequence = EXCLUDED.sequence,"
							  " resume_url = EXCLUDED.resume_url,"
							  " total_shards = EXCLUDED.total_shards,"
							  " saved_at = pg_catalog.clock_timestamp()"
							  " RETURNING saved_at",
							  7, argtypes),
				 values, NULL, SPI_OK_INSERT_RETURNING, 0);
	if (SPI_processed != 1)
		durable_write_skipped("sessions");
	if (GetCurrentTimestamp() - DatumGetTimestampTz(durable_col(0, 1)) > SESSION_RESTAMP_AFTER_US)
		durable_exec(durable_plan(&restamp_plan,
								  "UPDATE ONLY durable.sessions SET saved_at = pg_catalog.clock_timestamp()"
								  " WHERE owned_by = $7 AND bot = $1 AND shard = $2",
								  7, argtypes),
					 values, NULL, SPI_OK_UPDATE, 0);
	SPI_finish();
	session_end(&call);

	PG_RETURN_VOID();
}

/*
 * session_load(bot, shard, resume_url, total_shards, max_age) → no row when
 * nothing is saved; else one row, with session_id and sequence NULL and
 * `ignored` saying why when the snapshot may not be resumed (see the file
 * header for the reasons and their precedence).  The row is the caller's
 * role's, else one saved before 0.10 (owned_by ''): another role's never.
 */
Datum
durable_session_load(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[3] = {TEXTOID, INT4OID, NAMEOID};
	Datum		args[3];
	Datum		resume_url;
	int32		shard;
	int32		total_shards;
	int64		max_age_us;
	TimestampTz now;
	SessionCall call;

	args[0] = durable_arg_id(fcinfo, 0, "bot");
	shard = session_arg_shard(fcinfo, 1);
	resume_url = session_arg_url(fcinfo, 2);
	total_shards = session_arg_total_shards(fcinfo, 3, shard);
	max_age_us = durable_arg_interval_us(fcinfo, 4, "max_age", SESSION_DEFAULT_MAX_AGE_US,
										 0, SESSION_MAX_MAX_AGE_US);
	args[1] = Int32GetDatum(shard);

	durable_srf_init(fcinfo);
	now = GetCurrentTimestamp();

	session_begin(&call);
	args[2] = call.caller;
	SPI_connect();
	durable_exec(durable_plan(&plan,
							  "SELECT s.session_id, s.sequence, s.saved_at, s.resume_url, s.total_shards"
							  " FROM ONLY durable.sessions s"
							  " WHERE s.owned_by IN ($3, '') AND s.bot = $1 AND s.shard = $2"
							  " ORDER BY s.owned_by = '' LIMIT 1",
							  3, argtypes),
				 args, NULL, SPI_OK_SELECT, 0);

	if (SPI_processed > 0)
	{
		Datum		values[4];
		bool		nulls[4] = {false, false, false, false};
		TimestampTz saved_at = DatumGetTimestampTz(durable_col(0, 3));
		const char *ignored = NULL;

		/*
		 * The precedence of the reasons is part of the contract: see above.
		 * An infinite saved_at (only a superuser's edit can store one) is
		 * classified without the subtraction, which could overflow.
		 */
		if (TIMESTAMP_IS_NOBEGIN(saved_at) ||
			(!TIMESTAMP_NOT_FINITE(saved_at) && now - saved_at > max_age_us))
			ignored = "expired";
		else if (TIMESTAMP_IS_NOEND(saved_at) || saved_at - now > SESSION_MAX_FUTURE_US)
			ignored = "future";
		else if (!durable_text_equal(durable_col(0, 4), resume_url))
			ignored = "resume_url";
		else if (durable_col_int32(0, 5) != total_shards)
			ignored = "total_shards";

		if (ignored == NULL)
		{
			/* The tuplestore copies the values: no need to leave SPI's memory. */
			values[0] = durable_col(0, 1);
			values[1] = durable_col(0, 2);
			nulls[3] = true;
			values[3] = (Datum) 0;
		}
		else
		{
			nulls[0] = nulls[1] = true;
			values[0] = values[1] = (Datum) 0;
			values[3] = CStringGetTextDatum(ignored);
		}
		values[2] = TimestampTzGetDatum(saved_at);
		durable_srf_put(fcinfo, values, nulls);
	}
	SPI_finish();
	session_end(&call);

	return (Datum) 0;
}
