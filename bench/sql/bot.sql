-- durable bot path: one message's life as a bot lives it.  inbox_admit with
-- an instance (journaled and leased at once), the handler, inbox_complete.
-- 2 commits.
\set chat random(1, 100000)
\set n :n + 1
SELECT id AS mid, token AS mtok
  FROM durable.inbox_admit(source => 'bench',
        message_id => :run::text || '-' || :client_id::text || '-' || :n::text,
        chat_id => :chat::text, payload => '{"text":"hello from the benchmark, about the size of a chat message"}',
        instance => 'bench-' || :client_id::text) \gset
SELECT durable.inbox_complete(:mid::bigint, :mtok::bigint);
