/*-------------------------------------------------------------------------
 *
 * init_privs.c
 *		The initial privileges of durable's objects follow REASSIGN OWNED,
 *		as PostgreSQL 17 makes them do.
 *
 * An extension's initial privileges (pg_init_privs) are the ACLs its
 * scripts left its objects; pg_dump writes each object's difference from
 * them.  REASSIGN OWNED gives the objects to the new role and rewrites
 * their ACLs, but before PostgreSQL 17 not their initial privileges, which
 * go on naming the old role: every dump then carries a REVOKE from the old
 * role and a GRANT to the new one for each of durable's objects, and once
 * the old role is dropped the REVOKE names its number, which a restore
 * refuses.  REASSIGN OWNED is how durable is given to another owner (its
 * objects refuse ALTER ... OWNER TO one at a time), so after one the rows
 * of durable's objects get the change ALTER ... OWNER TO makes to an ACL
 * (aclnewowner), as PostgreSQL 17's shdepReassignOwned does to them.
 *
 * IDENTIFICATION
 *	  src/init_privs.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_init_privs.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/rel.h"

#include "init_privs.h"

#if PG_VERSION_NUM < 170000

/* Whether the row of (classoid, objoid) is one of durable's objects. */
static bool
init_privs_of_durable(Oid classoid, Oid objoid, Oid extension, Oid schema)
{
	if (classoid == NamespaceRelationId)
		return objoid == schema;
	return getExtensionOfObject(classoid, objoid) == extension;
}

static bool
init_privs_name(const Acl *acl, Oid role)
{
	Oid		   *members;
	int			n = aclmembers(acl, &members);

	for (int i = 0; i < n; i++)
		if (members[i] == role)
			return true;
	return false;
}

/* Every row of durable's objects that names old_role names new_role instead. */
static void
init_privs_replace_role(Oid old_role, Oid new_role, Oid extension, Oid schema)
{
	Relation	rel = table_open(InitPrivsRelationId, RowExclusiveLock);
	SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	HeapTuple	tup;

	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_init_privs form = (Form_pg_init_privs) GETSTRUCT(tup);
		Datum		values[Natts_pg_init_privs] = {0};
		bool		nulls[Natts_pg_init_privs] = {0};
		bool		replace[Natts_pg_init_privs] = {0};
		bool		isnull;
		Datum		acl;
		HeapTuple	changed;

		/* (the ACL first: the extension test is a pg_depend scan) */
		acl = heap_getattr(tup, Anum_pg_init_privs_initprivs, RelationGetDescr(rel), &isnull);
		if (isnull || !init_privs_name(DatumGetAclP(acl), old_role))
			continue;
		if (!init_privs_of_durable(form->classoid, form->objoid, extension, schema))
			continue;
		values[Anum_pg_init_privs_initprivs - 1] =
			PointerGetDatum(aclnewowner(DatumGetAclP(acl), old_role, new_role));
		replace[Anum_pg_init_privs_initprivs - 1] = true;
		changed = heap_modify_tuple(tup, RelationGetDescr(rel), values, nulls, replace);
		CatalogTupleUpdate(rel, &changed->t_self, changed);
		heap_freetuple(changed);
	}
	systable_endscan(scan);
	table_close(rel, RowExclusiveLock);
}

/*
 * Whether durable `version` is one whose update to 0.13 moves the initial
 * privileges, after 0.9's repair of the monitoring views, which reads the
 * role that created them from their initial privileges.
 */
static bool
init_privs_moved_by_update(const char *version)
{
	int			major;
	int			minor;

	return sscanf(version, "%d.%d", &major, &minor) == 2 && major == 0 && minor < 13;
}
#endif

void
durable_init_privs_reassigned(const ReassignOwnedStmt *stmt)
{
#if PG_VERSION_NUM < 170000
	Oid			extension = get_extension_oid("durable", true);
	char	   *version;
	Oid			schema;
	Oid			new_role;
	ListCell   *lc;

	if (!OidIsValid(extension))
		return;
	version = durable_installed_version();
	if (version == NULL || init_privs_moved_by_update(version))
		return;
	schema = get_namespace_oid("durable", false);
	new_role = get_rolespec_oid(stmt->newrole, false);
	foreach(lc, stmt->roles)
	{
		Oid			old_role = get_rolespec_oid(lfirst_node(RoleSpec, lc), false);

		if (old_role == new_role)
			continue;
		init_privs_replace_role(old_role, new_role, extension, schema);
		/* (the next role's pass must see these rows: a role named twice, two roles in a row) */
		CommandCounterIncrement();
	}
#endif
}
