/*-------------------------------------------------------------------------
 *
 * sweep.h
 *		Recovery of lost leases and the sweep pass, shared by sweep(),
 *		instance_start() and the background worker.
 *
 * IDENTIFICATION
 *	  src/sweep.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_SWEEP_H
#define DURABLE_SWEEP_H

#include "durable.h"

/* Most rows one step of a sweep pass handles (one step: one statement). */
#define DURABLE_SWEEP_BATCH		1000

/*
 * Most finished records one pass's retention step deletes.  Smaller than
 * the other steps: the worker rests after a full purge batch in proportion
 * to its duration, and shorter batches spread the same deletes more evenly
 * next to the bots (a million records purged under the bot path at 4
 * clients: its p99 7.0-7.4 ms with 250, 9.4 ms with 1,000; the purge takes
 * 110 s instead of 52).
 */
#define DURABLE_PURGE_BATCH		250

/*
 * How long a process passes over the records (and idle rate-limit buckets)
 * whose purge failed before it tries them again (sweep.c, permit.c).
 */
#define DURABLE_SWEEP_SKIP_RETRY_MS	(10 * 60 * 1000)

/* What one sweep pass did (the columns of sweep()). */
typedef struct DurableSweepResult
{
	int			inbox_expired;	/* expired leases moved to pending or dead */
	int			outbox_ambiguous;	/* expired sends flagged unknown */
	int			outbox_due;		/* deferred or retried sends that came due */
	int64		purged;			/* journal rows deleted by retention */
	bool		scanned_open;	/* the steps that scan every open record ran */
	int64		scan_us;		/* how long they took (wall clock) */
	bool		recovery_full;	/* lease recovery filled its batch: more waits */
	bool		purge_full;		/* retention filled its batch: more waits */
} DurableSweepResult;

/* ---- Lease recovery (recovery.c) ---- */

/*
 * instance_start's recovery: move every inbox lease held under instance
 * `owner` (a text datum) out of `leased` — back to pending, due at now, or
 * to dead (NOTIFY durable_dead) when the record used its last attempt — and
 * flag every send it holds `unknown` (NOTIFY durable_ambiguous).  Each
 * returns how many records moved.  Caller must be connected to SPI.
 */
extern int	durable_recover_instance_inbox(TimestampTz now, Datum owner);
extern int	durable_recover_instance_outbox(TimestampTz now, Datum owner);

/*
 * The sweep's recovery: the same for up to DURABLE_SWEEP_BATCH leases of
 * each journal that expired before the clock of the statement that moves
 * them, each journal in a subtransaction, passing over records whose
 * recovery fails (a WARNING says why).  Returns whether a journal had as
 * many expired leases as it took (more may wait).  Caller must be connected
 * to SPI.
 */
extern bool durable_recover_expired(int *inbox_expired, int *outbox_ambiguous);

/* ---- The sweep pass (sweep.c) ---- */

/*
 * One pass of the sweep: lost leases, due work, retention, expired permits.
 * Each step reads the clock when it runs, not when the pass began (a pass
 * can wait long before a step, and a clock set back meanwhile would make
 * what was granted since look old: recovery.c), and handles at most
 * DURABLE_SWEEP_BATCH rows.  The steps that scan every open record (lease
 * recovery, inbox records that came due) run only when scan_open is true.  windows[queue] is where the previous
 * pass's window of due work ended (0: none), moved on by the pass.  Caller
 * must be in a transaction and connected to SPI; the pass's effects and
 * notifications take effect when that transaction commits.
 */
extern void durable_sweep_pass(bool scan_open, TimestampTz *windows,
							   DurableSweepResult *result);

#endif							/* DURABLE_SWEEP_H */
