/* durable--0.1--0.2.sql: monitoring views over metrics() and standing(), readable by pg_monitor */

\echo Use "ALTER EXTENSION durable UPDATE TO '0.2'" to load this file. \quit

/*
 * Security notes (as for durable--0.1.sql): plain CREATE only, so a view
 * planted beforehand under one of these names makes the update fail instead
 * of being adopted; every name is schema-qualified.
 *
 * Who may read: a view's relations are checked against the view's owner,
 * but the functions it calls are checked against the role querying it, so
 * pg_monitor gets EXECUTE on metrics() and standing() as well as SELECT on
 * the views, and USAGE on the schema to reach them.  Neither function shows
 * a payload, an id or a secret: counts, timestamps and the bound message.
 * metrics_reset() stays revoked from everybody but the extension owner.
 */

CREATE VIEW durable.stat_counters AS
    SELECT * FROM durable.metrics();
COMMENT ON VIEW durable.stat_counters
    IS 'One row: the event counters of this database since the last metrics_reset() (grows monotonically; scrape as counters)';

CREATE VIEW durable.stat_standing AS
    SELECT * FROM durable.standing();
COMMENT ON VIEW durable.stat_standing
    IS 'One row: the journals'' records by state, the oldest waiting record and whether the bounds are exceeded (scrape as gauges)';

GRANT USAGE ON SCHEMA durable TO pg_monitor;
GRANT EXECUTE ON FUNCTION durable.metrics(), durable.standing() TO pg_monitor;
GRANT SELECT ON durable.stat_counters, durable.stat_standing TO pg_monitor;
