-- test/memcheck/setup.sql: the load phase's function (see chaos.sql).
CREATE SCHEMA memcheck;
CREATE FUNCTION memcheck.chaos(c int, chat int, k int) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  r record;
  n int := (random() * 4)::int;
BEGIN
  BEGIN
    SELECT * INTO r FROM durable.inbox_admit(source => 'vg', message_id => c || '-' || random()::text,
        chat_id => chat::text, payload => '{"t":1}', instance => 'vg-' || c, lease => '40ms');
    IF r.token IS NOT NULL THEN
      IF n = 1 THEN
        PERFORM durable.inbox_complete(r.id, r.token);
      ELSIF n = 2 THEN
        PERFORM durable.inbox_fail(r.id, r.token, repeat('boom ', (random() * 1000)::int), retry_in => '30ms');
      ELSIF n = 3 THEN
        PERFORM durable.outbox_enqueue(NULL, chat::text, '{"reply":1}', inbound_id => r.id, inbound_token => r.token);
        PERFORM durable.inbox_complete(r.id, r.token);
      END IF;
    END IF;
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  BEGIN
    FOR r IN SELECT * FROM durable.inbox_claim(instance => 'vg-c' || c, max => 5, lease => '40ms') LOOP
      IF random() < 0.5 THEN
        PERFORM durable.inbox_complete(r.id, r.token);
      END IF;
    END LOOP;
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  BEGIN
    SELECT * INTO r FROM durable.outbox_begin(idempotency_key => 'b' || chat || '-' || k, chat_id => chat::text,
        payload => '{}', instance => 'vg-' || c, lease => '30ms');
    IF r.action = 'send' AND random() < 0.5 THEN
      PERFORM durable.outbox_sent(r.key, r.token, 'p' || k);
    END IF;
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  BEGIN
    PERFORM durable.outbox_enqueue(idempotency_key => 'e' || random()::text, chat_id => chat::text,
        payload => '{}', not_before => clock_timestamp() + interval '100 ms');
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  BEGIN
    FOR r IN SELECT * FROM durable.outbox_claim(instance => 'vg-s' || c, max => 3, lease => '30ms') LOOP
      IF random() < 0.4 THEN
        PERFORM durable.outbox_sent(r.key, r.token, 'p');
      ELSIF random() < 0.5 THEN
        PERFORM durable.outbox_failed(r.key, r.token, 'nope', retryable => random() < 0.7);
      END IF;
    END LOOP;
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  IF random() < 0.02 THEN
    BEGIN
      PERFORM durable.instance_start('vg-' || c);
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
  END IF;
  IF random() < 0.02 THEN
    BEGIN
      PERFORM durable.outbox_retry(key) FROM durable.outbox WHERE state IN ('dead', 'unknown') LIMIT 3;
      PERFORM durable.inbox_replay(id) FROM durable.inbox
        WHERE finished_at IS NOT NULL AND done_at IS NULL AND state = 'dead' LIMIT 3;
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
  END IF;
  IF random() < 0.05 THEN
    PERFORM durable.session_save('vg-bot', c % 4, 'session-' || k, k, 'wss://example.invalid/' || k, 4);
    PERFORM durable.session_load('vg-bot', c % 4, 'wss://example.invalid/' || k, 4);
    PERFORM durable.permit('vg-identify', 1, '50ms');
  END IF;
END $$;
