# t/031_worker_stopped_mid_pass.pl: a worker stopped in the middle of a
# pass, by SIGINT (a cancel) and by SIGTERM (tests.md, 10).
#
# The pass holds the worker at the fail point 'sweep:wait' (the end of the
# pass, before its commit), after it has recovered an expired inbox lease
# on its last attempt (durable.inbox_max_attempts = 1: to dead) and flagged
# an expired send (unknown) in its transaction.  Stopped there, the pass
# must leave nothing behind: both records as they were, no NOTIFY, no
# counter moved.  The next pass (of the worker that replaces it: a cancel
# ends the worker too) does the work once: one message dead, one send
# unknown, one durable_dead and one durable_ambiguous, inbound_dead and
# outbox_ambiguous moved by one.  (Until 2026-12-06 the message went back to
# pending, which no counter counts: the inbox half of "counted nothing"
# could not fail, found by review.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableInvariants;
use DurableGate;

my $node = PostgreSQL::Test::Cluster->new('worker_mid_pass');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '200ms'
durable.inbox_max_attempts = 1
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

my $worker_pid = q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'durable worker'};
my $states = q{
	SELECT (SELECT string_agg(message_id || ' ' || state, ', ' ORDER BY id) FROM durable.inbox)
	       || ' / ' ||
	       (SELECT string_agg(key || ' ' || state, ', ' ORDER BY id) FROM durable.outbox)};
my $counters = q{SELECT inbound_dead || ' ' || outbox_ambiguous FROM durable.metrics()};

for my $signal ('SIGINT', 'SIGTERM')
{
	my $stop = $signal eq 'SIGINT' ? 'pg_cancel_backend' : 'pg_terminate_backend';

	# The fail point is set, and the worker exits to take it (ALTER DATABASE
	# ... SET); the one that replaces it sleeps for an hour.  Only then do
	# the leases run out, and the worker is woken to its pass at 200 ms,
	# which recovers them and waits.  (With leases of a second that ran out
	# by the clock, a slow machine let the old worker's pass recover them,
	# or the new one's come before they ran out.)
	$node->safe_psql('postgres', q{
		TRUNCATE durable.inbox, durable.outbox;
		SELECT durable.metrics_reset();
		SELECT 1 FROM durable.inbox_admit('t', 'm1', 'c1', instance => 'gone', lease => '1 h');
		SELECT 1 FROM durable.outbox_begin('k1', 'c1', '{}', 'gone', lease => '1 h');});
	my $counted = $node->safe_psql('postgres', $counters);

	# Hold the next pass at its end: the test holds the lock the point waits for.
	my $gate = gate_close($node, 'postgres');
	my $listener = $node->background_psql('postgres');
	$listener->query_safe('LISTEN durable_ambiguous; LISTEN durable_dead');
	$node->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($worker_pid) w")
	  or die 'no worker';
	my $old_pid = $node->safe_psql('postgres', $worker_pid);
	$node->safe_psql('postgres', q{
		ALTER DATABASE postgres SET durable.fail_point = 'sweep:wait';
		ALTER SYSTEM SET durable.naptime = '1h';});
	$node->reload;
	$node->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($worker_pid) w WHERE w.pid <> $old_pid")
	  or die 'no new worker';
	my $pid = $node->safe_psql('postgres', $worker_pid);
	$node->safe_psql('postgres', q{
		UPDATE durable.inbox SET lease_until = now() - interval '1 s';
		UPDATE durable.outbox SET lease_until = now() - interval '1 s';
		ALTER SYSTEM SET durable.naptime = '200ms';});
	$node->reload;
	ok($node->poll_query_until('postgres', gate_waits($pid)),
		"$signal: the worker's pass waits at its end, its recovery done and not committed");
	is($node->safe_psql('postgres', "SELECT backend_xid IS NOT NULL FROM pg_stat_activity WHERE pid = $pid"),
		't', "$signal: ... (its transaction has written)");
	is($node->safe_psql('postgres', $states), 'm1 leased / k1 sending',
		"$signal: ... which nobody sees yet");

	$node->safe_psql('postgres', 'ALTER DATABASE postgres RESET durable.fail_point');
	$node->reload;
	$node->safe_psql('postgres', "SELECT $stop($pid)");
	if ($signal eq 'SIGTERM')
	{
		ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
			"$signal: the worker ends");
	}
	else
	{
		ok($node->poll_query_until('postgres', qq{
			SELECT count(*) = 0 FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND pid = $pid}),
			"$signal: the pass gives up its wait");
	}
	is($node->safe_psql('postgres', $states), 'm1 leased / k1 sending',
		"$signal: the stopped pass left both records as they were");
	is($node->safe_psql('postgres', $counters), $counted, "$signal: ... and counted nothing");

	gate_open($gate);
	ok($node->poll_query_until('postgres', "SELECT ($states) = 'm1 dead / k1 unknown'"),
		"$signal: the next pass recovers both");
	# (a cancel ends the pass and the worker with it, as SIGTERM does)
	isnt($node->safe_psql('postgres', $worker_pid), $pid, "$signal: ... a new worker's");
	my ($dead, $ambiguous) = split / /, $node->safe_psql('postgres', $counters);
	is($dead, 1, "$signal: inbound_dead counts the message once");
	is($ambiguous, 1, "$signal: outbox_ambiguous counts the send once");
	# (psql prints the notifications it got after its next command's result)
	my $heard = $listener->query_safe(q{SELECT 1});
	my @notes = $heard =~ /notification "durable_ambiguous"/g;
	is(scalar(@notes), 1, "$signal: durable_ambiguous announced it once");
	@notes = $heard =~ /notification "durable_dead"/g;
	is(scalar(@notes), 1, "$signal: durable_dead announced the message once");
	is(invariant_violations($node), '', "$signal: the journals' invariants hold");
	$listener->quit;
	$gate->quit;
}

$node->stop;
done_testing();
