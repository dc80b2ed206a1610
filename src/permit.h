/*-------------------------------------------------------------------------
 *
 * permit.h
 *		Shared sliding-window rate limits (permit()).
 *
 * IDENTIFICATION
 *	  src/permit.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLE_PERMIT_H
#define DURABLE_PERMIT_H

#include "durable.h"

/*
 * Drop the buckets whose permit records have all left their window (by the
 * clock read when it looks), with those records: at most `limit` records
 * and `limit` buckets per call; returns how many rows (records and buckets)
 * were deleted, below `limit` when nothing else was due.  Never waits for a
 * bucket a caller holds (SKIP LOCKED).  Buckets whose drop fails are passed
 * over for 10 minutes, the others dropped: *nfailed says how many failed,
 * *failure the first one's error (NULL when none; the caller frees it).
 * Called by the sweep; SPI must be connected.
 */
extern int64 durable_permit_expire(int limit, int *nfailed, ErrorData **failure);

#endif							/* DURABLE_PERMIT_H */
