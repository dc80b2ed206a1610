-- PgQ producer: one event, 1 commit.
SELECT pgq.insert_event('bench_q', 'msg', '{"text":"hello from the benchmark, about the size of a chat message"}');
