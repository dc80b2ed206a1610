-- bench/sql/setup.sql: objects of the benchmark database (run once by
-- bench/run, as superuser, in database "bench").

CREATE EXTENSION durable;
CREATE EXTENSION pgq;
CREATE SCHEMA bench;

-- The reference: the cheapest hand-written queue that does the inbox's job
-- on one table (no dedupe, no per-chat order, no fencing tokens, no attempt
-- counting): INSERT; UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP
-- LOCKED LIMIT 1); UPDATE ... SET state = 'done'.  Its one index besides the
-- primary key is the partial index its claim scans.
CREATE TABLE bench.ref_queue (
    id          bigserial PRIMARY KEY,
    chat_id     text NOT NULL,
    payload     jsonb NOT NULL,
    state       text NOT NULL DEFAULT 'pending',
    lease_until timestamptz
);
CREATE INDEX ref_queue_pending_idx ON bench.ref_queue (id) WHERE state = 'pending';

-- The send path's own two statements in plain SQL, on a copy of the outbox
-- (same columns, indexes and fillfactor; no functions, no dedupe answer, no
-- fencing check, no per-chat probe): what the send path's data model costs
-- by itself, next to the reference 2-step's one-index table.
CREATE TABLE bench.send_shaped (LIKE durable.outbox INCLUDING ALL) WITH (fillfactor = 80);

-- CPU time samples that the benchmark backends write about themselves
-- (utime + stime of /proc/self/stat, in clock ticks), every 200 cycles
-- (20 for the batch path).
CREATE TABLE bench.cpu (
    tag    text NOT NULL,
    pid    integer NOT NULL,
    cycles bigint NOT NULL,
    ticks  bigint NOT NULL
);

-- This backend's CPU time so far, in clock ticks.
CREATE FUNCTION bench.cpu_ticks() RETURNS bigint LANGUAGE sql AS $$
    SELECT f[12]::bigint + f[13]::bigint
      FROM (SELECT pg_catalog.string_to_array(
                       pg_catalog.split_part(pg_catalog.pg_read_file('/proc/self/stat'), ') ', 2), ' ') AS f) s
$$;

-- Server CPU per cycle of a run: for each backend, the ticks between its
-- first and last sample over the cycles between them; in microseconds.
CREATE FUNCTION bench.cpu_per_cycle(t text, hz integer) RETURNS numeric LANGUAGE sql AS $$
    SELECT round(sum(dt)::numeric * 1000000 / hz / nullif(sum(dc), 0))
      FROM (SELECT max(ticks) - min(ticks) AS dt, max(cycles) - min(cycles) AS dc
              FROM bench.cpu WHERE tag = t GROUP BY pid) b
$$;

-- RSS samples that the backend of the memory test writes about itself.
-- Admit-to-claim latencies of the wakeup section (claim_wait.sql, claim_poll.sql).
CREATE TABLE bench.wake (
    mode text NOT NULL,
    age  interval NOT NULL
);

CREATE TABLE bench.rss (
    cycles      bigint NOT NULL,
    calls       bigint NOT NULL,
    rss_anon_kb bigint NOT NULL,
    sampled_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- PgQ: one queue whose ticker cuts a batch every 100 events (the size of the
-- durable batch path's claims), and one batch consumer.
CREATE FUNCTION bench.pgq_reset() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pgq.queue WHERE queue_name = 'bench_q') THEN
        PERFORM pgq.unregister_consumer('bench_q', 'c1');
        PERFORM pgq.drop_queue('bench_q');
    END IF;
    PERFORM pgq.create_queue('bench_q');
    PERFORM pgq.set_queue_config('bench_q', 'ticker_max_count', '100');
    PERFORM pgq.register_consumer('bench_q', 'c1');
END
$$;
SELECT bench.pgq_reset();

-- A PgQ backlog of n events cut into batches of per_batch by the ticker:
-- each batch is one producer transaction followed by one ticker transaction
-- (a batch is what commits between two ticks).
CREATE PROCEDURE bench.pgq_fill(n integer, per_batch integer) LANGUAGE plpgsql AS $$
DECLARE
    done integer := 0;
BEGIN
    WHILE done < n LOOP
        PERFORM pgq.insert_event('bench_q', 'msg', '{"text":"hello from the benchmark, about the size of a chat message"}')
          FROM generate_series(1, per_batch);
        COMMIT;
        PERFORM pgq.ticker('bench_q');
        COMMIT;
        done := done + per_batch;
    END LOOP;
END
$$;

-- Events consumed so far by c1: the event sequence at its last finished tick.
CREATE FUNCTION bench.pgq_consumed() RETURNS bigint LANGUAGE sql AS $$
    SELECT t.tick_event_seq
      FROM pgq.subscription s
      JOIN pgq.queue q ON q.queue_id = s.sub_queue
      JOIN pgq.tick t ON t.tick_queue = s.sub_queue AND t.tick_id = s.sub_last_tick
     WHERE q.queue_name = 'bench_q'
$$;

-- n pending records, the backlog of the batch path and of the flatness
-- points, over 100,000 chats, written straight into the journal: journaled
-- through inbox_admit in one transaction they would take one per-chat
-- advisory lock each (see src/inbox.c) and overflow the lock table.
CREATE FUNCTION bench.inbox_backlog(n integer, tag text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO durable.inbox (source, message_id, chat_id, kind, payload, state, attempts,
                               not_before, created_at)
    SELECT 'bench', tag || '-' || g, (1 + (pg_catalog.random() * 99999)::int)::text, 'message',
           '{"text":"hello from the benchmark, about the size of a chat message"}',
           'pending', 0, clock_timestamp(), clock_timestamp()
      FROM generate_series(1, n) g
$$;

-- n done records written straight into the journal (the heavy points):
-- done_at is `age` ago, so with age older than durable.retention they are
-- what a purge deletes.
CREATE FUNCTION bench.inbox_done(n bigint, tag text, age interval) RETURNS void LANGUAGE sql AS $$
    INSERT INTO durable.inbox (source, message_id, chat_id, kind, payload, state, attempts,
                               token, owner, not_before, created_at, done_at, finished_at)
    SELECT 'bench', tag || '-' || g, (1 + (g * 7919) % 100000)::text, 'message',
           '{"text":"hello from the benchmark, about the size of a chat message"}',
           'done', 1, nextval('durable.token_seq'), 'bench-preload',
           clock_timestamp() - age, clock_timestamp() - age, clock_timestamp() - age,
           clock_timestamp() - age
      FROM generate_series(1, n) g
$$;

-- A history every point starts from: n finished records in each journal
-- and in the reference table, an hour old (well within the retention), as
-- a bot that has run for a while has.  Without it every point would start
-- from empty tables, and the plans that the backends cache in their first
-- transactions (pgbench's prepared statements, the C functions' SPI plans)
-- would be chosen for a table of a few pages and kept until autovacuum's
-- ANALYZE invalidates them, a minute or so into the run.
CREATE FUNCTION bench.history(n integer) RETURNS void LANGUAGE sql AS $$
    SELECT bench.inbox_done(n, 'hist', '1 hour');
    INSERT INTO durable.outbox (key, chat_id, payload, state, attempts, token, owner,
                                not_before, provider_message_id, created_at, sent_at)
    SELECT 'hist-' || g, (1 + (g * 7919) % 100000)::text,
           '{"text":"a reply of the bot, about the size of a chat message"}',
           'sent', 1, nextval('durable.token_seq'), 'bench-preload',
           clock_timestamp() - interval '1 hour', 'p-hist-' || g,
           clock_timestamp() - interval '1 hour', clock_timestamp() - interval '1 hour'
      FROM generate_series(1, n) g;
    INSERT INTO bench.send_shaped SELECT * FROM durable.outbox;
    INSERT INTO bench.ref_queue (chat_id, payload, state)
    SELECT (1 + (g * 7919) % 100000)::text,
           '{"text":"hello from the benchmark, about the size of a chat message"}', 'done'
      FROM generate_series(1, n) g;
$$;

-- Sent outbox records the repeated outbox_begin finds in the journal.
CREATE FUNCTION bench.outbox_sent_keys(n integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    r record;
    k bigint := 0;
BEGIN
    FOR r IN
        SELECT b.key, b.token
          FROM generate_series(1, n) g,
               LATERAL durable.outbox_begin(idempotency_key => 'r-' || g,
                                            chat_id => (g % 1000)::text,
                                            payload => '{"text":"a reply of the bot, about the size of a chat message"}',
                                            instance => 'bench-preload') b
    LOOP
        PERFORM durable.outbox_sent(r.key, r.token, 'p-' || r.key);
        k := k + 1;
    END LOOP;
    RETURN k;
END
$$;

-- Sizes of a table and of each of its indexes, for the bloat report.
CREATE FUNCTION bench.sizes(rel regclass)
RETURNS TABLE(name text, kind text, size_kb bigint) LANGUAGE sql AS $$
    SELECT rel::text, 'table', pg_relation_size(rel) / 1024
    UNION ALL
    SELECT i.indexrelid::regclass::text, 'index', pg_relation_size(i.indexrelid) / 1024
      FROM pg_index i WHERE i.indrelid = rel
$$;
