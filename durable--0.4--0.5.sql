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
 * A grant that default privileges made cannot be told from one made by hand
 * to the same role, so what this step revokes depends on when it runs:
 *  - in a fresh install (CREATE EXTENSION runs every step in one
 *    transaction: durable's objects were created by this transaction),
 *    nobody has granted anything by hand yet: every grant on the
 *    extension's objects whose grantee a default privilege of the owner
 *    names for that kind of object is revoked;
 *  - in an update of an installed durable, grants made since (the README's
 *    GRANTs for bots, readers, gateways) must keep working: only grants on
 *    durable.sessions and CREATE on the schema are revoked (the README
 *    grants neither), and the roles that hold grants a default privilege names are
 *    listed in a WARNING for the operator to review.
 * pg_monitor's grants of 0.2 are made again afterwards, in case a default
 * privilege named pg_monitor.  Objects in schema durable that are not the
 * extension's (someone else's, created there by a role that had CREATE on
 * the schema) are left alone.
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified; the
 * REVOKEs are built with format() from catalog names (quote_ident,
 * pg_get_function_identity_arguments).
 */

DO $revoke_defaults$
DECLARE
    fresh pg_catalog.bool;
    g record;
    grantees pg_catalog.text[] := '{}';
    kinds pg_catalog.text[] := '{}';
    summary pg_catalog.text;
BEGIN
    /* Created by this very transaction: a fresh install. */
    SELECT pg_catalog.age(c.xmin) OPERATOR(pg_catalog.=) 0 INTO fresh
      FROM pg_catalog.pg_class c
     WHERE c.oid OPERATOR(pg_catalog.=) 'durable.token_seq'::pg_catalog.regclass;

    FOR g IN
        WITH members(classid, objid) AS (
            SELECT dep.classid, dep.objid
              FROM pg_catalog.pg_depend dep
              JOIN pg_catalog.pg_extension e
                ON e.oid OPERATOR(pg_catalog.=) dep.refobjid
             WHERE dep.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
               AND e.extname OPERATOR(pg_catalog.=) 'durable'
               AND dep.deptype OPERATOR(pg_catalog.=) 'e'),
        durable_objects(kind, name, acl, owner, defaults_kind) AS (
            SELECT CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                   'durable.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname),
                   c.relacl, c.relowner,
                   CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S' THEN 'S' ELSE 'r' END::pg_catalog."char"
              FROM pg_catalog.pg_class c
              JOIN members m
                ON m.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
               AND m.objid OPERATOR(pg_catalog.=) c.oid
             WHERE c.relnamespace OPERATOR(pg_catalog.=) 'durable'::pg_catalog.regnamespace
            UNION ALL
            SELECT 'ROUTINE',
                   'durable.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(p.proname)
                       OPERATOR(pg_catalog.||) '('
                       OPERATOR(pg_catalog.||) pg_catalog.pg_get_function_identity_arguments(p.oid)
                       OPERATOR(pg_catalog.||) ')',
                   p.proacl, p.proowner, 'f'::pg_catalog."char"
              FROM pg_catalog.pg_proc p
              JOIN members m
                ON m.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
               AND m.objid OPERATOR(pg_catalog.=) p.oid
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
        IF fresh THEN
            EXECUTE pg_catalog.format('REVOKE ALL ON %s %s FROM %s', g.kind, g.name, g.grantee);
        END IF;
        grantees := grantees OPERATOR(pg_catalog.||) g.grantee;
        kinds := kinds OPERATOR(pg_catalog.||)
                 CASE WHEN g.kind OPERATOR(pg_catalog.=) 'ROUTINE' THEN 'function' ELSE pg_catalog.lower(g.kind) END;
    END LOOP;

    /* One entry per grantee and kind of object: "analytics on 7 tables". */
    SELECT pg_catalog.string_agg(pg_catalog.format('%s on %s %s%s', r.grantee, r.n, r.kind,
                                     CASE WHEN r.n OPERATOR(pg_catalog.>) 1 THEN 's' ELSE '' END),
                                 ', ' ORDER BY r.grantee, r.kind)
      INTO summary
      FROM (SELECT e.grantee, e.kind, pg_catalog.count(*) AS n
              FROM ROWS FROM (pg_catalog.unnest(grantees), pg_catalog.unnest(kinds)) AS e(grantee, kind)
             GROUP BY e.grantee, e.kind) r;
    IF summary IS NOT NULL AND fresh THEN
        RAISE WARNING 'durable: revoked what default privileges granted on its objects: %', summary
            USING DETAIL = 'Default privileges would let these roles read gateway session secrets and call operator functions.',
                  HINT = 'Grant durable''s functions to your roles explicitly (README, "Privileges").';
    ELSIF summary IS NOT NULL THEN
        RAISE WARNING 'durable: roles that default privileges name hold privileges on its objects: %', summary
            USING DETAIL = 'Default privileges may have granted them at the install; they can read what the README grants nobody, or call operator functions. Only the grants on durable.sessions and CREATE on the schema were revoked.',
                  HINT = 'Review these grants (README, "Privileges"); revoke what a role should not have.';
    END IF;

    /*
     * Nobody but the owner creates objects in durable's schema (a planted
     * object could shadow one of durable's), nor reads the gateway session
     * secrets: the README grants neither.
     */
    FOR g IN
        SELECT DISTINCT r.what,
               CASE WHEN r.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                    ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r.grantee)) END AS grantee
          FROM (SELECT 'CREATE ON SCHEMA durable' AS what, granted.grantee, n.nspowner AS owner
                  FROM pg_catalog.pg_namespace n
                 CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) granted
                 WHERE n.nspname OPERATOR(pg_catalog.=) 'durable'
                   AND granted.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
                UNION ALL
                SELECT 'ALL ON TABLE durable.sessions', granted.grantee, c.relowner
                  FROM pg_catalog.pg_class c
                 CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) granted
                 WHERE c.oid OPERATOR(pg_catalog.=) 'durable.sessions'::pg_catalog.regclass) r
         WHERE r.grantee OPERATOR(pg_catalog.<>) r.owner
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s FROM %s', g.what, g.grantee);
    END LOOP;
END
$revoke_defaults$;

GRANT USAGE ON SCHEMA durable TO pg_monitor;
GRANT EXECUTE ON FUNCTION durable.metrics(), durable.standing() TO pg_monitor;
GRANT SELECT ON durable.stat_counters, durable.stat_standing TO pg_monitor;
