/* durable--0.8--0.9.sql: the monitoring views of 0.2 belong to durable's owner and carry no grant from the updating role's default privileges */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.9'" to load this file. \quit

/*
 * Why: the 0.1 -> 0.2 step created durable.stat_counters and
 * durable.stat_standing as the role that ran it.  Run by another superuser
 * than the extension's creator, the views belonged to that role (DROP ROLE
 * of it failed; the DDL guard refused to give them back by hand but to
 * durable's owner), and that role's default privileges (ALTER DEFAULT
 * PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC, analytics) reached them,
 * where a fresh install revokes every such grant.  Their initial privileges
 * (pg_init_privs) name that role, and stay so after REASSIGN OWNED or a
 * repair by hand: pg_dump writes the difference against them, and once the
 * role is dropped, writes a REVOKE naming its number, which a restore
 * refuses.  0.2 is released and is not edited; this step repairs what it
 * left, in every database whose views differ from a fresh install's.
 *
 * Which grants came from default privileges: those among the view's
 * initial privileges whose grantee and privilege a role's default
 * privileges for tables (global or for schema durable, as 0.5 reads them)
 * still name, or that a role since dropped granted there -- the role that
 * ran the 0.2 step may have been given back its objects (REASSIGN OWNED)
 * before a later step recorded the ACL as initial, or dropped, so it is not
 * always the grantor there -- other than the SELECT that the scripts grant
 * pg_monitor (of which only a grant option so named is revoked); and a
 * grant to PUBLIC by the owner, which durable never makes (PUBLIC has no
 * USAGE on the schema anyway).  Those the view still has from its owner are
 * revoked (CASCADE: a grant passed on from a grant option goes with it) and
 * named in a WARNING, since a grant made by hand to such a role with the
 * same privilege cannot be told from them.  A grant made by hand to a role
 * no default privilege names stays -- even one that a later step's GRANT
 * recorded as initial -- its grantor becoming the new owner, as ALTER ...
 * OWNER TO does.  (The initial privileges cannot be trusted further: 0.5's
 * GRANT to pg_monitor recorded the whole ACL of its day as initial.)
 *
 * Then the view is given to durable's owner -- the owner of durable.inbox,
 * the role its SECURITY DEFINER functions and its worker run as -- and its
 * initial privileges become a fresh install's (the owner's own entry --
 * its initial one if the view kept its owner, else all rights, which are
 * granted it, the old owner's default privileges having maybe narrowed the
 * entry that ALTER ... OWNER TO carried over -- and pg_monitor's SELECT; none for its columns, which a
 * REVOKE on a view whose columns have grants records), written to the
 * catalog as 0.8 does: a GRANT in an extension script records the whole
 * ACL as initial, and pg_dump would then leave the hand-made grants out of
 * dumps.  The shared
 * dependencies on roles named in initial privileges (pg_shdepend deptype
 * 'i', which PostgreSQL 17 records) become those of durable.inbox, whose
 * initial privileges name the same owner and nobody else that is not pinned;
 * rows of this database only (a database made from the same template has
 * the same object ids).
 *
 * A view whose owner and initial privileges are a fresh install's is left
 * alone: a fresh install, and an update run by the creator, change nothing.
 * Every operator is schema-qualified, IS DISTINCT FROM avoided: the step
 * runs as a superuser with schema durable, whose owner may be an ordinary
 * role, first on its search_path.
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified,
 * operators qualified; the DDL is built with format() from catalog names
 * (%I, %s of quote_ident output).
 */

/*
 * A fresh install's initial privileges for a view of owner `owner`: the
 * owner's own entry as `acl` has it (default privileges may have taken
 * some of the owner's rights, which a fresh install keeps) and pg_monitor's
 * SELECT.  Exists only while this script runs.
 */
CREATE FUNCTION durable.fresh_view_initprivs(acl pg_catalog.aclitem[], owner pg_catalog.oid)
RETURNS pg_catalog.aclitem[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fresh_view_initprivs$
    SELECT pg_catalog.array_agg(e.item ORDER BY e.n)
      FROM (SELECT own.item, 1 AS n
              FROM pg_catalog.unnest(COALESCE(acl, pg_catalog.acldefault('r'::pg_catalog."char", owner))) own(item)
             WHERE EXISTS (SELECT FROM pg_catalog.aclexplode(ARRAY[own.item]) a
                            WHERE a.grantee OPERATOR(pg_catalog.=) owner
                              AND a.grantor OPERATOR(pg_catalog.=) owner)
            UNION ALL
            SELECT pg_catalog.makeaclitem('pg_monitor'::pg_catalog.regrole, owner, 'SELECT', false), 2) e
$fresh_view_initprivs$;

DO $repair_monitoring_views$
DECLARE
    owner_oid pg_catalog.oid;
    owner_name pg_catalog.text;
    this_db pg_catalog.oid;
    v record;
    g record;
    target pg_catalog.aclitem[];
    revoked pg_catalog.text[] := '{}';
    moved pg_catalog.text[] := '{}';
BEGIN
    SELECT c.relowner INTO owner_oid
      FROM pg_catalog.pg_class c
     WHERE c.oid OPERATOR(pg_catalog.=) 'durable.inbox'::pg_catalog.regclass;
    owner_name := pg_catalog.pg_get_userbyid(owner_oid);
    SELECT d.oid INTO this_db
      FROM pg_catalog.pg_database d
     WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();

    FOR v IN
        SELECT c.oid, c.relowner, c.relacl, i.initprivs,
               'durable.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname) AS name,
               EXISTS (SELECT FROM pg_catalog.pg_init_privs ci
                        WHERE ci.objoid OPERATOR(pg_catalog.=) c.oid
                          AND ci.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                          AND ci.objsubid OPERATOR(pg_catalog.>) 0) AS column_initprivs
          FROM pg_catalog.pg_class c
          LEFT JOIN pg_catalog.pg_init_privs i
            ON i.objoid OPERATOR(pg_catalog.=) c.oid
           AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND i.objsubid OPERATOR(pg_catalog.=) 0
         WHERE c.oid OPERATOR(pg_catalog.=) ANY
                   (ARRAY['durable.stat_counters'::pg_catalog.regclass,
                          'durable.stat_standing'::pg_catalog.regclass]::pg_catalog.oid[])
         ORDER BY c.relname
    LOOP
        /* The owner's own entry is the initial one: a REVOKE from itself made since stays. */
        CONTINUE WHEN v.relowner OPERATOR(pg_catalog.=) owner_oid
                  AND v.initprivs IS NOT NULL
                  AND v.initprivs OPERATOR(pg_catalog.=) durable.fresh_view_initprivs(v.initprivs, owner_oid)
                  AND NOT v.column_initprivs;

        FOR g IN
            SELECT c.grantee, c.option_only,
                   pg_catalog.string_agg(c.privilege_type, ', ' ORDER BY c.privilege_type) AS privileges
              FROM (SELECT CASE WHEN granted.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(granted.grantee))
                           END AS grantee,
                           granted.privilege_type,
                           /* pg_monitor keeps its SELECT: only a grant option is revoked */
                           (granted.grantee OPERATOR(pg_catalog.=) 'pg_monitor'::pg_catalog.regrole
                            AND granted.privilege_type OPERATOR(pg_catalog.=) 'SELECT') AS option_only,
                           granted.grantee AS grantee_oid, granted.is_grantable
                      FROM pg_catalog.aclexplode(v.relacl) granted
                     WHERE granted.grantor OPERATOR(pg_catalog.=) v.relowner
                       AND granted.grantee OPERATOR(pg_catalog.<>) v.relowner) c
             WHERE c.grantee_oid OPERATOR(pg_catalog.=) 0
                OR ((c.is_grantable OR NOT c.option_only)
                    AND EXISTS (
                        SELECT FROM pg_catalog.aclexplode(v.initprivs) initial
                         WHERE initial.grantee OPERATOR(pg_catalog.=) c.grantee_oid
                           AND initial.privilege_type OPERATOR(pg_catalog.=) c.privilege_type
                           AND (initial.is_grantable OR NOT c.option_only)
                           AND (NOT EXISTS (SELECT FROM pg_catalog.pg_roles r
                                             WHERE r.oid OPERATOR(pg_catalog.=) initial.grantor)
                                OR EXISTS (
                                    SELECT FROM pg_catalog.pg_default_acl d
                                     CROSS JOIN LATERAL pg_catalog.aclexplode(d.defaclacl) by_default
                                     WHERE d.defaclobjtype OPERATOR(pg_catalog.=) 'r'
                                       AND d.defaclnamespace OPERATOR(pg_catalog.=) ANY
                                               (ARRAY[0, 'durable'::pg_catalog.regnamespace]::pg_catalog.oid[])
                                       AND by_default.grantee OPERATOR(pg_catalog.=) c.grantee_oid
                                       AND by_default.privilege_type OPERATOR(pg_catalog.=) c.privilege_type
                                       AND (by_default.is_grantable OR NOT c.option_only)))))
             GROUP BY c.grantee, c.option_only
             ORDER BY 1, 2
        LOOP
            EXECUTE pg_catalog.format('REVOKE %s ON TABLE %s FROM %s CASCADE', g.privileges, v.name, g.grantee);
            IF g.option_only THEN
                /* granted again, without the option, last in the ACL as in a fresh install */
                EXECUTE pg_catalog.format('GRANT SELECT ON TABLE %s TO pg_monitor', v.name);
            END IF;
            revoked := revoked OPERATOR(pg_catalog.||)
                       pg_catalog.format('%s (%s%s) on %s', g.grantee,
                                         CASE WHEN g.option_only THEN 'grant option for ' ELSE '' END,
                                         g.privileges, v.name);
        END LOOP;

        IF v.relowner OPERATOR(pg_catalog.<>) owner_oid THEN
            EXECUTE pg_catalog.format('ALTER VIEW %s OWNER TO %I', v.name, owner_name);
            /* the old owner's entry came over: its default privileges may have narrowed it */
            EXECUTE pg_catalog.format('GRANT ALL ON TABLE %s TO %I', v.name, owner_name);
            moved := moved OPERATOR(pg_catalog.||)
                     pg_catalog.format('%s (owned by %I)', v.name, pg_catalog.pg_get_userbyid(v.relowner));
        END IF;

        /*
         * The owner's entry: the initial one when the view kept its owner and
         * its initial privileges have one for it, else the one it has now.
         */
        SELECT durable.fresh_view_initprivs(
                   CASE WHEN v.relowner OPERATOR(pg_catalog.=) owner_oid
                             AND EXISTS (SELECT FROM pg_catalog.aclexplode(v.initprivs) a
                                          WHERE a.grantee OPERATOR(pg_catalog.=) owner_oid
                                            AND a.grantor OPERATOR(pg_catalog.=) owner_oid)
                        THEN v.initprivs ELSE c.relacl END,
                   owner_oid) INTO target
          FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) v.oid;
        DELETE FROM pg_catalog.pg_init_privs i
         WHERE i.objoid OPERATOR(pg_catalog.=) v.oid
           AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass;
        INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
        VALUES (v.oid, 'pg_catalog.pg_class'::pg_catalog.regclass, 0, 'e', target);
        DELETE FROM pg_catalog.pg_shdepend d
         WHERE d.dbid OPERATOR(pg_catalog.=) this_db
           AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.objid OPERATOR(pg_catalog.=) v.oid
           AND d.deptype OPERATOR(pg_catalog.=) 'i';
        INSERT INTO pg_catalog.pg_shdepend (dbid, classid, objid, objsubid, refclassid, refobjid, deptype)
        SELECT d.dbid, d.classid, v.oid, 0, d.refclassid, d.refobjid, d.deptype
          FROM pg_catalog.pg_shdepend d
         WHERE d.dbid OPERATOR(pg_catalog.=) this_db
           AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.objid OPERATOR(pg_catalog.=) 'durable.inbox'::pg_catalog.regclass
           AND d.objsubid OPERATOR(pg_catalog.=) 0
           AND d.deptype OPERATOR(pg_catalog.=) 'i'
           AND d.refobjid OPERATOR(pg_catalog.=) owner_oid;
    END LOOP;

    /* (An extension script's NOTICEs are not shown: both are WARNINGs.) */
    IF pg_catalog.cardinality(revoked) OPERATOR(pg_catalog.>) 0 THEN
        RAISE WARNING 'durable: revoked what default privileges granted on its monitoring views: %',
                      pg_catalog.array_to_string(revoked, ', ')
            USING DETAIL = pg_catalog.format('Default privileges of the role that created them (the update to 0.2 run by another role than the creator, or an install by a role with default privileges) granted these; a fresh install has none of them.%s',
                                             CASE WHEN pg_catalog.cardinality(moved) OPERATOR(pg_catalog.>) 0
                                                  THEN pg_catalog.format(' The views now belong to %I, as in a fresh install: %s.',
                                                                         owner_name, pg_catalog.array_to_string(moved, ', '))
                                                  ELSE '' END),
                  HINT = 'To let a role read the views, make it a member of pg_monitor (README, "Monitoring").';
    ELSIF pg_catalog.cardinality(moved) OPERATOR(pg_catalog.>) 0 THEN
        RAISE WARNING 'durable: its monitoring views now belong to %, as in a fresh install: %',
                      pg_catalog.quote_ident(owner_name), pg_catalog.array_to_string(moved, ', ')
            USING DETAIL = 'The update to 0.2 had created them as the role that ran it.';
    END IF;
END
$repair_monitoring_views$;

DROP FUNCTION durable.fresh_view_initprivs(pg_catalog.aclitem[], pg_catalog.oid);
