-- durable send path: outbox_begin (journaled and leased to us), the
-- provider call, outbox_sent.  2 commits.
\set chat random(1, 100000)
\set n :n + 1
SELECT key AS skey, token AS stok
  FROM durable.outbox_begin(idempotency_key => :run::text || '-' || :client_id::text || '-' || :n::text,
        chat_id => :chat::text, payload => '{"text":"a reply of the bot, about the size of a chat message"}',
        instance => 'bench-' || :client_id::text) \gset
SELECT durable.outbox_sent(:skey::text, :stok::bigint, 'p-' || :n::text);
