/* durable--0.3--0.4.sql: per-chat probes can no longer be planned on the queue-wide index */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.4'" to load this file. \quit

/*
 * Why (README, "Performance"): in 0.3 inbox_unfinished_idx (id) and
 * inbox_chat_unfinished_idx (chat_id, id) had the same predicate,
 * finished_at IS NULL.  A per-chat probe ("has this chat an open record?")
 * could then be planned on either.  When the statistics say that hardly any
 * record is open -- the normal state of a healthy inbox -- the planner rates
 * the two alike, and the cached generic plan of a backend may scan
 * inbox_unfinished_idx from its head, filtering on chat_id.  That costs
 * nothing while dead index entries are removed as they appear, and walks
 * every one of them while a long transaction keeps them: measured with a
 * REPEATABLE READ transaction held open, the bot path fell from 2,700 to
 * 29 messages/s within 45 s, each admit probing 125,000 buffers.
 *
 * The predicate of inbox_unfinished_idx gains a conjunct that is always
 * true (ids are drawn from a sequence that starts at 1) and that only the
 * statements which want this index spell: the claim's and the sweep's scans
 * of the open records in id order.  A per-chat probe does not imply it, so
 * it can only use inbox_chat_unfinished_idx, whose (chat_id, id) key finds
 * a chat's open records without touching any other chat's entries.
 *
 * The index holds only open records: rebuilding it is quick.
 *
 * Security notes (as for durable--0.1.sql): plain CREATE only, every name
 * schema-qualified.
 */

DROP INDEX durable.inbox_unfinished_idx;

/* Open records in id order: claims (oldest first), lease expiry, due retries. */
CREATE INDEX inbox_unfinished_idx ON durable.inbox (id)
    WHERE finished_at IS NULL AND id > 0;

/*
 * No JIT for the functions whose statements scan a number of records that
 * grows with the queue: claims, lease recovery, retention and the standing
 * counts.  Their plans are generic, so the planner estimates them for any
 * backlog; past jit_above_cost (a backlog of a million records is enough)
 * every call compiled its statement with LLVM first -- 10 to 100 ms for a
 * claim whose work takes 3 ms (measured on the batch path: 192 -> 338 us per
 * message).  The background worker turns JIT off for its own session.
 */
ALTER FUNCTION durable.inbox_claim(pg_catalog.text, pg_catalog.int4, pg_catalog.interval, pg_catalog.interval)
    SET jit = off;
ALTER FUNCTION durable.outbox_claim(pg_catalog.text, pg_catalog.int4, pg_catalog.interval, pg_catalog.interval)
    SET jit = off;
ALTER FUNCTION durable.instance_start(pg_catalog.text) SET jit = off;
ALTER FUNCTION durable.sweep() SET jit = off;
ALTER FUNCTION durable.purge(pg_catalog.interval, pg_catalog.int4) SET jit = off;
ALTER FUNCTION durable.standing() SET jit = off;
