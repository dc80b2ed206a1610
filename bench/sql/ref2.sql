-- reference, 2-statement cycle: INSERT a leased row, UPDATE it to done by id
-- (the hand-written equivalent of the send path and of admit-and-lease), 2 commits.
\set chat random(1, 100000)
INSERT INTO bench.ref_queue (chat_id, payload, state, lease_until)
     VALUES (:chat::text, '{"text":"hello from the benchmark, about the size of a chat message"}', 'leased', now() + interval '60 s')
  RETURNING id AS rid \gset
UPDATE bench.ref_queue SET state = 'done' WHERE id = :rid::bigint;
