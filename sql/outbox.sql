-- The outbox: outbox_begin, outbox_sent, outbox_failed, outbox_enqueue,
-- outbox_claim, outbox_heartbeat, outbox_retry and outbox_discard.
-- This file uses keys 'rob-%', chats 'rob-chat-%' and the inbox source
-- 'regress-outbox' only.  outbox_claim leases any due send of the database,
-- so the file leaves no pending or failed send behind.

-- SETUP
DELETE FROM durable.outbox WHERE key LIKE 'rob-%' OR chat_id LIKE 'rob-chat-%';
DELETE FROM durable.inbox WHERE source = 'regress-outbox';

-- Which outbox updates are HOT.  The claim walks outbox_waiting_idx, which
-- holds only pending and failed sends: a lease takes the send out of it, a
-- failure puts it back, so neither is HOT (the inbox's claim index holds
-- leased records too, and its lease transitions are); a heartbeat changes
-- only the lease and is.  Both journals leave a fifth of each page free
-- for the HOT updates (fillfactor 80).
SELECT relname, reloptions FROM pg_class
 WHERE oid IN ('durable.inbox'::regclass, 'durable.outbox'::regclass) ORDER BY relname;
BEGIN;
SELECT pg_stat_get_xact_tuples_updated('durable.outbox'::regclass) AS upd0,
       pg_stat_get_xact_tuples_hot_updated('durable.outbox'::regclass) AS hot0 \gset
SELECT created FROM durable.outbox_enqueue('rob-hot', 'rob-hot-chat', jsonb_build_object('n', 1));
SELECT token AS hot_t1 FROM durable.outbox_claim('bot-hot', 1) WHERE key = 'rob-hot' \gset
SELECT durable.outbox_heartbeat('rob-hot', :hot_t1) > now() AS extended;
SELECT state FROM durable.outbox_failed('rob-hot', :hot_t1, 'try again', retry_in => '0');
SELECT token AS hot_t2 FROM durable.outbox_claim('bot-hot', 1) WHERE key = 'rob-hot' \gset
-- claim, heartbeat, failure, claim: 4 updates, the heartbeat HOT
SELECT pg_stat_get_xact_tuples_updated('durable.outbox'::regclass) - :upd0 AS updated,
       pg_stat_get_xact_tuples_hot_updated('durable.outbox'::regclass) - :hot0 AS hot;
ROLLBACK;

-- A chat's backlog behind a send being sent costs outbox_claim one probe of
-- the chat, not one per send held back (as for the inbox): 30 chats, each
-- with a send being sent and 40 sends behind it, and one free send
BEGIN;
SELECT count(*) AS sending
  FROM generate_series(1, 30) c,
       durable.outbox_begin('rob-backlog-head-' || c, 'rob-backlog-' || c, '{}', 'bot-head') b
 WHERE b.state = 'sending';
SELECT count(*) AS held_back
  FROM generate_series(1, 40) g, generate_series(1, 30) c,
       durable.outbox_enqueue('rob-backlog-' || c || '-' || g, 'rob-backlog-' || c, '{}') e;
SELECT created FROM durable.outbox_enqueue('rob-backlog-free', 'rob-backlog-free', '{}');
SELECT pg_stat_get_xact_tuples_returned('durable.outbox_chat_unfinished_idx'::regclass) AS chat_entries \gset
SELECT key FROM durable.outbox_claim('bot-backlog', max => 5);
SELECT pg_stat_get_xact_tuples_returned('durable.outbox_chat_unfinished_idx'::regclass) - :chat_entries
       AS chat_index_entries_read;
ROLLBACK;

SELECT durable.metrics_reset();

-- TESTS

------------------------------------------------------------------------
-- outbox_begin and outbox_sent: the direct send path
------------------------------------------------------------------------

-- A new key is journaled in state sending and leased to the caller: action send, with a token.
SELECT action, key, token > 0 AS leased, provider_message_id, state
  FROM durable.outbox_begin('rob-1', 'rob-chat-1', '{"text":"hello"}', 'bot-1');

-- The journal row: one try, owned by bot-1, leased for durable.lease (60 s), due now.
SELECT state, attempts, owner,
       lease_until > clock_timestamp() + interval '50 s' AS leased_for_60s,
       not_before <= clock_timestamp() AS due, inbound_id, sent_at
  FROM durable.outbox WHERE key = 'rob-1';

-- The same key again (another replica) while that lease is live: busy, no token.
SELECT action, key, token, state
  FROM durable.outbox_begin('rob-1', 'rob-chat-1', '{"text":"hello"}', 'bot-2');

-- The provider answered: outbox_sent with the lease's token.
SELECT durable.outbox_sent('rob-1', (SELECT token FROM durable.outbox WHERE key = 'rob-1'), 'tg-1001');

-- The send is sent: provider id and sent_at stored, lease cleared.
SELECT state, provider_message_id, sent_at <= clock_timestamp() AS sent_now, lease_until
  FROM durable.outbox WHERE key = 'rob-1';

-- A client retrying outbox_sent with the same token: a no-op success.
SELECT durable.outbox_sent('rob-1', (SELECT token FROM durable.outbox WHERE key = 'rob-1'), 'tg-1001');

-- A repeat that names another provider id is a no-op too, but a WARNING says so: two ids
-- for one send mean the provider was called twice.  The first id stays.
SELECT durable.outbox_sent('rob-1', (SELECT token FROM durable.outbox WHERE key = 'rob-1'), 'tg-1002');
SELECT provider_message_id FROM durable.outbox WHERE key = 'rob-1';

-- A repeat of a sent key is answered from the journal: action sent with the provider's id
-- and no token (do not call the provider).
SELECT action, key, token, provider_message_id, state
  FROM durable.outbox_begin('rob-1', 'rob-chat-1', '{"text":"hello"}', 'bot-2');

-- The same key with another payload: a WARNING (counted in outbox_diverged), and the answer
-- still comes from the journal, with the journaled chat and payload.
SELECT action, provider_message_id, journaled_chat_id, journaled_payload
  FROM durable.outbox_begin('rob-1', 'rob-chat-1', '{"text":"HELLO"}', 'bot-1');

-- The journaled payload stands: never overwritten.
SELECT payload FROM durable.outbox WHERE key = 'rob-1';

-- A handler that words its reply anew (a language model) re-derives a key whose journaled
-- send is still due, for example enqueued by the run that died: it is leased to the caller
-- (send), who must send what the journal holds, returned in journaled_chat_id and
-- journaled_payload.  They are NULL when the call matches the journal.
SELECT created FROM durable.outbox_enqueue('rob-1b', 'rob-chat-1b', '{"text":"first wording"}');
SELECT action, state, journaled_chat_id, journaled_payload
  FROM durable.outbox_begin('rob-1b', 'rob-chat-1b', '{"text":"second wording"}', 'bot-1');
SELECT durable.outbox_sent('rob-1b', (SELECT token FROM durable.outbox WHERE key = 'rob-1b'), 'tg-1001b');
SELECT state, payload FROM durable.outbox WHERE key = 'rob-1b';
SELECT action, journaled_chat_id IS NULL AND journaled_payload IS NULL AS nothing_journaled_apart
  FROM durable.outbox_begin('rob-1b', 'rob-chat-1b', '{"text":"first wording"}', 'bot-1');

-- Neither idempotency_key nor inbound_id: the key is a random UUID.
SELECT action, state,
       key ~ '^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$' AS uuid_key
  FROM durable.outbox_begin(NULL, 'rob-chat-uuid', '{"text":"hi"}', 'bot-1');

-- Two such calls are two sends, even with one payload.
SELECT action FROM durable.outbox_begin(NULL, 'rob-chat-uuid', '{"text":"hi"}', 'bot-1');
SELECT count(DISTINCT key) AS sends FROM durable.outbox WHERE chat_id = 'rob-chat-uuid';

------------------------------------------------------------------------
-- An expired sending lease: unknown
------------------------------------------------------------------------

-- A send leased for 30 ms whose sender then goes silent.
SELECT action FROM durable.outbox_begin('rob-2', 'rob-chat-2', '{"text":"maybe"}', 'bot-1', lease => '30 ms');
SELECT pg_sleep(0.1);

-- Another replica begins the key: the provider may or may not have the message, so it is
-- not sent again: unknown (counted in outbox_ambiguous, NOTIFY durable_ambiguous).
SELECT action, token, provider_message_id, state
  FROM durable.outbox_begin('rob-2', 'rob-chat-2', '{"text":"maybe"}', 'bot-2');

-- unknown is never resent by itself: a repeat answers unknown again.
SELECT action, token, state
  FROM durable.outbox_begin('rob-2', 'rob-chat-2', '{"text":"maybe"}', 'bot-2');

-- The silent sender was only slow: its confirmation, with the token it holds, resolves the
-- ambiguity truthfully: sent.
SELECT durable.outbox_sent('rob-2', (SELECT token FROM durable.outbox WHERE key = 'rob-2'), 'tg-1002');

-- So does a refusal: the provider's answer told late, with the token that held the send,
-- makes an unknown send failed (due again after the backoff) or dead. Another token gets
-- DR001, as for a sending send.
SELECT action FROM durable.outbox_begin('rob-3', 'rob-chat-3', '{"text":"refused"}', 'bot-1', lease => '30 ms');
SELECT action FROM durable.outbox_begin('rob-4', 'rob-chat-3', '{"text":"blocked"}', 'bot-1', lease => '30 ms');
SELECT pg_sleep(0.1);
SELECT key, action FROM durable.outbox_begin('rob-3', 'rob-chat-3', '{"text":"refused"}', 'bot-2')
UNION ALL
SELECT key, action FROM durable.outbox_begin('rob-4', 'rob-chat-3', '{"text":"blocked"}', 'bot-2');
\set VERBOSITY sqlstate
SELECT * FROM durable.outbox_failed('rob-3', (SELECT token + 1 FROM durable.outbox WHERE key = 'rob-3'), 'HTTP 503');
\set VERBOSITY default
-- (A backoff of 10 s or more: the repeat below comes before it on a slow machine.)
SET durable.outbox_backoff_base = '10s';
SELECT state, not_before >= statement_timestamp() + interval '10 s' AS backing_off
  FROM durable.outbox_failed('rob-3', (SELECT token FROM durable.outbox WHERE key = 'rob-3'), 'HTTP 503');
RESET durable.outbox_backoff_base;
SELECT state, not_before IS NULL AS no_retry
  FROM durable.outbox_failed('rob-4', (SELECT token FROM durable.outbox WHERE key = 'rob-4'), 'HTTP 403', retryable => false);
-- Due later, a repeat of the key now waits for the retry instead of answering unknown.
SELECT action, state FROM durable.outbox_begin('rob-3', 'rob-chat-3', '{"text":"refused"}', 'bot-2');
SELECT key, state, error, lease_until IS NULL AS no_lease FROM durable.outbox
 WHERE key IN ('rob-3', 'rob-4') ORDER BY key;
SELECT state, provider_message_id FROM durable.outbox WHERE key = 'rob-2';

------------------------------------------------------------------------
-- A payload over durable.max_payload_bytes: bypass
------------------------------------------------------------------------
SET durable.max_payload_bytes = 1024;

-- Not journaled: action bypass with the key, no token, no state, and a WARNING naming the
-- key and the size (counted in outbox_bypassed).
SELECT action, key, token, provider_message_id, state
  FROM durable.outbox_begin('rob-big', 'rob-chat-3', jsonb_build_object('text', repeat('x', 2000)), 'bot-1');
SELECT count(*) AS journaled FROM durable.outbox WHERE key = 'rob-big';

-- An oversized repeat of a journaled key is still answered from the journal (and diverges).
SELECT action, provider_message_id
  FROM durable.outbox_begin('rob-1', 'rob-chat-1', jsonb_build_object('text', repeat('x', 2000)), 'bot-1');

-- A bypass is not deduplicated: with inbound_id it uses up its derived number ('<id>:1'),
-- so the reply after it keeps its key ('<id>:2'), and a message handled again bypasses
-- (the bot sends) the same oversized reply again, while the journaled one is answered.
SELECT id AS big_id, token AS big_token
  FROM durable.inbox_admit(source => 'regress-outbox', message_id => 'm-big',
                           chat_id => 'rob-chat-big', instance => 'bot-1') \gset
SET client_min_messages = error;
SELECT action, key = :'big_id' || ':1' AS first_key, state
  FROM durable.outbox_begin(NULL, 'rob-chat-big', jsonb_build_object('text', repeat('x', 2000)), 'bot-1',
                            inbound_id => :big_id, inbound_token => :big_token);
SELECT action, key = :'big_id' || ':2' AS second_key
  FROM durable.outbox_begin(NULL, 'rob-chat-big', '{"text":"small"}', 'bot-1',
                            inbound_id => :big_id, inbound_token => :big_token);
SELECT durable.outbox_sent(:'big_id' || ':2',
                           (SELECT token FROM durable.outbox WHERE key = :'big_id' || ':2'), 'tg-big-2');
SELECT durable.inbox_release(:big_id, :big_token);
SELECT token AS big_token2
  FROM durable.inbox_admit(source => 'regress-outbox', message_id => 'm-big',
                           chat_id => 'rob-chat-big', instance => 'bot-2') \gset
SELECT action, key = :'big_id' || ':1' AS first_key
  FROM durable.outbox_begin(NULL, 'rob-chat-big', jsonb_build_object('text', repeat('x', 2000)), 'bot-2',
                            inbound_id => :big_id, inbound_token => :big_token2);
RESET client_min_messages;
SELECT action, key = :'big_id' || ':2' AS second_key, provider_message_id
  FROM durable.outbox_begin(NULL, 'rob-chat-big', '{"text":"small"}', 'bot-2',
                            inbound_id => :big_id, inbound_token => :big_token2);
SELECT durable.inbox_complete(:big_id, :big_token2);

RESET durable.max_payload_bytes;

-- A payload whose numbers became too long to journal (more than 4 times the limit written
-- out; these take 5.2 MB): a repeat of its key is answered from the journal (since
-- 2026-12-06; before, 54000), a new key is refused (54000; it does not bypass the journal).
SET durable.max_payload_bytes = '2MB';
SELECT action, state FROM durable.outbox_begin('rob-digits', 'rob-chat-digits', (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 40)), 'bot-1');
SELECT durable.outbox_sent('rob-digits', (SELECT token FROM durable.outbox WHERE key = 'rob-digits'), 'tg-digits');
SET durable.max_payload_bytes = '1MB';
SELECT action, state, provider_message_id FROM durable.outbox_begin('rob-digits', 'rob-chat-digits', (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 40)), 'bot-1');
SELECT action FROM durable.outbox_begin('rob-digits-2', 'rob-chat-digits', (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 40)), 'bot-1');
RESET durable.max_payload_bytes;

------------------------------------------------------------------------
-- Keys derived from an inbound record: '<inbound_id>:<n>'
------------------------------------------------------------------------

-- A message admitted and leased to bot-1 (its id and token are kept in psql variables).
SELECT id AS in_id, token AS in_token
  FROM durable.inbox_admit(source => 'regress-outbox', message_id => 'm-1',
                           chat_id => 'rob-chat-4', instance => 'bot-1') \gset

-- The handler's first and second sends get the keys '<id>:1' and '<id>:2'.
SELECT action, key = :'in_id' || ':1' AS first_key, state
  FROM durable.outbox_begin(NULL, 'rob-chat-4', '{"text":"one"}', 'bot-1',
                            inbound_id => :in_id, inbound_token => :in_token);
SELECT action, key = :'in_id' || ':2' AS second_key, state
  FROM durable.outbox_begin(NULL, 'rob-chat-4', '{"text":"two"}', 'bot-1',
                            inbound_id => :in_id, inbound_token => :in_token);

-- Both are journaled with the inbound id.
SELECT key = :'in_id' || ':' || row_number() OVER (ORDER BY id) AS derived, inbound_id = :in_id AS linked
  FROM durable.outbox WHERE chat_id = 'rob-chat-4' ORDER BY id;

-- The first send went out; then the handler stops before the second was confirmed.
SELECT durable.outbox_sent(:'in_id' || ':1',
                           (SELECT token FROM durable.outbox WHERE key = :'in_id' || ':1'), 'tg-1004');

-- The message is leased again (given back, then redelivered: a new token).
SELECT durable.inbox_release(:in_id, :in_token);
SELECT id AS in_id2, token AS in_token2
  FROM durable.inbox_admit(source => 'regress-outbox', message_id => 'm-1',
                           chat_id => 'rob-chat-4', instance => 'bot-2') \gset
SELECT :in_id2 = :in_id AS same_record, :in_token2 > :in_token AS new_token;

-- Reprocessing re-derives the same keys: the first is answered from the journal (sent,
-- with the provider's id), the second is still leased to the first run (busy).
SELECT action, key = :'in_id' || ':1' AS first_key, provider_message_id
  FROM durable.outbox_begin(NULL, 'rob-chat-4', '{"text":"one"}', 'bot-2',
                            inbound_id => :in_id, inbound_token => :in_token2);
SELECT action, key = :'in_id' || ':2' AS second_key, token
  FROM durable.outbox_begin(NULL, 'rob-chat-4', '{"text":"two"}', 'bot-2',
                            inbound_id => :in_id, inbound_token => :in_token2);

-- A key given with inbound_id is checked against the lease and stored with it.
SELECT action, key FROM durable.outbox_begin('rob-5', 'rob-chat-4', '{"text":"three"}', 'bot-2',
                                             inbound_id => :in_id, inbound_token => :in_token2);
SELECT inbound_id = :in_id AS linked FROM durable.outbox WHERE key = 'rob-5';

-- Still two journaled sends derived from the message, plus rob-5.
SELECT count(*) AS sends FROM durable.outbox WHERE inbound_id = :in_id;

-- A key of the caller's own can have the derived shape. Here '<id>:1' and '<id>:2' of a
-- message not handled yet are taken by sends to another chat, one without an inbound
-- record, one linked to another record. The handler's keyless sends that derive them are
-- refused (23505), by outbox_begin and outbox_enqueue alike: answered from those sends, its
-- replies would never go out (libraries before 2026-12-03 did so, with at most the WARNING
-- of another payload), and passing over them to the next n would derive other keys once
-- they are gone, so a message handled again would send its replies twice.
SELECT id AS in_id3, token AS in_token3
  FROM durable.inbox_admit(source => 'regress-outbox', message_id => 'm-3',
                           chat_id => 'rob-chat-20', instance => 'bot-1') \gset
SELECT action, state FROM durable.outbox_begin(:'in_id3' || ':1', 'rob-chat-21', '{"own":1}', 'bot-9');
SELECT durable.outbox_sent(:'in_id3' || ':1',
                           (SELECT token FROM durable.outbox WHERE key = :'in_id3' || ':1'), 'tg-own-1');
SELECT created, state
  FROM durable.outbox_enqueue(:'in_id3' || ':2', 'rob-chat-21', '{"own":2}',
                              not_before => now() + interval '1 day', inbound_id => :in_id);
\set VERBOSITY sqlstate
SELECT action FROM durable.outbox_begin(NULL, 'rob-chat-20', '{"text":"reply 1"}', 'bot-1',
                                        inbound_id => :in_id3, inbound_token => :in_token3);
\set VERBOSITY default
-- What the error says (the record's id replaced, as ids vary):
DO $$
DECLARE
    rec record;
    msg text;
    detail text;
    hint text;
BEGIN
    SELECT id, token INTO rec FROM durable.inbox WHERE message_id = 'm-3';
    PERFORM durable.outbox_begin(NULL, 'rob-chat-20', '{"text":"reply 1"}', 'bot-1',
                                 inbound_id => rec.id, inbound_token => rec.token);
EXCEPTION WHEN unique_violation THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RAISE NOTICE E'%\nDETAIL: %\nHINT: %', replace(msg, rec.id::text, '<id>'), detail, hint;
END $$;
-- outbox_enqueue is refused alike. It derives '<id>:1' as well: a refused call derives
-- nothing, and the record's count of sends stays 0.
\set VERBOSITY sqlstate
SELECT created FROM durable.outbox_enqueue(NULL, 'rob-chat-20', '{"text":"reply 2"}',
                                           inbound_id => :in_id3, inbound_token => :in_token3);
\set VERBOSITY default
SELECT sends FROM durable.inbox WHERE id = :in_id3;

-- Once the keys are free, the same calls go through under the contract's keys.
SELECT durable.outbox_discard(:'in_id3' || ':1') AND durable.outbox_discard(:'in_id3' || ':2') AS freed;
SELECT action, key = :'in_id3' || ':1' AS first_key
  FROM durable.outbox_begin(NULL, 'rob-chat-20', '{"text":"reply 1"}', 'bot-1',
                            inbound_id => :in_id3, inbound_token => :in_token3);
SELECT created, key = :'in_id3' || ':2' AS second_key
  FROM durable.outbox_enqueue(NULL, 'rob-chat-20', '{"text":"reply 2"}',
                              not_before => now() + interval '1 day',
                              inbound_id => :in_id3, inbound_token => :in_token3);

------------------------------------------------------------------------
-- outbox_failed: backoff, retry_in and dead
------------------------------------------------------------------------

-- rob-6's provider call fails with a retryable error and retry_in 0: failed, due now.
SELECT action FROM durable.outbox_begin('rob-6', 'rob-chat-6', '{"text":"x"}', 'bot-1');
SELECT state, not_before <= clock_timestamp() AS due_now
  FROM durable.outbox_failed('rob-6', (SELECT token FROM durable.outbox WHERE key = 'rob-6'),
                             '429 Too Many Requests', retry_in => '0');

-- The failure is journaled: error kept, lease cleared.
SELECT state, attempts, error, lease_until FROM durable.outbox WHERE key = 'rob-6';

-- A due failed send is leased again by a repeat of its key: send, second try (counted in
-- outbox_retried).
SELECT action, token > 0 AS leased, state
  FROM durable.outbox_begin('rob-6', 'rob-chat-6', '{"text":"x"}', 'bot-1');
SELECT attempts FROM durable.outbox WHERE key = 'rob-6';

-- Second failure without retry_in: the backoff doubles from durable.outbox_backoff_base (1 s):
-- 2 s plus up to 25 % jitter.  (From the call's clock, which is read after the statement
-- began and before the check's clock_timestamp().)
SELECT state, not_before >= statement_timestamp() + interval '2 s'
              AND not_before <= clock_timestamp() + interval '2.5 s' AS backoff_2s
  FROM durable.outbox_failed('rob-6', (SELECT token FROM durable.outbox WHERE key = 'rob-6'),
                             '502 Bad Gateway');

-- Not due yet: a repeat of the key waits.
SELECT action, token, state
  FROM durable.outbox_begin('rob-6', 'rob-chat-6', '{"text":"x"}', 'bot-1');

-- First failure of rob-7: 1 s plus up to 25 % jitter.
SELECT action FROM durable.outbox_begin('rob-7', 'rob-chat-7', '{"text":"x"}', 'bot-1');
SELECT state, not_before >= statement_timestamp() + interval '1 s'
              AND not_before <= clock_timestamp() + interval '1.25 s' AS backoff_1s
  FROM durable.outbox_failed('rob-7', (SELECT token FROM durable.outbox WHERE key = 'rob-7'),
                             '502 Bad Gateway');

-- durable.outbox_backoff_cap bounds the delay: rob-8's second failure would wait 2 s, the
-- cap makes it at most 1.5 s (drawn up to a quarter below the cap).
SET durable.outbox_backoff_cap = '1500ms';
SELECT action FROM durable.outbox_begin('rob-8', 'rob-chat-8', '{"text":"x"}', 'bot-1');
SELECT state FROM durable.outbox_failed('rob-8', (SELECT token FROM durable.outbox WHERE key = 'rob-8'),
                                        'timeout', retry_in => '0');
SELECT action FROM durable.outbox_begin('rob-8', 'rob-chat-8', '{"text":"x"}', 'bot-1');
SELECT state, not_before >= statement_timestamp() + interval '1.125 s'
              AND not_before <= clock_timestamp() + interval '1.5 s' AS capped
  FROM durable.outbox_failed('rob-8', (SELECT token FROM durable.outbox WHERE key = 'rob-8'),
                             'timeout');
RESET durable.outbox_backoff_cap;

-- A delay that would pass the cap is drawn again, up to a quarter below it, so that sends
-- failing together there do not all come due at once.  With base 1 hour and cap 70
-- minutes, a first failure would wait 60 to 75 minutes: twelve sends come due between 52.5
-- and 70 minutes, none at the cap itself (a third of them would be there otherwise).
SET durable.outbox_backoff_base = '1h';
SET durable.outbox_backoff_cap = '70min';
SELECT count(*) AS failed, bool_and(d > interval '52.5 min' AND d <= interval '70 min') AS within,
       count(*) FILTER (WHERE d > interval '70 min' - interval '10 ms') AS at_the_cap
  FROM (SELECT f.not_before - clock_timestamp() AS d
          FROM generate_series(1, 12) g,
               LATERAL durable.outbox_begin('rob-j' || g, 'rob-chat-j' || g, '{}', 'bot-1') b,
               LATERAL durable.outbox_failed(b.key, b.token, 'timeout') f) s;
RESET durable.outbox_backoff_base;
RESET durable.outbox_backoff_cap;
SELECT count(*) AS discarded FROM durable.outbox WHERE key LIKE 'rob-j%' AND durable.outbox_discard(key);

-- With durable.outbox_retries = 1 a send has two tries: the second failure is dead, with no
-- retry time (counted in outbox_dead, NOTIFY durable_dead).
SET durable.outbox_retries = 1;
SELECT action FROM durable.outbox_begin('rob-9', 'rob-chat-9', '{"text":"x"}', 'bot-1');
SELECT state, not_before IS NOT NULL AS retry_scheduled
  FROM durable.outbox_failed('rob-9', (SELECT token FROM durable.outbox WHERE key = 'rob-9'),
                             'timeout', retry_in => '0');
SELECT action FROM durable.outbox_begin('rob-9', 'rob-chat-9', '{"text":"x"}', 'bot-1');
SELECT state, not_before
  FROM durable.outbox_failed('rob-9', (SELECT token FROM durable.outbox WHERE key = 'rob-9'),
                             'timeout again');
RESET durable.outbox_retries;
SELECT state, attempts, error, lease_until FROM durable.outbox WHERE key = 'rob-9';

-- The NOTIFY payload carries the key whole and clips the error where its
-- JSON-escaped form fits 1,000 bytes (escaping turns a control character into
-- six; test/specs/notify.spec shows a payload): a send whose key (512 bytes,
-- the longest) and error are control characters still goes dead, its payload
-- within NOTIFY's 8,000 bytes, and keeps both whole in the journal.
SELECT action FROM durable.outbox_begin(repeat(chr(1), 512), 'rob-chat-10', '{}', 'bot-1');
SELECT state FROM durable.outbox_failed(repeat(chr(1), 512),
    (SELECT token FROM durable.outbox WHERE key = repeat(chr(1), 512)), repeat(chr(1), 5000), retryable => false);
SELECT state, length(key) AS key_chars, length(error) AS error_chars
  FROM durable.outbox WHERE key = repeat(chr(1), 512);

-- An error text over durable.max_error_bytes is clipped between characters,
-- with a marker and a WARNING (01004), not refused: the failure is still
-- recorded. Here 2,000 two-byte characters against a 1kB limit.
SET durable.max_error_bytes = 1024;
SELECT action FROM durable.outbox_begin('rob-long', 'rob-chat-long', '{}', 'bot-1');
SELECT state FROM durable.outbox_failed('rob-long', (SELECT token FROM durable.outbox WHERE key = 'rob-long'),
                                        repeat('é', 2000));
RESET durable.max_error_bytes;
SELECT state, octet_length(error) AS error_bytes, right(error, 30) AS error_ends,
       left(error, 3) = 'ééé' AS starts_as_sent
  FROM durable.outbox WHERE key = 'rob-long';
SELECT durable.outbox_discard('rob-long');

-- A dead send is answered as dead, without a token.
SELECT action, token, state
  FROM durable.outbox_begin('rob-9', 'rob-chat-9', '{"text":"x"}', 'bot-1');

-- A failure that is not retryable is dead at once, whatever retries remain; a retry_in
-- given with it is ignored (the verdict is recorded, not refused).
SELECT action FROM durable.outbox_begin('rob-10', 'rob-chat-10', '{"text":"x"}', 'bot-1');
SELECT state, not_before
  FROM durable.outbox_failed('rob-10', (SELECT token FROM durable.outbox WHERE key = 'rob-10'),
                             '403 Forbidden: bot was blocked by the user', retryable => false,
                             retry_in => '1 minute');
SELECT state, attempts, error FROM durable.outbox WHERE key = 'rob-10';

------------------------------------------------------------------------
-- outbox_enqueue: sends for a sender loop
------------------------------------------------------------------------

-- A new key: a pending send due now (created, counted in outbox_journaled and outbox_deferred).
SELECT key, created, state FROM durable.outbox_enqueue('rob-e1', 'rob-chat-e', '{"text":"later"}');
SELECT state, attempts, token, owner, not_before <= clock_timestamp() AS due
  FROM durable.outbox WHERE key = 'rob-e1';

-- The same key again does nothing: created false (counted in outbox_deduped).
SELECT key, created, state FROM durable.outbox_enqueue('rob-e1', 'rob-chat-e', '{"text":"later"}');

-- Again with another payload: nothing changes either, and a WARNING (outbox_diverged).
SELECT key, created, state FROM durable.outbox_enqueue('rob-e1', 'rob-chat-e', '{"text":"other"}');
SELECT payload FROM durable.outbox WHERE key = 'rob-e1';

-- Nor on a key in any other state: a sent, a dead and a failed send keep their state,
-- tokens, attempts and times (counted in outbox_deduped; the same payloads, so no WARNING).
CREATE TEMP TABLE rob_before AS SELECT * FROM durable.outbox WHERE key IN ('rob-1', 'rob-9', 'rob-6');
SELECT e.key, e.created, e.state
  FROM durable.outbox o,
       durable.outbox_enqueue(o.key, o.chat_id, o.payload, now() + interval '1 hour') e
 WHERE o.key IN ('rob-1', 'rob-9', 'rob-6') ORDER BY e.key;
SELECT count(*) AS unchanged
  FROM rob_before b JOIN durable.outbox o ON o.key = b.key AND o::text = b::text;
DROP TABLE rob_before;

-- Deferred: due in an hour.
SELECT key, created, state
  FROM durable.outbox_enqueue('rob-e2', 'rob-chat-e2', '{"text":"reminder"}', now() + interval '1 hour');
SELECT not_before > clock_timestamp() + interval '59 min' AS deferred FROM durable.outbox WHERE key = 'rob-e2';

-- outbox_begin of a deferred key that is not due: wait.
SELECT action, token, state
  FROM durable.outbox_begin('rob-e2', 'rob-chat-e2', '{"text":"reminder"}', 'bot-1');

-- outbox_begin of a due pending key leases it to the caller: send, first try.
SELECT action, token > 0 AS leased, state
  FROM durable.outbox_begin('rob-e1', 'rob-chat-e', '{"text":"later"}', 'bot-1');
SELECT attempts, owner FROM durable.outbox WHERE key = 'rob-e1';

-- Without a key, an enqueue from a leased inbound record derives the next key of its
-- handler run ('<id>:3' after the two derived by outbox_begin above) and stores the link.
SELECT key = :'in_id' || ':3' AS derived_key, created, state
  FROM durable.outbox_enqueue(NULL, 'rob-chat-4', '{"text":"four"}', inbound_id => :in_id);
SELECT inbound_id = :in_id AS linked FROM durable.outbox WHERE key = :'in_id' || ':3';

-- With inbound_token an enqueue is fenced as outbox_begin is: bot-1, which lost the
-- record (:in_token), is refused (DR001), whether it derives its key or names one, and
-- journals nothing.
\set VERBOSITY sqlstate
SELECT key FROM durable.outbox_enqueue(NULL, 'rob-chat-4', '{"text":"stale"}',
                                       inbound_id => :in_id, inbound_token => :in_token);
SELECT key FROM durable.outbox_enqueue('rob-e-stale', 'rob-chat-4', '{"text":"stale"}',
                                       inbound_id => :in_id, inbound_token => :in_token);
\set VERBOSITY default
SELECT count(*) AS stale_journaled FROM durable.outbox WHERE payload ->> 'text' = 'stale';

-- bot-2, which holds the record, derives the next key of its run, '<id>:4', and a key it
-- names is stored with the link.
SELECT key = :'in_id' || ':4' AS derived_key, created
  FROM durable.outbox_enqueue(NULL, 'rob-chat-4', '{"text":"four-b"}',
                              inbound_id => :in_id, inbound_token => :in_token2);
SELECT key, created
  FROM durable.outbox_enqueue('rob-e3', 'rob-chat-4', '{"text":"five"}',
                              inbound_id => :in_id, inbound_token => :in_token2);
SELECT inbound_id = :in_id AS linked FROM durable.outbox WHERE key = 'rob-e3';

-- Without inbound_token (outbox_enqueue's form before 0.8) the enqueue cannot tell bot-1
-- from bot-2: bot-1's enqueue takes bot-2's next key.  Made in the transaction that
-- completes the record, it goes back with the stale completion (DR001), and '<id>:5' is
-- still bot-2's.
BEGIN;
SELECT key = :'in_id' || ':5' AS takes_the_holders_key, created
  FROM durable.outbox_enqueue(NULL, 'rob-chat-4', '{"text":"stale"}', inbound_id => :in_id);
\set VERBOSITY sqlstate
SELECT durable.inbox_complete(:in_id, :in_token);
\set VERBOSITY default
ROLLBACK;
SELECT key = :'in_id' || ':5' AS derived_key, created
  FROM durable.outbox_enqueue(NULL, 'rob-chat-4', '{"text":"five-b"}',
                              inbound_id => :in_id, inbound_token => :in_token2);
SELECT payload ->> 'text' AS text FROM durable.outbox WHERE key = :'in_id' || ':5';
SELECT durable.outbox_discard(k) AS discarded
  FROM unnest(ARRAY[:'in_id' || ':4', 'rob-e3', :'in_id' || ':5']) AS k;

-- Without key and inbound_id: a random UUID key.
SELECT key ~ '^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$' AS uuid_key, created
  FROM durable.outbox_enqueue(NULL, 'rob-chat-uuid', '{"text":"hi"}');

------------------------------------------------------------------------
-- outbox_discard
------------------------------------------------------------------------

-- A send is forgotten whatever its state (here pending, deferred, sent, dead): true.
SELECT durable.outbox_discard(:'in_id' || ':3') AS pending,
       durable.outbox_discard('rob-e2') AS deferred,
       durable.outbox_discard('rob-1') AS sent,
       durable.outbox_discard('rob-9') AS dead;
SELECT count(*) AS left FROM durable.outbox WHERE key IN (:'in_id' || ':3', 'rob-e2', 'rob-1', 'rob-9');

-- No such key (any more): false.
SELECT durable.outbox_discard('rob-1') AS again, durable.outbox_discard('rob-never') AS never;

-- A send whose lease expired may be discarded (its late sender then gets DR002).
SELECT action FROM durable.outbox_begin('rob-d1', 'rob-chat-d', '{"text":"x"}', 'bot-1', lease => '30 ms');
SELECT pg_sleep(0.1);
SELECT durable.outbox_discard('rob-d1') AS expired_lease;

-- Clear the other pending and failed sends of this file before the claims below.
SELECT count(*) FILTER (WHERE discarded) AS discarded
  FROM (SELECT durable.outbox_discard(key) AS discarded FROM durable.outbox
         WHERE (key LIKE 'rob-%' OR chat_id LIKE 'rob-chat-%')
           AND state IN ('pending', 'failed')) d;

------------------------------------------------------------------------
-- outbox_claim: a sender loop
------------------------------------------------------------------------

-- Four sends: two of chat A, one of chat B, one of chat C due in an hour.
SELECT key, created FROM durable.outbox_enqueue('rob-q1', 'rob-chat-A', '{"n":1}');
SELECT key, created FROM durable.outbox_enqueue('rob-q2', 'rob-chat-A', '{"n":2}');
SELECT key, created FROM durable.outbox_enqueue('rob-q3', 'rob-chat-B', '{"n":3}');
SELECT key, created FROM durable.outbox_enqueue('rob-q4', 'rob-chat-C', '{"n":4}', now() + interval '1 hour');
-- And one of chat C due now, behind q4: a pending send not yet due keeps its chat's later
-- sends back as a sending one does.
SELECT key, created FROM durable.outbox_enqueue('rob-q4b', 'rob-chat-C', '{"n":4.5}');

-- Oldest first, one per chat, due ones only: q1 and q3 (q2 waits behind q1, q4 is not due,
-- q4b waits behind q4).
SELECT key, token > 0 AS leased, chat_id, payload, attempts
  FROM durable.outbox_claim('sender-1');

-- They are sending, leased to sender-1.
SELECT key, state, owner, lease_until > clock_timestamp() AS live
  FROM durable.outbox WHERE key IN ('rob-q1', 'rob-q3') ORDER BY key;

-- Nothing else is claimable: q2 stays behind q1 while q1 is sending (per-chat order).
SELECT key FROM durable.outbox_claim('sender-2');

-- q1 sent: q2 is next.
SELECT durable.outbox_sent('rob-q1', (SELECT token FROM durable.outbox WHERE key = 'rob-q1'), 'tg-q1');
SELECT key, attempts FROM durable.outbox_claim('sender-2');

-- q2 fails, due again now: claimed again with its second try (counted in outbox_retried).
SELECT state FROM durable.outbox_failed('rob-q2', (SELECT token FROM durable.outbox WHERE key = 'rob-q2'),
                                        'timeout', retry_in => '0');
SELECT key, attempts FROM durable.outbox_claim('sender-1');

-- A failed send waiting for its retry also keeps its chat's later sends back.
SELECT state FROM durable.outbox_failed('rob-q2', (SELECT token FROM durable.outbox WHERE key = 'rob-q2'),
                                        'timeout', retry_in => '1 hour');
SELECT key, created FROM durable.outbox_enqueue('rob-q5', 'rob-chat-A', '{"n":5}');
SELECT key FROM durable.outbox_claim('sender-1');

-- A dead send no longer blocks its chat: q2 dead, q5 goes.
SELECT durable.outbox_retry('rob-q2');
SELECT key FROM durable.outbox_claim('sender-1');
SELECT state FROM durable.outbox_failed('rob-q2', (SELECT token FROM durable.outbox WHERE key = 'rob-q2'),
                                        'chat not found', retryable => false);
SELECT key FROM durable.outbox_claim('sender-1');

-- Nor does an unknown one: q3 (chat B) expires and becomes unknown, q6 of chat B goes.
SELECT key, created FROM durable.outbox_enqueue('rob-q6', 'rob-chat-B', '{"n":6}');
SELECT key FROM durable.outbox_claim('sender-1');
SELECT durable.outbox_heartbeat('rob-q3', (SELECT token FROM durable.outbox WHERE key = 'rob-q3'), '30 ms')
         < clock_timestamp() + interval '1 s' AS shortened;
SELECT pg_sleep(0.1);
SELECT action, state FROM durable.outbox_begin('rob-q3', 'rob-chat-B', '{"n":3}', 'bot-1');
SELECT key FROM durable.outbox_claim('sender-1');

-- max bounds how many sends one call leases.
SELECT key, created FROM durable.outbox_enqueue('rob-q7', 'rob-chat-E', '{"n":7}');
SELECT key, created FROM durable.outbox_enqueue('rob-q8', 'rob-chat-F', '{"n":8}');
SELECT key FROM durable.outbox_claim('sender-1', max => 1);
SELECT key FROM durable.outbox_claim('sender-1', max => 1);

-- wait: with nothing claimable, the call waits in the server until wait passes, then
-- returns no row.
SELECT clock_timestamp() AS t0 \gset
SELECT key FROM durable.outbox_claim('sender-1', wait => '200 ms');
SELECT clock_timestamp() - :'t0'::timestamptz >= interval '200 ms' AS waited;

-- A send deferred by 300 ms wakes a claim waiting up to 5 s when it comes due.
SELECT clock_timestamp() + interval '300 ms' AS due \gset
SELECT key, created
  FROM durable.outbox_enqueue('rob-q9', 'rob-chat-G', '{"n":9}', :'due');
SELECT key, attempts FROM durable.outbox_claim('sender-1', wait => '20 s');
SELECT clock_timestamp() >= :'due' AND clock_timestamp() < :'due'::timestamptz + interval '10 s' AS woke_when_due;

-- With work claimable, a waiting claim returns at once.
SELECT key, created FROM durable.outbox_enqueue('rob-q10', 'rob-chat-H', '{"n":10}');
SELECT clock_timestamp() AS t0 \gset
SELECT key FROM durable.outbox_claim('sender-1', wait => '20 s');
SELECT clock_timestamp() - :'t0'::timestamptz < interval '10 s' AS at_once;

------------------------------------------------------------------------
-- outbox_heartbeat
------------------------------------------------------------------------

-- A 30 ms lease extended to an hour: the new lease_until is returned.
SELECT action FROM durable.outbox_begin('rob-h1', 'rob-chat-h', '{"text":"x"}', 'bot-1', lease => '30 ms');
SELECT durable.outbox_heartbeat('rob-h1', (SELECT token FROM durable.outbox WHERE key = 'rob-h1'), '1 hour')
         > clock_timestamp() + interval '59 min' AS extended;
SELECT pg_sleep(0.1);

-- Still held: a repeat of the key is busy.
SELECT action FROM durable.outbox_begin('rob-h1', 'rob-chat-h', '{"text":"x"}', 'bot-2');

-- Without lease, the heartbeat extends by durable.lease (60 s).
SELECT durable.outbox_heartbeat('rob-h1', (SELECT token FROM durable.outbox WHERE key = 'rob-h1'))
         BETWEEN clock_timestamp() + interval '50 s' AND clock_timestamp() + interval '61 s' AS default_lease;

-- A lease that expired but was not taken over or swept is still held: the heartbeat succeeds.
SELECT action FROM durable.outbox_begin('rob-h2', 'rob-chat-h2', '{"text":"x"}', 'bot-1', lease => '30 ms');
SELECT pg_sleep(0.1);
SELECT durable.outbox_heartbeat('rob-h2', (SELECT token FROM durable.outbox WHERE key = 'rob-h2'))
         > clock_timestamp() AS held;
SELECT action FROM durable.outbox_begin('rob-h2', 'rob-chat-h2', '{"text":"x"}', 'bot-2');

------------------------------------------------------------------------
-- outbox_retry
------------------------------------------------------------------------

-- A dead send is due again now, attempts reset (counted in outbox_retried).
SELECT durable.outbox_retry('rob-10');
SELECT state, attempts, not_before <= clock_timestamp() AS due FROM durable.outbox WHERE key = 'rob-10';
SELECT action, state FROM durable.outbox_begin('rob-10', 'rob-chat-10', '{"text":"x"}', 'bot-1');
SELECT attempts FROM durable.outbox WHERE key = 'rob-10';

-- A failed send waiting for its backoff is due at once.
SELECT action FROM durable.outbox_begin('rob-r1', 'rob-chat-r', '{"text":"x"}', 'bot-1');
SELECT state, not_before > clock_timestamp() AS backing_off
  FROM durable.outbox_failed('rob-r1', (SELECT token FROM durable.outbox WHERE key = 'rob-r1'), 'timeout');
SELECT durable.outbox_retry('rob-r1');
SELECT state, attempts, not_before <= clock_timestamp() AS due FROM durable.outbox WHERE key = 'rob-r1';

-- An unknown send, once the operator decided it did not reach the chat.
SELECT durable.outbox_retry('rob-q3');
SELECT state, attempts FROM durable.outbox WHERE key = 'rob-q3';

------------------------------------------------------------------------
-- The wall clock
------------------------------------------------------------------------

-- Leases are timed by the wall clock, not by the transaction's start (now()): in a
-- transaction that began before a 200 ms lease ran out, a repeat of the key made after it
-- ran out finds the send expired and flags it unknown.
SELECT action FROM durable.outbox_begin('rob-w1', 'rob-chat-w', '{}', 'bot-1', lease => '200 ms');
BEGIN;
SELECT pg_sleep(0.3);
SELECT action, state FROM durable.outbox_begin('rob-w1', 'rob-chat-w', '{}', 'bot-2');
COMMIT;

------------------------------------------------------------------------
-- Index entries
------------------------------------------------------------------------

-- The direct writes put each version only in the indexes its state belongs
-- in (a partial index's predicate decides): amcheck finds every record
-- above, in every state, in each index of both journals that should hold it.
CREATE EXTENSION amcheck;
SELECT c.relname AS index, true AS checked
  FROM pg_catalog.pg_index i
  JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid,
       LATERAL bt_index_check(i.indexrelid, true)
 WHERE i.indrelid IN ('durable.inbox'::regclass, 'durable.outbox'::regclass)
 ORDER BY 1;
DROP EXTENSION amcheck;

------------------------------------------------------------------------
-- Counters
------------------------------------------------------------------------

-- Everything above, counted in shared memory: 56 sends journaled (35 by outbox_begin, 21
-- enqueued, so 21 deferred), 30 repeated keys, 8 retries (3 failed sends leased again by
-- outbox_begin, 1 by outbox_claim, 4 outbox_retry calls), 5 dead, 5 unknown, 1 bypass,
-- 4 divergences, and 4 stale tokens (the stale completion, the two fenced enqueues and the
-- refusal of an unknown send under another token).
SELECT outbox_journaled, outbox_deduped, outbox_retried, outbox_deferred, outbox_dead,
       outbox_ambiguous, outbox_bypassed, stale_leases, outbox_diverged
  FROM durable.metrics();

-- CLEANUP
DELETE FROM durable.outbox WHERE key LIKE 'rob-%' OR chat_id LIKE 'rob-chat-%' OR inbound_id IN (:in_id, :in_id3);
DELETE FROM durable.inbox WHERE source = 'regress-outbox';
