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
# Now the admit publishes its lease's end at commit (waiting.c).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $WAIT_S = 20;

my $node = PostgreSQL::Test::Cluster->new('lease_end_wakes');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '1h'\nlog_min_messages = debug2\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

sub asleep
{
	my ($pid) = @_;
	$node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE pid = $pid")
	  or die "the claim of backend $pid never went to sleep";
}

sub waiting_claim
{
	my ($wait) = @_;
	my $waiter = $node->background_psql('postgres');
	my $pid = $waiter->query_safe('SELECT pg_backend_pid()');
	$pid =~ s/\s+//g;
	$waiter->query_until(qr/started/, "\\echo started\n"
		  . "SELECT 'claimed:' || message_id || ' at ' || extract(epoch FROM clock_timestamp())"
		  . " FROM durable.inbox_claim('standby', 1, wait => '$wait');\n");
	asleep($pid);
	return ($waiter, $pid);
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
my ($idle, $idle_pid) = waiting_claim('3 s');
is($idle->query_safe("SELECT 'after'"), 'after', 'nothing to claim: the idle claim returns empty');
$idle->quit;
my $attempts = () = substr(slurp_file($node->logfile), $log_offset)
  =~ /\[$idle_pid\].*durable: waiting claim attempts/g;
# Its first attempt, one for the lease end found passed, one at the end of its wait.
ok($attempts >= 1 && $attempts <= 3,
	"an idle claim waiting 3 s after a lease end passed made $attempts attempts");

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

$node->stop;
done_testing();
