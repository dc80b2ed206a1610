# t/lib/DurableGate.pm: holding a call at one of durable's fail points.  A
# point armed '<point>:wait' (durable.fail_point) waits there for advisory
# lock 4242, which a gate session holds until the test opens it.
package DurableGate;

use strict;
use warnings;

use Exporter 'import';
our @EXPORT = qw(gate_close gate_open gate_waits start_at_gate);

# A session of database $db holding the gate closed.
sub gate_close
{
	my ($node, $db) = @_;
	my $gate = $node->background_psql($db);
	$gate->query_safe('SELECT pg_advisory_lock(4242)');
	return $gate;
}

# Open the gate: whatever waits at it goes on.
sub gate_open
{
	my ($gate) = @_;
	$gate->query_safe('SELECT pg_advisory_unlock(4242)');
	return;
}

# SQL that is true once a backend waits at the gate: backend $pid, or one
# that `$where` (a condition on pg_locks l and pg_stat_activity a) picks.
sub gate_waits
{
	my ($pid, $where) = @_;
	$where //= "l.pid = $pid";
	return 'SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a USING (pid)'
	  . " WHERE l.locktype = 'advisory' AND l.objid = 4242 AND NOT l.granted AND $where";
}

# Start $call in a new background session of $db (errors do not end it),
# with $point armed after $prelude (psql lines, may be empty), and poll
# until it waits at the gate.  Returns the session, its backend's pid and
# whether it came to wait there.
sub start_at_gate
{
	my ($node, $db, $point, $call, $prelude) = @_;
	my $session = $node->background_psql($db, on_error_stop => 0);
	my $pid = $session->query_safe('SELECT pg_backend_pid()');
	$pid =~ s/\s+//g;
	$session->query_safe(($prelude // '') . "SET durable.fail_point = '$point:wait'");
	$session->query_until(qr/started/, "\\echo started\n$call;\n");
	return ($session, $pid, $node->poll_query_until($db, gate_waits($pid)));
}

1;
