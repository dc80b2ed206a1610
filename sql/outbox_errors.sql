-- Errors of the outbox functions: every refusal of the contract, its SQLSTATE (printed
-- after each error from psql's LAST_ERROR_SQLSTATE), and proof that nothing was journaled
-- or changed by it.
-- This file uses keys 'roe-%', chats 'roe-chat-%' and the inbox source
-- 'regress-outbox-errors' only.

-- SETUP
DELETE FROM durable.outbox WHERE key LIKE 'roe-%' OR chat_id LIKE 'roe-chat-%';
DELETE FROM durable.inbox WHERE source = 'regress-outbox-errors';
SELECT durable.metrics_reset();

-- roe-sending: leased for an hour with token :t_sending; :t_stale is its first lease's token.
SELECT action FROM durable.outbox_begin('roe-sending', 'roe-chat-1', '{"text":"s"}', 'bot-1');
SELECT token AS t_stale FROM durable.outbox WHERE key = 'roe-sending' \gset
SELECT state FROM durable.outbox_failed('roe-sending', :t_stale, 'fixture', retry_in => '0');
SELECT action FROM durable.outbox_begin('roe-sending', 'roe-chat-1', '{"text":"s"}', 'bot-1', lease => '1 hour');
SELECT token AS t_sending FROM durable.outbox WHERE key = 'roe-sending' \gset
-- roe-sent: sent with token :t_sent.
SELECT action FROM durable.outbox_begin('roe-sent', 'roe-chat-2', '{"text":"s"}', 'bot-1');
SELECT token AS t_sent FROM durable.outbox WHERE key = 'roe-sent' \gset
SELECT durable.outbox_sent('roe-sent', :t_sent, 'tg-1');
-- roe-dead: dead (not retryable) with token :t_dead.
SELECT action FROM durable.outbox_begin('roe-dead', 'roe-chat-3', '{"text":"s"}', 'bot-1');
SELECT token AS t_dead FROM durable.outbox WHERE key = 'roe-dead' \gset
SELECT state FROM durable.outbox_failed('roe-dead', :t_dead, 'fixture', retryable => false);
-- roe-failed: failed, due in an hour, with token :t_failed.
SELECT action FROM durable.outbox_begin('roe-failed', 'roe-chat-4', '{"text":"s"}', 'bot-1');
SELECT token AS t_failed FROM durable.outbox WHERE key = 'roe-failed' \gset
SELECT state FROM durable.outbox_failed('roe-failed', :t_failed, 'fixture', retry_in => '1 hour');
-- roe-unknown: its 30 ms lease expired and a repeat flagged it unknown; token :t_unknown.
SELECT action FROM durable.outbox_begin('roe-unknown', 'roe-chat-5', '{"text":"s"}', 'bot-1', lease => '30 ms');
SELECT token AS t_unknown FROM durable.outbox WHERE key = 'roe-unknown' \gset
SELECT pg_sleep(0.1);
SELECT action FROM durable.outbox_begin('roe-unknown', 'roe-chat-5', '{"text":"s"}', 'bot-2');
-- roe-pending: enqueued, due in an hour.
SELECT created FROM durable.outbox_enqueue('roe-pending', 'roe-chat-6', '{"text":"s"}', now() + interval '1 hour');
-- The sends.
SELECT key, state FROM durable.outbox WHERE key LIKE 'roe-%' ORDER BY key;

-- Inbox record :in_id leased to bot-1 with :in_old, then given back and redelivered to
-- bot-2 with :in_token: bot-1's handler is fenced off.  Inbox record :in_pending is not leased.
SELECT id AS in_id, token AS in_old
  FROM durable.inbox_admit(source => 'regress-outbox-errors', message_id => 'm-1',
                           chat_id => 'roe-chat-in', instance => 'bot-1') \gset
SELECT durable.inbox_release(:in_id, :in_old);
SELECT token AS in_token
  FROM durable.inbox_admit(source => 'regress-outbox-errors', message_id => 'm-1',
                           chat_id => 'roe-chat-in', instance => 'bot-2') \gset
SELECT id AS in_pending
  FROM durable.inbox_admit(source => 'regress-outbox-errors', message_id => 'm-2',
                           chat_id => 'roe-chat-in2') \gset
SELECT message_id, state FROM durable.inbox WHERE source = 'regress-outbox-errors' ORDER BY message_id;
SELECT :in_token > :in_old AS taken_over;

-- A fingerprint of this file's sends and inbox records (the inbox's sends counter
-- included), to prove that no error below changes anything.
CREATE TEMP VIEW journal AS
SELECT (SELECT md5(string_agg(o::text, '|' ORDER BY o.key)) FROM durable.outbox o
         WHERE o.key LIKE 'roe-%' OR o.chat_id LIKE 'roe-chat-%') AS outbox,
       (SELECT md5(string_agg(i::text, '|' ORDER BY i.id)) FROM durable.inbox i
         WHERE i.source = 'regress-outbox-errors') AS inbox;
CREATE TEMP TABLE journal_before AS SELECT * FROM journal;

-- TESTS
\set VERBOSITY terse

------------------------------------------------------------------------
-- outbox_begin
------------------------------------------------------------------------

-- Bad arguments (22023): an empty or over-512-byte key.
SELECT * FROM durable.outbox_begin('', 'roe-chat-x', '{}', 'bot-1');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_begin(repeat('k', 513), 'roe-chat-x', '{}', 'bot-1');
\echo :LAST_ERROR_SQLSTATE
-- chat_id NULL or empty.
SELECT * FROM durable.outbox_begin('roe-x', NULL, '{}', 'bot-1');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_begin('roe-x', '', '{}', 'bot-1');
\echo :LAST_ERROR_SQLSTATE
-- payload NULL.
SELECT * FROM durable.outbox_begin('roe-x', 'roe-chat-x', NULL, 'bot-1');
\echo :LAST_ERROR_SQLSTATE
-- instance NULL or empty.
SELECT * FROM durable.outbox_begin('roe-x', 'roe-chat-x', '{}', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_begin('roe-x', 'roe-chat-x', '{}', '');
\echo :LAST_ERROR_SQLSTATE
-- A lease under 20 ms, or negative.
SELECT * FROM durable.outbox_begin('roe-x', 'roe-chat-x', '{}', 'bot-1', lease => '10 ms');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_begin('roe-x', 'roe-chat-x', '{}', 'bot-1', lease => '-1 s');
\echo :LAST_ERROR_SQLSTATE
-- inbound_id without inbound_token, and inbound_token without inbound_id.
SELECT * FROM durable.outbox_begin('roe-x', 'roe-chat-x', '{}', 'bot-2', inbound_id => :in_id);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_begin('roe-x', 'roe-chat-x', '{}', 'bot-2', inbound_token => :in_token);
\echo :LAST_ERROR_SQLSTATE

-- No such inbound record: DR002.
SELECT * FROM durable.outbox_begin('roe-x', 'roe-chat-x', '{}', 'bot-2', inbound_id => 9223372036854775807, inbound_token => 1);
\echo :LAST_ERROR_SQLSTATE

-- A fenced-off handler (its inbound record was taken over) cannot begin a send: DR001,
-- with a given key and with a derived one.
SELECT * FROM durable.outbox_begin('roe-x', 'roe-chat-in', '{}', 'bot-1', inbound_id => :in_id, inbound_token => :in_old);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_begin(NULL, 'roe-chat-in', '{}', 'bot-1', inbound_id => :in_id, inbound_token => :in_old);
\echo :LAST_ERROR_SQLSTATE
-- Nor can a handler name an inbound record that is not leased at all: DR001.
SELECT * FROM durable.outbox_begin(NULL, 'roe-chat-in2', '{}', 'bot-1', inbound_id => :in_pending, inbound_token => :in_token);
\echo :LAST_ERROR_SQLSTATE

-- None of these journaled anything or touched the inbox records' send counters.
\set VERBOSITY default
SELECT j.outbox = b.outbox AS outbox_unchanged, j.inbox = b.inbox AS inbox_unchanged
  FROM journal j, journal_before b;
SELECT count(*) AS journaled FROM durable.outbox WHERE key = 'roe-x' OR inbound_id IN (:in_id, :in_pending);
\set VERBOSITY terse

------------------------------------------------------------------------
-- outbox_sent
------------------------------------------------------------------------

-- Bad arguments (22023): key NULL, empty or too long; token NULL; provider_message_id NULL,
-- empty or too long.
SELECT durable.outbox_sent(NULL, :t_sending, 'tg-x');
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_sent('', :t_sending, 'tg-x');
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_sent(repeat('k', 513), :t_sending, 'tg-x');
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_sent('roe-sending', NULL, 'tg-x');
\echo :LAST_ERROR_SQLSTATE
-- The send went out when its sender gets these: the hints say how to record it.
\set VERBOSITY default
SELECT durable.outbox_sent('roe-sending', :t_sending, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_sent('roe-sending', :t_sending, '');
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_sent('roe-sending', :t_sending, repeat('p', 513));
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse

-- No such send: DR002.
SELECT durable.outbox_sent('roe-missing', 1, 'tg-x');
\echo :LAST_ERROR_SQLSTATE

-- A stale token (the send was leased again since): DR001.
SELECT durable.outbox_sent('roe-sending', :t_stale, 'tg-x');
\echo :LAST_ERROR_SQLSTATE
-- The same token on a dead send: DR003 (only sending or unknown can be sent).
SELECT durable.outbox_sent('roe-dead', :t_dead, 'tg-x');
\echo :LAST_ERROR_SQLSTATE
-- The same token on a failed send: DR001, like a stale token (its lease ended with the failure).
SELECT durable.outbox_sent('roe-failed', :t_failed, 'tg-x');
\echo :LAST_ERROR_SQLSTATE
-- A token of another send: DR001.
SELECT durable.outbox_sent('roe-sent', :t_sending, 'tg-x');
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------
-- outbox_failed
------------------------------------------------------------------------

-- Bad arguments (22023): key NULL, token NULL, error NULL, retryable NULL, retry_in over 366
-- days.
SELECT * FROM durable.outbox_failed(NULL, :t_sending, 'e');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_failed('roe-sending', NULL, 'e');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_failed('roe-sending', :t_sending, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_failed('roe-sending', :t_sending, 'e', retryable => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_failed('roe-sending', :t_sending, 'e', retry_in => '400 days');
\echo :LAST_ERROR_SQLSTATE

-- No such send: DR002.
SELECT * FROM durable.outbox_failed('roe-missing', 1, 'e');
\echo :LAST_ERROR_SQLSTATE
-- A stale token: DR001.
SELECT * FROM durable.outbox_failed('roe-sending', :t_stale, 'e');
\echo :LAST_ERROR_SQLSTATE
-- The same token on a send that is neither sending nor unknown (sent, dead): DR003 (an
-- unknown send's refusal is accepted: outbox.sql).
SELECT * FROM durable.outbox_failed('roe-sent', :t_sent, 'e');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_failed('roe-dead', :t_dead, 'e');
\echo :LAST_ERROR_SQLSTATE
-- The same token on a send that already failed: DR001 (its lease ended with the failure).
SELECT * FROM durable.outbox_failed('roe-failed', :t_failed, 'e');
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------
-- outbox_enqueue
------------------------------------------------------------------------

-- Bad arguments (22023): an empty or too long key, chat_id NULL, payload NULL.
SELECT * FROM durable.outbox_enqueue('', 'roe-chat-x', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_enqueue(repeat('k', 513), 'roe-chat-x', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_enqueue('roe-x', NULL, '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_enqueue('roe-x', 'roe-chat-x', NULL);
\echo :LAST_ERROR_SQLSTATE
-- not_before infinite, or more than 366 days ahead.
SELECT * FROM durable.outbox_enqueue('roe-x', 'roe-chat-x', '{}', 'infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_enqueue('roe-x', 'roe-chat-x', '{}', '-infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_enqueue('roe-x', 'roe-chat-x', '{}', now() + interval '2 years');
\echo :LAST_ERROR_SQLSTATE

-- A payload over durable.max_payload_bytes: 54000 (there is no caller to bypass to).
SET durable.max_payload_bytes = 1024;
SELECT * FROM durable.outbox_enqueue('roe-x', 'roe-chat-x', jsonb_build_object('text', repeat('x', 2000)));
\echo :LAST_ERROR_SQLSTATE
-- A bad argument is named first, with a key or without (until 2026-12-06 a keyless
-- oversized enqueue got 54000 for it).
SELECT * FROM durable.outbox_enqueue(NULL, 'roe-chat-x', jsonb_build_object('text', repeat('x', 2000)), 'infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_enqueue(NULL, 'roe-chat-x', jsonb_build_object('text', repeat('x', 2000)), inbound_token => 1);
\echo :LAST_ERROR_SQLSTATE
RESET durable.max_payload_bytes;

-- A key derived from an inbound record that does not exist (DR002) or is not leased (DR001).
SELECT * FROM durable.outbox_enqueue(NULL, 'roe-chat-x', '{}', inbound_id => 9223372036854775807);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_enqueue(NULL, 'roe-chat-in2', '{}', inbound_id => :in_pending);
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------
-- outbox_claim
------------------------------------------------------------------------

-- Bad arguments (22023): instance NULL or empty, max NULL or under 1, a lease under 20 ms,
-- a negative wait or one over an hour.
SELECT * FROM durable.outbox_claim(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_claim('');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_claim('bot-1', max => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_claim('bot-1', max => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_claim('bot-1', lease => '10 ms');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_claim('bot-1', wait => '-1 s');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM durable.outbox_claim('bot-1', wait => '2 hours');
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------
-- outbox_heartbeat
------------------------------------------------------------------------

-- Bad arguments (22023): key NULL, token NULL, a lease under 20 ms.
SELECT durable.outbox_heartbeat(NULL, :t_sending);
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_heartbeat('roe-sending', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_heartbeat('roe-sending', :t_sending, '10 ms');
\echo :LAST_ERROR_SQLSTATE
-- No such send: DR002.
SELECT durable.outbox_heartbeat('roe-missing', 1);
\echo :LAST_ERROR_SQLSTATE
-- A stale token: DR001.
SELECT durable.outbox_heartbeat('roe-sending', :t_stale);
\echo :LAST_ERROR_SQLSTATE
-- The lease is gone although the token is the last one (sent, unknown): DR001.
SELECT durable.outbox_heartbeat('roe-sent', :t_sent);
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_heartbeat('roe-unknown', :t_unknown);
\echo :LAST_ERROR_SQLSTATE

------------------------------------------------------------------------
-- outbox_retry and outbox_discard
------------------------------------------------------------------------

-- Bad arguments (22023): key NULL, empty.
SELECT durable.outbox_retry(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_retry('');
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_discard(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_discard(repeat('k', 513));
\echo :LAST_ERROR_SQLSTATE
-- Retry of no such send: DR002.
SELECT durable.outbox_retry('roe-missing');
\echo :LAST_ERROR_SQLSTATE
-- Retry of a send that is sending, sent or pending: DR003 (only dead, failed and unknown).
SELECT durable.outbox_retry('roe-sending');
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_retry('roe-sent');
\echo :LAST_ERROR_SQLSTATE
SELECT durable.outbox_retry('roe-pending');
\echo :LAST_ERROR_SQLSTATE
-- Discard of a send whose lease is live: DR003 (its sender would confirm a vanished send).
SELECT durable.outbox_discard('roe-sending');
\echo :LAST_ERROR_SQLSTATE

-- After all of the above, nothing changed.
\set VERBOSITY default
SELECT j.outbox = b.outbox AS outbox_unchanged, j.inbox = b.inbox AS inbox_unchanged
  FROM journal j, journal_before b;
SELECT count(*) AS journaled FROM durable.outbox WHERE key IN ('roe-x', 'roe-missing') OR chat_id = 'roe-chat-x';
\set VERBOSITY terse

-- A payload over durable.max_payload_bytes, again: a key journaled before the limit was
-- lowered is answered from the journal instead (created = false), as outbox_begin answers
-- it: a sender loop repeating its enqueue does not fail (until 2026-12-05 it got 54000).
SELECT created, state FROM durable.outbox_enqueue('roe-big', 'roe-chat-big', jsonb_build_object('text', repeat('x', 2000)));
SET durable.max_payload_bytes = 1024;
SELECT created, state FROM durable.outbox_enqueue('roe-big', 'roe-chat-big', jsonb_build_object('text', repeat('x', 2000)));
RESET durable.max_payload_bytes;
SELECT count(*) AS journaled_once FROM durable.outbox WHERE key = 'roe-big';
-- The same for a payload whose numbers became too long to journal (more than 4 times the
-- limit written out; these take 5.2 MB): answered from the journal (since 2026-12-06; before,
-- 54000); a new key is refused.
SET durable.max_payload_bytes = '2MB';
SELECT created, state FROM durable.outbox_enqueue('roe-digits', 'roe-chat-digits', (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 40)));
SET durable.max_payload_bytes = '1MB';
SELECT created, state FROM durable.outbox_enqueue('roe-digits', 'roe-chat-digits', (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 40)));
SELECT * FROM durable.outbox_enqueue('roe-digits-2', 'roe-chat-digits', (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 40)));
RESET durable.max_payload_bytes;

------------------------------------------------------------------------
-- A late sender after a discard, and counting
------------------------------------------------------------------------

-- A send whose lease expired is discarded; its late sender's confirmation: DR002.
SELECT action FROM durable.outbox_begin('roe-late', 'roe-chat-7', '{"text":"s"}', 'bot-1', lease => '30 ms');
SELECT token AS t_late FROM durable.outbox WHERE key = 'roe-late' \gset
SELECT pg_sleep(0.1);
SELECT durable.outbox_discard('roe-late');
SELECT durable.outbox_sent('roe-late', :t_late, 'tg-late');
\echo :LAST_ERROR_SQLSTATE

-- A stale confirmation inside the caller's transaction: the transaction rolls back, the
-- rejection is still counted.
BEGIN;
SELECT durable.outbox_sent('roe-sending', :t_stale, 'tg-x');
ROLLBACK;

-- stale_leases counts every DR001 above: 3 of outbox_begin, 3 of outbox_sent, 2 of
-- outbox_failed, 1 of outbox_enqueue, 3 of outbox_heartbeat, and the rolled-back one.
\set VERBOSITY default
SELECT stale_leases, outbox_journaled, outbox_deduped FROM durable.metrics();

-- A failure that makes the send dead ignores retry_in, whatever its value (a Retry-After
-- already past): the provider's verdict is recorded, where 22023 would leave the send
-- sending until its lease ran out, then unknown.  Not retryable, and on the last try.
SELECT token AS t_verdict FROM durable.outbox_begin('roe-verdict', 'roe-chat-v', '{}', 'bot-1') \gset
SELECT * FROM durable.outbox_failed('roe-verdict', :t_verdict, '403 Forbidden', retryable => false,
                                    retry_in => '-1 s');
SELECT token AS t_last FROM durable.outbox_begin('roe-last-try', 'roe-chat-l', '{}', 'bot-1') \gset
SET durable.outbox_retries = 0;
SELECT * FROM durable.outbox_failed('roe-last-try', :t_last, '503', retry_in => '400 days');
RESET durable.outbox_retries;
SELECT key, state, error FROM durable.outbox WHERE key IN ('roe-verdict', 'roe-last-try') ORDER BY key;

-- A retryable failure whose retry_in is already past (a Retry-After date, the clocks skewed)
-- is due at once, for the same reason (22023 until 2026-12-06, found by review).
SELECT token AS t_past FROM durable.outbox_begin('roe-past', 'roe-chat-p', '{}', 'bot-1') \gset
SELECT state, not_before <= clock_timestamp() AS due_at_once
  FROM durable.outbox_failed('roe-past', :t_past, '429 Too Many Requests', retry_in => '-2 s');

------------------------------------------------------------------------
-- What a DR001 says: the send or inbound record, its state, its current token
------------------------------------------------------------------------

-- The SQLSTATE and detail of a statement's error, the fixtures' ids and tokens written by name.
CREATE FUNCTION pg_temp.fence_detail(stmt text, names jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text; det text; t record;
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, det = PG_EXCEPTION_DETAIL;
    FOR t IN SELECT key, value FROM jsonb_each_text(names) LOOP
        det := regexp_replace(det, '\m' || t.value || '\M', ':' || t.key, 'g');
    END LOOP;
    RETURN st || ': ' || det;
END $$;
SELECT jsonb_build_object('t_sending', :t_sending, 't_stale', :t_stale, 't_sent', :t_sent,
                          'in_id', :in_id, 'in_old', :in_old, 'in_token', :in_token) AS names \gset
-- A stale confirmation, and a heartbeat of a send already sent, with a token not its own
SELECT pg_temp.fence_detail(format('SELECT durable.outbox_sent(%L, %s, %L)', 'roe-sending', :t_stale, 'tg-x'),
                            :'names');
SELECT pg_temp.fence_detail(format('SELECT durable.outbox_heartbeat(%L, %s)', 'roe-sent', :t_stale), :'names');
-- A heartbeat under the token whose lease ended (a timer firing after outbox_sent, or after
-- the lease ran out and the send became unknown): its own lease ended, not another's token
-- (until 2026-12-05 the detail named the caller's token as the send's holder)
SELECT pg_temp.fence_detail(format('SELECT durable.outbox_heartbeat(%L, %s)', 'roe-sent', :t_sent), :'names');
SELECT pg_temp.fence_detail(format('SELECT durable.outbox_heartbeat(%L, %s)', 'roe-unknown', :t_unknown),
                            :'names'::jsonb || jsonb_build_object('t_unknown', :t_unknown));
-- ... and, for the unknown send, that the sender can still settle it
CREATE FUNCTION pg_temp.hint_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    hint text;
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
    RETURN hint;
END $$;
SELECT pg_temp.hint_of(format('SELECT durable.outbox_heartbeat(%L, %s)', 'roe-unknown', :t_unknown));
-- A fenced-off handler: the inbound record's current token
SELECT pg_temp.fence_detail(format('SELECT * FROM durable.outbox_begin(%L, %L, %L, %L, inbound_id => %s, inbound_token => %s)',
                                   'roe-x', 'roe-chat-in', '{}', 'bot-1', :in_id, :in_old), :'names');
-- The fence comes before the key is looked up: a fenced-off handler is refused also on a
-- key already journaled and due, which would otherwise be answered `send`, and the send
-- is left as it was
SELECT created FROM durable.outbox_enqueue('roe-due', 'roe-chat-in', '{"text":"d"}');
SELECT pg_temp.fence_detail(format('SELECT * FROM durable.outbox_begin(%L, %L, %L, %L, inbound_id => %s, inbound_token => %s)',
                                   'roe-due', 'roe-chat-in', '{"text":"d"}', 'bot-1', :in_id, :in_old), :'names');
SELECT state, token, owner, attempts FROM durable.outbox WHERE key = 'roe-due';

-- A trigger on a journal's INSERT or UPDATE is refused by every call that writes the
-- journal (0A000), as by the direct writes: the calls that write with statements used to
-- fire it, and one that returned NULL made outbox_failed read a row that was not there
-- (a crash), outbox_begin report a send unknown that it had not changed, and
-- outbox_enqueue retry into a 40001 that a client's retry loop repeats for ever.  A
-- DELETE trigger, which the journals allow, that returns NULL: outbox_discard fails with
-- 55000 naming the journal once its retries are spent.
BEGIN;
CREATE FUNCTION pg_temp.skip_row() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NULL; END$$;
SELECT token AS skip_token FROM durable.outbox_begin('roe-skip-sending', 'roe-chat-skip', '{}', 'bot-1') \gset
SELECT token AS skip_expiring FROM durable.outbox_begin('roe-skip-expired', 'roe-chat-skip2', '{}', 'bot-1',
                                                        lease => '20ms') \gset
SELECT token AS skip_failing FROM durable.outbox_begin('roe-skip-failed', 'roe-chat-skip3', '{}', 'bot-1') \gset
SELECT state FROM durable.outbox_failed('roe-skip-failed', :skip_failing, 'boom', retry_in => '0s');
SELECT pg_sleep(0.03);
CREATE TRIGGER regress_skip BEFORE UPDATE ON durable.outbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.skip_row();
SAVEPOINT s;
SELECT * FROM durable.outbox_failed('roe-skip-sending', :skip_token, 'boom');
ROLLBACK TO s;
-- (a repeated key that is due would be leased again; one whose lease ran out, made unknown)
SELECT action FROM durable.outbox_begin('roe-skip-failed', 'roe-chat-skip3', '{}', 'bot-2');
ROLLBACK TO s;
SELECT action FROM durable.outbox_begin('roe-skip-expired', 'roe-chat-skip2', '{}', 'bot-2');
ROLLBACK TO s;
DROP TRIGGER regress_skip ON durable.outbox;
CREATE TRIGGER regress_skip BEFORE INSERT OR DELETE ON durable.outbox
    FOR EACH ROW EXECUTE FUNCTION pg_temp.skip_row();
SAVEPOINT s;
SELECT durable.outbox_discard('roe-skip-failed');
ROLLBACK TO s;
SELECT created FROM durable.outbox_enqueue('roe-skip-new', 'roe-chat-skip', '{}');
ROLLBACK TO s;
SELECT key, state FROM durable.outbox WHERE key LIKE 'roe-skip-%' ORDER BY key;
ROLLBACK;

-- A NULL written by hand where durable always writes a value: 55000 naming the column
BEGIN;
SELECT action FROM durable.outbox_begin('roe-null', 'roe-chat-null', '{}', 'bot-1');
ALTER TABLE durable.outbox ALTER COLUMN not_before DROP NOT NULL;
UPDATE durable.outbox SET not_before = NULL WHERE key = 'roe-null';
SELECT action FROM durable.outbox_begin('roe-null', 'roe-chat-null', '{}', 'bot-1');
ROLLBACK;

-- CLEANUP
DROP VIEW journal;
DROP TABLE journal_before;
DELETE FROM durable.outbox WHERE key LIKE 'roe-%' OR chat_id LIKE 'roe-chat-%';
DELETE FROM durable.inbox WHERE source = 'regress-outbox-errors';
