# t/001_worker.pl
# The background workers: a launcher that finds every database where durable
# is installed on its own, one worker per such database that sweeps every
# durable.naptime, and how they live through CREATE/DROP EXTENSION, DROP
# DATABASE (and the other commands that need a database to themselves),
# SIGHUP, SIGTERM, a worker crash and a full shortage of worker slots.
# (Without preloading, sweep() and purge() by hand: t/002_no_preload.pl.)

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

# A query counting the workers of a database.
sub workers_of
{
	my ($db) = @_;
	return "SELECT count(*) FROM pg_stat_activity"
	  . " WHERE backend_type = 'durable worker' AND datname = '$db'";
}

# A query: does the database have exactly $n workers?
sub has_workers
{
	my ($db, $n) = @_;
	return "SELECT (" . workers_of($db) . ") = $n";
}

# A query: do $n renames of database $db wait for pg_database (others wait
# there too at times: autovacuum, a worker starting)?
sub renames_waiting
{
	my ($db, $n) = @_;
	return "SELECT count(*) = $n FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
	  . " WHERE l.relation = 'pg_catalog.pg_database'::regclass AND NOT l.granted"
	  . " AND a.query LIKE 'ALTER DATABASE $db RENAME%'";
}

# A session holding pg_database in SHARE mode: a RENAME of a database waits
# for it after durable's hook ran (the block is taken, the worker stopped).
sub hold_pg_database
{
	my ($node) = @_;
	my $holder = $node->background_psql('postgres');
	$holder->query_safe('BEGIN; LOCK TABLE pg_catalog.pg_database IN SHARE MODE');
	return $holder;
}

# A session that has sent ALTER DATABASE $from RENAME TO $to (which may wait).
sub start_rename
{
	my ($node, $from, $to) = @_;
	my $renamer = $node->background_psql('postgres', on_error_stop => 0);
	$renamer->query_until(qr/renaming/, "\\echo renaming\nALTER DATABASE $from RENAME TO $to;\n");
	return $renamer;
}

# Let the renames waiting behind $holder go on; checks that no worker came
# into database $db while they waited (counted first) and that $renamer's
# rename succeeded, unless the steps since $started took longer than the
# 10 s a block lasts (then the worker may come and the rename fail, as
# documented).  Returns whether the rename failed.
sub blocked_rename_ok
{
	my ($node, $db, $holder, $renamer, $started, $what) = @_;
	my $workers = $node->safe_psql('postgres', workers_of($db));
	my $in_time = time - $started < 8;
	$holder->query_safe('COMMIT');
	my (undef, $failed) = $renamer->query("SELECT 'after'");
	SKIP:
	{
		skip 'the steps took longer than the 10 s block', 2 unless $in_time;
		is($workers, '0', $what);
		is($failed, 0, '... and the rename succeeds') or diag $renamer->{stderr};
	}
	return $failed;
}

# The pid of the worker of a database (empty when none).
sub worker_pid
{
	my ($node, $db) = @_;
	return $node->safe_psql('postgres',
		    "SELECT pid FROM pg_stat_activity"
		  . " WHERE backend_type = 'durable worker' AND datname = '$db'");
}

# End the worker of a database with SIGTERM; true once the launcher has
# replaced it.
sub replace_worker
{
	my ($node, $db) = @_;
	my $old = worker_pid($node, $db);
	$node->safe_psql('postgres', "SELECT pg_terminate_backend($old)");
	return $node->poll_query_until('postgres',
		    "SELECT count(*) = 1 FROM pg_stat_activity"
		  . " WHERE backend_type = 'durable worker' AND datname = '$db' AND pid <> $old");
}

# Admit a record leased for 50 ms, then wait until something (not this
# test) returns it to pending; returns the seconds that took.
sub expire_and_wait
{
	my ($node, $db, $message_id) = @_;
	my $start = time;
	$node->safe_psql($db,
		"BEGIN READ WRITE; SELECT durable.inbox_admit('tap', '$message_id', 'chat-$message_id', instance => 'bot', lease => '50ms'); COMMIT"
	);
	$node->poll_query_until($db,
		"SELECT state = 'pending' FROM durable.inbox WHERE message_id = '$message_id'")
	  or return undef;
	return time - $start;
}

# Seconds within which what the worker or launcher does "at once" must
# happen on a busy machine: well under the alternatives the checks tell it
# from (the absent-database recheck, 30 s; a naptime of 1 h).
my $soon = 15;

my $node = PostgreSQL::Test::Cluster->new('worker');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '100ms'
restart_after_crash = on
max_worker_processes = 16
});
$node->start;

# ---- The launcher ----

ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable launcher'"),
	'the launcher runs, with a backend_type naming durable');
ok($node->log_contains(qr/durable launcher started/), 'the launcher logs its start');

# ---- A database created after the server started ----

$node->safe_psql('postgres', 'CREATE DATABASE late');
$node->safe_psql('late', 'CREATE EXTENSION durable');
ok($node->poll_query_until('late', has_workers('late', 1)),
	'CREATE EXTENSION in a new database starts its worker');
ok($node->log_contains(qr/durable worker started for database "late"/),
	'the worker logs its start');
ok($node->poll_query_until('postgres', has_workers('postgres', 0)),
	'a database without the extension keeps no worker');

my $took = expire_and_wait($node, 'late', 'w1');
ok(defined $took && $took < $soon,
	'the worker alone returns an expired lease to pending within a few naptimes'
);

# ---- SIGHUP ----

$node->safe_psql('postgres', "ALTER SYSTEM SET durable.naptime = '1h'");
$node->reload;
sleep 2;
$node->safe_psql('late',
	"SELECT durable.inbox_admit('tap', 'w2', 'chat-w2', instance => 'bot', lease => '50ms')"
);
sleep 2;
is( $node->safe_psql(
		'late', "SELECT state FROM durable.inbox WHERE message_id = 'w2'"),
	'leased',
	'after a reload to naptime 1h, the worker waits');
my $start = time;
$node->safe_psql('postgres', "ALTER SYSTEM SET durable.naptime = '100ms'");
$node->reload;
ok( $node->poll_query_until(
		'late', "SELECT state = 'pending' FROM durable.inbox WHERE message_id = 'w2'"),
	'after a reload to naptime 100ms, the sleeping worker sweeps at once');
ok(time - $start < $soon, 'within seconds of the reload');

# ---- DROP EXTENSION / CREATE EXTENSION ----

my $offset = -s $node->logfile;
$node->safe_psql('late', 'DROP EXTENSION durable');
ok($node->poll_query_until('late', has_workers('late', 0)),
	'DROP EXTENSION stops the worker');
ok( $node->log_contains(
		qr/durable worker for database "late" stopping: the extension was dropped/,
		$offset),
	'the worker logs why it stopped');
sleep 2;
is($node->safe_psql('late', workers_of('late')),
	'0', 'no worker comes back while the extension is absent');
$start = time;
$node->safe_psql('late', 'CREATE EXTENSION durable');
ok($node->poll_query_until('late', has_workers('late', 1)),
	'CREATE EXTENSION again brings the worker back');
ok(time - $start < $soon, 'at once, not after the absent-database recheck');

# The extension dropped with its schema (or by DROP OWNED): its worker is woken
# at commit too, not left connected until its next pass (an hour here).
$node->safe_psql('postgres', "ALTER SYSTEM SET durable.naptime = '1h'");
$node->reload;
sleep 2;
$node->safe_psql('postgres', 'CREATE ROLE extowner SUPERUSER');
foreach my $drop ('DROP SCHEMA durable CASCADE', 'DROP OWNED BY extowner CASCADE')
{
	if ($drop =~ /OWNED/)
	{
		$node->safe_psql('late', 'DROP EXTENSION durable; DROP SCHEMA IF EXISTS durable CASCADE; SET ROLE extowner; CREATE EXTENSION durable');
		ok($node->poll_query_until('late', has_workers('late', 1)), 'durable installed by extowner has a worker');
	}
	$start = time;
	$node->safe_psql('late', "SET client_min_messages = warning; $drop");
	ok($node->poll_query_until('late', has_workers('late', 0)), "$drop stops the worker");
	ok(time - $start < $soon, '... at once, not at its next pass');
	$node->safe_psql('late', 'CREATE EXTENSION durable');
	ok($node->poll_query_until('late', has_workers('late', 1)), 'CREATE EXTENSION brings it back');
}
$node->safe_psql('postgres', 'DROP ROLE extowner');
$node->safe_psql('postgres', "ALTER SYSTEM RESET durable.naptime");
$node->reload;

# ---- SIGTERM ----

ok(replace_worker($node, 'late'), 'a worker ended by SIGTERM is replaced');

# ---- A database whose sessions default to read-only SERIALIZABLE ----
# Defaults meant for client sessions do not reach the worker: read-only, it
# would fail every pass; serializable, on every lease taken over meanwhile.

$node->safe_psql('postgres',
	    "ALTER DATABASE late SET default_transaction_read_only = on;"
	  . "ALTER DATABASE late SET default_transaction_isolation = 'serializable';"
	  . "ALTER DATABASE late SET lock_timeout = '1ms';");
$offset = -s $node->logfile;
ok(replace_worker($node, 'late'), 'the worker comes back under the new database defaults');
is($node->safe_psql('late', 'SHOW default_transaction_read_only'),
	'on', 'sessions of the database are read-only by default');
$took = expire_and_wait($node, 'late', 'w-read-only');
ok(defined $took && $took < $soon,
	'the worker still returns an expired lease to pending, read-write at READ COMMITTED');
ok(!$node->log_contains(qr/read-only transaction|could not serialize|lock timeout/, $offset),
	'and no pass failed');
$node->safe_psql('postgres', 'ALTER DATABASE late RESET ALL');

# A role set for the database's sessions (its owner may set one) does not reach
# the worker either: under it every pass failed on durable's schema.
foreach my $setting ('role', 'session_authorization')
{
	$node->safe_psql('postgres',
		"CREATE ROLE lowpriv LOGIN; ALTER DATABASE late SET $setting = 'lowpriv'");
	$offset = -s $node->logfile;
	ok(replace_worker($node, 'late'), "the worker comes back under the database's $setting");
	# (The test's own sessions in that database take the role back first.)
	my $reset = $setting eq 'role' ? 'SET role = none' : 'RESET session_authorization';
	$node->safe_psql('late',
		"$reset; SELECT durable.inbox_admit('tap', 'w-$setting', 'chat-w-$setting', instance => 'bot', lease => '50ms')");
	$start = time;
	my $state = '';
	while (time - $start < 10)
	{
		$state = $node->safe_psql('late',
			"$reset; SELECT state FROM durable.inbox WHERE message_id = 'w-$setting'");
		last if $state eq 'pending';
		usleep(100_000);
	}
	is($state, 'pending', "under the database's $setting, the worker returns an expired lease to pending");
	ok(!$node->log_contains(qr/permission denied/, $offset), '... and no pass failed');
	$node->safe_psql('postgres', 'ALTER DATABASE late RESET ALL; DROP ROLE lowpriv');
}

# ---- Commands that need a database to themselves ----

foreach my $db ('doomed', 'renamed', 'source')
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION durable');
	ok($node->poll_query_until($db, has_workers($db, 1)),
		"database $db has a worker");
}

$offset = -s $node->logfile;
$start = time;
my ($ret, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE doomed');
is($ret, 0, 'DROP DATABASE of a database with a running worker succeeds')
  or diag $stderr;
ok(time - $start < 4, 'and completes quickly');
ok(!$node->log_contains(qr/being accessed by other users/, $offset),
	'without waiting for other sessions');
is($node->safe_psql('postgres', workers_of('doomed')),
	'0', 'and leaves no worker behind');

# A rename that PostgreSQL refuses after the hook (the name is taken; the
# owner lacks CREATEDB) leaves the worker alone (until 2026-12-07 the hook
# stopped it all the same: found by review).
ok($node->poll_query_until('postgres', has_workers('renamed', 1)), 'the database to rename has its worker');
my $worker_query = "SELECT pid FROM pg_stat_activity WHERE backend_type = 'durable worker' AND datname = 'renamed'";
my $renamed_worker = $node->safe_psql('postgres', $worker_query);
$node->safe_psql('postgres', 'CREATE ROLE renamer LOGIN NOCREATEDB; ALTER DATABASE renamed OWNER TO renamer');
($ret, $stdout, $stderr) = $node->psql('postgres', 'ALTER DATABASE renamed RENAME TO source');
like($stderr, qr/already exists/, 'a rename to a name taken fails');
($ret, $stdout, $stderr) =
  $node->psql('postgres', 'ALTER DATABASE renamed RENAME TO renamed3', extra_params => [ '-U', 'renamer' ]);
like($stderr, qr/permission denied to rename database/, 'a rename by an owner without CREATEDB fails');
is($node->safe_psql('postgres', $worker_query), $renamed_worker, 'and neither stopped the worker');
$node->safe_psql('postgres', 'ALTER DATABASE renamed OWNER TO CURRENT_USER; DROP ROLE renamer');

$start = time;
($ret, $stdout, $stderr) =
  $node->psql('postgres', 'ALTER DATABASE renamed RENAME TO renamed2');
is($ret, 0, 'ALTER DATABASE RENAME of a database with a running worker succeeds')
  or diag $stderr;
ok($node->poll_query_until('postgres', has_workers('renamed2', 1)),
	'the renamed database gets its worker back');
ok(time - $start < $soon, 'at once');

# SET TABLESPACE, like RENAME, needs the database to itself (untested until
# 2026-12-05; checked by hand in review).
my $tablespace_dir = PostgreSQL::Test::Utils::tempdir_short();
$node->safe_psql('postgres', "CREATE TABLESPACE elsewhere LOCATION '$tablespace_dir'");
($ret, $stdout, $stderr) =
  $node->psql('postgres', 'ALTER DATABASE renamed2 SET TABLESPACE elsewhere');
is($ret, 0, 'ALTER DATABASE SET TABLESPACE of a database with a running worker succeeds')
  or diag $stderr;
ok($node->poll_query_until('postgres', has_workers('renamed2', 1)),
	'the moved database gets its worker back');
is($node->safe_psql('postgres',
		"SELECT t.spcname FROM pg_database d JOIN pg_tablespace t ON t.oid = d.dattablespace WHERE d.datname = 'renamed2'"),
	'elsewhere', 'and it did move');

($ret, $stdout, $stderr) =
  $node->psql('postgres', 'CREATE DATABASE copied TEMPLATE source');
is($ret, 0, 'CREATE DATABASE from a template with a running worker succeeds')
  or diag $stderr;
ok($node->poll_query_until('postgres', has_workers('copied', 1)),
	'the copy, which has the extension, gets a worker of its own');
ok($node->poll_query_until('postgres', has_workers('source', 1)),
	'the template gets its worker back');

# A copy of the database one is connected to: PostgreSQL allows it when no
# other session is connected (createdb leaves its own backend out), so the
# worker must go for it too.  The hook used to pass over the current
# database, and the copy failed after 5 s.
$start = time;
($ret, $stdout, $stderr) =
  $node->psql('source', 'CREATE DATABASE copied_from_inside TEMPLATE source');
is($ret, 0, 'CREATE DATABASE from the database one is connected to succeeds')
  or diag $stderr;
ok(time - $start < 4, 'and completes quickly');
ok($node->poll_query_until('postgres', has_workers('copied_from_inside', 1)),
	'that copy gets a worker of its own');
ok($node->poll_query_until('postgres', has_workers('source', 1)),
	'and the source gets its worker back');

# Inside a transaction block PostgreSQL refuses the copy (25001) after the
# hook has run: the hook leaves the worker alone rather than stop it for
# nothing.
my $source_pid = worker_pid($node, 'source');
($ret, $stdout, $stderr) =
  $node->psql('source', 'BEGIN; CREATE DATABASE never_made TEMPLATE source; COMMIT;');
like($stderr, qr/cannot run inside a transaction block/,
	'CREATE DATABASE inside a transaction block is refused');
is(worker_pid($node, 'source'), $source_pid, 'and the worker of its template keeps running');

# A database made a template after its worker started: any role with CREATEDB
# may copy it, so its worker must go.  The copy stops it at once (the role
# does not own the template) and the launcher keeps it away.
$node->safe_psql('postgres', q{
	CREATE ROLE copier LOGIN CREATEDB;
	CREATE DATABASE tmpl;
});
$node->safe_psql('tmpl', 'CREATE EXTENSION durable');
ok($node->poll_query_until('postgres', has_workers('tmpl', 1)), 'database tmpl has a worker');
$node->safe_psql('postgres', 'ALTER DATABASE tmpl IS_TEMPLATE true');
($ret, $stdout, $stderr) = $node->psql('postgres', 'CREATE DATABASE copy_of_tmpl TEMPLATE tmpl',
	extra_params => [ '-U', 'copier' ]);
is($ret, 0, 'a role with CREATEDB copies a template whose worker ran a moment ago')
  or diag $stderr;
ok($node->poll_query_until('postgres', has_workers('copy_of_tmpl', 1)),
	'the copy gets a worker of its own');
sleep 2;
is($node->safe_psql('postgres', workers_of('tmpl')), '0', 'the template gets none');

# A database closed to connections after its worker started: the launcher
# stops the worker at its next look.
$node->safe_psql('postgres', 'ALTER DATABASE copy_of_tmpl ALLOW_CONNECTIONS false');
ok($node->poll_query_until('postgres', has_workers('copy_of_tmpl', 0)),
	'a database closed to connections loses its worker');
($ret, $stdout, $stderr) = $node->psql('postgres', 'CREATE DATABASE copy_of_closed TEMPLATE copy_of_tmpl',
	extra_params => [ '-U', 'copier' ]);
is($ret, 0, 'its owner copies it') or diag $stderr;

# The same after the launcher restarted: the worker an earlier launcher
# started is stopped through its slot.
$node->safe_psql('postgres', 'CREATE DATABASE closed_later');
$node->safe_psql('closed_later', 'CREATE EXTENSION durable');
ok($node->poll_query_until('postgres', has_workers('closed_later', 1)), 'database closed_later has a worker');
my $launcher = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'durable launcher'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable launcher' AND pid <> $launcher"
	),
	'the launcher ended by SIGTERM is replaced');

# A worker the earlier launcher started and SIGTERM ended: the next one
# starts after the restart delay (1 s at this naptime), as after a worker
# the launcher knows (until 2026-12-05 at once: the new launcher had no
# handle of it to reap).
my $old_worker = worker_pid($node, 'closed_later');
my $ended = $node->safe_psql('postgres',
	"SELECT clock_timestamp() FROM pg_terminate_backend($old_worker)");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable worker'"
		  . " AND datname = 'closed_later' AND pid <> $old_worker"),
	'a worker an earlier launcher started is replaced');
cmp_ok(
	$node->safe_psql('postgres',
		    "SELECT extract(epoch FROM backend_start - '$ended'::timestamptz) FROM pg_stat_activity"
		  . " WHERE backend_type = 'durable worker' AND datname = 'closed_later'"),
	'>=', 0.95, '... after the restart delay');
$start = time;
$node->safe_psql('postgres', 'ALTER DATABASE closed_later ALLOW_CONNECTIONS false');
ok($node->poll_query_until('postgres', has_workers('closed_later', 0)),
	'the new launcher stops the worker of a database closed to connections');
ok(time - $start < $soon, '... at its next look');
$node->safe_psql('postgres', q{
	DROP DATABASE copy_of_closed;
	DROP DATABASE copy_of_tmpl;
	DROP DATABASE closed_later;
	ALTER DATABASE tmpl IS_TEMPLATE false;
	DROP DATABASE tmpl;
	DROP ROLE copier;
});

# ---- A command canceled while it waits for the worker to stop ----
# ALTER DATABASE ... RENAME first stops the database's worker and keeps new
# ones away for 10 s, until the command is over.  Canceled while it waits
# (the worker, stopped with SIGSTOP, cannot exit), it runs no more: the
# database gets a worker again after the usual restart delay (1 s at this
# naptime), not once the 10 s are over (until 2026-12-06).
$node->safe_psql('postgres', 'CREATE DATABASE paused');
$node->safe_psql('paused', 'CREATE EXTENSION durable');
ok($node->poll_query_until('postgres', has_workers('paused', 1)), 'database paused has a worker');
my $paused_pid = worker_pid($node, 'paused');
kill 'STOP', $paused_pid;
my $rename_start = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
($ret, $stdout, $stderr) = $node->psql('postgres',
	"SET statement_timeout = '1s'; ALTER DATABASE paused RENAME TO paused_renamed");
like($stderr, qr/canceling statement due to statement timeout/,
	'a rename waiting for a stopped worker is canceled');
kill 'CONT', $paused_pid;
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable worker'"
		  . " AND datname = 'paused' AND pid <> $paused_pid"),
	'the database gets a worker again');
cmp_ok(
	$node->safe_psql('postgres',
		    "SELECT extract(epoch FROM backend_start - '$rename_start'::timestamptz) FROM pg_stat_activity"
		  . " WHERE backend_type = 'durable worker' AND datname = 'paused'"),
	'<', 7, '... not kept away for the 10 s the rename would have run');
$node->safe_psql('postgres', 'DROP DATABASE paused');

# ---- Stops that must not wait for a naptime or a restart delay ----
# At a naptime of 1 h a worker sleeps between passes, and the restart delay
# is 10 s.
$node->safe_psql('postgres', "ALTER SYSTEM SET durable.naptime = '1h'");
$node->reload;
$node->safe_psql('postgres', 'CREATE DATABASE hup');
$node->safe_psql('hup', 'CREATE EXTENSION durable');
ok($node->poll_query_until('postgres', has_workers('hup', 1)), 'database hup has a worker');
sleep 1;
# DROP EXTENSION's commit wakes the worker, which looks and exits.  A
# SIGHUP that comes before it looks shares the wake: until 2026-12-06 the
# worker then skipped the look and stayed until its next pass (found by
# review).  The worker is stopped while both come.
my $hup_pid = worker_pid($node, 'hup');
kill 'STOP', $hup_pid;
$node->safe_psql('hup', 'DROP EXTENSION durable');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
# (the postmaster passes the SIGHUP on to its children after it reread the
# files: wait until the stopped worker has it pending)
my $hup_pending = 0;
for (my $i = 0; $i < 100 && !$hup_pending; $i++)
{
	my $status = slurp_file("/proc/$hup_pid/status");
	foreach my $field ('SigPnd', 'ShdPnd')
	{
		$hup_pending = 1 if $status =~ /^$field:\s*([0-9a-f]+)$/m && hex($1) & 1;
	}
	usleep(100_000) unless $hup_pending;
}
ok($hup_pending, 'the stopped worker has the SIGHUP pending');
my $woken_at = time;
kill 'CONT', $hup_pid;
ok($node->poll_query_until('postgres', has_workers('hup', 0)),
	'DROP EXTENSION stops the worker, also when a SIGHUP came with its wake');
cmp_ok(time - $woken_at, '<', 10, '... at once, not at its next pass');

# A command that needs its database to itself (RENAME) stops the worker and
# lifts its block when it is over, so the database has its worker back at
# once.  Until 2026-12-06 the launcher, reaping the stopped worker after the
# command was over, held the next one back for the restart delay (found by
# review); here the launcher is stopped during the rename, so that it reaps
# after it.
$node->safe_psql('postgres', 'CREATE DATABASE ren');
$node->safe_psql('ren', 'CREATE EXTENSION durable');
ok($node->poll_query_until('postgres', has_workers('ren', 1)), 'database ren has a worker');
my $launcher_pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'durable launcher'");
kill 'STOP', $launcher_pid;
$node->safe_psql('postgres', 'ALTER DATABASE ren RENAME TO ren_done');
my $renamed_at = time;
kill 'CONT', $launcher_pid;
ok($node->poll_query_until('postgres', has_workers('ren_done', 1)), 'the renamed database gets a worker again');
cmp_ok(time - $renamed_at, '<', 5, '... at once, not after the restart delay of 10 s');

# A database the launcher has not looked at yet (a copy of a template with
# durable) has no slot and no worker to stop, but the launcher may make it
# both between the hook and the command's lock on the database: the command
# then failed, "being accessed by other users" (until 2026-12-07, found by
# review).  The block waits for the slot.  Here the rename waits for
# pg_database, held in SHARE mode, while the launcher looks.  Meanwhile a
# copy of the database fails at once: the first of two commands to end
# lifted the other's block too (until 2026-12-07, found by review); now the
# block lasts until both are over.
$node->safe_psql('postgres', 'CREATE DATABASE seed');
$node->safe_psql('seed', 'CREATE EXTENSION durable');
ok($node->poll_query_until('postgres', has_workers('seed', 1)), 'database seed has a worker');
$launcher_pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'durable launcher'");
kill 'STOP', $launcher_pid;
$node->safe_psql('postgres', 'CREATE DATABASE unseen TEMPLATE seed');
my $catalog_holder = hold_pg_database($node);
my $rename_started = time;
my $renamer = start_rename($node, 'unseen', 'unseen_renamed');
ok( $node->poll_query_until(
		'postgres',
		renames_waiting('unseen', 1)),
	'the rename waits for pg_database');
($ret, $stdout, $stderr) =
  $node->psql('postgres', "CREATE DATABASE unseen_copy TEMPLATE unseen ENCODING 'no such encoding'");
like($stderr, qr/no such encoding/, 'a copy of the database fails meanwhile');
kill 'CONT', $launcher_pid;
ok($node->poll_query_until('postgres', has_workers('seed', 1)),
	'the launcher looked again (seed has its worker back)');
sleep 1;
my $rename_failed = blocked_rename_ok($node, 'unseen', $catalog_holder, $renamer, $rename_started,
	'the launcher starts no worker in the database the waiting rename blocked');
$renamer->quit;
$catalog_holder->quit;
ok( $node->poll_query_until(
		'postgres', has_workers($rename_failed ? 'unseen' : 'unseen_renamed', 1)),
	'the database gets its worker');
$node->safe_psql('postgres', 'DROP DATABASE seed');
$node->safe_psql('postgres', 'DROP DATABASE ' . ($rename_failed ? 'unseen' : 'unseen_renamed'));

# A block lasts 10 s.  A command whose block ran out while it waited, and
# that ends (canceled) while a later command on the database holds a block
# of its own, leaves that block alone: until 2026-12-07 its end lifted the
# later command's block too, and a worker came in and failed it (found by
# review).
$node->safe_psql('postgres', 'CREATE DATABASE twice');
$node->safe_psql('twice', 'CREATE EXTENSION durable');
ok($node->poll_query_until('postgres', has_workers('twice', 1)), 'database twice has a worker');
$catalog_holder = hold_pg_database($node);
my $first = start_rename($node, 'twice', 'twice_first');
ok($node->poll_query_until('postgres', has_workers('twice', 0)), 'the first rename stops the worker');
my $first_pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE query LIKE 'ALTER DATABASE twice RENAME TO twice_first%'");
sleep 11;
my $second_started = time;
my $second = start_rename($node, 'twice', 'twice_second');
ok( $node->poll_query_until(
		'postgres',
		renames_waiting('twice', 2)),
	'a second rename waits too, after the first one\'s block ran out');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($first_pid)");
sleep 2;
my $second_failed = blocked_rename_ok($node, 'twice', $catalog_holder, $second, $second_started,
	'the canceled first rename leaves the second one\'s block alone');
$first->quit;
$second->quit;
$catalog_holder->quit;
$node->safe_psql('postgres', 'DROP DATABASE ' . ($second_failed ? 'twice' : 'twice_second'));
$node->safe_psql('postgres', 'DROP DATABASE hup');
$node->safe_psql('postgres', 'DROP DATABASE ren_done');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET durable.naptime');
$node->reload;
# (the first reload restarted late's worker, whose database settings changed
# above: it is back after the restart delay)
ok($node->poll_query_until('postgres', has_workers('late', 1)), 'database late has its worker');

# ---- A worker crash: the whole server restarts, and so do the workers ----

my $pid = worker_pid($node, 'late');
$offset = -s $node->logfile;
kill 'KILL', $pid;
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable launcher'"),
	'after a worker crash the launcher comes back');
foreach my $db ('late', 'renamed2', 'source', 'copied')
{
	ok($node->poll_query_until('postgres', has_workers($db, 1)),
		"after a worker crash the worker of $db comes back");
}
$took = expire_and_wait($node, 'late', 'w3');
ok(defined $took && $took < $soon, 'and sweeps again');

# ---- Per-database settings reach a running worker at a reload ----
# The README sets durable.inbox_max_attempts and durable.retention per
# database; PostgreSQL applies those when a process connects, and a reload
# reads only the files, so the worker kept the values it started with.  Now
# a reload that finds them changed restarts the worker, which connects with
# them.  A lease that runs out on its first attempt tells which limit the
# worker's lease recovery used: dead with inbox_max_attempts = 1, pending
# with the default 5.
$node->safe_psql('postgres', 'CREATE DATABASE settings');
$node->safe_psql('settings', 'CREATE EXTENSION durable');
ok($node->poll_query_until('postgres', has_workers('settings', 1)), 'settings has its worker');

sub first_attempt_expires_as
{
	my ($message_id) = @_;
	$node->safe_psql('settings',
		"SELECT durable.inbox_admit('tap', '$message_id', '$message_id', instance => 'bot', lease => '2s')");
	$node->poll_query_until('settings',
		"SELECT state <> 'leased' FROM durable.inbox WHERE message_id = '$message_id'")
	  or return 'still leased';
	return $node->safe_psql('settings',
		"SELECT state FROM durable.inbox WHERE message_id = '$message_id'");
}

# Reload, and wait for the worker that replaces $old_pid: its pid.
sub reload_replaces_worker
{
	my ($old_pid) = @_;
	$node->reload;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable worker'"
		  . " AND datname = 'settings' AND pid <> $old_pid")
	  or return undef;
	return worker_pid($node, 'settings');
}

my $settings_pid = worker_pid($node, 'settings');
$offset = -s $node->logfile;
$node->safe_psql('settings', 'ALTER DATABASE settings SET durable.inbox_max_attempts = 1');
my $new_pid = reload_replaces_worker($settings_pid);
ok(defined $new_pid, 'a reload after ALTER DATABASE ... SET restarts the worker');
ok($node->log_contains(
		qr/durable worker for database "settings" restarting to take the settings of ALTER DATABASE/, $offset),
	'and says why');
is(first_attempt_expires_as('s1'), 'dead', 'which runs with the new setting');

$node->safe_psql('settings', 'ALTER DATABASE settings RESET durable.inbox_max_attempts');
$settings_pid = reload_replaces_worker($new_pid // 0);
ok(defined $settings_pid, 'so does a reload after RESET');
is(first_attempt_expires_as('s2'), 'pending', 'the worker is back to the default');

# A reload that changes none of them leaves the worker alone (the lease's
# 2 s give it ample time to see the reload).
$node->reload;
is(first_attempt_expires_as('s3'), 'pending', 'a reload without a change to them');
is(worker_pid($node, 'settings'), $settings_pid // '', 'keeps the worker');

$node->stop;

# ---- No room for workers: one warning per database, with a hint ----

my $tight = PostgreSQL::Test::Cluster->new('tight');
$tight->init;
# The launcher and the logical replication launcher take both slots.
$tight->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '100ms'
max_worker_processes = 2
});
$tight->start;
$tight->safe_psql('postgres', 'CREATE DATABASE crowded');
$tight->safe_psql('crowded', 'CREATE EXTENSION durable');
$tight->wait_for_log(
	qr/durable could not start a worker for database "crowded"/);
sleep 3;
my $log = slurp_file($tight->logfile);
my $warnings = () =
  $log =~ /WARNING:  durable could not start a worker for database "crowded"/g;
is($warnings, 1, 'the shortage of worker slots is reported once per database');
like($log, qr/DETAIL:  All background worker slots have been in use for \d+ s/,
	'once it has lasted');
like(
	$log,
	qr/HINT:  You may need to increase "max_worker_processes"/,
	'with a hint to raise max_worker_processes');

# In a lasting shortage every database is tried in turn.  With a naptime of
# 1 s the launcher looks once a second, just as the database that found no
# room the look before may be tried again: a look that started with the
# first database in pg_database each time would name only that one.
$tight->safe_psql('postgres', 'CREATE DATABASE crowded2');
$tight->safe_psql('crowded2', 'CREATE EXTENSION durable');
$tight->append_conf('postgresql.conf', "durable.naptime = '1s'\nlog_min_messages = debug1\n");
$offset = -s $tight->logfile;
$tight->restart;
my @want = ('postgres', 'crowded', 'crowded2');
my %named;
for (my $i = 0; $i < 150 && keys %named < @want; $i++)
{
	%named = map { $_ => 1 } (slurp_file($tight->logfile, $offset) =~
		  /durable launcher: no background worker slot for database "(\w+)"/g);
	select(undef, undef, undef, 0.1);
}
is(join(' ', grep { $named{$_} } @want), join(' ', @want),
	'in a lasting shortage the launcher tries every database in turn');
$tight->stop;

done_testing();
