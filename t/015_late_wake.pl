# t/015_late_wake.pl
# A claim waiting in the server for a chat's next record gets it as soon as
# the chat's older record is confirmed, in the two orders where neither the
# newer record's admit nor the confirmation used to wake it:
#
#  - in flight: the confirmation (inbox_complete, outbox_sent) looks for a
#    later record of its chat before that record's admit commits, so it
#    wakes nobody at commit; the admit's wake comes while the confirmation
#    is not yet committed, and the woken claim finds the new record still
#    behind the old one.  The claim now sees that the older record is being
#    replaced by a transaction in flight and checks again within
#    milliseconds (waiting.c);
#  - stale snapshot: the confirmation's snapshot was taken before the admit
#    committed (here a REPEATABLE READ transaction's).  It now looks for
#    later records with a snapshot taken after its update (direct.c).
#
# Each waiting claim would otherwise sleep to the end of its 30 s wait.
# Then: how often a claim held back by a change in flight checks again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableWait;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('late_wake');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '1h'\nautovacuum = off\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

# The queues' statements; %s: a record's name.  hold returns the arguments
# of the confirmation that finishes it (confirm, with %s).
my %queue = (
	inbox => {
		hold    => "SELECT id || ', ' || token FROM durable.inbox_admit('t', '%s', '%s', instance => 'bot-1')",
		confirm => 'SELECT durable.inbox_complete(%s)',
		later   => "SELECT 1 FROM durable.inbox_admit('t', '%s', '%s')",
		claim   => "SELECT 'claimed:' || message_id FROM durable.inbox_claim('w', 1, wait => '30 s');",
	},
	'inbox batch' => {
		hold    => "SELECT 'ARRAY[' || id || '], ARRAY[' || token || ']' FROM durable.inbox_admit('t', '%s', '%s', instance => 'bot-1')",
		confirm => 'SELECT durable.inbox_complete(%s)',
		later   => "SELECT 1 FROM durable.inbox_admit('t', '%s', '%s')",
		claim   => "SELECT 'claimed:' || message_id FROM durable.inbox_claim('w', 1, wait => '30 s');",
	},
	outbox => {
		hold    => "SELECT quote_literal(key) || ', ' || token FROM durable.outbox_begin('%s', '%s', '{}', 'bot-1')",
		confirm => "SELECT durable.outbox_sent(%s, 'provider-id')",
		later   => "SELECT 1 FROM durable.outbox_enqueue('%s', '%s', '{}')",
		claim   => "SELECT 'claimed:' || key FROM durable.outbox_claim('w', 1, wait => '30 s');",
	});

my $n = 0;
for my $name ('inbox', 'inbox batch', 'outbox')
{
	my $q = $queue{$name};
	for my $order ('in flight', 'stale snapshot')
	{
		$n++;
		my ($old, $new, $chat) = ("old-$n", "new-$n", "chat-$n");
		my $held = $node->safe_psql('postgres', sprintf($q->{hold}, $old, $chat));
		my ($waiter, $pid) = start_waiting_claim($node, $q->{claim});
		my $confirmer = $node->background_psql('postgres');

		if ($order eq 'in flight')
		{
			# The confirmation looks for a later record: none yet.
			$confirmer->query_safe('BEGIN');
			$confirmer->query_safe(sprintf($q->{confirm}, $held));
			# The admit commits and wakes the claim, which finds the new
			# record behind the old one, whose confirmation is in flight.
			$node->safe_psql('postgres', sprintf($q->{later}, $new, $chat));
			usleep(300_000);
		}
		else
		{
			$confirmer->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
			$confirmer->query_safe('SELECT 1');
			# Committed after the confirmer's snapshot; the woken claim finds
			# the new record behind the old one and sleeps again.
			$node->safe_psql('postgres', sprintf($q->{later}, $new, $chat));
			usleep(300_000);
			claim_asleep($node, $pid);
			$confirmer->query_safe(sprintf($q->{confirm}, $held));
		}
		my $committed = time;
		$confirmer->query_safe('COMMIT');
		like($waiter->query_safe("SELECT 'after'"), qr/claimed:$new\b/,
			"$name, $order: the waiting claim gets the chat's next record");
		my $late = time - $committed;
		cmp_ok($late, '<', 10,
			sprintf("$name, $order: %.2f s after the confirmation committed, not at the end of its wait", $late));
		$confirmer->quit;
		$waiter->quit;
	}
}

# A claim held back by a record locked in an open transaction, which then
# rolls back (a claim, here: its lease is undone and nothing is woken): the
# claim checks again and gets the record -- under REPEATABLE READ too, whose
# snapshot the rollback gives the record back to (until 2026-12-06 such a
# claim waited out its wait, found by review).
for my $isolation ('READ COMMITTED', 'REPEATABLE READ')
{
	for my $case (
		[ 'inbox', "SELECT 1 FROM durable.inbox_admit('t', '%s', 'chat-%s')",
		  "SELECT message_id FROM durable.inbox_claim('bot-2', 1)",
		  "SELECT 'claimed:' || message_id FROM durable.inbox_claim('w', 1, lease => '1 h', wait => '30 s');" ],
		[ 'outbox', "SELECT 1 FROM durable.outbox_enqueue('%s', 'chat-%s', '{}')",
		  "SELECT key FROM durable.outbox_claim('bot-2', 1)",
		  "SELECT 'claimed:' || key FROM durable.outbox_claim('w', 1, lease => '1 h', wait => '30 s');" ])
	{
		my ($name, $queue_one, $claim, $wait) = @$case;
		my $record = 'locked-' . ($isolation =~ s/ /-/r);
		$node->safe_psql('postgres', sprintf($queue_one, $record, $record));
		my $locker = $node->background_psql('postgres');
		$locker->query_safe('BEGIN');
		like($locker->query_safe($claim), qr/\Q$record\E/, "$name, $isolation: an open transaction claims the record");
		my ($waiter, $pid) = start_waiting_claim($node, "BEGIN ISOLATION LEVEL $isolation;\n$wait");
		my $rolled_back = time;
		$locker->query_safe('ROLLBACK');
		like($waiter->query_safe("SELECT 'after'"), qr/claimed:\Q$record\E\b/,
			"$name, $isolation: the waiting claim gets the record the rolled-back claim gave back");
		cmp_ok(time - $rolled_back, '<', 10,
			"$name, $isolation: soon after the rollback, not at the end of its wait");
		$waiter->query_safe('COMMIT');
		$locker->quit;
		$waiter->quit;
	}
}

# How often a claim held back by a change in flight checks again, behind a
# confirmation held open for the whole of its 3 s wait: after 1 ms, doubling
# up to once a second (about 11 times in 3 s; a cap of 100 ms would make it
# about 35, no doubling thousands).  Under REPEATABLE READ the claim reads
# with its transaction's snapshot, in which the change of the chat's older
# record never lands: it does not check again at all.  The claim logs each
# re-check at DEBUG2.
for my $isolation ('READ COMMITTED', 'REPEATABLE READ')
{
	$n++;
	my ($old, $new, $chat) = ("old-$n", "new-$n", "chat-$n");
	my $held = $node->safe_psql('postgres', sprintf($queue{inbox}{hold}, $old, $chat));
	$node->safe_psql('postgres', sprintf($queue{inbox}{later}, $new, $chat));
	my $confirmer = $node->background_psql('postgres');
	$confirmer->query_safe('BEGIN');
	$confirmer->query_safe(sprintf($queue{inbox}{confirm}, $held));

	my $waiter = $node->background_psql('postgres');
	$waiter->query_safe("BEGIN ISOLATION LEVEL $isolation");
	my $started = time;
	my $claimed = $waiter->query("SET client_min_messages = debug2; "
		  . "SELECT 'claimed:' || message_id FROM durable.inbox_claim('w', 1, wait => '3 s')");
	my $waited = time - $started;
	my $rechecks = () = $waiter->{stderr} =~ /waiting claim checks again/g;
	$waiter->{stderr} = '';
	unlike($claimed, qr/claimed:/, "$isolation: nothing is claimed behind the open confirmation");
	cmp_ok($waited, '>=', 2.9, sprintf("$isolation: the claim waited its 3 s (%.2f s)", $waited));
	if ($isolation eq 'READ COMMITTED')
	{
		cmp_ok($rechecks, '>=', 5, "$isolation: the claim checked again while the change was in flight ($rechecks times)");
		cmp_ok($rechecks, '<=', 16, "$isolation: ... slowing down to once a second ($rechecks times in 3 s)");
	}
	else
	{
		is($rechecks, 0, "$isolation: the claim never checks again: its snapshot will not see the change land");
	}
	$waiter->query('ROLLBACK');
	$confirmer->query_safe('COMMIT');
	like($node->safe_psql('postgres', $queue{inbox}{claim} =~ s/30 s/1 s/r), qr/claimed:$new\b/,
		"$isolation: the record is claimable once the confirmation committed");
	$confirmer->quit;
	$waiter->quit;
}

$node->stop;
done_testing();
