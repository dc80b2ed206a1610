-- durable batch path over a backlog: inbox_claim(max => 100), then one
-- batch inbox_complete of everything claimed.  2 commits per batch.
SELECT count(*) AS nclaimed,
       coalesce(array_agg(id), '{}') AS ids, coalesce(array_agg(token), '{}') AS toks
  FROM durable.inbox_claim(instance => 'bench-' || :client_id::text, max => 100) \gset
\if :nclaimed > 0
SELECT durable.inbox_complete(:ids::bigint[], :toks::bigint[]);
\endif
