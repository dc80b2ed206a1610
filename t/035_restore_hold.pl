# t/035_restore_hold.pl
# A restore creates the extension, loads the journals, and adds the foreign
# keys that keep records on purpose only at its end.  Until 2026-12-07 the
# worker's pass in between purged the records those keys were to keep
# (their finish times are the source's, older than the retention): the
# restore then failed on the key, and the records were gone (found by
# review).  Now a COPY into a journal holds the passes' purge until its
# session ends.
#
#   1. by hand: a session that ran COPY into durable.inbox (no rows) holds
#      the purge of a record finished 30 days ago while it is connected,
#      and the record goes within seconds of its end; a COPY refused for
#      lack of privileges holds nothing;
#   2. pg_dump / pg_restore of a database whose audit table references a
#      record finished 30 days ago, with an index whose build sleeps 3 s
#      between the data and the key: the restore succeeds and the record
#      is there.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('restore_hold');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '100ms'\nmax_prepared_transactions = 2\n");
$node->start;

# A record completed, its id.
sub done_record
{
	my ($db, $message) = @_;
	return $node->safe_psql($db, qq{
		SELECT id FROM durable.inbox_admit('tg', '$message', 'chat-$message', '{}', instance => 'bot') a,
		       durable.inbox_complete(a.id, a.token)});
}

# Backdated 30 days (the default retention is 7).
sub backdate
{
	my ($db, $message) = @_;
	$node->safe_psql($db, qq{
		UPDATE durable.inbox SET done_at = now() - interval '30 days',
		                         finished_at = now() - interval '30 days'
		 WHERE message_id = '$message'});
}

sub old_done_record
{
	my ($db, $message) = @_;
	done_record($db, $message);
	backdate($db, $message);
}

sub record_count
{
	my ($db, $message) = @_;
	return $node->safe_psql($db, "SELECT count(*) FROM durable.inbox WHERE message_id = '$message'");
}

# After a COPY that must not hold the purge, its session still connected:
# no session holds it, and a record finished long ago ($message) is purged.
sub takes_no_hold
{
	my ($message) = @_;
	is($node->safe_psql('postgres', q{
			SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1146244164 AND objsubid = 17490}),
		'0', 'and takes no hold');
	old_done_record('postgres', $message);
	ok($node->poll_query_until('postgres',
			"SELECT count(*) = 0 FROM durable.inbox WHERE message_id = '$message'"),
		'while its session is connected, the purge goes on');
}

# ---- 1. the hold, by hand
$node->safe_psql('postgres', 'CREATE EXTENSION durable');
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable worker'"),
	'the database has a worker');
my $offset = -s $node->logfile;
my $loader = $node->background_psql('postgres');
$loader->query_safe("COPY durable.inbox FROM PROGRAM 'true'");
old_done_record('postgres', 'held');
# (20 naptimes)
sleep 2;
is(record_count('postgres', 'held'), '1',
	'while a session that loaded a journal is connected, passes purge nothing');
like(slurp_file($node->logfile, $offset),
	qr/durable's retention purge waits for a session that loaded a journal/, 'the worker logs the hold');
is($node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_locks
		 WHERE locktype = 'advisory' AND classid = 1146244164 AND objsubid = 17490 AND granted}),
	'1', 'pg_locks shows the hold as the LOG line says');
$loader->quit;
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM durable.inbox WHERE message_id = 'held'"),
	'once it ended, the record is purged');
$node->wait_for_log(qr/durable's retention purge goes on/, $offset);

# A COPY whose transaction rolls back lets go of the hold it took: its rows
# are gone (until 2026-12-07 the hold stayed for the rest of the session,
# which a pooled connection may keep for good; found by review). A hold
# taken by a COPY that committed stays through a later one rolled back.
my $hold_count = q{SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1146244164 AND objsubid = 17490};
my $rolled = $node->background_psql('postgres');
$rolled->query_safe(q{BEGIN});
$rolled->query_safe(q{COPY durable.outbox (key, chat_id, payload) FROM '/dev/null'});
$rolled->query_safe(q{COPY durable.inbox (source, message_id, chat_id) FROM '/dev/null'});
is($node->safe_psql('postgres', $hold_count), '1', 'a COPY in a transaction under way holds the purge');
$rolled->query_safe(q{ROLLBACK});
takes_no_hold('not held after a rollback');
$rolled->query_safe(q{COPY durable.outbox (key, chat_id, payload) FROM '/dev/null'});
$rolled->query_safe(q{BEGIN});
$rolled->query_safe(q{COPY durable.outbox (key, chat_id, payload) FROM '/dev/null'});
$rolled->query_safe(q{ROLLBACK});
is($node->safe_psql('postgres', $hold_count), '1',
	'a hold taken by a COPY that committed stays through a later COPY rolled back');
$rolled->quit;
ok($node->poll_query_until('postgres', "$hold_count", '0'), 'and goes when its session ends');

# So does one rolled back in a savepoint or an exception block, the
# transaction around it committing; and pg_advisory_unlock_all() before a
# rollback leaves nothing to complain about (found by review of the first fix).
$rolled = $node->background_psql('postgres', on_error_stop => 0);
$rolled->query_safe(q{BEGIN});
$rolled->query_safe(q{SAVEPOINT s});
$rolled->query_safe(q{COPY durable.inbox (source, message_id, chat_id) FROM '/dev/null'});
$rolled->query_safe(q{ROLLBACK TO s});
$rolled->query_safe(q{COMMIT});
is($node->safe_psql('postgres', $hold_count), '0', 'a COPY rolled back to a savepoint holds nothing after the commit');
$rolled->query_safe(q{DO $$ BEGIN COPY durable.inbox (source, message_id, chat_id) FROM '/dev/null'; RAISE EXCEPTION 'undo';
	EXCEPTION WHEN raise_exception THEN NULL; END $$});
is($node->safe_psql('postgres', $hold_count), '0', 'nor one in an exception block that caught its error');
$rolled->query_safe(q{BEGIN});
$rolled->query_safe(q{SAVEPOINT s});
$rolled->query_safe(q{COPY durable.inbox (source, message_id, chat_id) FROM '/dev/null'});
$rolled->query_safe(q{RELEASE s});
$rolled->query_safe(q{COMMIT});
is($node->safe_psql('postgres', $hold_count), '1', 'one in a savepoint released and committed holds');
$rolled->query_safe(q{SELECT pg_advisory_unlock_all()});
$rolled->{stderr} = '';
$rolled->query_safe(q{BEGIN});
$rolled->query_safe(q{COPY durable.inbox (source, message_id, chat_id) FROM '/dev/null'});
$rolled->query_safe(q{SELECT pg_advisory_unlock_all()});
$rolled->query_safe(q{ROLLBACK});
is($rolled->{stderr}, '', 'a rollback after pg_advisory_unlock_all() warns of nothing');
is($node->safe_psql('postgres', $hold_count), '0', 'and holds nothing');
# Nor does a COPY whose commit fails after it began (a serialization
# failure found at commit: the first fix of 2026-12-07 took the session's
# lock as the commit began, and kept it; found by review)
$node->safe_psql('postgres', 'CREATE TABLE ssi_a (x int); CREATE TABLE ssi_b (x int);
	INSERT INTO ssi_a VALUES (1); INSERT INTO ssi_b VALUES (1)');
my $other = $node->background_psql('postgres');
$other->query_safe(q{BEGIN ISOLATION LEVEL SERIALIZABLE});
$other->query_safe(q{SELECT * FROM ssi_a});
$rolled->query_safe(q{BEGIN ISOLATION LEVEL SERIALIZABLE});
$rolled->query_safe(q{SELECT * FROM ssi_b});
$rolled->query_safe(q{INSERT INTO ssi_a VALUES (2)});
$other->query_safe(q{INSERT INTO ssi_b VALUES (2)});
$other->query_safe(q{COMMIT});
$other->quit;
$rolled->query_safe(q{COPY durable.inbox (source, message_id, chat_id) FROM '/dev/null'});
$rolled->query(q{COMMIT});
like($rolled->{stderr}, qr/could not serialize access/, 'a COPY whose commit fails at its serialization check');
is($node->safe_psql('postgres', $hold_count), '0', 'holds nothing after its failed commit');
$rolled->quit;
$rolled = $node->background_psql('postgres', on_error_stop => 0);
# A prepared transaction holds it until it is committed or rolled back;
# rolled back, nothing is left
$rolled->query_safe(q{BEGIN});
$rolled->query_safe(q{COPY durable.inbox (source, message_id, chat_id) FROM '/dev/null'});
$rolled->query_safe(q{PREPARE TRANSACTION 'load'});
is($node->safe_psql('postgres', $hold_count), '1', 'a prepared transaction that loaded holds the purge');
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'load'});
is($node->safe_psql('postgres', $hold_count), '0', 'rolled back, nothing holds it');
# ... and a session that holds it already can prepare a transaction that loads
$rolled->query_safe(q{COPY durable.inbox (source, message_id, chat_id) FROM '/dev/null'});
$rolled->query_safe(q{BEGIN});
$rolled->query_safe(q{COPY durable.inbox (source, message_id, chat_id) FROM '/dev/null'});
$rolled->query_safe(q{PREPARE TRANSACTION 'load2'});
$node->safe_psql('postgres', q{COMMIT PREPARED 'load2'});
is($node->safe_psql('postgres', $hold_count), '1', 'a session holding it prepares a transaction that loads');
$rolled->quit;
ok($node->poll_query_until('postgres', "$hold_count", '0'), 'and lets go when it ends');

# A COPY refused (a role with USAGE on the schema and no INSERT) holds
# nothing: until 2026-12-07 the hold came before the privilege check, and
# any such role could stop the purge for as long as its session lived
# (found by review).
# (pg_read_server_files: the refusal is the table's INSERT privilege)
$node->safe_psql('postgres', 'CREATE ROLE hold_reader LOGIN IN ROLE pg_read_server_files;
	GRANT USAGE ON SCHEMA durable TO hold_reader');
my $reader = $node->background_psql('postgres', on_error_stop => 0, extra_params => [ '-U', 'hold_reader' ]);
$reader->query("COPY durable.inbox FROM '/dev/null'");
like($reader->{stderr}, qr/permission denied for table inbox/,
	'a COPY into a journal by a role without INSERT is refused');
takes_no_hold('not held');
$reader->quit;

# Nor does a COPY into a table of the caller's named like a journal that
# changes search_path as it runs (in its WHERE clause), so that the name
# resolves to the journal afterwards: until 2026-12-07 the hook resolved
# it then, and any role with USAGE on the schema (a temporary table is
# enough) stopped the purge for as long as its session lived (found by
# review).
$node->safe_psql('postgres', 'GRANT TEMPORARY ON DATABASE postgres TO hold_reader');
$reader = $node->background_psql('postgres', extra_params => [ '-U', 'hold_reader' ]);
$reader->query_safe(q{SET search_path = pg_temp, durable});
$reader->query_safe(q{CREATE TEMP TABLE inbox (x int)});
my $one_row = $node->basedir . '/one_row';
append_to_file($one_row, "1\n");
$reader->query_safe(qq{COPY inbox FROM '$one_row'
	WHERE pg_catalog.set_config('search_path', 'durable, pg_temp', false) IS NOT NULL});
is($reader->query_safe(q{SELECT pg_catalog.current_setting('search_path') || ' ' || (SELECT count(*) FROM pg_temp.inbox)}),
	'durable, pg_temp 1', 'a COPY into a temporary table named inbox that changed search_path ran');
takes_no_hold('not held either');
$reader->quit;

# A COPY from a server file by a role that may not read them fails as
# PostgreSQL fails it, at once: until 2026-12-07 the hook looked the
# journal up with the COPY's lock first, so such a COPY queued for the
# journal's lock behind any session's (a REINDEX, a restore's keys) before
# its refusal.
$node->safe_psql('postgres', 'CREATE ROLE file_stranger LOGIN; GRANT USAGE ON SCHEMA durable TO file_stranger');
my $locker = $node->background_psql('postgres');
$locker->query_safe(q{BEGIN});
$locker->query_safe(q{LOCK durable.inbox IN ACCESS EXCLUSIVE MODE});
for my $source ("FROM '/dev/null'", "FROM PROGRAM 'true'")
{
	my ($stdout, $stderr);
	$node->psql('postgres', "SET lock_timeout = '5s'; COPY durable.inbox $source",
		stdout => \$stdout, stderr => \$stderr, extra_params => [ '-U', 'file_stranger' ]);
	like($stderr, qr/must be superuser or have privileges of the pg_(read_server_files|execute_server_program) role/,
		"COPY durable.inbox $source by a role without the server role is refused without waiting for the journal's lock");
}
$locker->query_safe(q{ROLLBACK});
$locker->quit;

# Nor one whose session looked the name up (to the journal) before another
# session created the table it names in a schema ahead on its search_path:
# the COPY loads that table (its lock makes it look again), and until
# 2026-12-07 the hook, looking up without a lock, took the name's cached
# meaning, the journal (found by review).
$node->safe_psql('postgres', 'CREATE SCHEMA evil AUTHORIZATION hold_reader');
$reader = $node->background_psql('postgres', extra_params => [ '-U', 'hold_reader' ]);
$reader->query_safe(q{BEGIN});
$reader->query_safe(q{SET LOCAL search_path = evil, durable});
is($reader->query_safe(q{SELECT pg_catalog.to_regclass('inbox')}), 'inbox',
	'the name is the journal when the session looks it up');
$node->safe_psql('postgres', 'SET ROLE hold_reader; CREATE TABLE evil.inbox (x int)');
$reader->query_safe(qq{COPY inbox FROM '$one_row'});
$reader->query_safe(q{COMMIT});
is($reader->query_safe(q{SELECT count(*) FROM evil.inbox}), '1',
	'a COPY after another session created a table of that name loads the table');
takes_no_hold('not held either, mid-transaction');
$reader->quit;

# Nor one that another session's CREATE TABLE of that name sends elsewhere
# after the hook looked the name up, before the COPY does: staged here
# with a lock on pg_extension, which the hook reads after its lookup.
# Until 2026-12-07 the hook took the hold for the journal it had found
# (found by review; a loop of COPYs beside a loop of CREATE and DROP
# TABLE won it within a second).
$node->safe_psql('postgres', 'DROP TABLE evil.inbox');
my $creator = $node->background_psql('postgres', extra_params => [ '-U', 'hold_reader' ]);
$creator->query_safe(q{BEGIN});
$creator->query_safe(q{CREATE TABLE evil.inbox (x int)});
$locker = $node->background_psql('postgres');
$locker->query_safe(q{BEGIN});
$locker->query_safe(q{LOCK pg_catalog.pg_extension IN ACCESS EXCLUSIVE MODE});
$reader = $node->background_psql('postgres', extra_params => [ '-U', 'hold_reader' ]);
$reader->query_safe(q{SET search_path = evil, durable});
$reader->query_until(qr/started/, "\\echo started\nCOPY inbox FROM '$one_row';\n");
ok($node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE usename = 'hold_reader' AND wait_event_type = 'Lock' AND query LIKE 'COPY%'}),
	'the COPY waits, its name looked up by the hook');
$creator->query_safe(q{COMMIT});
$locker->query_safe(q{COMMIT});
is($reader->query_safe(q{SELECT count(*) FROM evil.inbox}), '1',
	'the COPY loads the table created meanwhile');
takes_no_hold('not held after a race');
$_->quit for ($reader, $creator, $locker);

# ---- 2. a restore
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
	CREATE EXTENSION durable;
	CREATE FUNCTION public.slow(i int) RETURNS int IMMUTABLE LANGUAGE plpgsql
	  AS $$ BEGIN PERFORM pg_catalog.pg_sleep(3); RETURN i; END $$;
	CREATE TABLE public.audit (inbox_id bigint PRIMARY KEY, note text);
});
my $kept = done_record('src', 'kept');
$node->safe_psql('src', qq{
	INSERT INTO public.audit VALUES ($kept, 'kept for audit');
	ALTER TABLE public.audit ADD FOREIGN KEY (inbox_id) REFERENCES durable.inbox (id);
	-- (built after the data, before the key: 3 s in which passes come)
	CREATE INDEX audit_slow ON public.audit (public.slow(1));
});
backdate('src', 'kept');
ok($node->poll_query_until('src',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable worker' AND datname = 'src'"),
	'the source database has a worker');
sleep 1;
is(record_count('src', 'kept'), '1', 'in the source, the key keeps the record');

my $dump = $node->basedir . '/src.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('src') ], 'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE dst');
$offset = -s $node->logfile;
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('dst'), $dump ],
	'pg_restore succeeds (until 2026-12-07 the pass purged the record and the key failed)');
is(record_count('dst', 'kept'), '1', 'the restored record is there');
like(slurp_file($node->logfile, $offset),
	qr/durable's retention purge waits for a session that loaded a journal/,
	'the passes during the restore were held');
is($node->safe_psql('dst', 'SELECT count(*) FROM public.audit'), '1', 'the audit row is restored');
# After the restore, the key keeps it, and an unreferenced old record goes.
old_done_record('dst', 'later');
ok($node->poll_query_until('dst', "SELECT count(*) = 0 FROM durable.inbox WHERE message_id = 'later'"),
	'after the restore, the purge goes on');
is(record_count('dst', 'kept'), '1', 'and the key keeps the referenced record');

$node->stop;
done_testing();
