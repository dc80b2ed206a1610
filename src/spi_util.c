/*-------------------------------------------------------------------------
 *
 * spi_util.c
 *		Helpers shared by the API's C functions: cached SPI plans, result
 *		accessors, set-returning results, NOTIFY payloads and backoff.
 *
 * Plans are prepared once per backend and kept (SPI_keepplan); their
 * statements schema-qualify every name, and the functions that run them are
 * SECURITY DEFINER with a pinned search_path, so a caller's search_path can
 * neither redirect them nor be used against them.
 *
 * IDENTIFICATION
 *	  src/spi_util.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "commands/async.h"
#include "common/pg_prng.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/inval.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#ifndef DURABLE_VERSION
#error "DURABLE_VERSION must be defined (the Makefile reads it from durable.control)"
#endif
StaticAssertDecl(sizeof(DURABLE_VERSION) > 1, "DURABLE_VERSION is empty");

/*
 * durable's row in pg_extension: its version (palloc'd) into *version, its
 * owner into *owner, and whether this transaction wrote the row (CREATE or
 * ALTER EXTENSION, not yet committed) into *written_here, where not NULL;
 * false when it is not installed.
 */
static bool
spi_extension_row(char **version, Oid *owner, bool *written_here)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("durable"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	found = HeapTupleIsValid(tuple);
	if (found && version != NULL)
	{
		bool		isnull;
		Datum		d = heap_getattr(tuple, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		*version = isnull ? NULL : text_to_cstring(DatumGetTextPP(d));
	}
	if (found && owner != NULL)
		*owner = ((Form_pg_extension) GETSTRUCT(tuple))->extowner;
	if (written_here != NULL)
		*written_here = found &&
			TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * Whether the relation's storage is new in this transaction: created in it,
 * or given a new relfilenode (TRUNCATE, ALTER SEQUENCE ... RESTART).  What
 * was learnt from it then may be taken back by a rollback.  (Under an
 * AccessShareLock, which its callers' reads of the relation take anyway.)
 */
bool
durable_storage_is_new(Oid relid)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	bool		fresh;

#if PG_VERSION_NUM >= 160000
	fresh = rel->rd_createSubid != InvalidSubTransactionId ||
		rel->rd_firstRelfilelocatorSubid != InvalidSubTransactionId;
#else
	fresh = rel->rd_createSubid != InvalidSubTransactionId ||
		rel->rd_firstRelfilenodeSubid != InvalidSubTransactionId;
#endif
	relation_close(rel, NoLock);
	return fresh;
}

/*
 * The version of durable installed in this database (palloc'd), or NULL
 * when it is not installed.
 */
char *
durable_installed_version(void)
{
	char	   *version = NULL;

	(void) spi_extension_row(&version, NULL, NULL);
	return version;
}

/*
 * The extension's owner, unless pg_upgrade made its restoring user that:
 * its restore creates an extension of its own and gives each member back
 * its old owner.  The members' owner is then the one durable runs as (its
 * SECURITY DEFINER functions), so that is the one this answers: the owner
 * of durable.inbox, else of the extension.
 */
Oid
durable_owner(void)
{
	HeapTuple	tuple;
	Oid			owner = InvalidOid;
	Oid			nsp = get_namespace_oid("durable", true);
	Oid			inbox = OidIsValid(nsp) ? get_relname_relid("inbox", nsp) : InvalidOid;

	if (OidIsValid(inbox) && (tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(inbox))) != NULL)
	{
		owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
		ReleaseSysCache(tuple);
		return owner;
	}
	(void) spi_extension_row(NULL, &owner, NULL);
	return owner;
}

bool
durable_may_use_schema(Oid nsp)
{
#if PG_VERSION_NUM >= 160000
	return object_aclcheck(NamespaceRelationId, nsp, GetUserId(), ACL_USAGE) == ACLCHECK_OK;
#else
	return pg_namespace_aclcheck(nsp, GetUserId(), ACL_USAGE) == ACLCHECK_OK;
#endif
}

/*
 * Whether the tables this library's statements name are those of its own
 * version.  One library serves every version's SQL functions, so after the
 * binaries of a new version are installed, a database whose extension was
 * not yet updated has the old tables; its statements would fail on a
 * missing column, or worse, find no index for their predicates.
 */
static bool
schema_version_current(const char *version)
{
	/*
	 * The versions whose tables are this library's.  A version that changes
	 * a table the statements name starts this list anew: 0.10 added
	 * sessions.owned_by, which session_save and session_load read; 0.11
	 * durable.sweep_windows, which sweep() reads.  0.12 gave owned_by a
	 * default, which no statement of durable's relies on; 0.13 changed
	 * initial privileges and a comment; 0.14 an index no statement needs.
	 */
	static const char *const same_tables[] = {"0.11", "0.12", "0.13", DURABLE_VERSION};

	if (version == NULL)
		return true;
	for (int i = 0; i < lengthof(same_tables); i++)
		if (strcmp(version, same_tables[i]) == 0)
			return true;
	return false;
}

bool
durable_schema_current(char **installed)
{
	char	   *version = durable_installed_version();

	if (installed)
		*installed = version;
	return schema_version_current(version);
}

/* The tables were found current, and durable.inbox was this relation then. */
static bool schema_checked = false;
static Oid	schema_checked_inbox = InvalidOid;
static uint64 schema_invalidations = 0;

/* durable.inbox dropped (DROP EXTENSION), or every relation: check again. */
static void
schema_check_invalidate(Datum arg, Oid relid)
{
	schema_invalidations++;
	if (!OidIsValid(relid) || relid == schema_checked_inbox)
		schema_checked = false;
}

/*
 * Refuse to run against tables of another version than the library's
 * (durable_schema_current).  Checked before the first plan or direct
 * access of a backend, and again after durable.inbox was dropped: an
 * update only ever moves a database forward to the library's version,
 * but DROP EXTENSION and CREATE EXTENSION ... VERSION can move it back,
 * under a pooled backend's cached plans (until 2026-12-06 those then
 * failed on a missing column; found by review).  And a rollback can: a
 * check passed in the transaction that created or updated durable is not
 * kept, for only a change of durable.inbox would tell this backend that
 * the rollback took the tables back (until 2026-12-07 an update rolled
 * back left the backend running on the older tables; found by review).
 */
void
durable_require_current_schema(void)
{
	static bool callback_registered = false;
	char	   *installed = NULL;
	bool		written_here = false;
	Oid			nsp;
	Oid			inbox;
	uint64		invalidations;

	if (likely(schema_checked))
		return;
	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(schema_check_invalidate, (Datum) 0);
		callback_registered = true;
	}

	/*
	 * The relation first, then the version: a drop and create committed
	 * between the two lookups (each may take a lock, and so read the
	 * invalidations) must not leave the new tables' relation recorded as
	 * checked against the old version.  Any invalidation meanwhile: look
	 * again at the next call.
	 */
	invalidations = schema_invalidations;
	nsp = get_namespace_oid("durable", true);
	inbox = OidIsValid(nsp) ? get_relname_relid("inbox", nsp) : InvalidOid;
	(void) spi_extension_row(&installed, NULL, &written_here);
	if (!schema_version_current(installed))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("durable's library is version %s but this database has durable %s",
						DURABLE_VERSION, installed),
				 errhint("Run ALTER EXTENSION durable UPDATE in this database.")));
	if (installed == NULL || written_here || schema_invalidations != invalidations)
		return;					/* not installed, not committed, or changed: look again next time */
	schema_checked_inbox = inbox;
	schema_checked = true;
}

SPIPlanPtr
durable_plan(SPIPlanPtr *cache, const char *sql, int nargs, const Oid *argtypes)
{
	SPIPlanPtr	plan;

	durable_require_current_schema();
	if (*cache != NULL)
		return *cache;

	/*
	 * Generic plans only: every statement is written for one index path
	 * whatever its parameters, and a custom plan costs a planner run per
	 * call (the plan cache keeps choosing custom plans for statements whose
	 * constant-folded form looks cheaper, such as the admit's INSERT with
	 * its "$7 IS NOT NULL" lease test: a quarter of the admit's CPU time).
	 */
	plan = SPI_prepare_cursor(sql, nargs, (Oid *) argtypes, CURSOR_OPT_GENERIC_PLAN);
	if (plan == NULL)
		elog(ERROR, "durable: SPI_prepare failed (%s) for: %s",
			 SPI_result_code_string(SPI_result), sql);
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "durable: SPI_keepplan failed");
	*cache = plan;
	return plan;
}

/*
 * Build a cached statement's generic plan now rather than at its first
 * execution: for a caller that reads the clock in between (permit.c).
 */
void
durable_plan_build(SPIPlanPtr plan)
{
	CachedPlan *cplan = SPI_plan_get_cached_plan(plan);

	if (cplan != NULL)
		ReleaseCachedPlan(cplan, CurrentResourceOwner);
}

/*
 * Run a read that explains a refused fence, `sql` from one of two plans
 * cached in plans[2]: as written at READ COMMITTED, and FOR SHARE under
 * REPEATABLE READ and SERIALIZABLE.  There a fence fails also when the
 * transaction's snapshot predates the lease the caller names (granted
 * since, and live); reading the record FOR SHARE then raises the
 * serialization failure (40001) that retrying cures, not a stale lease
 * (DR001, which tells the caller to drop its work).  At READ COMMITTED the
 * read takes no lock: a stale caller is not made to wait for the holder.
 */
void
durable_exec_explaining(SPIPlanPtr *plans, const char *sql, int nargs, const Oid *argtypes,
						const Datum *values)
{
	int			locked = IsolationUsesXactSnapshot() ? 1 : 0;

	if (plans[locked] == NULL)
		(void) durable_plan(&plans[locked], locked ? psprintf("%s FOR SHARE", sql) : sql,
							nargs, argtypes);
	durable_exec(plans[locked], values, NULL, SPI_OK_SELECT, 1);
}

/*
 * About to answer "no such record" (DR002) for inbox record `key` (an id)
 * or send `key`: under REPEATABLE READ or SERIALIZABLE the transaction's
 * snapshot may predate the record, journaled since by another session (an
 * admit, an outbox_begin) whose token the caller now names.  Then raise the
 * serialization failure (40001) that a retry cures, as for a lease granted
 * since (durable_exec_explaining): DR002 would make the caller drop its
 * work, or an operator believe the record gone.  Caller must be connected
 * to SPI.
 */
void
durable_refuse_journaled_since(DurableQueue queue, Datum key)
{
	static SPIPlanPtr plans[DQ_NUM_QUEUES];
	Oid			types[1] = {queue == DQ_INBOX ? INT8OID : TEXTOID};

	if (!IsolationUsesXactSnapshot())
		return;
	if (SPI_execute_snapshot(durable_plan(&plans[queue],
										  queue == DQ_INBOX ?
										  "SELECT FROM ONLY durable.inbox WHERE id = $1" :
										  "SELECT FROM ONLY durable.outbox WHERE key = $1",
										  1, types),
							 &key, NULL, GetLatestSnapshot(), InvalidSnapshot,
							 true, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "durable: SPI_execute_snapshot failed");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update"),
				 errdetail("The record was journaled after this transaction's snapshot was taken."),
				 errhint("Retry the transaction.")));
}

/*
 * clock_timestamp() in an UPDATE is read again only when the update
 * re-checks a row that another transaction updated while it waited; when
 * that one rolled back, or only locked the row, the stamp from before the
 * wait stands.  The second run cannot wait, nor match nothing: the row is
 * this transaction's now.
 */
TimestampTz
durable_restamp_lease(SPIPlanPtr plan, const Datum *values, TimestampTz lease_until,
					  int64 lease_us)
{
	if (!durable_lease_stamped_before_wait(lease_until, lease_us))
		return lease_until;
	durable_exec(plan, values, NULL, SPI_OK_UPDATE_RETURNING, 0);
	if (SPI_processed != 1)
		elog(ERROR, "durable: a lease held by this transaction vanished");
	return DatumGetTimestampTz(durable_col(0, 1));
}

/*
 * An insert waits when another transaction is inserting the same key, and
 * goes in when that one aborts: a lease stamped before the insert would then
 * be shortened by the wait, or be over already, and the record would be
 * taken over (inbox) or flagged ambiguous (outbox) while its caller works on
 * it.  After a wait longer than a tenth of the lease, the lease starts again
 * from now.  Rare; the common insert costs one clock read.  The same serves
 * an UPDATE that leased a row after waiting for its lock (a duplicate's
 * admit).  Both checked that the journal takes durable's UPDATE, and hold
 * the lock that keeps a trigger from being added since.
 */
TimestampTz
durable_restamp_inserted_lease(DurableQueue queue, Datum key, TimestampTz lease_until,
							   int64 lease_us)
{
	static SPIPlanPtr plans[2];
	static const char *const sql[2] = {
		[DQ_INBOX] = "UPDATE ONLY durable.inbox SET lease_until = $2 WHERE id = $1",
		[DQ_OUTBOX] = "UPDATE ONLY durable.outbox SET lease_until = $2 WHERE key = $1",
	};
	Oid			types[2] = {queue == DQ_INBOX ? INT8OID : TEXTOID, TIMESTAMPTZOID};
	Datum		values[2];

	if (!durable_lease_stamped_before_wait(lease_until, lease_us))
		return lease_until;
	lease_until = GetCurrentTimestamp() + lease_us;
	values[0] = key;
	values[1] = TimestampTzGetDatum(lease_until);
	durable_exec(durable_plan(&plans[queue], sql[queue], 2, types), values, NULL, SPI_OK_UPDATE, 1);
	if (SPI_processed != 1)
		durable_write_skipped(durable_queue_names[queue]);
	return lease_until;
}

void
durable_write_skipped(const char *table)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("durable's write to \"durable.%s\" was skipped", table),
			 errdetail("A BEFORE trigger on the table returned NULL for the row durable wrote or deleted."),
			 errhint("Let a trigger on durable's tables return the row, or drop it.")));
}

void
durable_exec(SPIPlanPtr plan, const Datum *values, const char *nulls, int expected, long count)
{
	int			rc = SPI_execute_plan(plan, (Datum *) values, nulls, false, count);

	if (rc != expected)
		elog(ERROR, "durable: SPI_execute_plan returned %s, expected %s",
			 SPI_result_code_string(rc), SPI_result_code_string(expected));
}

bool
durable_col_isnull(uint64 row, int col)
{
	bool		isnull;

	(void) SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);
	return isnull;
}

Datum
durable_col(uint64 row, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull);

	/* durable fills every column it reads this way: NULL was written by hand. */
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("durable read NULL from \"%s\", which it never leaves NULL",
						SPI_fname(SPI_tuptable->tupdesc, col)),
				 errhint("A row of durable's tables was changed by hand: give the column a value again, and keep it NOT NULL.")));
	return d;
}

int64
durable_col_int64(uint64 row, int col)
{
	return DatumGetInt64(durable_col(row, col));
}

int32
durable_col_int32(uint64 row, int col)
{
	return DatumGetInt32(durable_col(row, col));
}

Datum
durable_col_copy(uint64 row, int col)
{
	Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, col - 1);

	return SPI_datumTransfer(durable_col(row, col), att->attbyval, att->attlen);
}

/*
 * Set up a set-returning call's tuplestore.  The caller (a function scan or
 * a target list) has already worked out the result row type from the
 * function's OUT parameters and hands it over as expectedDesc; building it
 * again from pg_proc would cost a catalog read per call (~8,000 instructions,
 * a tenth of a claim's own work).
 */
void
durable_srf_init(FunctionCallInfo fcinfo)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	bits32		flags = 0;

	if (rsinfo != NULL && IsA(rsinfo, ReturnSetInfo) && rsinfo->expectedDesc != NULL)
		flags |= MAT_SRF_USE_EXPECTED_DESC;
	InitMaterializedSRF(fcinfo, flags);
}

void
durable_srf_put(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

char *
durable_text_to_cstring_datum(Datum d)
{
	return text_to_cstring(DatumGetTextPP(d));
}

bool
durable_text_equal(Datum a, Datum b)
{
	text	   *x = DatumGetTextPP(a);
	text	   *y = DatumGetTextPP(b);

	return VARSIZE_ANY_EXHDR(x) == VARSIZE_ANY_EXHDR(y) &&
		memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) == 0;
}

bool
durable_text_equal_cstring(Datum value, const char *literal)
{
	text	   *t = DatumGetTextPP(value);
	size_t		len = strlen(literal);

	return VARSIZE_ANY_EXHDR(t) == len && memcmp(VARDATA_ANY(t), literal, len) == 0;
}

/*
 * Longest free text (an error), escaped and quoted, copied into a NOTIFY
 * payload (the journal keeps it whole).  Identifiers (key, chat_id) go in
 * whole, since a listener passes them back (outbox_retry(key)): escaping
 * makes at most six bytes of one, so one of DURABLE_MAX_ID_BYTES fits
 * DURABLE_NOTIFY_ID_BYTES (only one written into the table by hand can be
 * longer, and is clipped).  Two identifiers and an error stay under
 * NOTIFY's 8000-byte limit.
 */
#define DURABLE_NOTIFY_VALUE_BYTES 1000
#define DURABLE_NOTIFY_ID_BYTES (6 * DURABLE_MAX_ID_BYTES + 2)
StaticAssertDecl(2 * DURABLE_NOTIFY_ID_BYTES + DURABLE_NOTIFY_VALUE_BYTES + 100 < 8000,
				 "a NOTIFY payload of two identifiers and an error fits NOTIFY's limit");

static void
json_key(StringInfo buf, const char *key)
{
	if (buf->len == 0)
		appendStringInfoChar(buf, '{');
	else
		appendStringInfoChar(buf, ',');
	escape_json(buf, key);
	appendStringInfoChar(buf, ':');
}

/*
 * Escape the first `keep` bytes of value (cut back to a whole character) into
 * escaped, replacing what it held; whether that fits `limit` bytes.
 */
static bool
json_str_prefix_fits(StringInfo escaped, const char *value, int len, int keep, int limit)
{
	char	   *prefix = pnstrdup(value, pg_mbcliplen(value, len, keep));

	resetStringInfo(escaped);
	escape_json(escaped, prefix);
	pfree(prefix);
	return escaped->len <= limit;
}

/* key: value, the value's longest prefix whose escaped form fits limit bytes. */
static void
json_str_within(StringInfo buf, const char *key, const char *value, int limit)
{
	StringInfoData escaped;
	int			len;
	int			fits;
	int			too_long;

	json_key(buf, key);
	if (value == NULL)
	{
		appendStringInfoString(buf, "null");
		return;
	}

	/*
	 * Escaping expands a byte to one to six, so when the first guess is too
	 * long, bisect.
	 */
	len = strlen(value);
	initStringInfo(&escaped);
	fits = Min(len, limit);
	if (!json_str_prefix_fits(&escaped, value, len, fits, limit))
	{
		too_long = fits;
		fits = 0;
		while (too_long - fits > 1)
		{
			int			mid = fits + (too_long - fits) / 2;

			if (json_str_prefix_fits(&escaped, value, len, mid, limit))
				fits = mid;
			else
				too_long = mid;
		}
		json_str_prefix_fits(&escaped, value, len, fits, limit);
	}
	appendBinaryStringInfo(buf, escaped.data, escaped.len);
	pfree(escaped.data);
}

void
durable_json_id(StringInfo buf, const char *key, const char *value)
{
	json_str_within(buf, key, value, DURABLE_NOTIFY_ID_BYTES);
}

void
durable_json_str(StringInfo buf, const char *key, const char *value)
{
	json_str_within(buf, key, value, DURABLE_NOTIFY_VALUE_BYTES);
}

void
durable_json_int(StringInfo buf, const char *key, int64 value)
{
	json_key(buf, key);
	appendStringInfo(buf, INT64_FORMAT, value);
}

/*
 * Whether durable's notifications are to be dropped: the server's NOTIFY
 * queue is at least durable.notify_queue_max full.  The queue is shared by
 * every database of the server and kept for its slowest listener (one
 * session that LISTENs and then stays in a transaction holds it all), and
 * once it is full, the commit of every transaction that queued a
 * notification fails.  An announcement is a hint — the record stays dead,
 * unknown or due, and metrics() counts it — so it is not worth failing the
 * transaction that moved the record: a bot's outbox_failed, the sweep's
 * lease recovery.  The WARNING comes once a minute per process; with
 * durable.notify_queue_max = 0 (announcements off) there is none.
 */
static bool
notify_queue_too_full(const char *channel)
{
	static int64 checked_at = 0;
	static double usage = 0.0;
	static int64 warned_at = 0;
	int64		now;

	if (durable_notify_queue_max <= 0.0)
		return true;			/* announcements turned off */

	/*
	 * Looked up at most every 100 ms: pg_notification_queue_usage() first
	 * advances the queue's tail under its server-wide locks, and a pass can
	 * announce a thousand records.
	 */
	now = durable_clock_us();
	if (checked_at == 0 || now - checked_at >= 100 * 1000)
	{
		LOCAL_FCINFO(fcinfo, 0);

		InitFunctionCallInfoData(*fcinfo, NULL, 0, InvalidOid, NULL, NULL);
		usage = DatumGetFloat8(pg_notification_queue_usage(fcinfo));
		checked_at = now;
	}
	if (usage < durable_notify_queue_max)
		return false;
	if (durable_warn_due(&warned_at, 60 * USECS_PER_SEC))
		ereport(WARNING,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("durable: NOTIFY %s dropped: the server's notification queue is %s%.0f%% full",
						channel, usage < 0.01 ? "under " : "", Max(usage * 100.0, 1.0)),
				 errdetail("durable.notify_queue_max is %g; the records stay in their state.",
						   durable_notify_queue_max),
				 errhint("Find the listener that stopped reading (pg_stat_activity: a session idle in transaction) and end it.  This WARNING comes at most once a minute.")));
	return true;
}

void
durable_notify_json(const char *channel, StringInfo buf)
{
	appendStringInfoChar(buf, '}');
	if (!notify_queue_too_full(channel))
		Async_Notify(channel, buf->data);
}

/*
 * The payloads on durable_dead and durable_ambiguous.  With
 * durable.notify_payload = ids they carry record ids instead of text that
 * bots wrote (keys, chat ids, errors): LISTEN needs no privilege, so every
 * role that can connect reads these.  An outbox id is the journal's
 * durable.outbox.id.
 */

/* NOTIFY durable_dead {"kind":"inbox","id":…,"error":…} */
void
durable_notify_dead_inbox(int64 id, const char *error)
{
	StringInfoData buf;

	initStringInfo(&buf);
	durable_json_str(&buf, "kind", "inbox");
	durable_json_int(&buf, "id", id);
	if (durable_notify_payload == DURABLE_NOTIFY_FULL)
		durable_json_str(&buf, "error", error);
	durable_notify_json("durable_dead", &buf);
	pfree(buf.data);
}

/* NOTIFY durable_dead {"kind":"outbox","key":…,"error":…}, or {…,"id":…} */
void
durable_notify_dead_outbox(int64 id, const char *key, const char *error)
{
	StringInfoData buf;

	initStringInfo(&buf);
	durable_json_str(&buf, "kind", "outbox");
	if (durable_notify_payload == DURABLE_NOTIFY_FULL)
	{
		durable_json_id(&buf, "key", key);
		durable_json_str(&buf, "error", error);
	}
	else
		durable_json_int(&buf, "id", id);
	durable_notify_json("durable_dead", &buf);
	pfree(buf.data);
}

/* NOTIFY durable_ambiguous {"key":…,"chat_id":…}, or {"id":…} */
void
durable_notify_ambiguous(int64 id, const char *key, const char *chat_id)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (durable_notify_payload == DURABLE_NOTIFY_FULL)
	{
		durable_json_id(&buf, "key", key);
		durable_json_id(&buf, "chat_id", chat_id);
	}
	else
		durable_json_int(&buf, "id", id);
	durable_notify_json("durable_ambiguous", &buf);
	pfree(buf.data);
}

int64
durable_backoff_us(int attempt, int64 base_us, int64 cap_us)
{
	double		delay;

	double		jitter = 0.25 * pg_prng_double(&pg_global_prng_state);

	if (attempt < 1)
		attempt = 1;
	if (base_us <= 0 || cap_us <= 0)
		return 0;

	/*
	 * base * 2^(attempt-1), plus up to a quarter of it as jitter so that
	 * replicas failing together do not retry together.  A delay that would
	 * pass the cap is drawn again below it (up to a quarter below), or every
	 * retry there would come due at the cap exactly.  Below the cap the
	 * ranges of consecutive attempts do not overlap.  The exponent is
	 * clamped so nothing overflows.
	 */
	delay = ldexp((double) base_us, Min(attempt - 1, 62));
	delay += delay * jitter;
	if (delay >= (double) cap_us)
		return cap_us - (int64) (cap_us * 0.25 * pg_prng_double(&pg_global_prng_state));
	return (int64) delay;
}
