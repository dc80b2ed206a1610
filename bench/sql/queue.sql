-- durable queue path: inbox_admit (pending), inbox_claim, inbox_complete.
-- 3 commits.  A claim that finds nothing claimable (rare: every client
-- admits before it claims) skips the complete.
\set chat random(1, 100000)
\set n :n + 1
SELECT id FROM durable.inbox_admit(source => 'bench',
        message_id => :run::text || '-' || :client_id::text || '-' || :n::text,
        chat_id => :chat::text, payload => '{"text":"hello from the benchmark, about the size of a chat message"}');
SELECT coalesce(max(id), 0) AS cid, coalesce(max(token), 0) AS ctok
  FROM durable.inbox_claim(instance => 'bench-' || :client_id::text) \gset
\if :cid > 0
SELECT durable.inbox_complete(:cid::bigint, :ctok::bigint);
\endif
