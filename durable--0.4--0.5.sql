/* durable--0.4--0.5.sql: what default privileges granted on durable's objects is revoked */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.5'" to load this file. \quit

/*
 * Why: CREATE EXTENSION creates durable's schema, tables, views, sequences
 * and functions as the installing role, so that role's default privileges
 * (ALTER DEFAULT PRIVILEGES ... GRANT SELECT ON TABLES TO analytics, a
 * common setup) applied to them.  0.1 revoked only what PUBLIC had: a role
 * named in default privileges could read durable.sessions (every gateway's
 * session id, a secret) and call every SECURITY DEFINER function, operator
 * ones included (inbox_replay, outbox_discard, purge, metrics_reset).
 *
 * A fresh install runs this script last, so it sees the grants that default
 * privileges made a moment ago.  An upgrade from 0.4 sees them too, and
 * revokes them with a WARNING naming each: a role that needs durable is
 * granted what it needs explicitly (README, "Privileges"), never through
 * defaults that also hand out secrets.  A grant is revoked when its grantee
 * is named by a default privilege of the objects' owner for that kind of
 * object (everywhere, or in schema durable); other grants (yours, made with
 * GRANT after the install) stay.  pg_monitor's grants of 0.2 are made again
 * afterwards, in case a default privilege named pg_monitor.
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified; the
 * REVOKEs are built with format() from catalog names (%s of regclass and
 * regprocedure output, which quote as needed, and quote_ident).
 */

DO $revoke_defaults$
DECLARE
    g record;
    grantees pg_catalog.text[] := '{}';
    kinds pg_catalog.text[] := '{}';
    summary pg_catalog.text;
BEGIN
    FOR g IN
        WITH durable_objects(kind, name, acl, owner, defaults_kind) AS (
            SELECT CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                   'durable.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname),
                   c.relacl, c.relowner,
                   CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S' THEN 'S' ELSE 'r' END::pg_catalog."char"
              FROM pg_catalog.pg_class c
             WHERE c.relnamespace OPERATOR(pg_catalog.=) 'durable'::pg_catalog.regnamespace
               AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v', 'S']::pg_catalog."char"[])
            UNION ALL
            SELECT 'FUNCTION',
                   'durable.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(p.proname)
                       OPERATOR(pg_catalog.||) '('
                       OPERATOR(pg_catalog.||) pg_catalog.pg_get_function_identity_arguments(p.oid)
                       OPERATOR(pg_catalog.||) ')',
                   p.proacl, p.proowner, 'f'::pg_catalog."char"
              FROM pg_catalog.pg_proc p
             WHERE p.pronamespace OPERATOR(pg_catalog.=) 'durable'::pg_catalog.regnamespace
            UNION ALL
            SELECT 'SCHEMA', 'durable', n.nspacl, n.nspowner, 'n'::pg_catalog."char"
              FROM pg_catalog.pg_namespace n
             WHERE n.nspname OPERATOR(pg_catalog.=) 'durable')
        SELECT DISTINCT o.kind, o.name,
               CASE WHEN granted.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                    ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(granted.grantee)) END AS grantee
          FROM durable_objects o
         CROSS JOIN LATERAL pg_catalog.aclexplode(o.acl) granted
          JOIN pg_catalog.pg_default_acl d
            ON d.defaclrole OPERATOR(pg_catalog.=) o.owner
           AND d.defaclobjtype OPERATOR(pg_catalog.=) o.defaults_kind
           AND d.defaclnamespace OPERATOR(pg_catalog.=) ANY
                   (ARRAY[0, 'durable'::pg_catalog.regnamespace]::pg_catalog.oid[])
         CROSS JOIN LATERAL pg_catalog.aclexplode(d.defaclacl) by_default
         WHERE by_default.grantee OPERATOR(pg_catalog.=) granted.grantee
           AND granted.grantee OPERATOR(pg_catalog.<>) o.owner
         ORDER BY 1, 2
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %s', g.kind, g.name, g.grantee);
        grantees := grantees OPERATOR(pg_catalog.||) g.grantee;
        kinds := kinds OPERATOR(pg_catalog.||) pg_catalog.lower(g.kind);
    END LOOP;

    /* One entry per grantee and kind of object: "analytics on 7 tables". */
    SELECT pg_catalog.string_agg(pg_catalog.format('%s on %s %s%s', r.grantee, r.n, r.kind,
                                     CASE WHEN r.n OPERATOR(pg_catalog.>) 1 THEN 's' ELSE '' END),
                                 ', ' ORDER BY r.grantee, r.kind)
      INTO summary
      FROM (SELECT e.grantee, e.kind, pg_catalog.count(*) AS n
              FROM ROWS FROM (pg_catalog.unnest(grantees), pg_catalog.unnest(kinds)) AS e(grantee, kind)
             GROUP BY e.grantee, e.kind) r;
    IF summary IS NOT NULL THEN
        RAISE WARNING 'durable: revoked what default privileges granted on its objects: %', summary
            USING DETAIL = 'Default privileges would let these roles read gateway session secrets and call operator functions.',
                  HINT = 'Grant durable''s functions to your roles explicitly (README, "Privileges").';
    END IF;
END
$revoke_defaults$;

GRANT USAGE ON SCHEMA durable TO pg_monitor;
GRANT EXECUTE ON FUNCTION durable.metrics(), durable.standing() TO pg_monitor;
GRANT SELECT ON durable.stat_counters, durable.stat_standing TO pg_monitor;
