/*-------------------------------------------------------------------------
 *
 * ddl_guard.c
 *		The utility hook's refusals, made before a command runs: commands
 *		on durable's relations that durable cannot live with, or that
 *		PostgreSQL lets wait for a lock before it checks the role's right.
 *
 * Column types.  The C code reads and writes the journals' columns as the
 * types durable's scripts created; ALTER COLUMN ... TYPE, or making a
 * journal the child of a table, or a typed table of a type, whose column
 * types the owner could change with it, is refused; so is a child table of
 * a journal, whose rows durable's statements would see and its direct
 * writes would not.
 *
 * Column defaults and NOT NULL.  The direct inserts write NULL into every
 * column they do not know.  They refuse a journal where INSERT would write
 * anything else because of a column's own default or NOT NULL or its
 * domain's default (direct_new_row), or that has a stored generated column,
 * which a direct update would leave stale, and check the NULL against the
 * column's domain as INSERT does.  So that the DBA's command fails instead
 * of every insert after it, a column added to a journal with a default (serial and
 * identity included), NOT NULL, a domain type with either, or a generated
 * expression, a default or NOT NULL given to a column later, and ALTER
 * DOMAIN ... SET DEFAULT or SET NOT NULL on the domain of such a column,
 * are refused.  (A CHECK constraint added to the domain is left to the
 * inserts, which fail where INSERT would.)
 *
 * Constraints and rules.  The direct writes refuse a journal with a CHECK
 * constraint, a foreign key from it, a foreign key to a column they change,
 * a deferrable constraint (they check none of them) or a rule
 * (direct_check_writable), and the other tables' INSERT ... ON CONFLICT a
 * table with a rule: those are refused when they are created.  Triggers are left to the writes' refusal:
 * one that the sweep's UPDATE statements fire is how the tests make a
 * record fail on purpose.
 *
 * Owners.  durable's objects go by one owner (durable_owner): ALTER ...
 * OWNER TO another role of one of them is refused (REASSIGN OWNED moves
 * them all; guard_owner_change).
 *
 * Sequences.  ALTER SEQUENCE on durable's sequences is refused a cache, a
 * cycle, an increment below 1 (other than 1 on token_seq), bounds and a
 * type: ids order each chat's records and tokens fence leases, which the
 * first three would break without an error.  On token_seq it must run
 * outside a transaction block and a function (guard_alter_sequence).
 *
 * Locks taken before the permission check.  Some commands lock the
 * relation they name first and check the role's right on it afterwards:
 * CREATE RULE, a partition created of it, DETACH PARTITION and ALTER INDEX
 * ... DEPENDS ON EXTENSION (ACCESS EXCLUSIVE), CREATE TRIGGER and a foreign
 * key that references it (SHARE ROW EXCLUSIVE), a child table's INHERITS,
 * ALTER TABLE ... INHERIT, CREATE STATISTICS and COMMENT (SHARE UPDATE
 * EXCLUSIVE).  They fail once they get the lock, but while they wait,
 * every later request for a conflicting lock queues behind theirs: behind
 * a bot's open transaction, the first ones hold up admits, claims,
 * confirmations and the worker; behind a VACUUM, the others hold up the
 * next VACUUM, ANALYZE or autovacuum.  Any role with USAGE on schema
 * durable (pg_monitor among them) could do it for as long as it kept a
 * transaction of its own open.  For a relation in durable's schema the
 * hook makes the same check first, without a lock, and refuses with the
 * error the command would have raised after its wait; a role that has the
 * right goes on to the command, which checks again (spec lock_guard).  A
 * name without a schema is pinned to the one it was found in, so that the
 * command's own lookup cannot land on durable's relation after the check.
 * DROP EXTENSION durable and ALTER ... DEPENDS ON EXTENSION durable lock
 * the extension, which every worker pass locks too, and DROP SCHEMA durable
 * and ALTER SCHEMA durable RENAME the schema: they need its owner.  The
 * schema is not renamed at all (guard_rename_schema).
 *
 * Names.  durable's code, its worker, its upgrade scripts and the bots find
 * its objects by their names: its own tables, sequences and views, their
 * columns and its functions are neither renamed nor moved to another schema
 * (guard_rename_member, guard_set_schema_member), and its sequences get no
 * owning column, with which a table would take them along.  Indexes and
 * constraints may be renamed (the repair of an index made under one of
 * durable's names).
 *
 * Nothing here acts in a database without the extension, whatever its
 * schemas are called.
 *
 * IDENTIFICATION
 *	  src/ddl_guard.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_index.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parse_collate.h"
#include "parser/parse_expr.h"
#include "parser/parse_func.h"
#include "parser/parse_type.h"
#include "parser/parser.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/formatting.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

/*
 * Whether durable's own scripts are running (CREATE or ALTER EXTENSION
 * durable), which change its tables as they must; another extension's
 * scripts are DDL like any other.
 */
static bool
guard_in_our_scripts(void)
{
	return creating_extension && CurrentExtensionObject == get_extension_oid("durable", true);
}

/* Whether object `objid` of catalog `classid` is one of durable's own (pg_depend 'e'). */
static bool
guard_is_member(Oid classid, Oid objid)
{
	return OidIsValid(objid) &&
		getExtensionOfObject(classid, objid) == get_extension_oid("durable", true);
}

/*
 * Whether relation `rv` (may be missing) is in durable's schema.  A name
 * qualified with another schema, or with durable's by a role without USAGE
 * on it, is not looked up: the lookup's own errors are the command's to
 * raise, or not (IF NOT EXISTS), and it raises them before any lock.
 */
static bool
guard_in_durable_schema(RangeVar *rv, Oid nsp, Oid *relid)
{
	Oid			relnsp;

	*relid = InvalidOid;
	if (rv->schemaname != NULL &&
		(strcmp(rv->schemaname, "durable") != 0 || !durable_may_use_schema(nsp)))
		return false;
	*relid = RangeVarGetRelid(rv, NoLock, true);
	if (!OidIsValid(*relid))
		return false;
	relnsp = get_rel_namespace(*relid);

	/*
	 * The command looks an unqualified name up again.  Should the relation
	 * found here be dropped while the command waits for its lock, it would
	 * find durable's relation of that name further along search_path and
	 * queue its lock there, which is what this guard refuses: pin the name
	 * to the schema it was found in (the hook gave us a tree of our own).
	 */
	if (rv->schemaname == NULL && relnsp != nsp)
		rv->schemaname = isTempNamespace(relnsp) ? pstrdup("pg_temp") : get_namespace_name(relnsp);
	return relnsp == nsp;
}

/* Whether an added column is a stored generated one. */
static bool
guard_column_generated(ColumnDef *def)
{
	ListCell   *lc;

	if (def->generated != '\0')
		return true;
	foreach(lc, def->constraints)
	{
		if (((Constraint *) lfirst(lc))->contype == CONSTR_GENERATED)
			return true;
	}
	return false;
}

/*
 * Whether type `typid` has a default of its own (a domain's, or a base
 * type's, kept as text only: get_typdefault), or is a domain with NOT NULL
 * at any level of its domain chain (INSERT would write the default, which
 * is the column type's own and no other's, or refuse NULL; the direct
 * inserts would write NULL).
 */
static bool
guard_type_filled(Oid typid)
{
	bool		first = true;

	while (OidIsValid(typid))
	{
		HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
		Form_pg_type typ;
		bool		filled;

		if (!HeapTupleIsValid(tup))
			return false;
		typ = (Form_pg_type) GETSTRUCT(tup);
		filled = typ->typnotnull ||
			(first && (!heap_attisnull(tup, Anum_pg_type_typdefaultbin, NULL) ||
					   !heap_attisnull(tup, Anum_pg_type_typdefault, NULL)));
		first = false;
		typid = typ->typtype == TYPTYPE_DOMAIN ? typ->typbasetype : InvalidOid;
		ReleaseSysCache(tup);
		if (filled)
			return true;
	}
	return false;
}

/* Whether type `typid` is `domain` or a domain over it, at any depth. */
static bool
guard_domain_under(Oid typid, Oid domain)
{
	while (OidIsValid(typid))
	{
		HeapTuple	tup;
		Form_pg_type typ;

		if (typid == domain)
			return true;
		tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
		if (!HeapTupleIsValid(tup))
			return false;
		typ = (Form_pg_type) GETSTRUCT(tup);
		typid = typ->typtype == TYPTYPE_DOMAIN ? typ->typbasetype : InvalidOid;
		ReleaseSysCache(tup);
	}
	return false;
}

/*
 * A column of a journal the direct inserts write whose type is `domain`,
 * or with `under`, a domain over it: its name, or NULL; its journal and
 * type in *relid and *type.  Read from the catalogs, without locking the
 * journals.
 */
static char *
guard_journal_column_of(Oid nsp, Oid domain, bool under, Oid *relid, Oid *type)
{
	for (int queue = 0; queue < DQ_NUM_QUEUES; queue++)
	{
		*relid = get_relname_relid(durable_queue_names[queue], nsp);
		for (AttrNumber attnum = 1; OidIsValid(*relid); attnum++)
		{
			HeapTuple	tup = SearchSysCache2(ATTNUM, ObjectIdGetDatum(*relid),
											  Int16GetDatum(attnum));
			Form_pg_attribute att;
			char	   *column = NULL;

			if (!HeapTupleIsValid(tup))
				break;
			att = (Form_pg_attribute) GETSTRUCT(tup);
			if (!att->attisdropped &&
				(under ? guard_domain_under(att->atttypid, domain) : att->atttypid == domain))
			{
				column = pstrdup(NameStr(att->attname));
				*type = att->atttypid;
			}
			ReleaseSysCache(tup);
			if (column != NULL)
				return column;
		}
	}
	return NULL;
}

/*
 * ALTER DOMAIN ... SET DEFAULT (a domain's default is its own: INSERT
 * writes the one of the column's type) or SET NOT NULL (it holds for the
 * domains over it too) on the type of a column the direct inserts leave
 * NULL.
 */
static void
guard_alter_domain(AlterDomainStmt *stmt, Oid nsp)
{
	bool		set_default = stmt->subtype == 'T' && stmt->def != NULL &&
		!(IsA(stmt->def, A_Const) && ((A_Const *) stmt->def)->isnull);

	/*
	 * SET NOT NULL, or (PostgreSQL 17, whose ALTER DOMAIN ... ADD CONSTRAINT
	 * takes NOT NULL; 15 and 16 refuse the syntax) a NOT NULL constraint.
	 */
	bool		set_not_null = stmt->subtype == 'O' ||
		(stmt->subtype == 'C' && stmt->def != NULL && IsA(stmt->def, Constraint) &&
		 ((Constraint *) stmt->def)->contype == CONSTR_NOTNULL);
	Oid			domain;
	Oid			relid;
	Oid			type;
	char	   *column;

	if (guard_in_our_scripts() || !(set_default || set_not_null))
		return;
	domain = LookupTypeNameOid(NULL, makeTypeNameFromNameList(stmt->typeName), true);
	/* (Not a domain: PostgreSQL says so.) */
	if (!OidIsValid(domain) || get_typtype(domain) != TYPTYPE_DOMAIN)
		return;
	column = guard_journal_column_of(nsp, domain, !set_default, &relid, &type);
	if (column != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 set_default ?
				 errmsg("cannot give domain %s a default", format_type_be(domain)) :
				 errmsg("cannot make domain %s NOT NULL", format_type_be(domain)),
				 errdetail("Column \"%s\" of \"durable.%s\" is of type %s, and durable writes its journals directly and leaves the columns it does not know NULL.",
						   column, get_rel_name(relid), format_type_be(type)),
				 errhint("Drop the column first: ALTER TABLE durable.%s DROP COLUMN %s.",
						 get_rel_name(relid), quote_identifier(column))));
}

/*
 * Whether `expr` is the NULL constant, as a default of a column of type
 * `typid` and `typmod`: PostgreSQL stores none then, unless the type is a
 * domain (the column's NULL default overrides the domain's) or has a
 * typmod (the default is a length coercion of NULL, not a constant).
 */
static bool
guard_null_default(Node *expr, Oid typid, int32 typmod)
{
	return expr != NULL && IsA(expr, A_Const) && ((A_Const *) expr)->isnull &&
		OidIsValid(typid) && typmod < 0 && get_typtype(typid) != TYPTYPE_DOMAIN;
}

/* Whether a column type's name is one of the serial types (which are no types). */
static bool
guard_serial_name(TypeName *name)
{
	static const char *const serials[] = {"smallserial", "serial2", "serial", "serial4",
	"bigserial", "serial8"};

	if (name == NULL || list_length(name->names) != 1)
		return false;
	for (int i = 0; i < lengthof(serials); i++)
		if (strcmp(strVal(linitial(name->names)), serials[i]) == 0)
			return true;
	return false;
}

/*
 * Whether an added column would get a value on INSERT, or refuse NULL.  The
 * column's type is pinned to the one checked (def->typeName by OID), and a
 * name that names no type is refused here: PostgreSQL looks the name up
 * again after waiting for its lock, and a type of that name created
 * meanwhile, in a schema ahead of pg_catalog on search_path, would be the
 * column's (a domain of another role: its CHECK then ran in durable's
 * writes as durable's owner; found by review, 2026-12-07).
 */
static bool
guard_column_filled(ColumnDef *def)
{
	Oid			typid = InvalidOid;
	int32		typmod = -1;
	ListCell   *lc;

	if (guard_serial_name(def->typeName))
		return true;
	if (def->typeName != NULL)
	{
		Type		type = LookupTypeName(NULL, def->typeName, &typmod, true);
		TypeName   *pinned;

		if (type == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("type \"%s\" does not exist", TypeNameToString(def->typeName))));
		typid = typeTypeId(type);
		ReleaseSysCache(type);
		/* (the dimensions, SETOF and position PostgreSQL reads besides the type) */
		pinned = makeTypeNameFromOid(typid, typmod);
		pinned->arrayBounds = def->typeName->arrayBounds;
		pinned->setof = def->typeName->setof;
		pinned->location = def->typeName->location;
		def->typeName = pinned;
	}
	if ((def->raw_default != NULL && !guard_null_default(def->raw_default, typid, typmod)) ||
		def->cooked_default != NULL || def->is_not_null || def->identity != '\0')
		return true;
	if (guard_type_filled(typid))
		return true;
	foreach(lc, def->constraints)
	{
		Constraint *constraint = (Constraint *) lfirst(lc);

		switch (constraint->contype)
		{
			case CONSTR_DEFAULT:
				if (!guard_null_default(constraint->raw_expr, typid, typmod))
					return true;
				break;
			case CONSTR_NOTNULL:
			case CONSTR_IDENTITY:
			case CONSTR_PRIMARY:
				return true;
			default:
				break;
		}
	}
	return false;
}

static void
guard_refuse_filled(const char *column, Oid relid, bool added)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 added ?
			 errmsg("column \"%s\" added to \"durable.%s\" must allow NULL and have no default",
					column, get_rel_name(relid)) :
			 errmsg("cannot give column \"%s\" of \"durable.%s\" a default or NOT NULL",
					column, get_rel_name(relid)),
			 errdetail("durable writes its journals directly and leaves the columns it does not know NULL, which such a column does not allow."),
			 errhint("Keep data of your own in a table of your own that references the journal.")));
}

/*
 * A default, NOT NULL or identity for a column of durable's own that its
 * scripts do not give it: durable leaves the column NULL in some states,
 * or its inserts write it themselves.
 */
/*
 * The default durable's scripts give a journal column (col->has_default):
 * the table's id sequence for id, 0 for the counters.
 */
static const char *
guard_script_default(const DurableJournalColumn *col)
{
	return strcmp(col->name, "id") == 0 ?
		psprintf("pg_catalog.nextval('durable.%s_id_seq'::pg_catalog.regclass)", col->table) : "0";
}

/* A raw default expression as ALTER COLUMN ... SET DEFAULT transforms it, for equal(). */
static Node *
guard_cooked_default(Node *raw)
{
	ParseState *pstate = make_parsestate(NULL);
	Node	   *expr = transformExpr(pstate, copyObject(raw), EXPR_KIND_COLUMN_DEFAULT);

	assign_expr_collations(pstate, expr);
	free_parsestate(pstate);
	return expr;
}

/*
 * Whether *raw is the default the scripts give the column: no other.  The
 * ids order each chat's records and the claims, and a default that numbers
 * them otherwise (down, or twice the same) would break that as a sequence
 * option would (found by review, 2026-12-07).  When it is, *raw becomes the
 * scripts' own qualified text: PostgreSQL looks the names up again after
 * its lock, and a nextval() of another schema on search_path created while
 * the command waited would be the one it stored (found by review).
 */
static bool
guard_default_restored(const DurableJournalColumn *col, Node **raw)
{
	List	   *parsed = raw_parser(psprintf("SELECT %s", guard_script_default(col)), RAW_PARSE_DEFAULT);
	SelectStmt *select = castNode(SelectStmt, linitial_node(RawStmt, parsed)->stmt);
	Node	   *script = linitial_node(ResTarget, select->targetList)->val;

	if (!equal(guard_cooked_default(*raw), guard_cooked_default(script)))
		return false;
	*raw = script;
	return true;
}

static void
guard_refuse_own_column(const DurableJournalColumn *col, AlterTableType subtype)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot give column \"%s\" of \"durable.%s\" %s",
					col->name, col->table,
					subtype == AT_SetNotNull ? "NOT NULL" :
					subtype == AT_AddIdentity ? "an identity" : "this default"),
			 subtype == AT_SetNotNull ?
			 errdetail("durable leaves it NULL while a record is in some of its states.") :
			 subtype == AT_AddIdentity ?
			 errdetail("durable's scripts give it none.") :
			 col->has_default ?
			 errdetail("durable's scripts give it the default %s, and only that one is let through.",
					   guard_script_default(col)) :
			 errdetail("durable's scripts give it no default: its inserts leave it NULL or write it themselves.")));
}

/*
 * ALTER COLUMN ... TYPE that gives a column of a journal back the type and
 * collation durable's scripts define (the hint of a call that found it
 * changed, by hand or by a database where durable was not preloaded).  When
 * it does, the type and collation are pinned to what was checked, as the
 * default is (guard_default_restored): a collation "C" of another schema
 * created while the command waited for its lock would be the one it used.
 */
static bool
guard_column_type_restored(Oid relid, AlterTableCmd *cmd)
{
	const DurableJournalColumn *col = durable_journal_column(relid, cmd->name);
	ColumnDef  *def = castNode(ColumnDef, cmd->def);
	Oid			type;
	int32		typmod;
	Oid			collation;

	if (col == NULL)
		return false;
	typenameTypeIdAndMod(NULL, def->typeName, &type, &typmod);
	if (type != col->type || typmod != -1)
		return false;
	collation = def->collClause ? get_collation_oid(def->collClause->collname, false) :
		get_typcollation(type);
	if (collation != (col->c_collated ? C_COLLATION_OID : get_typcollation(type)))
		return false;
	def->typeName = makeTypeNameFromOid(type, -1);
	def->collClause = NULL;
	if (col->c_collated)
	{
		def->collClause = makeNode(CollateClause);
		def->collClause->collname = list_make1(makeString("pg_catalog"));
		def->collClause->collname = lappend(def->collClause->collname, makeString("C"));
		def->collClause->location = -1;
	}
	return true;
}

/*
 * A CHECK constraint, a foreign key or a deferrable constraint (checked by
 * a trigger) added to a journal the direct code writes (directly, or with a
 * column: `def` is a Constraint or a ColumnDef, whose DEFERRABLE is a
 * constraint of its own in the parse tree), which its writes would not
 * check.
 */
static void
guard_journal_constraints(Node *def, Oid relid)
{
	List	   *constraints = IsA(def, ColumnDef) ? ((ColumnDef *) def)->constraints : list_make1(def);
	ListCell   *lc;
	bool		looked = false;
	bool		journal = false;
	ConstrType	last_kind = CONSTR_NULL;

	foreach(lc, constraints)
	{
		Constraint *constraint = lfirst_node(Constraint, lc);
		bool		deferrable = constraint->contype == CONSTR_ATTR_DEFERRABLE ||
			constraint->contype == CONSTR_ATTR_DEFERRED || constraint->deferrable;
		/* A column's DEFERRABLE is a node of its own after the constraint it qualifies. */
		bool		attribute = constraint->contype == CONSTR_ATTR_DEFERRABLE ||
			constraint->contype == CONSTR_ATTR_NOT_DEFERRABLE ||
			constraint->contype == CONSTR_ATTR_DEFERRED ||
			constraint->contype == CONSTR_ATTR_IMMEDIATE;
		ConstrType	kind = attribute ? last_kind : constraint->contype;

		if (!attribute)
			last_kind = constraint->contype;

		if (constraint->contype != CONSTR_CHECK && constraint->contype != CONSTR_FOREIGN && !deferrable)
			continue;
		if (!looked)
			(void) durable_journal_column_changes(relid, NULL, &journal);
		looked = true;
		if (!journal)
		{
			/*
			 * durable's other tables: a deferred unique or exclusion check
			 * runs at the caller's commit, as the caller (its index
			 * expressions included), as a deferred trigger would
			 * (guard_create_trigger).  A foreign key's check runs as the
			 * tables' owners.
			 */
			if (deferrable && kind != CONSTR_FOREIGN && !superuser() &&
				guard_is_member(RelationRelationId, relid))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot add a deferrable constraint to \"durable.%s\"", get_rel_name(relid)),
						 errdetail("It would be checked at the commit of the caller's transaction, as the role that called durable, not as durable's owner."),
						 errhint("Add it NOT DEFERRABLE.")));
			continue;
		}
		if (constraint->contype != CONSTR_CHECK && constraint->contype != CONSTR_FOREIGN)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot add a deferrable constraint to \"durable.%s\"", get_rel_name(relid)),
					 errdetail("PostgreSQL checks a deferrable constraint in a trigger, and durable writes its journals directly, without firing triggers."),
					 errhint("Add it NOT DEFERRABLE.")));
		if (constraint->contype == CONSTR_CHECK)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot add a check constraint to \"durable.%s\"", get_rel_name(relid)),
					 errdetail("durable writes its journals directly, without checking constraints added to them."),
					 errhint("Check the values before they reach durable, or in a table of your own that references the journal.")));
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot add a foreign key to \"durable.%s\"", get_rel_name(relid)),
				 errdetail("durable writes its journals directly, without checking foreign keys from them."),
				 errhint("Reference the journal from a table of your own instead.")));
	}
}

/*
 * Whether `keys` names columns of `relid` that are all NOT NULL already,
 * as durable's keys (id, an outbox's key) are: a primary key on them adds
 * no constraint the inserts could break (and puts back inbox_pkey or
 * outbox_pkey as the install script defines it).
 */
static bool
guard_columns_not_null(Oid relid, List *keys)
{
	ListCell   *lc;

	if (keys == NIL)
		return false;
	foreach(lc, keys)
	{
		AttrNumber	attnum = get_attnum(relid, strVal(lfirst(lc)));
		HeapTuple	tup;
		bool		not_null;

		if (attnum == InvalidAttrNumber)
			return false;
		tup = SearchSysCache2(ATTNUM, ObjectIdGetDatum(relid), Int16GetDatum(attnum));
		if (!HeapTupleIsValid(tup))
			return false;
		not_null = ((Form_pg_attribute) GETSTRUCT(tup))->attnotnull;
		ReleaseSysCache(tup);
		if (!not_null)
			return false;
	}
	return true;
}

/*
 * Whether a PRIMARY KEY constraint added to `relid` would make a column
 * NOT NULL that is not: the columns it names, or with USING INDEX, the
 * index's key columns.  An index PostgreSQL refuses for a primary key (not
 * found, of another table, on an expression) is left for it to report.
 */
static bool
guard_primary_key_adds_not_null(Constraint *constraint, Oid relid)
{
	List	   *columns = NIL;
	Oid			index;
	HeapTuple	tup;
	Form_pg_index form;

	if (constraint->indexname == NULL)
		return !guard_columns_not_null(relid, constraint->keys);
	index = get_relname_relid(constraint->indexname, get_rel_namespace(relid));
	if (!OidIsValid(index) || (tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(index))) == NULL)
		return false;
	form = (Form_pg_index) GETSTRUCT(tup);
	for (int i = 0; form->indrelid == relid && i < form->indnkeyatts; i++)
	{
		if (form->indkey.values[i] == 0)
		{
			columns = NIL;
			break;
		}
		columns = lappend(columns, makeString(get_attname(relid, form->indkey.values[i], false)));
	}
	ReleaseSysCache(tup);
	return columns != NIL && !guard_columns_not_null(relid, columns);
}

/*
 * Refuse, outside durable's own scripts, the ALTER TABLE commands that
 * would change the type of a column of a table in durable's schema (ALTER
 * COLUMN ... TYPE on it, and making it a child, by INHERIT or ATTACH
 * PARTITION, of a table whose column types the owner could change with it),
 * or that would make its inserts fail (a default, NOT NULL).  The C code
 * reads and writes those columns as the types the scripts created, and
 * another type would be misread (direct_attnum refuses the journals'
 * direct writes, but not every statement's reads).
 */
static void
guard_journal_shape(AlterTableStmt *stmt, Oid nsp)
{
	Oid			relid;
	Oid			child;
	bool		ours;
	bool		journal = false;
	List	   *added = NIL;
	ListCell   *lc;

	if (guard_in_our_scripts() || IsBinaryUpgrade || stmt->relation == NULL)
		return;
	/* (a table of yours in the schema is yours to shape) */
	ours = guard_in_durable_schema(stmt->relation, nsp, &relid) &&
		guard_is_member(RelationRelationId, relid);
	if (ours)
		(void) durable_journal_column_changes(relid, NULL, &journal);
	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

		if (cmd->subtype == AT_AddColumn)
			added = lappend(added, makeString(castNode(ColumnDef, cmd->def)->colname));
	}
	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

		if (ours && cmd->subtype == AT_SetUnLogged && get_rel_relkind(relid) == RELKIND_SEQUENCE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("sequence durable.%s cannot be made unlogged", get_rel_name(relid)),
					 errdetail("After a crash it would start again from its first value: ids would go out of order and tokens come again.")));
		/* (PostgreSQL would make the table's own sequences unlogged with it.) */
		if (ours && cmd->subtype == AT_SetUnLogged)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table durable.%s cannot be made unlogged", get_rel_name(relid)),
					 errdetail("After a crash PostgreSQL empties an unlogged table, and standbys never see its rows: every record in it would be lost.")));
		if (ours && cmd->subtype == AT_AlterColumnType && !guard_column_type_restored(relid, cmd))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot change the type of column \"%s\" of \"durable.%s\"",
							cmd->name, get_rel_name(relid)),
					 errdetail("durable reads and writes its tables' columns as the types it created them with."),
					 errhint("Keep data of your own in a table of your own that references the journal.")));
		if (ours && cmd->subtype == AT_DropColumn && durable_journal_column(relid, cmd->name) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot drop column \"%s\" of \"durable.%s\"", cmd->name, get_rel_name(relid)),
					 errdetail("durable reads and writes it: every call would fail, and its values would be lost.")));
		if (ours && cmd->subtype == AT_AddOf)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("\"durable.%s\" cannot be made a typed table", get_rel_name(relid)),
					 errdetail("A change of the type's attributes would change durable's columns.")));
		if (ours && cmd->subtype == AT_AddInherit)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("\"durable.%s\" cannot inherit from another table", get_rel_name(relid)),
					 errdetail("A change of the parent's column types would change durable's.")));
		/*
		 * (ADD COLUMN IF NOT EXISTS of a column there is gets the same
		 * refusals: PostgreSQL looks for the column again after its lock,
		 * and another session may have dropped it meanwhile; until
		 * 2026-12-06 such a column got past them, found by review.)
		 */
		if (journal && cmd->subtype == AT_AddColumn && guard_column_generated(castNode(ColumnDef, cmd->def)))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("generated column \"%s\" cannot be added to \"durable.%s\"",
							castNode(ColumnDef, cmd->def)->colname, get_rel_name(relid)),
					 errdetail("durable writes its journals directly, without computing generated columns."),
					 errhint("Compute the value in a view or a query instead.")));
		if (journal && cmd->subtype == AT_AddColumn &&
			guard_column_filled(castNode(ColumnDef, cmd->def)))
			guard_refuse_filled(castNode(ColumnDef, cmd->def)->colname, relid, true);
		if (ours && (cmd->subtype == AT_AddConstraint || cmd->subtype == AT_AddColumn))
			guard_journal_constraints(cmd->def, relid);
		if (ours && cmd->subtype == AT_AddConstraint &&
			castNode(Constraint, cmd->def)->contype == CONSTR_PRIMARY &&
			guard_primary_key_adds_not_null(castNode(Constraint, cmd->def), relid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot add a primary key to \"durable.%s\"", get_rel_name(relid)),
					 errdetail("A primary key makes its columns NOT NULL, and durable leaves the columns it does not know NULL: every insert would fail."),
					 errhint("Add a UNIQUE index instead.")));
		if (journal && ((cmd->subtype == AT_ColumnDefault && cmd->def != NULL) ||
						cmd->subtype == AT_SetNotNull || cmd->subtype == AT_AddIdentity))
		{
			AttrNumber	attnum = get_attnum(relid, cmd->name);
			Oid			typid;
			int32		typmod;
			Oid			collation;

			/* A column this statement adds is refused; one there is not, PostgreSQL reports. */
			if (attnum == InvalidAttrNumber && list_member(added, makeString(cmd->name)))
				guard_refuse_filled(cmd->name, relid, false);
			if (attnum != InvalidAttrNumber)
			{
				const DurableJournalColumn *col = durable_journal_column(relid, cmd->name);

				get_atttypetypmodcoll(relid, attnum, &typid, &typmod, &collation);
				if (cmd->subtype == AT_ColumnDefault && guard_null_default(cmd->def, typid, typmod))
					continue;
				if (col == NULL)
					guard_refuse_filled(cmd->name, relid, false);
				else if (!((cmd->subtype == AT_SetNotNull && col->not_null) ||
						   (cmd->subtype == AT_ColumnDefault && col->has_default &&
							guard_default_restored(col, &cmd->def))))
					guard_refuse_own_column(col, cmd->subtype);
			}
		}
		if (cmd->subtype == AT_AttachPartition &&
			guard_in_durable_schema(castNode(PartitionCmd, cmd->def)->name, nsp, &child))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("\"durable.%s\" cannot be a partition of another table", get_rel_name(child)),
					 errdetail("A change of the parent's column types would change durable's.")));
	}
}

static const char *
guard_relkind_word(Oid relid)
{
	switch (get_rel_relkind(relid))
	{
		case RELKIND_VIEW:
			return "view";
		case RELKIND_SEQUENCE:
			return "sequence";
		case RELKIND_INDEX:
			return "index";
		default:
			return "table";
	}
}

/* Whether the role owns the relation, extension or schema `objid` of catalog `classid`. */
static bool
guard_owns_object(Oid classid, Oid objid)
{
#if PG_VERSION_NUM >= 160000
	return object_ownercheck(classid, objid, GetUserId());
#else
	switch (classid)
	{
		case RelationRelationId:
			return pg_class_ownercheck(objid, GetUserId());
		case ExtensionRelationId:
			return pg_extension_ownercheck(objid, GetUserId());
		case NamespaceRelationId:
			return pg_namespace_ownercheck(objid, GetUserId());
		default:
			elog(ERROR, "durable: no owner check for catalog %u", classid);
	}
	return false;				/* keep the compiler quiet */
#endif
}

static bool
guard_owns(Oid relid)
{
	return guard_owns_object(RelationRelationId, relid);
}

static void
guard_refuse(Oid relid, const char *command, const char *lock, bool ownership)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 ownership ?
			 errmsg("must be owner of %s durable.%s", guard_relkind_word(relid), get_rel_name(relid)) :
			 errmsg("permission denied for %s durable.%s", guard_relkind_word(relid), get_rel_name(relid)),
			 errdetail("%s would lock it (%s) before checking this, and later lock requests on it would queue behind it while it waited.",
					   command, lock)));
}

/*
 * Refuse `command`, which locks the durable extension ACCESS EXCLUSIVE, to
 * a role that does not own it.  Every pass of durable's worker locks the
 * extension, and would wait behind the command for as long as the command
 * waits for its own lock, or holds it.
 */
static void
guard_require_extension_owner(const char *command)
{
	Oid			extoid = get_extension_oid("durable", true);

	if (OidIsValid(extoid) && !guard_owns_object(ExtensionRelationId, extoid))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of extension durable"),
				 errdetail("%s would lock the extension (ACCESS EXCLUSIVE) before or without checking this, and durable's background worker would wait behind it.",
						   command)));
}

/*
 * Refuse `command`, which locks schema durable ACCESS EXCLUSIVE before it
 * checks the owner, to a role that does not own it: the owner's ALTER
 * EXTENSION durable UPDATE, which creates objects there while it holds its
 * locks on the journals, would queue behind it.
 */
static void
guard_require_schema_owner(Oid nsp, const char *command)
{
	if (!guard_owns_object(NamespaceRelationId, nsp))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of schema durable"),
				 errdetail("%s would lock the schema (ACCESS EXCLUSIVE) before checking this, and durable's upgrades would wait behind it.",
						   command)));
}

/*
 * ALTER <your object> [NO] DEPENDS ON EXTENSION durable: PostgreSQL checks
 * only the object's owner, then locks the extension until the transaction
 * ends; any role that can create a temporary function could stop lease
 * recovery.
 */
static void
guard_depends_on_durable(AlterObjectDependsStmt *stmt)
{
	if (stmt->extname != NULL && strcmp(strVal(stmt->extname), "durable") == 0)
		guard_require_extension_owner("ALTER ... DEPENDS ON EXTENSION");
}

/*
 * DROP EXTENSION durable and DROP SCHEMA durable lock their object before
 * they check the owner: a role that can only connect could make them wait
 * behind a transaction of its own that looked the object up
 * (pg_get_object_address), for as long as that transaction stays open, and
 * queue behind them the worker (which locks the extension at every pass),
 * or the owner's ALTER EXTENSION durable UPDATE (which locks the schema to
 * create in it, holding its locks on the journals).
 */
static void
guard_drop_durable(DropStmt *stmt, Oid nsp)
{
	ListCell   *lc;

	if (stmt->removeType != OBJECT_EXTENSION && stmt->removeType != OBJECT_SCHEMA)
		return;
	foreach(lc, stmt->objects)
	{
		Node	   *name = (Node *) lfirst(lc);

		if (!IsA(name, String) || strcmp(strVal(name), "durable") != 0)
			continue;
		if (stmt->removeType == OBJECT_EXTENSION)
		{
			guard_require_extension_owner("DROP EXTENSION");
			continue;
		}
		guard_require_schema_owner(nsp, "DROP SCHEMA");
	}
}

/*
 * ALTER SCHEMA durable RENAME.  A role that does not own the schema is
 * refused first, as for DROP SCHEMA.  Its owner is refused too: durable's code finds its tables as
 * durable.<table>, so under another name every call and every worker pass
 * would fail, and a role allowed to create schemas could create one named
 * durable with tables of its own, which durable's functions, running as
 * their owner, would then write to.
 */
static void
guard_rename_schema(RenameStmt *stmt, Oid nsp)
{
	if (stmt->renameType != OBJECT_SCHEMA || strcmp(stmt->subname, "durable") != 0)
		return;
	guard_require_schema_owner(nsp, "ALTER SCHEMA");
	if (guard_in_our_scripts())
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot rename schema durable"),
			 errdetail("durable's functions and its worker find its tables in schema durable; under another name every call would fail, and a role allowed to create schemas could create a schema named durable for them to write to.")));
}

static void
guard_refuse_rename(const char *what, const char *name, bool set_schema)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 set_schema ?
			 errmsg("cannot move %s durable.%s to another schema", what, name) :
			 errmsg("cannot rename %s durable.%s", what, name),
			 errdetail("durable's functions, its worker, its upgrade scripts and your bots find durable's objects by their names in schema durable: every call that needs this one would fail."),
			 errhint("Create a view or a function of your own under the name you want.")));
}

static void
guard_refuse_rename_column(const char *column, Oid relid)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot rename column \"%s\" of durable.%s", column, get_rel_name(relid)),
			 errdetail("durable's code finds its tables' columns by their names, and does not tell a column you added from its own."),
			 errhint("For a column you added: drop it and add it again under the new name, or keep data of your own in a table of your own that references the journal.")));
}

/*
 * Write the schema of `func`, the function the guard looked up (none:
 * InvalidOid), into the command's unqualified name.  PostgreSQL looks the
 * name up again after waiting for its lock, and a function of another role
 * dropped meanwhile left the name to durable's own further along
 * search_path: its owner changed, or it was renamed (found by review,
 * 2026-12-07).
 */
static void
guard_pin_function(ObjectWithArgs *owa, Oid func)
{
	char	   *schema;

	if (!OidIsValid(func) || list_length(owa->objname) != 1)
		return;
	schema = get_namespace_name(get_func_namespace(func));
	if (schema == NULL)
		elog(ERROR, "cache lookup failed for the schema of function %u", func);
	owa->objname = lcons(makeString(schema), owa->objname);
}

/*
 * Refuse the RENAME or SET SCHEMA of `type` `relation` (or, for a function,
 * `object`) if it is one of durable's own relations or functions.
 */
static void
guard_refuse_member_named(ObjectType type, RangeVar *relation, Node *object, Oid nsp,
						  bool set_schema)
{
	Oid			relid;
	Oid			func;

	switch (type)
	{
		case OBJECT_TABLE:
		case OBJECT_SEQUENCE:
		case OBJECT_VIEW:
		case OBJECT_MATVIEW:
		case OBJECT_FOREIGN_TABLE:
		case OBJECT_INDEX:
			if (guard_in_durable_schema(relation, nsp, &relid) &&
				guard_is_member(RelationRelationId, relid))
				guard_refuse_rename(guard_relkind_word(relid), get_rel_name(relid), set_schema);
			break;
		case OBJECT_FUNCTION:
		case OBJECT_PROCEDURE:
		case OBJECT_ROUTINE:
			func = LookupFuncWithArgs(type, castNode(ObjectWithArgs, object), true);
			if (get_func_namespace(func) == nsp && guard_is_member(ProcedureRelationId, func))
				guard_refuse_rename("function", get_func_name(func), set_schema);
			guard_pin_function(castNode(ObjectWithArgs, object), func);
			break;
		default:
			break;
	}
}

/*
 * ALTER ... RENAME of durable's own tables, sequences and views, of their
 * columns, and of its functions: refused, as is ALTER SCHEMA durable
 * RENAME.  Indexes and constraints may be renamed: renaming an index is
 * the repair of one made under the name of one of durable's (direct.c's
 * index checks), and durable's own, once renamed, are reported missing
 * until renamed back.  A user's own objects in the schema are not
 * durable's.
 */
static void
guard_rename_member(RenameStmt *stmt, Oid nsp)
{
	Oid			relid;

	if (guard_in_our_scripts() || IsBinaryUpgrade)
		return;
	/* (ALTER TYPE ... RENAME ATTRIBUTE renames a table's or a view's column too) */
	if (stmt->renameType != OBJECT_COLUMN && stmt->renameType != OBJECT_ATTRIBUTE)
		guard_refuse_member_named(stmt->renameType, stmt->relation, stmt->object, nsp, false);
	else if (guard_in_durable_schema(stmt->relation, nsp, &relid) &&
			 guard_is_member(RelationRelationId, relid))
		guard_refuse_rename_column(stmt->subname, relid);
}

/* ALTER ... SET SCHEMA of durable's own relations and functions. */
static void
guard_set_schema_member(AlterObjectSchemaStmt *stmt, Oid nsp)
{
	if (!guard_in_our_scripts() && !IsBinaryUpgrade)
		guard_refuse_member_named(stmt->objectType, stmt->relation, stmt->object, nsp, true);
}

/*
 * ALTER FUNCTION of durable's own functions: their security and their
 * search_path.  They run as durable's owner (SECURITY DEFINER; session_save
 * and session_load are SECURITY INVOKER and switch to the owner themselves,
 * so that they see their caller) with search_path pg_catalog, pg_temp.
 * Their statements name durable's tables with the schema, not every
 * operator: without the pinned path, the caller's search_path would choose
 * them, and a bot's own "=" would run as durable's owner.  A DBA's RESET
 * ALL (to drop jit = off, say) did that; SECURITY DEFINER on a session
 * function gave every role the same sessions.  Other settings, the cost
 * and the rest are the DBA's.
 */
static void
guard_alter_function(AlterFunctionStmt *stmt, Oid nsp)
{
	Oid			func;
	ListCell   *lc;

	if (guard_in_our_scripts() || IsBinaryUpgrade)
		return;
	func = LookupFuncWithArgs(stmt->objtype, stmt->func, true);
	if (get_func_namespace(func) != nsp || !guard_is_member(ProcedureRelationId, func))
		return;
	foreach(lc, stmt->actions)
	{
		DefElem    *action = lfirst_node(DefElem, lc);
		const char *what = NULL;

		if (strcmp(action->defname, "security") == 0)
			what = "security";
		else if (strcmp(action->defname, "set") == 0)
		{
			VariableSetStmt *set = castNode(VariableSetStmt, action->arg);

			if (set->kind == VAR_RESET_ALL ||
				(set->name != NULL && pg_strcasecmp(set->name, "search_path") == 0))
				what = "search_path";
		}
		if (what != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot change the %s of function durable.%s", what, get_func_name(func)),
					 errdetail("durable's functions run as durable's owner with search_path pg_catalog, pg_temp: "
							   "under another search_path, operators of the caller's would run as that owner; "
							   "session_save and session_load must see their caller to keep each role's sessions apart."),
					 errhint("Set or reset other parameters one by one (ALTER FUNCTION ... RESET jit, say), not RESET ALL.")));
	}
}

static void
guard_refuse_replace(const char *what, const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot replace %s durable.%s", what, name),
			 errdetail("It is one of durable's own: its code, worker and upgrade scripts, your bots and the "
					   "roles that read it would run yours instead, with their own rights."),
			 errhint("Create one of your own under another name, or in another schema.")));
}

/* CREATE OR REPLACE FUNCTION of one of durable's own functions. */
static void
guard_replace_function(CreateFunctionStmt *stmt, Oid nsp)
{
	char	   *name;
	Oid			argtypes[FUNC_MAX_ARGS];
	int			nargs = 0;
	ListCell   *lc;
	Oid			func;

	if (!stmt->replace || guard_in_our_scripts() || IsBinaryUpgrade)
		return;
	if (QualifiedNameGetCreationNamespace(stmt->funcname, &name) != nsp)
		return;
	foreach(lc, stmt->parameters)
	{
		FunctionParameter *param = lfirst_node(FunctionParameter, lc);

		if (param->mode == FUNC_PARAM_OUT || param->mode == FUNC_PARAM_TABLE)
			continue;
		if (nargs == FUNC_MAX_ARGS)
			return;
		argtypes[nargs] = LookupTypeNameOid(NULL, param->argType, true);
		if (!OidIsValid(argtypes[nargs]))
			return;
		nargs++;
	}
	func = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum(name),
						   PointerGetDatum(buildoidvector(argtypes, nargs)),
						   ObjectIdGetDatum(nsp));
	if (guard_is_member(ProcedureRelationId, func))
		guard_refuse_replace("function", name);
}

/* CREATE OR REPLACE VIEW of one of durable's own views. */
static void
guard_replace_view(ViewStmt *stmt, Oid nsp)
{
	Oid			relid;

	/* (where the view would be created, not where its name is found first) */
	if (!stmt->replace || guard_in_our_scripts() || IsBinaryUpgrade ||
		RangeVarGetCreationNamespace(stmt->view) != nsp)
		return;
	relid = get_relname_relid(stmt->view->relname, nsp);
	if (guard_is_member(RelationRelationId, relid))
		guard_refuse_replace("view", get_rel_name(relid));
}

/*
 * ALTER EXTENSION durable ADD or DROP: a member dropped from the extension
 * could then be replaced (guard_replace_function), one added would go with
 * the extension.  Only durable's scripts change its members.
 */
static void
guard_extension_contents(AlterExtensionContentsStmt *stmt)
{
	if (strcmp(stmt->extname, "durable") == 0 && !guard_in_our_scripts() && !IsBinaryUpgrade)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot %s extension durable by hand", stmt->action > 0 ? "add objects to" : "drop objects from"),
				 errdetail("durable's members are what its scripts make them; one taken out could be replaced, and run by every role that calls it."),
				 errhint("ALTER EXTENSION durable UPDATE changes them.")));
}

/*
 * A deferrable constraint trigger on one of durable's tables would fire at
 * the commit of the transaction that called durable, after the function
 * returned: as the role that called it, not as durable's owner.  The owner
 * of durable's tables, no longer a superuser, could so run its code as a
 * superuser that calls permit(), say.  A trigger that fires within the
 * statement runs as durable's owner, which is the table owner's own right;
 * a superuser's deferred trigger runs with no more rights than its caller's.
 */
static void
guard_create_trigger(CreateTrigStmt *stmt, Oid nsp)
{
	Oid			relid;

	if (stmt->isconstraint && stmt->deferrable && !superuser() && !guard_in_our_scripts() &&
		guard_in_durable_schema(stmt->relation, nsp, &relid) &&
		guard_is_member(RelationRelationId, relid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("deferrable constraint trigger \"%s\" on durable.%s is not supported",
						stmt->trigname, get_rel_name(relid)),
				 errdetail("It would fire at the commit of the caller's transaction, as the role that called durable, not as durable's owner."),
				 errhint("Create it NOT DEFERRABLE.")));
}

/* `command` on `rv` needs the role to own it, if it is durable's. */
static void
guard_require_owner(RangeVar *rv, Oid nsp, const char *command, const char *lock)
{
	Oid			relid;

	if (guard_in_durable_schema(rv, nsp, &relid) && !guard_owns(relid))
		guard_refuse(relid, command, lock, true);
}

/*
 * `command` on `rv` needs `privilege` on it (on the table or, for
 * REFERENCES, on any of its columns: the command checks the columns it
 * names), if it is durable's.
 */
static void
guard_require_privilege(RangeVar *rv, Oid nsp, AclMode privilege, const char *command,
						const char *lock)
{
	Oid			relid;
	Oid			role = GetUserId();

	if (!guard_in_durable_schema(rv, nsp, &relid) ||
		pg_class_aclcheck(relid, role, privilege) == ACLCHECK_OK ||
		pg_attribute_aclcheck_all(relid, role, privilege, ACLMASK_ANY) == ACLCHECK_OK)
		return;
	guard_refuse(relid, command, lock, false);
}

/*
 * A foreign key that references a column of a journal that the direct
 * updates change (the token, say), whose referenced-side checks they skip.
 * One that references the key (id; an outbox's key) they never change.
 */
static void
guard_referenced_columns(Constraint *fk, Oid nsp)
{
	Oid			relid;
	ListCell   *lc;
	bool		journal;

	if (guard_in_our_scripts() || !guard_in_durable_schema(fk->pktable, nsp, &relid))
		return;
	foreach(lc, fk->pk_attrs)
	{
		if (durable_journal_column_changes(relid, strVal(lfirst(lc)), &journal))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a foreign key cannot reference column \"%s\" of \"durable.%s\"",
							strVal(lfirst(lc)), get_rel_name(relid)),
					 errdetail("durable changes it without checking foreign keys."),
					 errhint("Reference the journal by its key: %s.",
							 strcmp(get_rel_name(relid), "outbox") == 0 ? "(key)" : "(id)")));
		if (!journal)
			return;
	}
}

/* The foreign keys among table elements or constraints (Constraint, ColumnDef). */
static void
guard_foreign_keys(List *elements, Oid nsp)
{
	ListCell   *lc;

	foreach(lc, elements)
	{
		Node	   *node = lfirst(lc);

		if (IsA(node, ColumnDef))
			guard_foreign_keys(((ColumnDef *) node)->constraints, nsp);
		else if (IsA(node, Constraint) && ((Constraint *) node)->contype == CONSTR_FOREIGN)
		{
			guard_require_privilege(((Constraint *) node)->pktable, nsp, ACL_REFERENCES,
									"A foreign key", "SHARE ROW EXCLUSIVE");
			guard_referenced_columns((Constraint *) node, nsp);
		}
	}
}

/*
 * A child table of a journal: durable's statements (standing(), the sweep,
 * outbox_discard) would read and change its rows, and the direct writes,
 * which read the journal alone, would not, nor check its keys.
 */
static void
guard_refuse_journal_parent(RangeVar *parent, Oid nsp)
{
	Oid			relid;
	bool		journal;

	/* (pg_upgrade carries a child made in a server that did not preload durable) */
	if (guard_in_our_scripts() || IsBinaryUpgrade || !guard_in_durable_schema(parent, nsp, &relid))
		return;
	(void) durable_journal_column_changes(relid, NULL, &journal);
	if (journal)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("\"durable.%s\" cannot have child tables", get_rel_name(relid)),
				 errdetail("durable's statements would see the child's rows and its direct writes would not."),
				 errhint("Keep data of your own in a table of your own that references the journal.")));
	/*
	 * durable's other tables: its statements reach a child's rows, and fire
	 * the child's triggers and check its deferred constraints at the
	 * caller's commit, as the caller (review, 2026-12-05: a demoted owner's
	 * child of durable.permits made it superuser again through permit()).
	 */
	if (guard_is_member(RelationRelationId, relid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("\"durable.%s\" cannot have child tables", get_rel_name(relid)),
				 errdetail("durable's statements on it would reach the child's rows, and run the child's triggers and deferred checks as durable's callers."),
				 errhint("Keep data of your own in a table of your own.")));
}

static void
guard_create_table(CreateStmt *stmt, Oid nsp)
{
	ListCell   *lc;

	/*
	 * The parents' owner check comes first, also for a CREATE TABLE IF NOT
	 * EXISTS that PostgreSQL may skip: refusing a no-op to a role that could
	 * not make the child loses nothing, and a skip decided here would rest
	 * on a lookup of the new name that the role can change while the
	 * command waits (before 2026-12-04 it looked the name up along
	 * search_path, so that "pg_class" or a temporary table's name got the
	 * command past the check).
	 */
	foreach(lc, stmt->inhRelations)
		guard_require_owner(lfirst_node(RangeVar, lc), nsp,
							stmt->partbound ? "CREATE TABLE ... PARTITION OF" : "CREATE TABLE ... INHERITS",
							stmt->partbound ? "ACCESS EXCLUSIVE" : "SHARE UPDATE EXCLUSIVE");

	/*
	 * A child of one of durable's tables is refused also when a table of
	 * that name is there already, which PostgreSQL would skip: the command
	 * looks for the name again after waiting for its locks, and another
	 * session may have dropped or hidden it meanwhile (until 2026-12-06 the
	 * lookup here let such a child through, found by review).
	 *
	 * The new table's foreign keys are not looked at here: PostgreSQL adds
	 * them after it made the table, with an ALTER TABLE that comes through
	 * the hook (guard_alter_table), and takes no lock on the referenced
	 * table before.  Looked up here, before the table exists, a key that
	 * references the new table itself by a name durable's tables have too
	 * found durable's further along search_path (found by review,
	 * 2026-12-07).
	 */
	foreach(lc, stmt->inhRelations)
		guard_refuse_journal_parent(lfirst_node(RangeVar, lc), nsp);
}

/*
 * A new owner for one of durable's objects alone.  durable's functions run
 * as their owner (SECURITY DEFINER), its workers' passes as the same role
 * (durable_owner: the members' owner), and references.c trusts the tables
 * of the journals' owner: these are one role, which REASSIGN OWNED changes
 * for all of them at once.  An object given to another role splits them (a
 * function that loses its tables, a trust in tables of a role the deletes
 * do not run as).  Giving it back to durable's owner is allowed.
 */
static void
guard_owner_change(const char *what, RoleSpec *newowner)
{
	Oid			owner = durable_owner();
	const char *owner_name;

	/* (pg_upgrade's restore gives each member its old owner after an extension of its own) */
	if (guard_in_our_scripts() || IsBinaryUpgrade || get_rolespec_oid(newowner, false) == owner)
		return;
	owner_name = GetUserNameFromId(owner, false);
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot change the owner of %s alone", what),
			 errdetail("durable's functions, its workers' passes and the trust in tables that reference its journals all go by one owner (%s).",
					   owner_name),
			 errhint("REASSIGN OWNED BY %s TO <new owner> moves all of durable at once.",
					 quote_identifier(owner_name))));
}

/* ALTER FUNCTION | SCHEMA ... OWNER TO of durable's functions or schema. */
static void
guard_alter_owner(AlterOwnerStmt *stmt, Oid nsp)
{
	if (stmt->objectType == OBJECT_SCHEMA)
	{
		if (strcmp(strVal(stmt->object), "durable") == 0)
			guard_owner_change("schema durable", stmt->newowner);
	}
	else if (stmt->objectType == OBJECT_FUNCTION || stmt->objectType == OBJECT_PROCEDURE ||
			 stmt->objectType == OBJECT_ROUTINE)
	{
		Oid			func = LookupFuncWithArgs(stmt->objectType,
											  castNode(ObjectWithArgs, stmt->object), true);

		if (OidIsValid(func) && get_func_namespace(func) == nsp &&
			guard_is_member(ProcedureRelationId, func))
			guard_owner_change(psprintf("function durable.%s", get_func_name(func)),
							   stmt->newowner);
		guard_pin_function(castNode(ObjectWithArgs, stmt->object), func);
	}
}

static void
guard_alter_table(AlterTableStmt *stmt, Oid nsp)
{
	ListCell   *lc;

	/* ALTER TABLE IF EXISTS of a table there is not: PostgreSQL skips it. */
	if (stmt->missing_ok && !OidIsValid(RangeVarGetRelid(stmt->relation, NoLock, true)))
		return;
	guard_journal_shape(stmt, nsp);
	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

		switch (cmd->subtype)
		{
			case AT_AddConstraint:
			case AT_AddColumn:
				guard_foreign_keys(list_make1(cmd->def), nsp);
				break;
			case AT_AddInherit:
				guard_require_owner(castNode(RangeVar, cmd->def), nsp,
									"ALTER TABLE ... INHERIT", "SHARE UPDATE EXCLUSIVE");
				guard_refuse_journal_parent(castNode(RangeVar, cmd->def), nsp);
				break;
			case AT_ChangeOwner:
				{
					Oid			relid;

					if (guard_in_durable_schema(stmt->relation, nsp, &relid) &&
						guard_is_member(RelationRelationId, relid))
						guard_owner_change(psprintf("%s durable.%s", guard_relkind_word(relid),
													get_rel_name(relid)),
										   cmd->newowner);
					break;
				}
			case AT_DetachPartition:
			case AT_DetachPartitionFinalize:
				guard_require_owner(castNode(PartitionCmd, cmd->def)->name, nsp,
									"ALTER TABLE ... DETACH PARTITION",
									castNode(PartitionCmd, cmd->def)->concurrent ?
									"SHARE UPDATE EXCLUSIVE" : "ACCESS EXCLUSIVE");
				break;
			default:
				break;
		}
	}
}

/*
 * A rule on one of durable's tables: the journals' direct writes do not
 * apply rules, and the other tables' INSERT ... ON CONFLICT refuses a
 * table that has them.
 */
static void
guard_rule(RangeVar *rv, Oid nsp)
{
	Oid			relid;

	if (!guard_in_our_scripts() && !IsBinaryUpgrade && guard_in_durable_schema(rv, nsp, &relid) &&
		guard_is_member(RelationRelationId, relid))
	{
		bool		view = get_rel_relkind(relid) == RELKIND_VIEW;

		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot create a rule on \"durable.%s\"", get_rel_name(relid)),
				 view ? errdetail("durable's views are what its scripts make them: a rule would change what every role that reads one gets, and run with that role's rights.") :
				 errdetail("durable's functions write its tables with statements and direct writes that rules cannot apply to."),
				 view ? errhint("Create a view of your own over it.") :
				 errhint("Act on the records in your own code, or on the NOTIFY channels.")));
	}
}

/*
 * The options of ALTER SEQUENCE that durable's sequences cannot take.  A
 * chat's records are taken in the order of their ids, and a lease is
 * fenced by a token that must never come again: a cache (each backend
 * draws from a range of its own, so a later admit can get a lower id), a
 * cycle or an increment that is not positive breaks one or the other,
 * silently; a bound or a type would stop the start-up lift of token_seq (to
 * the clock) or the ids before INSERT would, and so would an increment
 * over 1 of token_seq (`fencing`; token.c: the lift relies on fewer tokens
 * than microseconds).  RESTART, like setval(), is the
 * DBA's to get right.
 */
static bool
guard_sequence_option_refused(DefElem *option, bool fencing)
{
	if (strcmp(option->defname, "cache") == 0)
		return defGetInt64(option) != 1;
	if (strcmp(option->defname, "increment") == 0)
		return fencing ? defGetInt64(option) != 1 : defGetInt64(option) < 1;
	if (strcmp(option->defname, "cycle") == 0)
		return option->arg != NULL && boolVal(option->arg);
	/* NO MAXVALUE / NO MINVALUE, or the values they stand for, are durable's own. */
	if (strcmp(option->defname, "maxvalue") == 0)
		return option->arg != NULL && defGetInt64(option) != PG_INT64_MAX;
	if (strcmp(option->defname, "minvalue") == 0)
		return option->arg != NULL && defGetInt64(option) != 1;
	if (strcmp(option->defname, "as") == 0)
		return LookupTypeNameOid(NULL, defGetTypeName(option), true) != INT8OID;
	return false;
}

static void
guard_alter_sequence(AlterSeqStmt *stmt, Oid nsp, bool top_level)
{
	Oid			relid;
	ListCell   *lc;
	bool		rewrites = false;
	bool		fencing;

	if (guard_in_our_scripts() || !guard_in_durable_schema(stmt->sequence, nsp, &relid) ||
		get_rel_relkind(relid) != RELKIND_SEQUENCE || !guard_is_member(RelationRelationId, relid))
		return;
	fencing = strcmp(get_rel_name(relid), "token_seq") == 0;
	foreach(lc, stmt->options)
	{
		DefElem    *option = lfirst_node(DefElem, lc);

		/*
		 * A table that owns a sequence takes it along to another schema.
		 * (pg_upgrade's restore sets the members' OWNED BY afresh.)
		 */
		if (strcmp(option->defname, "owned_by") == 0 && !IsBinaryUpgrade &&
			guard_is_member(RelationRelationId, relid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot change OWNED BY of sequence durable.%s", get_rel_name(relid)),
					 errdetail("A sequence owned by a table moves and is dropped with it; durable finds its sequences by their names in schema durable.")));
		if (guard_sequence_option_refused(option, fencing))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot change %s of sequence durable.%s",
							asc_toupper(option->defname, strlen(option->defname)),
							get_rel_name(relid)),
					 errdetail("durable orders each chat's records by their ids and fences leases by their tokens: its sequences keep no cache, never cycle, only increase (token_seq by 1), and have no bound of their own.")));
		if (strcmp(option->defname, "owned_by") != 0 && strcmp(option->defname, "restart") != 0)
			rewrites = true;
	}

	/*
	 * The options left (no change, as far as the options above allow, or
	 * START) give the sequence new storage until the transaction ends: a
	 * token handed out after it in the same transaction is undone by a
	 * rollback, and handed out again to another holder of the same record,
	 * whose stale confirmation would then pass.  RESTART moves the tokens
	 * itself: the DBA's to get right, as setval() is (and a rollback undoes
	 * it, with the tokens taken after it: README).
	 */
	if (rewrites && fencing && !IsBinaryUpgrade)
	{
		if (!top_level || IsTransactionBlock() || IsSubTransaction())
			ereport(ERROR,
					(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
					 errmsg("ALTER SEQUENCE durable.token_seq cannot run inside a transaction block or a function"),
					 errdetail("Until its transaction ends the change gives the sequence new storage: a rollback would hand the fencing tokens taken meanwhile out again, and fence nothing."),
					 errhint("Run it as a statement of its own: outside BEGIN ... COMMIT and functions, and not with other statements in one query string.")));
		/*
		 * A multi-statement query string is an implicit transaction block,
		 * refused above; what reaches this is a pipeline, which is not.
		 */
		PreventInTransactionBlock(top_level, "ALTER SEQUENCE durable.token_seq");
	}
}

/* COMMENT ON a relation or one of its columns. */
static void
guard_comment(CommentStmt *stmt, Oid nsp)
{
	List	   *names;
	RangeVar   *rv;

	switch (stmt->objtype)
	{
		case OBJECT_TABLE:
		case OBJECT_VIEW:
		case OBJECT_SEQUENCE:
		case OBJECT_INDEX:
		case OBJECT_MATVIEW:
		case OBJECT_FOREIGN_TABLE:
			names = castNode(List, stmt->object);
			break;
		case OBJECT_COLUMN:
			names = castNode(List, stmt->object);
			if (list_length(names) < 2)
				return;
			names = list_truncate(list_copy(names), list_length(names) - 1);
			break;
		default:
			return;
	}
	rv = makeRangeVarFromNameList(names);
	guard_require_owner(rv, nsp, "COMMENT", "SHARE UPDATE EXCLUSIVE");
	/* The command reads its name list, not rv: pin the list too. */
	if (rv->schemaname != NULL && list_length(names) == 1)
		stmt->object = (Node *) lcons(makeString(rv->schemaname), castNode(List, stmt->object));
}

/*
 * Whether durable_ddl_guard looks at `parsetree`, and may write to it: the
 * utility hook gives it a copy when the tree is read-only (a cached plan's).
 */
bool
durable_ddl_guard_applies(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_RuleStmt:
		case T_CreateTrigStmt:
		case T_AlterObjectDependsStmt:
		case T_CreateStmt:
		case T_CreateForeignTableStmt:
		case T_AlterTableStmt:
		case T_CreateStatsStmt:
		case T_CommentStmt:
		case T_AlterDomainStmt:
		case T_AlterSeqStmt:
		case T_AlterOwnerStmt:
		case T_DropStmt:
		case T_RenameStmt:
		case T_AlterObjectSchemaStmt:
		case T_AlterFunctionStmt:
		case T_CreateFunctionStmt:
		case T_ViewStmt:
		case T_AlterExtensionContentsStmt:
			return true;
		default:
			return false;
	}
}

/*
 * Refuse `parsetree` before it runs if it is one of the commands of the
 * file header; called by the utility hook, with a tree it may write to
 * (top_level: the statement is not run by a function).
 */
void
durable_ddl_guard(Node *parsetree, bool top_level)
{
	Oid			nsp;
	ListCell   *lc;

	if (!durable_ddl_guard_applies(parsetree))
		return;
	/* A schema named durable without the extension is somebody else's. */
	if (!OidIsValid(get_extension_oid("durable", true)))
		return;
	nsp = get_namespace_oid("durable", true);
	if (!OidIsValid(nsp))
		return;

	switch (nodeTag(parsetree))
	{
		case T_RuleStmt:
			guard_require_owner(((RuleStmt *) parsetree)->relation, nsp,
								"CREATE RULE", "ACCESS EXCLUSIVE");
			guard_rule(((RuleStmt *) parsetree)->relation, nsp);
			break;
		case T_CreateTrigStmt:
			guard_require_privilege(((CreateTrigStmt *) parsetree)->relation, nsp, ACL_TRIGGER,
									"CREATE TRIGGER", "SHARE ROW EXCLUSIVE");
			guard_create_trigger((CreateTrigStmt *) parsetree, nsp);
			break;
		case T_AlterFunctionStmt:
			guard_alter_function((AlterFunctionStmt *) parsetree, nsp);
			break;
		case T_CreateFunctionStmt:
			guard_replace_function((CreateFunctionStmt *) parsetree, nsp);
			break;
		case T_ViewStmt:
			guard_replace_view((ViewStmt *) parsetree, nsp);
			break;
		case T_AlterExtensionContentsStmt:
			guard_extension_contents((AlterExtensionContentsStmt *) parsetree);
			break;
		case T_CreateStmt:
			guard_create_table((CreateStmt *) parsetree, nsp);
			break;
		case T_CreateForeignTableStmt:
			guard_create_table(&((CreateForeignTableStmt *) parsetree)->base, nsp);
			break;
		case T_AlterTableStmt:
			guard_alter_table((AlterTableStmt *) parsetree, nsp);
			break;
		case T_CreateStatsStmt:
			foreach(lc, ((CreateStatsStmt *) parsetree)->relations)
			{
				if (IsA(lfirst(lc), RangeVar))
					guard_require_owner(lfirst_node(RangeVar, lc), nsp,
										"CREATE STATISTICS", "SHARE UPDATE EXCLUSIVE");
			}
			break;
		case T_CommentStmt:
			guard_comment((CommentStmt *) parsetree, nsp);
			break;
		case T_AlterDomainStmt:
			guard_alter_domain((AlterDomainStmt *) parsetree, nsp);
			break;
		case T_AlterSeqStmt:
			guard_alter_sequence((AlterSeqStmt *) parsetree, nsp, top_level);
			break;
		case T_AlterOwnerStmt:
			guard_alter_owner((AlterOwnerStmt *) parsetree, nsp);
			break;
		case T_DropStmt:
			guard_drop_durable((DropStmt *) parsetree, nsp);
			break;
		case T_RenameStmt:
			guard_rename_schema((RenameStmt *) parsetree, nsp);
			guard_rename_member((RenameStmt *) parsetree, nsp);
			break;
		case T_AlterObjectSchemaStmt:
			guard_set_schema_member((AlterObjectSchemaStmt *) parsetree, nsp);
			break;
		case T_AlterObjectDependsStmt:
			if (((AlterObjectDependsStmt *) parsetree)->relation != NULL)
				guard_require_owner(((AlterObjectDependsStmt *) parsetree)->relation, nsp,
									"ALTER ... DEPENDS ON EXTENSION", "ACCESS EXCLUSIVE");
			guard_depends_on_durable((AlterObjectDependsStmt *) parsetree);
			break;
		default:
			break;
	}
}
