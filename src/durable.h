/*-------------------------------------------------------------------------
 *
 * durable.h
 *		What the files of durable share: settings, error codes, argument
 *		checks, SPI helpers, counters and fail points.
 *
 * IDENTIFICATION
 *	  src/durable.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_H
#define DURABLE_H

#include "postgres.h"

/* PostgreSQL 16 moved the varlena macros (VARSIZE, SET_VARSIZE...) here. */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "portability/instr_time.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

/* ---- SQLSTATEs of the contract ---- */
#define ERRCODE_DURABLE_STALE_LEASE		MAKE_SQLSTATE('D','R','0','0','1')
#define ERRCODE_DURABLE_NO_SUCH_RECORD	MAKE_SQLSTATE('D','R','0','0','2')
#define ERRCODE_DURABLE_WRONG_STATE		MAKE_SQLSTATE('D','R','0','0','3')

/*
 * The hint of an error about one of durable's tables, columns or indexes
 * that is missing or changed.  Not "drop the extension and create it
 * again": that deletes the journals.
 */
#define DURABLE_DAMAGED_HINT \
	"An object of durable's was dropped, renamed or changed by hand: put it back as durable's install script defines it. DROP EXTENSION would delete the journals."

/* Ids, keys, instance names and other identifying text: at most this many bytes. */
#define DURABLE_MAX_ID_BYTES	512

/*
 * The condition of a scan of the open inbox records in id order (claims,
 * lease recovery, due times): the predicate of inbox_unfinished_idx, spelled
 * exactly so that the planner can use it.  Its "id > 0" is always true and
 * is there so that per-chat probes, which spell only "finished_at IS NULL",
 * cannot be planned on this index (durable--0.3--0.4.sql says why).
 */
#define INBOX_OPEN_SCAN(alias)	alias ".finished_at IS NULL AND " alias ".id > 0"

/*
 * Microseconds on CLOCK_MONOTONIC: the same clock in every process, and one
 * that is never set back.  Deadlines and pacing inside the server (a waiting
 * claim's end, the worker's next pass, the claim floor's next refresh, the
 * launcher's restart delays) use it, so that a wall clock stepped back an
 * hour does not stretch them by an hour.  Whatever is compared with a
 * timestamp stored in a table (lease_until, not_before) uses the wall clock.
 */
static inline int64
durable_clock_us(void)
{
	instr_time	t;

	INSTR_TIME_SET_CURRENT(t);
	return (int64) INSTR_TIME_GET_MICROSEC(t);
}

/*
 * Rate limit of a WARNING that would otherwise come at every call or pass:
 * whether it may be given now, *last_us being when it was last given (0:
 * never); if so, now becomes the last.
 */
static inline bool
durable_warn_due(int64 *last_us, int64 interval_us)
{
	int64		now = durable_clock_us();

	if (*last_us != 0 && now - *last_us < interval_us)
		return false;
	*last_us = now;
	return true;
}

/* ---- Settings (durable.c) ---- */
extern int	durable_lease_ms;
extern int	durable_inbox_max_attempts;
extern int	durable_inbox_backoff_base_ms;
extern int	durable_inbox_backoff_cap_ms;
extern int	durable_outbox_retries;
extern int	durable_outbox_backoff_base_ms;
extern int	durable_outbox_backoff_cap_ms;
extern int	durable_retention_s;
extern int	durable_max_payload_bytes;
extern int	durable_max_error_bytes;
extern int	durable_naptime_ms;
extern int	durable_absent_recheck_ms;
extern int	durable_max_databases;	/* shared memory slots, fixed at start */
#define DURABLE_DEFAULT_MAX_DATABASES	128
extern bool durable_claim_floor_enabled;
extern int	durable_bound_count;
extern int	durable_bound_age_s;
extern char *durable_fail_point;

/* durable.notify_payload: what durable_dead and durable_ambiguous carry. */
typedef enum DurableNotifyPayload
{
	DURABLE_NOTIFY_FULL,		/* keys, chat ids, errors (the contract's) */
	DURABLE_NOTIFY_IDS			/* record ids only */
} DurableNotifyPayload;
extern int	durable_notify_payload;
extern double durable_notify_queue_max;

/* ---- Argument checks (args.c); each raises 22023 with the argument's name ---- */

/* Non-NULL, non-empty text of at most DURABLE_MAX_ID_BYTES; returns the detoasted datum. */
extern Datum durable_arg_id(FunctionCallInfo fcinfo, int argno, const char *name);

/*
 * As durable_arg_id, with hints (either may be NULL): hint_missing for a
 * NULL or empty id, hint_long for one over the limit.
 */
extern Datum durable_arg_id_hinted(FunctionCallInfo fcinfo, int argno, const char *name,
								   const char *hint_missing, const char *hint_long);

/* As durable_arg_id, but NULL is allowed (returns false and sets *value to 0). */
extern bool durable_arg_id_or_null(FunctionCallInfo fcinfo, int argno, const char *name,
								   Datum *value);

/*
 * The non-NULL error text of inbox_fail and outbox_failed, clipped between
 * characters to durable.max_error_bytes with a marker; *clipped_from is its
 * length when it was clipped, else 0.  Once the failure is recorded,
 * durable_error_clipped() says so in a WARNING (01004).
 */
extern Datum durable_arg_error(FunctionCallInfo fcinfo, int argno, int *clipped_from);
extern void durable_error_clipped(int clipped_from, Datum error);

/* Non-NULL bigint / integer / boolean. */
extern int64 durable_arg_int64(FunctionCallInfo fcinfo, int argno, const char *name);
extern int32 durable_arg_int32(FunctionCallInfo fcinfo, int argno, const char *name);
extern bool durable_arg_bool(FunctionCallInfo fcinfo, int argno, const char *name);

/* A jsonb argument; NULL raises 22023.  *bytes receives its stored size. */
extern Datum durable_arg_jsonb(FunctionCallInfo fcinfo, int argno, const char *name,
							   Size *bytes);

/*
 * A payload's numbers written out may take this many times
 * durable.max_payload_bytes, and at most DURABLE_PAYLOAD_NUMBERS_MAX bytes.
 */
#define DURABLE_PAYLOAD_NUMBERS_FACTOR 4
#define DURABLE_PAYLOAD_NUMBERS_MAX ((Size) 256 * 1024 * 1024)

/*
 * Whether a payload's numbers written out take more (jsonb stores a number
 * of any length in a few bytes; every reader writes it out); such a payload
 * is refused (54000) unless it repeats a message or send journaled already,
 * which is answered from the journal.  After the other argument checks.
 */
extern bool durable_payload_numbers_too_long(Datum payload);
extern pg_attribute_noreturn() void durable_refuse_payload_numbers(Datum payload, const char *name);

/*
 * An interval argument converted to microseconds (a month counts 30 days).
 * NULL gives default_us; the result must lie in [min_us, max_us], and
 * infinite intervals are refused, negative ones too unless min_us is.
 */
extern int64 durable_arg_interval_us(FunctionCallInfo fcinfo, int argno, const char *name,
									 int64 default_us, int64 min_us, int64 max_us);

/* The lease argument: NULL means durable.lease; at least 20 ms, at most 7 days. */
extern int64 durable_arg_lease_us(FunctionCallInfo fcinfo, int argno);

/* The wait argument of claims: NULL or 0 means do not wait; at most 1 hour. */
extern int64 durable_arg_wait_us(FunctionCallInfo fcinfo, int argno);

/* An interval of exactly us microseconds, as an SPI argument or a result. */
extern Datum durable_interval_datum(int64 us);

/*
 * Whether a lease of lease_us ending at lease_until was stamped more than a
 * tenth of its length ago: the statement that stamped it read the clock,
 * then waited for another transaction's lock on the row.  Callers stamp it
 * again, now that the row is theirs.
 */
extern bool durable_lease_stamped_before_wait(TimestampTz lease_until, int64 lease_us);

/* ---- Limits shared by the checks ---- */
#define DURABLE_MIN_LEASE_US	(20 * INT64CONST(1000))
#define DURABLE_MAX_LEASE_US	(7 * USECS_PER_DAY)
#define DURABLE_MAX_WAIT_US		(3600 * USECS_PER_SEC)
#define DURABLE_MAX_DELAY_US	(366 * USECS_PER_DAY)

/* ---- SPI helpers (spi_util.c) ---- */

/* ERROR (55000, with what to do) unless durable_schema_current; once per backend. */
extern void durable_require_current_schema(void);

/*
 * Return the plan cached in *cache, preparing and keeping it on first use.
 * The statement must schema-qualify every name it uses.
 */
extern char *durable_installed_version(void);
extern bool durable_storage_is_new(Oid relid);
/* The role durable runs as: its members' owner (InvalidOid: not installed). */
extern Oid	durable_owner(void);
/* Whether the current user has USAGE on schema nsp. */
extern bool durable_may_use_schema(Oid nsp);
extern bool durable_schema_current(char **installed);
extern SPIPlanPtr durable_plan(SPIPlanPtr *cache, const char *sql, int nargs,
							   const Oid *argtypes);
extern void durable_plan_build(SPIPlanPtr plan);

/*
 * A statement of durable's on one of its tables wrote or deleted no row
 * where it must have (the row was found and locked, or was found time after
 * time): a BEFORE trigger of the DBA's returned NULL.  Raises 55000 naming
 * the table.
 */
extern void durable_write_skipped(const char *table) pg_attribute_noreturn();
/* Run a cached plan and check that SPI returned exactly `expected`. */
extern void durable_exec(SPIPlanPtr plan, const Datum *values, const char *nulls,
						 int expected, long count);
extern void durable_exec_explaining(SPIPlanPtr *plans, const char *sql, int nargs,
									const Oid *argtypes, const Datum *values);

/*
 * After a heartbeat's `plan` (UPDATE ... SET lease_until =
 * clock_timestamp() + lease ... RETURNING lease_until first) stamped
 * lease_until: when the stamp predates a wait for the row
 * (durable_lease_stamped_before_wait), run it again and return the new
 * lease_until; else return lease_until.
 */
extern TimestampTz durable_restamp_lease(SPIPlanPtr plan, const Datum *values,
										 TimestampTz lease_until, int64 lease_us);

/* Column accessors for the current SPI result (1-based columns). */
extern bool durable_col_isnull(uint64 row, int col);
extern Datum durable_col(uint64 row, int col);
extern int64 durable_col_int64(uint64 row, int col);
extern int32 durable_col_int32(uint64 row, int col);
/* Copy a by-reference column into the upper (caller's) memory context. */
extern Datum durable_col_copy(uint64 row, int col);

/* Single-row and multi-row results of set-returning (RETURNS TABLE) functions. */
extern void durable_srf_init(FunctionCallInfo fcinfo);
extern void durable_srf_put(FunctionCallInfo fcinfo, Datum *values, bool *nulls);

/* ---- Foreign keys of yours that reference the journals (references.c) ---- */

/* What durable may do when it deletes from a table of its own. */
typedef struct DurableDeleteCheck
{
	char	   *unsafe;			/* the first key that forbids it, described;
								 * NULL: none */
	char	   *busy;			/* with nowait: a table whose lock was taken,
								 * named; NULL: none */
	char	   *guards;			/* the purge's guards on alias c ("" when none) */
	List	   *guard_relations;	/* what a statement with them may read:
									 * the journal and the tables they name */
} DurableDeleteCheck;

/*
 * Lock the table (schema-qualified name) for a delete and look at the keys
 * a delete there would run: when one comes from a table of an untrusted
 * role, durable deletes nothing from it.  With nowait, a referencing table
 * whose lock is taken makes it give up (busy) instead of waiting.  Call it
 * in the transaction of the delete, not in a subtransaction of the delete:
 * its locks keep what it found true until the transaction ends.
 */
extern void durable_delete_check(const char *table, bool nowait, DurableDeleteCheck *check);

/*
 * The next statement parsed in this backend (a statement with a check's
 * guards, run at once) may read these relations only (a check's
 * guard_relations), or it fails before it is planned.
 */
extern void durable_guarded_expect(List *relations);
extern void durable_references_install_hook(void);

/*
 * Report, at elevel, that a delete from `table` is refused because of
 * check->unsafe: `message`, and the detail and hint that say why.
 */
extern void durable_delete_refused(int elevel, const char *table, const char *message);

/* Text helpers. */
extern char *durable_text_to_cstring_datum(Datum d);
/* Whether two text datums hold the same bytes (no collation involved). */
extern bool durable_text_equal(Datum a, Datum b);
/* Whether a text datum holds exactly the bytes of `literal`. */
extern bool durable_text_equal_cstring(Datum value, const char *literal);

/*
 * NOTIFY payloads: start with an empty StringInfo, add members (escaped;
 * identifiers whole, free text clipped to 1000 bytes), then send it on a
 * channel.
 */
extern void durable_json_id(StringInfo buf, const char *key, const char *value);
extern void durable_json_str(StringInfo buf, const char *key, const char *value);
extern void durable_json_int(StringInfo buf, const char *key, int64 value);
extern void durable_notify_json(const char *channel, StringInfo buf);

/* The documented notifications of api.md, each built in one place. */
extern void durable_notify_dead_inbox(int64 id, const char *error);
extern void durable_notify_dead_outbox(int64 id, const char *key, const char *error);
extern void durable_notify_ambiguous(int64 id, const char *key, const char *chat_id);

/* Backoff for the n-th attempt (n >= 1): base doubling to cap, with upward jitter. */
extern int64 durable_backoff_us(int attempt, int64 base_us, int64 cap_us);

/* ---- Plans of durable's statements, for a journal of any size (planner.c) ---- */

extern void durable_planner_install_hook(void);

/* ---- Counters (metrics.c, stored in shmem.c) ---- */
typedef enum DurableCounter
{
	DC_INBOUND_JOURNALED = 0,
	DC_INBOUND_DUPLICATES,
	DC_INBOUND_REPLAYED,
	DC_INBOUND_DEAD,
	DC_OUTBOX_JOURNALED,
	DC_OUTBOX_DEDUPED,
	DC_OUTBOX_RETRIED,
	DC_OUTBOX_DEFERRED,
	DC_OUTBOX_DEAD,
	DC_OUTBOX_AMBIGUOUS,
	DC_OUTBOX_BYPASSED,
	DC_STALE_LEASES,
	DC_OUTBOX_DIVERGED,
	DC_NUM_COUNTERS
} DurableCounter;

/*
 * Add n to a counter of the current database, at once or when the
 * transaction commits (metrics.c says which); a no-op without preloading.
 */
extern void durable_count(DurableCounter counter, int64 n);

/* Shared memory layout and access: see shmem.h. */

/* ---- Waiting claims (waiting.c) ---- */
typedef enum DurableQueue
{
	DQ_INBOX = 0,
	DQ_OUTBOX,
	DQ_NUM_QUEUES
} DurableQueue;

/* The journal table of each queue, in schema durable: "inbox", "outbox". */
extern const char *const durable_queue_names[DQ_NUM_QUEUES];

/*
 * Before DR002 (no such record) for inbox record `key` (int8) or send `key`
 * (text): 40001 when a snapshot-isolated transaction cannot see it only
 * because it was journaled since (spi_util.c).
 */
extern void durable_refuse_journaled_since(DurableQueue queue, Datum key);
/* DR002 for inbox record `id`, unless durable_refuse_journaled_since raises 40001 (inbox.c). */
extern void durable_inbox_error_missing(int64 id) pg_attribute_noreturn();

/* Wake the claimers of this database waiting on `queue` once this transaction commits. */
extern void durable_wake_at_commit(DurableQueue queue);

/*
 * An admit leased its record until lease_until: once this transaction
 * commits, claimers waiting on the inbox (now or later) wake when it ends.
 */
extern void durable_inbox_lease_at_commit(TimestampTz lease_until);

/* Is a claimer of this database waiting on `queue` (asleep or between attempts)? */
extern bool durable_claimers_waiting(DurableQueue queue);

/* A claim call: its arguments, one attempt, and when work comes due. */
typedef struct DurableClaimCall DurableClaimCall;
struct DurableClaimCall
{
	Datum		instance;
	int32		max;
	int64		lease_us;
	/*
	 * Claim what is due at `now` into the function's result; how many.
	 * *in_flight: as for durable_claim_direct.
	 */
	uint64		(*attempt) (FunctionCallInfo fcinfo, const DurableClaimCall *call,
							TimestampTz now, bool *in_flight);
	/*
	 * When work comes due by the clock alone after `now` (0: none), for an
	 * attempt at `now` that claimed nothing; connected to SPI.
	 */
	TimestampTz (*next_due) (TimestampTz now);
};

/*
 * inbox_claim / outbox_claim(instance, max, lease, wait): reads and checks
 * the arguments into `call` (max clamped to max_claim), then makes one
 * attempt, or with wait > 0 attempts until one claims something, sleeping
 * between attempts until a commit wakes the queue's claimers, the next due
 * time or the end of the wait (waiting.c).  The caller sets call's attempt
 * and next_due.
 */
extern void durable_claim(FunctionCallInfo fcinfo, DurableQueue queue, int32 max_claim,
						  DurableClaimCall *call);

/* ---- Per-chat order (chat_lock.c) ---- */

/*
 * The fourth field of durable's own advisory lock tags (the chats', the
 * load hold's): SQL's pg_advisory_lock functions use 1 and 2, so no role
 * can take one of them by hand.
 */
#define DURABLE_LOCK_FIELD4		0x4452

/*
 * Take `queue`'s lock of a chat, held until the transaction ends, before
 * drawing the id of a claimable record of that chat.
 */
extern void durable_lock_chat(DurableQueue queue, Datum chat_id);
/* As durable_lock_chat, without waiting: false when another transaction holds it. */
extern bool durable_try_lock_chat(DurableQueue queue, Datum chat_id);

/* ---- The hold a bulk load puts on the purge (load_hold.c) ---- */

/*
 * Whether a COPY statement about to run loads one of durable's
 * journals; the hook then calls durable_load_hold_take once it ran, which
 * holds the passes' purge until this session ends.
 */
extern bool durable_load_hold_target(Node *parsetree);
extern void durable_load_hold_take(void);
/*
 * Whether a pass's purge waits: another session that loaded a journal is
 * still connected.  If not, loads that begin wait until this transaction
 * ends.  Logged when the hold begins and ends, as this process sees them.
 */
extern bool durable_purge_on_hold(void);

/* ---- The queues' claim floors (claim_floor.c) ---- */

/*
 * Records below the claim floor that a completion freed (their chat's older
 * record finished after a refresh passed them as held), each with the
 * stamp it was noted under: claims look at them before they scan from the
 * floor.  A chat draining a backlog would otherwise lower the floor below
 * the rest of its backlog at every completion, and claims walk it again.
 */
#define DURABLE_FLOOR_FREED_MAX 8
typedef struct DurableFloorFreed
{
	int			n;
	int64		id[DURABLE_FLOOR_FREED_MAX];
	uint64		stamp[DURABLE_FLOOR_FREED_MAX];
} DurableFloorFreed;

/*
 * The id from which a claim of `queue` scans its claimable records now (0:
 * the head), and in *freed the records below it that a claim looks at first
 * (ascending).
 */
extern int64 durable_claim_floor(DurableQueue queue, TimestampTz now, DurableFloorFreed *freed);

/*
 * A claim found the freed records in `stale` (with the stamps it read) no
 * longer claimable, and not held back by their chat: they are not looked at
 * again.
 */
extern void durable_claim_floor_unfree(DurableQueue queue, const DurableFloorFreed *stale);

/*
 * The floor of `queue` at `now` as it stands (no refresh), and when a record
 * below it comes due by the clock (*below_due; 0: none).
 */
extern int64 durable_claim_floor_known(DurableQueue queue, TimestampTz now, TimestampTz *below_due);

/* Record `id` became claimable out of the clock's order: lower the floor to it. */
extern void durable_claim_floor_lower(DurableQueue queue, int64 id);

/* Record `id` becomes claimable at `due`: claims must look at it from then on. */
extern void durable_claim_floor_comes_due(DurableQueue queue, int64 id, TimestampTz due);

/* A claim leased inbox record `id` until `lease_until`: tell the floor if it may have passed it. */
extern void durable_claim_floor_leased(DurableQueue queue, int64 id, TimestampTz lease_until);

/* An admit or an enqueue inserted record `id`: lower the floor if it lies below. */
extern void durable_claim_floor_admitted(DurableQueue queue, int64 id);

/*
 * Whether the floor of `queue` may have passed over records held behind one
 * this transaction just finished: then the completion notes the next record
 * of its chat as freed (durable_claim_floor_freed).  Call after the
 * record's update.
 */
extern bool durable_claim_floor_held_watched(DurableQueue queue);

/*
 * Record `id` of `queue` finished by a way rarer than a completion (a send
 * dead, discarded or flagged unknown), after its change: if the floor may
 * have passed records held behind it, it is lowered to `id`.
 */
extern void durable_claim_floor_finished(DurableQueue queue, int64 id);

/*
 * Record `id` of `queue` finished while watched, and `next` is the first
 * later record of its chat: if the floor may have passed `next`, note it as
 * freed (or, when too many are, lower the floor to `id`).
 */
extern void durable_claim_floor_freed(DurableQueue queue, int64 id, int64 next);

/* ---- Direct reads of the journals, without the executor (direct.c) ---- */

/* The lock a write of the journal takes, before a call's first read of it. */
extern void durable_lock_journal_for_write(DurableQueue queue);

/* The locks a claim takes, before it reads the clock (direct.c). */
extern void durable_lock_journal_for_claim(DurableQueue queue);

/* Has the chat an open (pending or leased) record? */
extern bool durable_inbox_chat_has_open(Datum chat_id, int64 below_id);

/*
 * Under a transaction snapshot: has the chat an open record newer than id
 * that the snapshot does not see?
 */
extern bool durable_inbox_chat_open_unseen(Datum chat_id, int64 id);

/*
 * The first open record of chat `chat_id` after `id` (0: none), as a
 * snapshot taken now sees it: one admitted while the caller's statement ran
 * is seen.
 */
extern int64 durable_inbox_chat_next(Datum chat_id, int64 id);

/*
 * The fenced confirmations, written directly: true when the record held the
 * fence and was updated, *wake then telling whether a later record of its
 * chat waits for it (claimers are to be woken at commit); false when it did
 * not, for the caller to diagnose.
 */
extern bool durable_inbox_complete_direct(int64 id, int64 token, TimestampTz now,
										  bool *wake);
extern bool durable_outbox_sent_direct(Datum key, int64 token, Datum provider_message_id,
									   TimestampTz now, bool *wake);

/* A claim's lease: up to max claimable records, from the claim floor. */
typedef struct DurableClaim
{
	Datum		owner;
	TimestampTz now;
	TimestampTz lease_until;
	int32		max_attempts;	/* inbox only */
	int32		max;
	int64		floor;
	DurableFloorFreed freed;	/* looked at before the scan from the floor */
	/* Set by durable_claim_direct: its in_flight argument, asked or not. */
	bool		report_in_flight;
	bool		in_flight;
} DurableClaim;

/* inbox_claim's result columns: id, token, source, message_id, chat_id, kind, payload, attempts. */
#define DURABLE_CLAIMED_NCOLS 8
/* outbox_claim's result columns: key, token, chat_id, payload, attempts. */
#define DURABLE_CLAIMED_SEND_NCOLS 5
/* A leased record's result columns, and the state the lease replaced. */
typedef void (*DurableClaimSink) (void *arg, const Datum *values, const bool *nulls,
								  Datum state_before);

/*
 * A queue's journal, the index its claims walk in id order, and the columns
 * that tell when a record comes due (the claim floor's scan).
 */
typedef struct DurableQueueRels
{
	Oid			heap;
	Oid			index;
	AttrNumber	state;
	AttrNumber	lease_until;
	AttrNumber	not_before;
	/* Per-chat order */
	Oid			chat_idx;		/* (chat_id, id) of unfinished records */
	AttrNumber	chat_id;
	AttrNumber	finished_at;	/* the inbox's (the outbox's: InvalidAttrNumber) */
} DurableQueueRels;
extern void durable_queue_rels(DurableQueue queue, DurableQueueRels *rels);
/* A set of chat ids: the chats a claim or a floor refresh found held back (direct.c). */
typedef struct DurableChatSet
{
	HTAB	   *chats;			/* created by the first chat added */
	MemoryContext cxt;			/* where the set is allocated */
} DurableChatSet;
/* The set's key for `chat_id` (a copy), or NULL when it is longer than any key. */
extern const char *durable_chat_set_key(Datum chat_id);
extern void durable_chat_set_add(DurableChatSet *set, const char *key);
/* Whether the set holds `key` (NULL: no). */
extern bool durable_chat_set_has(const DurableChatSet *set, const char *key);
/* Empty the set (its memory freed; the next add makes it again). */
extern void durable_chat_set_clear(DurableChatSet *set);

/* Open an index of durable's that must hold every entry, by its looked-up OID. */
extern Relation durable_index_open(Oid index_oid, LOCKMODE lockmode);

/*
 * Lease them in `queue`, passing each one to sink, oldest first; how many.
 * *in_flight (in_flight NULL: not asked): a record was passed over only
 * because of a change not yet committed when the claim looked (an older
 * record of its chat being finished, the record itself locked), whose
 * commit or rollback may make it claimable without waking anyone.
 */
extern uint64 durable_claim_direct(DurableQueue queue, DurableClaim *claim,
								   DurableClaimSink sink, void *arg, bool *in_flight);

/* A new fencing token (durable.token_seq). */
extern int64 durable_next_token(void);

/*
 * Before a token is taken from durable.token_seq (its OID): lifts the
 * sequence above every token of earlier server starts, once per start
 * (token.c).  Every token comes through durable_next_token(), which calls it.
 */
extern void durable_token_fence(Oid token_seq);

/* A new send for outbox_begin: journaled sending, leased to `owner`. */
typedef struct DurableNewSend
{
	Datum		key;
	Datum		chat_id;
	Datum		payload;
	Datum		owner;
	TimestampTz lease_until;
	TimestampTz now;
	bool		has_inbound;
	int64		inbound_id;
} DurableNewSend;

/* A new inbound message for inbox_admit: pending, or leased to `owner`. */
typedef struct DurableNewMessage
{
	Datum		source;
	bool		has_message_id; /* else content_hash is its dedupe key */
	Datum		message_id;
	Datum		content_hash;
	Datum		chat_id;
	Datum		kind;
	Datum		payload;
	bool		leased;			/* then token, owner and lease_until */
	int64		token;
	Datum		owner;
	TimestampTz lease_until;
	TimestampTz now;
} DurableNewMessage;

/*
 * The journals' inserts, written directly as INSERT ... ON CONFLICT (dedupe
 * key) DO NOTHING would: true with the new send's token / the new record's
 * id, false when the dedupe key is journaled already (committed, or by a
 * transaction that committed while this one waited for it).
 */
extern bool durable_outbox_insert_direct(const DurableNewSend *send, int64 *token);
extern bool durable_inbox_insert_direct(const DurableNewMessage *msg, int64 *id);

/*
 * Wait out the inserts in progress of send `key` / of the message; true when
 * it is journaled (40001 when a transaction snapshot cannot see it).
 */
extern bool durable_outbox_await_key(Datum key);
extern bool durable_inbox_await_message(const DurableNewMessage *msg);

/*
 * The retention purge's deletes, written directly: up to `limit` done
 * inbox / sent outbox records finished in [from, cutoff) (from DT_NOBEGIN:
 * from the oldest), oldest first, skipping records another transaction
 * holds; *last (when not NULL) gets the finish time of the last one deleted,
 * and is left alone when none was.  Returns how many were deleted, or -1
 * when the journal cannot be written directly (the caller runs the SQL
 * statement).
 */
extern int64 durable_inbox_purge_direct(TimestampTz from, TimestampTz cutoff, int64 limit,
										TimestampTz *last);
extern int64 durable_outbox_purge_direct(TimestampTz from, TimestampTz cutoff, int64 limit,
										 TimestampTz *last);
/*
 * For a client call's INSERT or UPDATE statements on a journal (`event`
 * TRIGGER_TYPE_INSERT or _UPDATE): refuses what the direct writes refuse —
 * a schema durable cannot trust, and a trigger, rule, constraint or policy
 * on the journal they would not honour — so that every call treats the
 * journal alike, and no trigger can skip a row the call counts on.  Takes
 * the lock the write takes (durable_lock_journal_for_write).  The sweep's
 * statements do fire the DBA's triggers.
 */
extern void durable_journal_check_writable(DurableQueue queue, int16 event);

/*
 * After an insert of a leased record (key: an inbox id, an outbox key) that
 * stamped lease_until: when the stamp predates a wait for another insert of
 * the same key, stamp the lease again from now; return the lease.
 */
extern TimestampTz durable_restamp_inserted_lease(DurableQueue queue, Datum key,
												  TimestampTz lease_until, int64 lease_us);

/*
 * Whether a row-level BEFORE trigger on `event` (a TRIGGER_TYPE_* flag;
 * DELETE for the callers, as the journals allow DELETE triggers) that would
 * fire is on the journal: one that returns NULL is how a statement that
 * found its row can write none.
 */
extern bool durable_journal_has_before_trigger(DurableQueue queue, int16 event);
/*
 * Whether row-level security binds the journal's owner (FORCE, an owner
 * that is not a superuser); refuse the call (0A000) when it does.
 */
extern bool durable_journal_rls_binds(DurableQueue queue);
extern void durable_journal_refuse_rls(DurableQueue queue);
/* For the DDL guard: is `relid` a journal written directly, `column` one it changes? */
extern bool durable_journal_column_changes(Oid relid, const char *column, bool *journal);

/* A column of a journal as durable's scripts define it. */
typedef struct DurableJournalColumn
{
	const char *table;			/* "inbox" or "outbox" */
	const char *name;
	Oid			type;			/* typmod -1 */
	bool		c_collated;		/* COLLATE "C" (an identifier), else the type's */
	bool		not_null;
	bool		has_default;
} DurableJournalColumn;

/* The definition of column `name` of `relid`; NULL: not a journal, or a column of yours. */
extern const DurableJournalColumn *durable_journal_column(Oid relid, const char *name);

/* ---- Fail points (durable.c) ---- */

/*
 * Dies here if durable.fail_point names this point: "<point>" ends the
 * backend with FATAL (its transaction rolls back, as after a process crash);
 * "<point>:crash" kills it with SIGKILL, so the postmaster restarts the whole
 * server and WAL recovery runs.  "<point>:wait" does not die: it waits while
 * another session holds pg_advisory_lock(DURABLE_FAIL_POINT_LOCK), so that a
 * test can run other sessions' steps at that point.
 */
#define DURABLE_FAIL_POINT_LOCK INT64CONST(4242)
#define DURABLE_FAIL_POINT(name) \
	do { \
		if (durable_fail_point != NULL && durable_fail_point[0] != '\0') \
			durable_fail_point_hit(name); \
	} while (0)
extern void durable_fail_point_hit(const char *name);

/* ddl_guard.c: the utility hook's refusals, before a command runs. */
extern bool durable_ddl_guard_applies(Node *parsetree);
extern void durable_ddl_guard(Node *parsetree, bool top_level);

#endif							/* DURABLE_H */
