# t/009_claim_floor.pl
# The claim floor: claims start their scan of the open records where the
# claimable ones begin, so that behind a long transaction they do not walk
# the entries of every record finished since it began; and the floor never
# hides a record that is claimable.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('floor');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '1h'\nautovacuum = off\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');
# Ids from 1001 on, so that an admit below the floor can be staged (below).
$node->safe_psql('postgres', "SELECT setval('durable.inbox_id_seq', 1000)");

# $n queue cycles, each statement its own transaction: admit a message,
# then claim it and complete it.
sub cycles
{
	my ($n, $tag) = @_;
	my $sql = '';
	for my $i (1 .. $n)
	{
		$sql .= "SELECT FROM durable.inbox_admit('t', '$tag-$i', 'chat-$tag-$i');\n";
		$sql .= "SELECT durable.inbox_complete(c.id, c.token) FROM durable.inbox_claim('w') c;\n";
	}
	$node->safe_psql('postgres', $sql);
}

# Index entries of inbox_unfinished_idx read so far (flushed by backends
# that exited).
sub entries_read
{
	return $node->safe_psql('postgres',
		"SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'inbox_unfinished_idx'");
}

# The floor after a claim that refreshes it (one that finds nothing to
# claim); in list context also whether that refresh scanned from the head.
sub floor_now
{
	my ($out, $err);
	$node->psql(
		'postgres',
		"SET client_min_messages = debug2; SELECT pg_sleep(0.02);"
		  . " SELECT count(*) FROM durable.inbox_claim('probe', 1);",
		stdout => \$out,
		stderr => \$err);
	my @floors = $err =~ /durable: inbox claim floor (\d+)( \(from the head\))?/g;
	my ($floor, $from_head) = @floors ? ($floors[-2], defined $floors[-1]) : (-1, 0);
	return wantarray ? ($floor, $from_head) : $floor;
}

# Refresh until a refresh scans from the head: the next one that does is
# 5 s away, so what follows within a second is seen by refreshes that
# start from the floor only.
sub after_head_refresh
{
	for (1 .. 400)
	{
		my ($floor, $from_head) = floor_now();
		return 1 if $from_head;
	}
	return 0;
}

# Admit a message and claim it under `instance`, leased for `lease`;
# returns "id|token".
sub admit_and_hold
{
	my ($message, $instance, $lease) = @_;
	$node->safe_psql('postgres', "SELECT FROM durable.inbox_admit('t', '$message', 'chat-$message')");
	return $node->safe_psql('postgres',
		"SELECT id || '|' || token FROM durable.inbox_claim('$instance', 1, lease => '$lease')");
}

sub claim_one
{
	return $node->safe_psql('postgres',
		"SELECT coalesce(max(message_id), 'nothing') FROM durable.inbox_claim('taker', 1)");
}

# ---- Behind a transaction held open, claims read few index entries.
my $held = $node->background_psql('postgres');
$held->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$held->query_safe('SELECT pg_catalog.txid_current(), count(*) FROM durable.inbox');
cycles(3000, 'before');
my $before = entries_read();
cycles(200, 'measured');
$node->poll_query_until('postgres',
	"SELECT idx_tup_read > $before FROM pg_stat_user_indexes WHERE indexrelname = 'inbox_unfinished_idx'")
  or die 'no index statistics';
usleep(500_000);
my $per_claim = (entries_read() - $before) / 200;
cmp_ok($per_claim, '<', 300,
	"behind a held transaction a claim reads few entries ($per_claim per claim, 3,000+ finished behind it)");
$held->query_safe('COMMIT');
$held->quit;

# ---- The floor moves on (refreshes that scan from above "shortened"), and
# still comes back for it when the lease it was given by a heartbeat ends.
my ($shortened, $shortened_token) = split /\|/, admit_and_hold('shortened', 'c', '60 s');
cycles(5, 'more');
floor_now() for 1 .. 3;
cmp_ok(floor_now(), '>', $shortened, 'the floor passes the record held for 60 s');
ok(after_head_refresh(), 'a refresh from the head is seen');
my $shortened_at = time;
$node->safe_psql('postgres', "SELECT durable.inbox_heartbeat($shortened, $shortened_token, '1 s')");
cycles(5, 'evenmore');
floor_now() for 1 .. 3;
ok(time - $shortened_at < 1, 'the shortened lease was still valid until now');
usleep(50_000) while time - $shortened_at < 1.2;
is(claim_one(), 'shortened', 'a lease shortened by a heartbeat below the floor is taken over when it ends');

# ---- The floor passes records held under a lease, and comes back for
# each of them when it becomes claimable.
my ($released, $released_token) = split /\|/, admit_and_hold('released', 'a', '60 s');
my $expiring_from = time;
my ($expiring) = split /\|/, admit_and_hold('expiring', 'a', '10 s');
my ($restarted) = split /\|/, admit_and_hold('restarted', 'b', '60 s');
cycles(20, 'after');
cmp_ok(floor_now(), '>', $restarted, 'the floor passes records held under a lease');

$node->safe_psql('postgres', "SELECT durable.inbox_release($released, $released_token)");
is(claim_one(), 'released', 'a record released below the floor is claimed at once');

$node->safe_psql('postgres', "SELECT durable.instance_start('b')");
is(claim_one(), 'restarted', 'a lease recovered by instance_start below the floor is claimed at once');

my $done = $node->safe_psql('postgres',
	"SELECT id FROM durable.inbox WHERE message_id = 'before-1'");
cmp_ok(floor_now(), '>', $done, 'the floor is above a done record');
$node->safe_psql('postgres', "SELECT durable.inbox_replay($done)");
is(claim_one(), 'before-1', 'a record replayed below the floor is claimed at once');

# An admit that draws an id below the floor (as one can that draws its id
# while a refresh scans, and inserts its index entries after).
cmp_ok(floor_now(), '>', 600, 'the floor is above id 600');
$node->safe_psql('postgres', "SELECT setval('durable.inbox_id_seq', 600)");
$node->safe_psql('postgres', "SELECT FROM durable.inbox_admit('t', 'late', 'chat-late')");
is(claim_one(), 'late', 'a record admitted below the floor is claimed at once');

ok(time - $expiring_from < 10, 'the lease of "expiring" was still valid until now')
  or diag('the steps above took too long for the lease of 10 s');
usleep(100_000) while time - $expiring_from < 10.3;
is(claim_one(), 'expiring', 'a lease that expired below the floor is taken over');

# A claim's own transaction: a record that an earlier claim of the same
# transaction leased is pending again if it rolls back.  The refresh sees
# that transaction's changes as committed, and used to pass over the record
# (hidden until the next scan from the head, and its chat's newer record
# claimed before it).
$node->safe_psql('postgres',
	"SELECT FROM durable.inbox_admit('t', 'rolled', 'chat-rolled');"
	  . " SELECT FROM durable.inbox_admit('t', 'rolled-next', 'chat-rolled-next');");
$node->safe_psql('postgres',
	"BEGIN; SELECT FROM durable.inbox_claim('rb', 1); SELECT pg_sleep(0.03);"
	  . " SELECT FROM durable.inbox_claim('rb', 1); ROLLBACK;");
is(claim_one(), 'rolled', 'a record leased by a claim that rolled back is claimed first, at once');
is(claim_one(), 'rolled-next', 'then the next one');

# ==== The outbox's floor: a sender loop's claims (outbox_claim) start
# where the claimable sends begin.
$node->safe_psql('postgres', "SELECT setval('durable.outbox_id_seq', 1000)");

# $n sender-loop cycles, each statement its own transaction.
sub send_cycles
{
	my ($n, $tag) = @_;
	my $sql = '';
	for my $i (1 .. $n)
	{
		$sql .= "SELECT FROM durable.outbox_enqueue('$tag-$i', 'chat-$tag-$i', '{}');\n";
		$sql .= "SELECT durable.outbox_sent(c.key, c.token, 'p') FROM durable.outbox_claim('w', 1) c;\n";
	}
	$node->safe_psql('postgres', $sql);
}

sub waiting_entries_read
{
	return $node->safe_psql('postgres',
		"SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'outbox_waiting_idx'");
}

# The outbox's floor after a claim that refreshes it (and finds nothing).
sub send_floor_now
{
	my ($out, $err);
	$node->psql(
		'postgres',
		"SET client_min_messages = debug2; SELECT pg_sleep(0.02);"
		  . " SELECT count(*) FROM durable.outbox_claim('probe', 1);",
		stdout => \$out,
		stderr => \$err);
	my @floors = $err =~ /durable: outbox claim floor (\d+)/g;
	return @floors ? $floors[-1] : -1;
}

# Enqueue a send and claim it under `instance`; returns "key|token|id".
sub enqueue_and_hold
{
	my ($key, $instance) = @_;
	$node->safe_psql('postgres', "SELECT FROM durable.outbox_enqueue('$key', 'chat-$key', '{}')");
	return $node->safe_psql('postgres',
		"SELECT c.key || '|' || c.token || '|' || o.id FROM durable.outbox_claim('$instance', 1, lease => '60 s') c"
		  . " JOIN durable.outbox o USING (key)");
}

sub claim_one_send
{
	return $node->safe_psql('postgres',
		"SELECT coalesce(max(key), 'nothing') FROM durable.outbox_claim('taker', 1)");
}

# ---- Behind a transaction held open, outbox claims read few index entries
# (before the outbox had a floor: every one since the transaction began).
$held = $node->background_psql('postgres');
$held->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$held->query_safe('SELECT pg_catalog.txid_current(), count(*) FROM durable.outbox');
send_cycles(3000, 'sbefore');
$before = waiting_entries_read();
send_cycles(200, 'smeasured');
$node->poll_query_until('postgres',
	"SELECT idx_tup_read > $before FROM pg_stat_user_indexes WHERE indexrelname = 'outbox_waiting_idx'")
  or die 'no index statistics';
usleep(500_000);
$per_claim = (waiting_entries_read() - $before) / 200;
cmp_ok($per_claim, '<', 300,
	"behind a held transaction an outbox claim reads few entries ($per_claim per claim, 3,000+ sent behind it)");
$held->query_safe('COMMIT');
$held->quit;

# ---- The floor passes sends being sent and sends deferred, and comes back
# for each when it becomes claimable.
my ($failing, $failing_token, $failing_id) = split /\|/, enqueue_and_hold('failing', 's1');
my ($later, $later_token, $later_id) = split /\|/, enqueue_and_hold('later', 's1');
my ($killed, $killed_token, $killed_id) = split /\|/, enqueue_and_hold('killed', 's1');
my $deferred_from = time;
$node->safe_psql('postgres',
	"SELECT FROM durable.outbox_enqueue('deferred', 'chat-deferred', '{}', not_before => now() + interval '15 s')");
send_cycles(20, 'safter');
cmp_ok(send_floor_now(), '>', $killed_id, 'the outbox floor passes sends being sent and a deferred send');

$node->safe_psql('postgres',
	"SELECT FROM durable.outbox_failed('$failing', $failing_token, 'timeout', retry_in => '0')");
is(claim_one_send(), 'failing', 'a send failed below the floor, due at once, is claimed at once');

my $later_at = time;
$node->safe_psql('postgres',
	"SELECT FROM durable.outbox_failed('$later', $later_token, 'timeout', retry_in => '4 s')");
send_cycles(5, 'smore');
send_floor_now() for 1 .. 3;
SKIP:
{
	skip 'the steps above took too long for the retry in 4 s', 1 if time - $later_at > 3;
	is(claim_one_send(), 'nothing', 'a send failed below the floor is not claimed before its retry is due');
}
usleep(50_000) while time - $later_at < 4.2;
is(claim_one_send(), 'later', 'and is claimed once it is due');

$node->safe_psql('postgres',
	"SELECT FROM durable.outbox_failed('$killed', $killed_token, 'rejected', retryable => false)");
send_cycles(5, 'sevenmore');
send_floor_now() for 1 .. 3;
$node->safe_psql('postgres', "SELECT durable.outbox_retry('$killed')");
is(claim_one_send(), 'killed', 'a dead send retried below the floor is claimed at once');

cmp_ok(send_floor_now(), '>', 600, 'the outbox floor is above id 600');
$node->safe_psql('postgres', "SELECT setval('durable.outbox_id_seq', 600)");
$node->safe_psql('postgres', "SELECT FROM durable.outbox_enqueue('slate', 'chat-slate', '{}')");
is(claim_one_send(), 'slate', 'a send enqueued below the floor is claimed at once');

ok(time - $deferred_from < 15, 'the deferred send was not yet due until now')
  or diag('the steps above took too long for the deferral of 15 s');
usleep(100_000) while time - $deferred_from < 15.3;
is(claim_one_send(), 'deferred', 'a deferred send below the floor is claimed once due');

$node->stop;
done_testing();
