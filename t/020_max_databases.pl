# t/020_max_databases.pl
# durable.max_databases sizes the shared memory that tracks databases with
# durable: each one's counters, waiting claims and background worker.  Here
# it is 2, so the third database with durable finds every slot taken:
#   - the launcher warns that it cannot start a worker there, with the
#     setting to raise in its hint, once until the database gets a slot;
#   - the journals still work there: an admit succeeds, and its backend
#     warns once (not at every call);
#   - metrics() there is an error with SQLSTATE 53400 and the same hint;
#   - once another database drops durable, the third gets the slot and its
#     worker, and metrics() answers;
#   - a template that created and dropped durable gives its slot back, also
#     when both were in one transaction;
#   - a database that keeps durable but gets no worker (made a template,
#     or closed to connections) gives its slot to one that gets a worker,
#     and takes a slot back once it gets a worker again;
#   - a backend that finds every slot taken, one by a database without
#     durable, takes that one itself, without a warning.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('maxdb');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '100ms'
durable.max_databases = 2
log_min_messages = debug1
});
$node->start;

is($node->safe_psql('postgres', 'SHOW durable.max_databases'), '2',
	'durable.max_databases is read at server start');

sub has_worker
{
	my ($db) = @_;
	return "SELECT count(*) = 1 FROM pg_stat_activity"
	  . " WHERE backend_type = 'durable worker' AND datname = '$db'";
}

for my $db (qw(first second))
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, 'CREATE EXTENSION durable');
	ok($node->poll_query_until($db, has_worker($db)), "database $db gets its worker");
}

my $offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE third');
$node->safe_psql('third', 'CREATE EXTENSION durable');

my $warned = 0;
for (my $i = 0; $i < 300 && !$warned; $i++)
{
	$warned = slurp_file($node->logfile, $offset) =~
	  /WARNING:  durable cannot start a worker for database "third"/;
	select(undef, undef, undef, 0.1) unless $warned;
}
ok($warned, 'the launcher warns that the third database gets no worker');
like(slurp_file($node->logfile, $offset), qr/HINT:  Raise "durable.max_databases"/,
	'and says which setting to raise');
# The launcher keeps looking (every naptime), but warns once.
sleep 1;
my $launcher_warnings = () = slurp_file($node->logfile, $offset) =~
  /durable cannot start a worker for database "third"/g;
is($launcher_warnings, 1, 'once');
is($node->safe_psql('third', has_worker('third')), 'f', 'no worker runs there');

# The journals work without the slot; the backend warns once, not per call.
my ($rc, $stdout, $stderr) = $node->psql(
	'third', q{
SELECT state FROM durable.inbox_admit('maxdb', 'm1', 'chat-1', instance => 'i1');
SELECT state FROM durable.inbox_admit('maxdb', 'm2', 'chat-2', instance => 'i1');
});
is($rc, 0, 'admits succeed in the database without a slot');
is($stdout, "leased\nleased", 'and lease their records');
my $backend_warnings = () = $stderr =~ /WARNING:  durable tracks at most 2 databases/g;
is($backend_warnings, 1, 'its backend warns once') or diag($stderr);

($rc, $stdout, $stderr) = $node->psql(
	'third', q{\set VERBOSITY verbose
SELECT * FROM durable.metrics();});
like($stderr, qr/ERROR:  53400: durable has no counters for this database/,
	'metrics() there fails with 53400 (configuration limit exceeded)');
like($stderr, qr/HINT:  Raise "durable.max_databases"/, 'with the hint');

# durablectl status there reports the gauges, and why the counters are
# missing, among what needs attention (it failed with 53400 until 2026-12-05)
my $ctl = ($ENV{DURABLE_ROOT} // "$FindBin::Bin/..") . '/cli/durablectl';
SKIP:
{
	skip 'cli/durablectl is not built', 2 unless -x $ctl;
	my ($ctl_out, $ctl_err) = ('', '');
	my $ctl_ok = IPC::Run::run [ $ctl, '-d', $node->connstr('third'), 'status' ],
	  '>', \$ctl_out, '2>', \$ctl_err;
	ok($ctl_ok, 'durablectl status in the database without a slot: status 0') or diag($ctl_err);
	like($ctl_out,
		qr/Inbox:   0 pending, 2 leased.*Counters: unavailable \(this database got no shared-memory slot.*Needs attention:\n  - no worker \(no lease recovery, no retention\) and no counters/s,
		'it shows the gauges, says why the counters are missing, and that the database has no worker')
	  or diag($ctl_out);
}

# A slot freed by another database goes to the third.
$node->safe_psql('first', 'DROP EXTENSION durable');
ok($node->poll_query_until('third', has_worker('third')),
	'once another database drops durable, the third gets its worker');
ok( $node->poll_query_until(
		'third', 'SELECT inbound_journaled >= 0 FROM durable.metrics()'),
	'and its counters');
is($node->safe_psql('second', has_worker('second')), 't', 'the second keeps its worker');

# Once per shortage, not once for good: a database that got a slot, lost it
# and finds none is warned about again (until 2026-12-05 it never was).
$offset = -s $node->logfile;
$node->safe_psql('third', 'DROP EXTENSION durable');
$node->safe_psql('first', 'CREATE EXTENSION durable');
ok($node->poll_query_until('first', has_worker('first')),
	'the slot third gave up goes to first');
$node->psql('third', 'CREATE EXTENSION durable');
$warned = 0;
for (my $i = 0; $i < 300 && !$warned; $i++)
{
	$warned = slurp_file($node->logfile, $offset) =~
	  /WARNING:  durable cannot start a worker for database "third"/;
	select(undef, undef, undef, 0.1) unless $warned;
}
ok($warned, 'the launcher warns again that third gets no worker');
$node->safe_psql('first', 'DROP EXTENSION durable');
ok($node->poll_query_until('third', has_worker('third')),
	'and gives it the slot first gives up');

# A database that no worker ever checks (a template) takes a slot when
# durable is created there, and must give it back when durable is dropped:
# the launcher hands on only slots recorded as without durable.
$node->safe_psql('postgres', 'DROP DATABASE second');
($rc, $stdout, $stderr) = $node->psql('template1', 'CREATE EXTENSION durable');
unlike($stderr, qr/tracks at most/, 'durable in a template takes the free slot');
$node->safe_psql('template1', 'DROP EXTENSION durable');
$node->safe_psql('postgres', 'CREATE DATABASE fourth');
$node->safe_psql('fourth', 'CREATE EXTENSION durable');
ok($node->poll_query_until('fourth', has_worker('fourth')),
	'a slot a template took for durable goes to another database once durable is dropped there');

# The same when durable is created, used (which takes the slot) and dropped
# in one transaction.
$node->safe_psql('postgres', 'DROP DATABASE third');
($rc, $stdout, $stderr) = $node->psql(
	'template1', q{
BEGIN;
CREATE EXTENSION durable;
SELECT state FROM durable.inbox_admit('maxdb', 'm1', 'chat-1');
DROP EXTENSION durable;
COMMIT;});
unlike($stderr, qr/tracks at most/, 'a transaction in a template takes the free slot');
$node->safe_psql('postgres', 'CREATE DATABASE fifth');
$node->safe_psql('fifth', 'CREATE EXTENSION durable');
ok($node->poll_query_until('fifth', has_worker('fifth')),
	'and gives it back when it drops durable again before it commits');

# A database that keeps durable but is not swept (made a template) keeps
# its slot only until a database that is swept needs it: until 2026-12-05
# it kept it for good, and with slots short a database with durable was
# never swept.  The same for one closed to connections.
$node->safe_psql('postgres', 'ALTER DATABASE fifth IS_TEMPLATE true');
ok($node->poll_query_until('postgres', "SELECT NOT (" . has_worker('fifth') . ")"),
	'a template has no worker');
is($node->safe_psql('fifth', 'SELECT count(*) FROM durable.metrics()'), '1',
	'it keeps its slot while none is needed: its counters answer');
# A DROP undone by ROLLBACK TO SAVEPOINT records nothing: the template keeps
# durable, so its slot is handed on as not swept, not as one without durable
# (which any backend could take; the launcher's DEBUG1 line tells the two).
$node->safe_psql('fifth', q{
BEGIN;
SAVEPOINT s;
DROP EXTENSION durable;
ROLLBACK TO s;
COMMIT;});
my $fifth_oid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'fifth'");
$offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE sixth');
$node->safe_psql('sixth', 'CREATE EXTENSION durable');
ok($node->poll_query_until('sixth', has_worker('sixth')),
	'a new database with durable takes the slot of the template');
like(
	slurp_file($node->logfile, $offset),
	qr/takes the slot of database $fifth_oid, which gets no worker/,
	'handed on by the launcher as the slot of a database not swept, also after a DROP rolled back to a savepoint'
);

# A claim waiting in a database whose slot goes to another: the wakes of
# its database no longer reach that slot, so the handover wakes it and it
# polls from then on (until 2026-12-05 it slept until its wait ran out).
my $waiter = $node->background_psql('sixth');
my $admitter = $node->background_psql('sixth');
$node->safe_psql('postgres', 'ALTER DATABASE sixth ALLOW_CONNECTIONS false');
ok($node->poll_query_until('postgres', "SELECT NOT (" . has_worker('sixth') . ")"),
	'a database closed to connections has no worker');
$waiter->query_until(qr/waiting/,
	"\\echo waiting\nSELECT 'claimed:' || message_id FROM durable.inbox_claim('waiter', 1, wait => '60s');\n");
$node->safe_psql('postgres', 'ALTER DATABASE fifth IS_TEMPLATE false');
ok($node->poll_query_until('fifth', has_worker('fifth')),
	'the template made a database again takes the slot of the closed one');
my $admitted_at = time();
# (query, not query_safe: both backends warn once that they have no slot)
$admitter->query("SELECT durable.inbox_admit('maxdb', 'w1', 'chat-w')");
like($waiter->query("SELECT 'done'"), qr/claimed:w1/,
	'a claim waiting there when its slot was handed on gets a record admitted after');
my $claim_secs = time() - $admitted_at;
ok($claim_secs < 20, "... at once, not when its wait runs out ($claim_secs s)");
$waiter->quit;
$admitter->quit;
$node->safe_psql('postgres', 'ALTER DATABASE sixth ALLOW_CONNECTIONS true');

# A backend that finds every slot taken (by fifth, swept, and by a database
# without durable), takes the one without durable itself: right after CREATE EXTENSION, metrics() answers
# and nothing warns.  The launcher keeps to the given-up database's next
# check instead of warning that it has no slot to check it with.
# The launcher must not remember the database that gives up its slot here:
# an install makes it forget, and the drop records it without durable.
$node->safe_psql('postgres', "DROP DATABASE $_") for qw(sixth first fourth);
$node->safe_psql('postgres', 'CREATE EXTENSION durable');
$node->safe_psql('postgres', 'DROP EXTENSION durable');
sleep 1;
ok($node->poll_query_until('postgres', "SELECT NOT (" . has_worker('postgres') . ")"),
	'a database without durable holds the other slot, no worker running there');
$node->safe_psql('postgres', 'CREATE DATABASE seventh IS_TEMPLATE true');
$offset = -s $node->logfile;
($rc, $stdout, $stderr) = $node->psql(
	'seventh', q{
CREATE EXTENSION durable;
SELECT inbound_journaled FROM durable.metrics();});
is($rc, 0, 'metrics() answers right after CREATE EXTENSION with every slot taken')
  or diag($stderr);
unlike($stderr, qr/tracks at most/, 'and the backend does not warn');
sleep 2;
unlike(slurp_file($node->logfile, $offset), qr/cannot start a worker for database "postgres"/,
	'the launcher keeps to the next check of the database that gave up its slot');

# That check comes 30 s after postgres was found without durable: the only
# slot it could use is the template's (seventh, not swept, in use), which it
# must leave alone.  Until 2026-12-05 the launcher took it for the check, the
# template's next call took back the slot the check gave up, and so every
# 30 s, its counters reset each time.
my $seventh_oid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'seventh'");
my $since = $node->safe_psql('seventh', 'SELECT since FROM durable.metrics()');
sleep 32;
unlike(slurp_file($node->logfile, $offset), qr/takes the slot of database $seventh_oid\b/,
	'a database found without durable is not checked again with the slot of a template in use');
is($node->safe_psql('seventh', 'SELECT since FROM durable.metrics()'), $since,
	'whose counters are kept');

# But once durable is created there, it competes for that slot again, also
# when another database's CREATE EXTENSION came before the launcher looked
# (the launcher is told of the last install only): it then forgets every
# database it found without durable.  The launcher is stopped meanwhile, so
# that both installs come before its look.
my $launcher = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'durable launcher'");
kill 'STOP', $launcher;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');
$node->safe_psql('postgres', 'CREATE DATABASE ninth IS_TEMPLATE true');
$node->safe_psql('ninth', 'CREATE EXTENSION durable');
kill 'CONT', $launcher;
ok($node->poll_query_until('postgres', has_worker('postgres')),
	'a database found without durable gets the slot of a template once durable is created there, also after installs elsewhere');

$node->stop;

# At a server start the launcher checks the databases in pg_database order,
# a few at a time: with two slots, those of template1 and postgres (without
# durable) take both, and the launcher warned of every database it had not
# checked yet, a database with durable too, although the checks gave their
# slots up a moment later (until 2026-12-06, found by review).  It now waits
# for the checks in flight before it warns.
my $start = PostgreSQL::Test::Cluster->new('startup');
$start->init;
$start->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '100ms'
durable.max_databases = 2
});
$start->start;
$start->safe_psql('postgres', 'CREATE DATABASE plain');
$start->safe_psql('postgres', 'CREATE DATABASE latecomer');
$start->safe_psql('latecomer', 'CREATE EXTENSION durable');
$start->restart;
ok( $start->poll_query_until(
		'postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE datname = 'latecomer' AND backend_type = 'durable worker'}),
	'after a restart the database with durable gets its worker');
my $start_log = slurp_file($start->logfile);
my $restarted_at = rindex($start_log, 'database system is ready to accept connections');
unlike(substr($start_log, $restarted_at), qr/cannot start a worker/,
	'and no database is warned of, while the checks of the others give their slots up');
$start->stop;
done_testing();
