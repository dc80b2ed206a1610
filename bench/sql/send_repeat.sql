-- durable repeated send: outbox_begin of a key already sent (action
-- 'sent', answered from the journal; the provider is not called).
\set k random(1, :keys)
\set chat :k % 1000
SELECT action FROM durable.outbox_begin(idempotency_key => 'r-' || :k::text,
        chat_id => :chat::text, payload => '{"text":"a reply of the bot, about the size of a chat message"}',
        instance => 'bench-' || :client_id::text);
