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
 * A role granted REFERENCES on a journal could so make itself superuser.
 * Hence:
 *	- a key with a delete action (CASCADE, SET NULL, SET DEFAULT) from a
 *	  table owned by neither a superuser nor the journal's owner stops
 *	  durable from deleting that journal's records (durable_fk_unsafe_action);
 *	  skipping only the records it references would not do, since a row
 *	  committed after the purge's snapshot is cascaded to all the same;
 *	- the purge's guards (durable_fk_guards) compare a referencing column
 *	  with the journal's key only when the column's type is built in (or a
 *	  domain over one), as those comparisons and casts are all
 *	  PostgreSQL's own: an implicit cast of the referencing role's own type
 *	  would run its function as durable's owner.  A key without a guard
 *	  makes the records it references fail their delete (23503, raised by
 *	  the RI check, which runs as the referencing table's owner), and the
 *	  purge passes over them (isolate.c).
 *
 * IDENTIFICATION
 *	  src/references.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/transam.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"

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


/*
 * The first foreign key that references `journal` (schema-qualified) with a
 * delete action from a table owned by neither a superuser nor the journal's
 * owner, as "foreign key \"k\" of table t (owned by r)" (palloc'd), or NULL
 * when there is none: durable does not delete that journal's records (see
 * the file header).  The journal is locked first as a delete locks it (ROW
 * EXCLUSIVE, until the transaction ends), which keeps another such key from
 * being added (its ALTER TABLE takes SHARE ROW EXCLUSIVE on the journal)
 * before the caller's delete.  Caller must be connected to SPI.
 */
char *
durable_fk_unsafe_action(const char *journal)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[1] = {TEXTOID};
	const char *dot = strchr(journal, '.');
	Datum		values[1];
	char	   *found = NULL;

	Assert(dot != NULL);
	(void) RangeVarGetRelid(makeRangeVar(pnstrdup(journal, dot - journal), pstrdup(dot + 1), -1),
							RowExclusiveLock, false);
	values[0] = CStringGetTextDatum(journal);
	durable_exec(durable_plan(&plan,
							  "SELECT pg_catalog.format('foreign key %I of table %s (owned by %I)',"
							  "                         k.conname, k.conrelid::pg_catalog.regclass, r.rolname)"
							  "  FROM pg_catalog.pg_constraint k"
							  "  JOIN pg_catalog.pg_class t ON t.oid = k.conrelid"
							  "  JOIN pg_catalog.pg_roles r ON r.oid = t.relowner"
							  " WHERE k.contype = 'f' AND k.confrelid = $1::pg_catalog.regclass"
							  "   AND k.confdeltype <> ALL (ARRAY['a', 'r']::pg_catalog.\"char\"[])"
							  "   AND NOT r.rolsuper"
							  "   AND t.relowner <> (SELECT j.relowner FROM pg_catalog.pg_class j"
							  "                       WHERE j.oid = $1::pg_catalog.regclass)"
							  " ORDER BY k.oid LIMIT 1",
							  1, types),
				 values, NULL, SPI_OK_SELECT, 0);
	if (SPI_processed > 0)
		found = TextDatumGetCString(durable_col_copy(0, 1));
	SPI_freetuptable(SPI_tuptable);
	return found;
}
