/*-------------------------------------------------------------------------
 *
 * load_hold.c
 *		The hold that a bulk load of a journal puts on the passes' purge.
 *
 * A restore (pg_restore, or psql running a plain dump) creates the
 * extension, COPYs the journals' rows, and adds the foreign keys and the
 * triggers that keep records on purpose only at its end.  A pass in
 * between purged the records those keys were to keep: their finish times
 * are the source's, older than the retention, and nothing referenced them
 * yet.  The restore then failed on the foreign key, and the records were
 * gone (found by review, 2026-12-07).  So a COPY into a journal, once it
 * ran (a refused one would let any role with USAGE on the schema stop the
 * purge), takes a session lock that its session keeps until it ends (or
 * lets go of advisory locks: DISCARD ALL), and a pass's retention step
 * purges nothing while another session holds it.  Only a role that may
 * load the journal takes it, and which table the COPY loads is resolved
 * before it runs, as the COPY resolves it, with its lock: resolved again
 * afterwards, the name could point elsewhere, for the COPY may have changed
 * search_path (set_config in its WHERE clause), and a COPY into a
 * temporary table named inbox took the hold (found by review).  The hook
 * is installed only when durable is preloaded.
 * (pg_restore --jobs: its workers, which load the data and add the keys,
 * keep their connections until the restore ends.)
 *
 * The lock is an advisory lock tag whose first key is "DRLD" and whose
 * fourth field is DURABLE_LOCK_FIELD4, one no SQL function takes: loaders take
 * it in share mode, a pass tries it in row exclusive mode (which does not
 * conflict with another pass's) without waiting, and keeps it until its
 * transaction ends: a load that begins meanwhile waits, its rows not yet
 * committed, so that no batch of the pass can see them (a pass that let
 * the lock go at once could read, in the snapshot its batch took next, the
 * rows of a load that had committed in between).  pg_locks shows who
 * holds it (README).  A hold first taken in a (sub)transaction that rolls
 * back is let go with it: its rows are gone, and a pooled connection would
 * otherwise hold the purge for its whole life (found by review).
 *
 * IDENTIFICATION
 *	  src/load_hold.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"

#define LOAD_HOLD_KEY		0x44524C44

static void
load_hold_tag(LOCKTAG *tag)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, LOAD_HOLD_KEY, 0, DURABLE_LOCK_FIELD4);
}

/* Whether the relation is one of durable's journals. */
static bool
load_hold_is_journal(Oid relid)
{
	Oid			nsp = get_namespace_oid("durable", true);
	char	   *name;
	bool		journal;

	if (!OidIsValid(nsp) || get_rel_namespace(relid) != nsp ||
		!OidIsValid(get_extension_oid("durable", true)))
		return false;
	name = get_rel_name(relid);
	journal = name != NULL && (strcmp(name, "inbox") == 0 || strcmp(name, "outbox") == 0);
	if (name != NULL)
		pfree(name);
	return journal;
}

bool
durable_load_hold_target(Node *parsetree)
{
	CopyStmt   *stmt = castNode(CopyStmt, parsetree);
	Oid			relid;

	if (!stmt->is_from || stmt->relation == NULL)
		return false;
	/*
	 * The COPY refuses a server file or program to a role without the
	 * server role before it locks the table; looking the table up with its
	 * lock first made that refusal wait in the journal's lock queue.
	 */
	if (stmt->filename != NULL &&
		!has_privs_of_role(GetUserId(), stmt->is_program ? ROLE_PG_EXECUTE_SERVER_PROGRAM
						   : ROLE_PG_READ_SERVER_FILES))
		return false;
	/*
	 * With the COPY's own lock, which it takes before its privilege check
	 * too: taking it makes the lookup see the catalog as the COPY's will,
	 * where one without a lock could use a cached lookup from before
	 * another session's CREATE TABLE or DROP TABLE (found by review).
	 */
	relid = RangeVarGetRelid(stmt->relation, RowExclusiveLock, true);

	/*
	 * And only for a role that may load the journal: the COPY looks the
	 * name up again, and another session's CREATE TABLE that committed in
	 * between (our lookups above can take catalog changes in) sends it to
	 * another table; without this, a role with no INSERT held the purge
	 * by winning that race (found by review).
	 */
	return OidIsValid(relid) && load_hold_is_journal(relid) &&
		pg_class_aclcheck(relid, GetUserId(), ACL_INSERT) == ACLCHECK_OK;
}

/*
 * The (sub)transaction whose locks hold the hold this transaction took, or
 * InvalidSubTransactionId.  A COPY takes the hold as a transaction lock,
 * which a rollback of its (sub)transaction lets go of with its rows, and
 * which turns into the session's lock as the transaction commits (a
 * prepared transaction keeps it until it is committed or rolled back).
 */
static SubTransactionId load_hold_subid = InvalidSubTransactionId;

/* The session's lock was taken as this transaction began to commit. */
static bool load_hold_session_taken = false;

static void
load_hold_xact_callback(XactEvent event, void *arg)
{
	LOCKTAG		tag;

	load_hold_tag(&tag);
	if (event == XACT_EVENT_PRE_COMMIT && load_hold_subid != InvalidSubTransactionId)
	{
		/* (held by the transaction: granted without a wait) */
		(void) LockAcquire(&tag, ShareLock, true, false);
		load_hold_session_taken = true;
	}

	/*
	 * The commit can still fail after its pre-commit step (a serialization
	 * failure found at commit): the rows are gone, and so is the hold
	 * (found by review).
	 */
	if (event == XACT_EVENT_ABORT && load_hold_session_taken)
		(void) LockRelease(&tag, ShareLock, true);
	if (event != XACT_EVENT_PRE_COMMIT && event != XACT_EVENT_PARALLEL_PRE_COMMIT &&
		event != XACT_EVENT_PRE_PREPARE)
	{
		load_hold_subid = InvalidSubTransactionId;
		load_hold_session_taken = false;
	}
}

static void
load_hold_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
	if (load_hold_subid != mySubid)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		load_hold_subid = InvalidSubTransactionId;	/* its locks went with it */
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
		load_hold_subid = parentSubid;
}

void
durable_load_hold_take(void)
{
	static bool callbacks_registered = false;
	LOCKTAG		tag;

	if (!callbacks_registered)
	{
		RegisterXactCallback(load_hold_xact_callback, NULL);
		RegisterSubXactCallback(load_hold_subxact_callback, NULL);
		callbacks_registered = true;
	}
	if (load_hold_subid != InvalidSubTransactionId)
		return;
	load_hold_tag(&tag);

	/*
	 * Held already by the session (an earlier load): no transaction lock
	 * beside it, which PREPARE TRANSACTION would refuse.
	 */
	if (LockAcquire(&tag, ShareLock, false, false) == LOCKACQUIRE_ALREADY_HELD)
		LockRelease(&tag, ShareLock, false);
	else
		load_hold_subid = GetCurrentSubTransactionId();
}

/*
 * Whether another session that loaded a journal is still connected; if
 * not, this transaction keeps loads away until it ends.
 */
static bool
load_hold_held(void)
{
	LOCKTAG		tag;

	load_hold_tag(&tag);
	return LockAcquire(&tag, RowExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL;
}

bool
durable_purge_on_hold(void)
{
	static bool logged = false;
	bool		held = load_hold_held();

	if (held && !logged)
		ereport(LOG,
				(errmsg("durable's retention purge waits for a session that loaded a journal"),
				 errdetail("A session that ran COPY into durable.inbox or durable.outbox (a restore) holds the purge until it ends: a restore adds the foreign keys that keep records last."),
				 errhint("pg_locks shows it: locktype 'advisory', classid %u, objsubid %u.",
						 LOAD_HOLD_KEY, DURABLE_LOCK_FIELD4)));
	else if (!held && logged)
		ereport(LOG,
				(errmsg("durable's retention purge goes on: no session that loaded a journal is left")));
	logged = held;
	return held;
}
