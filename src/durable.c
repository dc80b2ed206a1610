/*-------------------------------------------------------------------------
 *
 * durable.c
 *		Module entry point: settings, shared memory and worker registration,
 *		and the test-only fail points.
 *
 * Without shared_preload_libraries everything but the counters, the
 * waiting claims' wake-ups and the background workers still works, so
 * _PG_init defines the settings first and returns early when not
 * preloading.
 *
 * IDENTIFICATION
 *	  src/durable.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include <signal.h>

#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "shmem.h"
#include "worker.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

int			durable_lease_ms = 60 * 1000;
int			durable_inbox_max_attempts = 5;
int			durable_inbox_backoff_base_ms = 1000;
int			durable_inbox_backoff_cap_ms = 60 * 1000;
int			durable_outbox_retries = 5;
int			durable_outbox_backoff_base_ms = 1000;
int			durable_outbox_backoff_cap_ms = 60 * 1000;
int			durable_retention_s = 7 * 24 * 3600;
int			durable_max_payload_bytes = 1024 * 1024;
int			durable_max_error_bytes = 64 * 1024;
int			durable_naptime_ms = 1000;
int			durable_absent_recheck_ms = 30000;
int			durable_max_databases = DURABLE_DEFAULT_MAX_DATABASES;
bool		durable_claim_floor_enabled = true;
int			durable_bound_count = 10000;
int			durable_bound_age_s = 30 * 60;
char	   *durable_fail_point = NULL;
int			durable_notify_payload = DURABLE_NOTIFY_FULL;
double		durable_notify_queue_max = 0.9;

const char *const durable_queue_names[DQ_NUM_QUEUES] = {
	[DQ_INBOX] = "inbox",
	[DQ_OUTBOX] = "outbox",
};

static const struct config_enum_entry notify_payload_options[] = {
	{"full", DURABLE_NOTIFY_FULL, false},
	{"ids", DURABLE_NOTIFY_IDS, false},
	{NULL, 0, false}
};

static void
durable_define_settings(void)
{
	DefineCustomIntVariable("durable.lease",
							"Default lease of a claimed or admitted record.",
							NULL, &durable_lease_ms, 60 * 1000,
							(int) (DURABLE_MIN_LEASE_US / 1000), INT_MAX / 2,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("durable.inbox_max_attempts",
							"Leases of an inbound record before it is dead.",
							NULL, &durable_inbox_max_attempts, 5,
							1, 1000000, PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("durable.inbox_backoff_base",
							"First retry delay of a failed inbound record; it doubles per attempt.",
							NULL, &durable_inbox_backoff_base_ms, 1000,
							0, INT_MAX / 2, PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("durable.inbox_backoff_cap",
							"Longest retry delay of a failed inbound record.",
							NULL, &durable_inbox_backoff_cap_ms, 60 * 1000,
							0, INT_MAX / 2, PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("durable.outbox_retries",
							"Retries of a failed send before it is dead.",
							NULL, &durable_outbox_retries, 5,
							0, 1000000, PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("durable.outbox_backoff_base",
							"First retry delay of a failed send; it doubles per retry.",
							NULL, &durable_outbox_backoff_base_ms, 1000,
							0, INT_MAX / 2, PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("durable.outbox_backoff_cap",
							"Longest retry delay of a failed send.",
							NULL, &durable_outbox_backoff_cap_ms, 60 * 1000,
							0, INT_MAX / 2, PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("durable.retention",
							"How long done inbound and sent outbound records are kept.",
							NULL, &durable_retention_s, 7 * 24 * 3600,
							0, INT_MAX, PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("durable.max_payload_bytes",
							"Largest payload journaled (inbound: larger is refused; outbound: larger bypasses the journal).",
							NULL, &durable_max_payload_bytes, 1024 * 1024,
							1024, MaxAllocSize, PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);
	DefineCustomIntVariable("durable.max_error_bytes",
							"Longest error text of inbox_fail and outbox_failed a record keeps (longer is clipped).",
							NULL, &durable_max_error_bytes, 64 * 1024,
							1024, MaxAllocSize, PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("durable.claim_floor",
							 "Whether inbox and outbox claims start at the database's claim floors.",
							 "Off: claims scan from the oldest record, and see at once "
							 "changes made to the journals by hand.",
							 &durable_claim_floor_enabled, true, PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("durable.naptime",
							"Pause between two sweeps of the background worker.",
							NULL, &durable_naptime_ms, 1000,
							10, 24 * 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("durable.absent_recheck",
							"Pause before the launcher looks again at a database found without durable.",
							"Doubles while the database stays without it, up to ten times this; "
							"CREATE EXTENSION durable is seen at once.",
							&durable_absent_recheck_ms, 30000,
							1000, 24 * 3600 * 1000, PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * A PGC_POSTMASTER setting can only be defined while the postmaster
	 * loads the library (a backend that loads it later would die with
	 * FATAL); it sizes shared memory, which exists only then.  Without
	 * preloading it is defined all the same, with no effect: left in
	 * postgresql.conf, it would otherwise be removed with a WARNING by
	 * MarkGUCPrefixReserved in every backend that loads durable.
	 */
	DefineCustomIntVariable("durable.max_databases",
							"Databases with durable that get a background worker, counters and waiting claims.",
							"Sizes shared memory (a few hundred bytes a database); takes effect at server start, "
							"and only when durable is in shared_preload_libraries.",
							&durable_max_databases, DURABLE_DEFAULT_MAX_DATABASES,
							1, 10000,
							process_shared_preload_libraries_in_progress ? PGC_POSTMASTER : PGC_SIGHUP,
							0, NULL, NULL, NULL);
	DefineCustomIntVariable("durable.bound_count",
							"Waiting records above which standing() reports over_bound.",
							NULL, &durable_bound_count, 10000,
							0, INT_MAX, PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("durable.bound_age",
							"Age of the oldest waiting record above which standing() reports over_bound.",
							NULL, &durable_bound_age_s, 30 * 60,
							0, INT_MAX, PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("durable.notify_payload",
							 "What the NOTIFY payloads on durable_dead and durable_ambiguous carry.",
							 "full: keys, chat ids and errors; ids: record ids only "
							 "(any role that can connect may LISTEN).",
							 &durable_notify_payload, DURABLE_NOTIFY_FULL,
							 notify_payload_options, PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomRealVariable("durable.notify_queue_max",
							 "How full the server's NOTIFY queue may be before durable stops announcing.",
							 "A fraction of the queue (pg_notification_queue_usage()); at or above it "
							 "durable's NOTIFYs are dropped with a WARNING instead of failing the "
							 "transaction once the queue is full.  0 turns them off.",
							 &durable_notify_queue_max, 0.9, 0.0, 1.0, PGC_SUSET, 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("durable.fail_point",
							   "Test only: the named point where a backend dies as if it crashed.",
							   "\"<point>\" ends the backend with FATAL; \"<point>:crash\" kills it so that the server restarts.",
							   &durable_fail_point, "",
							   PGC_SUSET, GUC_NOT_IN_SAMPLE,
							   NULL, NULL, NULL);

	MarkGUCPrefixReserved("durable");
}

void
_PG_init(void)
{
	durable_define_settings();
	/* (the purge's guards are checked with or without preloading) */
	durable_references_install_hook();
	durable_planner_install_hook();

	if (!process_shared_preload_libraries_in_progress)
		return;

	durable_shmem_install_hooks();

	/*
	 * Not in pg_upgrade's servers (-b): pg_upgrade reads the old cluster's
	 * next transaction id before starting it and gives it to the new one, so
	 * a pass writing meanwhile (a purge, a recovered lease) would use ids the
	 * new cluster hands out again -- the reason autovacuum is off there too.
	 */
	if (!IsBinaryUpgrade)
		durable_worker_register_launcher();
	durable_worker_install_hooks();
}

/*
 * Die, or wait, at a fail point (see DURABLE_FAIL_POINT in durable.h).
 */
void
durable_fail_point_hit(const char *name)
{
	size_t		len = strlen(name);
	const char *suffix;

	if (strncmp(durable_fail_point, name, len) != 0)
		return;
	suffix = durable_fail_point + len;
	if (*suffix == '\0')
		ereport(FATAL,
				(errcode(ERRCODE_ADMIN_SHUTDOWN),
				 errmsg("durable fail point \"%s\" reached: terminating the backend", name)));
	if (strcmp(suffix, ":wait") == 0 || strcmp(suffix, ":wait2") == 0)
	{
		/* (":wait2": a second gate, for a test that holds two calls apart) */
		int64		lock = DURABLE_FAIL_POINT_LOCK + (strcmp(suffix, ":wait2") == 0 ? 1 : 0);
		LOCKTAG		tag;

		/* As pg_advisory_lock_shared(lock) and its unlock. */
		SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (lock >> 32), (uint32) lock, 1);
		(void) LockAcquire(&tag, ShareLock, true, false);
		LockRelease(&tag, ShareLock, true);
		return;
	}
	if (strcmp(suffix, ":crash") == 0)
	{
		ereport(LOG,
				(errmsg("durable fail point \"%s:crash\" reached: killing the backend", name)));
		kill(MyProcPid, SIGKILL);
		/* SIGKILL cannot be caught; wait for it to land. */
		for (;;)
			pg_usleep(1000000L);
	}
}
