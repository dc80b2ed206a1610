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

$node->stop;
done_testing();
