-- test/memcheck/chaos.sql: one pgbench transaction of test/memcheck/run's
-- load phase.  Every call of the two journals, with leases short enough to
-- expire under valgrind, errors swallowed in subtransactions (stale tokens
-- are the point), so that the worker recovers, retries, kills, purges and
-- announces while clients work.  Run by pgbench with -D chat= -D k= unset:
-- the variables come from \set.
\set chat random(1, 300)
\set k random(1, 50)
SELECT memcheck.chaos(:client_id, :chat, :k);
