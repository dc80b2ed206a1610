/*-------------------------------------------------------------------------
 *
 * direct.c
 *		The journals read and written without the executor, on the paths
 *		every message takes: the per-chat probes, the fencing token, the
 *		inserts of inbox_admit and outbox_begin, the claims' leases, the
 *		fenced confirmations inbox_complete and outbox_sent, and the
 *		retention purge.
 *
 * An SPI statement costs an executor start and end, a plan-cache check and
 * the opening of every index of its table, whatever it does.  The bot path
 * (inbox_admit with an instance, then inbox_complete) asks one question per
 * call that needs none of it: is there an open record in this chat (any,
 * or after a given id)?  Asked inside the admit's INSERT and the complete's
 * RETURNING, the question's sub-plan cost as much to start as to run
 * (measured with perf: 15 % of the complete's CPU).  Here it is one
 * btree descent of inbox_chat_unfinished_idx with the snapshot an SPI
 * statement would take at this point (the admit; under REPEATABLE READ and
 * SERIALIZABLE the latest snapshot, see durable_inbox_chat_has_open), or, for
 * the complete, a snapshot taken after its update (a later record of the
 * chat committed meanwhile must be woken too).  outbox_sent asks the
 * outbox's version of it (a later send of the chat waiting to be sent) on
 * outbox_chat_unfinished_idx.
 *
 * The confirmations are one fenced UPDATE by primary key each, whose
 * executor start, plan-cache check and end cost about as much as finding
 * and changing the row (perf: a third of inbox_complete).  Here they find
 * the row through the primary key with the snapshot SPI would take, check
 * the fence (token and state) on the visible version, and update it with
 * table_tuple_update as ExecUpdate does, waiting for a concurrent writer.
 * When that writer committed an update first, READ COMMITTED does what
 * EvalPlanQual does for the SQL statement: lock the newest version, check
 * the fence on it again, and update it if it still holds; REPEATABLE READ
 * and SERIALIZABLE raise a serialization failure.  The new index entries
 * (the update is never HOT: it takes the record out of the open-records
 * indexes) go in with index_insert, for every index the new version
 * belongs in, with the unique check ExecInsertIndexTuples would make,
 * except where neither the key nor the predicate's columns changed: the
 * entry's key is then already unique (direct_unique_check_needed).
 *
 * The claims walk their journal's open index (inbox_unfinished_idx,
 * outbox_waiting_idx) in id order, lock what is claimable as FOR NO KEY
 * UPDATE SKIP LOCKED would (FOR UPDATE's lock when the lease changes a
 * key: direct_update_lock_mode), and lease it with table_tuple_update
 * (direct_claim).
 *
 * The inserts are ExecInsert's speculative insertion for ON CONFLICT DO
 * NOTHING (direct_insert), and the purge a walk of the finish-time index
 * deleting what is old enough without waiting (direct_purge).  The index
 * descriptions every write needs are kept per backend (DirectIndexes).
 *
 * The journals have no constraints these writes could break or row
 * security; durable's own functions are their only writers, and triggers
 * added by hand that would fire are refused rather than skipped (the
 * purge, whose DELETE triggers are a referencing foreign key's, runs the
 * statement instead).
 *
 * The OIDs of durable's relations are looked up once per backend and
 * forgotten when a relcache invalidation names one of them (the extension
 * dropped and created again, say).  Each index looked up by name is
 * checked then against the definition the install script gives it
 * (DirectIndexDef): the scans and inserts rely on its key columns, its
 * uniqueness and its predicate.
 *
 * IDENTIFICATION
 *	  src/direct.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/relation.h"
#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_sequence.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_clause.h"
#include "parser/parse_coerce.h"
#include "parser/parse_collate.h"
#include "parser/parser.h"
#include "utils/memutils.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "tcop/utility.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

/* A journal's columns that the claim and the confirmations read or write. */
typedef struct DirectCols
{
	AttrNumber	id;
	AttrNumber	chat_id;
	AttrNumber	state;
	AttrNumber	token;
	AttrNumber	lease_until;
	AttrNumber	not_before;
	AttrNumber	attempts;
	AttrNumber	owner;
	AttrNumber	finished_at;	/* inbox: finished_at, done_at and sends */
	AttrNumber	done_at;
	AttrNumber	sends;
	AttrNumber	sent_at;		/* outbox: sent_at and provider_message_id */
	AttrNumber	provider_message_id;
} DirectCols;

/*
 * The columns the direct inserts write, in the order of their values; any
 * other column must be one INSERT would fill with NULL.
 */
static const char *const direct_new_send_cols[] = {
	"id", "key", "chat_id", "payload", "state", "attempts", "token", "owner",
	"lease_until", "not_before", "inbound_id", "created_at"
};
#define DIRECT_NEW_SEND_NCOLS lengthof(direct_new_send_cols)

static const char *const direct_new_message_cols[] = {
	"id", "source", "message_id", "content_hash", "chat_id", "kind", "payload",
	"state", "attempts", "token", "owner", "lease_until", "not_before",
	"created_at", "sends"
};
#define DIRECT_NEW_MESSAGE_NCOLS lengthof(direct_new_message_cols)

/* inbox_claim's and outbox_claim's result columns, in their order. */
static const char *const direct_claimed_cols[] = {
	"id", "token", "source", "message_id", "chat_id", "kind", "payload", "attempts"
};
StaticAssertDecl(lengthof(direct_claimed_cols) == DURABLE_CLAIMED_NCOLS,
				 "inbox_claim's result columns");
static const char *const direct_claimed_send_cols[] = {
	"key", "token", "chat_id", "payload", "attempts"
};
StaticAssertDecl(lengthof(direct_claimed_send_cols) == DURABLE_CLAIMED_SEND_NCOLS,
				 "outbox_claim's result columns");

/* Is this version of a record claimable, by its own columns? */
typedef bool (*DirectClaimable) (TupleTableSlot *version, const DirectCols *cols,
								 const DurableClaim *claim);

/* A journal's claim: what inbox_claim and outbox_claim do differently. */
typedef struct DirectClaimQueue
{
	Oid			heap;
	Oid			open_idx;		/* the scan, in id order, of what may be claimable */
	Oid			chat_idx;		/* per-chat order: (chat_id, id) of unfinished records */
	const DirectCols *cols;
	DirectClaimable claimable;
	const char *leased_state;	/* the state a lease sets */
	const AttrNumber *claimed_att;	/* the result columns */
	int			nclaimed;
} DirectClaimQueue;

static bool direct_inbox_claimable(TupleTableSlot *version, const DirectCols *cols,
								   const DurableClaim *claim);
static bool direct_outbox_claimable(TupleTableSlot *version, const DirectCols *cols,
									const DurableClaim *claim);

/* durable's relations used here; valid until an invalidation names one. */
typedef struct DirectRels
{
	bool		valid;
	Oid			inbox;
	Oid			inbox_pkey;
	Oid			inbox_chat_idx; /* inbox_chat_unfinished_idx (chat_id, id) */
	Oid			inbox_open_idx; /* inbox_unfinished_idx (id): the claim's scan */
	Oid			inbox_message_id_key;	/* the dedupe keys */
	Oid			inbox_content_hash_key;
	Oid			inbox_id_seq;
	Oid			inbox_done_at_idx;	/* the retention purge's indexes */
	DirectCols	inbox_cols;
	AttrNumber	new_message_att[DIRECT_NEW_MESSAGE_NCOLS];
	AttrNumber	claimed_att[DURABLE_CLAIMED_NCOLS];
	Oid			outbox;
	Oid			outbox_pkey;
	Oid			outbox_chat_idx;	/* outbox_chat_unfinished_idx (chat_id, id) */
	Oid			outbox_open_idx;	/* outbox_waiting_idx (id): the claim's scan */
	Oid			outbox_id_seq;
	Oid			outbox_sent_at_idx;
	DirectCols	outbox_cols;
	AttrNumber	new_send_att[DIRECT_NEW_SEND_NCOLS];
	AttrNumber	claimed_send_att[DURABLE_CLAIMED_SEND_NCOLS];
	Oid			token_seq;
	DirectClaimQueue claims[DQ_NUM_QUEUES]; /* each queue's claim, over the above */
	/* each journal's indexes looked up and checked (direct_journal_rels) */
	bool		indexes_checked[DQ_NUM_QUEUES];
} DirectRels;

static DirectRels direct_rels_cache;
static bool direct_callback_registered = false;

static bool direct_fk_key_fixed(Relation rel, Oid conoid);

/*
 * Foreign keys that reference a journal by columns the direct updates never
 * change (direct_fk_key_fixed), so that skipping their checks is right;
 * forgotten with the relation cache.
 */
#define DIRECT_MAX_FIXED_FKS 16
static Oid	direct_fixed_fks[DIRECT_MAX_FIXED_FKS];
static int	direct_nfixed_fks = 0;

/*
 * Counts relcache invalidations.  Building a cache reads the catalogs and
 * opens relations, which processes invalidations: a cache is marked valid
 * only if none arrived while it was built, else one that named it would
 * be lost.
 */
static uint64 direct_invalidations = 0;

/* The most indexes a journal may have for its descriptions to be kept. */
#define DIRECT_MAX_INDEXES 16

/*
 * A journal's index descriptions for the direct writes, kept for the
 * backend's life instead of being built for every write as ExecOpenIndices
 * does: building them and compiling the partial indexes' predicates
 * (ExecPrepareQual) cost a fifth of a direct write (perf).  Kept only for
 * btree indexes on plain columns, whose descriptions hold nothing that
 * lives with a statement; otherwise every write builds them.  Forgotten
 * when an invalidation names the journal or one of its indexes, and looked
 * at only once the journal is locked, when ExecOpenIndices would read the
 * index list.
 */
typedef struct DirectIndexes
{
	Oid			heap;
	bool		valid;
	bool		kept;			/* false: use ExecOpenIndices */
	int			n;
	bool		plain;			/* no exclusion constraint, no deferrable unique */
	Oid			oids[DIRECT_MAX_INDEXES];
	IndexInfo  *infos[DIRECT_MAX_INDEXES];
	/* a unique index's key and predicate columns (pull_varattnos offsets) */
	Bitmapset  *unique_attrs[DIRECT_MAX_INDEXES];
	MemoryContext cxt;
} DirectIndexes;

static DirectIndexes direct_inbox_indexes;
static DirectIndexes direct_outbox_indexes;

/*
 * Whether a journal has a column whose type INSERT consults when it is given
 * no value for it, one added by hand (durable's own are of base types
 * without a default: direct_attnum): a domain (its default, else its NOT
 * NULL and CHECK constraints on the NULL), or a type with a default of its
 * own (CREATE TYPE ... DEFAULT).  The direct inserts apply what INSERT
 * would to such a column's NULL (direct_check_type_null).  Forgotten when
 * an invalidation names the journal: a column's type changes only by
 * ALTER TABLE, and a base type's default only with the type.  What the
 * type allows is looked up at every insert instead: ALTER DOMAIN
 * invalidates no relation.
 */
typedef struct DirectTypeCols
{
	Oid			heap;
	bool		valid;
	bool		any;
} DirectTypeCols;

static DirectTypeCols direct_type_cols[2];	/* inbox, outbox */

static void
direct_indexes_invalidate(DirectIndexes *di, Oid relid)
{
	int			i;

	if (!OidIsValid(relid) || relid == di->heap)
		di->valid = false;
	for (i = 0; i < di->n; i++)
		if (relid == di->oids[i])
			di->valid = false;
}

static void
direct_invalidate(Datum arg, Oid relid)
{
	direct_invalidations++;
	direct_indexes_invalidate(&direct_inbox_indexes, relid);
	direct_indexes_invalidate(&direct_outbox_indexes, relid);
	for (int i = 0; i < lengthof(direct_type_cols); i++)
		if (!OidIsValid(relid) || relid == direct_type_cols[i].heap)
			direct_type_cols[i].valid = false;
	if (!OidIsValid(relid) ||
		relid == direct_rels_cache.inbox ||
		relid == direct_rels_cache.inbox_pkey ||
		relid == direct_rels_cache.inbox_chat_idx ||
		relid == direct_rels_cache.inbox_open_idx ||
		relid == direct_rels_cache.inbox_message_id_key ||
		relid == direct_rels_cache.inbox_content_hash_key ||
		relid == direct_rels_cache.inbox_id_seq ||
		relid == direct_rels_cache.inbox_done_at_idx ||
		relid == direct_rels_cache.outbox_sent_at_idx ||
		relid == direct_rels_cache.outbox ||
		relid == direct_rels_cache.outbox_pkey ||
		relid == direct_rels_cache.outbox_chat_idx ||
		relid == direct_rels_cache.outbox_open_idx ||
		relid == direct_rels_cache.outbox_id_seq ||
		relid == direct_rels_cache.token_seq)
	{
		direct_rels_cache.valid = false;
		direct_nfixed_fks = 0;
	}
}

/* A change of any sequence's options (pg_sequence): look durable's up again. */
static void
direct_sequence_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	direct_invalidations++;
	direct_rels_cache.valid = false;
}

/*
 * Refuse durable's sequence `relid` unless it has the options the install
 * script gives it: no cache, no cycle, an increment of 1 or more (of 1 for
 * token_seq, `fencing`), bigint's range from 1.  A chat's records are taken
 * in the order of their ids and a token must never come again; a cache
 * (each backend draws from a range of its own, so a later admit can get a
 * lower id), a cycle or a decreasing increment breaks that without an
 * error, and a larger one the start-up lift of token_seq (token.c).  The DDL guard refuses such an
 * ALTER SEQUENCE, and moving the sequence out of the schema and back, but
 * not another sequence put under the name.
 */
static void
direct_check_sequence(Oid relid, bool fencing)
{
	HeapTuple	tup = SearchSysCache1(SEQRELID, ObjectIdGetDatum(relid));
	Form_pg_sequence seq;
	bool		as_created;

	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"durable.%s\" is not a sequence", get_rel_name(relid)),
				 errhint(DURABLE_DAMAGED_HINT)));
	seq = (Form_pg_sequence) GETSTRUCT(tup);
	as_created = seq->seqcache == 1 && !seq->seqcycle && (fencing ? seq->seqincrement == 1 : seq->seqincrement >= 1) &&
		seq->seqtypid == INT8OID && seq->seqmin == 1 && seq->seqmax == PG_INT64_MAX;
	ReleaseSysCache(tup);
	if (!as_created)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("sequence \"durable.%s\" does not have the options durable created",
						get_rel_name(relid)),
				 errdetail("durable orders each chat's records by their ids and fences leases by their tokens: its sequences keep no cache, never cycle, only increase (token_seq by 1), and have bigint's range."),
				 errhint("ALTER SEQUENCE durable.%s AS bigint INCREMENT 1 NO MINVALUE NO MAXVALUE CACHE 1 NO CYCLE.",
						 get_rel_name(relid))));
}

static Oid
direct_relid(const char *name, Oid nsp)
{
	Oid			relid = get_relname_relid(name, nsp);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("relation \"durable.%s\" does not exist", name),
				 errhint(DURABLE_DAMAGED_HINT)));
	return relid;
}

/*
 * Every column of the journals as durable's scripts define it.  The direct
 * code forms and reads tuples with raw values of these types, so a column
 * of another type (changed by hand) would be misread or, worse, hold a
 * value its type cannot: refused when the columns are looked up.  The DDL
 * guard lets a column be given back what is defined here.
 */
static const DurableJournalColumn direct_journal_columns[] = {
	/* table, name, type, COLLATE "C", NOT NULL, default */
	{"inbox", "id", INT8OID, false, true, true},
	{"inbox", "source", TEXTOID, true, true, false},
	{"inbox", "message_id", TEXTOID, true, false, false},
	{"inbox", "content_hash", BYTEAOID, false, false, false},
	{"inbox", "chat_id", TEXTOID, true, true, false},
	{"inbox", "kind", TEXTOID, false, true, false},
	{"inbox", "payload", JSONBOID, false, true, false},
	{"inbox", "state", TEXTOID, false, true, false},
	{"inbox", "attempts", INT4OID, false, true, true},
	{"inbox", "token", INT8OID, false, false, false},
	{"inbox", "owner", TEXTOID, false, false, false},
	{"inbox", "lease_until", TIMESTAMPTZOID, false, false, false},
	{"inbox", "not_before", TIMESTAMPTZOID, false, true, false},
	{"inbox", "error", TEXTOID, false, false, false},
	{"inbox", "created_at", TIMESTAMPTZOID, false, true, false},
	{"inbox", "done_at", TIMESTAMPTZOID, false, false, false},
	{"inbox", "sends", INT4OID, false, true, true},
	{"inbox", "finished_at", TIMESTAMPTZOID, false, false, false},
	{"outbox", "key", TEXTOID, true, true, false},
	{"outbox", "chat_id", TEXTOID, true, true, false},
	{"outbox", "payload", JSONBOID, false, true, false},
	{"outbox", "state", TEXTOID, false, true, false},
	{"outbox", "attempts", INT4OID, false, true, true},
	{"outbox", "token", INT8OID, false, false, false},
	{"outbox", "owner", TEXTOID, false, false, false},
	{"outbox", "lease_until", TIMESTAMPTZOID, false, false, false},
	{"outbox", "not_before", TIMESTAMPTZOID, false, true, false},
	{"outbox", "provider_message_id", TEXTOID, false, false, false},
	{"outbox", "error", TEXTOID, false, false, false},
	{"outbox", "inbound_id", INT8OID, false, false, false},
	{"outbox", "created_at", TIMESTAMPTZOID, false, true, false},
	{"outbox", "sent_at", TIMESTAMPTZOID, false, false, false},
	{"outbox", "id", INT8OID, false, true, true},
};

const DurableJournalColumn *
durable_journal_column(Oid relid, const char *name)
{
	bool		journal;
	const char *table;
	int			i;

	(void) durable_journal_column_changes(relid, NULL, &journal);
	if (!journal)
		return NULL;
	table = get_rel_name(relid);
	for (i = 0; i < lengthof(direct_journal_columns); i++)
		if (strcmp(direct_journal_columns[i].table, table) == 0 &&
			strcmp(direct_journal_columns[i].name, name) == 0)
			return &direct_journal_columns[i];
	return NULL;
}

static AttrNumber
direct_attnum(Oid relid, const char *name)
{
	AttrNumber	attnum = get_attnum(relid, name);
	const DurableJournalColumn *col = durable_journal_column(relid, name);
	Oid			type;
	int32		typmod;
	Oid			collation;

	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						name, get_rel_name(relid)),
				 errhint(DURABLE_DAMAGED_HINT)));
	if (col == NULL)
		elog(ERROR, "durable: no type known for journal column \"%s\"", name);
	get_atttypetypmodcoll(relid, attnum, &type, &typmod, &collation);
	if (type != col->type || typmod != -1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("column \"%s\" of \"durable.%s\" has type %s, not %s",
						name, get_rel_name(relid), format_type_with_typemod(type, typmod),
						format_type_be(col->type)),
				 errdetail("durable reads and writes its journals' columns as the types it created them with."),
				 errhint("Change the column back: ALTER TABLE durable.%s ALTER COLUMN %s TYPE %s%s.",
						 get_rel_name(relid), name, format_type_be(col->type),
						 col->c_collated ? " COLLATE \"C\"" : "")));
	return attnum;
}

/* The columns both journals have. */
static void
direct_common_cols(Oid relid, DirectCols *cols)
{
	cols->id = direct_attnum(relid, "id");
	cols->chat_id = direct_attnum(relid, "chat_id");
	cols->state = direct_attnum(relid, "state");
	cols->token = direct_attnum(relid, "token");
	cols->lease_until = direct_attnum(relid, "lease_until");
	cols->not_before = direct_attnum(relid, "not_before");
	cols->attempts = direct_attnum(relid, "attempts");
	cols->owner = direct_attnum(relid, "owner");
}

static void
direct_attnums(Oid relid, const char *const *names, int n, AttrNumber *atts)
{
	int			i;

	for (i = 0; i < n; i++)
		atts[i] = direct_attnum(relid, names[i]);
}

/*
 * The indexes of durable's that the direct code opens by the OID of their
 * name, with the definition the install script gives each.  The scans and
 * inserts rely on it: the claim walks its open index in id order with an
 * int8 key, the per-chat probes descend (chat_id, id) with a text and an
 * int8 key, the inserts take the dedupe key or the primary key as their
 * arbiter.  Another index under the name (made by hand) would be read with
 * keys of the wrong type, which crashes the backend, or answer wrongly
 * (two records of one chat leased at once, a chat blocked for good), so
 * its definition is checked when its name is looked up
 * (direct_index_relid, direct_index_renamed).
 */
typedef struct DirectIndexDef
{
	const char *name;
	size_t		field;			/* its OID in DirectRels */
	DurableQueue journal;
	bool		unique;
	int			nkeys;
	const char *keys[2];		/* the key columns, in order */
	const char *predicate;		/* search_path-proof WHERE clause; NULL: none */
	const char *create;			/* what creates it, for the hint */
} DirectIndexDef;

#define DIRECT_INBOX_INDEX(field) offsetof(DirectRels, field), DQ_INBOX
#define DIRECT_OUTBOX_INDEX(field) offsetof(DirectRels, field), DQ_OUTBOX

static const DirectIndexDef direct_named_indexes[] = {
	{"inbox_pkey", DIRECT_INBOX_INDEX(inbox_pkey), true, 1, {"id"}, NULL,
	"ALTER TABLE durable.inbox ADD CONSTRAINT inbox_pkey PRIMARY KEY (id)"},
	{"inbox_chat_unfinished_idx", DIRECT_INBOX_INDEX(inbox_chat_idx), false, 2, {"chat_id", "id"},
		"finished_at IS NULL",
	"CREATE INDEX inbox_chat_unfinished_idx ON durable.inbox (chat_id, id) WHERE finished_at IS NULL"},
	{"inbox_unfinished_idx", DIRECT_INBOX_INDEX(inbox_open_idx), false, 1, {"id"},
		"finished_at IS NULL AND id OPERATOR(pg_catalog.>) 0",
	"CREATE INDEX inbox_unfinished_idx ON durable.inbox (id) WHERE finished_at IS NULL AND id OPERATOR(pg_catalog.>) 0"},
	{"inbox_source_message_id_key", DIRECT_INBOX_INDEX(inbox_message_id_key), true, 2,
		{"source", "message_id"}, "message_id IS NOT NULL",
	"CREATE UNIQUE INDEX inbox_source_message_id_key ON durable.inbox (source, message_id) WHERE message_id IS NOT NULL"},
	{"inbox_source_content_hash_key", DIRECT_INBOX_INDEX(inbox_content_hash_key), true, 2,
		{"source", "content_hash"}, "message_id IS NULL",
	"CREATE UNIQUE INDEX inbox_source_content_hash_key ON durable.inbox (source, content_hash) WHERE message_id IS NULL"},
	{"inbox_done_at_idx", DIRECT_INBOX_INDEX(inbox_done_at_idx), false, 1, {"done_at"},
		"done_at IS NOT NULL",
	"CREATE INDEX inbox_done_at_idx ON durable.inbox (done_at) WHERE done_at IS NOT NULL"},
	{"outbox_pkey", DIRECT_OUTBOX_INDEX(outbox_pkey), true, 1, {"key"}, NULL,
	"ALTER TABLE durable.outbox ADD CONSTRAINT outbox_pkey PRIMARY KEY (key)"},
	{"outbox_chat_unfinished_idx", DIRECT_OUTBOX_INDEX(outbox_chat_idx), false, 2, {"chat_id", "id"},
		"state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'sending', 'failed']::pg_catalog.text[])",
	"CREATE INDEX outbox_chat_unfinished_idx ON durable.outbox (chat_id, id) WHERE state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'sending', 'failed']::pg_catalog.text[])"},
	{"outbox_waiting_idx", DIRECT_OUTBOX_INDEX(outbox_open_idx), false, 1, {"id"},
		"state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'failed']::pg_catalog.text[])",
	"CREATE INDEX outbox_waiting_idx ON durable.outbox (id) WHERE state OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'failed']::pg_catalog.text[])"},
	{"outbox_sent_at_idx", DIRECT_OUTBOX_INDEX(outbox_sent_at_idx), false, 1, {"sent_at"},
		"state OPERATOR(pg_catalog.=) 'sent'",
	"CREATE INDEX outbox_sent_at_idx ON durable.outbox (sent_at) WHERE state OPERATOR(pg_catalog.=) 'sent'"},
};

/* The OID at offset `field` of the relations `r`. */
static Oid *
direct_rels_oid(DirectRels *r, size_t field)
{
	return (Oid *) ((char *) r + field);
}

/*
 * The parser's hook for the column references of an expected predicate:
 * the journal's columns (`p_ref_hook_state`), as the Vars of varno 1 that
 * CREATE INDEX makes of them.  No range table entry is needed, and so no
 * lock on the journal.
 */
static Node *
direct_predicate_column(ParseState *pstate, ColumnRef *cref)
{
	Oid			heap = *(Oid *) pstate->p_ref_hook_state;
	AttrNumber	attnum;
	Oid			type;
	int32		typmod;
	Oid			collation;
	Var		   *var;

	if (list_length(cref->fields) != 1 || !IsA(linitial(cref->fields), String))
		return NULL;
	attnum = get_attnum(heap, strVal(linitial(cref->fields)));
	if (attnum == InvalidAttrNumber)
		return NULL;			/* the parser reports it */
	get_atttypetypmodcoll(heap, attnum, &type, &typmod, &collation);
	var = makeVar(1, attnum, type, typmod, collation, 0);
	var->location = cref->location;
	return (Node *) var;
}

/*
 * The predicate `text` on the journal `heap`, parsed as CREATE INDEX parses
 * a WHERE clause (transformIndexStmt) and prepared as the relation cache
 * prepares a stored one (RelationGetIndexPredicate): a list of conjuncts
 * that equal() compares with an index's, whatever the version's node trees.
 */
static List *
direct_expected_predicate(Oid heap, const char *text)
{
	List	   *parsed = raw_parser(psprintf("SELECT WHERE %s", text), RAW_PARSE_DEFAULT);
	SelectStmt *select = castNode(SelectStmt, linitial_node(RawStmt, parsed)->stmt);
	ParseState *pstate = make_parsestate(NULL);
	Node	   *where;
	List	   *result;

	pstate->p_pre_columnref_hook = direct_predicate_column;
	pstate->p_ref_hook_state = &heap;
	where = transformWhereClause(pstate, select->whereClause, EXPR_KIND_INDEX_PREDICATE, "WHERE");
	assign_expr_collations(pstate, where);
	free_parsestate(pstate);

	where = eval_const_expressions(NULL, where);
	where = (Node *) canonicalize_qual((Expr *) where, false);
	result = make_ands_implicit((Expr *) where);
	fix_opfuncids((Node *) result);
	return result;
}

/* The same conjuncts, in any order (AND is commutative)? */
static bool
direct_same_conjuncts(List *a, List *b)
{
	ListCell   *lc;

	if (list_length(a) != list_length(b))
		return false;
	foreach(lc, a)
		if (!list_member(b, lfirst(lc)))
			return false;
	foreach(lc, b)
		if (!list_member(a, lfirst(lc)))
			return false;
	return true;
}

/*
 * Do the key columns of `index` follow `def` (its journal is `heap`):
 * the columns by their attribute numbers, in order, ascending, each with
 * its type's default btree operator class and its own collation, as a
 * CREATE INDEX that names only the columns makes them?  A key that is an
 * expression has attribute number 0, so expressions fail here too.
 */
static const char *
direct_index_keys_differ(Relation index, const DirectIndexDef *def, Oid heap)
{
	Form_pg_index form = index->rd_index;
	int			k;

	if (form->indnkeyatts != def->nkeys)
		return "It has another number of key columns.";
	if (form->indnatts != form->indnkeyatts)
		return "It includes columns besides its key (INCLUDE).";
	for (k = 0; k < def->nkeys; k++)
	{
		AttrNumber	attnum = get_attnum(heap, def->keys[k]);
		Oid			type;
		int32		typmod;
		Oid			collation;
		Oid			opclass;

		if (attnum == InvalidAttrNumber || form->indkey.values[k] != attnum)
			return psprintf("Its key column %d is not \"%s\".", k + 1, def->keys[k]);
		get_atttypetypmodcoll(heap, attnum, &type, &typmod, &collation);
		opclass = GetDefaultOpClass(type, BTREE_AM_OID);
		if (index->rd_opfamily[k] != get_opclass_family(opclass) ||
			index->rd_opcintype[k] != get_opclass_input_type(opclass))
			return psprintf("Its key column \"%s\" has another operator class.", def->keys[k]);
		if (index->rd_indcollation[k] != collation)
			return psprintf("Its key column \"%s\" has another collation.", def->keys[k]);
		if (index->rd_indoption[k] != 0)
			return psprintf("Its key column \"%s\" is not in ascending order with NULLS LAST.",
							def->keys[k]);
	}
	return NULL;
}

/*
 * Why `index` does not have the definition `def`, or NULL when it has:
 * a btree index of the journal, unique (immediate, NULLs distinct) exactly
 * when the script's is, on its key columns (direct_index_keys_differ), and
 * partial exactly when the script's is, on the same predicate.
 */
static const char *
direct_index_def_differs(Relation index, const DirectIndexDef *def)
{
	Form_pg_index form = index->rd_index;
	Oid			heap = direct_rels_cache.claims[def->journal].heap;
	const char *keys;
	List	   *predicate;

	if (index->rd_rel->relkind != RELKIND_INDEX)
		return "It is not an index.";
	if (form->indrelid != heap)
		return "It is an index of another table.";
	if (index->rd_rel->relam != BTREE_AM_OID)
		return "It is not a btree index.";
	if ((keys = direct_index_keys_differ(index, def, heap)) != NULL)
		return keys;
	if (form->indisexclusion)
		return "It is the index of an exclusion constraint.";
	if (form->indisunique != def->unique)
		return def->unique ? "It is not unique." : "It is unique.";
	if (!form->indimmediate)
		return "It is deferrable.";
	if (form->indnullsnotdistinct)
		return "It treats NULLs as not distinct.";
	predicate = RelationGetIndexPredicate(index);
	if (def->predicate == NULL)
		return predicate == NIL ? NULL : "It is partial.";
	if (predicate == NIL)
		return "It is not partial.";
	if (!direct_same_conjuncts(predicate, direct_expected_predicate(heap, def->predicate)))
		return "It has another WHERE clause.";
	return NULL;
}

/*
 * Refuse `index`, found under the name of `def`, unless it has that
 * definition.  55000, as for an index of durable's found invalid: the
 * index exists, but not in the state the calls need; 42704 would say it
 * does not.
 */
static void
direct_check_index_def(Relation index, const DirectIndexDef *def)
{
	const char *differs = direct_index_def_differs(index, def);

	if (differs != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index \"durable.%s\" does not have the definition durable created",
						def->name),
				 errdetail("%s durable reads and writes the journal through this index as its install script defines it.",
						   differs),
				 errhint("Rename or drop that index, then create durable's: %s.", def->create)));
}

/*
 * The OID of the index named as `def` in schema `nsp`, checked against
 * `def` (direct_check_index_def) once per build of the relations, not per
 * call.  The index is locked for the check only: the definition under the
 * name changes only with the OID (DROP and CREATE, REINDEX CONCURRENTLY's
 * swap), and the invalidation of the old index makes direct_rels look the
 * name up again.
 */
static Oid
direct_index_relid(const DirectIndexDef *def, Oid nsp)
{
	for (;;)
	{
		Oid			relid = direct_relid(def->name, nsp);
		Relation	index = try_relation_open(relid, AccessShareLock);

		/* Dropped since the look-up (REINDEX CONCURRENTLY's last step): again. */
		if (index == NULL)
		{
			CHECK_FOR_INTERRUPTS();
			continue;
		}
		direct_check_index_def(index, def);
		relation_close(index, AccessShareLock);
		return relid;
	}
}

/*
 * durable's relations and columns, looked up again after an invalidation
 * names one.  Their names and columns are read from the catalog caches,
 * without a lock.  The indexes are looked up again only when a call needs
 * its journal's (direct_journal_rels), since checking one locks it: a
 * REINDEX of an outbox index must not hold up the inbox's calls.  Until
 * then they keep the OIDs of their last check, which a call that rebuilt
 * the relations midway (durable_next_token) goes on with: the definition
 * under a name changes only with the OID, and an index dropped or swapped
 * out since is found again under its name (direct_index_renamed).
 */
static const DirectRels *
direct_rels(void)
{
	/* Another session may have dropped them: cheap when nothing is queued. */
	AcceptInvalidationMessages();

	/*
	 * An older schema lacks columns: say so, not "column does not exist".
	 * At every call, as the plans do: the relations may stay valid when the
	 * version goes back (an update rolled back).
	 */
	durable_require_current_schema();
	if (!direct_rels_cache.valid)
	{
		DirectRels *r = &direct_rels_cache;
		uint64		invalidations = direct_invalidations;
		Oid			nsp;

		nsp = get_namespace_oid("durable", false);

		if (!direct_callback_registered)
		{
			CacheRegisterRelcacheCallback(direct_invalidate, (Datum) 0);
			CacheRegisterSyscacheCallback(SEQRELID, direct_sequence_changed, (Datum) 0);
			direct_callback_registered = true;
		}

		r->inbox = direct_relid("inbox", nsp);
		r->inbox_id_seq = direct_relid("inbox_id_seq", nsp);
		direct_common_cols(r->inbox, &r->inbox_cols);
		direct_attnums(r->inbox, direct_new_message_cols, DIRECT_NEW_MESSAGE_NCOLS,
					   r->new_message_att);
		r->inbox_cols.finished_at = direct_attnum(r->inbox, "finished_at");
		r->inbox_cols.done_at = direct_attnum(r->inbox, "done_at");
		r->inbox_cols.sends = direct_attnum(r->inbox, "sends");
		direct_attnums(r->inbox, direct_claimed_cols, DURABLE_CLAIMED_NCOLS, r->claimed_att);
		r->outbox = direct_relid("outbox", nsp);
		r->outbox_id_seq = direct_relid("outbox_id_seq", nsp);
		direct_common_cols(r->outbox, &r->outbox_cols);
		direct_attnums(r->outbox, direct_new_send_cols, DIRECT_NEW_SEND_NCOLS,
					   r->new_send_att);
		r->outbox_cols.sent_at = direct_attnum(r->outbox, "sent_at");
		r->outbox_cols.provider_message_id = direct_attnum(r->outbox, "provider_message_id");
		direct_attnums(r->outbox, direct_claimed_send_cols, DURABLE_CLAIMED_SEND_NCOLS,
					   r->claimed_send_att);
		r->token_seq = direct_relid("token_seq", nsp);
		direct_check_sequence(r->inbox_id_seq, false);
		direct_check_sequence(r->outbox_id_seq, false);
		direct_check_sequence(r->token_seq, true);

		/* The lease changes no indexed column: HOT unless the page is full. */
		r->claims[DQ_INBOX] = (DirectClaimQueue) {
			.heap = r->inbox,
			.open_idx = r->inbox_open_idx,
			.chat_idx = r->inbox_chat_idx,
			.cols = &r->inbox_cols,
			.claimable = direct_inbox_claimable,
			.leased_state = "leased",
			.claimed_att = r->claimed_att,
			.nclaimed = DURABLE_CLAIMED_NCOLS,
		};
		/* The lease takes the send out of the waiting index: not HOT. */
		r->claims[DQ_OUTBOX] = (DirectClaimQueue) {
			.heap = r->outbox,
			.open_idx = r->outbox_open_idx,
			.chat_idx = r->outbox_chat_idx,
			.cols = &r->outbox_cols,
			.claimable = direct_outbox_claimable,
			.leased_state = "sending",
			.claimed_att = r->claimed_send_att,
			.nclaimed = DURABLE_CLAIMED_SEND_NCOLS,
		};
		r->indexes_checked[DQ_INBOX] = r->indexes_checked[DQ_OUTBOX] = false;
		r->valid = (invalidations == direct_invalidations);
	}
	return &direct_rels_cache;
}

/*
 * durable's relations, with the indexes of `journal` looked up and checked
 * against their definitions (direct_index_relid) since the last
 * invalidation.  The other journal's index fields may be older, or
 * InvalidOid before its first call.
 */
static const DirectRels *
direct_journal_rels(DurableQueue journal)
{
	DirectRels *r = &direct_rels_cache;

	(void) direct_rels();
	if (!r->indexes_checked[journal])
	{
		uint64		invalidations = direct_invalidations;
		Oid			nsp = get_namespace_oid("durable", false);
		int			i;

		for (i = 0; i < lengthof(direct_named_indexes); i++)
			if (direct_named_indexes[i].journal == journal)
				*direct_rels_oid(r, direct_named_indexes[i].field) =
					direct_index_relid(&direct_named_indexes[i], nsp);
		r->claims[DQ_INBOX].open_idx = r->inbox_open_idx;
		r->claims[DQ_INBOX].chat_idx = r->inbox_chat_idx;
		r->claims[DQ_OUTBOX].open_idx = r->outbox_open_idx;
		r->claims[DQ_OUTBOX].chat_idx = r->outbox_chat_idx;
		r->indexes_checked[journal] = r->valid && invalidations == direct_invalidations;
	}
	return r;
}

/*
 * The index that carries now the name under which `index_oid` was looked up
 * (InvalidOid: none), or index_oid itself when that is not one of the
 * names.  REINDEX INDEX CONCURRENTLY builds a copy of the index and swaps
 * their names; the index looked up before is then marked invalid, dead,
 * and dropped, while its copy holds every entry.  A call that looked the
 * name up before the swap learns of it when it locks the journal or the
 * index, or finds the index gone.  Callers hold a lock on the journal: a
 * second rebuild cannot get past its first phase while they do.  *def is
 * set to the name's definition, which the caller checks the other index
 * against once it has opened it (direct_check_index_def), or to NULL.
 */
static Oid
direct_index_renamed(Oid index_oid, const DirectIndexDef **def)
{
	int			i;

	Assert(OidIsValid(index_oid));
	*def = NULL;
	for (i = 0; i < lengthof(direct_named_indexes); i++)
		if (*direct_rels_oid(&direct_rels_cache, direct_named_indexes[i].field) == index_oid)
		{
			*def = &direct_named_indexes[i];
			return get_relname_relid(direct_named_indexes[i].name,
									 get_namespace_oid("durable", false));
		}
	return index_oid;
}

/*
 * Open and lock one of durable's indexes by the OID its name had, or, if a
 * REINDEX CONCURRENTLY swapped another index in under that name since
 * (direct_index_renamed), that one.  An index found invalid under its own
 * name is returned as it is: the caller decides what an invalid index
 * means to it.
 */
static Relation
direct_index_open_current(Oid index_oid, LOCKMODE lockmode)
{
	Relation	index;
	Oid			renamed;
	const DirectIndexDef *def;

	DURABLE_FAIL_POINT("index_open");
	index = try_relation_open(index_oid, lockmode);
	if (index != NULL && index->rd_rel->relkind != RELKIND_INDEX)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"durable.%s\" is not an index", RelationGetRelationName(index)),
				 errhint(DURABLE_DAMAGED_HINT)));
	if (index != NULL && index->rd_index->indisvalid)
		return index;
	renamed = direct_index_renamed(index_oid, &def);
	if (renamed == index_oid && index != NULL)
		return index;
	if (!OidIsValid(renamed))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("an index of durable's journals was dropped or renamed"),
				 errhint(DURABLE_DAMAGED_HINT)));
	if (index != NULL)
		relation_close(index, lockmode);
	index = index_open(renamed, lockmode);
	if (def != NULL)
		direct_check_index_def(index, def);
	return index;
}

/*
 * Does the index hold every entry?  One being built or dropped concurrently
 * (or left invalid by a failed CREATE INDEX CONCURRENTLY) does not: a scan
 * would answer "none" for what it lacks, a unique check miss a conflict.
 */
static bool
direct_index_complete(Relation index)
{
	return index->rd_index->indisvalid && index->rd_index->indisready &&
		index->rd_index->indislive;
}

static void
direct_require_complete_index(Relation index)
{
	if (!direct_index_complete(index))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index \"durable.%s\" is not valid", RelationGetRelationName(index)),
				 errhint("Rebuild it with REINDEX INDEX durable.%s.", RelationGetRelationName(index))));
}

/*
 * Open an index of durable's for a scan that relies on it holding every
 * entry (direct_index_open_current).
 */
Relation
durable_index_open(Oid index_oid, LOCKMODE lockmode)
{
	Relation	index = direct_index_open_current(index_oid, lockmode);

	direct_require_complete_index(index);
	return index;
}

/*
 * Would the executor fire `trigger` in this session?  TriggerEnabled's rule
 * (commands/trigger.c), before it looks at the columns and the WHEN clause:
 * a disabled trigger never fires; under session_replication_role = replica
 * only those enabled REPLICA or ALWAYS do, otherwise those enabled (ORIGIN)
 * or ALWAYS.  The internal triggers of foreign keys and deferrable
 * constraints are enabled ORIGIN: the executor skips them in replica mode.
 */
static bool
direct_trigger_fires(const Trigger *trigger)
{
	if (SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA)
		return trigger->tgenabled == TRIGGER_FIRES_ON_REPLICA ||
			trigger->tgenabled == TRIGGER_FIRES_ALWAYS;
	return trigger->tgenabled == TRIGGER_FIRES_ON_ORIGIN ||
		trigger->tgenabled == TRIGGER_FIRES_ALWAYS;
}

/* Whether row-level security applies to the current user (the owner) on rel. */
static bool
direct_rls_binds(Relation rel)
{
	return rel->rd_rel->relrowsecurity &&
		check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_ENABLED;
}

static void
direct_refuse_rls(Relation rel)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("row-level security on \"durable.%s\" is not supported", RelationGetRelationName(rel)),
			 errdetail("durable writes its journals directly, without applying row-level security policies."),
			 errhint("Disable row-level security on the journal.")));
}

bool
durable_journal_rls_binds(DurableQueue queue)
{
	Relation	rel = table_open(direct_journal_rels(queue)->claims[queue].heap, AccessShareLock);
	bool		binds = direct_rls_binds(rel);

	table_close(rel, AccessShareLock);
	return binds;
}

void
durable_journal_refuse_rls(DurableQueue queue)
{
	Relation	rel = table_open(direct_journal_rels(queue)->claims[queue].heap, AccessShareLock);

	if (direct_rls_binds(rel))
		direct_refuse_rls(rel);
	table_close(rel, AccessShareLock);
}

bool
durable_journal_has_before_trigger(DurableQueue queue, int16 event)
{
	Relation	rel = table_open(direct_journal_rels(queue)->claims[queue].heap, AccessShareLock);
	TriggerDesc *trigdesc = rel->trigdesc;
	bool		found = false;
	int			i;

	for (i = 0; trigdesc != NULL && i < trigdesc->numtriggers && !found; i++)
	{
		Trigger    *trigger = &trigdesc->triggers[i];

		found = TRIGGER_FOR_ROW(trigger->tgtype) && TRIGGER_FOR_BEFORE(trigger->tgtype) &&
			(trigger->tgtype & event) && direct_trigger_fires(trigger);
	}
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * Refuse to write a journal with what the direct writes would skip: triggers
 * on `events` (TRIGGER_TYPE_INSERT, TRIGGER_TYPE_UPDATE or both) that would fire
 * (direct_trigger_fires), rules, CHECK constraints, foreign keys from the
 * journal, deferrable unique and exclusion constraints (checked by a
 * trigger), stored generated columns (an update would leave them stale),
 * row-level security that applies to the journal's owner.  The one trigger
 * allowed is the referenced side of a foreign key on UPDATE (a key that
 * references the journal only cares about key changes, and the key never
 * changes).  Publications are checked as for the statement.
 */
static void
direct_check_writable(Relation rel, int16 events)
{
	/*
	 * A copy: the catalog lookups below may rebuild the relcache entry,
	 * which frees its trigdesc.
	 */
	TriggerDesc *trigdesc = rel->trigdesc ? CopyTriggerDesc(rel->trigdesc) : NULL;
	TupleDesc	desc = RelationGetDescr(rel);
	TupleConstr *constr = desc->constr;
	int			i;

	/*
	 * rd_rules, as the rewriter reads them: relhasrules stays set after the
	 * last rule is dropped, until a VACUUM clears it.
	 */
	if (rel->rd_rules != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("rules on \"durable.%s\" are not supported", RelationGetRelationName(rel)),
				 errdetail("durable writes its journals directly, without applying rules."),
				 errhint("Drop the rule.")));
	if (constr != NULL && constr->num_check > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("check constraint \"%s\" on \"durable.%s\" is not supported",
						constr->check[0].ccname, RelationGetRelationName(rel)),
				 errdetail("durable writes its journals directly, without checking constraints added to them."),
				 errhint("Drop the constraint.")));
	for (i = 0; constr != NULL && constr->has_generated_stored && i < desc->natts; i++)
		if (TupleDescAttr(desc, i)->attgenerated == ATTRIBUTE_GENERATED_STORED)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("generated column \"%s\" of \"durable.%s\" is not supported",
							NameStr(TupleDescAttr(desc, i)->attname), RelationGetRelationName(rel)),
					 errdetail("durable writes its journals directly, without computing generated columns."),
					 errhint("Drop the column; compute the value in a view or a query instead.")));
	if (direct_rls_binds(rel))
		direct_refuse_rls(rel);
	/* (refused when attached, with durable preloaded: ddl_guard.c) */
	if (rel->rd_rel->relispartition)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("\"durable.%s\" as a partition is not supported", RelationGetRelationName(rel)),
				 errdetail("durable writes its journals directly, without checking a partition's constraint."),
				 errhint("Detach it: ALTER TABLE ... DETACH PARTITION durable.%s.", RelationGetRelationName(rel))));
	if (events & TRIGGER_TYPE_INSERT)
		CheckCmdReplicaIdentity(rel, CMD_INSERT);
	if (events & TRIGGER_TYPE_UPDATE)
		CheckCmdReplicaIdentity(rel, CMD_UPDATE);
	for (i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &trigdesc->triggers[i];
		int			ri_type;

		if (!(trigger->tgtype & events) || !direct_trigger_fires(trigger))
			continue;
		ri_type = trigger->tgisinternal ? RI_FKey_trigger_type(trigger->tgfoid) : RI_TRIGGER_NONE;
		if (ri_type == RI_TRIGGER_PK && (trigger->tgtype & TRIGGER_TYPE_UPDATE))
		{
			if (direct_fk_key_fixed(rel, trigger->tgconstraint))
				continue;
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("foreign key \"%s\" referencing \"durable.%s\" is not supported",
							get_constraint_name(trigger->tgconstraint), RelationGetRelationName(rel)),
					 errdetail("It references a column that durable changes without checking foreign keys."),
					 errhint("Reference the journal by its key: %s.",
							 RelationGetRelid(rel) == direct_rels_cache.outbox ? "(key)" : "(id)")));
		}
		if (ri_type == RI_TRIGGER_FK)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("foreign key \"%s\" on \"durable.%s\" is not supported",
							get_constraint_name(trigger->tgconstraint), RelationGetRelationName(rel)),
					 errdetail("durable writes its journals directly, without checking foreign keys from them."),
					 errhint("Drop the foreign key.")));
		/* A deferrable UNIQUE, PRIMARY KEY or EXCLUDE: its trigger cannot be dropped. */
		if (ri_type == RI_TRIGGER_NONE && trigger->tgisinternal && OidIsValid(trigger->tgconstraint))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("deferrable constraint \"%s\" on \"durable.%s\" is not supported",
							get_constraint_name(trigger->tgconstraint), RelationGetRelationName(rel)),
					 errdetail("PostgreSQL checks a deferrable constraint in a trigger, and durable writes its journals directly, without firing triggers."),
					 errhint("Drop the constraint and add it back NOT DEFERRABLE.")));
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("trigger \"%s\" on \"durable.%s\" is not supported",
						trigger->tgname, RelationGetRelationName(rel)),
				 errdetail("durable writes its journals directly, without firing triggers."),
				 errhint("Drop the trigger; read changes from the journal or its NOTIFY channels instead.")));
	}
}

/* The journals' columns that a direct update may change. */
static const char *const direct_updated_cols[] = {
	"state", "token", "lease_until", "attempts", "owner", "finished_at", "done_at", "sends",
	"sent_at", "provider_message_id"
};

/* Whether a direct update of journal `relid` may change column `column`. */
static bool
direct_col_updated(Oid relid, const char *column)
{
	if (get_attnum(relid, column) == InvalidAttrNumber)
		return false;
	for (int i = 0; i < lengthof(direct_updated_cols); i++)
		if (strcmp(column, direct_updated_cols[i]) == 0)
			return true;
	return false;
}

/*
 * Whether `relid` is one of the journals the direct code writes, and
 * `column` (may be NULL) one of its columns that a direct update may
 * change; for the DDL guard, from the catalogs alone (it must not depend
 * on the schema being current or whole, as direct_rels does).
 */
bool
durable_journal_column_changes(Oid relid, const char *column, bool *journal)
{
	Oid			nsp = get_namespace_oid("durable", true);

	*journal = OidIsValid(nsp) && get_rel_namespace(relid) == nsp &&
		(relid == get_relname_relid("inbox", nsp) || relid == get_relname_relid("outbox", nsp));
	return *journal && column != NULL && direct_col_updated(relid, column);
}

/*
 * Whether the foreign key `conoid`, which references the journal `rel`,
 * references only columns that the direct updates never change: then no
 * update of theirs can break it, and its referenced-side checks are
 * skipped.  A key on (id, token), say, is not: a claim changes the token.
 */
static bool
direct_fk_key_fixed(Relation rel, Oid conoid)
{
	const DirectRels *r = &direct_rels_cache;
	Oid			relid = RelationGetRelid(rel);
	HeapTuple	tuple;
	Datum		confkey;
	bool		isnull;
	ArrayType  *keys;
	int16	   *atts;
	bool		fixed = true;
	int			i;

	for (i = 0; i < direct_nfixed_fks; i++)
		if (direct_fixed_fks[i] == conoid)
			return true;
	if (relid != r->inbox && relid != r->outbox)
		return false;

	tuple = SearchSysCache1(CONSTROID, ObjectIdGetDatum(conoid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for constraint %u", conoid);
	confkey = SysCacheGetAttr(CONSTROID, tuple, Anum_pg_constraint_confkey, &isnull);
	if (isnull)
		elog(ERROR, "null confkey for constraint %u", conoid);
	keys = DatumGetArrayTypeP(confkey);
	if (ARR_NDIM(keys) != 1 || ARR_HASNULL(keys) || ARR_ELEMTYPE(keys) != INT2OID)
		elog(ERROR, "confkey is not a 1-D smallint array");
	atts = (int16 *) ARR_DATA_PTR(keys);
	for (i = 0; i < ARR_DIMS(keys)[0]; i++)
		if (direct_col_updated(relid, get_attname(relid, atts[i], false)))
			fixed = false;
	ReleaseSysCache(tuple);

	if (fixed && direct_nfixed_fks < DIRECT_MAX_FIXED_FKS)
		direct_fixed_fks[direct_nfixed_fks++] = conoid;
	return fixed;
}

/* As ExecConstraints for a NOT NULL added to a journal by hand. */
static void
direct_not_null_violation(Relation rel, AttrNumber att)
{
	ereport(ERROR,
			(errcode(ERRCODE_NOT_NULL_VIOLATION),
			 errmsg("null value in column \"%s\" of relation \"%s\" violates not-null constraint",
					NameStr(TupleDescAttr(RelationGetDescr(rel), att - 1)->attname),
					RelationGetRelationName(rel)),
			 errtablecol(rel, att)));
}

/*
 * Push the snapshot SPI would take for its next statement here
 * (_SPI_execute_plan): this transaction's own earlier changes included, and
 * under READ COMMITTED everything committed until now.  Pop it with
 * PopActiveSnapshot.
 */
static Snapshot
direct_push_snapshot(void)
{
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	UpdateActiveSnapshotCommandId();
	return GetActiveSnapshot();
}

/* Does a version found by a chat scan count?  NULL: every one does. */
typedef bool (*DirectChatFilter) (TupleTableSlot *slot, const DirectRels *rels);

/*
 * Whether the heap version in `slot` (just fetched, visible to the scan's
 * snapshot) is being replaced: updated or deleted by a transaction that is
 * in progress, or that committed after the snapshot was taken.  A row lock
 * alone does not count.
 */
static bool
direct_version_in_flight(TupleTableSlot *slot)
{
	BufferHeapTupleTableSlot *bslot = (BufferHeapTupleTableSlot *) slot;
	HeapTupleHeader tuple;
	uint16		infomask;
	TransactionId updater = InvalidTransactionId;

	/* (A journal moved to another table access method: no answer.) */
	if (!TTS_IS_BUFFERTUPLE(slot) || !BufferIsValid(bslot->buffer))
		return false;
	LockBuffer(bslot->buffer, BUFFER_LOCK_SHARE);
	tuple = bslot->base.tuple->t_data;

	/*
	 * One read of the flags: hint bits (HEAP_XMAX_INVALID among them) can
	 * be set under a share lock meanwhile, and a MultiXactId read as a
	 * transaction id would be looked up in the wrong place.
	 */
	infomask = tuple->t_infomask;
	if (!(infomask & HEAP_XMAX_INVALID) && !HEAP_XMAX_IS_LOCKED_ONLY(infomask))
		updater = (infomask & HEAP_XMAX_IS_MULTI) ?
			HeapTupleGetUpdateXid(tuple) : HeapTupleHeaderGetRawXmax(tuple);
	LockBuffer(bslot->buffer, BUFFER_LOCK_UNLOCK);

	/* In progress is asked first: a transaction ends in between, not the other way round. */
	return TransactionIdIsValid(updater) &&
		(TransactionIdIsInProgress(updater) || TransactionIdDidCommit(updater));
}

/*
 * Scan a journal's per-chat index of unfinished records (chat_id, id) for
 * chat `chat_id` (only ids `cmp` id, when cmp is BTLessStrategyNumber or
 * BTGreaterStrategyNumber; every id when it is InvalidStrategy), until a
 * version visible to `snapshot` passes `filter`.  When one does and
 * in_flight is not NULL, *in_flight tells whether that version is being
 * replaced (direct_version_in_flight); *found_id (when not NULL) is its id.
 */
static bool
direct_chat_scan(Oid heap_oid, Oid index_oid, Datum chat_id, StrategyNumber cmp, int64 id,
				 DirectChatFilter filter, const DirectRels *rels, Snapshot snapshot,
				 bool *in_flight, int64 *found_id)
{
	Relation	heap;
	Relation	index;
	ScanKeyData keys[2];
	int			nkeys = 1;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bool		found = false;

	heap = table_open(heap_oid, AccessShareLock);
	index = durable_index_open(index_oid, AccessShareLock);

	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   index->rd_indcollation[0], F_TEXTEQ, chat_id);
	if (cmp != InvalidStrategy)
	{
		Assert(cmp == BTLessStrategyNumber || cmp == BTGreaterStrategyNumber);
		ScanKeyEntryInitialize(&keys[1], 0, 2, cmp, InvalidOid, InvalidOid,
							   cmp == BTLessStrategyNumber ? F_INT8LT : F_INT8GT,
							   Int64GetDatum(id));
		nkeys = 2;
	}

	scan = index_beginscan(heap, index, snapshot, nkeys, 0);
	index_rescan(scan, keys, nkeys, NULL, 0);
	slot = table_slot_create(heap, NULL);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		if (filter == NULL || filter(slot, rels))
		{
			found = true;
			if (in_flight != NULL)
				*in_flight = direct_version_in_flight(slot);
			if (found_id != NULL)
			{
				bool		isnull;

				/* (the index's second column: id) */
				*found_id = DatumGetInt64(slot_getattr(slot, index->rd_index->indkey.values[1],
													   &isnull));
			}
			break;
		}
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);

	index_close(index, NoLock);
	table_close(heap, NoLock);
	return found;
}

/*
 * Take the lock a write of `queue`'s journal takes (RowExclusiveLock),
 * before a call's first read of it.  A call that reads the journal under a
 * weaker lock and then writes it asks for the stronger lock while holding
 * the weaker one and the read's index locks: a REINDEX (or CREATE INDEX)
 * that took its SHARE lock on the table in between waits for those index
 * locks, and the two deadlock.  Taken first, the lock makes the DDL wait.
 */
void
durable_lock_journal_for_write(DurableQueue queue)
{
	LockRelationOid(direct_journal_rels(queue)->claims[queue].heap, RowExclusiveLock);
}

/*
 * Take the locks a claim of `queue` takes -- its journal's, as a write, and
 * its claim index's -- before the claim reads the clock: a claim queued
 * behind DDL (REINDEX, ALTER TABLE, VACUUM FULL, a pending lock of an index
 * being dropped or swapped) must not hand out leases timed from before its
 * wait, over or nearly over when it returns and taken over at once.  A
 * read-only transaction's error first, as the claim gives it.
 */
void
durable_lock_journal_for_claim(DurableQueue queue)
{
	const DirectClaimQueue *q = &direct_journal_rels(queue)->claims[queue];

	PreventCommandIfReadOnly("UPDATE");
	PreventCommandIfParallelMode("UPDATE");
	LockRelationOid(q->heap, RowExclusiveLock);
	LockRelationOid(q->open_idx, AccessShareLock);
}

void
durable_journal_check_writable(DurableQueue queue, int16 event)
{
	Relation	rel;

	/* A read-only transaction's error first, as the direct writes give it. */
	PreventCommandIfReadOnly(event == TRIGGER_TYPE_INSERT ? "INSERT" : "UPDATE");
	rel = table_open(direct_journal_rels(queue)->claims[queue].heap, RowExclusiveLock);

	direct_check_writable(rel, event);
	table_close(rel, NoLock);
}

/*
 * Has chat `chat_id` an open (pending or leased) record, older than
 * `below_id` when that is not 0?
 *
 * The index holds only open records, and an update that finishes a record
 * is not HOT (finished_at is in the index's predicate), so a version found
 * through it is open: the SQL probes read no column either.
 */
bool
durable_inbox_chat_has_open(Datum chat_id, int64 below_id)
{
	const DirectRels *rels = direct_journal_rels(DQ_INBOX);
	Snapshot	snapshot = direct_push_snapshot();
	bool		found;

	/*
	 * Under REPEATABLE READ and SERIALIZABLE the transaction's snapshot can
	 * predate an older record of the chat that committed before the chat
	 * lock was taken: look with one that sees it.
	 */
	if (IsolationUsesXactSnapshot())
		snapshot = GetLatestSnapshot();
	found = direct_chat_scan(rels->inbox, rels->inbox_chat_idx, chat_id,
							 below_id != 0 ? BTLessStrategyNumber : InvalidStrategy, below_id,
							 NULL, rels, snapshot, NULL, NULL);
	PopActiveSnapshot();
	return found;
}

/*
 * Whether the version in `slot` is one the transaction's snapshot does not
 * see (committed after it was taken).  A journal moved to another table
 * access method: every version is taken for one, the safe side of
 * durable_inbox_chat_open_unseen.
 */
static bool
direct_unseen_by_transaction(TupleTableSlot *slot, const DirectRels *rels)
{
	BufferHeapTupleTableSlot *bslot = (BufferHeapTupleTableSlot *) slot;
	bool		visible;

	if (!TTS_IS_BUFFERTUPLE(slot) || !BufferIsValid(bslot->buffer))
		return true;
	LockBuffer(bslot->buffer, BUFFER_LOCK_SHARE);
	visible = HeapTupleSatisfiesVisibility(bslot->base.tuple, GetTransactionSnapshot(),
										   bslot->buffer);
	LockBuffer(bslot->buffer, BUFFER_LOCK_UNLOCK);
	return !visible;
}

/*
 * Under REPEATABLE READ or SERIALIZABLE: has chat `chat_id` an open record
 * newer than `id` that committed after the transaction's snapshot was taken?
 * Its caller holds the chat's lock, so every such record has committed.
 */
bool
durable_inbox_chat_open_unseen(Datum chat_id, int64 id)
{
	const DirectRels *rels = direct_journal_rels(DQ_INBOX);
	bool		found;

	Assert(IsolationUsesXactSnapshot());
	(void) direct_push_snapshot();
	found = direct_chat_scan(rels->inbox, rels->inbox_chat_idx, chat_id, BTGreaterStrategyNumber,
							 id, direct_unseen_by_transaction, rels, GetLatestSnapshot(), NULL,
							 NULL);
	PopActiveSnapshot();
	return found;
}

int64
durable_inbox_chat_next(Datum chat_id, int64 id)
{
	const DirectRels *rels = direct_journal_rels(DQ_INBOX);
	int64		next = 0;

	(void) direct_push_snapshot();
	if (!direct_chat_scan(rels->inbox, rels->inbox_chat_idx, chat_id, BTGreaterStrategyNumber,
						  id, NULL, rels, GetLatestSnapshot(), NULL, &next))
		next = 0;
	PopActiveSnapshot();
	return next;
}

/*
 * The outbox's chat index also holds sends being sent: a later send waits
 * for this one only while it is pending or failed.
 */
static bool
direct_outbox_waiting(TupleTableSlot *slot, const DirectRels *rels)
{
	bool		isnull;
	Datum		state = slot_getattr(slot, rels->outbox_cols.state, &isnull);

	return !isnull &&
		(durable_text_equal_cstring(state, "pending") ||
		 durable_text_equal_cstring(state, "failed"));
}

/* A new fencing token: the next value of durable.token_seq. */
static int64
direct_next_token(const DirectRels *rels)
{
	durable_token_fence(rels->token_seq);
	return nextval_internal(rels->token_seq, true);
}

int64
durable_next_token(void)
{
	return direct_next_token(direct_rels());
}

/* ---- Fenced confirmations ---- */

/* The most columns a confirmation (or a claim) sets. */
#define DIRECT_MAX_SET 6

/* One fenced confirmation: the record, its fence, and what it sets. */
typedef struct DirectConfirm
{
	Oid			heap;
	Oid			pkey;
	ScanKeyData key;			/* the record's primary key */
	const DirectCols *cols;
	int64		token;			/* the fence: this token, in... */
	const char *states[2];		/* ...one of these states (NULL: none) */
	Oid			chat_idx;		/* the journal's per-chat index of open records */
	DirectChatFilter waiting;	/* which later records of the chat wait (NULL: all) */
	bool		frees_chat;		/* the record finishes: the floor of `queue` may
								 * have passed over records held behind it
								 * (claim_floor.c) */
	DurableQueue queue;
	int			nset;
	AttrNumber	set_att[DIRECT_MAX_SET];
	Datum		set_value[DIRECT_MAX_SET];
	bool		set_null[DIRECT_MAX_SET];
} DirectConfirm;

/* A confirmation of the record whose primary key equals `key` (by `eqproc`). */
static void
direct_confirm_init(DirectConfirm *c, Oid heap, Oid pkey, Oid chat_idx, const DirectCols *cols,
					RegProcedure eqproc, Datum key, int64 token)
{
	memset(c, 0, sizeof(*c));
	c->heap = heap;
	c->pkey = pkey;
	c->chat_idx = chat_idx;
	c->cols = cols;
	ScanKeyInit(&c->key, 1, BTEqualStrategyNumber, eqproc, key);
	c->token = token;
}

static void
direct_set(DirectConfirm *c, AttrNumber att, Datum value, bool isnull)
{
	Assert(c->nset < DIRECT_MAX_SET);
	c->set_att[c->nset] = att;
	c->set_value[c->nset] = value;
	c->set_null[c->nset] = isnull;
	c->nset++;
}

/* Does this version of the record still carry the fence? */
static bool
direct_fence_holds(TupleTableSlot *version, const DirectConfirm *c)
{
	bool		isnull;
	Datum		value;
	int			i;

	value = slot_getattr(version, c->cols->token, &isnull);
	if (isnull || DatumGetInt64(value) != c->token)
		return false;
	value = slot_getattr(version, c->cols->state, &isnull);
	if (isnull)
		return false;
	for (i = 0; i < lengthof(c->states) && c->states[i] != NULL; i++)
		if (durable_text_equal_cstring(value, c->states[i]))
			return true;
	return false;
}

/* Put into `confirmed` the version's values with the confirmation's changes. */
static void
direct_confirmed_version(TupleTableSlot *version, TupleTableSlot *confirmed,
						 const DirectConfirm *c)
{
	int			natts = version->tts_tupleDescriptor->natts;
	int			i;

	slot_getallattrs(version);
	ExecClearTuple(confirmed);
	memcpy(confirmed->tts_values, version->tts_values, natts * sizeof(Datum));
	memcpy(confirmed->tts_isnull, version->tts_isnull, natts * sizeof(bool));
	for (i = 0; i < natts; i++)
		if (TupleDescAttr(confirmed->tts_tupleDescriptor, i)->attisdropped)
			confirmed->tts_isnull[i] = true;
	for (i = 0; i < c->nset; i++)
	{
		confirmed->tts_values[c->set_att[i] - 1] = c->set_value[i];
		confirmed->tts_isnull[c->set_att[i] - 1] = c->set_null[i];
	}
	ExecStoreVirtualTuple(confirmed);
}

/*
 * Can a compiled predicate be kept across statements?  Only when it is made
 * of nodes whose evaluation keeps nothing in per-statement memory (a
 * whole-row Var or a row conversion would).
 */
static bool
direct_predicate_unkeepable(Node *node, void *context)
{
	if (node == NULL)
		return false;
	switch (nodeTag(node))
	{
		case T_Var:
			return ((Var *) node)->varattno <= 0;
		case T_Const:
		case T_OpExpr:
		case T_FuncExpr:
		case T_BoolExpr:
		case T_NullTest:
		case T_ScalarArrayOpExpr:
		case T_RelabelType:
		case T_List:
			return expression_tree_walker(node, direct_predicate_unkeepable, context);
		default:
			return true;
	}
}

static void
direct_indexes_build(DirectIndexes *di, Relation rel)
{
	List	   *oids = RelationGetIndexList(rel);
	ListCell   *lc;
	MemoryContext oldcxt;
	uint64		invalidations = direct_invalidations;

	if (di->cxt == NULL)
		di->cxt = AllocSetContextCreate(CacheMemoryContext, "durable direct indexes",
										ALLOCSET_SMALL_SIZES);
	else
		MemoryContextReset(di->cxt);
	di->heap = RelationGetRelid(rel);
	di->n = 0;
	di->kept = list_length(oids) <= DIRECT_MAX_INDEXES;
	di->plain = true;
	oldcxt = MemoryContextSwitchTo(di->cxt);
	foreach(lc, oids)
	{
		Relation	index;
		IndexInfo  *ii;

		if (!di->kept)
			break;
		index = index_open(lfirst_oid(lc), AccessShareLock);
		if (index->rd_rel->relam != BTREE_AM_OID)
		{
			di->kept = false;
			index_close(index, AccessShareLock);
			break;
		}
		ii = BuildIndexInfo(index);
		if (ii->ii_Expressions != NIL ||
			direct_predicate_unkeepable((Node *) ii->ii_Predicate, NULL))
			di->kept = false;
		if (ii->ii_Unique)
			BuildSpeculativeIndexInfo(index, ii);
		if (ii->ii_Predicate != NIL)
			ii->ii_PredicateState = ExecInitQual((List *) expression_planner((Expr *) ii->ii_Predicate),
												 NULL);
		if (ii->ii_ExclusionOps != NULL || (ii->ii_Unique && !index->rd_index->indimmediate))
			di->plain = false;
		di->unique_attrs[di->n] = NULL;
		if (ii->ii_Unique)
		{
			int			k;

			for (k = 0; k < ii->ii_NumIndexKeyAttrs; k++)
				di->unique_attrs[di->n] =
					bms_add_member(di->unique_attrs[di->n],
								   ii->ii_IndexAttrNumbers[k] - FirstLowInvalidHeapAttributeNumber);
			pull_varattnos((Node *) ii->ii_Predicate, 1, &di->unique_attrs[di->n]);
		}
		di->oids[di->n] = RelationGetRelid(index);
		di->infos[di->n] = ii;
		di->n++;
		index_close(index, AccessShareLock);
	}
	MemoryContextSwitchTo(oldcxt);
	list_free(oids);
	di->valid = (invalidations == direct_invalidations);
}

/*
 * ExecOpenIndices for a direct write of the version in `slot` to a journal,
 * with its kept index descriptions.  The journal must be locked already
 * (see DirectIndexes).
 *
 * Only the indexes the version belongs in are opened: a partial index
 * whose predicate the version fails would get no entry from
 * ExecInsertIndexTuples, nor a conflict check from ExecCheckIndexConstraints,
 * and opening and locking it costs about as much as an entry (a journal
 * has six or seven indexes, a version belongs in two to four of them).
 * Leaving its lock untaken is safe: what could change the index under the
 * write (DROP INDEX, REINDEX, CREATE INDEX, concurrently or not) waits for
 * or conflicts with the journal's RowExclusiveLock, and its invalidation
 * rebuilds the descriptions.
 *
 * Returns the kept descriptions, or NULL when there are none and
 * ExecOpenIndices opened every index.
 */
static const DirectIndexes *
direct_open_indexes(ResultRelInfo *rri, bool speculative, TupleTableSlot *slot,
					EState *estate)
{
	Relation	rel = rri->ri_RelationDesc;
	DirectIndexes *di = (RelationGetRelid(rel) == direct_rels_cache.inbox) ?
		&direct_inbox_indexes : &direct_outbox_indexes;
	ExprContext *econtext;
	int			i;
	int			n = 0;

	if (!di->valid || di->heap != RelationGetRelid(rel))
		direct_indexes_build(di, rel);
	if (!di->kept)
	{
		ExecOpenIndices(rri, speculative);
		return NULL;
	}
	econtext = GetPerTupleExprContext(estate);
	econtext->ecxt_scantuple = slot;
	rri->ri_IndexRelationInfo = (IndexInfo **) palloc(di->n * sizeof(IndexInfo *));
	rri->ri_IndexRelationDescs = (RelationPtr) palloc(di->n * sizeof(Relation));
	for (i = 0; i < di->n; i++)
	{
		ExprState  *predicate = di->infos[i]->ii_PredicateState;

		if (predicate != NULL && !ExecQual(predicate, econtext))
			continue;
		rri->ri_IndexRelationInfo[n] = di->infos[i];
		rri->ri_IndexRelationDescs[n] = index_open(di->oids[i], RowExclusiveLock);
		n++;
	}
	ResetExprContext(econtext);
	rri->ri_NumIndices = n;
	return di;
}

/*
 * Must the new entry of a unique index be checked for duplicates?  Not when
 * the index is complete and the update changed none of the columns it names,
 * in its keys or its predicate: the replaced version held the same key in
 * the same index, so no other live row can hold it, and a concurrent insert
 * of the key waits for this transaction (the replaced version's updater) and
 * then finds the new entry.  The check would fetch the replaced version from
 * the heap to see that it is this transaction's own update.  An index still
 * being built by CREATE UNIQUE INDEX CONCURRENTLY (ready for inserts, not yet
 * valid), or left invalid by a failed build, may lack the replaced version's
 * entry while another row with the key went in: it is checked.
 */
static bool
direct_unique_check_needed(const DirectIndexes *di, const IndexInfo *ii, const DirectConfirm *c,
						   Relation index)
{
	int			i;
	int			j;

	if (!direct_index_complete(index))
		return ii->ii_Unique;
	for (i = 0; i < di->n && di->infos[i] != ii; i++)
		;
	if (i == di->n || di->unique_attrs[i] == NULL)
		return ii->ii_Unique;
	for (j = 0; j < c->nset; j++)
		if (bms_is_member(c->set_att[j] - FirstLowInvalidHeapAttributeNumber, di->unique_attrs[i]))
			return true;
	return false;
}

/*
 * The index entries of the version a confirmation wrote with
 * table_tuple_update.  Without a range table the executor cannot tell which
 * columns changed, so the "key unchanged" hint (bottom-up deletion) is
 * given here from the columns the confirmation sets.  With the kept
 * descriptions of plain btree indexes the entries go in one by one, as
 * ExecInsertIndexTuples would put them, but for the unique check an
 * unchanged key does not need (direct_unique_check_needed).
 */
static void
direct_insert_index_entries(Relation rel, TupleTableSlot *slot, const DirectConfirm *c,
							bool summarizing_only)
{
	EState	   *estate = CreateExecutorState();
	MemoryContext oldcxt = MemoryContextSwitchTo(estate->es_query_cxt);
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	const DirectIndexes *di;
	int			i;

	InitResultRelInfo(rri, rel, 0, NULL, 0);
	di = direct_open_indexes(rri, false, slot, estate);
	for (i = 0; i < rri->ri_NumIndices; i++)
	{
		IndexInfo  *ii = rri->ri_IndexRelationInfo[i];
		int			k;
		int			j;

		ii->ii_CheckedUnchanged = true;
		/* (an expression key, 0, may read a column set: not unchanged, as index_unchanged_by_update says) */
		ii->ii_IndexUnchanged = ii->ii_Expressions == NIL;
		for (k = 0; k < ii->ii_NumIndexKeyAttrs; k++)
			for (j = 0; j < c->nset; j++)
				if (ii->ii_IndexAttrNumbers[k] == c->set_att[j])
					ii->ii_IndexUnchanged = false;
	}
	if (di != NULL && di->plain && !summarizing_only)
	{
		for (i = 0; i < rri->ri_NumIndices; i++)
		{
			IndexInfo  *ii = rri->ri_IndexRelationInfo[i];
			Datum		values[INDEX_MAX_KEYS];
			bool		isnull[INDEX_MAX_KEYS];

			if (!ii->ii_ReadyForInserts)
				continue;
			FormIndexDatum(ii, slot, estate, values, isnull);
			(void) index_insert(rri->ri_IndexRelationDescs[i], values, isnull, &slot->tts_tid,
								rel,
								direct_unique_check_needed(di, ii, c, rri->ri_IndexRelationDescs[i]) ?
								UNIQUE_CHECK_YES : UNIQUE_CHECK_NO,
								ii->ii_IndexUnchanged, ii);
		}
	}
	else
	{
#if PG_VERSION_NUM >= 160000
		(void) ExecInsertIndexTuples(rri, slot, estate, true, false, NULL, NIL, summarizing_only);
#else
		Assert(!summarizing_only);
		(void) ExecInsertIndexTuples(rri, slot, estate, true, false, NULL, NIL);
#endif
	}
	ExecCloseIndices(rri);
	MemoryContextSwitchTo(oldcxt);
	FreeExecutorState(estate);
}

/*
 * Update the version at `tid` to `slot` (made by direct_confirmed_version
 * from `c`) as ExecUpdate does, waiting for a concurrent writer, and insert
 * the new version's index entries when the update is not HOT.
 */
static TM_Result
direct_update(Relation rel, ItemPointer tid, TupleTableSlot *slot, const DirectConfirm *c,
			  CommandId cid, Snapshot snapshot, TM_FailureData *tmfd, LockTupleMode *lockmode)
{
	TM_Result	result;
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes = TU_None;
#else
	bool		update_indexes = false;
#endif

	result = table_tuple_update(rel, tid, slot, cid, snapshot, InvalidSnapshot, true,
								tmfd, lockmode, &update_indexes);
#if PG_VERSION_NUM >= 160000
	if (result == TM_Ok && update_indexes != TU_None)
		direct_insert_index_entries(rel, slot, c, update_indexes == TU_Summarizing);
#else
	if (result == TM_Ok && update_indexes)
		direct_insert_index_entries(rel, slot, c, false);
#endif
	return result;
}

/*
 * A record changed by a transaction that committed after this one's
 * snapshot (TM_Updated, TM_Deleted): under REPEATABLE READ and SERIALIZABLE
 * a serialization failure, as the statement would raise.
 */
static void
direct_check_concurrent_change(TM_Result result)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent %s",
						result == TM_Updated ? "update" : "delete")));
}

/*
 * Run a fenced confirmation.  True when the record was found with its
 * fence and updated; then *wake, unless wake is NULL, tells whether a later
 * record of its chat waits for it (per-chat order: claimers are to be woken
 * at commit), seen with a snapshot taken after the update.  A record that
 * frees its chat tells the claim floor about the chat's next record when
 * the floor may have passed over it (durable_claim_floor_held_watched,
 * durable_claim_floor_freed).
 * False when there is no such record or the fence does not hold (the caller
 * diagnoses which).
 */
static bool
direct_confirm(DirectConfirm *c, const DirectRels *rels, bool *wake)
{
	Relation	rel;
	Relation	pkey;
	IndexScanDesc scan;
	TupleTableSlot *version;
	TupleTableSlot *confirmed;
	Snapshot	snapshot;
	CommandId	cid;
	bool		found;
	bool		updated = false;
	bool		held_watched;
	int			i;

	/* As ExecCheckXactReadOnly and ExecUpdate would for the statement. */
	PreventCommandIfReadOnly("UPDATE");
	PreventCommandIfParallelMode("UPDATE");

	rel = table_open(c->heap, RowExclusiveLock);
	direct_check_writable(rel, TRIGGER_TYPE_UPDATE);
	for (i = 0; i < c->nset; i++)
		if (c->set_null[i] && TupleDescAttr(RelationGetDescr(rel), c->set_att[i] - 1)->attnotnull)
			direct_not_null_violation(rel, c->set_att[i]);
	pkey = durable_index_open(c->pkey, RowExclusiveLock);
	c->key.sk_collation = pkey->rd_indcollation[0];

	/* The snapshot and command id SPI would use for an UPDATE here. */
	snapshot = direct_push_snapshot();
	cid = GetCurrentCommandId(true);

	version = table_slot_create(rel, NULL);
	confirmed = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);
	scan = index_beginscan(rel, pkey, snapshot, 1, 0);
	index_rescan(scan, &c->key, 1, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, version);
	index_endscan(scan);

	while (found && direct_fence_holds(version, c))
	{
		ItemPointerData tid = version->tts_tid;
		TM_FailureData tmfd;
		LockTupleMode lockmode;
		TM_Result	result;

		direct_confirmed_version(version, confirmed, c);
		result = direct_update(rel, &tid, confirmed, c, cid, snapshot, &tmfd, &lockmode);
		if (result == TM_Ok)
		{
			updated = true;
			break;
		}
		if (result != TM_Updated && result != TM_Deleted)
			elog(ERROR, "unexpected table_tuple_update status: %u", result);

		/* A concurrent transaction changed the record first and committed. */
		direct_check_concurrent_change(result);
		if (result == TM_Deleted)
		{
			found = false;
			break;
		}
		result = table_tuple_lock(rel, &tid, snapshot, version, cid, lockmode,
								  LockWaitBlock, TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
		if (result == TM_Deleted)
			found = false;
		else if (result != TM_Ok)
			elog(ERROR, "unexpected table_tuple_lock status: %u", result);
		/* TM_Ok: the newest version, locked; check the fence on it again. */
	}

	held_watched = updated && c->frees_chat && durable_claim_floor_held_watched(c->queue);
	if (updated && (wake != NULL || held_watched))
	{
		bool		isnull;
		Datum		chat_id = slot_getattr(confirmed, c->cols->chat_id, &isnull);
		int64		id = DatumGetInt64(slot_getattr(confirmed, c->cols->id, &isnull));
		bool		later;
		int64		next = 0;

		/*
		 * With a snapshot taken after the update, not the statement's: a
		 * later record whose admit committed after the statement began is
		 * seen, and a claimer that found it blocked before the update
		 * (waiting.c) is woken.  Every record a floor refresh passed over
		 * as held had committed before the refresh looked.
		 */
		later = direct_chat_scan(c->heap, c->chat_idx, chat_id, BTGreaterStrategyNumber, id,
								 c->waiting, rels, GetLatestSnapshot(), NULL, &next);
		if (wake != NULL)
			*wake = later;
		if (later && held_watched)
			durable_claim_floor_freed(c->queue, id, next);
	}

	ExecDropSingleTupleTableSlot(confirmed);
	ExecDropSingleTupleTableSlot(version);
	PopActiveSnapshot();
	/* Later statements of the transaction see the change (as after SPI). */
	CommandCounterIncrement();
	index_close(pkey, NoLock);
	table_close(rel, NoLock);
	return updated;
}

/*
 * inbox_complete's update: the record `id`, leased under `token`, becomes
 * done at `now`; *wake (when wake is not NULL): an open record of its chat
 * comes after it.  False when the fence does not hold.
 */
bool
durable_inbox_complete_direct(int64 id, int64 token, TimestampTz now, bool *wake)
{
	const DirectRels *rels = direct_journal_rels(DQ_INBOX);
	const DirectCols *cols = &rels->inbox_cols;
	DirectConfirm c;

	direct_confirm_init(&c, rels->inbox, rels->inbox_pkey, rels->inbox_chat_idx, cols,
						F_INT8EQ, Int64GetDatum(id), token);
	c.states[0] = "leased";
	c.frees_chat = true;
	c.queue = DQ_INBOX;
	direct_set(&c, cols->state, CStringGetTextDatum("done"), false);
	direct_set(&c, cols->done_at, TimestampTzGetDatum(now), false);
	direct_set(&c, cols->finished_at, TimestampTzGetDatum(now), false);
	direct_set(&c, cols->lease_until, (Datum) 0, true);
	return direct_confirm(&c, rels, wake);
}

/*
 * outbox_sent's update: the send `key`, sending or unknown under `token`,
 * becomes sent at `now` with the provider's message id; *wake (when wake is
 * not NULL): a later send of its chat waits for it.  False when the fence
 * does not hold.
 */
bool
durable_outbox_sent_direct(Datum key, int64 token, Datum provider_message_id,
						   TimestampTz now, bool *wake)
{
	const DirectRels *rels = direct_journal_rels(DQ_OUTBOX);
	const DirectCols *cols = &rels->outbox_cols;
	DirectConfirm c;

	direct_confirm_init(&c, rels->outbox, rels->outbox_pkey, rels->outbox_chat_idx, cols,
						F_TEXTEQ, key, token);
	c.waiting = direct_outbox_waiting;
	c.states[0] = "sending";
	c.states[1] = "unknown";
	c.frees_chat = true;
	c.queue = DQ_OUTBOX;
	direct_set(&c, cols->state, CStringGetTextDatum("sent"), false);
	direct_set(&c, cols->sent_at, TimestampTzGetDatum(now), false);
	direct_set(&c, cols->provider_message_id, provider_message_id, false);
	direct_set(&c, cols->lease_until, (Datum) 0, true);
	return direct_confirm(&c, rels, wake);
}

/* ---- The claims ---- */

/* What a lease sets that differs per record: where in its DirectConfirm. */
#define DIRECT_CLAIM_SET_TOKEN 1
#define DIRECT_CLAIM_SET_ATTEMPTS 4

/*
 * An inbox record is claimable when it is open, and pending with its
 * not_before passed, or leased with its lease expired and attempts left.
 * (An expired lease on its last attempt is the sweep's to make dead.)
 */
static bool
direct_inbox_claimable(TupleTableSlot *version, const DirectCols *cols,
					   const DurableClaim *claim)
{
	bool		isnull;
	Datum		value;

	(void) slot_getattr(version, cols->finished_at, &isnull);
	if (!isnull)
		return false;
	value = slot_getattr(version, cols->state, &isnull);
	if (isnull)
		return false;
	if (durable_text_equal_cstring(value, "pending"))
	{
		value = slot_getattr(version, cols->not_before, &isnull);
		return !isnull && DatumGetTimestampTz(value) <= claim->now;
	}
	value = slot_getattr(version, cols->lease_until, &isnull);
	if (isnull || DatumGetTimestampTz(value) >= claim->now)
		return false;
	value = slot_getattr(version, cols->attempts, &isnull);
	return !isnull && DatumGetInt32(value) < claim->max_attempts;
}

/*
 * A send is claimable when it is pending or failed and due.  (An expired
 * sending lease is the sweep's to flag unknown, never claimed again.)
 */
static bool
direct_outbox_claimable(TupleTableSlot *version, const DirectCols *cols,
						const DurableClaim *claim)
{
	bool		isnull;
	Datum		value;

	value = slot_getattr(version, cols->state, &isnull);
	if (isnull || !(durable_text_equal_cstring(value, "pending") ||
					durable_text_equal_cstring(value, "failed")))
		return false;
	value = slot_getattr(version, cols->not_before, &isnull);
	return !isnull && DatumGetTimestampTz(value) <= claim->now;
}

/*
 * The chats a claim found held back by an older unfinished record.  The
 * claim's probe finds the chat's oldest unfinished record, the same one for
 * every later candidate of the chat (one snapshot), so those are passed
 * over without probing again: a chat with a backlog behind its leased head
 * cost every claim, of every chat, a probe per record of the backlog
 * (20,000 records: 260 ms a claim).  A chat id longer than the key (only
 * written by hand) is probed every time.  The claim floor's refresh keeps
 * one too (claim_floor.c).
 */
typedef struct DurableChatSetEntry
{
	char		chat_id[DURABLE_MAX_ID_BYTES + 1];
} DurableChatSetEntry;

void
durable_chat_set_add(DurableChatSet *set, const char *key)
{
	if (set->chats == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(((DurableChatSetEntry *) NULL)->chat_id);
		ctl.entrysize = sizeof(DurableChatSetEntry);
		ctl.hcxt = set->cxt;
		set->chats = hash_create("durable held chats", 16, &ctl,
								 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	(void) hash_search(set->chats, key, HASH_ENTER, NULL);
}

bool
durable_chat_set_has(const DurableChatSet *set, const char *key)
{
	return set->chats != NULL && key != NULL &&
		hash_search(set->chats, key, HASH_FIND, NULL) != NULL;
}

void
durable_chat_set_clear(DurableChatSet *set)
{
	if (set->chats != NULL)
		hash_destroy(set->chats);
	set->chats = NULL;
}

const char *
durable_chat_set_key(Datum chat_id)
{
	text	   *chat = DatumGetTextPP(chat_id);

	if (VARSIZE_ANY_EXHDR(chat) > DURABLE_MAX_ID_BYTES)
		return NULL;
	return text_to_cstring(chat);
}

/*
 * Is this version claimable, and the oldest unfinished record of its chat
 * as `snapshot` sees it?  The WHERE clause of the claim's statement.  (A
 * version found through the chat index is unfinished: every change into or
 * out of the unfinished states changes a column of the index's predicate,
 * so it is not HOT, and what the index finds is what it holds.)  A record
 * held back only by an older one that is being replaced sets
 * claim->in_flight, under READ COMMITTED: that change may finish the older
 * record without a wake reaching the claimer (waiting.c).
 */
static bool
direct_claim_candidate(TupleTableSlot *version, const DirectClaimQueue *q, const DirectRels *rels,
					   Snapshot snapshot, DurableClaim *claim, DurableChatSet *held)
{
	bool		isnull;
	bool		in_flight = false;
	int64		id;
	Datum		chat_id;
	const char *held_key;

	if (!q->claimable(version, q->cols, claim))
		return false;
	id = DatumGetInt64(slot_getattr(version, q->cols->id, &isnull));
	chat_id = slot_getattr(version, q->cols->chat_id, &isnull);
	/* (no copy of the chat id until a chat was held back) */
	held_key = held->chats != NULL ? durable_chat_set_key(chat_id) : NULL;
	if (durable_chat_set_has(held, held_key))
		return false;
	/*
	 * Under REPEATABLE READ and SERIALIZABLE an older record open in either
	 * the transaction's snapshot or the latest one holds the candidate back.
	 * The transaction's may predate an older record that committed before
	 * the candidate was journaled -- when the candidate is the transaction's
	 * own admit or enqueue, or was replayed after the snapshot -- and the
	 * latest one may no longer show an older record that the transaction
	 * saw open (leasing the candidate then would be no serial order).  The
	 * finish of an older record never lands in the transaction's snapshot:
	 * it is not in flight for this claim.
	 */
	if (IsolationUsesXactSnapshot())
	{
		if (!direct_chat_scan(q->heap, q->chat_idx, chat_id, BTLessStrategyNumber, id, NULL, rels,
							  snapshot, NULL, NULL) &&
			!direct_chat_scan(q->heap, q->chat_idx, chat_id, BTLessStrategyNumber, id, NULL, rels,
							  GetLatestSnapshot(), NULL, NULL))
			return true;
	}
	else if (!direct_chat_scan(q->heap, q->chat_idx, chat_id, BTLessStrategyNumber, id, NULL, rels,
							   snapshot,
							   claim->report_in_flight && !claim->in_flight ? &in_flight : NULL, NULL))
		return true;
	claim->in_flight |= in_flight;
	if (held_key == NULL)
		held_key = durable_chat_set_key(chat_id);
	if (held_key != NULL)
		durable_chat_set_add(held, held_key);
	return false;
}

/*
 * The row lock an update of c's columns takes (heap_update's choice): FOR
 * NO KEY UPDATE, or FOR UPDATE when one of them is in the key of a unique
 * index without a predicate -- one you added on `token` or `state`, say.
 * Locked weaker, a claim would then wait in the update for a foreign key's
 * FOR KEY SHARE instead of skipping the record (found by review,
 * 2026-12-06).  (A column set to its own value counts too: the claim skips
 * a record the update might not have waited for.)
 */
static LockTupleMode
direct_update_lock_mode(Relation rel, const DirectConfirm *c)
{
	Bitmapset  *key_attrs = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_KEY);
	LockTupleMode mode = LockTupleNoKeyExclusive;

	for (int i = 0; i < c->nset; i++)
		if (bms_is_member(c->set_att[i] - FirstLowInvalidHeapAttributeNumber, key_attrs))
			mode = LockTupleExclusive;
	bms_free(key_attrs);
	return mode;
}

/*
 * Lease record `version`, a candidate the claim's scan found, to the owner
 * in `c` under a new token, putting the leased version in `leased`: what
 * the claim's UPDATE ... WHERE id = ANY (ARRAY (SELECT ... FOR UPDATE SKIP
 * LOCKED)) does for one row, but for a version changed since the snapshot.
 * The row is locked as ExecLockRows locks it, and skipped if another
 * transaction holds it.  A version that a transaction committed after the
 * snapshot has replaced is skipped without a lock (under REPEATABLE READ and
 * SERIALIZABLE it is a serialization failure): the statement would lock the
 * newest version and then check it, and when that check failed -- the usual
 * case, another claim took the record -- it would keep the lock to the end
 * of its transaction, which for a waiting claim is the end of its wait, and
 * the record's holder could not confirm it until then.  Such a skip counts
 * as a change in flight (claim->in_flight): a waiting claim looks again
 * within a millisecond, with a snapshot that sees the change.  The lock is
 * `lock_mode`, the one the update takes anyway (direct_update_lock_mode):
 * FOR NO KEY UPDATE, so that a record held FOR KEY SHARE (a foreign key
 * checking it) is leased, not skipped.  Then the locked version is updated,
 * which cannot wait.  False when skipped; when leased, `version` holds the
 * version the lease replaced.
 */
static bool
direct_claim_one(Relation rel, TupleTableSlot *version, TupleTableSlot *leased,
				 DirectConfirm *c, LockTupleMode lock_mode, const DirectClaimQueue *q,
				 const DirectRels *rels, Snapshot snapshot, CommandId cid, DurableClaim *claim,
				 DurableChatSet *held)
{
	ItemPointerData tid = version->tts_tid;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	TM_Result	result;
	bool		isnull;
	int32		attempts;

	if (!direct_claim_candidate(version, q, rels, snapshot, claim, held))
		return false;

	DURABLE_FAIL_POINT("claim_lock");
	result = table_tuple_lock(rel, &tid, snapshot, version, cid, lock_mode,
							  LockWaitSkip, 0, &tmfd);
	switch (result)
	{
		case TM_Ok:
			break;
		case TM_Updated:
		case TM_Deleted:
			/* Replaced since the snapshot (see above). */
			direct_check_concurrent_change(result);
			if (claim->report_in_flight)
				claim->in_flight = true;
			return false;
		case TM_WouldBlock:
			/*
			 * Another transaction holds it, and may give it back (a claim
			 * or a confirmation that rolls back wakes nobody).
			 */
			if (claim->report_in_flight)
				claim->in_flight = true;
			return false;
		default:
			return false;
	}

	attempts = DatumGetInt32(slot_getattr(version, q->cols->attempts, &isnull));
	c->set_value[DIRECT_CLAIM_SET_TOKEN] = Int64GetDatum(direct_next_token(rels));
	c->set_value[DIRECT_CLAIM_SET_ATTEMPTS] = Int32GetDatum(attempts + 1);
	direct_confirmed_version(version, leased, c);
	tid = version->tts_tid;
	result = direct_update(rel, &tid, leased, c, cid, snapshot, &tmfd, &lockmode);
	if (result != TM_Ok)
		elog(ERROR, "unexpected table_tuple_update status of a locked tuple: %u", result);
	return true;
}

/* One claim's scan: what each candidate it finds is checked and leased with. */
typedef struct DirectClaimRun
{
	DurableQueue queue;
	const DirectClaimQueue *q;
	const DirectRels *rels;
	DurableClaim *claim;
	Relation	rel;
	Snapshot	snapshot;
	CommandId	cid;
	DirectConfirm c;
	LockTupleMode lock_mode;	/* the lock c's update takes */
	TupleTableSlot *version;	/* the candidate */
	TupleTableSlot *leased;
	DurableChatSet held;
	MemoryContext candidate_cxt;
	DurableClaimSink sink;
	void	   *arg;
	uint64		n;				/* leased so far */
} DirectClaimRun;

/*
 * Lease the candidate in run->version if it is claimable, and pass it to the
 * sink.  An inbox lease below the claim floor, or below a refresh's raise,
 * is told to the floor (durable_claim_floor_leased): a freed record's, or
 * one a refresh under way passed as held.
 */
static bool
direct_claim_offer(DirectClaimRun *run)
{
	MemoryContext oldcxt;
	bool		taken;

	/* Behind a long transaction the walk can be long: let it be cancelled. */
	CHECK_FOR_INTERRUPTS();
	oldcxt = MemoryContextSwitchTo(run->candidate_cxt);
	taken = direct_claim_one(run->rel, run->version, run->leased, &run->c, run->lock_mode,
							 run->q, run->rels,
							 run->snapshot, run->cid, run->claim, &run->held);
	if (taken)
	{
		const DirectClaimQueue *q = run->q;
		Datum		values[Max(DURABLE_CLAIMED_NCOLS, DURABLE_CLAIMED_SEND_NCOLS)];
		bool		nulls[Max(DURABLE_CLAIMED_NCOLS, DURABLE_CLAIMED_SEND_NCOLS)];
		bool		isnull;
		Datum		was;
		int			i;

		Assert(q->nclaimed <= lengthof(values));
		for (i = 0; i < q->nclaimed; i++)
			values[i] = slot_getattr(run->leased, q->claimed_att[i], &nulls[i]);
		was = slot_getattr(run->version, q->cols->state, &isnull);
		run->sink(run->arg, values, nulls, was);
		run->n++;
		if (run->queue == DQ_INBOX)
			durable_claim_floor_leased(run->queue,
									   DatumGetInt64(slot_getattr(run->leased, q->cols->id, &isnull)),
									   run->claim->lease_until);
	}
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(run->candidate_cxt);
	return taken;
}

/*
 * The due time of a waiting version in `slot` (pending, or a failed send)
 * that is not due at `now` (0: none, or not waiting).
 */
static TimestampTz
direct_waiting_due_after(TupleTableSlot *slot, const DirectCols *cols, TimestampTz now)
{
	bool		isnull;
	Datum		value = slot_getattr(slot, cols->state, &isnull);

	if (isnull || !(durable_text_equal_cstring(value, "pending") ||
					durable_text_equal_cstring(value, "failed")))
		return 0;
	value = slot_getattr(slot, cols->not_before, &isnull);
	if (isnull || DatumGetTimestampTz(value) <= now)
		return 0;
	return DatumGetTimestampTz(value);
}

/*
 * Look at the records below the floor that completions freed (claim->freed,
 * ascending) through `scan`, leasing those claimable.  Those the snapshot
 * shows taken (by a claim that committed), finished or not due go to
 * *stale: a claim that took one told the floor when its lease ends
 * (direct_claim_offer), one not due yet tells it now (a refresh that read the clock later may have passed
 * it as due), and every other way back to claimable lowers the floor.  One
 * held back by its chat (the completion that freed it has not committed) or
 * locked by another transaction is left for later claims -- and so is every
 * one, when the snapshot may not show a record as it is: this transaction's
 * own earlier change to it (which a rollback undoes), or, under REPEATABLE
 * READ or SERIALIZABLE, an admit or a change committed since the
 * transaction began.
 */
static void
direct_claim_freed(DirectClaimRun *run, IndexScanDesc scan, DurableFloorFreed *stale)
{
	const DurableFloorFreed *freed = &run->claim->freed;
	bool		sees_all = !IsolationUsesXactSnapshot() &&
		!TransactionIdIsValid(GetTopTransactionIdIfAny());
	ScanKeyData key;

	stale->n = 0;
	for (int i = 0; i < freed->n && run->n < (uint64) run->claim->max; i++)
	{
		bool		found;

		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(freed->id[i]));
		index_rescan(scan, &key, 1, NULL, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, run->version);
		if (found && run->q->claimable(run->version, run->q->cols, run->claim))
		{
			(void) direct_claim_offer(run);
			continue;
		}
		if (!sees_all)
			continue;
		if (found)
		{
			TimestampTz due = direct_waiting_due_after(run->version, run->q->cols, run->claim->now);

			if (due != 0)
				durable_claim_floor_comes_due(run->queue, freed->id[i], due);
		}
		stale->id[stale->n] = freed->id[i];
		stale->stamp[stale->n++] = freed->stamp[i];
	}
}

/*
 * A claim's lease, without the executor: scan the queue's open index in id
 * order from `floor` with the snapshot an SPI statement would take (after
 * the freed records below it), and lease up to `max` claimable records,
 * each the oldest unfinished record of its chat as that snapshot sees it,
 * passing each leased record's result columns, and the state it had, to
 * `sink`, oldest first.  Returns how many.
 *
 * The SQL statement cost an executor start and end, and a correlated
 * subplan start per candidate: at 8 clients a fifth of the queue path's
 * CPU (perf).
 */
static uint64
direct_claim(DurableQueue queue, const DirectRels *rels, DurableClaim *claim,
			 DurableClaimSink sink, void *arg)
{
	const DirectClaimQueue *q = &rels->claims[queue];
	const DirectCols *cols = q->cols;
	DirectClaimRun run = {.queue = queue, .q = q, .rels = rels, .claim = claim, .sink = sink,
	.arg = arg};
	Relation	index;
	ScanKeyData key;
	IndexScanDesc scan;
	DurableFloorFreed stale = {0};

	PreventCommandIfReadOnly("UPDATE");
	PreventCommandIfParallelMode("UPDATE");
	run.rel = table_open(q->heap, RowExclusiveLock);
	direct_check_writable(run.rel, TRIGGER_TYPE_UPDATE);
	index = durable_index_open(q->open_idx, AccessShareLock);
	claim->in_flight = false;

	run.c.cols = cols;
	direct_set(&run.c, cols->state, CStringGetTextDatum(q->leased_state), false);
	direct_set(&run.c, cols->token, (Datum) 0, false);	/* DIRECT_CLAIM_SET_TOKEN */
	direct_set(&run.c, cols->owner, claim->owner, false);
	direct_set(&run.c, cols->lease_until, TimestampTzGetDatum(claim->lease_until), false);
	direct_set(&run.c, cols->attempts, (Datum) 0, false);	/* DIRECT_CLAIM_SET_ATTEMPTS */
	if (cols->sends != InvalidAttrNumber)
		direct_set(&run.c, cols->sends, Int32GetDatum(0), false);
	Assert(run.c.set_att[DIRECT_CLAIM_SET_TOKEN] == cols->token &&
		   run.c.set_att[DIRECT_CLAIM_SET_ATTEMPTS] == cols->attempts);
	run.lock_mode = direct_update_lock_mode(run.rel, &run.c);

	run.snapshot = direct_push_snapshot();
	run.cid = GetCurrentCommandId(true);
	run.version = table_slot_create(run.rel, NULL);
	run.leased = MakeSingleTupleTableSlot(RelationGetDescr(run.rel), &TTSOpsVirtual);
	run.held.cxt = CurrentMemoryContext;
	run.candidate_cxt = AllocSetContextCreate(CurrentMemoryContext, "durable claim candidate",
											  ALLOCSET_SMALL_SIZES);

	scan = index_beginscan(run.rel, index, run.snapshot, 1, 0);
	if (claim->freed.n > 0)
		direct_claim_freed(&run, scan, &stale);
	ScanKeyInit(&key, 1, BTGreaterEqualStrategyNumber, F_INT8GE, Int64GetDatum(claim->floor));
	index_rescan(scan, &key, 1, NULL, 0);
	while (run.n < (uint64) claim->max &&
		   index_getnext_slot(scan, ForwardScanDirection, run.version))
		(void) direct_claim_offer(&run);
	index_endscan(scan);
	if (stale.n > 0)
		durable_claim_floor_unfree(queue, &stale);

	durable_chat_set_clear(&run.held);
	MemoryContextDelete(run.candidate_cxt);
	ExecDropSingleTupleTableSlot(run.leased);
	ExecDropSingleTupleTableSlot(run.version);
	PopActiveSnapshot();
	CommandCounterIncrement();
	index_close(index, NoLock);
	table_close(run.rel, NoLock);
	return run.n;
}

/* The lease of `queue`'s claim (inbox_claim, outbox_claim). */
uint64
durable_claim_direct(DurableQueue queue, DurableClaim *claim, DurableClaimSink sink,
					 void *arg, bool *in_flight)
{
	const DirectRels *rels = direct_journal_rels(queue);
	uint64		n;

	claim->report_in_flight = in_flight != NULL;
	n = direct_claim(queue, rels, claim, sink, arg);
	if (in_flight != NULL)
		*in_flight = claim->in_flight;
	return n;
}

/* What the claim floor of `queue` scans: the claim's journal and index. */
void
durable_queue_rels(DurableQueue queue, DurableQueueRels *out)
{
	const DirectClaimQueue *q = &direct_journal_rels(queue)->claims[queue];

	out->heap = q->heap;
	out->index = q->open_idx;
	out->state = q->cols->state;
	out->lease_until = q->cols->lease_until;
	out->not_before = q->cols->not_before;
	out->chat_idx = q->chat_idx;
	out->chat_id = q->cols->chat_id;
	out->finished_at = q->cols->finished_at;
}

/* ---- New records ---- */

/* A virtual slot of `rel` with every column NULL, not yet stored. */
static TupleTableSlot *
direct_null_row(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		slot->tts_values[i] = (Datum) 0;
		slot->tts_isnull[i] = true;
	}
	return slot;
}

/*
 * Has the type (its pg_type row) a default of its own?  As get_typdefault
 * reads it: a domain's is an expression (typdefaultbin), a base type's the
 * text of a value (typdefault).
 */
static bool
direct_type_has_default(HeapTuple typtup)
{
	return !heap_attisnull(typtup, Anum_pg_type_typdefaultbin, NULL) ||
		!heap_attisnull(typtup, Anum_pg_type_typdefault, NULL);
}

/* Whether the journal `rel` has a column of such a type (DirectTypeCols). */
static bool
direct_has_type_cols(Relation rel)
{
	DirectTypeCols *tc = &direct_type_cols[RelationGetRelid(rel) == direct_rels_cache.outbox];

	if (!tc->valid || tc->heap != RelationGetRelid(rel))
	{
		uint64		invalidations = direct_invalidations;

		tc->heap = RelationGetRelid(rel);
		tc->any = false;
		for (int i = 0; i < RelationGetDescr(rel)->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), i);
			HeapTuple	tup;

			if (att->attisdropped)
				continue;
			tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(att->atttypid));
			if (!HeapTupleIsValid(tup))
				elog(ERROR, "cache lookup failed for type %u", att->atttypid);
			if (((Form_pg_type) GETSTRUCT(tup))->typtype == TYPTYPE_DOMAIN ||
				direct_type_has_default(tup))
				tc->any = true;
			ReleaseSysCache(tup);
		}
		tc->valid = (invalidations == direct_invalidations);
	}
	return tc->any;
}

/*
 * What INSERT does with a column that it is given no value for and that
 * has no default of its own (build_column_default, expand_targetlist): it
 * writes the default of the column's type, refused here as a column's
 * default is (direct_new_row), or else NULL, coerced to the type when that
 * is a domain, which checks the NOT NULL and CHECK constraints of the
 * domain and of the domains under it.
 */
static void
direct_check_type_null(Relation rel, Form_pg_attribute att)
{
	HeapTuple	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(att->atttypid));
	bool		has_default;
	bool		domain;
	Node	   *null_value;
	ExprContext *econtext;
	bool		isnull;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for type %u", att->atttypid);
	has_default = direct_type_has_default(tup);
	domain = ((Form_pg_type) GETSTRUCT(tup))->typtype == TYPTYPE_DOMAIN;
	ReleaseSysCache(tup);
	if (has_default)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("column \"%s\" of \"durable.%s\" is not supported",
						NameStr(att->attname), RelationGetRelationName(rel)),
				 errdetail("Its type %s has a default, and durable writes its journals directly and leaves the columns it does not know NULL.",
						   format_type_be(att->atttypid)),
				 domain ?
				 errhint("Drop the column, or the type's default: ALTER DOMAIN %s DROP DEFAULT.",
						 format_type_be_qualified(att->atttypid)) :
				 errhint("Drop the column, or change it to a type without a default.")));
	if (!domain)
		return;
	null_value = coerce_to_domain((Node *) makeNullConst(att->atttypid, att->atttypmod,
														 att->attcollation),
								  InvalidOid, -1, att->atttypid, COERCION_IMPLICIT,
								  COERCE_IMPLICIT_CAST, -1, false);
	econtext = CreateStandaloneExprContext();
	(void) ExecEvalExprSwitchContext(ExecInitExpr((Expr *) null_value, NULL), econtext, &isnull);
	FreeExprContext(econtext, true);
}

/*
 * A virtual slot of `rel` with `values` for the columns `atts` and NULL for
 * every other one, which is what INSERT would write only for a column
 * without a default that allows NULL: one added by hand that does not is
 * refused.
 */
static TupleTableSlot *
direct_new_row(Relation rel, const AttrNumber *atts, const Datum *values,
			   const bool *nulls, int n)
{
	TupleDesc	desc = RelationGetDescr(rel);
	TupleTableSlot *slot = direct_null_row(rel);
	bool		typed = direct_has_type_cols(rel);
	int			i;

	for (i = 0; i < n; i++)
	{
		slot->tts_values[atts[i] - 1] = values[i];
		slot->tts_isnull[atts[i] - 1] = nulls[i];
		if (nulls[i] && TupleDescAttr(desc, atts[i] - 1)->attnotnull)
			direct_not_null_violation(rel, atts[i]);
	}
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		bool		filled = att->attnotnull || att->atthasdef;
		int			j;

		if (att->attisdropped || !(filled || typed))
			continue;
		for (j = 0; j < n && atts[j] != att->attnum; j++)
			;
		if (j < n)
			continue;
		if (filled)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("column \"%s\" of \"durable.%s\" is not supported",
							NameStr(att->attname), RelationGetRelationName(rel)),
					 errdetail("durable writes its journals directly and leaves the columns it does not know NULL."),
					 errhint("Drop the column, or allow NULL in it and drop its default.")));
		if (typed)
			direct_check_type_null(rel, att);
	}
	ExecStoreVirtualTuple(slot);
	return slot;
}

/*
 * A conflicting row found by an INSERT ... ON CONFLICT DO NOTHING must be
 * visible to a transaction snapshot (REPEATABLE READ, SERIALIZABLE), else
 * the statement fails as ExecCheckTIDVisible makes it: the row committed
 * after the snapshot, and what the caller reads next would not find it.
 */
static void
direct_check_conflict_visible(Relation rel, ItemPointer tid)
{
	TupleTableSlot *existing;

	if (!IsolationUsesXactSnapshot())
		return;
	existing = table_slot_create(rel, NULL);
	if (!table_tuple_fetch_row_version(rel, tid, SnapshotAny, existing))
		elog(ERROR, "failed to fetch conflicting tuple for ON CONFLICT");
	if (!table_tuple_satisfies_snapshot(rel, existing, GetTransactionSnapshot()))
	{
		bool		isnull;
		TransactionId xmin;

		xmin = DatumGetTransactionId(slot_getsysattr(existing, MinTransactionIdAttributeNumber,
													 &isnull));
		/* A row of this transaction's own that it cannot see is no race. */
		if (!TransactionIdIsCurrentTransactionId(xmin))
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update")));
	}
	ExecDropSingleTupleTableSlot(existing);
}

/*
 * The arbiter must be a valid index, as ON CONFLICT's inference requires: one
 * left invalid by a failed CREATE UNIQUE INDEX CONCURRENTLY lacks entries,
 * and a conflict with a row it lacks would go unnoticed.
 */
static int
direct_index_position(const ResultRelInfo *rri, Oid index_oid)
{
	int			i;

	for (i = 0; i < rri->ri_NumIndices; i++)
		if (RelationGetRelid(rri->ri_IndexRelationDescs[i]) == index_oid)
			return i;
	return -1;
}

static Oid
direct_check_arbiter(ResultRelInfo *rri, Oid arbiter)
{
	int			i = direct_index_position(rri, arbiter);

	/* Swapped out by a REINDEX CONCURRENTLY since it was looked up? */
	if (i < 0 || !rri->ri_IndexRelationDescs[i]->rd_index->indisvalid)
	{
		const DirectIndexDef *def;
		Oid			renamed = direct_index_renamed(arbiter, &def);

		if (OidIsValid(renamed) && renamed != arbiter)
		{
			Relation	index = index_open(renamed, AccessShareLock);

			if (def != NULL)
				direct_check_index_def(index, def);
			index_close(index, AccessShareLock);
			arbiter = renamed;
			i = direct_index_position(rri, arbiter);
		}
	}
	if (i < 0)
		elog(ERROR, "durable: index %u is not an index of \"%s\"", arbiter,
			 RelationGetRelationName(rri->ri_RelationDesc));
	direct_require_complete_index(rri->ri_IndexRelationDescs[i]);
	return arbiter;
}

/*
 * Open a journal for a direct insert, refusing what the statement would
 * refuse (ExecCheckXactReadOnly, ExecInsert) and triggers.  Before the
 * sequences are drawn from, so that a read-only transaction hears about
 * the INSERT rather than nextval.
 *
 * A leased row is refused what its updates would be refused as well: the
 * insert may be followed by one at once (durable_restamp_inserted_lease,
 * after a wait), and every call of the lease's holder updates it.  (When
 * that was checked only before the update, a trigger on UPDATE failed the
 * insert only when it had waited: under load, at random.)
 */
static Relation
direct_open_for_insert(Oid heap, bool leased)
{
	Relation	rel;

	PreventCommandIfReadOnly("INSERT");
	PreventCommandIfParallelMode("INSERT");
	DURABLE_FAIL_POINT("insert_open");
	rel = table_open(heap, RowExclusiveLock);
	direct_check_writable(rel, leased ? TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE : TRIGGER_TYPE_INSERT);
	return rel;
}

/*
 * How many inserts after one that met an existing key look for a conflict
 * before inserting (direct_insert).  Redeliveries and handler replays come
 * in runs; a fresh key, the common case, needs no look.
 */
#define DIRECT_PRECHECKS_AFTER_CONFLICT 16

static int	direct_prechecks_left = 0;

/*
 * Must this insert look for a conflict in its arbiter before inserting?
 * Yes after a recent conflict (direct_prechecks_left), and whenever
 * inserting first could fail where the statement answers from the journal
 * or changes nothing:
 *  - another unique index or an exclusion constraint the row belongs in (one
 *    added by hand) would check the duplicate against its existing record
 *    and raise 23505 or 23P01, where the statement never inserts it.
 *    `fresh_key` is exempt: the inbox's primary key, on an id drawn from
 *    its sequence for this row, which meets an existing id only if the
 *    sequence was set back by hand (then every admit fails, as the
 *    statement's would);
 *  - SERIALIZABLE: the insert would check the pages it writes for
 *    read-write conflicts (CheckForSerializableConflictIn), which a
 *    duplicate's look alone does not, and could fail with 40001.
 * `rri` has the indexes the row belongs in open (direct_open_indexes).
 */
static bool
direct_look_first(const ResultRelInfo *rri, Oid arbiter, Oid fresh_key)
{
	int			i;

	if (direct_prechecks_left > 0)
	{
		direct_prechecks_left--;
		return true;
	}
	if (IsolationIsSerializable())
		return true;
	for (i = 0; i < rri->ri_NumIndices; i++)
	{
		Relation	index = rri->ri_IndexRelationDescs[i];
		Oid			oid = RelationGetRelid(index);

		if (oid == arbiter || oid == fresh_key)
			continue;
		if (index->rd_index->indisunique || rri->ri_IndexRelationInfo[i]->ii_ExclusionOps != NULL)
			return true;
	}
	return false;
}

/*
 * Insert the row in `slot` into the journal `rel` as INSERT ... ON
 * CONFLICT DO NOTHING with the unique index `arbiter` does (ExecInsert's
 * speculative insertion): look for a conflicting row in the arbiter,
 * waiting for its inserter if that is still in progress; insert the row
 * with a speculative token and its index entries; and if a concurrent
 * insert of the same key slipped in between, kill the row and start again.
 * True when the row went in, false when a conflicting row exists.  Other
 * unique indexes raise a unique violation as they would for the statement.
 *
 * The first look is skipped unless this backend met a conflict in its last
 * DIRECT_PRECHECKS_AFTER_CONFLICT inserts (direct_look_first).  It is not
 * needed to find the conflict: the arbiter's own insertion
 * (UNIQUE_CHECK_PARTIAL) notices a live or in-progress row with the key,
 * and the row is then killed and the loop starts again with the look, as
 * after a race.  ExecInsert always looks first so that a workload of
 * conflicts does not leave a killed row behind each time (its comment at
 * "vlock"); a journal's inserts are fresh keys but for redeliveries, and
 * the look cost 5 % of the bot path's CPU (one descent of the arbiter and a
 * scan's set-up and tear-down).  A backend meeting duplicates pays one
 * killed row, then looks again.
 */
static bool
direct_insert(Relation rel, Oid arbiter, Oid fresh_key, TupleTableSlot *slot)
{
	EState	   *estate = CreateExecutorState();
	MemoryContext oldcxt = MemoryContextSwitchTo(estate->es_query_cxt);
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	List	   *arbiters;
	CommandId	cid = GetCurrentCommandId(true);
	bool		look_first;
	bool		inserted;

	InitResultRelInfo(rri, rel, 0, NULL, 0);
	(void) direct_open_indexes(rri, true, slot, estate);
	arbiter = direct_check_arbiter(rri, arbiter);
	arbiters = list_make1_oid(arbiter);
	estate->es_output_cid = cid;
	look_first = direct_look_first(rri, arbiter, fresh_key);
	for (;;)
	{
		ItemPointerData conflict;
		uint32		spec_token;
		bool		spec_conflict = false;

		CHECK_FOR_INTERRUPTS();
		if (look_first && !ExecCheckIndexConstraints(rri, slot, estate, &conflict, arbiters))
		{
			direct_prechecks_left = DIRECT_PRECHECKS_AFTER_CONFLICT;
			direct_check_conflict_visible(rel, &conflict);
			inserted = false;
			break;
		}
		look_first = true;
		spec_token = SpeculativeInsertionLockAcquire(GetCurrentTransactionId());
		table_tuple_insert_speculative(rel, slot, cid, 0, NULL, spec_token);
#if PG_VERSION_NUM >= 160000
		(void) ExecInsertIndexTuples(rri, slot, estate, false, true, &spec_conflict,
									 arbiters, false);
#else
		(void) ExecInsertIndexTuples(rri, slot, estate, false, true, &spec_conflict,
									 arbiters);
#endif
		table_tuple_complete_speculative(rel, slot, spec_token, !spec_conflict);
		/* Whoever waits for the decision re-checks the row now. */
		SpeculativeInsertionLockRelease(GetCurrentTransactionId());
		if (!spec_conflict)
		{
			inserted = true;
			break;
		}
	}
	ExecCloseIndices(rri);
	MemoryContextSwitchTo(oldcxt);
	FreeExecutorState(estate);
	/* Later statements of the transaction see the row (as after SPI). */
	CommandCounterIncrement();
	return inserted;
}

/* direct_insert of a new row (direct_new_row); closes `rel`. */
static bool
direct_insert_row(Relation rel, Oid arbiter, Oid fresh_key, const AttrNumber *atts,
				  const Datum *values, const bool *nulls, int n)
{
	TupleTableSlot *slot = direct_new_row(rel, atts, values, nulls, n);
	bool		inserted = direct_insert(rel, arbiter, fresh_key, slot);

	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, NoLock);
	return inserted;
}

bool
durable_outbox_insert_direct(const DurableNewSend *send, int64 *token)
{
	const DirectRels *rels = direct_journal_rels(DQ_OUTBOX);
	Datum		values[DIRECT_NEW_SEND_NCOLS];
	bool		nulls[DIRECT_NEW_SEND_NCOLS];
	Relation	rel;

	rel = direct_open_for_insert(rels->outbox, true);
	/* Drawn before the insert, as the statement's VALUES would be. */
	*token = direct_next_token(rels);
	memset(nulls, 0, sizeof(nulls));
	values[0] = Int64GetDatum(nextval_internal(rels->outbox_id_seq, true));
	values[1] = send->key;
	values[2] = send->chat_id;
	values[3] = send->payload;
	values[4] = CStringGetTextDatum("sending");
	values[5] = Int32GetDatum(1);
	values[6] = Int64GetDatum(*token);
	values[7] = send->owner;
	values[8] = TimestampTzGetDatum(send->lease_until);
	values[9] = TimestampTzGetDatum(send->now);
	values[10] = Int64GetDatum(send->inbound_id);
	nulls[10] = !send->has_inbound;
	values[11] = TimestampTzGetDatum(send->now);

	return direct_insert_row(rel, rels->outbox_pkey, InvalidOid, rels->new_send_att, values,
							 nulls, DIRECT_NEW_SEND_NCOLS);
}

/*
 * Wait for the transactions in progress that are inserting into `heap` a
 * row whose columns `atts` hold `values`, as direct_insert's look on the
 * unique index `arbiter` does, without inserting anything: true when such a
 * row exists afterwards (under a transaction snapshot, 40001 when the
 * snapshot cannot see it, as the insert would raise).  For oversized
 * payloads, which are not journaled: a call that finds no row cannot tell
 * one being journaled by a transaction in progress from none.
 */
static bool
direct_await_conflict(Oid heap, Oid arbiter, const AttrNumber *atts, const Datum *values,
					  int natts)
{
	Relation	rel = table_open(heap, RowExclusiveLock);
	TupleTableSlot *slot = direct_null_row(rel);
	EState	   *estate = CreateExecutorState();
	MemoryContext oldcxt = MemoryContextSwitchTo(estate->es_query_cxt);
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	ItemPointerData conflict;
	bool		exists;

	for (int i = 0; i < natts; i++)
	{
		slot->tts_values[atts[i] - 1] = values[i];
		slot->tts_isnull[atts[i] - 1] = false;
	}
	ExecStoreVirtualTuple(slot);

	InitResultRelInfo(rri, rel, 0, NULL, 0);
	ExecOpenIndices(rri, true);
	exists = !ExecCheckIndexConstraints(rri, slot, estate, &conflict,
										list_make1_oid(direct_check_arbiter(rri, arbiter)));
	if (exists)
		direct_check_conflict_visible(rel, &conflict);
	ExecCloseIndices(rri);
	MemoryContextSwitchTo(oldcxt);
	FreeExecutorState(estate);
	ExecDropSingleTupleTableSlot(slot);
	table_close(rel, NoLock);
	return exists;
}

/*
 * outbox_begin's and outbox_enqueue's oversized payload: so that it cannot
 * bypass, or be refused for, a send of its key another transaction is
 * journaling.
 */
bool
durable_outbox_await_key(Datum key)
{
	const DirectRels *rels = direct_journal_rels(DQ_OUTBOX);
	AttrNumber	key_att = rels->new_send_att[1];

	return direct_await_conflict(rels->outbox, rels->outbox_pkey, &key_att, &key, 1);
}

/*
 * inbox_admit's oversized payload: so that it is not refused for a message
 * another transaction is journaling (one admitting it for another chat,
 * which the chat lock does not order).
 */
bool
durable_inbox_await_message(const DurableNewMessage *msg)
{
	const DirectRels *rels = direct_journal_rels(DQ_INBOX);
	AttrNumber	atts[2] = {rels->new_message_att[1],
	msg->has_message_id ? rels->new_message_att[2] : rels->new_message_att[3]};
	Datum		values[2] = {msg->source, msg->has_message_id ? msg->message_id : msg->content_hash};

	return direct_await_conflict(rels->inbox,
								 msg->has_message_id ? rels->inbox_message_id_key :
								 rels->inbox_content_hash_key,
								 atts, values, 2);
}

bool
durable_inbox_insert_direct(const DurableNewMessage *msg, int64 *id)
{
	const DirectRels *rels = direct_journal_rels(DQ_INBOX);
	Datum		values[DIRECT_NEW_MESSAGE_NCOLS];
	bool		nulls[DIRECT_NEW_MESSAGE_NCOLS];
	Relation	rel;

	rel = direct_open_for_insert(rels->inbox, msg->leased);
	*id = nextval_internal(rels->inbox_id_seq, true);
	memset(nulls, 0, sizeof(nulls));
	values[0] = Int64GetDatum(*id);
	values[1] = msg->source;
	values[2] = msg->message_id;
	nulls[2] = !msg->has_message_id;
	values[3] = msg->content_hash;
	nulls[3] = msg->has_message_id;
	values[4] = msg->chat_id;
	values[5] = msg->kind;
	values[6] = msg->payload;
	values[7] = CStringGetTextDatum(msg->leased ? "leased" : "pending");
	values[8] = Int32GetDatum(msg->leased ? 1 : 0);
	values[9] = Int64GetDatum(msg->token);
	nulls[9] = !msg->leased;
	values[10] = msg->owner;
	nulls[10] = !msg->leased;
	values[11] = TimestampTzGetDatum(msg->lease_until);
	nulls[11] = !msg->leased;
	values[12] = TimestampTzGetDatum(msg->now);
	values[13] = TimestampTzGetDatum(msg->now);
	values[14] = Int32GetDatum(0);

	return direct_insert_row(rel, msg->has_message_id ? rels->inbox_message_id_key :
							 rels->inbox_content_hash_key, rels->inbox_pkey,
							 rels->new_message_att, values, nulls, DIRECT_NEW_MESSAGE_NCOLS);
}

/* ---- The retention purge ---- */

/*
 * Delete up to `limit` records of the journal `heap` in state `state`
 * finished in [from, cutoff), oldest first, found through `index` (on their
 * finish time, column `finished`): what DELETE ... WHERE id = ANY (ARRAY
 * (SELECT ... ORDER BY finish time LIMIT n FOR UPDATE SKIP LOCKED)) does,
 * without first writing a row lock for every record (half the purge's WAL
 * records and CPU).  A record that another transaction holds or changed
 * (a replay) is skipped, never waited for -- but under REPEATABLE READ and
 * SERIALIZABLE one changed by a transaction that committed after the
 * snapshot is a serialization failure, as in the statement (until
 * 2026-12-06 it was skipped, found by review).  A record this transaction
 * itself locked (SELECT ... FOR UPDATE before the purge) is skipped too,
 * where the statement would delete it.  -1 when the journal has
 * triggers on DELETE (a foreign key referencing it, say), rules or
 * row-level security that binds its owner, or the index is not valid: the
 * caller runs the statement instead, which honours them.
 */
static int64
direct_purge(Oid heap, Oid index_oid, AttrNumber state_att, const char *state,
			 AttrNumber finished_att, TimestampTz from, TimestampTz cutoff, int64 limit,
			 TimestampTz *last)
{
	Relation	rel;
	Relation	index;
	ScanKeyData keys[2];
	int			nkeys = 0;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	Snapshot	snapshot;
	CommandId	cid;
	int64		deleted = 0;

	PreventCommandIfReadOnly("DELETE");
	PreventCommandIfParallelMode("DELETE");
	rel = table_open(heap, RowExclusiveLock);
	index = direct_index_open_current(index_oid, AccessShareLock);
	if ((rel->trigdesc != NULL &&
		 (rel->trigdesc->trig_delete_before_row || rel->trigdesc->trig_delete_after_row ||
		  rel->trigdesc->trig_delete_before_statement ||
		  rel->trigdesc->trig_delete_after_statement)) ||
		rel->rd_rules != NULL || direct_rls_binds(rel) || !direct_index_complete(index))
	{
		index_close(index, AccessShareLock);
		table_close(rel, NoLock);
		return -1;
	}
	CheckCmdReplicaIdentity(rel, CMD_DELETE);

	snapshot = direct_push_snapshot();
	cid = GetCurrentCommandId(true);
	if (from != DT_NOBEGIN)
		ScanKeyInit(&keys[nkeys++], 1, BTGreaterEqualStrategyNumber, F_TIMESTAMPTZ_GE,
					TimestampTzGetDatum(from));
	ScanKeyInit(&keys[nkeys++], 1, BTLessStrategyNumber, F_TIMESTAMPTZ_LT,
				TimestampTzGetDatum(cutoff));
	scan = index_beginscan(rel, index, snapshot, nkeys, 0);
	index_rescan(scan, keys, nkeys, NULL, 0);
	slot = table_slot_create(rel, NULL);
	while (deleted < limit && index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		value;
		ItemPointerData tid;
		TM_FailureData tmfd;
		TM_Result	result;

		/* The version the snapshot sees must still be finished, and long ago. */
		value = slot_getattr(slot, state_att, &isnull);
		if (isnull || !durable_text_equal_cstring(value, state))
			continue;
		value = slot_getattr(slot, finished_att, &isnull);
		if (isnull || DatumGetTimestampTz(value) >= cutoff)
			continue;
		tid = slot->tts_tid;
		result = table_tuple_delete(rel, &tid, cid, snapshot, InvalidSnapshot, false,
									&tmfd, false);
		if (result == TM_Ok)
		{
			deleted++;
			if (last != NULL)
				*last = DatumGetTimestampTz(value);
		}
		else if (result == TM_Updated || result == TM_Deleted)
			direct_check_concurrent_change(result);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	PopActiveSnapshot();
	CommandCounterIncrement();
	index_close(index, NoLock);
	table_close(rel, NoLock);
	return deleted;
}

int64
durable_inbox_purge_direct(TimestampTz from, TimestampTz cutoff, int64 limit, TimestampTz *last)
{
	const DirectRels *rels = direct_journal_rels(DQ_INBOX);

	return direct_purge(rels->inbox, rels->inbox_done_at_idx, rels->inbox_cols.state, "done",
						rels->inbox_cols.done_at, from, cutoff, limit, last);
}

int64
durable_outbox_purge_direct(TimestampTz from, TimestampTz cutoff, int64 limit, TimestampTz *last)
{
	const DirectRels *rels = direct_journal_rels(DQ_OUTBOX);

	return direct_purge(rels->outbox, rels->outbox_sent_at_idx, rels->outbox_cols.state, "sent",
						rels->outbox_cols.sent_at, from, cutoff, limit, last);
}
