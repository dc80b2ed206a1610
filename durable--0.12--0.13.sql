/* durable--0.12--0.13.sql: grants on the schema, metrics() and standing() made before the install or an update through 0.5 are dumped again; initial privileges follow REASSIGN OWNED */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.13'" to load this file. \quit

/*
 * Why: every GRANT or REVOKE run by an extension script records the
 * object's whole ACL as its initial privileges (pg_init_privs), and pg_dump
 * writes only the difference from them.  The 0.1 -> 0.2 step grants
 * pg_monitor USAGE on schema durable and EXECUTE on durable.metrics(), and
 * 0.4 -> 0.5 EXECUTE on durable.standing(): a grant made by hand on one of
 * them before that step (GRANT USAGE ON SCHEMA durable TO bot, GRANT
 * EXECUTE ON FUNCTION durable.metrics() TO dashboard) was recorded as
 * initial, left out of every dump, and lost by a restore.  As every install
 * runs those steps too, so was a grant on a schema durable made before
 * CREATE EXTENSION -- which is the case of every reinstall: the schema is
 * not a member of the extension and outlives DROP EXTENSION with its
 * grants.  Found by review (2026-12-06); 0.9 repaired the same for the
 * monitoring views.
 *
 * This step makes the initial privileges of the three objects what the
 * CREATE EXTENSION of a restore records, with the object's current owner:
 * the owner's entry of PostgreSQL's default privileges (acldefault: all
 * rights) and pg_monitor's privilege, granted by the owner.  pg_dump then
 * writes every difference from them: the grants made by hand, a revoke
 * from pg_monitor, and a right the owner took from itself -- also one taken
 * before the old record was made, and after REASSIGN OWNED gave durable to
 * another role, whose record (on PostgreSQL 15 and 16) still names the old
 * owner.  (An install by a role whose default privileges take rights from
 * itself records its narrowed entry; after this step its dumps write that
 * REVOKE, which a restore applies as well.)  Only the catalog row changes:
 * no grant is made or revoked, and objects whose initial privileges are
 * already these (a fresh install into a new schema) are left alone.  No
 * other object of the extension is granted to by a script after it exists.
 *
 * The shared dependencies on roles named in initial privileges (pg_shdepend
 * deptype 'i', which PostgreSQL 17 records for every role that is not
 * pinned, owner included) become those of the new record: none but the
 * owner's, added where it is missing (pg_monitor, built in, is pinned:
 * object ids below FirstUnpinnedObjectId, 12000).  Rows of this database
 * only: a database made from the same template has the same object ids.
 *
 * The step runs as a superuser with schema durable, whose owner may be an
 * ordinary role, first on its search_path: every operator is
 * schema-qualified, IS DISTINCT FROM avoided.
 *
 * No table changes shape: the 0.13 library serves 0.11 and 0.12 databases
 * too.
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified,
 * operators qualified; no DDL is built from names.
 */

DO $fresh_initial_privileges$
DECLARE
    this_db pg_catalog.oid;
    o record;
    target pg_catalog.aclitem[];
    records_initial_dependencies pg_catalog.bool :=
        pg_catalog.current_setting('server_version_num')::pg_catalog.int4 OPERATOR(pg_catalog.>=) 170000;
BEGIN
    SELECT d.oid INTO this_db
      FROM pg_catalog.pg_database d
     WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();

    FOR o IN
        SELECT 'pg_catalog.pg_namespace'::pg_catalog.regclass AS classoid, n.oid, n.nspowner AS owner,
               'n'::pg_catalog."char" AS kind, 'USAGE'::pg_catalog.text AS monitor_privilege, i.initprivs
          FROM pg_catalog.pg_namespace n
          JOIN pg_catalog.pg_init_privs i
            ON i.objoid OPERATOR(pg_catalog.=) n.oid
           AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
           AND i.objsubid OPERATOR(pg_catalog.=) 0
         WHERE n.oid OPERATOR(pg_catalog.=) 'durable'::pg_catalog.regnamespace
        UNION ALL
        SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass, p.oid, p.proowner, 'f', 'EXECUTE', i.initprivs
          FROM pg_catalog.pg_proc p
          JOIN pg_catalog.pg_init_privs i
            ON i.objoid OPERATOR(pg_catalog.=) p.oid
           AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
           AND i.objsubid OPERATOR(pg_catalog.=) 0
         WHERE p.oid OPERATOR(pg_catalog.=) ANY
                   (ARRAY['durable.metrics()'::pg_catalog.regprocedure,
                          'durable.standing()'::pg_catalog.regprocedure]::pg_catalog.oid[])
    LOOP
        SELECT pg_catalog.array_agg(own.item) OPERATOR(pg_catalog.||)
               pg_catalog.makeaclitem('pg_monitor'::pg_catalog.regrole, o.owner, o.monitor_privilege, false)
          INTO target
          FROM pg_catalog.unnest(pg_catalog.acldefault(o.kind, o.owner)) own(item)
         WHERE EXISTS (SELECT FROM pg_catalog.aclexplode(ARRAY[own.item]) a
                        WHERE a.grantee OPERATOR(pg_catalog.=) o.owner);
        CONTINUE WHEN o.initprivs OPERATOR(pg_catalog.=) target;

        UPDATE pg_catalog.pg_init_privs i
           SET initprivs = target
         WHERE i.objoid OPERATOR(pg_catalog.=) o.oid
           AND i.classoid OPERATOR(pg_catalog.=) o.classoid
           AND i.objsubid OPERATOR(pg_catalog.=) 0;
        DELETE FROM pg_catalog.pg_shdepend d
         WHERE d.dbid OPERATOR(pg_catalog.=) this_db
           AND d.classid OPERATOR(pg_catalog.=) o.classoid
           AND d.objid OPERATOR(pg_catalog.=) o.oid
           AND d.objsubid OPERATOR(pg_catalog.=) 0
           AND d.deptype OPERATOR(pg_catalog.=) 'i'
           AND d.refobjid OPERATOR(pg_catalog.<>) o.owner;
        IF records_initial_dependencies
           AND o.owner OPERATOR(pg_catalog.>=) 12000::pg_catalog.oid
           AND NOT EXISTS (SELECT FROM pg_catalog.pg_shdepend d
                            WHERE d.dbid OPERATOR(pg_catalog.=) this_db
                              AND d.classid OPERATOR(pg_catalog.=) o.classoid
                              AND d.objid OPERATOR(pg_catalog.=) o.oid
                              AND d.objsubid OPERATOR(pg_catalog.=) 0
                              AND d.deptype OPERATOR(pg_catalog.=) 'i') THEN
            INSERT INTO pg_catalog.pg_shdepend (dbid, classid, objid, objsubid, refclassid, refobjid, deptype)
            VALUES (this_db, o.classoid, o.oid, 0, 'pg_catalog.pg_authid'::pg_catalog.regclass, o.owner, 'i');
        END IF;
    END LOOP;
END
$fresh_initial_privileges$;

/*
 * REASSIGN OWNED gives durable to another role (its objects refuse ALTER ...
 * OWNER TO one at a time) and rewrites their ACLs, but before PostgreSQL 17
 * not their initial privileges, which kept naming the old owner: every dump
 * carried a REVOKE from it and a GRANT to the new owner for each object,
 * and once the old owner was dropped the REVOKE named its number, which a
 * restore refuses (found by review, 2026-12-06).  Since 0.13 the library
 * follows each REASSIGN OWNED with the change (init_privs.c); here the rows
 * of a durable moved before get it: a row of one of durable's objects whose
 * grantor is one role, not the object's owner (the owner it had when its
 * scripts ran), gets the change ALTER ... OWNER TO makes to an ACL
 * (aclnewowner, through a helper that exists only while this script runs:
 * it merges the entries of a new owner that was a grantee there already),
 * that role becoming the owner.  On PostgreSQL 17
 * (after pg_upgrade of such a database) its dependency rows follow.
 */
CREATE FUNCTION durable.acl_new_owner(pg_catalog.aclitem[], pg_catalog.oid, pg_catalog.oid)
    RETURNS pg_catalog.aclitem[]
    LANGUAGE c STRICT STABLE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'durable_acl_new_owner';

DO $initial_privileges_follow_owner$
DECLARE
    this_db pg_catalog.oid;
    o record;
    moved pg_catalog.aclitem[];
    records_initial_dependencies pg_catalog.bool :=
        pg_catalog.current_setting('server_version_num')::pg_catalog.int4 OPERATOR(pg_catalog.>=) 170000;
BEGIN
    SELECT d.oid INTO this_db
      FROM pg_catalog.pg_database d
     WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database();

    FOR o IN
        WITH objects AS (
            SELECT d.classid AS classoid, d.objid AS oid
              FROM pg_catalog.pg_depend d
             WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
               AND d.refobjid OPERATOR(pg_catalog.=)
                   (SELECT e.oid FROM pg_catalog.pg_extension e
                     WHERE e.extname OPERATOR(pg_catalog.=) 'durable')
               AND d.deptype OPERATOR(pg_catalog.=) 'e'
            UNION ALL
            SELECT 'pg_catalog.pg_namespace'::pg_catalog.regclass::pg_catalog.oid,
                   'durable'::pg_catalog.regnamespace::pg_catalog.oid),
        owned AS (
            SELECT ob.classoid, ob.oid,
                   COALESCE((SELECT c.relowner FROM pg_catalog.pg_class c
                              WHERE ob.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                                AND c.oid OPERATOR(pg_catalog.=) ob.oid),
                            (SELECT p.proowner FROM pg_catalog.pg_proc p
                              WHERE ob.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                                AND p.oid OPERATOR(pg_catalog.=) ob.oid),
                            (SELECT n.nspowner FROM pg_catalog.pg_namespace n
                              WHERE ob.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
                                AND n.oid OPERATOR(pg_catalog.=) ob.oid)) AS owner
              FROM objects ob)
        SELECT i.classoid, i.objoid, i.objsubid, i.initprivs, w.owner,
               (SELECT pg_catalog.min(a.grantor) FROM pg_catalog.aclexplode(i.initprivs) a) AS old_owner
          FROM owned w
          JOIN pg_catalog.pg_init_privs i
            ON i.classoid OPERATOR(pg_catalog.=) w.classoid
           AND i.objoid OPERATOR(pg_catalog.=) w.oid
         WHERE w.owner IS NOT NULL
           AND (SELECT pg_catalog.count(DISTINCT a.grantor) FROM pg_catalog.aclexplode(i.initprivs) a)
               OPERATOR(pg_catalog.=) 1
           AND NOT EXISTS (SELECT FROM pg_catalog.aclexplode(i.initprivs) a
                            WHERE a.grantor OPERATOR(pg_catalog.=) w.owner)
    LOOP
        moved := durable.acl_new_owner(o.initprivs, o.old_owner, o.owner);
        UPDATE pg_catalog.pg_init_privs i
           SET initprivs = moved
         WHERE i.classoid OPERATOR(pg_catalog.=) o.classoid
           AND i.objoid OPERATOR(pg_catalog.=) o.objoid
           AND i.objsubid OPERATOR(pg_catalog.=) o.objsubid;
        IF records_initial_dependencies THEN
            DELETE FROM pg_catalog.pg_shdepend d
             WHERE d.dbid OPERATOR(pg_catalog.=) this_db
               AND d.classid OPERATOR(pg_catalog.=) o.classoid
               AND d.objid OPERATOR(pg_catalog.=) o.objoid
               AND d.objsubid OPERATOR(pg_catalog.=) o.objsubid
               AND d.deptype OPERATOR(pg_catalog.=) 'i'
               AND d.refobjid OPERATOR(pg_catalog.=) o.old_owner;
            IF o.owner OPERATOR(pg_catalog.>=) 12000::pg_catalog.oid
               AND NOT EXISTS (SELECT FROM pg_catalog.pg_shdepend d
                                WHERE d.dbid OPERATOR(pg_catalog.=) this_db
                                  AND d.classid OPERATOR(pg_catalog.=) o.classoid
                                  AND d.objid OPERATOR(pg_catalog.=) o.objoid
                                  AND d.objsubid OPERATOR(pg_catalog.=) o.objsubid
                                  AND d.deptype OPERATOR(pg_catalog.=) 'i'
                                  AND d.refobjid OPERATOR(pg_catalog.=) o.owner) THEN
                INSERT INTO pg_catalog.pg_shdepend (dbid, classid, objid, objsubid, refclassid, refobjid, deptype)
                VALUES (this_db, o.classoid, o.objoid, o.objsubid,
                        'pg_catalog.pg_authid'::pg_catalog.regclass, o.owner, 'i');
            END IF;
        END IF;
    END LOOP;
END
$initial_privileges_follow_owner$;

DROP FUNCTION durable.acl_new_owner(pg_catalog.aclitem[], pg_catalog.oid, pg_catalog.oid);

COMMENT ON FUNCTION durable.metrics()
    IS 'Event counters of this database since the last reset (shared memory): journal changes count when their transaction commits, calls (duplicates, stale leases) at once';
