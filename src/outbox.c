/*-------------------------------------------------------------------------
 *
 * outbox.c
 *		The outbox: outbound sends journaled before the provider is called,
 *		keyed by an idempotency key, so that a repeated send is answered from
 *		the journal instead of reaching the chat twice.
 *
 * States: pending -> sending -> sent; sending -> failed (due again at
 * not_before) -> sending ...; -> dead (not retryable, or out of retries);
 * sending whose lease expired -> unknown (the provider may or may not have
 * delivered it; never resent by itself); unknown -> sent, failed or dead
 * when the token that held it tells the provider's answer (outbox_sent,
 * outbox_failed); dead, failed and unknown -> pending (outbox_retry).  attempts counts tries against the provider: it grows at
 * every lease to a sender.  The id column gives journal order.
 *
 * Locking protocol:
 *	- Dedupe is the primary key.  outbox_begin and outbox_enqueue insert as
 *	  ON CONFLICT (key) DO NOTHING does (outbox_begin directly, direct.c):
 *	  of two concurrent callers with one key the second waits on the unique
 *	  index until the first commits (then it reads the winner's row) or
 *	  rolls back (then its own insert goes through).
 *	- A repeated key is read before outbox_begin decides what to do with it:
 *	  an answer from the journal (sent, busy, wait, dead, unknown) by a plain
 *	  read; a lease or an unknown flag after a second read FOR NO KEY UPDATE,
 *	  so that this decision is taken on the row's latest version and two
 *	  callers never both lease it (outbox_begin_existing).  The journaled
 *	  chat and payload are never overwritten.
 *	- Every confirmation (sent, failed, heartbeat) is fenced by key and token:
 *	  a lease is held until it is taken over or swept, not the instant it
 *	  expires.  When the fenced statement matches nothing, one more read says
 *	  why: DR002 (no such send), DR001 (another token, or the lease is gone;
 *	  counted in stale_leases) or DR003 (a state that does not allow it).
 *	- outbox_claim locks its candidates as FOR NO KEY UPDATE SKIP LOCKED
 *	  would (direct.c; FOR UPDATE's lock when a unique index of yours makes
 *	  the lease change a key), so concurrent claimers neither wait for each other
 *	  nor get the same send.  Per-chat order is a probe of
 *	  outbox_chat_unfinished_idx for an older send of the chat: a send is
 *	  not claimed while an older send of its chat is pending, sending or
 *	  failed (dead and unknown do not block).  Every candidate is unfinished
 *	  itself, so at most one send per chat qualifies in a call.  Order is
 *	  journal (id) order among committed sends: a send whose transaction is
 *	  still open is invisible, so a younger send of its chat that committed
 *	  first can be claimed before it (journal one chat's sends from one
 *	  transaction, or one after the other, to keep their order).
 *	- The inbound fence (inbound_id with inbound_token, of outbox_begin and
 *	  outbox_enqueue) locks the inbox record (the UPDATE of its sends
 *	  counter for a derived key, FOR SHARE otherwise) until the caller's
 *	  transaction ends, so a takeover or sweep of that record either
 *	  happened before and is seen (DR001), or comes after the send is
 *	  journaled (claims and sweeps skip a locked record; anything else waits
 *	  for it).
 *
 * Time: a call reads the wall clock (GetCurrentTimestamp), not its
 * transaction's start, and reads it again once it has its row (after the
 * inbound fence, after a read that may have waited for another
 * transaction, after a FOR NO KEY UPDATE), so a caller holding a
 * transaction open still sees leases expire and sends come due on time, and
 * a lease runs from when the call has the send.  Callers are expected to
 * run at READ COMMITTED (the default): each statement then sees what
 * committed before it, which the conflict handling and a waiting claim rely
 * on.
 *
 * Waking waiting claimers (waiting.c): every transition that can make a
 * send claimable wakes them at commit: enqueue, retry, failed (its new due
 * time bounds their sleep), dead, discard and unknown (they unblock a chat),
 * and sent when a younger send of the same chat is waiting.
 *
 * IDENTIFICATION
 *	  src/outbox.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/uuid.h"

PG_FUNCTION_INFO_V1(durable_outbox_begin);
PG_FUNCTION_INFO_V1(durable_outbox_sent);
PG_FUNCTION_INFO_V1(durable_outbox_failed);
PG_FUNCTION_INFO_V1(durable_outbox_enqueue);
PG_FUNCTION_INFO_V1(durable_outbox_claim);
PG_FUNCTION_INFO_V1(durable_outbox_heartbeat);
PG_FUNCTION_INFO_V1(durable_outbox_retry);
PG_FUNCTION_INFO_V1(durable_outbox_discard);

/* Most sends one outbox_claim call leases (a larger max is capped to it). */
#define OUTBOX_MAX_CLAIM	10000

/*
 * How often a journaling call retries when the row its insert conflicted
 * with was deleted (outbox_discard) before it could be read.
 */
#define OUTBOX_MAX_RACES	10

/* What one probe of a send found (outbox_probe). */
typedef struct OutboxProbe
{
	bool		found;
	char	   *state;
	bool		has_token;
	int64		token;
	bool		has_lease;
	TimestampTz lease_until;
	char	   *provider_message_id;	/* NULL until sent */
} OutboxProbe;

/* outbox_begin's answer: one result row, filled in by whichever path decides. */
typedef struct OutboxBeginResult
{
	const char *action;
	Datum		token;
	bool		has_token;
	Datum		provider_message_id;
	bool		has_provider_message_id;
	const char *state;
	bool		diverged;		/* the journal holds another chat or payload: */
	Datum		journaled_chat_id;	/* what it holds */
	Datum		journaled_payload;
} OutboxBeginResult;

/* ---- Errors ---- */

/* Each raises its error: they never return. */
static void outbox_error_missing(Datum key) pg_attribute_noreturn();
static void outbox_error_stale(Datum key, const OutboxProbe *probe) pg_attribute_noreturn();
static void outbox_error_lease_ended(Datum key, const OutboxProbe *probe) pg_attribute_noreturn();
static void outbox_error_heartbeat_ended(Datum key, const OutboxProbe *probe) pg_attribute_noreturn();
static void outbox_error_state(Datum key, const char *state,
							   const char *detail) pg_attribute_noreturn();
static void outbox_error_inbound(int64 inbound_id, bool found, const char *state,
								 bool has_token, int64 token) pg_attribute_noreturn();
static void outbox_explain_inbound(int64 inbound_id) pg_attribute_noreturn();
static void outbox_error_races(Datum key) pg_attribute_noreturn();

/*
 * 40001: a journaling call lost OUTBOX_MAX_RACES races in a row, each time
 * to a discard of the key that committed between its insert and its look.
 */
static void
outbox_error_races(Datum key)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not journal send \"%s\": it is being discarded concurrently",
					TextDatumGetCString(key)),
			 errhint("Retry the call.")));
}

/* DR002: there is no send with this key. */
static void
outbox_error_missing(Datum key)
{
	durable_refuse_journaled_since(DQ_OUTBOX, key);
	ereport(ERROR,
			(errcode(ERRCODE_DURABLE_NO_SUCH_RECORD),
			 errmsg("send \"%s\" does not exist", TextDatumGetCString(key))));
}

/*
 * DR001: the caller's token does not hold the send's lease.  Counted before
 * raising, so the count survives the caller's rollback.
 */
static void
outbox_error_stale(Datum key, const OutboxProbe *probe)
{
	char	   *k = TextDatumGetCString(key);

	durable_count(DC_STALE_LEASES, 1);
	if (probe->has_token)
		ereport(ERROR,
				(errcode(ERRCODE_DURABLE_STALE_LEASE),
				 errmsg("lease of send \"%s\" is not held by this token", k),
				 errdetail("Send \"%s\" is %s with token %lld.",
						   k, probe->state, (long long) probe->token)));
	else
		ereport(ERROR,
				(errcode(ERRCODE_DURABLE_STALE_LEASE),
				 errmsg("lease of send \"%s\" is not held by this token", k),
				 errdetail("Send \"%s\" is %s and has never been leased.",
						   k, probe->state)));
}

/*
 * DR001 for the token that held the send's last lease, when that lease ended
 * without the send being sent: an operator's outbox_retry, or the sender's
 * own outbox_failed, made it pending or failed.  "The lease is no longer
 * held" (api.md), as when another sender has leased it since.
 */
static bool
outbox_lease_ended(const char *state)
{
	return strcmp(state, "pending") == 0 || strcmp(state, "failed") == 0;
}

static void
outbox_error_lease_ended(Datum key, const OutboxProbe *probe)
{
	char	   *k = TextDatumGetCString(key);

	durable_count(DC_STALE_LEASES, 1);
	ereport(ERROR,
			(errcode(ERRCODE_DURABLE_STALE_LEASE),
			 errmsg("lease of send \"%s\" is not held by this token", k),
			 errdetail("Send \"%s\" is %s: the lease of token %lld ended with an outbox_retry or an outbox_failed.",
					   k, probe->state, (long long) probe->token)));
}

/*
 * DR001 for a heartbeat under the token that held the send's last lease,
 * which has ended: not another's token, as outbox_error_stale would say.
 */
static void
outbox_error_heartbeat_ended(Datum key, const OutboxProbe *probe)
{
	char	   *k = TextDatumGetCString(key);

	if (outbox_lease_ended(probe->state))
		outbox_error_lease_ended(key, probe);
	durable_count(DC_STALE_LEASES, 1);
	ereport(ERROR,
			(errcode(ERRCODE_DURABLE_STALE_LEASE),
			 errmsg("lease of send \"%s\" is not held by this token", k),
			 errdetail("Send \"%s\" is %s: the lease of token %lld has ended.",
					   k, probe->state, (long long) probe->token),
			 strcmp(probe->state, "unknown") == 0 ?
			 errhint("Its lease ran out before the send was confirmed: outbox_sent or outbox_failed with this token still settles it.") : 0));
}

/* DR003: the send's state does not allow the operation; detail says which do. */
static void
outbox_error_state(Datum key, const char *state, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DURABLE_WRONG_STATE),
			 errmsg("send \"%s\" is %s", TextDatumGetCString(key), state),
			 errdetail_internal("%s", detail)));
}

/*
 * DR002 or DR001 for an inbox record that does not hold the caller's lease.
 * The record's id goes in the detail with its state, like the outbox's own
 * DR001, so that the message stays the same whatever the ids.
 */
static void
outbox_error_inbound(int64 inbound_id, bool found, const char *state,
					 bool has_token, int64 token)
{
	if (!found)
		durable_inbox_error_missing(inbound_id);
	durable_count(DC_STALE_LEASES, 1);
	if (has_token)
		ereport(ERROR,
				(errcode(ERRCODE_DURABLE_STALE_LEASE),
				 errmsg("lease of the inbound record is not held"),
				 errdetail("Inbox record %lld is %s with token %lld.",
						   (long long) inbound_id, state, (long long) token),
				 errhint("A handler can send on behalf of an inbound record only while it holds the record's lease.")));
	else
		ereport(ERROR,
				(errcode(ERRCODE_DURABLE_STALE_LEASE),
				 errmsg("lease of the inbound record is not held"),
				 errdetail("Inbox record %lld is %s and has never been leased.",
						   (long long) inbound_id, state),
				 errhint("A handler can send on behalf of an inbound record only while it holds the record's lease.")));
}

/* ---- Reads shared by several functions ---- */

/*
 * Read the state, token and lease of the send `key` (used to explain why a
 * fenced statement matched nothing; FOR SHARE under snapshot isolation:
 * durable_exec_explaining).  probe->state and probe->provider_message_id
 * are allocated in the SPI context.  Caller must be connected to SPI.
 */
static void
outbox_probe(Datum key, OutboxProbe *probe)
{
	static SPIPlanPtr plans[2];
	static const Oid types[1] = {TEXTOID};
	Datum		values[1];

	values[0] = key;
	durable_exec_explaining(plans,
							"SELECT state, token, lease_until, provider_message_id"
							" FROM ONLY durable.outbox WHERE key = $1",
							1, types, values);
	memset(probe, 0, sizeof(*probe));
	probe->found = (SPI_processed == 1);
	if (!probe->found)
		return;
	probe->state = TextDatumGetCString(durable_col(0, 1));
	probe->has_token = !durable_col_isnull(0, 2);
	if (probe->has_token)
		probe->token = durable_col_int64(0, 2);
	probe->has_lease = !durable_col_isnull(0, 3);
	if (probe->has_lease)
		probe->lease_until = DatumGetTimestampTz(durable_col(0, 3));
	if (!durable_col_isnull(0, 4))
		probe->provider_message_id = TextDatumGetCString(durable_col(0, 4));
}

/* Read an inbox record's state and token to explain a refused fence. */
static void
outbox_explain_inbound(int64 inbound_id)
{
	static SPIPlanPtr plans[2];
	static const Oid types[1] = {INT8OID};
	Datum		values[1];

	values[0] = Int64GetDatum(inbound_id);
	durable_exec_explaining(plans, "SELECT state, token FROM ONLY durable.inbox WHERE id = $1",
							1, types, values);
	if (SPI_processed == 0)
		outbox_error_inbound(inbound_id, false, NULL, false, 0);
	outbox_error_inbound(inbound_id, true,
						 TextDatumGetCString(durable_col(0, 1)),
						 !durable_col_isnull(0, 2),
						 durable_col_isnull(0, 2) ? 0 : durable_col_int64(0, 2));
}

/*
 * DR002 unless inbox record inbound_id exists: an enqueue with a key of its
 * own and no inbound_token only links its send to the record, but a link to
 * no record is a caller's mistake, not a value to keep.  The inbox is locked
 * as for a write first, as outbox_fence_inbound does: the handler's
 * transaction goes on to complete the record.
 */
static void
outbox_require_inbound(int64 inbound_id)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[1] = {INT8OID};
	Datum		values[1];

	durable_lock_journal_for_write(DQ_INBOX);
	values[0] = Int64GetDatum(inbound_id);
	durable_exec(durable_plan(&plan, "SELECT 1 FROM ONLY durable.inbox WHERE id = $1", 1, types),
				 values, NULL, SPI_OK_SELECT, 1);
	if (SPI_processed == 0)
		outbox_error_inbound(inbound_id, false, NULL, false, 0);
	SPI_freetuptable(SPI_tuptable);
}

/* ---- Keys ---- */

/* A random (version 4) UUID as text: the key of a send that names none. */
static Datum
outbox_random_key(void)
{
	pg_uuid_t	uuid;

	if (!pg_strong_random(uuid.data, UUID_LEN))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random idempotency key")));
	uuid.data[6] = (uuid.data[6] & 0x0f) | 0x40;
	uuid.data[8] = (uuid.data[8] & 0x3f) | 0x80;
	return CStringGetTextDatum(DatumGetCString(DirectFunctionCall1(uuid_out,
																   UUIDPGetDatum(&uuid))));
}

/*
 * The key of the next send derived from inbox record inbound_id:
 * '<inbound_id>:<n>', n counting the sends of the record's current lease
 * (the inbox resets it at every new lease, so a reprocessed message
 * re-derives the same keys; a send of another origin under the key is
 * refused, outbox_check_derived).  With with_token the record must be leased
 * with inbound_token (the fence); else it must just be leased (an
 * outbox_enqueue without inbound_token).  The UPDATE keeps the inbox record locked
 * until the caller's transaction ends.  Raises DR002 or DR001.  Caller must
 * be connected to SPI.
 */
static Datum
outbox_derive_key(int64 inbound_id, bool with_token, int64 inbound_token)
{
	static SPIPlanPtr plan_token = NULL;
	static SPIPlanPtr plan_leased = NULL;
	static const Oid types[2] = {INT8OID, INT8OID};
	Datum		values[2];

	durable_journal_check_writable(DQ_INBOX, TRIGGER_TYPE_UPDATE);
	values[0] = Int64GetDatum(inbound_id);
	values[1] = Int64GetDatum(inbound_token);
	if (with_token)
		durable_exec(durable_plan(&plan_token,
								  "UPDATE ONLY durable.inbox SET sends = sends + 1"
								  " WHERE id = $1 AND token = $2 AND state = 'leased'"
								  " RETURNING sends",
								  2, types),
					 values, NULL, SPI_OK_UPDATE_RETURNING, 0);
	else
		durable_exec(durable_plan(&plan_leased,
								  "UPDATE ONLY durable.inbox SET sends = sends + 1"
								  " WHERE id = $1 AND state = 'leased'"
								  " RETURNING sends",
								  1, types),
					 values, NULL, SPI_OK_UPDATE_RETURNING, 0);
	if (SPI_processed != 1)
		outbox_explain_inbound(inbound_id);
	return CStringGetTextDatum(psprintf("%lld:%d", (long long) inbound_id,
										durable_col_int32(0, 1)));
}

/*
 * The inbound fence when the caller names its key: inbox record
 * inbound_id must be leased with inbound_token.  FOR SHARE makes a
 * concurrent takeover or sweep of the record wait for the caller's
 * transaction.  The inbox is locked as for a write first: the handler's
 * transaction goes on to complete or fail the record.  Raises DR002 or
 * DR001.  Caller must be connected to SPI.
 */
static void
outbox_fence_inbound(int64 inbound_id, int64 inbound_token)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[1] = {INT8OID};
	Datum		values[1];
	char	   *state;
	bool		has_token;
	int64		token = 0;

	durable_lock_journal_for_write(DQ_INBOX);
	values[0] = Int64GetDatum(inbound_id);
	durable_exec(durable_plan(&plan,
							  "SELECT state, token FROM ONLY durable.inbox WHERE id = $1 FOR SHARE",
							  1, types),
				 values, NULL, SPI_OK_SELECT, 1);
	if (SPI_processed == 0)
		outbox_error_inbound(inbound_id, false, NULL, false, 0);
	state = TextDatumGetCString(durable_col(0, 1));
	has_token = !durable_col_isnull(0, 2);
	if (has_token)
		token = durable_col_int64(0, 2);
	if (strcmp(state, "leased") != 0 || !has_token || token != inbound_token)
		outbox_error_inbound(inbound_id, true, state, has_token, token);
}

/*
 * Count a repeated key, and warn when it came with another chat or payload
 * than the journaled send (which stands).  outbox_begin returns the journaled
 * ones, for a caller that is handed the send to make (detail_for_begin).
 */
static void
outbox_count_repeat(Datum key, bool diverged, bool detail_for_begin)
{
	durable_count(DC_OUTBOX_DEDUPED, 1);
	if (diverged)
	{
		durable_count(DC_OUTBOX_DIVERGED, 1);
		ereport(WARNING,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("send \"%s\" was journaled with another chat or payload",
						TextDatumGetCString(key)),
				 detail_for_begin ?
				 errdetail("The journaled chat and payload stand; they are returned in journaled_chat_id and journaled_payload.") :
				 errdetail("The journaled chat and payload are kept; this call's are ignored."),
				 detail_for_begin ?
				 errhint("On action send, send the journaled payload to the journaled chat, not this call's.") : 0));
	}
}

/*
 * A repeated outbox_sent is a no-op, but not silently when it names another
 * provider message id than the one recorded: the provider was called twice
 * for one send, and the chat has the message twice.
 */
static void
outbox_warn_other_provider_id(Datum key, const OutboxProbe *probe, Datum provider_message_id)
{
	char	   *given = TextDatumGetCString(provider_message_id);

	if (probe->provider_message_id == NULL || strcmp(probe->provider_message_id, given) == 0)
		return;
	ereport(WARNING,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("send \"%s\" was already confirmed with provider message id \"%s\"",
					TextDatumGetCString(key), probe->provider_message_id),
			 errdetail("The recorded id stands; \"%s\" is not recorded.", given),
			 errhint("Two provider message ids for one send mean that the provider was called twice: the chat may show the message twice.")));
}

/* ---- outbox_begin ---- */

/*
 * The journaled send found under a key derived from inbox record
 * *derived_from (derived_from NULL: a key the caller named) must be linked
 * to that record; column is its inbound_id in the current SPI result.  A
 * send that is not was journaled under a key of the caller's own that has
 * the derived shape ('12:1').  Answering the derived call from it would
 * drop the bot's reply without a word; passing over it to the next n would
 * not be repeatable (once that send is discarded or purged, a reprocessed
 * message would derive the freed key and send its reply again).  So the
 * call fails, as loudly as a handler's error: the message is retried, and
 * ends dead with this error unless the key is freed.
 */
static void
outbox_check_derived(Datum key, const int64 *derived_from, int column)
{
	if (derived_from == NULL ||
		(!durable_col_isnull(0, column) && durable_col_int64(0, column) == *derived_from))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("derived key \"%s\" is taken by a send that is not from inbound record " INT64_FORMAT,
					TextDatumGetCString(key), *derived_from),
			 errdetail("That send was given its key by its caller and is not linked to this record; keys of that shape, '<inbound_id>:<n>', are the ones derived from inbound records."),
			 errhint("Give keys of your own a prefix (for example \"tg:\") so that they never have that shape, or pass this send a key of its own.")));
}

/*
 * The journaled send `key` seen again by outbox_begin: decide by its state.
 * Returns false when there is no such send (it may have been discarded
 * since the caller's insert conflicted).  A key derived from an inbox record
 * (derived_from) must belong to it (outbox_check_derived).  Caller must be
 * connected to SPI.
 *
 * A plain read decides the answers that change nothing (sent, busy, wait,
 * dead, unknown): they take no row lock, so a caller that keeps its
 * transaction open after one does not hold up the holder's outbox_sent or
 * heartbeat, nor the sweep.  A send to lease, or to flag unknown, is read
 * again FOR NO KEY UPDATE — which waits for a transaction changing it, not
 * for a foreign key's reference to it — and decided afresh; that lock lasts
 * until the caller's transaction ends, also when the send changed between
 * the two reads and the answer is one from the journal after all (two
 * callers of one due key at once: the one that does not lease it).  The
 * clock is read after each read: a wait for the lock would otherwise
 * shorten the lease it grants.
 */
static bool
outbox_begin_existing(Datum key, const int64 *derived_from, Datum chat_id,
					  Datum payload, Datum instance, int64 lease_us,
					  OutboxBeginResult *res)
{
	static SPIPlanPtr plan_read[2] = {NULL, NULL};
	static SPIPlanPtr plan_lease = NULL;
	static SPIPlanPtr plan_unknown = NULL;
	static const Oid lock_types[3] = {TEXTOID, TEXTOID, JSONBOID};
	static const Oid lease_types[4] = {TEXTOID, TEXTOID, TIMESTAMPTZOID, INT8OID};
	static const Oid unknown_types[1] = {TEXTOID};
	static const char *const read_sql =
		"SELECT state, lease_until, not_before, provider_message_id, chat_id,"
		" (chat_id <> $2 OR payload <> $3), payload, id, inbound_id"
		" FROM ONLY durable.outbox WHERE key = $1";
	Datum		values[3];
	char	   *state;
	TimestampTz now;
	bool		live;
	bool		due;
	int			locked;

	values[0] = key;
	values[1] = chat_id;
	values[2] = payload;
	for (locked = 0;; locked++)
	{
		if (plan_read[locked] == NULL)
			(void) durable_plan(&plan_read[locked],
								locked ? psprintf("%s FOR NO KEY UPDATE", read_sql) : read_sql,
								3, lock_types);
		durable_exec(plan_read[locked], values, NULL, SPI_OK_SELECT, 1);
		if (SPI_processed == 0)
			return false;
		outbox_check_derived(key, derived_from, 9);
		now = GetCurrentTimestamp();
		state = TextDatumGetCString(durable_col(0, 1));
		live = !durable_col_isnull(0, 2) &&
			DatumGetTimestampTz(durable_col(0, 2)) > now;
		due = DatumGetTimestampTz(durable_col(0, 3)) <= now;
		if (locked ||
			!((strcmp(state, "sending") == 0 && !live) ||
			  ((strcmp(state, "pending") == 0 || strcmp(state, "failed") == 0) && due)))
			break;
	}

	res->diverged = DatumGetBool(durable_col(0, 6));
	outbox_count_repeat(key, res->diverged, true);
	if (res->diverged)
	{
		res->journaled_chat_id = durable_col(0, 5);
		res->journaled_payload = durable_col(0, 7);
	}
	res->has_token = false;
	res->has_provider_message_id = false;

	if (strcmp(state, "sent") == 0)
	{
		res->action = "sent";
		res->state = "sent";
		res->has_provider_message_id = !durable_col_isnull(0, 4);
		if (res->has_provider_message_id)
			res->provider_message_id = durable_col(0, 4);
	}
	else if (strcmp(state, "sending") == 0 && live)
	{
		res->action = "busy";
		res->state = "sending";
	}
	else if (strcmp(state, "sending") == 0)
	{
		/*
		 * The previous sender's lease expired without a confirmation: it may
		 * or may not have reached the provider.  Resending could post the
		 * message twice, so the send becomes unknown, like the sweep would
		 * make it; its token is kept, so that sender's late outbox_sent
		 * still resolves it.
		 */
		char	   *chat_id = TextDatumGetCString(durable_col(0, 5));
		int64		id = durable_col_int64(0, 8);

		durable_journal_check_writable(DQ_OUTBOX, TRIGGER_TYPE_UPDATE);
		durable_exec(durable_plan(&plan_unknown,
								  "UPDATE ONLY durable.outbox SET state = 'unknown', lease_until = NULL"
								  " WHERE key = $1",
								  1, unknown_types),
					 values, NULL, SPI_OK_UPDATE, 0);
		if (SPI_processed != 1)
			durable_write_skipped("outbox");
		durable_claim_floor_finished(DQ_OUTBOX, id);
		durable_count(DC_OUTBOX_AMBIGUOUS, 1);
		durable_notify_ambiguous(id, TextDatumGetCString(key), chat_id);
		/* unknown does not block its chat: a waiting claim may go on. */
		durable_wake_at_commit(DQ_OUTBOX);
		res->action = "unknown";
		res->state = "unknown";
	}
	else if ((strcmp(state, "pending") == 0 || strcmp(state, "failed") == 0) && due)
	{
		Datum		lvalues[4];

		if (strcmp(state, "failed") == 0)
			durable_count(DC_OUTBOX_RETRIED, 1);
		lvalues[0] = key;
		lvalues[1] = instance;
		lvalues[2] = TimestampTzGetDatum(now + lease_us);
		lvalues[3] = Int64GetDatum(durable_next_token());
		durable_journal_check_writable(DQ_OUTBOX, TRIGGER_TYPE_UPDATE);
		durable_exec(durable_plan(&plan_lease,
								  "UPDATE ONLY durable.outbox"
								  " SET state = 'sending', attempts = attempts + 1,"
								  " token = $4,"
								  " owner = $2, lease_until = $3"
								  " WHERE key = $1 RETURNING token",
								  4, lease_types),
					 lvalues, NULL, SPI_OK_UPDATE_RETURNING, 0);
		if (SPI_processed != 1)
			durable_write_skipped("outbox");
		res->action = "send";
		res->state = "sending";
		res->has_token = true;
		res->token = durable_col(0, 1);
		DURABLE_FAIL_POINT("outbox_begin");
	}
	else if (strcmp(state, "pending") == 0 || strcmp(state, "failed") == 0)
	{
		res->action = "wait";
		res->state = (strcmp(state, "pending") == 0) ? "pending" : "failed";
	}
	else if (strcmp(state, "dead") == 0)
	{
		res->action = "dead";
		res->state = "dead";
	}
	else
	{
		res->action = "unknown";
		res->state = "unknown";
	}
	return true;
}

/*
 * outbox_begin(idempotency_key, chat_id, payload, instance, lease,
 * inbound_id, inbound_token) → (action, key, token, provider_message_id,
 * state).  Called before the provider: a new key is journaled in state
 * sending and leased to the caller in one statement (the common case); a
 * known key is answered from the journal (outbox_begin_existing).
 */
Datum
durable_outbox_begin(PG_FUNCTION_ARGS)
{
	Datum		key;
	bool		has_key;
	Datum		chat_id;
	Datum		payload;
	Size		payload_bytes;
	Datum		instance;
	int64		lease_us;
	bool		has_inbound = !PG_ARGISNULL(5);
	int64		inbound_id = 0;
	int64		inbound_token = 0;
	bool		too_big;
	bool		numbers_too_long;
	bool		oversized;
	const int64 *derived_from;
	OutboxBeginResult res;
	Datum		out[7];
	bool		outnulls[7];
	int			race;

	has_key = durable_arg_id_or_null(fcinfo, 0, "idempotency_key", &key);
	chat_id = durable_arg_id(fcinfo, 1, "chat_id");
	payload = durable_arg_jsonb(fcinfo, 2, "payload", &payload_bytes);
	instance = durable_arg_id(fcinfo, 3, "instance");
	lease_us = durable_arg_lease_us(fcinfo, 4);
	if (has_inbound)
	{
		inbound_id = PG_GETARG_INT64(5);
		inbound_token = durable_arg_int64(fcinfo, 6, "inbound_token");
	}
	else if (!PG_ARGISNULL(6))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("inbound_token requires inbound_id")));
	too_big = payload_bytes > (Size) durable_max_payload_bytes;
	/* (a payload over the limit bypasses the journal: nothing is stored to read back) */
	numbers_too_long = !too_big && durable_payload_numbers_too_long(payload);
	/* Neither is inserted; a repeat of a journaled key is still answered. */
	oversized = too_big || numbers_too_long;

	durable_srf_init(fcinfo);
	SPI_connect();

	if (has_inbound && has_key)
		outbox_fence_inbound(inbound_id, inbound_token);
	else if (has_inbound)
		key = outbox_derive_key(inbound_id, true, inbound_token);
	else if (!has_key)
		key = outbox_random_key();

	/*
	 * An oversized payload is not inserted: its first access is a read of
	 * the send, which may then lease it or flag it.  Its lock comes after
	 * the inbound fence's, in the order every call locks the two journals
	 * (the inbox first): before 2026-12-07 it came first, and a transaction
	 * locking both journals in that order deadlocked with it.
	 */
	if (oversized)
		durable_lock_journal_for_write(DQ_OUTBOX);
	derived_from = (has_inbound && !has_key) ? &inbound_id : NULL;

	memset(&res, 0, sizeof(res));
	for (race = 0;; race++)
	{
		if (!oversized)
		{
			/* Read after the inbound fence and each race's wait. */
			TimestampTz now = GetCurrentTimestamp();
			DurableNewSend send;
			int64		token;

			send.key = key;
			send.chat_id = chat_id;
			send.payload = payload;
			send.owner = instance;
			send.lease_until = now + lease_us;
			send.now = now;
			send.has_inbound = has_inbound;
			send.inbound_id = inbound_id;
			if (durable_outbox_insert_direct(&send, &token))
			{
				(void) durable_restamp_inserted_lease(DQ_OUTBOX, key, now + lease_us, lease_us);
				durable_count(DC_OUTBOX_JOURNALED, 1);
				res.action = "send";
				res.state = "sending";
				res.has_token = true;
				res.token = Int64GetDatum(token);
				DURABLE_FAIL_POINT("outbox_begin");
				break;
			}
		}

		/*
		 * The key is journaled already (an oversized payload looks for it
		 * too: a repeat is still answered from the journal rather than sent
		 * again).
		 */
		if (outbox_begin_existing(key, derived_from, chat_id, payload, instance, lease_us, &res))
			break;

		/*
		 * Not found: a transaction in progress may be journaling the key,
		 * which the look above cannot see.  The insert would wait for it;
		 * the oversized payload, not inserted, waits for it here and looks
		 * again.
		 */
		if (oversized && race < OUTBOX_MAX_RACES && durable_outbox_await_key(key))
			continue;
		if (numbers_too_long)
			durable_refuse_payload_numbers(payload, "payload");
		if (too_big)
		{
			durable_count(DC_OUTBOX_BYPASSED, 1);
			ereport(WARNING,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("send \"%s\" bypasses the journal: its payload has %zu bytes",
							TextDatumGetCString(key), payload_bytes),
					 errdetail("Payloads over durable.max_payload_bytes (%d bytes) are not journaled, so this send is not durable.",
							   durable_max_payload_bytes)));
			res.action = "bypass";
			res.state = NULL;
			break;
		}
		if (race >= OUTBOX_MAX_RACES)
			outbox_error_races(key);
	}

	memset(outnulls, 0, sizeof(outnulls));
	out[0] = CStringGetTextDatum(res.action);
	out[1] = key;
	out[2] = res.token;
	outnulls[2] = !res.has_token;
	out[3] = res.provider_message_id;
	outnulls[3] = !res.has_provider_message_id;
	outnulls[4] = (res.state == NULL);
	out[4] = outnulls[4] ? (Datum) 0 : CStringGetTextDatum(res.state);
	out[5] = res.journaled_chat_id;
	outnulls[5] = !res.diverged;
	out[6] = res.journaled_payload;
	outnulls[6] = !res.diverged;
	durable_srf_put(fcinfo, out, outnulls);

	SPI_finish();
	return (Datum) 0;
}

/* ---- outbox_sent ---- */

/*
 * The provider's message id of outbox_sent.  A refusal here leaves a send
 * that went out `sending`, later `unknown`: say how to record it anyway.
 */
static Datum
outbox_arg_provider_id(FunctionCallInfo fcinfo, int argno)
{
	return durable_arg_id_hinted(fcinfo, argno, "provider_message_id",
								 "When the provider answers without a message id, pass a text of your own "
								 "that names the send (its key, say): the send is recorded as sent either way.",
								 "Pass a digest of it, such as md5(id), and keep the full answer elsewhere: "
								 "the send is recorded as sent either way.");
}

/*
 * outbox_sent(key, token, provider_message_id): the provider accepted the
 * send.  Accepted from the token's holder while the send is sending, or
 * unknown (flagged after its lease expired: the holder's confirmation
 * resolves the ambiguity truthfully).  A repeat by the same token once sent
 * is a no-op (a client retrying after a lost connection); one that names
 * another provider message id keeps the first and warns, for two ids of one
 * send mean that the provider was called twice.
 */
Datum
durable_outbox_sent(PG_FUNCTION_ARGS)
{
	Datum		values[3];
	bool		wake = true;
	bool		ask;
	OutboxProbe probe;

	values[0] = durable_arg_id(fcinfo, 0, "key");
	values[1] = Int64GetDatum(durable_arg_int64(fcinfo, 1, "token"));
	values[2] = outbox_arg_provider_id(fcinfo, 2);

	/*
	 * The fenced UPDATE, without the executor (direct.c).  Waiting claimers
	 * are woken only when a younger send of the same chat is waiting for
	 * this one (per-chat order), so that the hot path does not wake them
	 * for nothing.  Finding out costs an index probe, made only while a
	 * claimer waits; otherwise the wake at commit is sent regardless (it
	 * finds nobody, or a claimer that began to wait since).
	 */
	ask = durable_claimers_waiting(DQ_OUTBOX);
	if (durable_outbox_sent_direct(values[0], DatumGetInt64(values[1]), values[2],
								   GetCurrentTimestamp(), ask ? &wake : NULL))
	{
		if (wake)
			durable_wake_at_commit(DQ_OUTBOX);
		DURABLE_FAIL_POINT("outbox_sent");
		PG_RETURN_VOID();
	}

	SPI_connect();
	outbox_probe(values[0], &probe);
	if (!probe.found)
		outbox_error_missing(values[0]);
	if (!probe.has_token || probe.token != DatumGetInt64(values[1]))
		outbox_error_stale(values[0], &probe);
	if (outbox_lease_ended(probe.state))
		outbox_error_lease_ended(values[0], &probe);
	if (strcmp(probe.state, "sent") != 0)
		outbox_error_state(values[0], probe.state,
						   "Only a send in state sending or unknown can be confirmed as sent.");
	outbox_warn_other_provider_id(values[0], &probe, values[2]);
	SPI_finish();
	PG_RETURN_VOID();
}

/* ---- outbox_failed ---- */

/*
 * outbox_failed(key, token, error, retryable, retry_in) → (state,
 * not_before).  The provider refused the send: it is due again after the
 * backoff (or retry_in), or dead when not retryable or after
 * durable.outbox_retries retries.  Fenced like outbox_sent: accepted from
 * the token's holder while the send is sending, or unknown (its lease ran
 * out, or instance_start took it back, before the refusal was told: the
 * provider's answer resolves the ambiguity, as a confirmation does).
 */
Datum
durable_outbox_failed(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan_lock = NULL;
	static SPIPlanPtr plan_update = NULL;
	static const Oid lock_types[1] = {TEXTOID};
	static const Oid update_types[4] = {TEXTOID, TEXTOID, TIMESTAMPTZOID, TEXTOID};
	TimestampTz now;
	Datum		key;
	int64		token;
	Datum		error;
	int			clipped_from;
	bool		retryable;
	int64		retry_in_us;
	OutboxProbe probe;
	int32		attempts;
	bool		dead;
	TimestampTz not_before = 0;
	Datum		values[4];
	char		nulls[4];
	Datum		out[2];
	bool		outnulls[2];

	key = durable_arg_id(fcinfo, 0, "key");
	token = durable_arg_int64(fcinfo, 1, "token");
	error = durable_arg_error(fcinfo, 2, &clipped_from);
	retryable = durable_arg_bool(fcinfo, 3, "retryable");

	durable_srf_init(fcinfo);
	SPI_connect();
	durable_journal_check_writable(DQ_OUTBOX, TRIGGER_TYPE_UPDATE);

	values[0] = key;
	durable_exec(durable_plan(&plan_lock,
							  "SELECT state, token, attempts FROM ONLY durable.outbox"
							  " WHERE key = $1 FOR NO KEY UPDATE",
							  1, lock_types),
				 values, NULL, SPI_OK_SELECT, 1);
	memset(&probe, 0, sizeof(probe));
	probe.found = (SPI_processed == 1);
	if (!probe.found)
		outbox_error_missing(key);
	probe.state = TextDatumGetCString(durable_col(0, 1));
	probe.has_token = !durable_col_isnull(0, 2);
	if (probe.has_token)
		probe.token = durable_col_int64(0, 2);
	attempts = durable_col_int32(0, 3);
	if (!probe.has_token || probe.token != token)
		outbox_error_stale(key, &probe);
	if (outbox_lease_ended(probe.state))
		outbox_error_lease_ended(key, &probe);
	if (strcmp(probe.state, "sending") != 0 && strcmp(probe.state, "unknown") != 0)
		outbox_error_state(key, probe.state,
						   "Only a send in state sending or unknown can fail.");

	/* After the lock: a wait for it must not eat into the backoff */
	now = GetCurrentTimestamp();
	/* attempts counts tries: retries used so far are attempts - 1. */
	dead = !retryable || attempts > durable_outbox_retries;

	/*
	 * retry_in is checked only for a send that will be retried: a dead one
	 * ignores it, so that a bad value cannot turn the provider's verdict
	 * into an error, and the send, its lease run out, into an ambiguous
	 * one.  For the same reason a negative one (a Retry-After already past,
	 * the clocks skewed) makes the send due at once.
	 */
	if (!dead && PG_ARGISNULL(4))
		not_before = now + durable_backoff_us(attempts,
											  (int64) durable_outbox_backoff_base_ms * 1000,
											  (int64) durable_outbox_backoff_cap_ms * 1000);
	else if (!dead)
	{
		retry_in_us = durable_arg_interval_us(fcinfo, 4, "retry_in", 0, PG_INT64_MIN,
											  DURABLE_MAX_DELAY_US);
		not_before = now + Max(retry_in_us, 0);
	}

	/* (t/009_claim_floor holds a failure here, its clock read) */
	DURABLE_FAIL_POINT("outbox_failed_update");
	memset(nulls, ' ', sizeof(nulls));
	values[1] = CStringGetTextDatum(dead ? "dead" : "failed");
	values[2] = TimestampTzGetDatum(not_before);
	if (dead)
		nulls[2] = 'n';
	values[3] = error;
	durable_exec(durable_plan(&plan_update,
							  "UPDATE ONLY durable.outbox"
							  " SET state = $2, not_before = COALESCE($3, not_before),"
							  " lease_until = NULL, error = $4"
							  " WHERE key = $1 RETURNING id",
							  4, update_types),
				 values, nulls, SPI_OK_UPDATE_RETURNING, 1);
	if (SPI_processed != 1)
		durable_write_skipped("outbox");
	if (!dead)
		durable_claim_floor_comes_due(DQ_OUTBOX, durable_col_int64(0, 1), not_before);
	else
		durable_claim_floor_finished(DQ_OUTBOX, durable_col_int64(0, 1));
	durable_error_clipped(clipped_from, error);

	if (dead)
	{
		durable_notify_dead_outbox(durable_col_int64(0, 1), TextDatumGetCString(key),
								   TextDatumGetCString(error));
		durable_count(DC_OUTBOX_DEAD, 1);
	}

	/*
	 * Dead unblocks the chat; failed brings a new due time that waiting
	 * claimers must take into account.  Either way, wake them.
	 */
	durable_wake_at_commit(DQ_OUTBOX);
	DURABLE_FAIL_POINT("outbox_failed");

	out[0] = values[1];
	outnulls[0] = false;
	out[1] = TimestampTzGetDatum(not_before);
	outnulls[1] = dead;
	durable_srf_put(fcinfo, out, outnulls);
	SPI_finish();
	return (Datum) 0;
}

/* ---- outbox_enqueue ---- */

/* Raise 54000 for an enqueued payload over durable.max_payload_bytes. */
static pg_attribute_noreturn() void
outbox_refuse_payload_size(Size bytes)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("payload is too large (%zu bytes)", bytes),
			 errdetail("Payloads are limited to %d bytes.", durable_max_payload_bytes),
			 errhint("Raise \"durable.max_payload_bytes\", or send it with outbox_begin, which bypasses the journal.")));
}

/*
 * outbox_enqueue(idempotency_key, chat_id, payload, not_before, inbound_id,
 * inbound_token) → (key, created, state).  A send for a sender loop
 * (outbox_claim), due at not_before.  A repeated key changes nothing.
 * Unlike outbox_begin, an oversized payload is refused (54000): there is no
 * caller standing by to send it without the journal.
 *
 * inbound_token (0.8) fences the enqueue as outbox_begin is fenced: the
 * inbound record must be leased with it.  Without it, a derived key only
 * needs the record to be leased, to whomever (0.7's signature, kept for
 * callers that enqueue in the transaction that completes the record).  The
 * library also serves 0.7's five-argument function until the update.
 */
Datum
durable_outbox_enqueue(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan_insert = NULL;
	static SPIPlanPtr plan_existing = NULL;
	static const Oid insert_types[6] = {TEXTOID, TEXTOID, JSONBOID,
	TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID};
	TimestampTz now = GetCurrentTimestamp();
	Datum		key;
	bool		has_key;
	Datum		chat_id;
	Datum		payload;
	Size		payload_bytes;
	bool		too_big;
	bool		numbers_too_long;
	bool		oversized;
	TimestampTz not_before;
	bool		has_inbound = !PG_ARGISNULL(4);
	int64		inbound_id = has_inbound ? PG_GETARG_INT64(4) : 0;
	bool		has_token = PG_NARGS() > 5 && !PG_ARGISNULL(5);
	int64		inbound_token = has_token ? PG_GETARG_INT64(5) : 0;
	const int64 *derived_from;
	Datum		values[6];
	char		nulls[6];
	bool		created = false;
	Datum		state = (Datum) 0;
	Datum		out[3];
	bool		outnulls[3];
	int			race;

	has_key = durable_arg_id_or_null(fcinfo, 0, "idempotency_key", &key);
	chat_id = durable_arg_id(fcinfo, 1, "chat_id");
	payload = durable_arg_jsonb(fcinfo, 2, "payload", &payload_bytes);
	too_big = payload_bytes > (Size) durable_max_payload_bytes;
	not_before = PG_ARGISNULL(3) ? now : PG_GETARG_TIMESTAMPTZ(3);
	if (TIMESTAMP_NOT_FINITE(not_before))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("not_before must be finite")));
	if (not_before > now + DURABLE_MAX_DELAY_US)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("not_before must be at most 366 days ahead")));
	if (has_token && !has_inbound)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("inbound_token requires inbound_id")));
	numbers_too_long = !too_big && durable_payload_numbers_too_long(payload);
	/* A random key cannot be journaled already: refused before any lock. */
	if (numbers_too_long && !has_key && !has_inbound)
		durable_refuse_payload_numbers(payload, "payload");
	if (too_big && !has_key && !has_inbound)
		outbox_refuse_payload_size(payload_bytes);
	oversized = too_big || numbers_too_long;

	durable_srf_init(fcinfo);
	SPI_connect();

	if (has_token && has_key)
		outbox_fence_inbound(inbound_id, inbound_token);
	else if (has_inbound && has_key)
		outbox_require_inbound(inbound_id);
	else if (has_inbound && !has_key)
		key = outbox_derive_key(inbound_id, has_token, inbound_token);
	else if (!has_key)
		key = outbox_random_key();
	derived_from = (has_inbound && !has_key) ? &inbound_id : NULL;
	/*
	 * The same checks as outbox_begin's direct insert (its INSERT draws the
	 * id from outbox_id_seq); after the inbox, in the order the other calls
	 * lock the two journals.
	 */
	durable_journal_check_writable(DQ_OUTBOX, TRIGGER_TYPE_INSERT);
	/* Its id is drawn in commit order within the chat (chat_lock.c). */
	durable_lock_chat(DQ_OUTBOX, chat_id);

	values[0] = key;
	values[1] = chat_id;
	values[2] = payload;
	values[3] = TimestampTzGetDatum(not_before);
	values[4] = Int64GetDatum(inbound_id);
	memset(nulls, ' ', sizeof(nulls));
	if (!has_inbound)
		nulls[4] = 'n';
	values[5] = TimestampTzGetDatum(now);
	for (race = 0;; race++)
	{
		/*
		 * An oversized payload (or one whose numbers are too long) is
		 * refused only for a key not journaled: a sender loop repeating an
		 * enqueue made before the limit was lowered is answered from the
		 * journal, as outbox_begin answers it.
		 */
		if (!oversized)
		{
			durable_exec(durable_plan(&plan_insert,
									  "INSERT INTO durable.outbox"
									  " (key, chat_id, payload, state, attempts, not_before,"
									  "  inbound_id, created_at)"
									  " VALUES ($1, $2, $3, 'pending', 0, $4, $5, $6)"
									  " ON CONFLICT (key) DO NOTHING RETURNING state, id",
									  6, insert_types),
						 values, nulls, SPI_OK_INSERT_RETURNING, 0);
			if (SPI_processed == 1)
			{
				created = true;
				state = durable_col(0, 1);
				durable_claim_floor_admitted(DQ_OUTBOX, durable_col_int64(0, 2));
				durable_count(DC_OUTBOX_JOURNALED, 1);
				durable_count(DC_OUTBOX_DEFERRED, 1);
				durable_wake_at_commit(DQ_OUTBOX);
				break;
			}
		}

		/* A fresh statement sees the committed winner of the conflict. */
		durable_exec(durable_plan(&plan_existing,
								  "SELECT state, (chat_id <> $2 OR payload <> $3), inbound_id"
								  " FROM ONLY durable.outbox WHERE key = $1",
								  3, insert_types),
					 values, NULL, SPI_OK_SELECT, 1);
		if (SPI_processed == 1)
		{
			outbox_check_derived(key, derived_from, 3);
			state = durable_col(0, 1);
			outbox_count_repeat(key, DatumGetBool(durable_col(0, 2)), false);
			break;
		}
		/*
		 * Not found: a transaction in progress may be journaling the key
		 * (an outbox_begin, which takes no chat lock).  The insert would
		 * wait for it; the oversized payload waits here and looks again.
		 */
		if (oversized && race < OUTBOX_MAX_RACES && durable_outbox_await_key(key))
			continue;
		if (numbers_too_long)
			durable_refuse_payload_numbers(payload, "payload");
		if (too_big)
			outbox_refuse_payload_size(payload_bytes);
		if (race >= OUTBOX_MAX_RACES)
			outbox_error_races(key);
	}

	memset(outnulls, 0, sizeof(outnulls));
	out[0] = key;
	out[1] = BoolGetDatum(created);
	out[2] = state;
	durable_srf_put(fcinfo, out, outnulls);
	SPI_finish();
	return (Datum) 0;
}

/* ---- outbox_claim ---- */

/* Where outbox_claim's leased sends go. */
typedef struct OutboxClaimed
{
	FunctionCallInfo fcinfo;
	int64		retried;		/* how many were failed sends */
} OutboxClaimed;

static void
outbox_claimed_put(void *arg, const Datum *values, const bool *nulls, Datum state_before)
{
	OutboxClaimed *claimed = (OutboxClaimed *) arg;

	durable_srf_put(claimed->fcinfo, (Datum *) values, (bool *) nulls);
	if (durable_text_equal_cstring(state_before, "failed"))
		claimed->retried++;
}

/*
 * One claim attempt: lease up to max due pending and failed sends, oldest
 * first, at most one per chat and never one behind an unfinished older
 * send of its chat, and put them in the result.  Returns how many.
 *
 * Sends that a concurrent claim or confirmation holds are skipped, as SKIP
 * LOCKED would, and so are sends another transaction changed after the
 * claim's snapshot was taken (direct.c, direct_claim_one).  The scan
 * starts at the outbox's claim floor (claim_floor.c).
 */
static uint64
outbox_claim_once(FunctionCallInfo fcinfo, const DurableClaimCall *call, TimestampTz now,
				  bool *in_flight)
{
	DurableClaim claim;
	OutboxClaimed claimed;
	uint64		n;

	claim.owner = call->instance;
	claim.now = now;
	claim.lease_until = claim.now + call->lease_us;
	claim.max_attempts = 0;
	claim.max = call->max;
	claim.floor = durable_claim_floor(DQ_OUTBOX, claim.now, &claim.freed);
	claimed.fcinfo = fcinfo;
	claimed.retried = 0;
	n = durable_claim_direct(DQ_OUTBOX, &claim, outbox_claimed_put, &claimed, in_flight);
	if (claimed.retried > 0)
		durable_count(DC_OUTBOX_RETRIED, claimed.retried);
	return n;
}

/*
 * The earliest not_before after now of a pending or failed send (one probe
 * of outbox_not_before_idx), or 0 when there is none.  Caller must be
 * connected to SPI.
 */
static TimestampTz
outbox_next_due(TimestampTz now)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[1] = {TIMESTAMPTZOID};
	Datum		values[1];
	TimestampTz next = 0;

	values[0] = TimestampTzGetDatum(now);
	durable_exec(durable_plan(&plan,
							  "SELECT not_before FROM ONLY durable.outbox"
							  " WHERE state = ANY (ARRAY['pending', 'failed']::pg_catalog.text[])"
							  " AND not_before > $1 ORDER BY not_before LIMIT 1",
							  1, types),
				 values, NULL, SPI_OK_SELECT, 1);
	if (SPI_processed == 1 && !durable_col_isnull(0, 1))
		next = DatumGetTimestampTz(durable_col(0, 1));
	SPI_freetuptable(SPI_tuptable);
	return next;
}

/*
 * outbox_claim(instance, max, lease, wait) → (key, token, chat_id, payload,
 * attempts).  Leases due sends for a sender loop.  max is capped at
 * OUTBOX_MAX_CLAIM.  With wait > 0 and nothing claimable, sleeps in the
 * server until a send is enqueued, retried or unblocked (waiting.c), the
 * next deferred or backed-off send comes due, or wait passes.
 */
Datum
durable_outbox_claim(PG_FUNCTION_ARGS)
{
	DurableClaimCall call = {.attempt = outbox_claim_once, .next_due = outbox_next_due};

	durable_claim(fcinfo, DQ_OUTBOX, OUTBOX_MAX_CLAIM, &call);
	return (Datum) 0;
}

/* ---- outbox_heartbeat ---- */

/*
 * outbox_heartbeat(key, token, lease) → the new lease_until.  Extends the
 * lease of a sending send held by token (DR001 once it was taken over or
 * swept, DR002 when there is no such send).
 */
Datum
durable_outbox_heartbeat(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[3] = {TEXTOID, INT8OID, INTERVALOID};
	TimestampTz lease_until;
	int64		lease_us;
	Datum		values[3];
	OutboxProbe probe;

	values[0] = durable_arg_id(fcinfo, 0, "key");
	values[1] = Int64GetDatum(durable_arg_int64(fcinfo, 1, "token"));
	lease_us = durable_arg_lease_us(fcinfo, 2);
	values[2] = durable_interval_datum(lease_us);

	/* From when the row is ours (durable_restamp_lease). */
	SPI_connect();
	durable_journal_check_writable(DQ_OUTBOX, TRIGGER_TYPE_UPDATE);
	durable_exec(durable_plan(&plan,
							  "UPDATE ONLY durable.outbox SET lease_until = pg_catalog.clock_timestamp() + $3"
							  " WHERE key = $1 AND token = $2 AND state = 'sending'"
							  " RETURNING lease_until",
							  3, types),
				 values, NULL, SPI_OK_UPDATE_RETURNING, 0);
	if (SPI_processed != 1)
	{
		outbox_probe(values[0], &probe);
		if (!probe.found)
			outbox_error_missing(values[0]);
		if (probe.has_token && probe.token == DatumGetInt64(values[1]))
			outbox_error_heartbeat_ended(values[0], &probe);
		/* Another token holds it, or none ever did. */
		outbox_error_stale(values[0], &probe);
	}
	lease_until = durable_restamp_lease(plan, values, DatumGetTimestampTz(durable_col(0, 1)),
										lease_us);
	SPI_finish();
	PG_RETURN_TIMESTAMPTZ(lease_until);
}

/* ---- outbox_retry ---- */

/*
 * outbox_retry(key): a dead, failed or unknown send is due again now, with
 * its attempts reset (an operator's decision, e.g. after checking that an
 * unknown send did not reach the chat).
 */
Datum
durable_outbox_retry(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[2] = {TEXTOID, TIMESTAMPTZOID};
	TimestampTz now = GetCurrentTimestamp();
	Datum		values[2];
	OutboxProbe probe;

	values[0] = durable_arg_id(fcinfo, 0, "key");
	values[1] = TimestampTzGetDatum(now);

	SPI_connect();
	durable_journal_check_writable(DQ_OUTBOX, TRIGGER_TYPE_UPDATE);
	durable_exec(durable_plan(&plan,
							  "UPDATE ONLY durable.outbox"
							  " SET state = 'pending', not_before = $2, attempts = 0,"
							  " lease_until = NULL"
							  " WHERE key = $1"
							  " AND state = ANY (ARRAY['dead', 'failed', 'unknown']::pg_catalog.text[])"
							  " RETURNING id",
							  2, types),
				 values, NULL, SPI_OK_UPDATE_RETURNING, 0);
	if (SPI_processed != 1)
	{
		outbox_probe(values[0], &probe);
		if (!probe.found)
			outbox_error_missing(values[0]);
		outbox_error_state(values[0], probe.state,
						   "Only a dead, failed or unknown send can be retried.");
	}
	durable_claim_floor_lower(DQ_OUTBOX, durable_col_int64(0, 1));
	durable_count(DC_OUTBOX_RETRIED, 1);
	durable_wake_at_commit(DQ_OUTBOX);
	SPI_finish();
	PG_RETURN_VOID();
}

/* ---- outbox_discard ---- */

/*
 * outbox_discard(key) → whether the send existed.  Deletes it in any state
 * but one: a send whose lease is live is refused (DR003), since its sender
 * would then confirm a send that no longer exists.  An expired lease may be
 * discarded (the late sender's confirmation then gets DR002).
 */
Datum
durable_outbox_discard(PG_FUNCTION_ARGS)
{
	static SPIPlanPtr plan = NULL;
	static const Oid types[2] = {TEXTOID, TIMESTAMPTZOID};
	TimestampTz now = GetCurrentTimestamp();
	Datum		values[2];
	OutboxProbe probe;
	int			race;
	DurableDeleteCheck check;

	values[0] = durable_arg_id(fcinfo, 0, "key");
	values[1] = TimestampTzGetDatum(now);

	SPI_connect();
	/* (a policy that hid the send from the DELETE would look like a race) */
	durable_journal_refuse_rls(DQ_OUTBOX);
	durable_delete_check("durable.outbox", false, &check);
	if (check.unsafe != NULL)
		durable_delete_refused(ERROR, "durable.outbox",
							   psprintf("cannot discard send \"%s\": %s takes part in durable.outbox's deletes",
										TextDatumGetCString(values[0]), check.unsafe));
	for (race = 0;; race++)
	{
		durable_exec(durable_plan(&plan,
								  "DELETE FROM ONLY durable.outbox"
								  " WHERE key = $1"
								  " AND NOT (state = 'sending' AND COALESCE(lease_until > $2, false))"
								  " RETURNING id",
								  2, types),
					 values, NULL, SPI_OK_DELETE_RETURNING, 0);
		if (SPI_processed == 1)
		{
			/* It may have blocked its chat. */
			durable_claim_floor_finished(DQ_OUTBOX, durable_col_int64(0, 1));
			durable_wake_at_commit(DQ_OUTBOX);
			SPI_finish();
			PG_RETURN_BOOL(true);
		}
		outbox_probe(values[0], &probe);
		if (!probe.found)
		{
			durable_refuse_journaled_since(DQ_OUTBOX, values[0]);
			SPI_finish();
			PG_RETURN_BOOL(false);
		}
		if (strcmp(probe.state, "sending") == 0 && probe.has_lease &&
			probe.lease_until > now)
			ereport(ERROR,
					(errcode(ERRCODE_DURABLE_WRONG_STATE),
					 errmsg("send \"%s\" is being sent", TextDatumGetCString(values[0])),
					 errdetail("Its sender holds a lease until %s.",
							   timestamptz_to_str(probe.lease_until)),
					 errhint("Discard it after its sender confirmed it or its lease expired.")));
		/*
		 * Deletable, not deleted, time after time: a change between the two
		 * statements that keeps coming, or a trigger that returns NULL.
		 */
		if (race >= OUTBOX_MAX_RACES &&
			durable_journal_has_before_trigger(DQ_OUTBOX, TRIGGER_TYPE_DELETE))
			durable_write_skipped("outbox");
		if (race >= OUTBOX_MAX_RACES)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not discard send \"%s\": it is changing concurrently",
							TextDatumGetCString(values[0])),
					 errhint("Retry the call.")));
	}
}
