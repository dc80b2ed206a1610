-- reference, 1 statement: journal one message (INSERT), 1 commit.
\set chat random(1, 100000)
INSERT INTO bench.ref_queue (chat_id, payload) VALUES (:chat::text, '{"text":"hello from the benchmark, about the size of a chat message"}');
