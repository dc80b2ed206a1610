# t/034_worker_untracked_restart.pl
# A worker that ends is replaced after the restart delay (a naptime, clamped
# to 1-10 s).  The launcher that started it hears of its exit from the
# postmaster; a launcher started since does not (it did not register the
# worker), and learns of it only through the worker's slot.  Until
# 2026-12-06 nothing woke that launcher, and it started the next worker at
# its next look, up to a naptime later: with durable.naptime = 60 s, lease
# recovery in that database paused for a minute and more.  The exiting
# worker now wakes the launcher.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('untracked_restart');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '60s'\n");
$node->start;

sub backend_pid
{
	my ($type, $not) = @_;
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = '$type' AND pid <> $not");
}

# A worker started by the first launcher.
$node->safe_psql('postgres', 'CREATE EXTENSION durable');
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable worker'"),
	'the database has a worker');
my $worker = backend_pid('durable worker', 0);

# A new launcher: the postmaster restarts the one SIGTERM ended.
my $launcher = backend_pid('durable launcher', 0);
my $offset = -s $node->logfile;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable launcher'"
		  . " AND pid <> $launcher"),
	'the launcher ended by SIGTERM is replaced');
# (its first look, which finds the database served, is over)
$node->wait_for_log(qr/durable launcher started/, $offset);
sleep 1;
is(backend_pid('durable worker', 0), $worker, 'the worker of the earlier launcher still serves');

# The worker the new launcher does not know ends: the next one starts after
# the restart delay (10 s at this naptime), not a naptime later.
my $ended = time;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($worker)");
my $replaced = $node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable worker' AND pid <> $worker");
my $took = time - $ended;
ok($replaced, 'the worker is replaced');
note(sprintf('replaced after %.1f s', $took));
cmp_ok($took, '>=', 9.5, '... after the restart delay');
cmp_ok($took, '<', 40, '... not a naptime (60 s) later');

# A run of failures ends with a finished pass, also for a worker no launcher
# reaps.  Until 2026-12-07 only the reap reset the count: after a run of
# failing workers, a worker that passed, then a new launcher, the next
# failure counted on from the old run (a restart 16 s later here, 32 s and up
# to 5 minutes in longer runs, lease recovery paused all along).  Found by
# review, with a smaller one that this test does not time: a stop asked of
# the unreaped worker (its exit for new settings) stayed on the slot and kept
# the next worker's failure from counting (a claim now clears it).
# (debug1: the worker logs its passes)
$node->safe_psql('postgres', q{
	ALTER SYSTEM SET durable.naptime = '100ms';
	ALTER SYSTEM SET log_min_messages = debug1;
	SELECT pg_reload_conf();});
my $count_starts = sub {
	my ($from) = @_;
	my $n = () = slurp_file($node->logfile, $from) =~ /durable worker started for database "postgres"/g;
	return $n;
};
$offset = -s $node->logfile;
$node->safe_psql('postgres', "ALTER DATABASE postgres SET durable.fail_point = 'sweep'");
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'durable worker'");
# Four failing workers in a row (restarts after 1, 2, 4 s): the count is 4.
my $deadline = time + 30;
sleep 1 while time < $deadline && $count_starts->($offset) < 4;
is($count_starts->($offset), 4, 'a run of four failing workers');
$offset = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER DATABASE postgres RESET durable.fail_point');
$node->wait_for_log(qr/durable worker: swept database "postgres"/, $offset);
ok(1, 'the next worker (8 s later) finishes a pass');

$launcher = backend_pid('durable launcher', 0);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'durable launcher'"
		  . " AND pid <> $launcher"),
	'a new launcher, which does not know that worker');
sleep 1;

# The worker exits for new settings (a stop on purpose, unreaped); every
# worker after it fails again: they restart after 1, 1, 2, 4 s, not 16 s.
$offset = -s $node->logfile;
$node->safe_psql('postgres', "ALTER DATABASE postgres SET durable.fail_point = 'sweep'");
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
sleep 12;
my $starts = $count_starts->($offset);
note("$starts workers started in 12 s");
cmp_ok($starts, '>=', 3, 'after a finished pass, failures restart after 1 s again, doubling from there');
cmp_ok($starts, '<=', 6, '... and still doubling');
$node->safe_psql('postgres', 'ALTER DATABASE postgres RESET durable.fail_point');

$node->stop;
done_testing();
