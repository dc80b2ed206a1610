--
-- instance_start(): a booting replica recovers the leases of its dead
-- incarnation at once, without waiting for them to expire.
--

-- SETUP
SELECT durable.metrics_reset();
-- The outcome of a statement as a SQLSTATE ('ok' when it succeeds)
CREATE FUNCTION pg_temp.sqlstate_of(statement text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;
-- The dead incarnation of instance inst-old held two inbound records and one
-- send under live leases, and had finished one send; inst-other is alive
SELECT state, token IS NOT NULL AS leased
  FROM durable.inbox_admit('instance', 'i1', 'inst-chat-1', '{}', instance => 'inst-old', lease => '1h');
SELECT state, token IS NOT NULL AS leased
  FROM durable.inbox_admit('instance', 'i2', 'inst-chat-2', '{}', instance => 'inst-old', lease => '1h');
SELECT state, token IS NOT NULL AS leased
  FROM durable.inbox_admit('instance', 'i3', 'inst-chat-3', '{}', instance => 'inst-other', lease => '1h');
SELECT action FROM durable.outbox_begin('inst-k1', 'inst-chat-1', '{}', 'inst-old', lease => '1h');
SELECT count(*) AS sent
  FROM durable.outbox_begin('inst-k2', 'inst-chat-2', '{}', 'inst-old') b,
       durable.outbox_sent(b.key, b.token, 'provider-1') s;
SELECT action FROM durable.outbox_begin('inst-k3', 'inst-chat-3', '{}', 'inst-other', lease => '1h');
CREATE TEMP TABLE old_leases AS
    SELECT id, token FROM durable.inbox WHERE source = 'instance' AND owner = 'inst-old';

-- TESTS

-- The restarted inst-old recovers its two inbound leases and its one send in flight
SELECT * FROM durable.instance_start('inst-old');
-- Its records are pending and due now, owner and attempts kept; inst-other's lease is untouched
SELECT message_id, state, owner, attempts, lease_until IS NULL AS lease_cleared,
       CASE WHEN state = 'pending' THEN not_before <= clock_timestamp() END AS due
  FROM durable.inbox WHERE source = 'instance' ORDER BY message_id;
-- Its send in flight is unknown (it may have reached the provider); the sent one and inst-other's stay
SELECT key, state, owner FROM durable.outbox WHERE key LIKE 'inst-%' ORDER BY key;
SELECT outbox_ambiguous FROM durable.metrics();
-- A late confirmation from the dead incarnation is refused (DR001), for each of its leases
SELECT i.message_id,
       pg_temp.sqlstate_of(format('SELECT durable.inbox_complete(%s, %s)', o.id, o.token)) AS complete
  FROM old_leases o JOIN durable.inbox i USING (id) ORDER BY i.message_id;
-- Calling it again finds nothing left
SELECT * FROM durable.instance_start('inst-old');
-- An instance that held nothing recovers nothing
SELECT * FROM durable.instance_start('inst-never-seen');

-- A lease held on the record's last attempt sends it to dead, with the reason
SET durable.inbox_max_attempts = 1;
SELECT state, token IS NOT NULL AS leased
  FROM durable.inbox_admit('instance', 'i4', 'inst-chat-4', '{}', instance => 'inst-last', lease => '1h');
SELECT * FROM durable.instance_start('inst-last');
SELECT state, attempts, error, lease_until IS NULL AS lease_cleared
  FROM durable.inbox WHERE message_id = 'i4' AND source = 'instance';
SELECT inbound_dead FROM durable.metrics();
RESET durable.inbox_max_attempts;

-- Bad arguments (22023)
\set VERBOSITY terse
-- NULL instance
SELECT * FROM durable.instance_start(NULL);
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
-- empty instance
SELECT * FROM durable.instance_start('');
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
-- instance over 512 bytes
SELECT * FROM durable.instance_start(repeat('x', 513));
SELECT :'LAST_ERROR_SQLSTATE' AS sqlstate;
\set VERBOSITY default

-- CLEANUP
DROP TABLE old_leases;
DELETE FROM durable.inbox WHERE source = 'instance';
DELETE FROM durable.outbox WHERE key LIKE 'inst-%';
