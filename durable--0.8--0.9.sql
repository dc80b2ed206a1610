/* durable--0.8--0.9.sql: the monitoring views of 0.2 belong to durable's owner and carry no grant from the updating role's default privileges */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.9'" to load this file. \quit

/*
 * Why: the 0.1 -> 0.2 step created durable.stat_counters and
 * durable.stat_standing as the role that ran it.  Run by another superuser
 * than the extension's creator, the views belonged to that role (DROP ROLE
 * of it failed; the DDL guard refused to give them back by hand but to
 * durable's owner), and that role's default privileges (ALTER DEFAULT
 * PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC, analytics) reached them,
 * where a fresh install revokes every such grant.  0.2 is released and is
 * not edited; this step repairs what it left.
 *
 * Which grants came from default privileges: the view's initial privileges
 * (pg_init_privs) are its ACL as the 0.2 step left it, and that step
 * granted only SELECT to pg_monitor; every other entry that the view's
 * owner granted there came from the owner's default privileges.  Those that
 * the view still has are revoked (CASCADE: a grant passed on from a grant
 * option goes with it) and named in a WARNING, since a grant made later by
 * hand to the same role with the same privilege cannot be told from them.
 * Grants made by hand otherwise stay, their grantor becoming the new owner
 * as ALTER ... OWNER TO does.
 *
 * Then the view is given to durable's owner -- the owner of durable.inbox,
 * the role its SECURITY DEFINER functions and its worker run as -- and its
 * initial privileges become a fresh install's (the owner's defaults and
 * pg_monitor's SELECT), written to the catalog as 0.8 does: a GRANT in an
 * extension script records the whole ACL as initial, and pg_dump, which
 * writes only the difference, would then leave the hand-made grants out of
 * dumps.  The initial privileges' shared dependencies (deptype 'i',
 * recorded by PostgreSQL 17) go with the entries they stood for.
 *
 * A view that already belongs to durable's owner is left alone: a fresh
 * install, and an update run by the creator, change nothing.
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified,
 * operators qualified; the DDL is built with format() from catalog names
 * (%I, %s of quote_ident output).
 */

DO $repair_monitoring_views$
DECLARE
    owner_oid pg_catalog.oid;
    owner_name pg_catalog.text;
    v record;
    g record;
    revoked pg_catalog.text[] := '{}';
    moved pg_catalog.text[] := '{}';
    fresh_init pg_catalog.aclitem[];
BEGIN
    SELECT c.relowner INTO owner_oid
      FROM pg_catalog.pg_class c
     WHERE c.oid OPERATOR(pg_catalog.=) 'durable.inbox'::pg_catalog.regclass;
    owner_name := pg_catalog.pg_get_userbyid(owner_oid);
    fresh_init := pg_catalog.acldefault('r'::pg_catalog."char", owner_oid)
                  OPERATOR(pg_catalog.||)
                  pg_catalog.makeaclitem('pg_monitor'::pg_catalog.regrole, owner_oid, 'SELECT', false);

    FOR v IN
        SELECT c.oid, c.relowner, c.relacl, i.initprivs,
               'durable.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname) AS name
          FROM pg_catalog.pg_class c
          LEFT JOIN pg_catalog.pg_init_privs i
            ON i.objoid OPERATOR(pg_catalog.=) c.oid
           AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND i.objsubid OPERATOR(pg_catalog.=) 0
         WHERE c.oid OPERATOR(pg_catalog.=) ANY
                   (ARRAY['durable.stat_counters'::pg_catalog.regclass,
                          'durable.stat_standing'::pg_catalog.regclass]::pg_catalog.oid[])
           AND c.relowner OPERATOR(pg_catalog.<>) owner_oid
         ORDER BY c.relname
    LOOP
        FOR g IN
            SELECT CASE WHEN initial.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                        ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(initial.grantee)) END AS grantee,
                   pg_catalog.string_agg(initial.privilege_type, ', ' ORDER BY initial.privilege_type) AS privileges
              FROM pg_catalog.aclexplode(v.initprivs) initial
              JOIN pg_catalog.aclexplode(v.relacl) granted
                ON granted.grantee OPERATOR(pg_catalog.=) initial.grantee
               AND granted.grantor OPERATOR(pg_catalog.=) initial.grantor
               AND granted.privilege_type OPERATOR(pg_catalog.=) initial.privilege_type
             WHERE initial.grantor OPERATOR(pg_catalog.=) v.relowner
               AND initial.grantee OPERATOR(pg_catalog.<>) v.relowner
               AND NOT (initial.grantee OPERATOR(pg_catalog.=) 'pg_monitor'::pg_catalog.regrole
                        AND initial.privilege_type OPERATOR(pg_catalog.=) 'SELECT')
             GROUP BY initial.grantee
             ORDER BY 1
        LOOP
            EXECUTE pg_catalog.format('REVOKE %s ON TABLE %s FROM %s CASCADE', g.privileges, v.name, g.grantee);
            revoked := revoked OPERATOR(pg_catalog.||)
                       pg_catalog.format('%s (%s) on %s', g.grantee, g.privileges, v.name);
        END LOOP;

        EXECUTE pg_catalog.format('ALTER VIEW %s OWNER TO %I', v.name, owner_name);
        moved := moved OPERATOR(pg_catalog.||)
                 pg_catalog.format('%s (owned by %I)', v.name, pg_catalog.pg_get_userbyid(v.relowner));

        DELETE FROM pg_catalog.pg_init_privs i
         WHERE i.objoid OPERATOR(pg_catalog.=) v.oid
           AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND i.objsubid OPERATOR(pg_catalog.=) 0;
        INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
        VALUES (v.oid, 'pg_catalog.pg_class'::pg_catalog.regclass, 0, 'e', fresh_init);
        DELETE FROM pg_catalog.pg_shdepend d
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.objid OPERATOR(pg_catalog.=) v.oid
           AND d.objsubid OPERATOR(pg_catalog.=) 0
           AND d.deptype OPERATOR(pg_catalog.=) 'i'
           AND d.refobjid OPERATOR(pg_catalog.<>) ALL
                   (SELECT a.grantee FROM pg_catalog.aclexplode(fresh_init) a);
    END LOOP;

    IF pg_catalog.cardinality(revoked) OPERATOR(pg_catalog.>) 0 THEN
        RAISE WARNING 'durable: revoked what default privileges granted on its monitoring views: %',
                      pg_catalog.array_to_string(revoked, ', ')
            USING DETAIL = pg_catalog.format('The update to 0.2 created them as the role that ran it, with its default privileges; a fresh install has none of these grants. They now belong to %I, as in a fresh install: %s.',
                                             owner_name, pg_catalog.array_to_string(moved, ', ')),
                  HINT = 'To let a role read the views, make it a member of pg_monitor (README, "Monitoring").';
    ELSIF pg_catalog.cardinality(moved) OPERATOR(pg_catalog.>) 0 THEN
        RAISE NOTICE 'durable: the monitoring views now belong to %, as in a fresh install: %',
                     pg_catalog.quote_ident(owner_name), pg_catalog.array_to_string(moved, ', ');
    END IF;
END
$repair_monitoring_views$;
