/*-------------------------------------------------------------------------
 *
 * references.c
 *		Foreign keys of yours that reference the journals, as durable's
 *		deletes (the retention purge, outbox_discard()) must treat them.
 *
 * durable's functions run as the extension's owner (SECURITY DEFINER), and
 * its workers as that owner too.  A delete of theirs that a key
 * acts on runs code of the referencing table's owner with those privileges:
 * PostgreSQL's RI triggers cascade as that owner, but the triggers the
 * cascade fires on the referencing table (AFTER triggers, queued until the
 * end of durable's statement) run as the current user, durable's owner.
 * A role granted REFERENCES on a journal could so make itself superuser;
 * and any query durable plans over a table of another role runs that
 * role's code as durable's user too (an index expression of an IMMUTABLE
 * function of its own, a partition key, a policy).  Hence
 * durable_delete_check: before durable deletes from a journal, it
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
 * The purge's guards, built by the same look from the same fresh catalog,
 * then only ever read tables of trusted roles (ONLY the table, unless it
 * is partitioned, as PostgreSQL's own RI queries do), and compare a
 * referencing column with the journal's key only when its type is built
 * in (or a domain over one) or binary-coercible to the key's and owned by
 * a trusted role (citext): a key with other columns gets no guard, and
 * the records it references fail their delete (23503, raised by the RI
 * check) and are passed over (isolate.c).
 *
 * The guards name the referencing tables, and a statement looks its names
 * up again whenever it is parsed (at each batch): a schema renamed
 * meanwhile, which takes no lock on the tables in it, or one created under
 * the name of a schema renamed away, makes the same text name another
 * relation -- a view of an untrusted role's, whose function would run as
 * durable's owner (found by review, 2026-12-07).  So the check also keeps
 * the tables it approved (guard_relations), each guard's alias names its
 * table's OID (r<oid>), and durable_guarded_expect() has the parse
 * analysis hook below refuse the guarded statement, before it is planned or
 * run, when a guard reads any table but its own or the rest any relation
 * but the journal.
 *
 * The relcache entry of a table may be rebuilt by any catalog lookup or
 * lock below (its trigdesc freed): the constraints are copied out of it
 * before anything else is looked up.
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
#include "nodes/nodeFuncs.h"
#include "parser/analyze.h"
#include "parser/parse_coerce.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"

/* Whether a table owned by `owner` may take part in durable's deletes. */
static bool
refs_trusted(Oid owner, Oid journal_owner)
{
	return owner == journal_owner || superuser_arg(owner);
}

/*
 * The owner of a catalog object (column owner_attnum of its row in the
 * syscache cacheid); InvalidOid once it is gone.
 */
static Oid
refs_object_owner(int cacheid, Oid objid, AttrNumber owner_attnum)
{
	HeapTuple	tuple = SearchSysCache1(cacheid, ObjectIdGetDatum(objid));
	bool		isnull;
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		return InvalidOid;
	owner = DatumGetObjectId(SysCacheGetAttr(cacheid, tuple, owner_attnum, &isnull));
	ReleaseSysCache(tuple);
	return isnull ? InvalidOid : owner;
}

/* The owner of a relation; InvalidOid once it is gone. */
static Oid
refs_owner(Oid relid)
{
	return refs_object_owner(RELOID, relid, Anum_pg_class_relowner);
}

/* The quoted name of a relation's owner, or "?" once it is gone. */
static const char *
refs_owner_name(Oid relid)
{
	Oid			owner = refs_owner(relid);
	char	   *name = OidIsValid(owner) ? GetUserNameFromId(owner, true) : NULL;

	return name ? quote_identifier(name) : "?";
}

/* "schema.table", or "relation <oid>" once it is gone. */
static char *
refs_qualified_name(Oid relid)
{
	char	   *name = get_rel_name(relid);
	char	   *schema = name ? get_namespace_name(get_rel_namespace(relid)) : NULL;

	if (name == NULL || schema == NULL)
		return psprintf("relation %u", relid);
	return quote_qualified_identifier(schema, name);
}

/*
 * The first of relid and `partitions` owned by an untrusted role, or
 * InvalidOid.  A partition dropped since it was listed is passed over (a
 * table of an untrusted role may be, before it is locked).
 */
static Oid
refs_first_untrusted(Oid relid, List *partitions, Oid journal_owner)
{
	ListCell   *lc;
	Oid			owner = refs_owner(relid);

	if (!OidIsValid(owner))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	if (!refs_trusted(owner, journal_owner))
		return relid;
	foreach(lc, partitions)
	{
		owner = refs_owner(lfirst_oid(lc));
		if (OidIsValid(owner) && !refs_trusted(owner, journal_owner))
			return lfirst_oid(lc);
	}
	return InvalidOid;
}

/*
 * Check the owner of a table that a delete reaches (or whose key is
 * checked) and of its partitions, in *partitions: the first one owned by an
 * untrusted role, or InvalidOid.  They are looked at before they are
 * locked, so that a table of such a role, which it may hold locked, is
 * refused without waiting for it; then locked and looked at again.  The
 * lock keeps the owners, and the keys that reference the tables, as they
 * are until the transaction ends (ALTER TABLE ... OWNER TO takes ACCESS
 * EXCLUSIVE; ADD FOREIGN KEY and CREATE TRIGGER take SHARE ROW EXCLUSIVE,
 * which ROW EXCLUSIVE blocks).  With `nowait`, a lock that is not free at
 * once sets *busy to the table's OID and nothing more is locked.
 *
 * The partitions cannot change between the listing and the locks: ATTACH
 * PARTITION takes only SHARE UPDATE EXCLUSIVE on the parent, but it clones
 * the parent's keys, which locks the tables they reference SHARE ROW
 * EXCLUSIVE, and the caller holds ROW EXCLUSIVE on the table this one
 * references; CREATE TABLE ... PARTITION OF locks the parent ACCESS
 * EXCLUSIVE.  Without waiting, a listing that differs all the same counts
 * as busy.
 */
static Oid
refs_lock_untrusted(Oid relid, LOCKMODE lockmode, Oid journal_owner, bool nowait,
					List **partitions, Oid *busy)
{
	bool		partitioned = (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE);
	Oid			untrusted;
	ListCell   *lc;
	List	   *locked;

	*busy = InvalidOid;
	*partitions = partitioned ? list_delete_first(find_all_inheritors(relid, NoLock, NULL)) : NIL;
	untrusted = refs_first_untrusted(relid, *partitions, journal_owner);
	if (OidIsValid(untrusted))
		return untrusted;
	if (!nowait)
	{
		LockRelationOid(relid, lockmode);
		if (partitioned)
			*partitions = list_delete_first(find_all_inheritors(relid, lockmode, NULL));
		return refs_first_untrusted(relid, *partitions, journal_owner);
	}
	if (!ConditionalLockRelationOid(relid, lockmode))
	{
		*busy = relid;
		return InvalidOid;
	}
	foreach(lc, *partitions)
	{
		if (!ConditionalLockRelationOid(lfirst_oid(lc), lockmode))
		{
			*busy = lfirst_oid(lc);
			return InvalidOid;
		}
	}
	if (partitioned)
	{
		locked = *partitions;
		*partitions = list_delete_first(find_all_inheritors(relid, NoLock, NULL));
		foreach(lc, *partitions)
		{
			if (!list_member_oid(locked, lfirst_oid(lc)))
			{
				*busy = relid;
				return InvalidOid;
			}
		}
	}
	return refs_first_untrusted(relid, *partitions, journal_owner);
}

/*
 * A referencing column of type `type` as the guard compares it: as it is
 * when its type is built in (or a domain over one); relabelled to the
 * journal's column type when an implicit binary-coercible cast leads there,
 * as PostgreSQL's own RI check casts it (citext referencing the outbox's
 * text key: no function runs, the comparison is the journal type's own
 * equality); NULL otherwise.  The guard is parsed again at each batch, and
 * the owner of a type may drop its cast and create one that calls a
 * function of its own: the base type must be a trusted role's.
 */
static char *
refs_guard_column(const char *alias, Oid referencing, AttrNumber attnum, Oid type,
				  Oid journal_type, Oid journal_owner)
{
	const char *column = quote_identifier(get_attname(referencing, attnum, false));
	Oid			base = getBaseType(type);
	Oid			base_owner;

	if (base < FirstNormalObjectId)
		return psprintf("%s.%s", alias, column);
	base_owner = refs_object_owner(TYPEOID, base, Anum_pg_type_typowner);
	if (OidIsValid(base_owner) && refs_trusted(base_owner, journal_owner) &&
		IsBinaryCoercible(type, journal_type))
		return psprintf("%s.%s::%s", alias, column, format_type_be_qualified(journal_type));
	return NULL;
}

/*
 * The guard of a key that references the journal (alias c) from a trusted
 * table: " AND NOT EXISTS (...)", or NULL when a column of the key is
 * neither of a built-in type nor binary-coercible to the journal's.  A text
 * key compares under the referencing column's collation, not the journal's
 * "C": so that the index on your column serves the probe, and two different
 * collations do not make the comparison fail.
 */
static char *
refs_guard(HeapTuple contuple, Oid referencing, Oid journal_id, Oid journal_owner)
{
	AttrNumber	conkey[INDEX_MAX_KEYS];
	AttrNumber	confkey[INDEX_MAX_KEYS];
	int			nkeys;
	int			i;
	char	   *alias = psprintf("r%u", referencing);	/* refs_expected_relid reads it */
	StringInfoData guard;

	DeconstructFkConstraintRow(contuple, &nkeys, conkey, confkey, NULL, NULL, NULL, NULL, NULL);
	initStringInfo(&guard);
	appendStringInfo(&guard, " AND NOT EXISTS (SELECT 1 FROM %s%s %s WHERE ",
					 get_rel_relkind(referencing) == RELKIND_PARTITIONED_TABLE ? "" : "ONLY ",
					 refs_qualified_name(referencing), alias);
	for (i = 0; i < nkeys; i++)
	{
		Oid			type;
		int32		typmod;
		Oid			collation;
		char	   *column;

		get_atttypetypmodcoll(referencing, conkey[i], &type, &typmod, &collation);
		column = refs_guard_column(alias, referencing, conkey[i], type,
								   get_atttype(journal_id, confkey[i]), journal_owner);
		if (column == NULL)
			return NULL;
		appendStringInfo(&guard, "%s%s OPERATOR(pg_catalog.=) c.%s",
						 i > 0 ? " AND " : "", column,
						 quote_identifier(get_attname(journal_id, confkey[i], false)));
		if (OidIsValid(collation))
			appendStringInfo(&guard, " COLLATE %s", generate_collation_name(collation));
	}
	appendStringInfoChar(&guard, ')');
	return guard.data;
}

/* The relations the next guarded statement may read; NIL: none expected. */
static List *refs_expected = NIL;
static post_parse_analyze_hook_type refs_prev_post_parse_analyze = NULL;

void
durable_guarded_expect(List *relations)
{
	refs_expected = relations;
}

/*
 * The relation a guarded statement's range table entry must be: a guard's
 * (alias r<oid>) its own table, one the check approved; any other, the
 * journal (the check's first).  Two approved tables swapped by their
 * schemas' names would each pass a check of the set alone, and a guard's
 * column would then name a column of the other table, of a type whose
 * cast is not the check's to trust.
 */
static Oid
refs_expected_relid(RangeTblEntry *rte, List *expected)
{
	const char *alias = rte->alias ? rte->alias->aliasname : "";
	char	   *end;
	unsigned long oid;

	if (alias[0] != 'r' || alias[1] < '0' || alias[1] > '9')
		return linitial_oid(expected);
	oid = strtoul(alias + 1, &end, 10);
	if (*end != '\0' || !list_member_oid(expected, (Oid) oid))
		return InvalidOid;
	return (Oid) oid;
}

static bool
refs_reads_only_expected(Node *node, void *expected)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_RELATION && rte->relid != refs_expected_relid(rte, (List *) expected))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("durable's retention purge would read relation %s in place of one its foreign-key check approved",
							refs_qualified_name(rte->relid)),
					 errdetail("A schema was renamed or created since the check: the purge's guards name the tables that reference the journal."),
					 errhint("Nothing was deleted; the next pass checks again.")));
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, refs_reads_only_expected, expected,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, refs_reads_only_expected, expected);
}

/*
 * The first statement analysed after durable_guarded_expect() is the
 * guarded one (SPI parses it just before it plans it); what it runs (the
 * RI checks of the delete, your triggers) is not checked.
 */
static void
refs_post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (refs_prev_post_parse_analyze)
		refs_prev_post_parse_analyze(pstate, query, jstate);
	if (refs_expected != NIL)
	{
		List	   *expected = refs_expected;

		refs_expected = NIL;
		(void) refs_reads_only_expected((Node *) query, expected);
	}
}

void
durable_references_install_hook(void)
{
	refs_prev_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = refs_post_parse_analyze;
}

/* Put relid in `reached`, unless it was put there once already. */
static void
refs_follow(List **reached, List **followed, Oid relid)
{
	if (list_member_oid(*followed, relid))
		return;
	*followed = lappend_oid(*followed, relid);
	*reached = lappend_oid(*reached, relid);
}

/* The constraints of the foreign keys that reference `relid`, copied out of its relcache entry. */
static List *
refs_referencing_keys(Oid relid)
{
	Relation	rel = relation_open(relid, NoLock);
	TriggerDesc *trigdesc = rel->trigdesc;
	List	   *keys = NIL;
	int			i;

	for (i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &trigdesc->triggers[i];

		if (trigger->tgisinternal && RI_FKey_trigger_type(trigger->tgfoid) == RI_TRIGGER_PK)
			keys = list_append_unique_oid(keys, trigger->tgconstraint);
	}
	relation_close(rel, NoLock);
	return keys;
}

/*
 * The purge's guard reads the referencing table as durable's user, the
 * extension's owner, which a superuser's table does not grant anything
 * when that owner is not a superuser (any more): refuse with what to do,
 * rather than fail the purge's statement on it.
 */
static void
refs_require_readable(Oid referencing, const char *key, const char *journal)
{
	Oid			nsp = get_rel_namespace(referencing);
	const char *owner;

	if (durable_may_use_schema(nsp) &&
		pg_class_aclcheck(referencing, GetUserId(), ACL_SELECT) == ACLCHECK_OK)
		return;
	owner = GetUserNameFromId(GetUserId(), false);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("durable's owner %s cannot read table %s, whose foreign key %s references %s",
					owner, refs_qualified_name(referencing), quote_identifier(key), journal),
			 errdetail("durable deletes no record such a key references, and reads the table to find them."),
			 errhint("GRANT USAGE ON SCHEMA %s, SELECT ON %s TO %s, or drop the key.",
					 quote_identifier(get_namespace_name(nsp)), refs_qualified_name(referencing),
					 quote_identifier(owner))));
}

void
durable_delete_check(const char *table, bool nowait, DurableDeleteCheck *check)
{
	const char *dot = strchr(table, '.');
	Oid			journal_id;
	Oid			journal_owner;
	List	   *reached;
	List	   *checked = NIL;	/* referencing tables whose owners were checked */
	List	   *followed;		/* tables put in `reached`, once each */
	StringInfoData guards;

	Assert(dot != NULL);
	check->unsafe = NULL;
	check->busy = NULL;
	check->guards = "";
	journal_id = RangeVarGetRelid(makeRangeVar(pnstrdup(table, dot - table),
											   pstrdup(dot + 1), -1),
								  RowExclusiveLock, false);
	check->guard_relations = list_make1_oid(journal_id);
	journal_owner = refs_owner(journal_id);
	reached = list_make1_oid(journal_id);
	followed = list_make1_oid(journal_id);
	initStringInfo(&guards);

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
		List	   *keys = refs_referencing_keys(relid);
		ListCell   *kc;

		reached = list_delete_first(reached);
		foreach(kc, keys)
		{
			HeapTuple	tuple = SearchSysCache1(CONSTROID, ObjectIdGetDatum(lfirst_oid(kc)));
			Form_pg_constraint con;
			bool		acts;
			Oid			referencing;
			Oid			untrusted;
			List	   *partitions = NIL;
			ListCell   *lc;
			Oid			busy;

			if (!HeapTupleIsValid(tuple))
				elog(ERROR, "cache lookup failed for constraint %u", lfirst_oid(kc));
			con = (Form_pg_constraint) GETSTRUCT(tuple);
			referencing = con->conrelid;
			acts = (con->confdeltype != FKCONSTR_ACTION_NOACTION &&
					con->confdeltype != FKCONSTR_ACTION_RESTRICT) ||
				(relid != journal_id &&
				 con->confupdtype != FKCONSTR_ACTION_NOACTION &&
				 con->confupdtype != FKCONSTR_ACTION_RESTRICT);
			if (!list_member_oid(checked, referencing) ||
				(acts && !list_member_oid(followed, referencing)))
			{
				untrusted = refs_lock_untrusted(referencing,
												acts ? RowExclusiveLock : RowShareLock,
												journal_owner, nowait, &partitions, &busy);
				if (OidIsValid(busy))
				{
					check->busy = refs_qualified_name(busy);
					ReleaseSysCache(tuple);
					return;
				}
				if (OidIsValid(untrusted))
				{
					check->unsafe = psprintf("foreign key %s of table %s (owned by %s)",
											 quote_identifier(NameStr(con->conname)),
											 refs_qualified_name(untrusted),
											 refs_owner_name(untrusted));
					ReleaseSysCache(tuple);
					return;
				}
				checked = lappend_oid(checked, referencing);
			}
			if (relid == journal_id && !acts && con->conparentid == InvalidOid)
			{
				char	   *guard = refs_guard(tuple, referencing, journal_id, journal_owner);

				if (guard != NULL)
				{
					refs_require_readable(referencing, NameStr(con->conname), table);
					appendStringInfoString(&guards, guard);
					check->guard_relations = list_append_unique_oid(check->guard_relations,
																	referencing);
				}
			}
			ReleaseSysCache(tuple);
			if (acts)
			{
				refs_follow(&reached, &followed, referencing);
				foreach(lc, partitions)
					refs_follow(&reached, &followed, lfirst_oid(lc));
			}
		}
	}
	check->guards = guards.data;
}

void
durable_delete_refused(int elevel, const char *table, const char *message)
{
	ereport(elevel,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("%s", message),
			 errdetail("Only tables owned by a superuser or by the owner of %s may reference it or a table its deletes cascade to: a delete would run code of that table's owner (its key's check or action, the triggers the action fires) with the privileges of durable's owner.",
					   table),
			 errhint("Have a superuser or the owner of %s own that table and its partitions, or drop the key.",
					 table)));
}
