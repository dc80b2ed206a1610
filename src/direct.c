/*-------------------------------------------------------------------------
 *
 * direct.c
 *		Reads of the journals done without the executor: the per-chat
 *		probes and the fencing token, on the paths every message takes.
 *
 * An SPI statement costs an executor start and end, a plan-cache check and
 * the opening of every index of its table, whatever it does.  The bot path
 * (inbox_admit with an instance, then inbox_complete) asks one question per
 * call that needs none of it: is there an open record in this chat (before
 * or after a given id)?  Asked inside the admit's INSERT and the complete's
 * RETURNING, the question's sub-plan cost as much to start as to run
 * (measured with perf: 15 % of the complete's CPU).  Here it is one
 * btree descent of inbox_chat_unfinished_idx with the snapshot an SPI
 * statement would take at this point: the same answer.  outbox_sent asks
 * the outbox's version of it (a later send of the chat waiting to be sent)
 * on outbox_chat_unfinished_idx.
 *
 * The OIDs of durable's relations are looked up once per backend and
 * forgotten when a relcache invalidation names one of them (the extension
 * dropped and created again, say).
 *
 * IDENTIFICATION
 *	  src/direct.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "executor/tuptable.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/* durable's relations read here; valid until an invalidation names one. */
typedef struct DirectRels
{
	bool		valid;
	Oid			inbox;
	Oid			inbox_chat_idx; /* inbox_chat_unfinished_idx (chat_id, id) */
	Oid			outbox;
	Oid			outbox_chat_idx;	/* outbox_chat_unfinished_idx (chat_id, id) */
	AttrNumber	outbox_state;
	Oid			token_seq;
} DirectRels;

static DirectRels direct_rels_cache;
static bool direct_callback_registered = false;

static void
direct_invalidate(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) ||
		relid == direct_rels_cache.inbox ||
		relid == direct_rels_cache.inbox_chat_idx ||
		relid == direct_rels_cache.outbox ||
		relid == direct_rels_cache.outbox_chat_idx ||
		relid == direct_rels_cache.token_seq)
		direct_rels_cache.valid = false;
}

static Oid
direct_relid(const char *name, Oid nsp)
{
	Oid			relid = get_relname_relid(name, nsp);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("relation \"durable.%s\" does not exist", name),
				 errhint("The durable extension is damaged: drop it and create it again.")));
	return relid;
}

static const DirectRels *
direct_rels(void)
{
	if (!direct_rels_cache.valid)
	{
		Oid			nsp = get_namespace_oid("durable", false);

		if (!direct_callback_registered)
		{
			CacheRegisterRelcacheCallback(direct_invalidate, (Datum) 0);
			direct_callback_registered = true;
		}
		direct_rels_cache.inbox = direct_relid("inbox", nsp);
		direct_rels_cache.inbox_chat_idx = direct_relid("inbox_chat_unfinished_idx", nsp);
		direct_rels_cache.outbox = direct_relid("outbox", nsp);
		direct_rels_cache.outbox_chat_idx = direct_relid("outbox_chat_unfinished_idx", nsp);
		direct_rels_cache.outbox_state = get_attnum(direct_rels_cache.outbox, "state");
		if (direct_rels_cache.outbox_state == InvalidAttrNumber)
			elog(ERROR, "column \"state\" of durable.outbox does not exist");
		direct_rels_cache.token_seq = direct_relid("token_seq", nsp);
		direct_rels_cache.valid = true;
	}
	return &direct_rels_cache;
}

/* Does a version found by a chat scan count?  NULL: every one does. */
typedef bool (*DirectChatFilter) (TupleTableSlot *slot, const DirectRels *rels);

/*
 * Scan a journal's per-chat index of unfinished records (chat_id, id) for
 * chat `chat_id`, on `side` of `id`, until a visible version passes
 * `filter`.  Seen as the next SPI statement of this transaction would see
 * it: this transaction's own earlier changes included, and under READ
 * COMMITTED everything committed until now.
 */
static bool
direct_chat_scan(Oid heap_oid, Oid index_oid, Datum chat_id, int64 id,
				 DurableChatSide side, DirectChatFilter filter, const DirectRels *rels)
{
	Relation	heap;
	Relation	index;
	ScanKeyData keys[2];
	int			nkeys = 1;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bool		found = false;

	heap = table_open(heap_oid, AccessShareLock);
	index = index_open(index_oid, AccessShareLock);

	ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid,
						   index->rd_indcollation[0], F_TEXTEQ, chat_id);
	if (side != CHAT_ANY)
	{
		bool		before = (side == CHAT_BEFORE);

		ScanKeyEntryInitialize(&keys[1], 0, 2,
							   before ? BTLessStrategyNumber : BTGreaterStrategyNumber,
							   InvalidOid, InvalidOid,
							   before ? F_INT8LT : F_INT8GT, Int64GetDatum(id));
		nkeys = 2;
	}

	/* The snapshot SPI would take for its next statement (_SPI_execute_plan). */
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	UpdateActiveSnapshotCommandId();

	scan = index_beginscan(heap, index, GetActiveSnapshot(), nkeys, 0);
	index_rescan(scan, keys, nkeys, NULL, 0);
	slot = table_slot_create(heap, NULL);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		if (filter == NULL || filter(slot, rels))
		{
			found = true;
			break;
		}
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);

	PopActiveSnapshot();
	index_close(index, NoLock);
	table_close(heap, NoLock);
	return found;
}

/*
 * Is there an open (pending or leased) record of chat `chat_id` with an id
 * below `id` (CHAT_BEFORE), above it (CHAT_AFTER), or any (CHAT_ANY, `id`
 * unused)?
 *
 * The index holds only open records, and an update that finishes a record
 * is not HOT (finished_at is in the index's predicate), so a version found
 * through it is open: the SQL probes read no column either.
 */
bool
durable_inbox_chat_has_open(Datum chat_id, int64 id, DurableChatSide side)
{
	const DirectRels *rels = direct_rels();

	return direct_chat_scan(rels->inbox, rels->inbox_chat_idx, chat_id, id, side,
							NULL, rels);
}

static bool
direct_outbox_waiting(TupleTableSlot *slot, const DirectRels *rels)
{
	bool		isnull;
	Datum		state = slot_getattr(slot, rels->outbox_state, &isnull);

	return !isnull &&
		(durable_text_equal_cstring(state, "pending") ||
		 durable_text_equal_cstring(state, "failed"));
}

/*
 * Is there a send of chat `chat_id` after send `id` that waits to be sent
 * (pending or failed)?  The index also holds sending ones, which are passed
 * over.
 */
bool
durable_outbox_chat_has_waiting(Datum chat_id, int64 id)
{
	const DirectRels *rels = direct_rels();

	return direct_chat_scan(rels->outbox, rels->outbox_chat_idx, chat_id, id, CHAT_AFTER,
							direct_outbox_waiting, rels);
}

/* A new fencing token: the next value of durable.token_seq. */
int64
durable_next_token(void)
{
	return nextval_internal(direct_rels()->token_seq, true);
}
