/* durable--0.7--0.8.sql: outbox_enqueue takes inbound_token; outbox_begin returns a diverged key's journaled chat and payload; permits gets a replica identity */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.8'" to load this file. \quit

/*
 * Why, 1: outbox_begin is fenced (with inbound_id, inbound_token must be
 * the inbound record's live lease, else DR001), but outbox_enqueue took no
 * token.  A handler that lost its lease and enqueued with inbound_id took
 * the next derived key of the handler that holds the lease now: its reply
 * made the holder's matching reply look new, and both went out.  The
 * contract lets a function gain an optional argument at the end, so
 * outbox_enqueue gains inbound_token DEFAULT NULL; without it, it behaves
 * as in 0.7.
 *
 * Why, 2: a repeat of a key with another chat or payload is answered from
 * the journal, whose send stands; but when that send was due (pending, or
 * failed and due again), outbox_begin leased it to the caller with action
 * send and the caller, told nothing else, sent its own payload while the
 * journal recorded the other.  A handler that words its reply anew each
 * time (a language model) re-derives its keys with new payloads, so this
 * is not rare.  outbox_begin gains two result columns at the end (the
 * contract allows it), journaled_chat_id and journaled_payload: set when
 * the journal holds another chat or payload for the key, so that the
 * caller sends what the journal says.
 *
 * A changed argument list or result type changes the function's identity:
 * each function is dropped and created again (keeping both would make every
 * call that omits inbound_token ambiguous).  A user object that records a
 * dependency on the old function (a view calling it, a function with a
 * BEGIN ATOMIC body) makes the update fail with the dependency named;
 * nothing is dropped with CASCADE.  A function whose body is a string
 * records none, and meets the new function at its next call.
 *
 * The new function carries over the old one's privileges exactly, so bots
 * keep calling it through the update: the same ACL, grantors and grant
 * options included (a grant that a holder of the grant option passed on
 * stays that holder's, so REVOKE ... CASCADE and DROP OWNED still reach
 * it), and nothing else: a new function gets its creator's default
 * privileges (ALTER DEFAULT PRIVILEGES ... ON FUNCTIONS), and those are
 * dropped, as 0.5 and 0.7 revoke them on a fresh install.  Its owner is the
 * old one's, since a SECURITY DEFINER function runs as its owner.
 *
 * GRANT cannot do that: it records the granting role as grantor, and every
 * GRANT or REVOKE run by an extension script is recorded as the object's
 * initial privileges (pg_init_privs), from which pg_dump writes the
 * difference -- a carried-over grant would look initial and be missing
 * from dumps, and a restore, which installs a fresh durable, would lose
 * it.  So the catalog rows are copied: the ACL (pg_proc.proacl), its
 * shared dependencies (pg_shdepend, deptype 'a', which DROP ROLE and DROP
 * OWNED follow; and 'i', initial privileges, which PostgreSQL 17 records),
 * and the initial privileges themselves.
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified,
 * operators qualified; the DDL is built with format() from catalog names
 * (%I, regprocedure output).  The helper below exists only while this
 * script runs.
 */

CREATE FUNCTION durable.replace_keeping_privileges(old_fn pg_catalog.regprocedure,
                                                   create_new pg_catalog.text,
                                                   new_name pg_catalog.text)
RETURNS pg_catalog.void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $replace_keeping_privileges$
DECLARE
    new_fn pg_catalog.oid;
    old_owner pg_catalog.oid;
    old_acl pg_catalog.aclitem[];
    old_init pg_catalog.pg_init_privs;
    old_acl_deps pg_catalog.pg_shdepend[];
BEGIN
    SELECT p.proowner, p.proacl INTO old_owner, old_acl
      FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) old_fn;
    SELECT * INTO old_init
      FROM pg_catalog.pg_init_privs i
     WHERE i.objoid OPERATOR(pg_catalog.=) old_fn
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND i.objsubid OPERATOR(pg_catalog.=) 0;
    SELECT pg_catalog.array_agg(d) INTO old_acl_deps
      FROM pg_catalog.pg_shdepend d
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND d.objid OPERATOR(pg_catalog.=) old_fn
       AND d.deptype OPERATOR(pg_catalog.=) ANY ('{a,i}'::pg_catalog.char[]);

    EXECUTE pg_catalog.format('DROP FUNCTION %s', old_fn);
    EXECUTE create_new;
    new_fn := new_name::pg_catalog.regprocedure;
    EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO %I', new_name, pg_catalog.pg_get_userbyid(old_owner));

    UPDATE pg_catalog.pg_proc p SET proacl = old_acl WHERE p.oid OPERATOR(pg_catalog.=) new_fn;
    DELETE FROM pg_catalog.pg_shdepend d
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND d.objid OPERATOR(pg_catalog.=) new_fn
       AND d.deptype OPERATOR(pg_catalog.=) ANY ('{a,i}'::pg_catalog.char[]);
    INSERT INTO pg_catalog.pg_shdepend (dbid, classid, objid, objsubid, refclassid, refobjid, deptype)
    SELECT d.dbid, d.classid, new_fn, d.objsubid, d.refclassid, d.refobjid, d.deptype
      FROM pg_catalog.unnest(old_acl_deps) d;
    DELETE FROM pg_catalog.pg_init_privs i
     WHERE i.objoid OPERATOR(pg_catalog.=) new_fn
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND i.objsubid OPERATOR(pg_catalog.=) 0;
    IF old_init.objoid IS NOT NULL THEN
        INSERT INTO pg_catalog.pg_init_privs (objoid, classoid, objsubid, privtype, initprivs)
        VALUES (new_fn, old_init.classoid, 0, old_init.privtype, old_init.initprivs);
    END IF;
END
$replace_keeping_privileges$;

SELECT durable.replace_keeping_privileges(
    'durable.outbox_enqueue(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.timestamptz, pg_catalog.int8)'::pg_catalog.regprocedure,
    $create$
    CREATE FUNCTION durable.outbox_enqueue(
        idempotency_key pg_catalog.text,
        chat_id pg_catalog.text,
        payload pg_catalog.jsonb,
        not_before pg_catalog.timestamptz DEFAULT pg_catalog.now(),
        inbound_id pg_catalog.int8 DEFAULT NULL,
        inbound_token pg_catalog.int8 DEFAULT NULL)
    RETURNS TABLE(key pg_catalog.text, created pg_catalog.bool, state pg_catalog.text)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'durable_outbox_enqueue'
    $create$::pg_catalog.text,
    'durable.outbox_enqueue(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.timestamptz, pg_catalog.int8, pg_catalog.int8)'::pg_catalog.text);
COMMENT ON FUNCTION durable.outbox_enqueue(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.timestamptz, pg_catalog.int8, pg_catalog.int8)
    IS 'Journal a send for later or for a sender loop; a repeated key does nothing';

SELECT durable.replace_keeping_privileges(
    'durable.outbox_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.interval, pg_catalog.int8, pg_catalog.int8)'::pg_catalog.regprocedure,
    $create$
    CREATE FUNCTION durable.outbox_begin(
        idempotency_key pg_catalog.text,
        chat_id pg_catalog.text,
        payload pg_catalog.jsonb,
        instance pg_catalog.text,
        lease pg_catalog.interval DEFAULT NULL,
        inbound_id pg_catalog.int8 DEFAULT NULL,
        inbound_token pg_catalog.int8 DEFAULT NULL)
    RETURNS TABLE(action pg_catalog.text, key pg_catalog.text, token pg_catalog.int8,
                  provider_message_id pg_catalog.text, state pg_catalog.text,
                  journaled_chat_id pg_catalog.text, journaled_payload pg_catalog.jsonb)
    LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'durable_outbox_begin'
    $create$::pg_catalog.text,
    'durable.outbox_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.interval, pg_catalog.int8, pg_catalog.int8)'::pg_catalog.text);
COMMENT ON FUNCTION durable.outbox_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.interval, pg_catalog.int8, pg_catalog.int8)
    IS 'Journal a send before calling the provider; a repeated key is answered from the journal';

DROP FUNCTION durable.replace_keeping_privileges(pg_catalog.regprocedure, pg_catalog.text, pg_catalog.text);

/*
 * A publication FOR ALL TABLES (logical replication, change data capture)
 * publishes durable's tables too, and PostgreSQL refuses a DELETE on a
 * published table that has no replica identity, even one that deletes no
 * row.  durable.permits had none (no primary key: (bucket, granted_at) may
 * repeat), so every permit() call failed, and so did every sweep pass that
 * dropped an idle bucket, which stopped lease recovery with it.  The other
 * tables have primary keys.  The identity is the whole row: the table is
 * small (each bucket keeps one window of permits).
 */
ALTER TABLE durable.permits REPLICA IDENTITY FULL;
