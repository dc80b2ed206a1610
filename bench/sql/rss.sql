-- memory test: one backend runs cycles of 9 API calls (admit with an
-- instance, heartbeat, outbox_begin derived from the inbound lease,
-- outbox_sent, complete, an empty claim; and a sender loop's
-- outbox_enqueue, outbox_claim, outbox_sent), one transaction per cycle,
-- and samples its own anonymous RSS after 500 cycles, after the cycle that
-- reaches 30,000 calls (the baseline of the growth: bench/run), every 5,000
-- cycles and after the last (:last, set by bench/run).
\set chat random(1, 100000)
\set n :n + 1
BEGIN;
SELECT id AS mid, token AS mtok
  FROM durable.inbox_admit(source => 'bench',
        message_id => :run::text || '-' || :n::text,
        chat_id => :chat::text, payload => '{"text":"hello from the benchmark, about the size of a chat message"}', instance => 'bench-rss') \gset
SELECT durable.inbox_heartbeat(:mid::bigint, :mtok::bigint);
SELECT key AS skey, token AS stok
  FROM durable.outbox_begin(idempotency_key => NULL, chat_id => :chat::text,
        payload => '{"text":"a reply of the bot, about the size of a chat message"}', instance => 'bench-rss',
        inbound_id => :mid::bigint, inbound_token => :mtok::bigint) \gset
SELECT durable.outbox_sent(:skey::text, :stok::bigint, 'p-' || :n::text);
SELECT durable.inbox_complete(:mid::bigint, :mtok::bigint);
SELECT count(*) FROM durable.inbox_claim(instance => 'bench-rss');
SELECT created FROM durable.outbox_enqueue(idempotency_key => :run::text || '-q-' || :n::text,
        chat_id => 'q-' || :chat::text, payload => '{"text":"a queued reply"}') \gset
SELECT key AS qkey, token AS qtok FROM durable.outbox_claim(instance => 'bench-rss', max => 1) \gset
SELECT durable.outbox_sent(:qkey::text, :qtok::bigint, 'q-' || :n::text);
COMMIT;
\if :n % 5000 = 0 or :n = 500 or :n = 3334 or :n = :last
INSERT INTO bench.rss (cycles, calls, rss_anon_kb)
SELECT :n, :n * 9, (regexp_match(pg_read_file('/proc/self/status'), 'RssAnon:\s+(\d+)'))[1]::bigint;
\endif
