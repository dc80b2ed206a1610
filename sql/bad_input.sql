--
-- bad_input: every function of the API against bad arguments.
--
-- Each case is one call with one bad argument (the others valid).  A DO
-- block runs every call in its own subtransaction and records the SQLSTATE
-- and message it raised; the table printed below documents every case.
-- A call may only raise one of the contract's SQLSTATEs (22023 bad
-- argument, 54000 payload too large, DR001 stale lease, DR002 no such
-- record, DR003 wrong state), and nothing may be journaled or changed.
--
-- Placeholders in the calls stand for the fixtures made in SETUP:
--   {live}, {live.token}, {live.stale}  an inbox record leased for an hour,
--                                       its token, and its previous token
--                                       (taken over after its lease expired);
--   {pending}                           an inbox record nobody holds (failed,
--                                       due again in a day);
--   {dead}, {dead.token}                a dead inbox record and its last token;
--   'bad-sending' {sending.token} {sending.stale}
--                                       an outbox send leased for an hour,
--                                       its token and an earlier one;
--   'bad-sent' {sent.token}             a send already sent and its token.
-- PostgreSQL 15 has no infinite interval; the largest interval stands for it.
--

-- SETUP
\set VERBOSITY terse
CREATE TEMP TABLE fx (name text PRIMARY KEY, value text);
-- the live record: leased for 30 ms, taken over after expiry, so it has a stale token
INSERT INTO fx SELECT 'live', id FROM durable.inbox_admit('regress-bad', 'live', 'bad-live', instance => 'bad-bot-old', lease => '30ms');
INSERT INTO fx SELECT 'live.stale', token FROM durable.inbox WHERE source = 'regress-bad' AND message_id = 'live';
SELECT pg_sleep(0.1);
INSERT INTO fx SELECT 'live.token', token FROM durable.inbox_claim('bad-bot', 10, '1 hour')
 WHERE message_id = 'live' AND source = 'regress-bad';
-- the pending record: leased, failed, due again in a day
INSERT INTO fx SELECT 'pending', id FROM durable.inbox_admit('regress-bad', 'pending', 'bad-pending', instance => 'bad-bot');
SELECT state FROM durable.inbox_fail((SELECT value::bigint FROM fx WHERE name = 'pending'),
                                     (SELECT token FROM durable.inbox WHERE source = 'regress-bad' AND message_id = 'pending'),
                                     'fixture', '1 day');
-- the dead record: one attempt allowed, failed
SET durable.inbox_max_attempts = 1;
INSERT INTO fx SELECT 'dead', id FROM durable.inbox_admit('regress-bad', 'dead', 'bad-dead', instance => 'bad-bot');
INSERT INTO fx SELECT 'dead.token', token FROM durable.inbox WHERE source = 'regress-bad' AND message_id = 'dead';
SELECT state FROM durable.inbox_fail((SELECT value::bigint FROM fx WHERE name = 'dead'),
                                     (SELECT value::bigint FROM fx WHERE name = 'dead.token'), 'fixture');
RESET durable.inbox_max_attempts;
-- the sending send: claimed, failed, retried by hand, claimed again
SELECT created FROM durable.outbox_enqueue('bad-sending', 'bad-sending', '{"text":"s"}');
INSERT INTO fx SELECT 'sending.stale', token FROM durable.outbox_claim('bad-bot', 10) WHERE key = 'bad-sending';
SELECT state FROM durable.outbox_failed('bad-sending', (SELECT value::bigint FROM fx WHERE name = 'sending.stale'), 'fixture');
SELECT durable.outbox_retry('bad-sending');
INSERT INTO fx SELECT 'sending.token', token FROM durable.outbox_claim('bad-bot', 10, '1 hour') WHERE key = 'bad-sending';
-- the sent send
INSERT INTO fx SELECT 'sent.token', token FROM durable.outbox_begin('bad-sent', 'bad-sent', '{"text":"t"}', 'bad-bot');
SELECT durable.outbox_sent('bad-sent', (SELECT value::bigint FROM fx WHERE name = 'sent.token'), 'tg-1');
-- every fixture is in place
SELECT name, value IS NOT NULL AS present FROM fx ORDER BY name;
SELECT message_id, state FROM durable.inbox WHERE source = 'regress-bad' ORDER BY message_id;
SELECT key, state FROM durable.outbox WHERE key LIKE 'bad-%' ORDER BY key;

-- A fingerprint of every table of the extension, to prove that nothing changes
CREATE TEMP VIEW fingerprint AS
SELECT 'inbox' AS relation, count(*) AS n, md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS md5 FROM durable.inbox t
UNION ALL
SELECT 'outbox', count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM durable.outbox t
UNION ALL
SELECT 'sessions', count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM durable.sessions t
UNION ALL
SELECT 'permit_buckets', count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM durable.permit_buckets t
UNION ALL
SELECT 'permits', count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM durable.permits t;
CREATE TEMP TABLE fingerprint_before AS SELECT * FROM fingerprint;
-- The counters outlive a rollback (shared memory): a refused call that
-- counted before it checked its arguments would show here, not in the tables.
CREATE TEMP TABLE metrics_before AS SELECT * FROM durable.metrics();

-- The cases: (call, expected outcome); 'ok' where the contract accepts the value
CREATE TEMP TABLE cases (n serial, call text, expect text, got text, message text);
INSERT INTO cases (call, expect) VALUES
-- inbox_admit(source, message_id, chat_id, payload, kind, instance, lease)
($$inbox_admit(source => NULL, message_id => 'x', chat_id => 'bad-x')$$, '22023'),
($$inbox_admit(source => '', message_id => 'x', chat_id => 'bad-x')$$, '22023'),
($$inbox_admit(source => repeat('s', 513), message_id => 'x', chat_id => 'bad-x')$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => '', chat_id => 'bad-x')$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => repeat('m', 513), chat_id => 'bad-x')$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => NULL)$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => '')$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => repeat('c', 513))$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', payload => NULL)$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', payload => jsonb_build_object('t', repeat('p', 1100000)))$$, '54000'),
($$inbox_admit(source => 'regress-bad', message_id => NULL, chat_id => 'bad-x', payload => jsonb_build_object('t', repeat('p', 1100000)))$$, '54000'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', payload => (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 40)))$$, '54000'),
($$inbox_admit(source => 'regress-bad', message_id => NULL, chat_id => 'bad-x', payload => (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 40)))$$, '54000'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', kind => NULL)$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', kind => '')$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', kind => repeat('k', 513))$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', instance => '')$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', instance => repeat('i', 513))$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', instance => 'bad-bot', lease => '0')$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', instance => 'bad-bot', lease => '-1 s')$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', instance => 'bad-bot', lease => '19 ms')$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', instance => 'bad-bot', lease => '1000 years')$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', instance => 'bad-bot', lease => '178000000 years')$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', lease => '30 s')$$, '22023'),
($$inbox_admit(source => 'regress-bad', message_id => 'x', chat_id => 'bad-x', instance => 'bad-bot', lease => '-178000000 years')$$, '22023'),
-- inbox_claim(instance, max, lease, wait)
($$inbox_claim(instance => NULL)$$, '22023'),
($$inbox_claim(instance => '')$$, '22023'),
($$inbox_claim(instance => repeat('i', 513))$$, '22023'),
($$inbox_claim(instance => 'bad-bot', max => NULL)$$, '22023'),
($$inbox_claim(instance => 'bad-bot', max => 0)$$, '22023'),
($$inbox_claim(instance => 'bad-bot', max => -1)$$, '22023'),
($$inbox_claim(instance => 'bad-bot', max => -2147483648)$$, '22023'),
($$inbox_claim(instance => 'bad-bot', max => 2147483647)$$, 'ok'),
($$inbox_claim(instance => 'bad-bot', wait => NULL)$$, 'ok'),
($$inbox_claim(instance => 'bad-bot', lease => '0')$$, '22023'),
($$inbox_claim(instance => 'bad-bot', lease => '-1 s')$$, '22023'),
($$inbox_claim(instance => 'bad-bot', lease => '19 ms')$$, '22023'),
($$inbox_claim(instance => 'bad-bot', lease => '178000000 years')$$, '22023'),
($$inbox_claim(instance => 'bad-bot', wait => '-1 s')$$, '22023'),
($$inbox_claim(instance => 'bad-bot', wait => '2 hours')$$, '22023'),
($$inbox_claim(instance => 'bad-bot', wait => '178000000 years')$$, '22023'),
-- inbox_heartbeat(id, token, lease)
($$inbox_heartbeat(id => NULL, token => {live.token})$$, '22023'),
($$inbox_heartbeat(id => {live}, token => NULL)$$, '22023'),
($$inbox_heartbeat(id => {live}, token => {live.token}, lease => '0')$$, '22023'),
($$inbox_heartbeat(id => {live}, token => {live.token}, lease => '19 ms')$$, '22023'),
($$inbox_heartbeat(id => {live}, token => {live.token}, lease => '-1 s')$$, '22023'),
($$inbox_heartbeat(id => {live}, token => {live.token}, lease => '178000000 years')$$, '22023'),
($$inbox_heartbeat(id => {live}, token => {live.token}, lease => '178000000 years -1 day')$$, '22023'),
($$inbox_heartbeat(id => 9223372036854775807, token => 1)$$, 'DR002'),
($$inbox_heartbeat(id => -9223372036854775808, token => 1)$$, 'DR002'),
($$inbox_heartbeat(id => {live}, token => {live.stale})$$, 'DR001'),
($$inbox_heartbeat(id => {live}, token => 9223372036854775807)$$, 'DR001'),
($$inbox_heartbeat(id => {pending}, token => 1)$$, 'DR001'),
($$inbox_heartbeat(id => {dead}, token => {dead.token})$$, 'DR001'),
-- inbox_complete(id, token)
($$inbox_complete(id => NULL, token => {live.token})$$, '22023'),
($$inbox_complete(id => {live}, token => NULL)$$, '22023'),
($$inbox_complete(id => 9223372036854775807, token => 1)$$, 'DR002'),
($$inbox_complete(id => {live}, token => {live.stale})$$, 'DR001'),
($$inbox_complete(id => {live}, token => 0)$$, 'DR001'),
($$inbox_complete(id => {pending}, token => 1)$$, 'DR001'),
($$inbox_complete(id => {dead}, token => {dead.token})$$, 'DR003'),
-- inbox_complete(ids, tokens): a batch is all or nothing
($$inbox_complete(ids => NULL, tokens => ARRAY[{live.token}])$$, '22023'),
($$inbox_complete(ids => ARRAY[{live}], tokens => NULL)$$, '22023'),
($$inbox_complete(ids => ARRAY[{live}, {pending}], tokens => ARRAY[{live.token}])$$, '22023'),
($$inbox_complete(ids => ARRAY[{live}, NULL], tokens => ARRAY[{live.token}, 1])$$, '22023'),
($$inbox_complete(ids => ARRAY[{live}], tokens => ARRAY[NULL]::bigint[])$$, '22023'),
($$inbox_complete(ids => ARRAY[[{live}]], tokens => ARRAY[[{live.token}]])$$, '22023'),
($$inbox_complete(ids => ARRAY[{live}, 9223372036854775807], tokens => ARRAY[{live.token}, 1])$$, 'DR002'),
($$inbox_complete(ids => ARRAY[{live}, {live}], tokens => ARRAY[{live.token}, {live.stale}])$$, 'DR001'),
($$inbox_complete(ids => ARRAY[{live}, {dead}], tokens => ARRAY[{live.token}, {dead.token}])$$, 'DR003'),
-- inbox_fail(id, token, error, retry_in)
($$inbox_fail(id => NULL, token => {live.token}, error => 'e')$$, '22023'),
($$inbox_fail(id => {live}, token => NULL, error => 'e')$$, '22023'),
($$inbox_fail(id => {live}, token => {live.token}, error => NULL)$$, '22023'),
($$inbox_fail(id => {live}, token => {live.token}, error => 'e', retry_in => '-1 s')$$, '22023'),
($$inbox_fail(id => {live}, token => {live.token}, error => 'e', retry_in => '178000000 years')$$, '22023'),
($$inbox_fail(id => 9223372036854775807, token => 1, error => 'e')$$, 'DR002'),
($$inbox_fail(id => {live}, token => {live.stale}, error => 'e')$$, 'DR001'),
($$inbox_fail(id => {dead}, token => {dead.token}, error => 'e')$$, 'DR003'),
-- inbox_release(id, token): a dead record's lease is gone (DR001), while completing or failing it is DR003
($$inbox_release(id => NULL, token => {live.token})$$, '22023'),
($$inbox_release(id => {live}, token => NULL)$$, '22023'),
($$inbox_release(id => 9223372036854775807, token => 1)$$, 'DR002'),
($$inbox_release(id => {live}, token => {live.stale})$$, 'DR001'),
($$inbox_release(id => {dead}, token => {dead.token})$$, 'DR001'),
-- inbox_replay(id)
($$inbox_replay(id => NULL)$$, '22023'),
($$inbox_replay(id => 9223372036854775807)$$, 'DR002'),
($$inbox_replay(id => {live})$$, 'DR003'),
($$inbox_replay(id => {pending})$$, 'DR003'),
-- outbox_begin(idempotency_key, chat_id, payload, instance, lease, inbound_id, inbound_token):
-- a payload over durable.max_payload_bytes is not an error, it bypasses the journal (a WARNING);
-- one journaled whose numbers written out take more than 4 times the limit is (54000: nobody
-- could read it back); one over the limit bypasses the journal whatever its numbers
($$outbox_begin(idempotency_key => '', chat_id => 'bad-x', payload => '{}', instance => 'bad-bot')$$, '22023'),
($$outbox_begin(idempotency_key => repeat('k', 513), chat_id => 'bad-x', payload => '{}', instance => 'bad-bot')$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => NULL, payload => '{}', instance => 'bad-bot')$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => '', payload => '{}', instance => 'bad-bot')$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => repeat('c', 513), payload => '{}', instance => 'bad-bot')$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => NULL, instance => 'bad-bot')$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => jsonb_build_object('t', repeat('p', 1100000)), instance => 'bad-bot')$$, 'ok'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 40)), instance => 'bad-bot')$$, '54000'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => jsonb_build_object('t', repeat('p', 1100000), 'n', (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 40))), instance => 'bad-bot')$$, 'ok'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', instance => NULL)$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', instance => '')$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', instance => repeat('i', 513))$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', instance => 'bad-bot', lease => '0')$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', instance => 'bad-bot', lease => '19 ms')$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', instance => 'bad-bot', lease => '178000000 years')$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', instance => 'bad-bot', inbound_id => {live})$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', instance => 'bad-bot', inbound_token => {live.token})$$, '22023'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', instance => 'bad-bot', inbound_id => 9223372036854775807, inbound_token => 1)$$, 'DR002'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', instance => 'bad-bot', inbound_id => {live}, inbound_token => {live.stale})$$, 'DR001'),
($$outbox_begin(idempotency_key => NULL, chat_id => 'bad-x', payload => '{}', instance => 'bad-bot', inbound_id => {live}, inbound_token => {live.stale})$$, 'DR001'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', instance => 'bad-bot', inbound_id => {pending}, inbound_token => 1)$$, 'DR001'),
($$outbox_begin(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', instance => 'bad-bot', inbound_id => {dead}, inbound_token => {dead.token})$$, 'DR001'),
-- outbox_sent(key, token, provider_message_id)
($$outbox_sent(key => NULL, token => {sending.token}, provider_message_id => 'p')$$, '22023'),
($$outbox_sent(key => '', token => {sending.token}, provider_message_id => 'p')$$, '22023'),
($$outbox_sent(key => repeat('k', 513), token => {sending.token}, provider_message_id => 'p')$$, '22023'),
($$outbox_sent(key => 'bad-sending', token => NULL, provider_message_id => 'p')$$, '22023'),
($$outbox_sent(key => 'bad-sending', token => {sending.token}, provider_message_id => repeat('p', 513))$$, '22023'),
($$outbox_sent(key => 'bad-nonexistent', token => 1, provider_message_id => 'p')$$, 'DR002'),
($$outbox_sent(key => 'bad-sending', token => {sending.stale}, provider_message_id => 'p')$$, 'DR001'),
($$outbox_sent(key => 'bad-sending', token => 9223372036854775807, provider_message_id => 'p')$$, 'DR001'),
-- outbox_failed(key, token, error, retryable, retry_in)
($$outbox_failed(key => NULL, token => {sending.token}, error => 'e')$$, '22023'),
($$outbox_failed(key => '', token => {sending.token}, error => 'e')$$, '22023'),
($$outbox_failed(key => 'bad-sending', token => NULL, error => 'e')$$, '22023'),
($$outbox_failed(key => 'bad-sending', token => {sending.token}, error => NULL)$$, '22023'),
($$outbox_failed(key => 'bad-sending', token => {sending.token}, error => 'e', retryable => NULL)$$, '22023'),
($$outbox_failed(key => 'bad-sending', token => {sending.token}, error => 'e', retry_in => '178000000 years')$$, '22023'),
($$outbox_failed(key => 'bad-nonexistent', token => 1, error => 'e')$$, 'DR002'),
($$outbox_failed(key => 'bad-sending', token => {sending.stale}, error => 'e')$$, 'DR001'),
-- outbox_enqueue(idempotency_key, chat_id, payload, not_before, inbound_id, inbound_token)
($$outbox_enqueue(idempotency_key => '', chat_id => 'bad-x', payload => '{}')$$, '22023'),
($$outbox_enqueue(idempotency_key => repeat('k', 513), chat_id => 'bad-x', payload => '{}')$$, '22023'),
($$outbox_enqueue(idempotency_key => 'bad-x', chat_id => NULL, payload => '{}')$$, '22023'),
($$outbox_enqueue(idempotency_key => 'bad-x', chat_id => '', payload => '{}')$$, '22023'),
($$outbox_enqueue(idempotency_key => 'bad-x', chat_id => repeat('c', 513), payload => '{}')$$, '22023'),
($$outbox_enqueue(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => NULL)$$, '22023'),
($$outbox_enqueue(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => jsonb_build_object('t', repeat('p', 1100000)))$$, '54000'),
($$outbox_enqueue(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 40)))$$, '54000'),
($$outbox_enqueue(idempotency_key => NULL, chat_id => 'bad-x', payload => jsonb_build_object('t', repeat('p', 1100000)))$$, '54000'),
($$outbox_enqueue(idempotency_key => NULL, chat_id => 'bad-x', payload => (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 40)))$$, '54000'),
($$outbox_enqueue(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', not_before => 'infinity')$$, '22023'),
($$outbox_enqueue(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', not_before => now() + interval '1000 years')$$, '22023'),
($$outbox_enqueue(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', inbound_token => {live.token})$$, '22023'),
($$outbox_enqueue(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', inbound_id => 9223372036854775807, inbound_token => 1)$$, 'DR002'),
($$outbox_enqueue(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', inbound_id => 9223372036854775807)$$, 'DR002'),
($$outbox_enqueue(idempotency_key => 'bad-x', chat_id => 'bad-x', payload => '{}', inbound_id => {live}, inbound_token => {live.stale})$$, 'DR001'),
($$outbox_enqueue(idempotency_key => NULL, chat_id => 'bad-x', payload => '{}', inbound_id => {live}, inbound_token => {live.stale})$$, 'DR001'),
($$outbox_enqueue(idempotency_key => NULL, chat_id => 'bad-x', payload => '{}', inbound_id => {pending}, inbound_token => 1)$$, 'DR001'),
-- outbox_claim(instance, max, lease, wait)
($$outbox_claim(instance => NULL)$$, '22023'),
($$outbox_claim(instance => '')$$, '22023'),
($$outbox_claim(instance => repeat('i', 513))$$, '22023'),
($$outbox_claim(instance => 'bad-bot', max => NULL)$$, '22023'),
($$outbox_claim(instance => 'bad-bot', max => 0)$$, '22023'),
($$outbox_claim(instance => 'bad-bot', max => -1)$$, '22023'),
($$outbox_claim(instance => 'bad-bot', max => 2147483647)$$, 'ok'),
($$outbox_claim(instance => 'bad-bot', wait => NULL)$$, 'ok'),
($$outbox_claim(instance => 'bad-bot', lease => '0')$$, '22023'),
($$outbox_claim(instance => 'bad-bot', lease => '19 ms')$$, '22023'),
($$outbox_claim(instance => 'bad-bot', lease => '178000000 years')$$, '22023'),
($$outbox_claim(instance => 'bad-bot', wait => '-1 s')$$, '22023'),
($$outbox_claim(instance => 'bad-bot', wait => '2 hours')$$, '22023'),
-- outbox_heartbeat(key, token, lease)
($$outbox_heartbeat(key => NULL, token => {sending.token})$$, '22023'),
($$outbox_heartbeat(key => '', token => {sending.token})$$, '22023'),
($$outbox_heartbeat(key => 'bad-sending', token => NULL)$$, '22023'),
($$outbox_heartbeat(key => 'bad-sending', token => {sending.token}, lease => '0')$$, '22023'),
($$outbox_heartbeat(key => 'bad-sending', token => {sending.token}, lease => '178000000 years')$$, '22023'),
($$outbox_heartbeat(key => 'bad-nonexistent', token => 1)$$, 'DR002'),
($$outbox_heartbeat(key => 'bad-sending', token => {sending.stale})$$, 'DR001'),
($$outbox_heartbeat(key => 'bad-sent', token => {sent.token})$$, 'DR001'),
-- outbox_retry(key)
($$outbox_retry(key => NULL)$$, '22023'),
($$outbox_retry(key => '')$$, '22023'),
($$outbox_retry(key => repeat('k', 513))$$, '22023'),
($$outbox_retry(key => 'bad-nonexistent')$$, 'DR002'),
($$outbox_retry(key => 'bad-sending')$$, 'DR003'),
($$outbox_retry(key => 'bad-sent')$$, 'DR003'),
-- outbox_discard(key): an unknown key is not an error, it returns false
($$outbox_discard(key => NULL)$$, '22023'),
($$outbox_discard(key => '')$$, '22023'),
($$outbox_discard(key => repeat('k', 513))$$, '22023'),
($$outbox_discard(key => 'bad-nonexistent')$$, 'ok'),
-- instance_start(instance)
($$instance_start(instance => NULL)$$, '22023'),
($$instance_start(instance => '')$$, '22023'),
($$instance_start(instance => repeat('i', 513))$$, '22023'),
-- purge(older_than, batch): NULL means durable.retention and 10,000 (README "Reference":
-- which optional arguments take NULL as their default and which refuse it)
($$purge(older_than => NULL)$$, 'ok'),
($$purge(older_than => '-1 s')$$, '22023'),
($$purge(older_than => '-178000000 years')$$, '22023'),
($$purge(batch => NULL)$$, 'ok'),
($$purge(batch => 0)$$, '22023'),
($$purge(batch => -1)$$, '22023'),
-- session_save(bot, shard, session_id, sequence, resume_url, total_shards)
($$session_save(bot => NULL, shard => 0, session_id => 's', sequence => 1, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_save(bot => '', shard => 0, session_id => 's', sequence => 1, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_save(bot => repeat('b', 513), shard => 0, session_id => 's', sequence => 1, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => NULL, session_id => 's', sequence => 1, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => -1, session_id => 's', sequence => 1, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => 1, session_id => 's', sequence => 1, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => 0, session_id => NULL, sequence => 1, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => 0, session_id => '', sequence => 1, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => 0, session_id => repeat('s', 513), sequence => 1, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => 0, session_id => 's', sequence => NULL, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => 0, session_id => 's', sequence => -1, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => 0, session_id => 's', sequence => 1, resume_url => NULL, total_shards => 1)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => 0, session_id => 's', sequence => 1, resume_url => '', total_shards => 1)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => 0, session_id => 's', sequence => 1, resume_url => 'wss://gw', total_shards => NULL)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => 0, session_id => 's', sequence => 1, resume_url => 'wss://gw', total_shards => 0)$$, '22023'),
($$session_save(bot => 'bad-bot', shard => 0, session_id => 's', sequence => 1, resume_url => 'wss://gw', total_shards => -1)$$, '22023'),
-- session_load(bot, shard, resume_url, total_shards, max_age)
($$session_load(bot => NULL, shard => 0, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_load(bot => '', shard => 0, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_load(bot => 'bad-bot', shard => NULL, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_load(bot => 'bad-bot', shard => -1, resume_url => 'wss://gw', total_shards => 1)$$, '22023'),
($$session_load(bot => 'bad-bot', shard => 0, resume_url => NULL, total_shards => 1)$$, '22023'),
($$session_load(bot => 'bad-bot', shard => 0, resume_url => 'wss://gw', total_shards => NULL)$$, '22023'),
($$session_load(bot => 'bad-bot', shard => 0, resume_url => 'wss://gw', total_shards => 0)$$, '22023'),
($$session_load(bot => 'bad-bot', shard => 0, resume_url => 'wss://gw', total_shards => 1, max_age => '-1 s')$$, '22023'),
($$session_load(bot => 'bad-bot', shard => 0, resume_url => 'wss://gw', total_shards => 1, max_age => NULL)$$, 'ok'),
-- permit(bucket, max, per)
($$permit(bucket => NULL, max => 1, per => '1 s')$$, '22023'),
($$permit(bucket => '', max => 1, per => '1 s')$$, '22023'),
($$permit(bucket => repeat('b', 513), max => 1, per => '1 s')$$, '22023'),
($$permit(bucket => 'bad-bucket', max => NULL, per => '1 s')$$, '22023'),
($$permit(bucket => 'bad-bucket', max => 0, per => '1 s')$$, '22023'),
($$permit(bucket => 'bad-bucket', max => -1, per => '1 s')$$, '22023'),
($$permit(bucket => 'bad-bucket', max => 1, per => NULL)$$, '22023'),
($$permit(bucket => 'bad-bucket', max => 1, per => '0')$$, '22023'),
($$permit(bucket => 'bad-bucket', max => 1, per => '-1 s')$$, '22023'),
($$permit(bucket => 'bad-bucket', max => 1, per => '178000000 years')$$, '22023');

-- TESTS
-- Run every case in its own subtransaction and record what it raised
DO $$
DECLARE
    c record;
    sql text;
    f record;
BEGIN
    FOR c IN SELECT * FROM cases ORDER BY n LOOP
        sql := c.call;
        -- longest placeholder names first, so that {live} does not eat {live.token}
        FOR f IN SELECT name, value FROM fx ORDER BY length(name) DESC LOOP
            sql := replace(sql, '{' || f.name || '}', f.value);
        END LOOP;
        BEGIN
            EXECUTE 'SELECT * FROM durable.' || sql;
            UPDATE cases SET got = 'ok' WHERE n = c.n;
        EXCEPTION WHEN OTHERS THEN
            -- record ids and tokens vary from run to run: shown as N
            UPDATE cases SET got = SQLSTATE,
                             message = regexp_replace(SQLERRM, '(record|token) -?[0-9]+', '\1 N', 'g')
             WHERE n = c.n;
        END;
    END LOOP;
END
$$;

-- Every case, what it raised and why
SELECT call, got AS sqlstate, message FROM cases ORDER BY n;

-- Every call raised what the contract says (no row)
SELECT call, expect, got, message FROM cases WHERE got IS DISTINCT FROM expect ORDER BY n;

-- No call succeeded that should have failed, and none raised a SQLSTATE outside the contract (no row)
SELECT call, got, message FROM cases
 WHERE (got = 'ok' AND expect <> 'ok')
    OR got NOT IN ('ok', '22023', '54000', 'DR001', 'DR002', 'DR003')
 ORDER BY n;

-- Cases per function and outcome
SELECT split_part(call, '(', 1) AS function, count(*) AS cases,
       string_agg(DISTINCT got, ', ' ORDER BY got) AS outcomes
  FROM cases GROUP BY 1 ORDER BY 1;

-- Nothing was journaled or changed: every table has the same rows as before (no row)
SELECT b.relation, b.n AS rows_before, a.n AS rows_after
  FROM fingerprint_before b JOIN fingerprint a USING (relation)
 WHERE a.md5 <> b.md5;

-- Nor counted: only the refused stale tokens moved stale_leases (one each),
-- and the one accepted oversized send outbox_bypassed.  (inbound_dead and
-- outbox_ambiguous are left out: the worker's lease recovery may count
-- leftovers of earlier files at any moment.)
SELECT b.key AS counter, a.value::bigint - b.value::bigint AS delta,
       CASE b.key WHEN 'stale_leases' THEN (SELECT count(*) FROM cases WHERE got = 'DR001')
                  WHEN 'outbox_bypassed' THEN 1 END AS expected
  FROM metrics_before mb,
       jsonb_each_text(to_jsonb(mb) - 'since') b
       JOIN jsonb_each_text((SELECT to_jsonb(m) - 'since' FROM durable.metrics() m)) a USING (key)
 WHERE a.value <> b.value AND b.key NOT IN ('inbound_dead', 'outbox_ambiguous')
 ORDER BY 1;

-- The fixtures are as they were: the live record still leased under its token
SELECT message_id, state, token = (SELECT value::bigint FROM fx WHERE name = 'live.token') AS same_token
  FROM durable.inbox WHERE source = 'regress-bad' ORDER BY message_id;

-- The session is still usable
SELECT 1 AS alive;

--
-- TESTS: every function of the extension (from the catalog, so a function
-- added later is tried without a change here), every argument in turn at
-- each edge value of its type (NULL, empty, over 512 bytes, a control
-- character, a quote that would end the string in dynamic SQL, 0, -1, the
-- type's bounds, intervals below the minimum lease and past any cap,
-- infinite times, a 2 MB payload, empty and 2-D arrays), the other
-- arguments valid.  Every call runs or fails with a documented SQLSTATE
-- (22023, 54000, DR001-DR003): no other error, no crash (tests.md, 13).
-- The calls' writes are rolled back.
--
CREATE FUNCTION pg_temp.outcome_of(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'runs';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
-- a valid value of each argument type, and the edge values to try in its place
CREATE TEMP TABLE arg_values (type regtype, valid text, edges text[]);
INSERT INTO arg_values VALUES
  ('text', '''x''', ARRAY['NULL', '''''', 'repeat(''x'', 513)', 'repeat(''é'', 300)', 'E''\x01''', '''a''''; DROP TABLE pg_temp.arg_values; --''']),
  ('integer', '1', ARRAY['NULL', '0', '-1', '2147483647', '(-2147483647 - 1)']),
  ('bigint', '1', ARRAY['NULL', '0', '-1', '9223372036854775807', '(-9223372036854775807 - 1)']),
  ('interval', '''20 ms''', ARRAY['NULL', '''0''', '''-1 s''', '''1 ms''', '''1000000 years''', '''-1000000 years''', '''1 mon''']),
  ('jsonb', '''{}''', ARRAY['NULL', '''null''', '''"x"''', '''[]''', 'jsonb_build_object(''t'', repeat(''x'', 2000000))']),
  ('timestamptz', 'now()', ARRAY['NULL', '''infinity''', '''-infinity''', '''4000-01-01''']),
  ('boolean', 'true', ARRAY['NULL']),
  ('bigint[]', '''{1}''', ARRAY['NULL', '''{}''', '''{NULL}''', 'ARRAY[1, 2]', '''{{1}}''']);
-- every function of the extension, every argument in turn at each edge value, the others valid
CREATE TEMP TABLE edge_calls AS
SELECT p.oid::regprocedure::text AS function, i AS arg, e AS value,
       format('SELECT * FROM durable.%I(%s)', p.proname,
              (SELECT string_agg(CASE WHEN j = i THEN e || '::' || format_type(t, NULL)
                                      ELSE v.valid || '::' || format_type(t, NULL) END, ', ' ORDER BY j)
                 FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, j)
                 JOIN arg_values v ON v.type = a.t)) AS call
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'durable',
       unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, i)
  JOIN arg_values v ON v.type = a.t, unnest(v.edges) AS e;
-- (an argument type without values would leave its functions out)
SELECT p.oid::regprocedure AS untried
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
  JOIN pg_extension x ON x.oid = d.refobjid AND x.extname = 'durable'
 WHERE EXISTS (SELECT FROM unnest(p.proargtypes::oid[]) t WHERE t NOT IN (SELECT type FROM arg_values));
BEGIN;
SET LOCAL client_min_messages = error;
CREATE TEMP TABLE edge_results AS SELECT c.*, pg_temp.outcome_of(c.call) AS result FROM edge_calls c;
-- (which documented SQLSTATE each call gets depends on what the journals hold)
SELECT count(*) AS calls, count(*) FILTER (WHERE result = 'runs') > 0 AS some_run,
       count(*) FILTER (WHERE result = '22023') > 0 AS some_refused
  FROM edge_results;
SELECT function, arg, value, result FROM edge_results WHERE result NOT IN ('runs', '22023', '54000', 'DR001', 'DR002', 'DR003') ORDER BY 1, 2, 3;
-- no function built SQL from a text argument: the quote's DROP TABLE never ran
SELECT to_regclass('pg_temp.arg_values') IS NOT NULL AS canary_kept;
ROLLBACK;

-- CLEANUP
DELETE FROM durable.inbox WHERE source = 'regress-bad';
DELETE FROM durable.outbox WHERE key LIKE 'bad-%';
DROP VIEW fingerprint;
DROP TABLE fingerprint_before, metrics_before, cases, fx;

