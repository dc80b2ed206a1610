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
 * Delete permit records that have left their bucket's window (and buckets
 * left empty), at most `limit` rows; returns how many rows were deleted.
 * Called by the sweep; SPI must be connected.
 */
extern int64 durable_permit_expire(TimestampTz now, int limit);

#endif							/* DURABLE_PERMIT_H */
