# t/lib/DurableWait.pm: what the TAP tests of claims that wait in the server
# share -- starting such a claim in a background session and knowing that
# it sleeps.
package DurableWait;

use strict;
use warnings;

use Exporter 'import';
our @EXPORT = qw(claim_asleep start_waiting_claim);

# Poll until backend $pid sleeps in a waiting claim (wait event type
# Extension); die with $what otherwise.
sub claim_asleep
{
	my ($node, $pid, $what) = @_;
	$node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $pid")
	  or die(($what // "the claim of backend $pid") . ' never went to sleep');
	return;
}

# Run $sql (a claim with wait) in a new background session, wait until it
# sleeps, and return the session and its backend's pid.
sub start_waiting_claim
{
	my ($node, $sql, $what) = @_;
	my $bg = $node->background_psql('postgres');
	my $pid = $bg->query_safe('SELECT pg_backend_pid()');
	$pid =~ s/\s+//g;
	$bg->query_until(qr/started/, "\\echo started\n$sql\n");
	claim_asleep($node, $pid, $what);
	return ($bg, $pid);
}

1;
