/* durable--0.2--0.3.sql: lease transitions become HOT updates; fewer index entries per message */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.3'" to load this file. \quit

/*
 * Why (README, "Performance"): in 0.2 every partial index of the inbox named
 * `state` in its predicate, so every change of state -- a claim, a retry, a
 * takeover -- was a non-HOT update that wrote a new entry into every index
 * whose predicate the new row version met (the primary key and the dedupe
 * key included): 13 index entries per queued message against 4 for a
 * minimal queue.  An update is HOT only if no column that an index names,
 * in its keys or its predicate, changes.
 *
 * 0.3 moves the question "is this record still open?" out of `state` into
 * finished_at, which changes only when a record leaves the queue (done or
 * dead) or is replayed into it.  The inbox indexes name only id, source,
 * message_id, content_hash, chat_id, done_at and finished_at, none of which
 * a claim, heartbeat, retry, release or lease recovery changes: those are
 * HOT updates now.  The expiry of a lease and the due time of a retry are
 * found by scanning the open records (the unfinished index) instead of
 * two time indexes: open records are the few that are in flight or waiting,
 * never the finished history.
 *
 * The outbox already named `state` in the index that its claims need, so
 * its transitions stay non-HOT; it loses only outbox_lease_until_idx (one
 * index entry less for every outbox_begin), its expired leases being found
 * through outbox_chat_unfinished_idx, which holds every sending record.
 *
 * Security notes (as for durable--0.1.sql): plain CREATE only, every name
 * schema-qualified.
 */

/*
 * A table that inherits from the inbox (possible where durable is not
 * preloaded) gets the new column too, and the rewrite below re-checks its
 * CHECK constraints over it, as the role that runs the step -- a superuser
 * -- on every row: a constraint of durable's owner's (perhaps no longer a
 * superuser) would run its functions as that superuser.  Refuse first.
 */
-- (first, so that the check below sees a child attached by a transaction that was open)
LOCK TABLE durable.inbox IN ACCESS EXCLUSIVE MODE;
DO $refuse_children$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT pg_catalog.format('%I.%I', kn.nspname, kid.relname) AS child
          FROM pg_catalog.pg_inherits i
          JOIN pg_catalog.pg_class kid ON kid.oid OPERATOR(pg_catalog.=) i.inhrelid
          JOIN pg_catalog.pg_namespace kn ON kn.oid OPERATOR(pg_catalog.=) kid.relnamespace
         WHERE i.inhparent OPERATOR(pg_catalog.=) 'durable.inbox'::pg_catalog.regclass
         LIMIT 1
    LOOP
        RAISE EXCEPTION 'table % inherits from durable.inbox and stands in the way of the update to 0.3', c.child
            USING ERRCODE = '55000',
                  DETAIL = 'This step adds a column to durable.inbox and rewrites it, which reaches the tables that inherit from it, and would check their constraints as the role that runs the update.',
                  HINT = 'Detach it first (ALTER TABLE ... NO INHERIT durable.inbox), and attach it again after the update.';
    END LOOP;
END
$refuse_children$;

ALTER TABLE durable.inbox ADD COLUMN finished_at pg_catalog.timestamptz;

/*
 * Records finished before the update: done ones at done_at, dead ones now.
 * Written by a rewrite (ALTER COLUMN ... USING), not an UPDATE: this step
 * runs as a superuser, and an UPDATE would fire the triggers, rules, CHECK
 * constraints and index expressions that durable's owner -- perhaps no
 * longer a superuser -- put on the journal, as that superuser.  A rewrite
 * fires none of them and rebuilds the indexes as the table's owner (and the
 * tables that inherit from the inbox, which it would reach, are refused
 * above).
 */
ALTER TABLE durable.inbox ALTER COLUMN finished_at TYPE pg_catalog.timestamptz
    USING (CASE WHEN state OPERATOR(pg_catalog.=) ANY (ARRAY['done', 'dead']::pg_catalog.text[])
                THEN COALESCE(done_at, pg_catalog.now()) END);
COMMENT ON COLUMN durable.inbox.finished_at IS 'When the record left the queue (state done or dead); NULL while it is pending or leased';

DROP INDEX durable.inbox_unfinished_idx;
DROP INDEX durable.inbox_chat_unfinished_idx;
DROP INDEX durable.inbox_lease_until_idx;
DROP INDEX durable.inbox_not_before_idx;
DROP INDEX durable.inbox_done_at_idx;
DROP INDEX durable.inbox_dead_idx;
DROP INDEX durable.outbox_lease_until_idx;

/* Open records in id order: claims (oldest first), lease expiry, due retries. */
CREATE INDEX inbox_unfinished_idx ON durable.inbox (id)
    WHERE finished_at IS NULL;
/* A chat's oldest open record in one probe: per-chat order. */
CREATE INDEX inbox_chat_unfinished_idx ON durable.inbox (chat_id, id)
    WHERE finished_at IS NULL;
/* Retention purge: done records by finish time. */
CREATE INDEX inbox_done_at_idx ON durable.inbox (done_at)
    WHERE done_at IS NOT NULL;
/* The dead-letter queue: finished, but not done. */
CREATE INDEX inbox_dead_idx ON durable.inbox (id)
    WHERE finished_at IS NOT NULL AND done_at IS NULL;

/*
 * No CHECK constraints on the journals: PostgreSQL reads and plans every
 * CHECK expression again at the start of every INSERT and UPDATE statement
 * (3-9 % of the CPU of a call, measured with perf), and the only writers of
 * these tables are durable's own functions, which write states as literals.
 * The test suite checks the state invariants instead (sql/inbox.sql,
 * test/crash/run).
 */
ALTER TABLE durable.inbox DROP CONSTRAINT inbox_state_check;
ALTER TABLE durable.inbox DROP CONSTRAINT inbox_dedupe_key_check;
ALTER TABLE durable.outbox DROP CONSTRAINT outbox_state_check;
