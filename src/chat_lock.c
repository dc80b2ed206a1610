/*-------------------------------------------------------------------------
 *
 * chat_lock.c
 *		The per-chat locks that make id order agree with commit order within
 *		a chat, for the inbox's admits and the outbox's enqueues.
 *
 * A claim never leases a record while an older (smaller id) record of its
 * chat is unfinished, and checks that with a probe that sees committed
 * records only.  So within a chat, ids must be drawn in commit order: the
 * calls that journal claimable records take their chat's lock before they
 * draw an id, and hold it until their transaction ends.  Without it, two
 * concurrent calls for one chat could commit in the opposite order of
 * their ids, and a claimer could lease the newer record before the older
 * one is visible (and then lease the older one too: two records of one
 * chat at once, the newer first).  outbox_begin does not take the lock:
 * its send goes out at once, in no chat order (README, the send path).
 *
 * The lock is an advisory lock tag whose first key names the queue ("DRCH"
 * for the inbox, "DOCH" for the outbox), whose second is a keyed hash of
 * the chat id, and whose fourth field is neither of the two that SQL's
 * pg_advisory_lock functions use (1 and 2), so that no role can take it and
 * hold a chat's writes up.  pg_locks shows it to everyone, so the hash is
 * keyed (chat_lock_seed) and does not tell which chats are active.  A
 * transaction that journals for several chats can deadlock with another
 * that journals for the same chats in another order (PostgreSQL detects it
 * and one of them fails).
 *
 * IDENTIFICATION
 *	  src/chat_lock.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "access/xlog.h"
#include "catalog/pg_control.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lock.h"

#define CHAT_LOCK_KEY_INBOX		0x44524348
#define CHAT_LOCK_KEY_OUTBOX	0x444F4348

/*
 * The key of the lock's hash, from the cluster's mock authentication nonce:
 * random, drawn at initdb, never shown to SQL (SCRAM answers with it for
 * roles that do not exist).  So it is the same in every backend, with or
 * without preloading, and after a restart, when a prepared transaction may
 * still hold a chat's lock.
 */
static uint64
chat_lock_seed(void)
{
	static bool known = false;
	static uint64 seed;

	if (!known)
	{
		seed = hash_bytes_extended((const unsigned char *) GetMockAuthenticationNonce(),
								   MOCK_AUTH_NONCE_LEN, 0);
		known = true;
	}
	return seed;
}

static void
chat_lock_tag(DurableQueue queue, Datum chat_id, LOCKTAG *tag)
{
	text	   *t = DatumGetTextPP(chat_id);
	uint32		h = (uint32) hash_bytes_extended((const unsigned char *) VARDATA_ANY(t),
												 (int) VARSIZE_ANY_EXHDR(t),
												 chat_lock_seed());

	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId,
						 queue == DQ_INBOX ? CHAT_LOCK_KEY_INBOX : CHAT_LOCK_KEY_OUTBOX,
						 h, DURABLE_LOCK_FIELD4);
}

void
durable_lock_chat(DurableQueue queue, Datum chat_id)
{
	LOCKTAG		tag;

	chat_lock_tag(queue, chat_id, &tag);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

bool
durable_try_lock_chat(DurableQueue queue, Datum chat_id)
{
	LOCKTAG		tag;

	chat_lock_tag(queue, chat_id, &tag);
	return LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}
