-- Admit-to-claim latency, waiting claimer: inbox_claim(wait => 2 s) sleeps
-- in the server until an admit's commit wakes it; the record's age read by
-- the statement after the claim (now minus created_at, which inbox_admit
-- set before its commit) is written to bench.wake, then the record is
-- completed.
\set cid 0
SELECT id AS cid, token AS ctok
  FROM durable.inbox_claim(instance => 'waiter', wait => '2 s') \aset
\if :cid > 0
INSERT INTO bench.wake SELECT 'wait', clock_timestamp() - created_at FROM durable.inbox WHERE id = :cid::bigint;
SELECT durable.inbox_complete(:cid::bigint, :ctok::bigint);
\endif
