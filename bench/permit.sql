-- permit() under contention (pgbench script, used by t/003_permit_pgbench.pl):
-- every client asks bucket 'pgbench' for a permit, max 50 per second.  When
-- it is granted, the grant's exact time is recorded in the same transaction,
-- while the bucket's row lock is still held, so the newest permit of the
-- bucket is this one.  The runner creates durable_bench.grants(at
-- timestamptz) and checks afterwards that no window of 1 s holds more than
-- 50 grants.  1 commit per call.
BEGIN;
SELECT (durable.permit('pgbench', 50, '1s') = '0')::int AS granted \gset
\if :granted
INSERT INTO durable_bench.grants (at)
    SELECT max(p.granted_at) FROM durable.permits p WHERE p.bucket = 'pgbench';
\endif
COMMIT;
