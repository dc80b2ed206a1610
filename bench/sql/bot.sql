-- durable bot path: one message's life as a bot lives it.  inbox_admit with
-- an instance (journaled and leased at once), the handler, inbox_complete.
-- 2 commits.  When the chat already has an unfinished record (another
-- client's message in the same chat, 8 in flight over 100,000 chats), the
-- admit journals the message as pending without a lease, for a claimer:
-- the bot then has nothing to run, and the cycle is 1 commit.  bench/run
-- reports how many were left pending.
\set chat random(1, 100000)
\set n :n + 1
SELECT id AS mid, coalesce(token, 0) AS mtok
  FROM durable.inbox_admit(source => 'bench',
        message_id => :run::text || '-' || :client_id::text || '-' || :n::text,
        chat_id => :chat::text, payload => '{"text":"hello from the benchmark, about the size of a chat message"}',
        instance => 'bench-' || :client_id::text) \gset
\if :mtok > 0
SELECT durable.inbox_complete(:mid::bigint, :mtok::bigint);
\endif
