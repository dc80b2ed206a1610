/* durable--0.13--0.14.sql: the outbox's dead and unknown sends are counted by state from their index alone */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.14'" to load this file. \quit

/*
 * Why: outbox_parked_idx held the ids of dead and unknown sends together,
 * without their state.  standing() counts each state apart, and durablectl
 * lists each (dlq outbox, unknown) in id order: every count read each
 * parked send from the heap to test its state (~0.2 s per 100,000 parked
 * sends warm, far more cold, evicting the bots' pages), and a listing of
 * the unknown sends walked past every dead one.  Parked sends are never
 * purged, so the cost grows until an operator discards them.  Found by
 * review (2026-12-07).  With the state in the index, a count is an
 * index-only scan.  The state is included, not a key: durable's indexes
 * key on no text column under the database's collation, whose order the
 * operating system's collation tables decide (durable--0.5--0.6.sql); a
 * listing of one state walks the other's entries in the index, not the
 * records.
 *
 * The rebuild reads the whole outbox once, holding its writes (SHARE
 * lock) for that long: update with the bots stopped, as every update.
 *
 * No table changes shape: the 0.14 library serves 0.11 to 0.13 databases
 * too (their counts read the heap, as before).
 *
 * Security notes (as for durable--0.1.sql): every name schema-qualified,
 * operators qualified.
 */

DROP INDEX durable.outbox_parked_idx;
/* Dead and ambiguous sends, with their state. */
CREATE INDEX outbox_parked_idx ON durable.outbox (id) INCLUDE (state)
    WHERE state OPERATOR(pg_catalog.=) ANY (ARRAY['dead', 'unknown']::pg_catalog.text[]);
