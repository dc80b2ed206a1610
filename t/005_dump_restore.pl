# t/005_dump_restore.pl: pg_dump and a restore keep the journals.
#
# Every table and sequence of durable is registered with
# pg_extension_config_dump, so a dump holds the rows and the sequence
# positions, not only the empty tables CREATE EXTENSION makes.  A database
# with inbox records pending (one without message id), leased, failed and
# due later, dead and done, and outbox sends pending, deferred, sending,
# sent, failed, dead and unknown, plus a session and permits, is dumped
# (custom format, and plain SQL) and restored into fresh databases:
#
#   - row counts and an md5 over every row of every table are equal;
#   - nextval of the token and id sequences after the restore is above every
#     token and id issued before, so no fencing token is ever issued twice;
#   - the restored journals still work: the leased record completes under
#     its token and only under it, a sent key is answered from the journal,
#     a message seen before is a duplicate;
#   - the GRANTs given to a client role survive, also those made before an
#     update through 0.5 or on the schema before a reinstall.
#
# Run (after the library is installed, as a user that may run postgres):
#   prove -v t/005_dump_restore.pl
# with PATH holding pg_config --bindir and PERL5LIB the PGXS test/perl
# directory (scripts/test does this).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
# The worker sleeps: the records stay exactly as the test leaves them.
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'durable'\ndurable.naptime = '1h'\n");
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
	CREATE EXTENSION durable;
	CREATE ROLE dr_client NOLOGIN;
	GRANT USAGE ON SCHEMA durable TO dr_client;
	GRANT EXECUTE ON FUNCTION durable.inbox_admit(text, text, text, jsonb, text, text, interval),
	                          durable.inbox_complete(bigint, bigint) TO dr_client;
});

# Records in every state.  A lease of an hour keeps the leased ones leased.
my $setup = q{
	-- inbox: done
	SELECT durable.inbox_complete(id, token)
	  FROM durable.inbox_admit('tg', 'done-1', 'chat-1', '{"text":"done"}', instance => 'bot-1');
	-- inbox: pending, and pending without message id (deduplicated by content)
	SELECT * FROM durable.inbox_admit('tg', 'pending-1', 'chat-2', '{"text":"pending"}');
	SELECT * FROM durable.inbox_admit('tg', NULL, 'chat-3', '{"text":"no id"}');
	-- inbox: leased for an hour
	SELECT * FROM durable.inbox_admit('tg', 'leased-1', 'chat-4', '{"text":"leased"}', instance => 'bot-1', lease => '1 hour');
	-- inbox: failed, due again in an hour
	SELECT durable.inbox_fail(id, token, 'handler crashed', '1 hour')
	  FROM durable.inbox_admit('tg', 'failed-1', 'chat-5', '{"text":"failed"}', instance => 'bot-1');
	-- inbox: dead
	SET durable.inbox_max_attempts = 1;
	SELECT durable.inbox_fail(id, token, 'poison message')
	  FROM durable.inbox_admit('tg', 'dead-1', 'chat-6', '{"text":"dead"}', instance => 'bot-1');
	RESET durable.inbox_max_attempts;

	-- outbox: pending, deferred
	SELECT * FROM durable.outbox_enqueue('k-pending', 'chat-1', '{"text":"pending"}');
	SELECT * FROM durable.outbox_enqueue('k-deferred', 'chat-2', '{"text":"later"}', now() + interval '1 day');
	-- outbox: sending (leased for an hour), sent
	SELECT * FROM durable.outbox_begin('k-sending', 'chat-3', '{"text":"sending"}', 'bot-1', lease => '1 hour');
	SELECT durable.outbox_sent(key, token, 'provider-42')
	  FROM durable.outbox_begin('k-sent', 'chat-4', '{"text":"sent"}', 'bot-1');
	-- outbox: failed, dead, unknown
	SELECT durable.outbox_failed(key, token, 'HTTP 502', true, '1 hour')
	  FROM durable.outbox_begin('k-failed', 'chat-5', '{"text":"failed"}', 'bot-1');
	SELECT durable.outbox_failed(key, token, 'HTTP 403', false)
	  FROM durable.outbox_begin('k-dead', 'chat-6', '{"text":"dead"}', 'bot-1');
	SELECT * FROM durable.outbox_begin('k-unknown', 'chat-7', '{"text":"unknown"}', 'bot-old');
	SELECT * FROM durable.instance_start('bot-old');

	-- a session and permits
	SELECT durable.session_save('bot-1', 0, 'session-secret', 1234, 'wss://gateway', 1);
	SELECT durable.permit('identify:1.2.3.4', 5, '1 min');
	SELECT durable.permit('identify:1.2.3.4', 5, '1 min');
};
$node->safe_psql('src', $setup);

my $states_sql = q{
	SELECT (SELECT string_agg(state || '=' || n, ' ' ORDER BY state)
	          FROM (SELECT state, count(*) AS n FROM durable.inbox GROUP BY state) i)
	       || ' | ' ||
	       (SELECT string_agg(state || '=' || n, ' ' ORDER BY state)
	          FROM (SELECT state, count(*) AS n FROM durable.outbox GROUP BY state) o)
};
is($node->safe_psql('src', $states_sql),
	'dead=1 done=1 leased=1 pending=3 | dead=1 failed=1 pending=2 sending=1 sent=1 unknown=1',
	'the source database holds records in every state');

# Rows and a checksum of every table, and the sequences.
my $fingerprint_sql = q{
	SELECT string_agg(format('%s:%s:%s', t, n, h), ' ' ORDER BY t) FROM (
	    SELECT 'inbox' AS t, count(*) AS n, md5(string_agg(r::text, '|' ORDER BY r.id)) AS h FROM durable.inbox r
	    UNION ALL SELECT 'outbox', count(*), md5(string_agg(r::text, '|' ORDER BY r.key)) FROM durable.outbox r
	    UNION ALL SELECT 'sessions', count(*), md5(string_agg(r::text, '|' ORDER BY r.bot, r.shard)) FROM durable.sessions r
	    UNION ALL SELECT 'permit_buckets', count(*), md5(string_agg(r::text, '|' ORDER BY r.bucket)) FROM durable.permit_buckets r
	    UNION ALL SELECT 'permits', count(*), md5(string_agg(r::text, '|' ORDER BY r::text)) FROM durable.permits r) f
};
my $fingerprint = $node->safe_psql('src', $fingerprint_sql);
my $max_token = $node->safe_psql('src',
	'SELECT greatest((SELECT max(token) FROM durable.inbox), (SELECT max(token) FROM durable.outbox))');
my $max_inbox_id = $node->safe_psql('src', 'SELECT max(id) FROM durable.inbox');
my $max_outbox_id = $node->safe_psql('src', 'SELECT max(id) FROM durable.outbox');
my $token_last = $node->safe_psql('src', 'SELECT last_value FROM durable.token_seq');
my ($leased_id, $leased_token) = split /\|/,
  $node->safe_psql('src', "SELECT id, token FROM durable.inbox WHERE message_id = 'leased-1'");
like($fingerprint, qr/inbox:6:\w+ outbox:7:\w+ permit_buckets:1:\w+ permits:2:\w+ sessions:1:\w+/,
	"fingerprint of the source: $fingerprint");
ok($max_token > 0 && $token_last >= $max_token, "tokens issued up to $max_token (token_seq at $token_last)");

# Dump: custom format restored with pg_restore, and plain SQL restored with psql.
my $tempdir = PostgreSQL::Test::Utils::tempdir;
command_ok([ 'pg_dump', '-Fc', '-f', "$tempdir/src.dump", '-d', $node->connstr('src') ],
	'pg_dump -Fc of the source database');
command_ok([ 'pg_dump', '-Fp', '-f', "$tempdir/src.sql", '-d', $node->connstr('src') ],
	'pg_dump -Fp of the source database');

# The dump holds the data of every table and the position of every sequence.
{
	open my $fh, '<', "$tempdir/src.sql" or die "cannot read the plain dump: $!";
	local $/;
	my $plain = <$fh>;
	close $fh;
	foreach my $t (qw(inbox outbox sessions permit_buckets permits))
	{
		like($plain, qr/^COPY durable\.$t \(/m, "the dump holds the rows of durable.$t");
	}
	foreach my $s (qw(inbox_id_seq outbox_id_seq token_seq))
	{
		like($plain, qr/setval\('durable\.$s'/, "the dump holds the position of durable.$s");
	}
	like($plain, qr/session-secret/, 'the dump holds the gateway session ids too: protect dumps as the database');
}

$node->safe_psql('postgres', 'CREATE DATABASE dst');
command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('dst'), "$tempdir/src.dump" ],
	'pg_restore into a fresh database');
$node->safe_psql('postgres', 'CREATE DATABASE dst_sql');
command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('dst_sql'), '-f', "$tempdir/src.sql" ],
	'psql -f of the plain dump into a fresh database');

foreach my $db (qw(dst dst_sql))
{
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
		$node->safe_psql('src', "SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
		"$db: the extension is installed at the same version");
	is($node->safe_psql($db, $fingerprint_sql), $fingerprint,
		"$db: every table has the same rows and the same md5");
	is($node->safe_psql($db, $states_sql), $node->safe_psql('src', $states_sql),
		"$db: the same records in the same states");

	my $next_token = $node->safe_psql($db, "SELECT nextval('durable.token_seq')");
	ok($next_token > $max_token, "$db: the next token ($next_token) is above every token issued before ($max_token)");
	my $next_inbox_id = $node->safe_psql($db, "SELECT nextval('durable.inbox_id_seq')");
	ok($next_inbox_id > $max_inbox_id, "$db: the next inbox id ($next_inbox_id) is above every id before ($max_inbox_id)");
	my $next_outbox_id = $node->safe_psql($db, "SELECT nextval('durable.outbox_id_seq')");
	ok($next_outbox_id > $max_outbox_id,
		"$db: the next outbox id ($next_outbox_id) is above every id before ($max_outbox_id)");

	# The restored journals work.
	is($node->safe_psql($db, "SELECT duplicate FROM durable.inbox_admit('tg', 'done-1', 'chat-1', '{\"text\":\"done\"}')"),
		't', "$db: a message seen before the dump is a duplicate");
	is($node->safe_psql($db, "SELECT duplicate FROM durable.inbox_admit('tg', NULL, 'chat-3', '{\"text\":\"no id\"}')"),
		't', "$db: so is one without message id (the content hash survived)");
	is( $node->safe_psql($db,
			"SELECT action || '/' || provider_message_id FROM durable.outbox_begin('k-sent', 'chat-4', '{\"text\":\"sent\"}', 'bot-2')"),
		'sent/provider-42', "$db: a sent key is answered from the journal, not sent again");
	my ($ret, $out, $err) = $node->psql($db,
		"\\set VERBOSITY verbose\nSELECT durable.inbox_complete($leased_id, $leased_token - 1)");
	like($err, qr/ERROR:\s+DR001/, "$db: the leased record refuses another token (DR001)");
	$node->safe_psql($db, "SELECT durable.inbox_complete($leased_id, $leased_token)");
	is($node->safe_psql($db, "SELECT state FROM durable.inbox WHERE id = $leased_id"),
		'done', "$db: and completes under the token it was leased with before the dump");
	my $new_token = $node->safe_psql($db, "SELECT token FROM durable.inbox_admit('tg', 'new-1', 'chat-9', instance => 'bot-2')");
	ok($new_token > $max_token, "$db: a new lease gets a token ($new_token) never issued before");
	is($node->safe_psql($db, "SELECT session_id || '/' || sequence FROM durable.session_load('bot-1', 0, 'wss://gateway', 1, '1 hour')"),
		'session-secret/1234', "$db: the gateway session survived");

	# Privileges: the client role's GRANTs, and still nothing for PUBLIC.
	is( $node->safe_psql($db, q{
		SELECT has_schema_privilege('dr_client', 'durable', 'USAGE'),
		       has_function_privilege('dr_client', 'durable.inbox_admit(text, text, text, jsonb, text, text, interval)', 'EXECUTE'),
		       has_function_privilege('dr_client', 'durable.inbox_claim(text, integer, interval, interval)', 'EXECUTE'),
		       has_table_privilege('dr_client', 'durable.inbox', 'SELECT')}),
		't|t|f|f', "$db: the client role's GRANTs survived, and nothing more");
	is( $node->safe_psql($db, q{
		SELECT count(*) FROM pg_proc p
		 WHERE p.pronamespace = 'durable'::regnamespace AND has_function_privilege('public', p.oid, 'EXECUTE')}),
		'0', "$db: PUBLIC may still execute no function of durable");
}

# A dump names no extension version: one of a database at 0.9, before
# sessions had owners, restores into the current version.  Its COPY of
# durable.sessions has no owned_by, and the column's default (0.12) makes
# its rows what the update to 0.10 makes them, sessions of no role; before,
# the NOT NULL refused them all and its error printed a session id.
$node->safe_psql('postgres', 'CREATE DATABASE old9');
$node->safe_psql('old9', q{
	CREATE EXTENSION durable VERSION '0.9';
	INSERT INTO durable.sessions (bot, shard, session_id, sequence, resume_url, total_shards, saved_at)
	VALUES ('bot-9', 0, 'secret-of-0.9', 9, 'wss://gateway', 1, now());
	INSERT INTO durable.inbox (source, message_id, chat_id, kind, payload, state, not_before, created_at)
	VALUES ('tg', 'from-0.9', 'chat-9', 'message', '{}', 'pending', now(), now());
});
command_ok([ 'pg_dump', '-Fp', '-f', "$tempdir/old9.sql", '-d', $node->connstr('old9') ],
	'pg_dump -Fp of a database at 0.9');
my $log_offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE from9');
command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('from9'), '-f', "$tempdir/old9.sql" ],
	'the dump of a database at 0.9 restores into the current version');
is($node->safe_psql('from9', "SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
	$node->safe_psql('src', "SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
	'from9: the restore installed the current version');
is($node->safe_psql('from9', "SELECT session_id || '/' || sequence FROM durable.session_load('bot-9', 0, 'wss://gateway', 1, '1 hour')"),
	'secret-of-0.9/9', 'from9: the session saved at 0.9 came over and loads');
is($node->safe_psql('from9', "SELECT owned_by = '' FROM durable.sessions WHERE bot = 'bot-9'"),
	't', 'from9: it belongs to no role, as the update to 0.10 leaves such a session');
is($node->safe_psql('from9', "SELECT count(*) FROM durable.inbox WHERE message_id = 'from-0.9'"),
	'1', 'from9: and the journals came over');
unlike(slurp_file($node->logfile, $log_offset), qr/secret-of-0\.9/, 'no session id reached the server log');

# Grants made on schema durable, metrics() or standing() before the steps
# that grant them to pg_monitor (0.1 -> 0.2, 0.4 -> 0.5) were recorded as
# initial privileges, which pg_dump leaves out, and so were grants on a
# schema durable made before CREATE EXTENSION, as after a reinstall (the
# schema outlives DROP EXTENSION).  Since 0.13 the initial privileges are a
# fresh install's, and a restore has the grants.
$node->safe_psql('postgres', 'CREATE ROLE dr_reader NOLOGIN');
$node->safe_psql('postgres', 'CREATE DATABASE granted_early');
$node->safe_psql('granted_early', q{
	CREATE EXTENSION durable VERSION '0.1';
	GRANT USAGE ON SCHEMA durable TO dr_reader;
	GRANT EXECUTE ON FUNCTION durable.metrics(), durable.standing() TO dr_reader;
	ALTER EXTENSION durable UPDATE;
});
$node->safe_psql('postgres', 'CREATE DATABASE reinstalled');
$node->safe_psql('reinstalled', q{
	CREATE EXTENSION durable;
	GRANT USAGE ON SCHEMA durable TO dr_reader;
	DROP EXTENSION durable;
	CREATE EXTENSION durable;
});
my $reader_privileges_sql = q{
	SELECT has_schema_privilege('dr_reader', 'durable', 'USAGE'),
	       has_function_privilege('dr_reader', 'durable.metrics()', 'EXECUTE'),
	       has_function_privilege('dr_reader', 'durable.standing()', 'EXECUTE')};
foreach my $case ([ 'granted_early', 't|t|t' ], [ 'reinstalled', 't|f|f' ])
{
	my ($db, $privileges) = @$case;
	is($node->safe_psql($db, $reader_privileges_sql), $privileges, "$db: the reader's grants before the dump");
	command_ok([ 'pg_dump', '-Fp', '-f', "$tempdir/$db.sql", '-d', $node->connstr($db) ], "pg_dump -Fp of $db");
	$node->safe_psql('postgres', "CREATE DATABASE ${db}_restored");
	command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr("${db}_restored"),
			'-f', "$tempdir/$db.sql" ], "$db: the dump restores");
	is($node->safe_psql("${db}_restored", $reader_privileges_sql), $privileges,
		"$db: the restore has the same grants");
}

$node->stop;
done_testing();
