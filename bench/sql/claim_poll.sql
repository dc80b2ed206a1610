-- Admit-to-claim latency, polling claimer: inbox_claim without wait, and
-- 100 ms of sleep in the client whenever it found nothing.
\set cid 0
SELECT id AS cid, token AS ctok
  FROM durable.inbox_claim(instance => 'poller') \aset
\if :cid > 0
INSERT INTO bench.wake SELECT 'poll', clock_timestamp() - created_at FROM durable.inbox WHERE id = :cid::bigint;
SELECT durable.inbox_complete(:cid::bigint, :ctok::bigint);
\else
\sleep 100 ms
\endif
