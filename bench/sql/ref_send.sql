-- reference, send-shaped: the send path's two statements in plain SQL on
-- bench.send_shaped, a copy of durable.outbox (same columns, indexes and
-- fillfactor): INSERT the send leased to us, UPDATE it to sent by its key.
-- No function call, dedupe answer, fencing check or per-chat probe.  2 commits.
\set chat random(1, 100000)
\set n :n + 1
INSERT INTO bench.send_shaped (key, chat_id, payload, state, attempts, token, owner, lease_until, not_before, created_at)
     VALUES (:run::text || '-' || :client_id::text || '-' || :n::text, :chat::text,
             '{"text":"a reply of the bot, about the size of a chat message"}', 'sending', 1,
             nextval('durable.token_seq'), 'bench-' || :client_id::text, now() + interval '60 s', now(), now());
UPDATE bench.send_shaped
   SET state = 'sent', sent_at = now(), provider_message_id = 'p-' || :n::text, lease_until = NULL
 WHERE key = :run::text || '-' || :client_id::text || '-' || :n::text;
