# t/026_lease_end_wakes.pl
# A claim waiting in the server gets a record whose bot died holding it, when
# its lease ends -- also when the record was admitted (and leased at once)
# after the claim began to wait.
#
# This is the bot path's takeover: replicas admit with their instance name,
# a standby long-polls inbox_claim(wait => ...).  Such an admit wakes nobody
# (there is nothing to claim), so the waiting claim never read the lease's
# end from the journal; it used to sleep to the end of its wait, or until
# the sweep's next pass returned the record to pending (here: an hour).
# Now the admit publishes its lease's end at commit (waiting.c).  Leases
# taken by claims are found by the claim floor's refresh (part 6).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableWait;
use Time::HiRes qw(time usleep);

my $WAIT_S = 20;

my $node = PostgreSQL::Test::Cluster->new('lease_end_wakes');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '1h'\nlog_min_messages = debug2\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

sub waiting_claim
{
	my ($wait) = @_;
	return start_waiting_claim($node,
		"SELECT 'claimed:' || message_id || ' at ' || extract(epoch FROM clock_timestamp())"
		  . " FROM durable.inbox_claim('standby', 1, wait => '$wait');");
}

# 1. The standby waits; then a bot admits a message, leased at once for 2 s, and dies.
my ($waiter) = waiting_claim("$WAIT_S s");
$node->safe_psql('postgres',
	q{SELECT 1 FROM durable.inbox_admit('tg', 'm-1', 'chat-1', instance => 'bot-1', lease => '2 s')});
my $lease_end = $node->safe_psql('postgres',
	q{SELECT extract(epoch FROM lease_until) FROM durable.inbox WHERE message_id = 'm-1'});
my $result = $waiter->query_safe("SELECT 'after'");
like($result, qr/claimed:m-1 at/, 'the waiting claim gets the record its bot left when the lease ends');
my ($at) = $result =~ /claimed:\S+ at (\S+)/;
$at //= $lease_end + $WAIT_S;
cmp_ok($at - $lease_end, '<', 1.5,
	sprintf('%.2f s after the lease ended, not at the end of the %d s wait', $at - $lease_end, $WAIT_S));
cmp_ok($at, '>', $lease_end, 'and not before it ended');
$waiter->quit;

# 2. A lease end that passed with nobody waiting, for a record since done,
# costs a later waiting claim one attempt, not a spin.
$node->safe_psql('postgres', q{
	SELECT durable.inbox_complete(a.id, a.token)
	  FROM durable.inbox_admit('tg', 'm-2', 'chat-2', instance => 'bot-2', lease => '1 s') a});
usleep(1_500_000);
my $log_offset = -s $node->logfile;
my ($idle, $idle_pid) = waiting_claim('6 s');
is($idle->query_safe("SELECT 'after'"), 'after', 'nothing to claim: the idle claim returns empty');
$idle->quit;
my $attempts = () = substr(slurp_file($node->logfile), $log_offset)
  =~ /\[$idle_pid\].*durable: waiting claim attempts/g;
# Its first attempt, one for the lease end found passed, one at the end of its wait.
ok($attempts >= 1 && $attempts <= 3,
	"an idle claim waiting 6 s after a lease end passed made $attempts attempts");

# 3. Two standbys wait; one bot's lease ends: one of them gets the record, the other
# keeps waiting and returns empty at the end of its wait.
my ($w1) = waiting_claim('6 s');
my ($w2) = waiting_claim('6 s');
$node->safe_psql('postgres',
	q{SELECT 1 FROM durable.inbox_admit('tg', 'm-3', 'chat-3', instance => 'bot-3', lease => '1 s')});
my @got = grep { /claimed:m-3/ } ($w1->query_safe("SELECT 'after'"), $w2->query_safe("SELECT 'after'"));
is(scalar @got, 1, 'of two waiting claims, exactly one gets the record');
my ($at3) = ($got[0] // '') =~ /claimed:\S+ at (\S+)/;
my $lease_end3 = $node->safe_psql('postgres', q{
	SELECT extract(epoch FROM created_at + interval '1 s') FROM durable.inbox WHERE message_id = 'm-3'});
cmp_ok(($at3 // $lease_end3 + 6) - $lease_end3, '<', 1.5, 'when the lease ended, not at the end of the wait');
$w1->quit;
$w2->quit;
is($node->safe_psql('postgres', q{SELECT state || ' ' || owner || ' ' || attempts FROM durable.inbox WHERE message_id = 'm-3'}),
	'leased standby 2', 'leased to the standby, its second attempt');

# When the dead bot's lease ended (the record's lease_until is the claimer's by now).
sub lease_end_of
{
	my ($message_id, $lease) = @_;
	return $node->safe_psql('postgres',
		"SELECT extract(epoch FROM created_at + interval '$lease') FROM durable.inbox WHERE message_id = '$message_id'");
}

sub claimed_at
{
	my ($result, $message_id) = @_;
	my ($at) = ($result // '') =~ /claimed:$message_id at (\S+)/;
	return $at;
}

# 4. A claim whose wait ends before the lease does must leave the lease end to the
# claims that wait longer (it used to clear it on its way out).
# (Waits of seconds: the test must see the short one asleep, on a slow machine too.)
my ($long) = waiting_claim('20 s');
$node->safe_psql('postgres',
	q{SELECT 1 FROM durable.inbox_admit('tg', 'm-4', 'chat-4', instance => 'bot-4', lease => '7 s')});
my ($short) = waiting_claim('3 s');
is($short->query_safe("SELECT 'after'"), 'after', 'a claim waiting 3 s returns empty before the lease ends');
$short->quit;
my $at4 = claimed_at($long->query_safe("SELECT 'after'"), 'm-4');
my $end4 = lease_end_of('m-4', '7 s');
cmp_ok(($at4 // $end4 + 20) - $end4, '<', 1.5,
	'the claim that waits longer still gets the record when its lease ends');
$long->quit;

# 5. Two bots die, the first with a short lease: the slot keeps only the earliest
# lease end, so clearing it must make every waiting claim look for the next one.
my ($wa) = waiting_claim('20 s');
my ($wb) = waiting_claim('20 s');
$node->safe_psql('postgres', q{
	SELECT 1 FROM durable.inbox_admit('tg', 'm-5a', 'chat-5a', instance => 'bot-5', lease => '300 ms');
	SELECT 1 FROM durable.inbox_admit('tg', 'm-5b', 'chat-5b', instance => 'bot-5', lease => '3 s')});
my @results = ($wa->query_safe("SELECT 'after'"), $wb->query_safe("SELECT 'after'"));
my ($at5a) = grep { defined } map { claimed_at($_, 'm-5a') } @results;
my ($at5b) = grep { defined } map { claimed_at($_, 'm-5b') } @results;
my ($end5a, $end5b) = (lease_end_of('m-5a', '300 ms'), lease_end_of('m-5b', '3 s'));
cmp_ok(($at5a // $end5a + 20) - $end5a, '<', 1.5, 'the record with the short lease is claimed when it ends');
cmp_ok(($at5b // $end5b + 20) - $end5b, '<', 1.5, 'and the other one when its own lease ends, by the other claim');
$wa->quit;
$wb->quit;

# 6. A bot that claimed many records dies.  A claim that begins to wait after
# that reads their leases' end from the claim floor (the floor passed over
# them): the journal is read from the floor up, not from its head.
$node->safe_psql('postgres', q{
	SELECT count(durable.inbox_complete(id, token)) FROM durable.inbox WHERE state = 'leased'});
$node->safe_psql('postgres', q{
	SELECT count(*) FROM generate_series(1, 300) g, durable.inbox_admit('tg', 'm-6-' || g, 'chat-6-' || g) a});
$node->safe_psql('postgres', q{SELECT count(*) FROM durable.inbox_claim('bot-6', 1000, lease => '3 s')});
my ($last6, $end6) = split /\|/, $node->safe_psql('postgres', q{
	SELECT max(id), extract(epoch FROM min(lease_until)) FROM durable.inbox WHERE owner = 'bot-6'});
$log_offset = -s $node->logfile;
my ($w6, $pid6) = waiting_claim('20 s');
my ($at6) = $w6->query_safe("SELECT 'after'") =~ /claimed:m-6-\d+ at (\S+)/;
cmp_ok(($at6 // $end6 + 20) - $end6, '<', 1.5, 'a waiting claim gets a record when the dead bot\'s first lease ends');
cmp_ok($at6 // 0, '>', $end6, 'and not before it ended');
$w6->quit;
my @from = substr(slurp_file($node->logfile), $log_offset)
  =~ /\[$pid6\].*durable: inbox next due time read from id (\d+)/g;
ok(@from && $from[0] > $last6,
	"the claim read the next due time from above the records the floor passed over (from id @{[$from[0] // 'none']}, last leased $last6)");

$node->stop;
done_testing();
