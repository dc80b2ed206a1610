--
-- demo/demo.sql: a short story of a chat bot that journals its work in durable.
--
-- Run by scripts/demo with `psql -X -e` (every query is echoed before its
-- result).  Two replicas of one bot, bot-1 and bot-2, share the database.
-- The story: messages are admitted, a duplicate delivery is recognised, a
-- handler fails and is retried with backoff, a replica that stalled loses
-- its lease and its late confirmation is rejected, a reply is answered from
-- the outbox when its message is handled again after a crash, and a send cut
-- off mid-call is flagged ambiguous instead of being resent.  The counters
-- and gauges close the story.
--
\set ON_ERROR_STOP on
\pset footer off
SET client_min_messages = warning;
\echo
\echo '================================================================================'
\echo ' durable: a demo'
\echo '================================================================================'
SELECT extversion AS durable_version FROM pg_extension WHERE extname = 'durable';
SELECT backend_type, datname FROM pg_stat_activity WHERE backend_type LIKE 'durable%' ORDER BY 1;
SELECT durable.metrics_reset();
-- the bot's own table, written in the same transactions as its completions
CREATE TABLE demo_replies_log (message text, handled_at timestamptz DEFAULT clock_timestamp());

\echo
\echo '--- 1. Telegram delivers message 8812: journal it first, lease it to bot-1 at once'
SELECT id, token, duplicate, state
  FROM durable.inbox_admit(source => 'telegram', message_id => '8812', chat_id => 'chat-42',
                           payload => '{"text":"hi"}', instance => 'bot-1') \gset m1_
\echo '    ->' record :m1_id is :m1_state by bot-1 under fencing token :m1_token

\echo
\echo '--- 2. Telegram retries the webhook: the same message is recognised, nothing new is journaled'
SELECT id = :m1_id AS same_record, duplicate, token IS NULL AS no_new_lease, state
  FROM durable.inbox_admit(source => 'telegram', message_id => '8812', chat_id => 'chat-42',
                           payload => '{"text":"hi"}', instance => 'bot-1');

\echo
\echo '--- 3. The handler of 8812 succeeds: its effects and the completion commit together'
BEGIN;
INSERT INTO demo_replies_log (message) VALUES ('8812');
SELECT durable.inbox_complete(:m1_id, :m1_token);
COMMIT;
SELECT message_id, state, attempts FROM durable.inbox WHERE id = :m1_id;

\echo
\echo '--- 4. Message 8813 arrives; its handler fails (the weather API timed out)'
SELECT id, token FROM durable.inbox_admit('telegram', '8813', 'chat-43', '{"text":"weather?"}',
                                          instance => 'bot-1') \gset m2_
SELECT state, round(extract(epoch FROM not_before - clock_timestamp())::numeric, 1) AS retry_in_seconds
  FROM durable.inbox_fail(:m2_id, :m2_token, 'weather API timeout');
\echo '    -> back to pending with exponential backoff (durable.inbox_backoff_base = 1s, doubling, with jitter)'
\echo '    bot-2 asks for work now: nothing is due yet'
SELECT count(*) AS claimed FROM durable.inbox_claim(instance => 'bot-2', max => 10);
\echo '    bot-2 asks again and waits in the server (on a latch, no polling) until the retry is due'
SELECT id, token, message_id, attempts,
       round(extract(epoch FROM clock_timestamp() - statement_timestamp())::numeric, 1) AS waited
  FROM durable.inbox_claim(instance => 'bot-2', max => 1, wait => '10s') \gset c2_
\echo '    ->' bot-2 got message :c2_message_id after waiting :c2_waited s (attempt :c2_attempts, token :c2_token); this time the handler succeeds
SELECT durable.inbox_complete(:c2_id, :c2_token);

\echo
\echo '--- 5. Message 8814 goes to bot-1 with a short lease; bot-1 stalls (a long GC pause)'
SELECT id, token FROM durable.inbox_admit('telegram', '8814', 'chat-44', '{"text":"/start"}',
                                          instance => 'bot-1', lease => '300ms') \gset m3_
SELECT pg_sleep(0.6);
\echo '    the lease expired: bot-2 takes the message over, with a new fencing token'
SELECT (id = :m3_id)::text AS same_record, token, attempts
  FROM durable.inbox_claim(instance => 'bot-2', max => 1) \gset t_
\echo '    ->' same record: :t_same_record, attempt :t_attempts, token :t_token (bot-1 still holds token :m3_token)
\echo '    bot-1 wakes up and tries to confirm with its old token: rejected (DR001), its transaction rolls back'
\set ON_ERROR_STOP off
\set VERBOSITY terse
BEGIN;
INSERT INTO demo_replies_log (message) VALUES ('8814 by bot-1, too late');
SELECT durable.inbox_complete(:m3_id, :m3_token);
ROLLBACK;
\set VERBOSITY default
\set ON_ERROR_STOP on
\echo '    bot-2, the holder of the current token, completes it; the stale attempt was counted'
SELECT durable.inbox_complete(:m3_id, :t_token);
SELECT stale_leases FROM durable.metrics();
\echo '    the bot''s table: the late write of bot-1 rolled back with its rejected confirmation'
SELECT message FROM demo_replies_log ORDER BY handled_at;

\echo
\echo '--- 6. Message 8815: the handler replies through the outbox, then bot-1 crashes before completing'
SELECT id, token FROM durable.inbox_admit('telegram', '8815', 'chat-45', '{"text":"/help"}',
                                          instance => 'bot-1') \gset m4_
SELECT action, key, token FROM durable.outbox_begin(idempotency_key => NULL, chat_id => 'chat-45',
    payload => '{"text":"Here is the help"}', instance => 'bot-1',
    inbound_id => :m4_id, inbound_token => :m4_token) \gset r1_
\echo '    ->' action :r1_action for key :r1_key (derived from the inbound record): bot-1 calls Telegram sendMessage, which answers message_id 5001
SELECT durable.outbox_sent(:'r1_key', :r1_token, '5001');
\echo '    *** bot-1 is killed here, before inbox_complete ***'
\echo '    bot-1 restarts: instance_start takes back what its dead incarnation held'
SELECT * FROM durable.instance_start('bot-1');
\echo '    the message is handled again (new lease); its reply re-derives the same key...'
SELECT id, token FROM durable.inbox_claim(instance => 'bot-1', max => 1) \gset m4b_
SELECT action, key, provider_message_id
  FROM durable.outbox_begin(idempotency_key => NULL, chat_id => 'chat-45',
       payload => '{"text":"Here is the help"}', instance => 'bot-1',
       inbound_id => :m4b_id, inbound_token => :m4b_token);
\echo '    -> ...and is answered from the journal: action sent, Telegram is not called, the user gets one reply'
SELECT durable.inbox_complete(:m4b_id, :m4b_token);
SELECT key, state, attempts, provider_message_id FROM durable.outbox WHERE inbound_id = :m4_id;

\echo
\echo '--- 7. A welcome message: bot-2 starts the send, and dies while Telegram is being called'
LISTEN durable_ambiguous;
SELECT action FROM durable.outbox_begin('welcome:chat-46', 'chat-46', '{"text":"Welcome!"}', 'bot-2');
\echo '    *** bot-2 is killed mid-call: did Telegram deliver the message or not? ***'
\echo '    bot-2 restarts: its unfinished send becomes unknown (and durable_ambiguous is notified)'
SELECT * FROM durable.instance_start('bot-2');
\echo '    asking again does not resend it: an ambiguous send waits for a decision'
SELECT action, state FROM durable.outbox_begin('welcome:chat-46', 'chat-46', '{"text":"Welcome!"}', 'bot-2');
\echo '    an operator checks the chat, sees no welcome message, and retries it'
SELECT durable.outbox_retry('welcome:chat-46');
SELECT action, token FROM durable.outbox_begin('welcome:chat-46', 'chat-46', '{"text":"Welcome!"}', 'bot-2') \gset w_
\echo '    ->' action :w_action: bot-2 sends it, Telegram answers message_id 5002
SELECT durable.outbox_sent('welcome:chat-46', :w_token, '5002');
UNLISTEN durable_ambiguous;

\echo
\echo '--- 8. What happened, as the counters (metrics) and the gauges (standing) tell it'
\x on
SELECT * FROM durable.metrics();
SELECT * FROM durable.standing();
\x off
SELECT source, message_id, state, attempts, error FROM durable.inbox ORDER BY id;
SELECT key, state, attempts, provider_message_id FROM durable.outbox ORDER BY id;
\echo
\echo 'The end.'
