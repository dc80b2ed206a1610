/*-------------------------------------------------------------------------
 *
 * db_settings.c
 *		Whether the settings of ALTER DATABASE / ALTER ROLE ... SET that
 *		reach the per-database worker changed since it connected.
 *
 * The README has durable.retention and durable.inbox_max_attempts set per
 * database.  PostgreSQL applies pg_db_role_setting once, when a process
 * connects, and a reload reads the configuration files only: a worker,
 * which lives as long as the server, would purge and count attempts with
 * the values it started with while the database's sessions used new ones.
 *
 * Applying the catalog's entries again in the running worker handles a SET
 * but not a RESET: the value a database setting replaced (the files' or
 * the built-in one) is not kept anywhere a module can restore it from, and
 * the GUC machinery offers no way to lower a setting's source.  So the
 * worker remembers the entries that applied to it when it connected, and
 * at each reload compares them with the catalog; when they differ it
 * exits, and the launcher starts a new worker, which connects with the
 * new settings as any session does (worker.c).
 *
 * IDENTIFICATION
 *	  src/db_settings.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_db_role_setting.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "worker.h"

/* The entries that applied when the worker connected (TopMemoryContext). */
static char *dbs_connected_with = NULL;

/* Append the setconfig of pg_db_role_setting's (dboid, roleid) row, if any. */
static void
dbs_append(StringInfo buf, Relation rel, Snapshot snapshot, Oid dboid, Oid roleid)
{
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tuple;

	ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase,
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(dboid));
	ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole,
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(roleid));
	scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true, snapshot, 2, keys);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		config = heap_getattr(tuple, Anum_pg_db_role_setting_setconfig,
										  RelationGetDescr(rel), &isnull);

		appendStringInfo(buf, "%u/%u:", dboid, roleid);
		if (!isnull)
			appendStringInfoString(buf, OidOutputFunctionCall(F_ARRAY_OUT, config));
		appendStringInfoChar(buf, '\n');
	}
	systable_endscan(scan);
}

/*
 * The entries that apply to a connection to this database as the worker's
 * role, in the order postinit.c's process_settings applies them.  The
 * caller must be in a transaction.
 */
static char *
dbs_current(void)
{
	Oid			roleid = GetAuthenticatedUserId();
	StringInfoData buf;
	Relation	rel;
	Snapshot	snapshot;

	initStringInfo(&buf);
	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	snapshot = RegisterSnapshot(GetCatalogSnapshot(DbRoleSettingRelationId));
	dbs_append(&buf, rel, snapshot, MyDatabaseId, roleid);
	dbs_append(&buf, rel, snapshot, InvalidOid, roleid);
	dbs_append(&buf, rel, snapshot, MyDatabaseId, InvalidOid);
	dbs_append(&buf, rel, snapshot, InvalidOid, InvalidOid);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	return buf.data;
}

/*
 * Remember the entries the worker connected with.  Call once, right after
 * connecting, in a transaction.  (An entry changed between the connection
 * and this call is taken for applied: a window of microseconds at start.)
 */
void
durable_db_settings_remember(void)
{
	char	   *current = dbs_current();

	dbs_connected_with = MemoryContextStrdup(TopMemoryContext, current);
	pfree(current);
}

/*
 * Whether the entries differ from those the worker connected with.  Runs
 * its own transaction; the caller must not be in one.
 */
bool
durable_db_settings_changed(void)
{
	char	   *current;
	bool		changed;

	StartTransactionCommand();
	current = dbs_current();
	changed = dbs_connected_with != NULL && strcmp(current, dbs_connected_with) != 0;
	pfree(current);
	CommitTransactionCommand();
	return changed;
}
