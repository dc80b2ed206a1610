# t/032_binary_upgrade.pl
# No durable process runs in a server started for pg_upgrade (postgres -b).
# pg_upgrade reads the old cluster's next transaction id before it starts
# the old server, and later gives it to the new cluster (pg_resetwal -x):
# a pass that wrote in either server meanwhile (a purge, a recovered lease,
# a NOTIFY) used ids the new cluster hands out again, and a pass could run
# in the new cluster on a half-restored schema.  PostgreSQL turns
# autovacuum off there for the same reason.  (Found in review, 2026-12-05:
# the old server's log showed a pass purging records during pg_upgrade.)
#
# Started with -b, the server runs no launcher, and a lease that expired
# stays as it is; started normally again, the worker recovers it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('binary_upgrade');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '1h'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');
$node->safe_psql('postgres',
	q{SELECT 1 FROM durable.inbox_admit('tap', 'm-1', 'chat-1', instance => 'gone', lease => '20 ms')});
$node->stop;
# (The worker slept through the lease above; from now on it passes every second.)
$node->append_conf('postgresql.conf', "durable.naptime = '1s'\n");

my $launchers = q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'durable%'};

# As pg_upgrade starts it.
command_ok([ 'pg_ctl', '-D', $node->data_dir, '-l', $node->logfile, '-o', '-b', '-w', 'start' ],
	'the server starts in binary-upgrade mode');
sleep 3;    # three naptimes
is($node->safe_psql('postgres', $launchers), '0', 'no durable process runs under -b');
is($node->safe_psql('postgres', q{SELECT state FROM durable.inbox WHERE message_id = 'm-1'}),
	'leased', 'and the expired lease is left as it is');
command_ok([ 'pg_ctl', '-D', $node->data_dir, '-m', 'fast', '-w', 'stop' ], 'stopped');

# The control: started normally, the worker runs and recovers the lease.
$node->start;
ok($node->poll_query_until('postgres', "SELECT ($launchers) > 0"), 'started normally, durable\'s processes run');
ok( $node->poll_query_until(
		'postgres', q{SELECT state = 'pending' FROM durable.inbox WHERE message_id = 'm-1'}),
	'started normally, the worker recovers the expired lease');
$node->stop;
done_testing();
