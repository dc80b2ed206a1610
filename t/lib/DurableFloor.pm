# t/lib/DurableFloor.pm: what the claim floor's TAP tests share -- SQL run
# with the floor's DEBUG2 lines, a claim's refresh read from them, and
# claims until a refresh scans from the head.
package DurableFloor;

use strict;
use warnings;

use Exporter 'import';
use Time::HiRes qw(time);
our @EXPORT = qw(debug2_psql floor_claim head_refresh since_head_refresh);

# When the last claim began (floor_claim) whose refresh scanned from the
# head, and that time as it was before the latest claim.
my $head_refresh_started = 0;
my $head_refresh_before_latest = 0;

# Run $sql in database postgres of $node with the claim floor's DEBUG2
# lines; returns its output and them.  Dies if it fails.
sub debug2_psql
{
	my ($node, $sql) = @_;
	my ($out, $err);
	$node->psql('postgres', "SET client_min_messages = debug2; $sql",
		stdout => \$out, stderr => \$err, on_error_die => 1);
	return ($out, $err);
}

# Run $sql, a transaction with a claim of $queue, with the DEBUG2 lines.
# Returns its output, the floor its refresh set (-1: it did not refresh),
# whether that refresh scanned from the head, and the lines.
sub floor_claim
{
	my ($node, $queue, $sql) = @_;
	my $started = time;
	$head_refresh_before_latest = $head_refresh_started;
	my ($out, $log) = debug2_psql($node, $sql);
	my @floors = $log =~ /durable: $queue claim floor (\d+)( \(from the head\))?/g;
	my ($floor, $from_head) = @floors ? ($floors[-2], defined $floors[-1]) : (-1, 0);
	$head_refresh_started = $started if $from_head;
	return ($out, $floor, $from_head, $log);
}

# Claim (and roll back) until a claim's refresh of $queue's floor scans
# from the head: the next one that does is 5 s away.  Returns the floor it
# computed (undef if none came).  The probing claims lease nothing (the
# floor lives in shared memory and stays refreshed).
sub head_refresh
{
	my ($node, $queue) = @_;
	for (1 .. 400)
	{
		my (undef, $floor, $from_head) = floor_claim($node, $queue,
			"BEGIN; SELECT pg_sleep(0.02); SELECT count(*) FROM durable.${queue}_claim('head-probe', 1); ROLLBACK;");
		return $floor if $from_head;
	}
	return undef;
}

# Seconds since the start of the last claim seen to refresh from the head
# before the latest claim (no later than that refresh): 5 or more, and a
# refresh from the head may have been due for the latest claim.  (Not the
# latest claim's own refresh, which made every such test look at its own
# run time: until 2026-12-06, found by review.)
sub since_head_refresh
{
	return time - $head_refresh_before_latest;
}

1;
