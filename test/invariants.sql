-- test/invariants.sql: the journals' invariants that their rows alone can
-- show, as one query that returns a row per record breaking one (none:
-- they hold); run by the crash test and the TAP tests that kill processes
-- (t/lib/DurableInvariants.pm), after they let the server settle.  A bare
-- SELECT without a semicolon, for callers to wrap.
--
-- Of tests.md's "invariant check": (a) one state per record, and columns
-- that agree with it; (b) a lease has a token and an owner, and no token is
-- above token_seq or held by two records -- that it is the newest issued
-- for its record is not in the rows: the fencing tests (isolation specs,
-- t/021_token_fence.pl) and the crash test's stalls check it; (c) one
-- completion per message is the crash test's count of effect rows; (d) one
-- row per key is outbox's primary key; (e) attempts within
-- durable.inbox_max_attempts depends on the setting of the sessions that
-- failed the records, which callers vary: the crash test checks its poison
-- messages die after exactly that many (row 4.5), sql/inbox.sql the rule;
-- (f) token_seq is a sequence.
WITH seq AS (SELECT last_value FROM durable.token_seq),
tokens AS (
  SELECT 'inbox ' || id AS record, token FROM durable.inbox WHERE token IS NOT NULL
  UNION ALL
  SELECT 'outbox ' || key, token FROM durable.outbox WHERE token IS NOT NULL)
SELECT 'inbox ' || i.id AS record, v.broken
  FROM durable.inbox i, seq,
       LATERAL (VALUES
         (i.state NOT IN ('pending', 'leased', 'done', 'dead'), 'no such state'),
         ((i.finished_at IS NULL) <> (i.state IN ('pending', 'leased')), 'finished_at and state disagree'),
         ((i.done_at IS NULL) <> (i.state <> 'done'), 'done_at and state disagree'),
         (i.state = 'done' AND i.finished_at <> i.done_at, 'finished_at is not done_at'),
         ((i.message_id IS NULL) = (i.content_hash IS NULL), 'neither or both dedupe keys'),
         ((i.state = 'leased') <> (i.lease_until IS NOT NULL), 'lease and state disagree'),
         (i.state = 'leased' AND (i.token IS NULL OR i.owner IS NULL), 'leased without token or owner'),
         (i.attempts < 0 OR (i.state = 'leased' AND i.attempts < 1), 'attempts out of range'),
         (i.token > seq.last_value, 'a token token_seq never gave'))
         AS v(bad, broken)
 WHERE v.bad
UNION ALL
SELECT 'outbox ' || o.key, v.broken
  FROM durable.outbox o, seq,
       LATERAL (VALUES
         (o.state NOT IN ('pending', 'sending', 'sent', 'failed', 'dead', 'unknown'), 'no such state'),
         ((o.state = 'sending') <> (o.lease_until IS NOT NULL), 'lease and state disagree'),
         (o.state = 'sending' AND (o.token IS NULL OR o.owner IS NULL), 'sending without token or owner'),
         ((o.state = 'sent') <> (o.sent_at IS NOT NULL), 'sent_at and state disagree'),
         (o.state = 'sent' AND o.provider_message_id IS NULL, 'sent without a provider id'),
         (o.attempts < 0 OR (o.state = 'sending' AND o.attempts < 1), 'attempts out of range'),
         (o.token > seq.last_value, 'a token token_seq never gave'))
         AS v(bad, broken)
 WHERE v.bad
UNION ALL
SELECT string_agg(record, ', '), 'token ' || token || ' held by two records'
  FROM tokens GROUP BY token HAVING count(*) > 1
