-- Awkward names, keys and texts (tests.md #14): quotes, SQL fragments, dollar
-- quotes, backslashes, Unicode, control characters, spaces at either end,
-- LIKE wildcards, case, placeholders.  Every one is stored and returned byte
-- for byte, deduplicated as itself, and never run as SQL.
-- This file uses source 'regress-names', and keys, buckets and bots that
-- start with 'names:'.

-- SETUP
CREATE TABLE names_canary (n int);
INSERT INTO names_canary VALUES (1);
CREATE TEMP TABLE awkward (n int PRIMARY KEY, v text NOT NULL);
INSERT INTO awkward VALUES
  (1, $$it's$$),
  (2, $$x'); DELETE FROM names_canary; --$$),
  (3, $$'; DROP TABLE names_canary; --$$),
  (4, '$$'),
  (5, E'back\\slash'),
  (6, 'ünïcödé 😀 中文'),
  (7, E'tab\there'),
  (8, E'new\nline'),
  (9, ' lead and trail '),
  (10, '%_'),
  (11, 'Ab'),
  (12, 'ab'),
  (13, E'\x7f'),
  (14, '"quoted"'),
  (15, '$1'),
  (16, 'durable.inbox'),
  -- past NAMEDATALEN, and two-byte characters up to the 512-byte limit with
  -- the 'names:' prefix the keys below add
  (17, repeat('n', 64)),
  (18, repeat('é', 253));

-- TESTS

-- Inbox: one record per value, leased at once (each value is its own chat), every text as given
SELECT count(*) AS admitted, bool_and(a.state = 'leased') AS all_leased
  FROM awkward w, durable.inbox_admit('regress-names', w.v, w.v, jsonb_build_object('text', w.v),
                                      kind => w.v, instance => w.v) a;
SELECT count(*) AS byte_exact
  FROM awkward w JOIN durable.inbox i
    ON i.source = 'regress-names' AND i.message_id = w.v AND i.chat_id = w.v AND i.kind = w.v
   AND i.owner = w.v AND i.payload ->> 'text' = w.v
   AND convert_to(i.message_id, 'UTF8') = convert_to(w.v, 'UTF8');
-- Each value is a duplicate of itself only ('Ab' and 'ab' are two messages)
SELECT count(*) AS duplicates
  FROM awkward w, durable.inbox_admit('regress-names', w.v, w.v) a
 WHERE a.duplicate;
SELECT count(DISTINCT id) AS records FROM durable.inbox WHERE source = 'regress-names';

-- Sources as given too: each value as the source of one message
SELECT count(*) AS admitted
  FROM awkward w, durable.inbox_admit(w.v, 'names:source', 'names-source-chat') a
 WHERE NOT a.duplicate;
SELECT count(*) AS sources_byte_exact
  FROM awkward w JOIN durable.inbox i
    ON i.message_id = 'names:source' AND i.source = w.v
   AND convert_to(i.source, 'UTF8') = convert_to(w.v, 'UTF8');
DELETE FROM durable.inbox WHERE message_id = 'names:source';

-- A handler's error text comes back as given: stored on the record, and an empty one too
-- (an exception without a message prints as '' in most languages: refusing it would make
-- the failure report fail)
SELECT count(*) AS failed
  FROM awkward w JOIN durable.inbox i ON i.source = 'regress-names' AND i.message_id = w.v,
       durable.inbox_fail(i.id, i.token, w.v, retry_in => '1 hour') f;
SELECT count(*) AS errors_byte_exact
  FROM awkward w JOIN durable.inbox i ON i.source = 'regress-names' AND i.message_id = w.v
 WHERE i.error = w.v;
SELECT id AS empty_id, token AS empty_token
  FROM durable.inbox_admit('regress-names', 'empty-error', 'names-chat', instance => 'bot-1') \gset
SELECT state FROM durable.inbox_fail(:empty_id, :empty_token, '', retry_in => '1 hour');
SELECT error = '' AS empty_error_kept FROM durable.inbox WHERE id = :empty_id;

-- Outbox: keys, chats, provider ids and error texts as given
SELECT count(*) AS sends, bool_and(b.action = 'send') AS all_send
  FROM awkward w, durable.outbox_begin('names:' || w.v, w.v, jsonb_build_object('text', w.v), w.v) b;
SELECT count(*) AS sent
  FROM awkward w JOIN durable.outbox o ON o.key = 'names:' || w.v,
       durable.outbox_sent(o.key, o.token, w.v) s;
SELECT count(*) AS answered_from_journal
  FROM awkward w, durable.outbox_begin('names:' || w.v, w.v, jsonb_build_object('text', w.v), 'bot-2') b
 WHERE b.action = 'sent' AND b.provider_message_id = w.v;
SELECT key AS fail_key, token AS fail_token
  FROM durable.outbox_begin('names:empty-error', 'names-chat', '{}', 'bot-1') \gset
SELECT state FROM durable.outbox_failed(:'fail_key', :fail_token, '', retryable => false);
SELECT state, error = '' AS empty_error_kept FROM durable.outbox WHERE key = :'fail_key';

-- Sessions and permits: names as given
SELECT count(*) AS saved
  FROM awkward w, durable.session_save('names:' || w.v, 0, w.v, w.n, w.v, 1) s;
SELECT count(*) AS loaded_byte_exact
  FROM awkward w, durable.session_load('names:' || w.v, 0, w.v, 1) l
 WHERE l.session_id = w.v AND l.sequence = w.n AND l.ignored IS NULL;
SELECT count(*) AS granted
  FROM awkward w, durable.permit('names:' || w.v, 1, '1 hour') p
 WHERE p = interval '0';
SELECT count(*) AS refused_second
  FROM awkward w, durable.permit('names:' || w.v, 1, '1 hour') p
 WHERE p > interval '0';

-- Nothing above ran as SQL
SELECT count(*) AS canary_rows FROM names_canary;
