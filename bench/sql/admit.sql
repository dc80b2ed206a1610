-- durable, 1 call: journal one message as pending (inbox_admit without
-- instance), 1 commit.  :run and :n (a per-client counter) make message ids unique.
\set chat random(1, 100000)
\set n :n + 1
SELECT id FROM durable.inbox_admit(source => 'bench',
        message_id => :run::text || '-' || :client_id::text || '-' || :n::text,
        chat_id => :chat::text, payload => '{"text":"hello from the benchmark, about the size of a chat message"}');
