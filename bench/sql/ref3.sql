-- reference, 3-step cycle: INSERT; claim the oldest pending row with
-- FOR UPDATE SKIP LOCKED; UPDATE it to done.  3 commits.
\set chat random(1, 100000)
INSERT INTO bench.ref_queue (chat_id, payload) VALUES (:chat::text, '{"text":"hello from the benchmark, about the size of a chat message"}');
\set rid 0
UPDATE bench.ref_queue SET state = 'leased', lease_until = now() + interval '60 s'
 WHERE id = (SELECT id FROM bench.ref_queue WHERE state = 'pending'
              ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id AS rid \aset
\if :rid > 0
UPDATE bench.ref_queue SET state = 'done' WHERE id = :rid::bigint;
\endif
