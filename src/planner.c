/*-------------------------------------------------------------------------
 *
 * planner.c
 *		durable's statements are planned for a journal of any size.
 *
 * Each statement durable runs through SPI is prepared once per backend,
 * with a generic plan (durable_plan in spi_util.c) that the backend keeps
 * until a relcache invalidation of one of its tables: DDL, or a VACUUM or
 * ANALYZE that changes the table's statistics.  The planner costs that
 * plan for the table as it is when the plan is built.  A journal of a
 * page or two -- after CREATE EXTENSION, or in a quiet database whose
 * purge keeps it small -- is cheaper to read whole than through an index,
 * and the plan that reads it whole was kept when the journal grew: a
 * backlog that builds up after an outage was read whole by every
 * inbox_fail(), every instance_start(), every sweep of a long-lived
 * backend or worker, until autovacuum got to the table (never, with
 * autovacuum busy elsewhere or off for the table).
 *
 * So durable's statements are planned for a table of production size:
 *
 * - with sequential and bitmap scans turned off (enable_seqscan and
 *   enable_bitmapscan, as if SET for their planning alone).  Each statement
 *   is written for one index path; a bitmap scan reads every row that
 *   matches before it sorts, and in a claim's or the sweep's ORDER BY ...
 *   LIMIT that is the whole backlog.  A statement with no index path still
 *   gets its sequential scan (the planner only costs it higher);
 * - with each of durable's tables taken to hold at least PLAN_FLOOR_TUPLES
 *   rows on PLAN_FLOOR_PAGES pages (get_relation_info_hook), its full
 *   indexes as many entries.  Without it, a join of a one-page journal
 *   with the records a call names (the batch inbox_complete's unnest of
 *   ids) read the journal's whole primary key as the outer side, once per
 *   call, where an index probe per id is wanted.  Partial indexes keep
 *   their own size: they hold the open records, few next to the rest.
 *
 * On a journal of a page the index paths cost a few microseconds more.
 *
 * durable's statements are told apart as generic plans
 * (CURSOR_OPT_GENERIC_PLAN, which only an SPI caller that asks gets: not
 * PL/pgSQL, not the RI triggers, not a client's PREPARE) that read a
 * relation in schema durable.  What such a plan runs when it executes (RI
 * queries, triggers) is planned as usual.
 *
 * IDENTIFICATION
 *	  src/planner.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/plancat.h"
#include "optimizer/planner.h"
#include "utils/lsyscache.h"

#include "durable.h"

/* The least size durable's statements are planned for, per table. */
#define PLAN_FLOOR_TUPLES	1000000.0
#define PLAN_FLOOR_PAGES	10000
/* (a btree of one int8 key holds some 300 entries a page) */
#define PLAN_FLOOR_INDEX_PAGES	3500

static planner_hook_type prev_planner_hook = NULL;
static get_relation_info_hook_type prev_get_relation_info_hook = NULL;

/* While one of durable's statements is planned: schema durable's OID. */
static Oid	planner_durable_namespace = InvalidOid;

/* Whether node, or a query below it, reads a relation in namespace *context. */
static bool
planner_reads_namespace(Node *node, void *context)
{
	Oid			namespace = *(Oid *) context;

	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		/* (false goes on to the subquery of an RTE_SUBQUERY) */
		return rte->rtekind == RTE_RELATION && get_rel_namespace(rte->relid) == namespace;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, planner_reads_namespace, context,
								 QTW_EXAMINE_RTES_BEFORE);
	return expression_tree_walker(node, planner_reads_namespace, context);
}

/* Schema durable's OID when parse is one of durable's statements, else InvalidOid. */
static Oid
planner_durables_namespace(Query *parse, int cursorOptions)
{
	Oid			namespace;

	if ((cursorOptions & CURSOR_OPT_GENERIC_PLAN) == 0)
		return InvalidOid;
	namespace = get_namespace_oid("durable", true);
	if (OidIsValid(namespace) && planner_reads_namespace((Node *) parse, &namespace))
		return namespace;
	return InvalidOid;
}

static PlannedStmt *
planner_plan(Query *parse, const char *query_string, int cursorOptions, ParamListInfo boundParams)
{
	return prev_planner_hook
		? prev_planner_hook(parse, query_string, cursorOptions, boundParams)
		: standard_planner(parse, query_string, cursorOptions, boundParams);
}

static PlannedStmt *
planner_durable(Query *parse, const char *query_string, int cursorOptions, ParamListInfo boundParams)
{
	bool		saved_seqscan = enable_seqscan;
	bool		saved_bitmapscan = enable_bitmapscan;
	Oid			saved_namespace = planner_durable_namespace;
	Oid			namespace = planner_durables_namespace(parse, cursorOptions);
	PlannedStmt *result = NULL;

	if (!OidIsValid(namespace))
		return planner_plan(parse, query_string, cursorOptions, boundParams);

	enable_seqscan = false;
	enable_bitmapscan = false;
	planner_durable_namespace = namespace;
	PG_TRY();
	{
		result = planner_plan(parse, query_string, cursorOptions, boundParams);
	}
	PG_FINALLY();
	{
		enable_seqscan = saved_seqscan;
		enable_bitmapscan = saved_bitmapscan;
		planner_durable_namespace = saved_namespace;
	}
	PG_END_TRY();
	return result;
}

/*
 * A table of durable's, in one of durable's statements, is taken to be at
 * least PLAN_FLOOR_TUPLES rows, and its full indexes as many entries.
 */
static void
planner_floor_size(PlannerInfo *root, Oid relationObjectId, bool inhparent, RelOptInfo *rel)
{
	ListCell   *lc;

	if (prev_get_relation_info_hook)
		prev_get_relation_info_hook(root, relationObjectId, inhparent, rel);
	if (!OidIsValid(planner_durable_namespace) || rel->tuples >= PLAN_FLOOR_TUPLES ||
		get_rel_namespace(relationObjectId) != planner_durable_namespace)
		return;
	rel->tuples = PLAN_FLOOR_TUPLES;
	rel->pages = Max(rel->pages, PLAN_FLOOR_PAGES);
	foreach(lc, rel->indexlist)
	{
		IndexOptInfo *index = (IndexOptInfo *) lfirst(lc);

		if (index->indpred != NIL)
			continue;
		index->tuples = rel->tuples;
		index->pages = Max(index->pages, PLAN_FLOOR_INDEX_PAGES);
	}
}

void
durable_planner_install_hook(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = planner_durable;
	prev_get_relation_info_hook = get_relation_info_hook;
	get_relation_info_hook = planner_floor_size;
}
