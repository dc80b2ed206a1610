/*-------------------------------------------------------------------------
 *
 * inbox.c
 *		The inbox journal: admit, claim, heartbeat, complete, fail, release
 *		and replay of inbound messages.
 *
 * A record is journaled by inbox_admit before its handler runs, and is
 * finished (done) only by a confirmation that names the fencing token of
 * the lease it holds.  States: pending -> leased -> done; leased -> pending
 * (failed with attempts left, released, or expired and swept); leased ->
 * dead (out of attempts); dead/done -> pending (replay).
 *
 * Dedupe.  INSERT ... ON CONFLICT DO NOTHING against the unique partial
 * indexes on (source, message_id) and, for id-less messages, on
 * (source, content_hash).  When the insert conflicts, a second statement
 * reads the existing record: under READ COMMITTED (the default, which
 * callers are expected to use) that statement has a fresh snapshot and sees
 * the committed winner.  Under REPEATABLE READ the conflicting insert
 * raises a serialization failure instead, which the caller retries.
 *
 * Fencing.  Every new lease (admit with instance, claim, takeover of an
 * expired lease, lease of a due duplicate) takes a new token from
 * durable.token_seq.  A record is held while state = 'leased' and token is
 * the caller's token; an expired lease that nobody took over and the sweep
 * did not move yet is still held.  Confirmations are single fenced UPDATEs;
 * when one matches nothing, one more read tells the caller why (DR002 no
 * record, DR001 stale token, counted in shared memory so the count survives
 * the rollback, DR003 wrong state).
 *
 * Per-chat order.  A chat is chat_id, across sources (two sources sharing
 * a chat id are ordered together: the safe side).  A record is never leased
 * while an older (smaller id) record of its chat is pending or leased; dead
 * and done records do not block.  The claim checks this with one probe of
 * inbox_chat_unfinished_idx per candidate.  That probe only sees committed
 * records, so id order must agree with commit order within a chat: every
 * admit takes its chat's lock (chat_lock.c) before it draws an id, and
 * holds it until commit.  Admits of one chat therefore serialize through
 * their commits.
 *
 * Claims scan inbox_unfinished_idx oldest first and skip the records
 * another transaction holds, as SKIP LOCKED would, so concurrent claimers
 * neither wait on each other nor get the same record; a record another
 * transaction changed after the claim's snapshot was taken is skipped
 * too, and a waiting claim looks again at once (direct.c writes the claim
 * without the executor).  A
 * claim with `wait` sleeps on the inbox condition variable of the database
 * (waiting.c), which every transition that makes work claimable wakes at
 * commit, bounded by the next time a pending record or a lease comes due.
 *
 * Every entry point validates all its arguments before it journals
 * anything, takes "now" from the wall clock (GetCurrentTimestamp, not the
 * transaction's start; inbox_admit once it holds its chat's lock, so that
 * waiting for the lock does not shorten the lease it grants), and runs
 * cached SPI plans whose statements schema-qualify every name.
 *
 * IDENTIFICATION
 *	  src/inbox.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/jsonb.h"

PG_FUNCTION_INFO_V1(durable_inbox_admit);
PG_FUNCTION_INFO_V1(durable_inbox_claim);
PG_FUNCTION_INFO_V1(durable_inbox_heartbeat);
PG_FUNCTION_INFO_V1(durable_inbox_complete);
PG_FUNCTION_INFO_V1(durable_inbox_complete_batch);
PG_FUNCTION_INFO_V1(durable_inbox_fail);
PG_FUNCTION_INFO_V1(durable_inbox_release);
PG_FUNCTION_INFO_V1(durable_inbox_replay);

/*
 * Most records one claim leases; a larger max is clamped to it.  It bounds
 * the work (and the row locks) of one statement.
 */
#define INBOX_MAX_CLAIM			10000

/*
 * A record is open (pending or leased) while its finished_at is NULL: the
 * predicate of the partial index inbox_chat_unfinished_idx, which per-chat
 * probes spell exactly, and of inbox_unfinished_idx, which scans in id
 * order spell as INBOX_OPEN_SCAN.
 *
 * Plans are generic and made while the statistics say that hardly any
 * record is open (the normal state), when any plan over the open-records
 * indexes looks free.  So every statement is written to leave the planner
 * one access path that stays cheap when they are not -- a backlog, or dead
 * entries that a long transaction keeps: a per-chat NOT EXISTS probe ends
 * in OFFSET 0, which keeps it a correlated subplan probing the chat index
 * by (chat_id, id) (turned into an anti join, it was planned as a full scan
 * of that index per candidate); and a statement that finds its rows by id
 * does not repeat the open-records predicate, which would let the planner
 * scan a whole partial index instead of probing the primary key.
 *
 * finished_at is set when a record becomes done or dead and cleared when it
 * is replayed; no other transition touches an indexed column, so claims,
 * heartbeats, retries and takeovers are HOT updates (durable--0.2--0.3.sql).
 */

/*
 * The per-chat probe: an open record of the chat of the record aliased
 * `alias` whose id is `cmp` (< or >) its id.  Written once so that every
 * probe keeps the OFFSET 0 that makes it a correlated subplan.
 */
#define INBOX_OPEN_IN_CHAT(alias, cmp) \
	"(SELECT 1 FROM ONLY durable.inbox o" \
	"  WHERE o.chat_id = " alias ".chat_id" \
	"    AND o.finished_at IS NULL" \
	"    AND o.id " cmp " " alias ".id OFFSET 0)"

/* Which confirmation is being diagnosed: decides the exceptions to DR001. */
typedef enum InboxConfirm
{
	IC_HEARTBEAT,
	IC_COMPLETE,
	IC_FAIL,
	IC_RELEASE
} InboxConfirm;

static SPIPlanPtr inbox_find_by_message_plan = NULL;
static SPIPlanPtr inbox_find_by_hash_plan = NULL;
static SPIPlanPtr inbox_lease_duplicate_plan = NULL;
static SPIPlanPtr inbox_next_due_plan = NULL;
static SPIPlanPtr inbox_heartbeat_plan = NULL;
static SPIPlanPtr inbox_complete_batch_plan = NULL;
static SPIPlanPtr inbox_batch_diagnose_plan = NULL;
static SPIPlanPtr inbox_fail_lock_plan = NULL;
static SPIPlanPtr inbox_fail_plan = NULL;
static SPIPlanPtr inbox_release_plan = NULL;
static SPIPlanPtr inbox_replay_plan = NULL;
static SPIPlanPtr inbox_state_plans[2];

/*
 * Raise 54000 for a payload over durable.max_payload_bytes.
 */
static pg_attribute_noreturn() void
inbox_refuse_payload_size(Size bytes)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("payload is too large (%zu bytes)", bytes),
			 errdetail("Inbound payloads are limited to %d bytes.",
					   durable_max_payload_bytes),
			 errhint("Raise \"durable.max_payload_bytes\", or journal a reference to content stored elsewhere.")));
}

/* Feed one length-prefixed field to the hash, so that field boundaries cannot shift. */
static void
inbox_hash_field(pg_cryptohash_ctx *ctx, const char *data, size_t len)
{
	uint8		prefix[8];
	uint64		n = (uint64) len;
	int			i;

	for (i = 7; i >= 0; i--)
	{
		prefix[i] = (uint8) (n & 0xff);
		n >>= 8;
	}
	if (pg_cryptohash_update(ctx, prefix, sizeof(prefix)) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) data, len) < 0)
		elog(ERROR, "durable: could not compute the content hash: %s",
			 pg_cryptohash_error(ctx));
}

/*
 * The dedupe key of a message admitted without message_id: SHA-256 over
 * source, chat_id, kind and the payload's canonical text (jsonb output sorts
 * keys and normalises spacing, so equal documents hash alike), each
 * length-prefixed.  Returns a bytea datum in the current memory context.
 */
static Datum
inbox_content_hash(Datum source, Datum chat_id, Datum kind, Datum payload)
{
	pg_cryptohash_ctx *ctx;
	Jsonb	   *jb = DatumGetJsonbP(payload);
	char	   *canonical = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	bytea	   *result = (bytea *) palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	Datum		fields[3] = {source, chat_id, kind};
	int			i;

	ctx = pg_cryptohash_create(PG_SHA256);
	if (pg_cryptohash_init(ctx) < 0)
		elog(ERROR, "durable: could not compute the content hash: %s",
			 pg_cryptohash_error(ctx));
	for (i = 0; i < lengthof(fields); i++)
	{
		text	   *t = DatumGetTextPP(fields[i]);

		inbox_hash_field(ctx, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
	}
	inbox_hash_field(ctx, canonical, strlen(canonical));
	if (pg_cryptohash_final(ctx, (uint8 *) VARDATA(result), PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "durable: could not compute the content hash: %s",
			 pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);
	pfree(canonical);
	SET_VARSIZE(result, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	return PointerGetDatum(result);
}

void
durable_inbox_error_missing(int64 id)
{
	durable_refuse_journaled_since(DQ_INBOX, Int64GetDatum(id));
	ereport(ERROR,
			(errcode(ERRCODE_DURABLE_NO_SUCH_RECORD),
			 errmsg("inbox record %lld does not exist", (long long) id)));
}

/* Whether this transaction wrote the version in SPI result row `row`, whose column `col` is its xmin. */
static bool
inbox_written_here(uint64 row, int col)
{
	return TransactionIdIsCurrentTransactionId(DatumGetTransactionId(durable_col(row, col)));
}

/*
 * Read the current state and token of a record into *state (palloc'd in
 * the SPI context) and *token (0 and *has_token false when NULL), FOR SHARE
 * under snapshot isolation (durable_exec_explaining), and, when
 * written_here is not NULL, whether this transaction wrote the version
 * read.  Returns false when there is no such record.  Caller must be
 * connected to SPI.
 */
static bool
inbox_read_state(int64 id, char **state, int64 *token, bool *has_token, bool *written_here)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1];

	values[0] = Int64GetDatum(id);
	durable_exec_explaining(inbox_state_plans,
							"SELECT i.state, i.token, i.xmin FROM ONLY durable.inbox i WHERE i.id = $1",
							1, types, values);
	if (SPI_processed == 0)
		return false;
	*state = durable_text_to_cstring_datum(durable_col(0, 1));
	*has_token = !durable_col_isnull(0, 2);
	*token = *has_token ? durable_col_int64(0, 2) : 0;
	if (written_here != NULL)
		*written_here = inbox_written_here(0, 3);
	return true;
}

/*
 * Raise the error that explains why a fenced confirmation of record id
 * under token matched nothing, given what the record holds now (found,
 * state, current token, whether this transaction wrote it).  Returns
 * normally only for the one case that is not an error: completing again,
 * under the same token, a record this transaction completed.
 *
 * A record an earlier transaction completed under the same token is
 * refused (DR003), although the caller holds the token that did it: the
 * caller is most likely retrying a handler transaction whose COMMIT
 * succeeded but whose answer was lost.  Accepting it would commit the
 * handler's effects a second time.
 */
static void
inbox_confirm_failed(InboxConfirm what, int64 id, int64 token, bool found,
					 const char *state, int64 current, bool has_current, bool written_here)
{
	if (!found)
		durable_inbox_error_missing(id);

	if (has_current && current == token)
	{
		if (what == IC_COMPLETE && strcmp(state, "done") == 0)
		{
			if (written_here)
				return;
			ereport(ERROR,
					(errcode(ERRCODE_DURABLE_WRONG_STATE),
					 errmsg("inbox record %lld is already done", (long long) id),
					 errdetail("An earlier transaction completed it under token %lld.",
							   (long long) token),
					 errhint("If this transaction retries one whose COMMIT got no answer, that COMMIT "
							 "succeeded and its effects are in place: roll this one back. A retry "
							 "of the completion alone can take this error as success.")));
		}
		/*
		 * This transaction made it dead (its own inbox_fail, most likely):
		 * an error that ends the transaction rolls that back, so the
		 * dead-letter queue is not where the record will be.
		 */
		if ((what == IC_COMPLETE || what == IC_FAIL) && strcmp(state, "dead") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DURABLE_WRONG_STATE),
					 errmsg("inbox record %lld is dead", (long long) id),
					 written_here ?
					 errdetail("This transaction made it dead (a failure on its last attempt, or a recovery of its lease); if this error ends the transaction, that is rolled back with it.") :
					 errdetail("It used its last attempt and is in the dead-letter queue."),
					 written_here ?
					 errhint("Confirm nothing after failing a record: commit the failure on its own.") :
					 errhint("Replay it with durable.inbox_replay() to process it again.")));
	}

	durable_count(DC_STALE_LEASES, 1);
	/* Finished under the caller's own token: nobody else handles it now. */
	if (has_current && current == token &&
		(strcmp(state, "done") == 0 || strcmp(state, "dead") == 0))
	{
		bool		done = strcmp(state, "done") == 0;

		ereport(ERROR,
				(errcode(ERRCODE_DURABLE_STALE_LEASE),
				 errmsg("stale lease on inbox record %lld", (long long) id),
				 done ? errdetail("Inbox record %lld is done: token %lld completed it, which ended its lease.",
								  (long long) id, (long long) token) :
				 errdetail("Inbox record %lld is dead: it used its last attempt under token %lld.",
						   (long long) id, (long long) token),
				 !done && written_here ? errhint("This transaction made it dead; if this error ends the transaction, that is rolled back with it. Release, extend or fail a record only while it is leased.") :
				 !done ? errhint("It is in the dead-letter queue: replay it with durable.inbox_replay() to process it again.") :
				 written_here ? errhint("This transaction completed it, and this error rolls the completion back with the transaction: release, extend or fail a record before completing it, never after.") :
				 errhint("Nothing is left to release, extend or fail: the completion and its transaction's effects stand.")));
	}
	else if (has_current && current == token)
		ereport(ERROR,
				(errcode(ERRCODE_DURABLE_STALE_LEASE),
				 errmsg("stale lease on inbox record %lld", (long long) id),
				 errdetail("Inbox record %lld is %s: the lease of token %lld has ended (released, failed, expired, recovered or replayed).",
						   (long long) id, state, (long long) token),
				 written_here ?
				 errhint("This transaction changed the record (released, failed, recovered or replayed it); if this error ends the transaction, that is rolled back with it. Confirm nothing after releasing or failing a record.") :
				 errhint("Another replica may handle the record now: roll back this handler's effects.")));
	else if (has_current)
		ereport(ERROR,
				(errcode(ERRCODE_DURABLE_STALE_LEASE),
				 errmsg("stale lease on inbox record %lld", (long long) id),
				 errdetail("Inbox record %lld is %s with token %lld; the caller named token %lld.",
						   (long long) id, state, (long long) current, (long long) token)));
	else
		ereport(ERROR,
				(errcode(ERRCODE_DURABLE_STALE_LEASE),
				 errmsg("stale lease on inbox record %lld", (long long) id),
				 errdetail("Inbox record %lld is %s and has never been leased; the caller named token %lld.",
						   (long long) id, state, (long long) token)));
}

/* Read record id and raise what inbox_confirm_failed decides. */
static void
inbox_diagnose(InboxConfirm what, int64 id, int64 token)
{
	char	   *state = NULL;
	int64		current = 0;
	bool		has_current = false;
	bool		written_here = false;
	bool		found = inbox_read_state(id, &state, &current, &has_current, &written_here);

	inbox_confirm_failed(what, id, token, found, state, current, has_current, written_here);
}

/*
 * inbox_admit(source, message_id, chat_id, payload, kind, instance, lease)
 *	 -> (id, token, duplicate, state)
 *
 * The common cases take one insert of a record already pending or leased
 * (direct.c: as INSERT ... ON CONFLICT on the dedupe key DO NOTHING):
 * whether it is leased at once (instance given and no open record in its
 * chat) is decided before, by a direct probe of the chat's open records,
 * and its token drawn then.  A duplicate takes a read, plus a fenced
 * UPDATE when it is pending, due and instance is given.
 */
Datum
durable_inbox_admit(PG_FUNCTION_ARGS)
{
	Datum		source = durable_arg_id(fcinfo, 0, "source");
	Datum		message_id;
	bool		has_message_id = durable_arg_id_or_null(fcinfo, 1, "message_id", &message_id);
	Datum		chat_id = durable_arg_id(fcinfo, 2, "chat_id");
	Size		payload_bytes;
	Datum		payload = durable_arg_jsonb(fcinfo, 3, "payload", &payload_bytes);
	Datum		kind = durable_arg_id(fcinfo, 4, "kind");
	Datum		instance;
	bool		has_instance = durable_arg_id_or_null(fcinfo, 5, "instance", &instance);
	int64		lease_us = durable_arg_lease_us(fcinfo, 6);
	TimestampTz now;
	TimestampTz lease_until;
	Datum		content_hash = (Datum) 0;
	Datum		out[4];
	bool		outnull[4] = {false, false, false, false};
	bool		leased;
	int64		token = 0;
	int			tries;

	/*
	 * A payload over durable.max_payload_bytes, or whose numbers are too
	 * long, is refused only once the message is known not to be journaled:
	 * a redelivery of one admitted before the limit was lowered is answered
	 * as its duplicate, as outbox_begin answers a journaled key.  An admit
	 * of the message in progress is waited for, as an insert would wait for
	 * it.
	 */
	bool		too_big = payload_bytes > (Size) durable_max_payload_bytes;
	bool		numbers_too_long;
	bool		oversized;

	if (!has_instance && !PG_ARGISNULL(6))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease requires instance"),
				 errdetail("Only a record admitted with an instance is leased at once."),
				 errhint("Pass instance to lease the record to it, or leave lease out and claim the record with inbox_claim.")));
	numbers_too_long = durable_payload_numbers_too_long(payload);
	oversized = too_big || numbers_too_long;
	if (!has_message_id)
	{
		/* Not the hash of such numbers: it would write them out. */
		if (numbers_too_long)
			durable_refuse_payload_numbers(payload, "payload");
		content_hash = inbox_content_hash(source, chat_id, kind, payload);
	}

	durable_srf_init(fcinfo);
	SPI_connect();

	/* The probe below reads the journal that the insert then writes. */
	durable_lock_journal_for_write(DQ_INBOX);
	durable_lock_chat(DQ_INBOX, chat_id);

	/* After the lock, which may have waited: the wait is not the lease's. */
	now = GetCurrentTimestamp();
	lease_until = now + lease_us;

	/*
	 * With the chat lock held, every committed record of the chat is older
	 * than this one, so "no open record in the chat" is "no older open
	 * record": the new record is leased at once.  Its token is drawn now; a
	 * conflict below wastes it, which is harmless since tokens only need to
	 * grow.
	 */
	leased = has_instance && !oversized && !durable_inbox_chat_has_open(chat_id, 0);
	if (leased)
		token = durable_next_token();

	/*
	 * The duplicate's row can vanish between the conflicting insert and the
	 * read (the retention purge); then the insert is simply tried again.
	 */
	for (tries = 0;; tries++)
	{
		static const Oid find_types[3] = {TEXTOID, TEXTOID, TIMESTAMPTZOID};
		static const Oid find_hash_types[3] = {TEXTOID, BYTEAOID, TIMESTAMPTZOID};
		DurableNewMessage msg;
		int64		new_id;
		Datum		find_values[3];
		int64		dup_id;
		Datum		dup_chat;
		bool		dup_other_chat;
		bool		dup_due;

		if (tries >= 3)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not admit the inbound message: its duplicate keeps disappearing"),
					 errhint("Retry the transaction.")));

		msg.source = source;
		msg.has_message_id = has_message_id;
		msg.message_id = message_id;
		msg.content_hash = content_hash;
		msg.chat_id = chat_id;
		msg.kind = kind;
		msg.payload = payload;
		msg.leased = leased;
		msg.token = token;
		msg.owner = instance;
		msg.lease_until = lease_until;
		msg.now = now;

		/*
		 * Each dedupe index is the arbiter of its own kind of message: the
		 * other unique indexes (the primary key, whose ids come from a
		 * sequence) are not probed before the insert.
		 */
		if (!oversized && durable_inbox_insert_direct(&msg, &new_id))
		{
			/*
			 * The insert waits for another of the same message id (which
			 * the chat lock does not order when it names another chat).
			 */
			if (leased)
				lease_until = durable_restamp_inserted_lease(DQ_INBOX, Int64GetDatum(new_id),
															 lease_until, lease_us);
			DURABLE_FAIL_POINT("inbox_admit");
			out[0] = Int64GetDatum(new_id);
			durable_claim_floor_admitted(DQ_INBOX, DatumGetInt64(out[0]));
			out[1] = Int64GetDatum(token);
			outnull[1] = !leased;
			out[2] = BoolGetDatum(false);
			out[3] = CStringGetTextDatum(leased ? "leased" : "pending");
			durable_count(DC_INBOUND_JOURNALED, 1);
			if (!leased)
				durable_wake_at_commit(DQ_INBOX);
			else
				durable_inbox_lease_at_commit(lease_until);
			break;
		}

		/* A duplicate: read the record that won. */
		find_values[0] = source;
		find_values[2] = TimestampTzGetDatum(now);
		if (has_message_id)
		{
			find_values[1] = message_id;
			durable_exec(durable_plan(&inbox_find_by_message_plan,
									  "SELECT i.id, i.state, i.chat_id,"
									  "  i.state = 'pending' AND i.not_before <= $3"
									  " FROM ONLY durable.inbox i"
									  " WHERE i.source = $1 AND i.message_id = $2",
									  3, find_types),
						 find_values, NULL, SPI_OK_SELECT, 1);
		}
		else
		{
			find_values[1] = content_hash;
			durable_exec(durable_plan(&inbox_find_by_hash_plan,
									  "SELECT i.id, i.state, i.chat_id,"
									  "  i.state = 'pending' AND i.not_before <= $3"
									  " FROM ONLY durable.inbox i"
									  " WHERE i.source = $1 AND i.message_id IS NULL"
									  "   AND i.content_hash = $2",
									  3, find_hash_types),
						 find_values, NULL, SPI_OK_SELECT, 1);
		}
		if (SPI_processed == 0)
		{
			if (!oversized)
				continue;

			/*
			 * Not found: a transaction in progress may be admitting the
			 * message for another chat (the chat lock waited for one of this
			 * chat), or committed it after this transaction's snapshot.  The
			 * insert would wait for the one and fail with 40001 for the
			 * other; the oversized payload does so here, then looks again.
			 */
			if (tries < 2 && durable_inbox_await_message(&msg))
				continue;
			if (numbers_too_long)
				durable_refuse_payload_numbers(payload, "payload");
			inbox_refuse_payload_size(payload_bytes);
		}

		dup_id = durable_col_int64(0, 1);
		out[0] = Int64GetDatum(dup_id);
		out[1] = (Datum) 0;
		outnull[1] = true;
		out[2] = BoolGetDatum(true);
		out[3] = durable_col_copy(0, 2);
		dup_chat = durable_col_copy(0, 3);
		dup_other_chat = !durable_text_equal(dup_chat, chat_id);
		dup_due = DatumGetBool(durable_col(0, 4));
		durable_count(DC_INBOUND_DUPLICATES, 1);

		/*
		 * Platforms that number messages per chat (Telegram's message_id,
		 * Slack's ts) give two chats the same id: the second message would
		 * be taken for the first without a word.
		 */
		if (has_message_id && dup_other_chat)
			ereport(WARNING,
					(errcode(ERRCODE_UNIQUE_VIOLATION),
					 errmsg("inbound message \"%s\" of source \"%s\" was journaled for another chat",
							TextDatumGetCString(message_id), TextDatumGetCString(source)),
					 errdetail("Record %lld holds it for chat \"%s\"; this call, for chat \"%s\", is answered as its duplicate.",
							   (long long) dup_id, TextDatumGetCString(dup_chat),
							   TextDatumGetCString(chat_id)),
					 errhint("A message_id must be unique within its source: where the platform numbers messages per chat, pass \"<chat_id>:<message_id>\" or an update id.")));

		/*
		 * The existing record may belong to another chat than the one given
		 * (a client reusing a message id): its own chat's lock is what makes
		 * the order check below safe.  It is taken only if free: this call
		 * holds its own chat's lock, and a transaction that holds the other
		 * chat's could be waiting for it (a deadlock).  Busy, the duplicate
		 * is answered unleased, for inbox_claim, as one behind an unfinished
		 * record of its chat is.  Under REPEATABLE READ and SERIALIZABLE the
		 * UPDATE's look for older records reads the transaction's snapshot,
		 * which may predate one committed before this record was journaled
		 * (by this transaction, or replayed): the latest snapshot looks first.
		 */
		if (has_instance && dup_due &&
			(!dup_other_chat || durable_try_lock_chat(DQ_INBOX, dup_chat)) &&
			!(IsolationUsesXactSnapshot() && durable_inbox_chat_has_open(dup_chat, dup_id)))
		{
			static const Oid lease_types[5] = {INT8OID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
			INT8OID};
			Datum		lease_values[5];

			/* Its insert may have waited for the other chat's admit of the id. */
			if (dup_other_chat)
			{
				now = GetCurrentTimestamp();
				lease_until = now + lease_us;
			}

			lease_values[0] = Int64GetDatum(dup_id);
			lease_values[1] = instance;
			lease_values[2] = TimestampTzGetDatum(lease_until);
			lease_values[3] = TimestampTzGetDatum(now);
			/* (a token the UPDATE does not use leaves a gap, which is harmless) */
			lease_values[4] = Int64GetDatum(durable_next_token());
			durable_journal_check_writable(DQ_INBOX, TRIGGER_TYPE_UPDATE);
			durable_exec(durable_plan(&inbox_lease_duplicate_plan,
									  "UPDATE ONLY durable.inbox i"
									  "   SET state = 'leased',"
									  "       token = $5,"
									  "       owner = $2, lease_until = $3,"
									  "       attempts = i.attempts + 1, sends = 0"
									  " WHERE i.id = $1 AND i.state = 'pending' AND i.not_before <= $4"
									  "   AND NOT EXISTS " INBOX_OPEN_IN_CHAT("i", "<")
									  " RETURNING i.token",
									  5, lease_types),
						 lease_values, NULL, SPI_OK_UPDATE_RETURNING, 1);
			if (SPI_processed == 1)
			{
				out[1] = durable_col(0, 1);
				outnull[1] = false;
				out[3] = CStringGetTextDatum("leased");
				/* The UPDATE may have waited for a claim or confirmation of the row. */
				(void) durable_restamp_inserted_lease(DQ_INBOX, Int64GetDatum(dup_id),
													  lease_until, lease_us);

				/*
				 * A record below the claim floor (one noted freed, say) is
				 * taken: the floor learns when the lease ends, as from a
				 * claim (the restamp can only make it end later).
				 */
				durable_claim_floor_comes_due(DQ_INBOX, dup_id, lease_until);
			}
		}
		break;
	}

	durable_srf_put(fcinfo, out, outnull);
	SPI_finish();
	return (Datum) 0;
}

/* A claimed record's result columns go to the function's result. */
static void
inbox_claimed_put(void *arg, const Datum *values, const bool *nulls, Datum state_before)
{
	durable_srf_put((FunctionCallInfo) arg, (Datum *) values, (bool *) nulls);
}

/*
 * One claim attempt: lease up to max due records and add them to the
 * function's result, oldest first.  Returns how many.  Caller must have
 * initialised the materialized result.
 *
 * Candidates are pending records whose not_before has passed and leased
 * records whose lease expired with attempts left (an expired lease that
 * used the last attempt is the sweep's to move to dead).  Only the oldest
 * unfinished record of a chat is a candidate, so one claim never returns
 * two records of a chat.  Records that a concurrent claim or confirmation
 * holds are skipped, as SKIP LOCKED would, and so are records another
 * transaction changed after the claim's snapshot was taken (direct.c,
 * direct_claim_one).
 *
 * The scan starts at the claim floor (claim_floor.c): no record below it is
 * claimable, and behind a long transaction the index holds the entries of
 * every record finished since it began.
 *
 * The lease changes no indexed column (durable--0.2--0.3.sql): it is a HOT
 * update.
 */
static uint64
inbox_claim_once(FunctionCallInfo fcinfo, const DurableClaimCall *call, TimestampTz now,
				 bool *in_flight)
{
	DurableClaim claim;

	claim.owner = call->instance;
	claim.now = now;
	claim.lease_until = claim.now + call->lease_us;
	claim.max_attempts = durable_inbox_max_attempts;
	claim.max = call->max;
	claim.floor = durable_claim_floor(DQ_INBOX, claim.now, &claim.freed);
	return durable_claim_direct(DQ_INBOX, &claim, inbox_claimed_put, fcinfo, in_flight);
}

/*
 * The next time inbox work comes due by the clock alone: the earliest
 * not_before after now of a pending record, or lease_until from now on of
 * a leased one (a lease ending at now was not expired for a claim at now:
 * it expires just after); 0 when there is none.  Caller must be connected
 * to SPI.
 *
 * Records below the claim floor are not read: the floor knows when the
 * first of them comes due.  A waiting claim asks at every wake that got it
 * nothing, and every admit wakes every waiting claim: with thousands of
 * records held under leases, a scan of all open records made each admit
 * cost each waiter milliseconds.
 */
static TimestampTz
inbox_next_due(TimestampTz now)
{
	Oid			types[2] = {TIMESTAMPTZOID, INT8OID};
	Datum		values[2];
	TimestampTz next;
	int64		floor;
	int			col;

	floor = durable_claim_floor_known(DQ_INBOX, now, &next);
	/* (t/026_lease_end_wakes.pl reads this line.) */
	ereport(DEBUG2, (errmsg_internal("durable: inbox next due time read from id " INT64_FORMAT, floor)));
	values[0] = TimestampTzGetDatum(now);
	values[1] = Int64GetDatum(floor);
	durable_exec(durable_plan(&inbox_next_due_plan,
							  "SELECT"
							  " pg_catalog.min(p.not_before) FILTER"
							  "   (WHERE p.state = 'pending' AND p.not_before > $1),"
							  " pg_catalog.min(p.lease_until) FILTER"
							  "   (WHERE p.state = 'leased' AND p.lease_until >= $1)"
							  " FROM ONLY durable.inbox p WHERE " INBOX_OPEN_SCAN("p")
							  " AND p.id >= $2",
							  2, types),
				 values, NULL, SPI_OK_SELECT, 1);
	for (col = 1; col <= 2; col++)
	{
		if (!durable_col_isnull(0, col))
		{
			TimestampTz t = DatumGetTimestampTz(durable_col(0, col));

			if (next == 0 || t < next)
				next = t;
		}
	}
	/* A waiting claim calls this at every wake: free what it read. */
	SPI_freetuptable(SPI_tuptable);
	return next;
}

/*
 * inbox_claim(instance, max, lease, wait) -> the leased records.
 *
 * With wait > 0 and nothing claimable, sleeps in the server until a commit
 * wakes the inbox's claimers, the next record comes due, or the wait is
 * over, and tries again (waiting.c).
 */
Datum
durable_inbox_claim(PG_FUNCTION_ARGS)
{
	DurableClaimCall call = {.attempt = inbox_claim_once, .next_due = inbox_next_due};

	durable_claim(fcinfo, DQ_INBOX, INBOX_MAX_CLAIM, &call);
	return (Datum) 0;
}

/*
 * inbox_heartbeat(id, token, lease) -> the new lease_until.
 */
Datum
durable_inbox_heartbeat(PG_FUNCTION_ARGS)
{
	int64		id = durable_arg_int64(fcinfo, 0, "id");
	int64		token = durable_arg_int64(fcinfo, 1, "token");
	int64		lease_us = durable_arg_lease_us(fcinfo, 2);
	TimestampTz lease_until;
	bool		replaced_null;
	TimestampTz replaced = 0;
	Oid			types[3] = {INT8OID, INT8OID, INTERVALOID};
	Datum		values[3];

	values[0] = Int64GetDatum(id);
	values[1] = Int64GetDatum(token);
	values[2] = durable_interval_datum(lease_us);

	/*
	 * The new lease starts when the row is ours (durable_restamp_lease).
	 * Only a shorter lease than the one it replaces concerns the claim
	 * floor, which knows that one or an earlier one; telling it of every
	 * heartbeat would discard every floor refresh under way
	 * (claim_floor.c).  The lease replaced is read from the row's latest
	 * version, once it is locked: the statement's snapshot may predate a
	 * heartbeat of the same token that committed while this one waited (a
	 * lease lengthened to an hour, which claimers and the floor saw), and
	 * against that older lease a shortening would pass unnoticed.
	 */
	SPI_connect();
	durable_journal_check_writable(DQ_INBOX, TRIGGER_TYPE_UPDATE);
	durable_exec(durable_plan(&inbox_heartbeat_plan,
							  "WITH replaced AS MATERIALIZED ("
							  " SELECT o.lease_until FROM ONLY durable.inbox o"
							  "  WHERE o.id = $1 AND o.token = $2 AND o.state = 'leased'"
							  "  FOR NO KEY UPDATE)"
							  " UPDATE ONLY durable.inbox i SET lease_until = pg_catalog.clock_timestamp() + $3"
							  "  FROM replaced r"
							  " WHERE i.id = $1 AND i.token = $2 AND i.state = 'leased'"
							  " RETURNING i.lease_until, r.lease_until",
							  3, types),
				 values, NULL, SPI_OK_UPDATE_RETURNING, 0);
	if (SPI_processed == 0)
		inbox_diagnose(IC_HEARTBEAT, id, token);
	replaced_null = durable_col_isnull(0, 2);
	if (!replaced_null)
		replaced = DatumGetTimestampTz(durable_col(0, 2));
	lease_until = durable_restamp_lease(inbox_heartbeat_plan, values,
										DatumGetTimestampTz(durable_col(0, 1)), lease_us);
	if (replaced_null || lease_until < replaced)
	{
		/*
		 * The record comes due sooner than waiting claimers think (their
		 * sleep is bounded by the lease it replaces): woken, they look again.
		 */
		durable_claim_floor_comes_due(DQ_INBOX, id, lease_until);
		durable_wake_at_commit(DQ_INBOX);
	}
	SPI_finish();
	PG_RETURN_TIMESTAMPTZ(lease_until);
}

/*
 * inbox_complete(id, token): the record is done.
 *
 * When a pending record of the same chat waits behind this one, it just
 * became claimable: waiting claimers are woken at commit.  Finding out
 * costs an index probe, made only while a claimer waits (waiting.c's
 * durable_claimers_waiting); otherwise the wake at commit is sent
 * regardless, and finds nobody to wake or a claimer that began to wait
 * since.
 */
Datum
durable_inbox_complete(PG_FUNCTION_ARGS)
{
	int64		id = durable_arg_int64(fcinfo, 0, "id");
	int64		token = durable_arg_int64(fcinfo, 1, "token");
	bool		wake = true;
	bool		ask = durable_claimers_waiting(DQ_INBOX);

	/* The fenced UPDATE, without the executor (direct.c). */
	if (durable_inbox_complete_direct(id, token, GetCurrentTimestamp(), ask ? &wake : NULL))
	{
		if (wake)
			durable_wake_at_commit(DQ_INBOX);
		DURABLE_FAIL_POINT("inbox_complete");
		PG_RETURN_VOID();
	}
	SPI_connect();
	inbox_diagnose(IC_COMPLETE, id, token);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * Check one array argument of the batch complete: non-NULL, at most one
 * dimension, no NULL elements.  Returns its element count.
 */
static int
inbox_check_int8_array(FunctionCallInfo fcinfo, int argno, const char *name)
{
	ArrayType  *a;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s cannot be null", name)));
	a = PG_GETARG_ARRAYTYPE_P(argno);
	if (ARR_NDIM(a) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional array", name)));
	if (array_contains_nulls(a))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s cannot contain nulls", name)));
	return ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
}

/*
 * The `done` records the batch's update returned (id, chat_id) finished
 * while the claim floor was watched: each one's chat's next open record may
 * have been passed over by the floor (claim_floor.c).
 */
static void
inbox_batch_freed(uint64 done)
{
	SPITupleTable *completed = SPI_tuptable;

	for (uint64 row = 0; row < done; row++)
	{
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(completed->vals[row], completed->tupdesc, 1,
													 &isnull));
		Datum		chat_id = SPI_getbinval(completed->vals[row], completed->tupdesc, 2, &isnull);
		int64		next;

		if (isnull)
			continue;
		next = durable_inbox_chat_next(chat_id, id);
		if (next != 0)
			durable_claim_floor_freed(DQ_INBOX, id, next);
	}
}

static int
inbox_cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/*
 * inbox_complete(ids, tokens) -> how many records are done.
 *
 * All or nothing: one UPDATE over the pairs; when it matched fewer rows
 * than pairs were given, every pair is checked in order and the first one
 * that is not done now under its token by this transaction (this call or
 * an earlier one) raises, which rolls back the caller's transaction, batch
 * included.  A repeated id counts once.
 *
 * Waiting claimers are woken at commit whenever a record was completed:
 * once per batch, which costs less than probing each record's chat for a
 * later record (and a probe with the statement's snapshot would miss one
 * admitted while the batch ran).  Only while the claim floor may have
 * passed over records held behind finished ones is each completed record's
 * chat probed, as the single form does, for the record it frees
 * (inbox_batch_freed).
 */
Datum
durable_inbox_complete_batch(PG_FUNCTION_ARGS)
{
	int			n = inbox_check_int8_array(fcinfo, 0, "ids");
	int			ntokens = inbox_check_int8_array(fcinfo, 1, "tokens");
	Oid			types[3] = {INT8ARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID};
	Datum		values[3];
	uint64		done;
	uint64		row;
	int64	   *seen;
	int			distinct;
	int			i;

	if (n != ntokens)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("ids and tokens must have the same length"),
				 errdetail("ids has %d elements and tokens has %d.", n, ntokens)));
	if (n == 0)
		PG_RETURN_INT32(0);

	values[0] = PG_GETARG_DATUM(0);
	values[1] = PG_GETARG_DATUM(1);
	values[2] = TimestampTzGetDatum(GetCurrentTimestamp());

	SPI_connect();
	durable_journal_check_writable(DQ_INBOX, TRIGGER_TYPE_UPDATE);
	durable_exec(durable_plan(&inbox_complete_batch_plan,
							  "UPDATE ONLY durable.inbox i"
							  "   SET state = 'done', done_at = $3, finished_at = $3, lease_until = NULL"
							  "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS b(id, token)"
							  " WHERE i.id = b.id AND i.token = b.token AND i.state = 'leased'"
							  " RETURNING i.id, i.chat_id",
							  3, types),
				 values, NULL, SPI_OK_UPDATE_RETURNING, 0);
	done = SPI_processed;
	if (done > 0)
	{
		durable_wake_at_commit(DQ_INBOX);
		if (durable_claim_floor_held_watched(DQ_INBOX))
			inbox_batch_freed(done);
	}

	if (done < (uint64) n)
	{
		/*
		 * Some pair did not match, or an id is repeated.  This statement sees
		 * the UPDATE above, so the pairs it completed read as done.
		 */
		durable_exec(durable_plan(&inbox_batch_diagnose_plan,
								  "SELECT b.id, b.token, i.state, i.token, i.xmin"
								  "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2))"
								  "       WITH ORDINALITY AS b(id, token, ord)"
								  "  LEFT JOIN ONLY durable.inbox i ON i.id = b.id"
								  " ORDER BY b.ord",
								  2, types),
					 values, NULL, SPI_OK_SELECT, 0);
		seen = (int64 *) palloc(sizeof(int64) * n);
		for (row = 0; row < SPI_processed; row++)
		{
			int64		id = durable_col_int64(row, 1);
			int64		token = durable_col_int64(row, 2);
			bool		found = !durable_col_isnull(row, 3);
			bool		has_current = found && !durable_col_isnull(row, 4);
			char	   *state = found ? durable_text_to_cstring_datum(durable_col(row, 3)) : NULL;
			int64		current = has_current ? durable_col_int64(row, 4) : 0;
			bool		written_here = found && inbox_written_here(row, 5);

			if (!found || !has_current || current != token || strcmp(state, "done") != 0 ||
				!written_here)
			{
				/*
				 * Read again as the single form does: under a transaction
				 * snapshot, a record changed since (a lease taken after it,
				 * say) is 40001, not the DR001 this row's old version says.
				 */
				inbox_diagnose(IC_COMPLETE, id, token);
				elog(ERROR, "durable: inbox record %lld failed to complete", (long long) id);
			}
			seen[row] = id;
		}
		qsort(seen, SPI_processed, sizeof(int64), inbox_cmp_int64);
		distinct = 0;
		for (i = 0; i < (int) SPI_processed; i++)
			if (i == 0 || seen[i] != seen[i - 1])
				distinct++;
		done = distinct;
	}

	DURABLE_FAIL_POINT("inbox_complete");
	SPI_finish();
	PG_RETURN_INT32((int32) done);
}

/*
 * inbox_fail(id, token, error, retry_in) -> (state, not_before).
 *
 * Back to pending after retry_in or the backoff of the attempt, or dead when
 * the record used its last attempt (NOTIFY durable_dead at commit).  The
 * backoff depends on attempts, so the record is read and locked first; the
 * lock makes the diagnosis exact and the UPDATE unconditional.
 */
Datum
durable_inbox_fail(PG_FUNCTION_ARGS)
{
	int64		id = durable_arg_int64(fcinfo, 0, "id");
	int64		token = durable_arg_int64(fcinfo, 1, "token");
	int			clipped_from;
	Datum		error = durable_arg_error(fcinfo, 2, &clipped_from);
	bool		has_retry_in = !PG_ARGISNULL(3);
	TimestampTz now;
	Oid			lock_types[1] = {INT8OID};
	Oid			fail_types[5] = {INT8OID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};
	Datum		out[2];
	bool		outnull[2] = {false, false};
	char	   *state;
	int64		current = 0;
	bool		has_current;
	int32		attempts;
	bool		dead;
	TimestampTz not_before = 0;

	durable_srf_init(fcinfo);
	SPI_connect();
	durable_journal_check_writable(DQ_INBOX, TRIGGER_TYPE_UPDATE);

	values[0] = Int64GetDatum(id);
	durable_exec(durable_plan(&inbox_fail_lock_plan,
							  "SELECT i.state, i.token, i.attempts, i.xmin FROM ONLY durable.inbox i"
							  " WHERE i.id = $1 FOR NO KEY UPDATE",
							  1, lock_types),
				 values, NULL, SPI_OK_SELECT, 1);
	if (SPI_processed == 0)
		inbox_confirm_failed(IC_FAIL, id, token, false, NULL, 0, false, false);
	state = durable_text_to_cstring_datum(durable_col(0, 1));
	has_current = !durable_col_isnull(0, 2);
	if (has_current)
		current = durable_col_int64(0, 2);
	attempts = durable_col_int32(0, 3);
	if (!has_current || current != token || strcmp(state, "leased") != 0)
		inbox_confirm_failed(IC_FAIL, id, token, true, state, current, has_current,
							 inbox_written_here(0, 4));

	/* After the lock: a wait for it must not eat into the backoff */
	now = GetCurrentTimestamp();
	dead = attempts >= durable_inbox_max_attempts;

	/*
	 * retry_in is checked only for a record that will be retried: on its
	 * last attempt it is ignored, so that a bad value cannot refuse the
	 * failure and leave the record to the sweep, its error lost.
	 */
	if (!dead)
		not_before = now + (has_retry_in ?
							durable_arg_interval_us(fcinfo, 3, "retry_in", 0, 0, DURABLE_MAX_DELAY_US) :
							durable_backoff_us(attempts,
											   (int64) durable_inbox_backoff_base_ms * 1000,
											   (int64) durable_inbox_backoff_cap_ms * 1000));

	values[1] = CStringGetTextDatum(dead ? "dead" : "pending");
	values[2] = TimestampTzGetDatum(not_before);
	nulls[2] = dead ? 'n' : ' ';
	values[3] = error;
	values[4] = TimestampTzGetDatum(now);
	nulls[4] = dead ? ' ' : 'n';
	durable_exec(durable_plan(&inbox_fail_plan,
							  "UPDATE ONLY durable.inbox i"
							  "   SET state = $2, not_before = COALESCE($3, i.not_before),"
							  "       error = $4, lease_until = NULL,"
							  "       finished_at = $5"
							  " WHERE i.id = $1",
							  5, fail_types),
				 values, nulls, SPI_OK_UPDATE, 0);
	if (SPI_processed != 1)
		durable_write_skipped("inbox");
	durable_claim_floor_lower(DQ_INBOX, id);
	durable_error_clipped(clipped_from, error);

	if (dead)
	{
		durable_notify_dead_inbox(id, text_to_cstring(DatumGetTextPP(error)));
		durable_count(DC_INBOUND_DEAD, 1);
	}

	/*
	 * Pending again: claimable now or later.  Dead: a record of its chat
	 * waiting behind it may be claimable now.  Either way waiting claimers
	 * look again.
	 */
	durable_wake_at_commit(DQ_INBOX);

	out[0] = values[1];
	out[1] = values[2];
	outnull[1] = dead;
	durable_srf_put(fcinfo, out, outnull);

	DURABLE_FAIL_POINT("inbox_fail");
	SPI_finish();
	return (Datum) 0;
}

/*
 * inbox_release(id, token): give the record back now; the attempt is not
 * counted.
 */
Datum
durable_inbox_release(PG_FUNCTION_ARGS)
{
	int64		id = durable_arg_int64(fcinfo, 0, "id");
	int64		token = durable_arg_int64(fcinfo, 1, "token");
	Oid			types[3] = {INT8OID, INT8OID, TIMESTAMPTZOID};
	Datum		values[3];

	values[0] = Int64GetDatum(id);
	values[1] = Int64GetDatum(token);
	values[2] = TimestampTzGetDatum(GetCurrentTimestamp());

	SPI_connect();
	durable_journal_check_writable(DQ_INBOX, TRIGGER_TYPE_UPDATE);
	durable_exec(durable_plan(&inbox_release_plan,
							  "UPDATE ONLY durable.inbox i"
							  "   SET state = 'pending', attempts = GREATEST(i.attempts - 1, 0),"
							  "       not_before = $3, lease_until = NULL"
							  " WHERE i.id = $1 AND i.token = $2 AND i.state = 'leased'",
							  3, types),
				 values, NULL, SPI_OK_UPDATE, 0);
	if (SPI_processed == 0)
		inbox_diagnose(IC_RELEASE, id, token);
	durable_claim_floor_lower(DQ_INBOX, id);
	durable_wake_at_commit(DQ_INBOX);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * inbox_replay(id): a dead or done record is processed again, from a fresh
 * count of attempts.  It keeps its id, so it takes its original place in its
 * chat's order: the chat's newer open records wait behind it, and while one
 * of them is leased the replay is refused (DR003).
 */
Datum
durable_inbox_replay(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr chat_plan = NULL;
	static SPIPlanPtr newer_plan = NULL;
	int64		id = durable_arg_int64(fcinfo, 0, "id");
	Oid			types[2] = {INT8OID, TIMESTAMPTZOID};
	Oid			newer_types[2] = {TEXTOID, INT8OID};
	Datum		values[2];
	Datum		chat_id;
	uint64		i;

	values[0] = Int64GetDatum(id);
	values[1] = TimestampTzGetDatum(GetCurrentTimestamp());

	SPI_connect();
	durable_journal_check_writable(DQ_INBOX, TRIGGER_TYPE_UPDATE);

	/*
	 * Per-chat order.  The replayed record becomes the oldest open record of
	 * its chat again, so no newer record of the chat may be leased: its
	 * holder would then hold the chat together with whoever claims this one.
	 * The chat lock orders this against admits (which lease at once only
	 * when the chat has no open record), and updating the chat's newer
	 * open records (changing nothing) orders it against claims of them: a
	 * claim in progress is waited for, and its lease then seen; a claim
	 * skips them until this commits; and a claim whose snapshot was taken
	 * before this committed finds them updated since, checks its chat
	 * again with a fresh snapshot (READ COMMITTED) or fails with 40001.
	 * A row lock alone left that last claim blind to the replayed record.
	 */
	durable_exec(durable_plan(&chat_plan,
							  "SELECT i.chat_id FROM ONLY durable.inbox i WHERE i.id = $1",
							  1, types),
				 values, NULL, SPI_OK_SELECT, 1);
	if (SPI_processed == 0)
		durable_inbox_error_missing(id);
	chat_id = durable_col_copy(0, 1);
	durable_lock_chat(DQ_INBOX, chat_id);

	/*
	 * Under REPEATABLE READ or SERIALIZABLE the update below reads with the
	 * transaction's snapshot, and a newer record admitted since is neither
	 * seen (leased, it must refuse the replay) nor ordered against claims.
	 */
	if (IsolationUsesXactSnapshot() && durable_inbox_chat_open_unseen(chat_id, id))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update"),
				 errdetail("A newer record of inbox record %lld's chat was admitted after this transaction's snapshot was taken.",
						   (long long) id),
				 errhint("Retry the transaction.")));
	values[0] = chat_id;
	values[1] = Int64GetDatum(id);
	durable_exec(durable_plan(&newer_plan,
							  "UPDATE ONLY durable.inbox o SET token = o.token"
							  " WHERE o.chat_id = $1 AND o.finished_at IS NULL AND o.id > $2"
							  " RETURNING o.id, o.state = 'leased'",
							  2, newer_types),
				 values, NULL, SPI_OK_UPDATE_RETURNING, 0);
	for (i = 0; i < SPI_processed; i++)
		if (DatumGetBool(durable_col(i, 2)))
			ereport(ERROR,
					(errcode(ERRCODE_DURABLE_WRONG_STATE),
					 errmsg("inbox record %lld cannot be replayed while record %lld of its chat is leased",
							(long long) id, (long long) durable_col_int64(i, 1)),
					 errdetail("A replayed record is older than the records admitted after it, and a chat's records are never held together."),
					 errhint("Replay it once record %lld is finished.",
							 (long long) durable_col_int64(i, 1))));

	values[0] = Int64GetDatum(id);
	values[1] = TimestampTzGetDatum(GetCurrentTimestamp());
	durable_exec(durable_plan(&inbox_replay_plan,
							  "UPDATE ONLY durable.inbox i"
							  "   SET state = 'pending', attempts = 0, not_before = $2,"
							  "       lease_until = NULL, done_at = NULL, finished_at = NULL"
							  " WHERE i.id = $1 AND i.state = ANY (ARRAY['dead', 'done']::pg_catalog.text[])",
							  2, types),
				 values, NULL, SPI_OK_UPDATE, 0);
	if (SPI_processed == 0)
	{
		char	   *state = NULL;
		int64		current;
		bool		has_current;

		if (!inbox_read_state(id, &state, &current, &has_current, NULL))
			durable_inbox_error_missing(id);
		ereport(ERROR,
				(errcode(ERRCODE_DURABLE_WRONG_STATE),
				 errmsg("inbox record %lld is %s", (long long) id, state),
				 errdetail("Only dead or done records can be replayed.")));
	}
	durable_count(DC_INBOUND_REPLAYED, 1);
	durable_claim_floor_lower(DQ_INBOX, id);
	durable_wake_at_commit(DQ_INBOX);
	SPI_finish();
	PG_RETURN_VOID();
}
