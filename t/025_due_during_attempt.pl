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
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableWait;
use Time::HiRes qw(time usleep);

my $BACKLOG = 20000;
my $WAIT_S  = 15;

my $node = PostgreSQL::Test::Cluster->new('due_during_attempt');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '1h'\nautovacuum = off\n"
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
		target => "SELECT 1 FROM durable.inbox_admit('t', 'target', 'target-chat', instance => 'bot-1') i,
		                         durable.inbox_fail(i.id, i.token, 'boom', retry_in => '3 s') f",
		due    => "SELECT message_id || ' ' || extract(epoch FROM not_before)
		             FROM durable.inbox WHERE message_id = 'target'",
		claim => "SELECT 'claimed:' || message_id || ' at ' || extract(epoch FROM clock_timestamp())
		            FROM durable.inbox_claim('w', 1, wait => '$WAIT_S s');",
		wake  => "SELECT 1 FROM durable.inbox_admit('t', 'blk-wake', 'blk-1')",
	},
	outbox => {
		probe  => "SELECT count(*) FROM durable.outbox_claim('probe')",
		target => "SELECT 1 FROM durable.outbox_enqueue('target', 'target-chat', '{}',
		                                            not_before => clock_timestamp() + interval '3 s')",
		due    => "SELECT key || ' ' || extract(epoch FROM not_before)
		             FROM durable.outbox WHERE key = 'target'",
		claim => "SELECT 'claimed:' || key || ' at ' || extract(epoch FROM clock_timestamp())
		            FROM durable.outbox_claim('w', 1, wait => '$WAIT_S s');",
		wake  => "SELECT 1 FROM durable.outbox_enqueue('oblk-wake', 'oblk-1', '{}')",
	});

for my $name ('inbox', 'outbox')
{
	my $q = $queue{$name};

	# How long one attempt takes over the backlog (nothing is claimable).
	my $t0 = time;
	is($node->safe_psql('postgres', $q->{probe}), '0', "$name: nothing is claimable behind the blocked chats");
	my $attempt = time - $t0;
	diag(sprintf("$name: one claim over the backlog takes %.0f ms", $attempt * 1000));

	$node->safe_psql('postgres', $q->{target});
	my ($target, $due) = split / /, $node->safe_psql('postgres', $q->{due});

	# The claim's first attempt finds nothing and sleeps until the target is due.
	my ($waiter) = start_waiting_claim($node, $q->{claim});

	# Wake it half an attempt before the target is due.
	my $wake_at = $due - $attempt / 2;
	my $pause = $wake_at - time;
	usleep(int($pause * 1e6)) if $pause > 0;
	$node->safe_psql('postgres', $q->{wake});

	my $result = $waiter->query_safe("SELECT 'after'");
	like($result, qr/claimed:$target at/, "$name: the waiting claim gets the record that came due");
	my ($at) = $result =~ /claimed:\S+ at (\S+)/;
	$at //= $due + $WAIT_S;
	# (Within a few attempts on a slow machine; the bug slept the whole wait.)
	cmp_ok($at - $due, '<', 7,
		sprintf("$name: %.2f s after it came due, not at the end of the %d s wait", $at - $due, $WAIT_S));
	$waiter->quit;
}

$node->stop;
done_testing();
