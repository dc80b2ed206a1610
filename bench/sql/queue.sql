-- durable queue path: inbox_admit (pending), inbox_claim, inbox_complete.
-- 3 commits.  A claim that finds nothing claimable (rare: every client
-- admits before it claims) skips the complete: \aset leaves cid at 0 when
-- the claim returns no row (no aggregate around the call; the reference's
-- claim has none either).
\set chat random(1, 100000)
\set n :n + 1
SELECT id FROM durable.inbox_admit(source => 'bench',
        message_id => :run::text || '-' || :client_id::text || '-' || :n::text,
        chat_id => :chat::text, payload => '{"text":"hello from the benchmark, about the size of a chat message"}');
\set cid 0
SELECT id AS cid, token AS ctok
  FROM durable.inbox_claim(instance => 'bench-' || :client_id::text) \aset
\if :cid > 0
SELECT durable.inbox_complete(:cid::bigint, :ctok::bigint);
\endif
