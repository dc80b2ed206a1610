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
# stays as it is; started normally again, the worker recovers it.  The DDL
# guard lets through what pg_upgrade's restore makes.
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
$node->safe_psql('postgres', q{
	CREATE TABLE public.kid (LIKE durable.permits INCLUDING CONSTRAINTS);
	CREATE TABLE public.kid_of_journal (LIKE durable.inbox INCLUDING CONSTRAINTS)});
my (undef, undef, $refused) = $node->psql('postgres', 'ALTER TABLE ONLY public.kid INHERIT durable.permits');
like($refused, qr/"durable\.permits" cannot have child tables/, 'started normally, the guard refuses a child of durable.permits');
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
# pg_upgrade's restore makes what the old cluster had, also a child of one
# of durable's tables made where durable was not preloaded (the guard
# refuses one): it is let through there (until 2026-12-06 the whole
# pg_upgrade failed on it, found by review), and a rule the same way.
# (The tables are made before: under -b a new table needs the object ids
# pg_upgrade sets.)
my ($rc, $out, $err) = $node->psql('postgres', q{
	ALTER TABLE ONLY public.kid INHERIT durable.permits;
	ALTER TABLE ONLY public.kid_of_journal INHERIT durable.inbox});
is($rc, 0, 'under -b a child of durable.permits and of durable.inbox is let through') or diag($err);
command_ok([ 'pg_ctl', '-D', $node->data_dir, '-m', 'fast', '-w', 'stop' ], 'stopped');

# The control: started normally, the worker runs and recovers the lease.
$node->start;
ok($node->poll_query_until('postgres', "SELECT ($launchers) > 0"), 'started normally, durable\'s processes run');
ok( $node->poll_query_until(
		'postgres', q{SELECT state = 'pending' FROM durable.inbox WHERE message_id = 'm-1'}),
	'started normally, the worker recovers the expired lease');
$node->stop;
done_testing();
