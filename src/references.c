/*-------------------------------------------------------------------------
 *
 * references.c
 *		Foreign keys of yours that reference the journals, as durable's
 *		deletes (the retention purge, outbox_discard()) must treat them.
 *
 * durable's functions run as the extension's owner (SECURITY DEFINER), and
 * its workers as the bootstrap superuser.  A delete of theirs that a key
 * acts on runs code of the referencing table's owner with those privileges:
 * PostgreSQL's RI triggers cascade as that owner, but the triggers the
 * cascade fires on the referencing table (AFTER triggers, queued until the
 * end of durable's statement) run as the current user, durable's owner.
 * A role granted REFERENCES on a journal could so make itself superuser;
 * and any query durable plans over a table of another role runs that
 * role's code as durable's user too (an index expression of an IMMUTABLE
 * function of its own, a partition key, a policy).  Hence
 * durable_fk_unsafe_action: before durable deletes from a journal, it
 * looks at every key that references the journal, and, following the keys
 * whose delete action changes their table (CASCADE, SET NULL, SET DEFAULT,
 * and below the journal the update actions too), every key that
 * references a table so reached; when one of these comes from a table
 * (or a partition of it) owned by neither a superuser nor the journal's
 * owner, durable deletes nothing from that journal.  Keeping only the
 * records such a key references would not do: a row committed after the
 * purge's snapshot is acted on all the same.  The tables are locked as the
 * delete will need them (and ROW EXCLUSIVE where keys could be added), so
 * what was looked at stays true until the transaction ends; the catalog is
 * read through the relcache and syscache, as fresh as those locks, also
 * under REPEATABLE READ.
 *
 * The purge's guards (durable_fk_guards) then only ever read tables of
 * trusted roles, and compare a referencing column with the journal's key
 * only when its type is built in (or a domain over one): a key with other
 * columns gets no guard, and the records it references fail their delete
 * (23503, raised by the RI check) and are passed over (isolate.c).
 *
 * IDENTIFICATION
 *	  src/references.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/relation.h"
#include "access/transam.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

/*
 * What keeps a record that your tables reference from being purged, for a
 * journal's candidate alias c: " AND NOT EXISTS (...)" for each foreign key
 * that references the journal with ON DELETE NO ACTION or RESTRICT (deleting
 * such a record would raise 23503 and roll back the whole batch, at every
 * pass) and whose columns have built-in types (see the file header), or ""
 * when there is none.  Read from the catalog at every call: the statement
 * path is the rare one.  A text key compares under the referencing
 * column's collation, not the journal's "C": so that the index on your
 * column serves the probe, and two different collations do not make the
 * comparison fail.
 */
char *
durable_fk_guards(const char *journal)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[1] = {TEXTOID};
	Datum		values[1];
	char	   *guards;

	values[0] = CStringGetTextDatum(journal);
	durable_exec(durable_plan(&plan,
							  "SELECT pg_catalog.string_agg(pg_catalog.format("
							  "  ' AND NOT EXISTS (SELECT 1 FROM %s r WHERE %s)',"
							  "  k.conrelid::pg_catalog.regclass,"
							  "  (SELECT pg_catalog.string_agg(pg_catalog.format('r.%I OPERATOR(pg_catalog.=) c.%I%s',"
							  "                                                  fa.attname, pa.attname,"
							  "                                                  CASE WHEN fa.attcollation <> 0"
							  "                                                  THEN ' COLLATE ' OPERATOR(pg_catalog.||)"
							  "                                                       fa.attcollation::pg_catalog.regcollation::pg_catalog.text"
							  "                                                  ELSE '' END), ' AND ')"
							  "     FROM ROWS FROM (pg_catalog.unnest(k.conkey), pg_catalog.unnest(k.confkey)) AS cols(fk, pk)"
							  "     JOIN pg_catalog.pg_attribute fa ON fa.attrelid = k.conrelid AND fa.attnum = cols.fk"
							  "     JOIN pg_catalog.pg_attribute pa ON pa.attrelid = k.confrelid AND pa.attnum = cols.pk)),"
							  "  '' ORDER BY k.oid)"
							  " FROM pg_catalog.pg_constraint k"
							  " WHERE k.contype = 'f' AND k.conparentid = 0"
							  "   AND k.confrelid = $1::pg_catalog.regclass"
							  "   AND k.confdeltype = ANY (ARRAY['a', 'r']::pg_catalog.\"char\"[])"
							  "   AND EXISTS (SELECT 1 FROM pg_catalog.pg_class t"
							  "                 JOIN pg_catalog.pg_roles o ON o.oid = t.relowner"
							  "                WHERE t.oid = k.conrelid"
							  "                  AND (o.rolsuper OR t.relowner = (SELECT j.relowner FROM pg_catalog.pg_class j"
							  "                                                   WHERE j.oid = k.confrelid)))"
							  "   AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(k.conkey) AS u(fk)"
							  "                    JOIN pg_catalog.pg_attribute fa ON fa.attrelid = k.conrelid AND fa.attnum = u.fk"
							  "                    JOIN pg_catalog.pg_type ty ON ty.oid = fa.atttypid"
							  "                   WHERE COALESCE(NULLIF(ty.typbasetype, 0), ty.oid) >= " CppAsString2(FirstNormalObjectId) ")",
							  1, types),
				 values, NULL, SPI_OK_SELECT, 1);
	guards = durable_col_isnull(0, 1) ? "" : TextDatumGetCString(durable_col_copy(0, 1));
	SPI_freetuptable(SPI_tuptable);
	return guards;
}


/* Whether a table owned by `owner` may take part in durable's deletes. */
static bool
refs_trusted(Oid owner, Oid journal_owner)
{
	return owner == journal_owner || superuser_arg(owner);
}

/* The owner of a relation, from the syscache (as fresh as the caller's lock). */
static Oid
refs_owner(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

static char *
refs_describe(const char *conname, Oid relid, Oid owner)
{
	return psprintf("foreign key %s of table %s (owned by %s)",
					quote_identifier(conname),
					quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
											   get_rel_name(relid)),
					quote_identifier(GetUserNameFromId(owner, false)));
}

/*
 * Lock a table that a delete reaches (or that a check of a key queries) and
 * its partitions, and return the first of them not owned by a trusted role
 * (InvalidOid: none).  The lock keeps its owner, and the keys that
 * reference it, as they are until the transaction ends (ALTER TABLE ...
 * OWNER TO takes ACCESS EXCLUSIVE; ADD FOREIGN KEY takes SHARE ROW
 * EXCLUSIVE on the referenced table, which ROW EXCLUSIVE blocks).
 */
static Oid
refs_lock_untrusted(Oid relid, LOCKMODE lockmode, Oid journal_owner, List **partitions)
{
	ListCell   *lc;

	LockRelationOid(relid, lockmode);
	*partitions = NIL;
	if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
		*partitions = list_delete_first(find_all_inheritors(relid, lockmode, NULL));
	if (!refs_trusted(refs_owner(relid), journal_owner))
		return relid;
	foreach(lc, *partitions)
	{
		if (!refs_trusted(refs_owner(lfirst_oid(lc)), journal_owner))
			return lfirst_oid(lc);
	}
	return InvalidOid;
}

char *
durable_fk_unsafe_action(const char *journal)
{
	const char *dot = strchr(journal, '.');
	Oid			journal_id;
	Oid			journal_owner;
	List	   *reached;
	List	   *checked;		/* referencing tables whose owners were checked */
	List	   *followed;		/* tables in `reached` once */

	Assert(dot != NULL);
	journal_id = RangeVarGetRelid(makeRangeVar(pnstrdup(journal, dot - journal),
											   pstrdup(dot + 1), -1),
								  RowExclusiveLock, false);
	journal_owner = refs_owner(journal_id);
	reached = list_make1_oid(journal_id);
	checked = NIL;
	followed = list_make1_oid(journal_id);

	/*
	 * Tables a delete of the journal's records modifies, breadth first: the
	 * journal, then the tables whose keys act on a delete (or, below the
	 * journal, whose rows change, on an update too).  Every table whose key
	 * references one of them runs code there: its RI check or action as its
	 * owner, and the triggers the action queues as durable's user.
	 */
	while (reached != NIL)
	{
		Oid			relid = linitial_oid(reached);
		Relation	rel = relation_open(relid, NoLock);
		TriggerDesc *trigdesc = rel->trigdesc;
		int			i;

		reached = list_delete_first(reached);
		for (i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
		{
			Trigger    *trigger = &trigdesc->triggers[i];
			HeapTuple	tuple;
			Form_pg_constraint con;
			bool		acts;
			Oid			referencing;
			Oid			untrusted;
			List	   *partitions;
			ListCell   *lc;

			if (!trigger->tgisinternal || RI_FKey_trigger_type(trigger->tgfoid) != RI_TRIGGER_PK)
				continue;
			tuple = SearchSysCache1(CONSTROID, ObjectIdGetDatum(trigger->tgconstraint));
			if (!HeapTupleIsValid(tuple))
				continue;
			con = (Form_pg_constraint) GETSTRUCT(tuple);
			referencing = con->conrelid;
			acts = (con->confdeltype != FKCONSTR_ACTION_NOACTION &&
					con->confdeltype != FKCONSTR_ACTION_RESTRICT) ||
				(relid != journal_id &&
				 con->confupdtype != FKCONSTR_ACTION_NOACTION &&
				 con->confupdtype != FKCONSTR_ACTION_RESTRICT);
			if ((!acts || list_member_oid(followed, referencing)) &&
				list_member_oid(checked, referencing))
			{
				ReleaseSysCache(tuple);
				continue;
			}
			untrusted = refs_lock_untrusted(referencing, acts ? RowExclusiveLock : AccessShareLock,
											journal_owner, &partitions);
			if (OidIsValid(untrusted))
			{
				char	   *found = refs_describe(NameStr(con->conname), untrusted,
												  refs_owner(untrusted));

				ReleaseSysCache(tuple);
				relation_close(rel, NoLock);
				return found;
			}
			ReleaseSysCache(tuple);
			checked = lappend_oid(checked, referencing);
			if (acts && !list_member_oid(followed, referencing))
			{
				followed = lappend_oid(followed, referencing);
				reached = lappend_oid(reached, referencing);
				foreach(lc, partitions)
				{
					if (list_member_oid(followed, lfirst_oid(lc)))
						continue;
					followed = lappend_oid(followed, lfirst_oid(lc));
					reached = lappend_oid(reached, lfirst_oid(lc));
				}
			}
		}
		relation_close(rel, NoLock);
	}
	return NULL;
}
