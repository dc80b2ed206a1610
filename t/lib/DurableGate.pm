# t/lib/DurableGate.pm: holding a call at one of durable's fail points.  A
# point armed '<point>:wait' (durable.fail_point) waits there for advisory
# lock 4242, which a gate session holds until the test opens it; one armed
# '<point>:wait2' waits for lock 4243, a second gate (a test that holds two
# calls and lets them go one after the other).
package DurableGate;

use strict;
use warnings;

use Exporter 'import';
our @EXPORT = qw(gate_close gate_open gate_waits start_at_gate start_until_gate);

# The advisory lock of gate $second (false: the first gate, true: the second).
sub gate_lock
{
	my ($second) = @_;
	return $second ? 4243 : 4242;
}

# A session of database $db holding the gate closed ($second: the second gate).
sub gate_close
{
	my ($node, $db, $second) = @_;
	my $gate = $node->background_psql($db);
	$gate->query_safe('SELECT pg_advisory_lock(' . gate_lock($second) . ')');
	return $gate;
}

# Open the gate: whatever waits at it goes on.
sub gate_open
{
	my ($gate, $second) = @_;
	$gate->query_safe('SELECT pg_advisory_unlock(' . gate_lock($second) . ')');
	return;
}

# SQL that is true once a backend waits at the gate: backend $pid, or one
# that `$where` (a condition on pg_locks l and pg_stat_activity a) picks.
sub gate_waits
{
	my ($pid, $where, $second) = @_;
	$where //= "l.pid = $pid";
	return 'SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a USING (pid)'
	  . " WHERE l.locktype = 'advisory' AND l.objid = " . gate_lock($second)
	  . " AND NOT l.granted AND $where";
}

# Start $call in a new background session of $db (errors do not end it),
# after $prelude (psql lines, may be empty), and poll until it waits at the
# gate ($second: the second gate) -- the call's own way there, a trigger of
# the test's, say.  Returns the session, its backend's pid and whether it
# came to wait there.
sub start_until_gate
{
	my ($node, $db, $call, $prelude, $second) = @_;
	my $session = $node->background_psql($db, on_error_stop => 0);
	my $pid = $session->query_safe('SELECT pg_backend_pid()');
	$pid =~ s/\s+//g;
	$session->query_safe($prelude) if $prelude;
	$session->query_until(qr/started/, "\\echo started\n$call;\n");
	return ($session, $pid, $node->poll_query_until($db, gate_waits($pid, undef, $second)));
}

# The same, with fail point $point armed (after $prelude) to wait at the
# gate.
sub start_at_gate
{
	my ($node, $db, $point, $call, $prelude, $second) = @_;
	my $arm = $second ? 'wait2' : 'wait';
	return start_until_gate($node, $db, $call,
		($prelude // '') . "SET durable.fail_point = '$point:$arm'", $second);
}

1;
