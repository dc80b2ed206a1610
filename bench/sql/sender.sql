-- durable sender loop: outbox_enqueue (a send for later), outbox_claim,
-- the provider call, outbox_sent.  3 commits.  A claim that finds nothing
-- claimable (rare: every client enqueues before it claims) skips the sent.
\set chat random(1, 100000)
\set n :n + 1
SELECT 1 FROM durable.outbox_enqueue(idempotency_key => :run::text || '-' || :client_id::text || '-' || :n::text,
        chat_id => :chat::text, payload => '{"text":"a reply of the bot, about the size of a chat message"}');
\set stok 0
SELECT key AS skey, token AS stok
  FROM durable.outbox_claim(instance => 'bench-' || :client_id::text, max => 1) \aset
\if :stok > 0
SELECT durable.outbox_sent(:skey::text, :stok::bigint, 'p-' || :n::text);
\endif
