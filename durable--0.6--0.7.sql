/* durable--0.6--0.7.sql: a fresh install made in a subtransaction keeps no grant from default privileges */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.7'" to load this file. \quit

/*
 * Why: 0.5 revokes what the installing role's default privileges granted
 * on durable's objects when the install is fresh, and took it to be fresh
 * when durable.token_seq's catalog row had the xid of the running
 * transaction (age(xmin) = 0).  CREATE EXTENSION inside a savepoint, or in
 * a PL/pgSQL block with an EXCEPTION clause (a common "create if missing"
 * idiom), creates the objects under a subtransaction's xid, which is newer
 * than the top transaction's: age() is negative, the install was taken
 * for an update, and every role that default privileges name kept its
 * grants -- EXECUTE on session_load (gateway session secrets) and on the
 * operator functions, SELECT on the journals.  0.5 is released and is not
 * edited; this step does what its fresh branch should have done.
 *
 * Fresh is now: the extension membership of durable.token_seq (a pg_depend
 * row, written once when the sequence is created and never updated, unlike
 * pg_class rows that a GRANT rewrites) was written by this transaction or
 * one of its subtransactions.  SQL cannot ask that of an xid -- age() is
 * negative both for a subtransaction's xid and, modulo 2^32, for one more
 * than 2^31 transactions old -- so a C function of durable's library
 * (install.c) answers it, created for this step and dropped at its end.
 *
 * In a fresh install nobody can have granted anything by hand yet (every
 * step runs inside CREATE EXTENSION), so every privilege on the
 * extension's objects held by a role other than the owner is revoked,
 * except the grants the scripts make to pg_monitor (0.2).  The schema may
 * be older than the install (CREATE EXTENSION uses a schema durable that
 * exists), with grants made by hand: on it only the privileges of roles
 * that a default privilege of its owner names are revoked.  In an
 * update this step changes nothing: 0.5's update branch already revoked
 * the grants on durable.sessions and CREATE on the schema and named in a
 * WARNING the roles to review.
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified; the
 * REVOKEs are built with format() from catalog names (quote_ident,
 * pg_get_function_identity_arguments).
 */

CREATE FUNCTION durable.xid_is_current(pg_catalog.xid) RETURNS pg_catalog.bool
    LANGUAGE c STRICT STABLE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'durable_xid_is_current';

DO $revoke_defaults_in_subtransaction$
DECLARE
    fresh pg_catalog.bool;
    g record;
    grantees pg_catalog.text[] := '{}';
    kinds pg_catalog.text[] := '{}';
    names pg_catalog.text[] := '{}';
    summary pg_catalog.text;
BEGIN
    SELECT durable.xid_is_current(dep.xmin) INTO fresh
      FROM pg_catalog.pg_depend dep
     WHERE dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND dep.objid OPERATOR(pg_catalog.=) 'durable.token_seq'::pg_catalog.regclass
       AND dep.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
       AND dep.deptype OPERATOR(pg_catalog.=) 'e';
    IF fresh IS NOT TRUE THEN
        RETURN;
    END IF;

    FOR g IN
        WITH members(classid, objid) AS (
            SELECT dep.classid, dep.objid
              FROM pg_catalog.pg_depend dep
              JOIN pg_catalog.pg_extension e
                ON e.oid OPERATOR(pg_catalog.=) dep.refobjid
             WHERE dep.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
               AND e.extname OPERATOR(pg_catalog.=) 'durable'
               AND dep.deptype OPERATOR(pg_catalog.=) 'e'),
        durable_objects(classid, objid, kind, name, acl, owner, defaults_only) AS (
            SELECT m.classid, m.objid,
                   CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                   'durable.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname),
                   c.relacl, c.relowner, false
              FROM pg_catalog.pg_class c
              JOIN members m
                ON m.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
               AND m.objid OPERATOR(pg_catalog.=) c.oid
            UNION ALL
            SELECT m.classid, m.objid, 'ROUTINE',
                   'durable.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(p.proname)
                       OPERATOR(pg_catalog.||) '('
                       OPERATOR(pg_catalog.||) pg_catalog.pg_get_function_identity_arguments(p.oid)
                       OPERATOR(pg_catalog.||) ')',
                   p.proacl, p.proowner, false
              FROM pg_catalog.pg_proc p
              JOIN members m
                ON m.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
               AND m.objid OPERATOR(pg_catalog.=) p.oid
            UNION ALL
            SELECT 'pg_catalog.pg_namespace'::pg_catalog.regclass, n.oid, 'SCHEMA', 'durable', n.nspacl, n.nspowner, true
              FROM pg_catalog.pg_namespace n
             WHERE n.nspname OPERATOR(pg_catalog.=) 'durable'),
        own_grants(objid, privilege) AS (
            VALUES ('durable'::pg_catalog.regnamespace::pg_catalog.oid, 'USAGE'),
                   ('durable.metrics()'::pg_catalog.regprocedure::pg_catalog.oid, 'EXECUTE'),
                   ('durable.standing()'::pg_catalog.regprocedure::pg_catalog.oid, 'EXECUTE'),
                   ('durable.stat_counters'::pg_catalog.regclass::pg_catalog.oid, 'SELECT'),
                   ('durable.stat_standing'::pg_catalog.regclass::pg_catalog.oid, 'SELECT'))
        SELECT o.kind, o.name, granted.privilege_type AS privilege,
               CASE WHEN granted.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                    ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(granted.grantee)) END AS grantee
          FROM durable_objects o
         CROSS JOIN LATERAL pg_catalog.aclexplode(o.acl) granted
         WHERE granted.grantee OPERATOR(pg_catalog.<>) o.owner
           AND NOT (granted.grantee OPERATOR(pg_catalog.=) 'pg_monitor'::pg_catalog.regrole
                    AND EXISTS (SELECT FROM own_grants w
                                 WHERE w.objid OPERATOR(pg_catalog.=) o.objid
                                   AND w.privilege OPERATOR(pg_catalog.=) granted.privilege_type))
           AND (NOT o.defaults_only
                OR EXISTS (SELECT
                             FROM pg_catalog.pg_default_acl d
                            CROSS JOIN LATERAL pg_catalog.aclexplode(d.defaclacl) by_default
                            WHERE d.defaclrole OPERATOR(pg_catalog.=) o.owner
                              AND d.defaclobjtype OPERATOR(pg_catalog.=) 'n'
                              AND by_default.grantee OPERATOR(pg_catalog.=) granted.grantee))
         ORDER BY 4, 1, 2, 3
    LOOP
        EXECUTE pg_catalog.format('REVOKE %s ON %s %s FROM %s', g.privilege, g.kind, g.name, g.grantee);
        grantees := grantees OPERATOR(pg_catalog.||) g.grantee;
        kinds := kinds OPERATOR(pg_catalog.||)
                 CASE WHEN g.kind OPERATOR(pg_catalog.=) 'ROUTINE' THEN 'function' ELSE pg_catalog.lower(g.kind) END;
        names := names OPERATOR(pg_catalog.||) g.name;
    END LOOP;

    /* One entry per grantee and kind of object: "analytics on 7 tables". */
    SELECT pg_catalog.string_agg(pg_catalog.format('%s on %s %s%s', r.grantee, r.n, r.kind,
                                     CASE WHEN r.n OPERATOR(pg_catalog.>) 1 THEN 's' ELSE '' END),
                                 ', ' ORDER BY r.grantee, r.kind)
      INTO summary
      FROM (SELECT e.grantee, e.kind, pg_catalog.count(DISTINCT e.name) AS n
              FROM ROWS FROM (pg_catalog.unnest(grantees), pg_catalog.unnest(kinds),
                              pg_catalog.unnest(names)) AS e(grantee, kind, name)
             GROUP BY e.grantee, e.kind) r;

    IF summary IS NOT NULL THEN
        RAISE WARNING 'durable: revoked what default privileges granted on its objects: %', summary
            USING DETAIL = 'Default privileges would let these roles read gateway session secrets and call operator functions.',
                  HINT = 'Grant durable''s functions to your roles explicitly (README, "Privileges").';
    END IF;
END
$revoke_defaults_in_subtransaction$;

DROP FUNCTION durable.xid_is_current(pg_catalog.xid);
