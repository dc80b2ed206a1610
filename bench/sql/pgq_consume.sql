-- PgQ batch consumer over a backlog cut into batches of 100 events:
-- next_batch (1 commit), then read the events and finish_batch in one
-- transaction (where a consumer writes its effects).  2 commits per batch.
SELECT coalesce(pgq.next_batch('bench_q', 'c1'), 0) AS bid \gset
\if :bid > 0
BEGIN;
SELECT count(*) FROM pgq.get_batch_events(:bid::bigint);
SELECT pgq.finish_batch(:bid::bigint);
COMMIT;
\endif
