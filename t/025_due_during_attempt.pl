# t/025_due_during_attempt.pl
# A claim waiting in the server gets a record that comes due by the clock
# (a failed record's retry, a deferred send) while one of its attempts runs.
#
# A waiting claim wakes at every commit that may make work claimable and
# attempts; when the attempt claims nothing it sleeps until the next due
# time.  The attempt and that next due time used to read the clock apart:
# a record that came due between the two readings was neither claimed (not
# due yet for the attempt) nor waited for (no longer in the future for the
# next due time), and the claim slept to the end of its wait.  Now one
# reading serves both (waiting.c).
#
# The window is one attempt long.  To make it wide, every attempt walks
# 20,000 blocked chats (each a record held for an hour and one pending
# behind it: an attempt probes each chat once), and a commit into one of
# them wakes the claim just before the record comes due, so that it comes
# due during the woken attempt.  (One chat's backlog of 20,000 records did
# this until a claim learned to probe a blocked chat once, 2026-12-04.)
# The claims run with durable.claim_floor off: with it, the first attempt
# moved the floor past the blocked chats and the woken one took under a
# millisecond, over long before the send came due, so that the outbox half
# passed with the bug (found by review, 2026-12-06).  The server log's
# DEBUG2 line of each attempt shows that the woken one spanned the due time.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableLog;
use DurableWait;
use Time::HiRes qw(time usleep);

my $BACKLOG = 20000;
my $WAIT_S  = 15;

my $node = PostgreSQL::Test::Cluster->new('due_during_attempt');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '1h'\nautovacuum = off\n"
	  . log_settings()
	  # (an admit holds its chat's lock to the end of its transaction)
	  . "max_locks_per_transaction = 512\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

# The blocked chats: one held record each, one pending behind it.
$node->safe_psql('postgres', qq{
	SELECT count(*) FROM (SELECT durable.inbox_admit('t', 'held-' || g, 'blk-' || g,
	                                                 instance => 'holder', lease => '1 hour')
	                        FROM generate_series(1, $BACKLOG) g) x;
	SELECT count(*) FROM (SELECT durable.inbox_admit('t', 'blk-' || g, 'blk-' || g)
	                        FROM generate_series(1, $BACKLOG) g) x;
	SELECT count(*) FROM (SELECT durable.outbox_begin('oheld-' || g, 'oblk-' || g, '{}', 'holder',
	                                                  lease => '1 hour')
	                        FROM generate_series(1, $BACKLOG) g) x;
	SELECT count(*) FROM (SELECT durable.outbox_enqueue('oblk-' || g, 'oblk-' || g, '{}')
	                        FROM generate_series(1, $BACKLOG) g) x;
	VACUUM ANALYZE durable.inbox, durable.outbox;
});

my %queue = (
	inbox => {
		probe => "SELECT count(*) FROM durable.inbox_claim('probe')",
		# A record failed with a retry 3 s ahead; then its name and due time.
		target => "SELECT 1 FROM durable.inbox_admit('t', 'target-%d', 'target-chat', instance => 'bot-1') i,
		                         durable.inbox_fail(i.id, i.token, 'boom', retry_in => '3 s') f",
		due    => "SELECT message_id || ' ' || extract(epoch FROM not_before)
		             FROM durable.inbox WHERE message_id = 'target-%d'",
		claim => "SELECT 'claimed:' || message_id || ' at ' || extract(epoch FROM clock_timestamp())
		            FROM durable.inbox_claim('w', 1, wait => '$WAIT_S s');",
		wake  => "SELECT 1 FROM durable.inbox_admit('t', 'blk-wake-%d', 'blk-1')",
	},
	outbox => {
		probe  => "SELECT count(*) FROM durable.outbox_claim('probe')",
		target => "SELECT 1 FROM durable.outbox_enqueue('target-%d', 'target-chat', '{}',
		                                            not_before => clock_timestamp() + interval '3 s')",
		due    => "SELECT key || ' ' || extract(epoch FROM not_before)
		             FROM durable.outbox WHERE key = 'target-%d'",
		claim => "SELECT 'claimed:' || key || ' at ' || extract(epoch FROM clock_timestamp())
		            FROM durable.outbox_claim('w', 1, wait => '$WAIT_S s');",
		wake  => "SELECT 1 FROM durable.outbox_enqueue('oblk-wake-%d', 'oblk-1', '{}')",
	});

for my $name ('inbox', 'outbox')
{
	my $q = $queue{$name};

	# How long one attempt takes over the backlog (nothing is claimable), by
	# the server's clock.
	my ($t0, $found, $t1) = split /\n/, $node->safe_psql('postgres',
		"SET durable.claim_floor = off; SELECT extract(epoch FROM clock_timestamp()); $q->{probe};"
		  . " SELECT extract(epoch FROM clock_timestamp())");
	is($found, '0', "$name: nothing is claimable behind the blocked chats");
	my $attempt = $t1 - $t0;
	diag(sprintf("$name: one claim over the backlog takes %.0f ms", $attempt * 1000));

	# A round: a new target, and a wake half an attempt before it is due.
	# The wake must start an attempt that is still running at the due time;
	# a round whose wake came too late or too early for that (a busy
	# machine) is run again, up to three times.
	my ($claimed, $late, $spanned, $span);
	for my $round (1 .. 3)
	{
		# (a session connected beforehand: the wake commits when it is sent)
		my $waker = $node->background_psql('postgres');
		$node->safe_psql('postgres', sprintf($q->{target}, $round));
		my ($target, $due) = split / /, $node->safe_psql('postgres', sprintf($q->{due}, $round));

		# The claim's first attempt finds nothing and sleeps until the target is due.
		my $log_offset = -s $node->logfile;
		my ($waiter, $waiter_pid) = start_waiting_claim($node,
			"SET durable.claim_floor = off; SET log_min_messages = debug2; $q->{claim}");

		my $pause = $due - $attempt / 2 - time;
		usleep(int($pause * 1e6)) if $pause > 0;
		$waker->query_safe(sprintf($q->{wake}, $round));
		$waker->quit;

		my $result = $waiter->query_safe("SELECT 'after'");
		$waiter->quit;
		$claimed = $result =~ /claimed:$target at/;
		my ($at) = $result =~ /claimed:\S+ at (\S+)/;
		$late = ($at // $due + $WAIT_S) - $due;

		# The attempt the wake started began before the due time (its DEBUG2
		# line), and ran past it: the sleep that followed found the due time
		# it had read passed already (not above 0 ms; one that ended early
		# would sleep until it).
		my ($began, $next_due_ms);
		foreach my $line (log_lines(slurp_file($node->logfile, $log_offset)))
		{
			next unless $line->{pid} == $waiter_pid;
			my $t = $line->{at};
			if ($line->{message} =~ /waiting claim attempts/)
			{
				last if $t >= $due;
				($began, $next_due_ms) = ($t, undef);
			}
			elsif ($line->{message} =~ /waiting claim sleeps; the next due time is in (-?\d+) ms/)
			{
				$next_due_ms //= $1;
			}
		}
		$spanned = defined $began && $due - $began < 1 && defined $next_due_ms && $next_due_ms <= 0;
		$span = sprintf('began %s, then the next due time was %s',
			defined $began ? sprintf('%.3f s before it', $due - $began) : 'never',
			defined $next_due_ms ? "$next_due_ms ms away" : 'never read');
		last if $spanned;
		diag("$name: round $round: the woken attempt did not span the due time ($span): again");
	}
	ok($spanned, "$name: the woken attempt spanned the due time ($span)");
	ok($claimed, "$name: the waiting claim gets the record that came due");
	# (Within a few attempts on a slow machine; the bug slept the whole wait.)
	cmp_ok($late, '<', 7,
		sprintf("$name: %.2f s after it came due, not at the end of the %d s wait", $late, $WAIT_S));
}

$node->stop;
done_testing();
