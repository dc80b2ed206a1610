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
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableFloor;
use DurableGate;

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

# Index entries of $index read so far (flushed by backends that exited).
sub entries_read
{
	my ($index) = @_;
	return $node->safe_psql('postgres',
		"SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = '$index'");
}

# One claim of $queue (max $max, 1 unless given) by $instance in a
# transaction of its own, with the floor's DEBUG2 line.  $select: what to
# return of the claimed rows; $before: SQL run first in the transaction;
# $end: COMMIT or ROLLBACK.
# Returns what the claim returned, the floor its refresh set (-1: it did
# not refresh), whether that refresh scanned from the head, and the lines.
sub logged_claim
{
	my ($queue, $instance, $select, $before, $end, $max) = @_;
	$max //= 1;
	my ($out, $floor, $from_head, $log) = floor_claim($node, $queue,
		"BEGIN; $before SELECT $select FROM durable.${queue}_claim('$instance', $max); $end;");
	return ((split /\n/, $out)[-1] // '', $floor, $from_head, $log);
}

# That a claim ($from_head, $log: from logged_claim, which just returned)
# started at the floor, not with a refresh from the head.  Unless one was
# due: 5 s after the last (the steps since took that long, on a slow
# machine); counted from when the claim that made it began, which is no
# later than the refresh.
sub started_at_floor
{
	my ($from_head, $log, $what) = @_;
	my $since = since_head_refresh();
SKIP:
	{
		skip "a refresh from the head was due ($since s after the last)", 1
		  if $from_head && $since >= 5;
		ok(!$from_head, $what) or diag($log);
	}
	return;
}

# The floor of $queue ('inbox' unless given) after a claim that refreshes
# it (one that finds nothing to claim); in list context also whether that
# refresh scanned from the head.  With $in_writer, the claim runs in a
# transaction that has written (has an xid), whose own changes the refresh
# must tell apart.
sub floor_now
{
	my ($queue, $in_writer) = @_;
	$queue //= 'inbox';
	my $xid = $in_writer ? 'SELECT pg_catalog.txid_current();' : '';
	my (undef, $floor, $from_head) =
	  logged_claim($queue, 'probe', 'count(*)', "$xid SELECT pg_sleep(0.02);", 'COMMIT');
	return wantarray ? ($floor, $from_head) : $floor;
}

# Refresh until a refresh recomputes the floor from the head (head_refresh):
# what follows within a second is seen by refreshes that start from the
# floor only.  Returns the floor it computed (undef if none came).
sub after_head_refresh
{
	my ($queue) = @_;
	return head_refresh($node, $queue // 'inbox');
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

# One claim of $queue ('inbox' unless given) by a fresh instance: the
# message id or key it got, or 'nothing'.
sub claim_one
{
	my ($queue) = @_;
	$queue //= 'inbox';
	my $name = $queue eq 'inbox' ? 'message_id' : 'key';
	return $node->safe_psql('postgres',
		"SELECT coalesce(max($name), 'nothing') FROM durable.${queue}_claim('taker', 1)");
}

# A transition that makes record $id of $queue claimable out of the clock's
# order must lower the floor to it: right after a refresh from the head (so
# that no other refresh comes back for the record within 5 s), with the
# floor above the record, run $transition (SQL); then one claim by a fresh
# instance must take the record ($expected), and must be a claim that
# started at the floor.
sub claimed_at_floor_after
{
	my ($queue, $id, $transition, $expected, $what) = @_;
	cmp_ok(after_head_refresh($queue) // -1, '>', $id, "($what: first, a floor above the record)");
	$node->safe_psql('postgres', $transition);
	claimed_at_floor($queue, $expected, $what);
	return;
}

# One claim of $queue by a fresh instance must take $expected, and not by a
# refresh that rescanned from the head (which finds every claimable record
# whether the floor was lowered or not).
sub claimed_at_floor
{
	my ($queue, $expected, $what) = @_;
	my $name = $queue eq 'inbox' ? 'message_id' : 'key';
	my ($got, undef, $from_head, $log) =
	  logged_claim($queue, 'taker', "coalesce(max($name), 'nothing')", '', 'COMMIT');
	is($got, $expected, $what);
	started_at_floor($from_head, $log, '... by a claim that started at the floor');
	return;
}

# Once the record's $due (SQL: a condition on it) holds by the server's
# clock, one claim of $queue must take it ($expected), starting at the floor.
sub claimed_at_floor_once_due
{
	my ($queue, $due, $expected, $what) = @_;
	$node->poll_query_until('postgres', "SELECT $due") or die "\"$expected\" never came due";
	claimed_at_floor($queue, $expected, $what);
	return;
}

# The claim floor after a rollback: two records of `$queue` ('$tag' and
# '$tag-next', chats of their own); a transaction runs `$first` (a change
# to '$tag'), waits past the floor's refresh interval, claims again (a
# refresh that sees its own change) and rolls back.  '$tag' must be
# claimed first, at once: hidden below the floor it would wait for the next
# scan from the head, and its chat's newer record be claimed before it.
sub claimed_first_after_rollback
{
	my ($queue, $tag, $first, $what) = @_;
	my $insert = $queue eq 'inbox'
	  ? sub { "SELECT FROM durable.inbox_admit('t', '$_[0]', 'chat-$_[0]');" }
	  : sub { "SELECT FROM durable.outbox_enqueue('$_[0]', 'chat-$_[0]', '{}');" };
	$node->safe_psql('postgres', $insert->($tag) . ' ' . $insert->("$tag-next"));
	$node->safe_psql('postgres',
		"BEGIN; $first; SELECT pg_sleep(0.03); SELECT FROM durable.${queue}_claim('rb', 1); ROLLBACK;");
	is(claim_one($queue), $tag, "$what is claimed first, at once");
	is(claim_one($queue), "$tag-next", 'then the next one');
	return;
}

# A chat's head "$tag-head", leased for an hour, and "$tag-next" behind it,
# which a refresh from the head then passes; returns the head's id and token.
sub head_and_next_passed
{
	my ($tag) = @_;
	my ($head, $token) = split /\|/, admit_and_hold("$tag-head", 'h', '1 h');
	$node->safe_psql('postgres', "SELECT FROM durable.inbox_admit('t', '$tag-next', 'chat-$tag-head')");
	cycles(5, "past-$tag");
	cmp_ok(after_head_refresh() // -1, '>',
		$node->safe_psql('postgres', "SELECT id FROM durable.inbox WHERE message_id = '$tag-next'"),
		"($tag: the floor passes a record held behind its chat's head)");
	return ($head, $token);
}

# Right after its chat's head completed, $take (SQL that returns $taken)
# leases the freed record $message for 3 s; then $then (a sub, if given)
# runs: claims leave the record alone (and forget it as freed) until the
# lease runs out, then one takes it over, starting at the floor (which
# learnt when the lease ends).
sub freed_lease_runs_out
{
	my ($message, $take, $taken, $what, $then) = @_;
	my $from = time;
	is($node->safe_psql('postgres', $take), $taken, "$what leases the freed record \"$message\" for 3 s");
	$then->() if $then;
	is(claim_one(), 'nothing', '... then no claim takes it');
	ok(time - $from < 3, '(the lease of 3 s was still valid until now)')
	  or diag('the steps above took too long for the lease of 3 s');
	claimed_at_floor_once_due('inbox',
		"lease_until < clock_timestamp() FROM durable.inbox WHERE message_id = '$message'",
		$message, "a freed record leased by $what is taken over once the lease ran out");
	return;
}

# Complete every leased record, unless $claims_only; then $rounds times
# (1 unless given) claim what is claimable and complete it in a batch.
sub finish_open
{
	my ($rounds, $claims_only) = @_;
	my $batch = q{SELECT durable.inbox_complete(coalesce(array_agg(id), '{}'), coalesce(array_agg(token), '{}'))};
	$node->safe_psql('postgres', "$batch FROM durable.inbox WHERE state = 'leased'") unless $claims_only;
	$node->safe_psql('postgres', join '', ("$batch FROM durable.inbox_claim('drain', 10000);\n") x ($rounds // 1));
	return;
}

# $rounds rounds of a chat draining its backlog: in each, a drainer claims
# one record, a second claimer looks for work (and finds none) and the
# drainer completes what it took, printing it ($round: the psql lines of one
# round).  What the drainer took must be @$expected, in order, and the
# claims must read few entries of $index: none walks the backlog.
sub drained_reading_few
{
	my ($index, $rounds, $round, $expected, $what) = @_;
	my $before = entries_read($index);
	my $drained = $node->safe_psql('postgres', $round x $rounds);
	is($drained, join("\n", @$expected), "$what: in order, one claim per record");
	my $per_claim = (entries_read($index) - $before) / (2 * $rounds);
	cmp_ok($per_claim, '<', 30, "$what: the claims read few index entries ($per_claim per claim)");
	return;
}

# Index entries of $index read per claim of 200 cycles ($cycles->($n, $tag))
# run after 3,000 others, all behind a transaction held open on $table.
sub entries_per_claim_behind_held
{
	my ($table, $index, $cycles, $prefix) = @_;
	my $held = $node->background_psql('postgres');
	$held->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
	$held->query_safe("SELECT pg_catalog.txid_current(), count(*) FROM durable.$table");
	$cycles->(3000, "${prefix}before");
	my $before = entries_read($index);
	$cycles->(200, "${prefix}measured");
	$node->poll_query_until('postgres',
		"SELECT idx_tup_read > $before FROM pg_stat_user_indexes WHERE indexrelname = '$index'")
	  or die 'no index statistics';
	usleep(500_000);
	my $per_claim = (entries_read($index) - $before) / 200;
	$held->query_safe('COMMIT');
	$held->quit;
	return $per_claim;
}

# ---- Behind a transaction held open, claims read few index entries.
my $per_claim = entries_per_claim_behind_held('inbox', 'inbox_unfinished_idx', \&cycles, '');
cmp_ok($per_claim, '<', 100,
	"behind a held transaction a claim reads few entries ($per_claim per claim, 3,000+ finished behind it)");

# ---- The floor moves on (refreshes that scan from above "shortened"), and
# still comes back for it when the lease it was given by a heartbeat ends.
my ($shortened, $shortened_token) = split /\|/, admit_and_hold('shortened', 'c', '60 s');
cycles(5, 'more');
floor_now() for 1 .. 3;
cmp_ok(floor_now(), '>', $shortened, 'the floor passes the record held for 60 s');
ok(defined after_head_refresh(), 'a refresh from the head is seen');
my $shortened_at = time;
$node->safe_psql('postgres', "SELECT durable.inbox_heartbeat($shortened, $shortened_token, '3 s')");
cycles(5, 'evenmore');
floor_now() for 1 .. 3;
ok(time - $shortened_at < 3, 'the shortened lease was still valid until now');
$node->poll_query_until('postgres',
	"SELECT lease_until < clock_timestamp() FROM durable.inbox WHERE id = $shortened")
  or die 'the shortened lease never ran out';
is(claim_one(), 'shortened', 'a lease shortened by a heartbeat below the floor is taken over when it ends');

# ---- The floor passes records held under a lease, and comes back for
# each of them when it becomes claimable.
my ($released, $released_token) = split /\|/, admit_and_hold('released', 'a', '60 s');
my ($failed, $failed_token) = split /\|/, admit_and_hold('failed', 'a', '60 s');
my ($restarted) = split /\|/, admit_and_hold('restarted', 'b', '60 s');
cycles(20, 'after');
cmp_ok(floor_now(), '>', $restarted, 'the floor passes records held under a lease');

claimed_at_floor_after('inbox', $released, "SELECT durable.inbox_release($released, $released_token)",
	'released', 'a record released below the floor is claimed at once');
claimed_at_floor_after('inbox', $failed,
	"SELECT FROM durable.inbox_fail($failed, $failed_token, 'handler failed', retry_in => '0')",
	'failed', 'a record failed below the floor, due at once, is claimed at once');
claimed_at_floor_after('inbox', $restarted, "SELECT durable.instance_start('b')",
	'restarted', 'a lease recovered by instance_start below the floor is claimed at once');

my $done = $node->safe_psql('postgres',
	"SELECT id FROM durable.inbox WHERE message_id = 'before-1'");
cmp_ok(floor_now(), '>', $done, 'the floor is above a done record');
claimed_at_floor_after('inbox', $done, "SELECT durable.inbox_replay($done)",
	'before-1', 'a record replayed below the floor is claimed at once');

# An admit that draws an id below the floor (as one can that draws its id
# while a refresh scans, and inserts its index entries after).
cmp_ok(floor_now(), '>', 600, 'the floor is above id 600');
$node->safe_psql('postgres', "SELECT setval('durable.inbox_id_seq', 600)");
claimed_at_floor_after('inbox', 601, "SELECT FROM durable.inbox_admit('t', 'late', 'chat-late')",
	'late', 'a record admitted below the floor is claimed at once');

# A lease that runs out below the floor comes due by the clock: right after
# a refresh from the head (the next is 5 s away), a record leased for 3 s
# is passed by the floor; the claim after its lease ends starts at the floor.
ok(defined after_head_refresh(), '(a lease running out: a refresh from the head comes first)');
my $expiring_from = time;
my ($expiring) = split /\|/, admit_and_hold('expiring', 'a', '3 s');
cycles(5, 'past-expiring');
cmp_ok(floor_now(), '>', $expiring, 'the floor passes a record leased for 3 s');
ok(time - $expiring_from < 3, 'the lease of "expiring" was still valid until now')
  or diag('the steps above took too long for the lease of 3 s');
claimed_at_floor_once_due('inbox', "lease_until < clock_timestamp() FROM durable.inbox WHERE id = $expiring",
	'expiring', 'a lease that expired below the floor is taken over');

# A claim's own transaction: a record that an earlier claim of the same
# transaction leased is pending again if it rolls back.  The refresh sees
# that transaction's changes as committed, and used to pass over the record
# (hidden until the next scan from the head, and its chat's newer record
# claimed before it).
claimed_first_after_rollback('inbox', 'rolled', "SELECT FROM durable.inbox_claim('rb', 1)",
	'a record leased by a claim that rolled back');

# The same, when the earlier change took the record out of the claim's
# index (completed, in a handler that works through two messages in one
# transaction): the refresh finds its entries dead, and must not take the
# record for finished while this transaction may roll back.
claimed_first_after_rollback('inbox', 'undone',
	"SELECT durable.inbox_complete(c.id, c.token) FROM durable.inbox_claim('rb', 1) c",
	'a record completed by a transaction that rolled back');

# A record that two transactions' foreign keys locked together while it was
# held (FOR KEY SHARE twice: a multixact): once they ended, a refresh in a
# transaction that has written passes it as any other refresh does (it took
# any multixact for one of its own, and stopped there).
$node->safe_psql('postgres', 'CREATE TABLE notes (inbox_id bigint REFERENCES durable.inbox (id))');
$node->safe_psql('postgres', "SELECT FROM durable.inbox_admit('t', 'shared', 'chat-shared')");
my $shared = $node->safe_psql('postgres', "SELECT id FROM durable.inbox WHERE message_id = 'shared'");
is(floor_now(), $shared, 'the floor stops at a pending record (and the probe leases it)');
is($node->safe_psql('postgres', "SELECT state || ' ' || owner FROM durable.inbox WHERE id = $shared"),
	'leased probe', 'the record is held');
my @lockers = map { $node->background_psql('postgres') } 1 .. 2;
$_->query_safe("BEGIN; INSERT INTO notes VALUES ($shared)") for @lockers;
$_->query_safe('COMMIT') for @lockers;
$_->quit for @lockers;
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_get_multixact_members((SELECT xmax FROM durable.inbox WHERE id = $shared))"),
	2, 'the record carries a multixact of the two lockers');
cmp_ok(floor_now('inbox', 1), '>', $shared,
	'a refresh in a transaction that has written passes a record a multixact locked');

# ---- The floor passes records held behind an older record of their chat
# (a backlog behind a chat's leased head cost every claim, of every chat, a
# look at each of its records), and comes back for the next one when that
# record finishes: the completion lowers the floor while refreshes have
# passed over held records lately.
finish_open(1, 'claims only');
my ($held_head, $held_head_token) = split /\|/, admit_and_hold('held-head', 'h', '1 h');
$node->safe_psql('postgres',
	join '', map { "SELECT FROM durable.inbox_admit('t', 'held-$_', 'chat-held-head');" } 1 .. 3);
my %held = map {
	$_ => $node->safe_psql('postgres', "SELECT id FROM durable.inbox WHERE message_id = 'held-$_'")
} 1 .. 3;
cycles(5, 'past-held');
cmp_ok(floor_now(), '>', $held{3}, 'the floor passes records held behind the leased head of their chat');
is(claim_one(), 'nothing', '... which no claim takes');
claimed_at_floor_after('inbox', $held{1}, "SELECT durable.inbox_complete($held_head, $held_head_token)",
	'held-1', 'the head completed, the next record of its chat is claimed at once');
my $held_1_token = $node->safe_psql('postgres', "SELECT token FROM durable.inbox WHERE id = $held{1}");
claimed_at_floor_after('inbox', $held{2},
	"SELECT durable.inbox_complete(ARRAY[$held{1}]::bigint[], ARRAY[$held_1_token]::bigint[])",
	'held-2', 'and after a batch completion, the next one');

# ---- A chat drains its backlog: each completion frees the chat's next
# record, noted as freed; claims look at the freed records first, and the
# floor stays above the rest of the backlog (lowered at every completion,
# it made every claim walk the backlog again: 200 claims a second beside a
# chat draining 100,000 records).
finish_open();
my ($drain_head, $drain_head_token) = split /\|/, admit_and_hold('drain-head', 'h', '1 h');
$node->safe_psql('postgres',
	join '', map { "SELECT FROM durable.inbox_admit('t', 'drain-$_', 'chat-drain-head');" } 1 .. 300);
my $drain_last = $node->safe_psql('postgres', "SELECT id FROM durable.inbox WHERE message_id = 'drain-300'");
cycles(5, 'past-drain');
cmp_ok(after_head_refresh() // -1, '>', $drain_last, 'the floor passes a backlog of 300 records behind its chat\'s head');
$node->safe_psql('postgres', "SELECT durable.inbox_complete($drain_head, $drain_head_token)");
# Each round, while the drainer holds the record it took, another claimer
# looks for work (and finds none): it must not walk the backlog.
my $inbox_round = "SELECT c.id AS did, c.token AS dtoken, c.message_id AS dmessage"
  . " FROM durable.inbox_claim('drainer', 1) c \\gset\n"
  . "SELECT FROM durable.inbox_claim('looker', 1);\n";
drained_reading_few('inbox_unfinished_idx', 20,
	$inbox_round . "SELECT :'dmessage' FROM durable.inbox_complete(:did, :dtoken);\n",
	[ map { "drain-$_" } 1 .. 20 ], 'the chat drains (280 records behind)');
# The same with the batch form of inbox_complete.
drained_reading_few('inbox_unfinished_idx', 10,
	$inbox_round
	  . "SELECT :'dmessage' FROM durable.inbox_complete(ARRAY[:did]::bigint[], ARRAY[:dtoken]::bigint[]);\n",
	[ map { "drain-$_" } 21 .. 30 ], 'the chat drains under batch completions (270 records behind)');

# A freed record leased by a claim that rolls back is still looked at, also
# when a later claim of the same transaction saw it leased.
$node->safe_psql('postgres',
	"BEGIN; SELECT FROM durable.inbox_claim('rb', 1); SELECT FROM durable.inbox_claim('rb', 1); ROLLBACK;");
claimed_at_floor('inbox', 'drain-31', 'a freed record leased by a claim that rolled back is claimed at once');

# A freed record's lease that runs out brings the floor's due time forward,
# as a heartbeat does.
cmp_ok(after_head_refresh() // -1, '>', $drain_last, '(a freed lease running out: the floor passes the backlog)');
my ($drain_31, $drain_31_token) = split /\|/, $node->safe_psql('postgres',
	"SELECT id || '|' || token FROM durable.inbox WHERE message_id = 'drain-31'");
$node->safe_psql('postgres', "SELECT durable.inbox_complete($drain_31, $drain_31_token)");
freed_lease_runs_out('drain-32', "SELECT message_id FROM durable.inbox_claim('gone', 1, lease => '3 s')",
	'drain-32', 'a claim');

# So does a freed record's lease taken by an admit of its message again.
my ($dup_head, $dup_head_token) = head_and_next_passed('dup');
$node->safe_psql('postgres', "SELECT durable.inbox_complete($dup_head, $dup_head_token)");
freed_lease_runs_out('dup-next',
	"SELECT duplicate, state FROM durable.inbox_admit('t', 'dup-next', 'chat-dup-head', instance => 'gone', lease => '3 s')",
	't|leased', 'an admit of its message again');

# A completion that rolls back frees nothing: the record noted is held.
my ($drain_32_token) = $node->safe_psql('postgres',
	"SELECT token FROM durable.inbox WHERE message_id = 'drain-32'");
my $drain_32 = $node->safe_psql('postgres', "SELECT id FROM durable.inbox WHERE message_id = 'drain-32'");
$node->safe_psql('postgres',
	"BEGIN; SELECT durable.inbox_complete($drain_32, $drain_32_token); ROLLBACK;");
is(claim_one(), 'nothing', 'a record noted freed by a completion that rolled back is not claimed');
$node->safe_psql('postgres', "SELECT durable.inbox_complete($drain_32, $drain_32_token)");
claimed_at_floor('inbox', 'drain-33', 'its completion, committed, frees it');

# A claim under REPEATABLE READ whose snapshot predates a freed record
# does not forget it.
my $rr = $node->background_psql('postgres');
$rr->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$rr->query_safe('SELECT count(*) FROM durable.inbox');
my ($rr_head, $rr_head_token) = head_and_next_passed('rr');
$node->safe_psql('postgres', "SELECT durable.inbox_complete($rr_head, $rr_head_token)");
is($rr->query_safe("SELECT count(*) FROM durable.inbox_claim('rr', 1)"), 0,
	'a claim whose snapshot predates the freed record finds nothing');
$rr->query_safe('COMMIT');
$rr->quit;
claimed_at_floor('inbox', 'rr-next', '... and leaves it for the next claim');

# More chats freed at once than are noted: the floor is lowered instead.
my @many = map { [ split /\|/, admit_and_hold("many-$_", 'h', '1 h') ] } 1 .. 10;
$node->safe_psql('postgres',
	join '', map { "SELECT FROM durable.inbox_admit('t', 'many-$_-next', 'chat-many-$_');" } 1 .. 10);
cycles(5, 'past-many');
cmp_ok(after_head_refresh() // -1, '>',
	$node->safe_psql('postgres', "SELECT id FROM durable.inbox WHERE message_id = 'many-10-next'"),
	'(the floor passes ten chats\' next records)');
$node->safe_psql('postgres',
	join '', map { "SELECT durable.inbox_complete($_->[0], $_->[1]);" } @many);
my ($many_claimed, undef, $many_from_head, $many_log) = logged_claim('inbox', 'taker',
	"string_agg(message_id, ',' ORDER BY id)", '', 'COMMIT', 100);
is($many_claimed, join(',', map { "many-$_-next" } 1 .. 10),
	'ten chats freed at once: every next record is claimed at once');
started_at_floor($many_from_head, $many_log, '... by a claim that started at the floor');
# (the rest of the backlog, one record a round)
finish_open(280);
is($node->safe_psql('postgres', "SELECT count(*) FROM durable.inbox WHERE message_id LIKE 'drain-%' AND finished_at IS NULL"),
	0, '(the backlog drained)');

# A freed record leased while a refresh from the head is under way, which
# passed it as held before the completion that freed it: the refresh is
# not thrown away (each one thrown away holds the floor back, and while
# chats drained the recompute from the head could take many tries), and
# merges the lease's end into the due time it writes.
my ($merge_head, $merge_head_token) = head_and_next_passed('merge');
usleep(5_200_000);
my $merge_gate = gate_close($node, 'postgres');
my ($merge_stalled, undef, $merge_waits) = start_at_gate($node, 'postgres', 'floor_write',
	"BEGIN; SELECT count(*) FROM durable.inbox_claim('stalled', 1); ROLLBACK");
ok($merge_waits, '(a refresh from the head, its scans done, waits to write its result)');
$node->safe_psql('postgres', "SELECT durable.inbox_complete($merge_head, $merge_head_token)");
freed_lease_runs_out('merge-next', "SELECT message_id FROM durable.inbox_claim('gone', 1, lease => '3 s')",
	'merge-next', 'a claim while that refresh waits',
	sub {
		gate_open($merge_gate);
		$merge_stalled->quit;
		$merge_gate->quit;
		my (undef, $from_head) = floor_now();
		ok(!$from_head, '... which wrote its result: the next refresh starts from the floor');
	});

# ---- Passes over held records expire.  A claim uses the floor without
# refreshing it while another claim's refresh runs (for 10 s at most, then
# that one is presumed gone); refreshes that stall one after the other can
# keep a floor that passed over held records for longer than completions
# watch for them (16 s).  15 s after the refresh that passed them, claims
# scan from the first of them again: a completion that came after the watch
# ended, and did not lower the floor, does not hide the next record.
finish_open();
my ($expire_head, $expire_head_token) = split /\|/, admit_and_hold('expire-head', 'h', '1 h');
$node->safe_psql('postgres', "SELECT FROM durable.inbox_admit('t', 'expire-1', 'chat-expire-head')");
my $expire_1 = $node->safe_psql('postgres', "SELECT id FROM durable.inbox WHERE message_id = 'expire-1'");
cycles(5, 'past-expire');
cmp_ok(after_head_refresh() // -1, '>', $expire_1, '(the floor passes a record held behind its chat\'s head)');
my $passed_at = time;
my $gate = gate_close($node, 'postgres');
my @stalled;
# Stall a refresh until the gate opens, $at seconds after the pass.
sub stall_refresh_at
{
	my ($at) = @_;
	sleep 1 while time - $passed_at < $at;
	my ($session, undef, $waits) = start_at_gate($node, 'postgres', 'floor_refresh',
		"SELECT count(*) FROM durable.inbox_claim('stalled', 1)");
	ok($waits, "(a refresh stalls $at s after the pass)");
	push @stalled, $session;
	return;
}
stall_refresh_at(1);
stall_refresh_at(12);
sleep 1 while time - $passed_at < 18;
$node->safe_psql('postgres', "SELECT durable.inbox_complete($expire_head, $expire_head_token)");
ok(time - $passed_at < 21, '(the second stalled refresh is not yet presumed gone)')
  or diag('the steps above took too long');
is($node->safe_psql('postgres',
		"SELECT coalesce(bool_or(message_id = 'expire-1'), false) FROM durable.inbox_claim('taker', 100)"),
	't', 'a record freed after the watch ended is claimed, by a claim that did not refresh');
gate_open($gate);
$_->quit for @stalled;
$gate->quit;

# ==== A backend that dies in a refresh (FATAL: a terminate, a lost client)
# ends it as it exits: the next claims refresh the floor, not only once the
# refresh is presumed gone (10 s; until 2026-12-06, found by review).

# Claim (and roll back) until a claim refreshes the inbox's floor, 20 tries
# at most; passes if one did within 5 s of $since ($what: after what).
sub claims_refresh_after
{
	my ($since, $what) = @_;
	my $refreshed;
	for (1 .. 20)
	{
		my (undef, $floor) = floor_claim($node, 'inbox',
			"BEGIN; SELECT pg_sleep(0.02); SELECT count(*) FROM durable.inbox_claim('after-refresh', 1); ROLLBACK;");
		$refreshed = time - $since if $floor >= 0;
		last if defined $refreshed;
	}
	ok(defined $refreshed && $refreshed < 5,
		"after $what, the next claims refresh the floor ("
		  . (defined $refreshed ? sprintf('%.1f s later', $refreshed) : 'none did') . ')');
	return;
}

my $died_err;
$node->psql('postgres',
	"SET durable.fail_point = 'floor_refresh'; SELECT pg_sleep(0.02); SELECT count(*) FROM durable.inbox_claim('dying', 1)",
	stderr => \$died_err);
like($died_err, qr/durable fail point "floor_refresh" reached/, '(a claim dies in its refresh)');
claims_refresh_after(time, 'a backend died in its refresh');

# The same for a refresh that fails with an ERROR (a cancel, a
# statement_timeout): its transaction goes on, the refresh is ended.
my $cancel_gate = gate_close($node, 'postgres');
my ($cancelled, $cancelled_pid, $cancelled_waits) = start_at_gate($node, 'postgres', 'floor_refresh',
	"SELECT pg_sleep(0.02); SELECT count(*) FROM durable.inbox_claim('cancelled', 1)");
ok($cancelled_waits, '(a claim waits in its refresh)');
$node->safe_psql('postgres', "SELECT pg_cancel_backend($cancelled_pid)");
$node->poll_query_until('postgres',
	"SELECT state = 'idle' FROM pg_stat_activity WHERE pid = $cancelled_pid")
  or diag('the cancelled claim did not end');
gate_open($cancel_gate);
claims_refresh_after(time, 'a refresh was cancelled');
$cancelled->quit;
$cancel_gate->quit;

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

# Enqueue a send and claim it under `instance`; returns "key|token|id".
sub enqueue_and_hold
{
	my ($key, $instance) = @_;
	$node->safe_psql('postgres', "SELECT FROM durable.outbox_enqueue('$key', 'chat-$key', '{}')");
	return $node->safe_psql('postgres',
		"SELECT c.key || '|' || c.token || '|' || o.id FROM durable.outbox_claim('$instance', 1, lease => '60 s') c"
		  . " JOIN durable.outbox o USING (key)");
}

# ---- Behind a transaction held open, outbox claims read few index entries
# (before the outbox had a floor: every one since the transaction began).
$per_claim = entries_per_claim_behind_held('outbox', 'outbox_waiting_idx', \&send_cycles, 's');
cmp_ok($per_claim, '<', 100,
	"behind a held transaction an outbox claim reads few entries ($per_claim per claim, 3,000+ sent behind it)");

# ---- The floor passes sends being sent and sends deferred, and comes back
# for each when it becomes claimable.
my ($failing, $failing_token, $failing_id) = split /\|/, enqueue_and_hold('failing', 's1');
my ($later, $later_token, $later_id) = split /\|/, enqueue_and_hold('later', 's1');
my ($killed, $killed_token, $killed_id) = split /\|/, enqueue_and_hold('killed', 's1');
send_cycles(20, 'safter');
cmp_ok(floor_now('outbox'), '>', $killed_id, 'the outbox floor passes sends being sent');
# Sends being sent have no entry in the claims' index, and the entries of
# sent ones may be cleaned away: with none left, a scan from the head finds
# no record and the floor is 0, below everything (correct, but then no claim
# below would show that the floor was lowered).  A send deferred past the
# end of the test, the newest of the waiting ones, keeps it above them.
$node->safe_psql('postgres',
	"SELECT FROM durable.outbox_enqueue('sentinel', 'chat-sentinel', '{}', not_before => now() + interval '1 hour')");

claimed_at_floor_after('outbox', $failing_id,
	"SELECT FROM durable.outbox_failed('$failing', $failing_token, 'timeout', retry_in => '0')",
	'failing', 'a send failed below the floor, due at once, is claimed at once');

# A retry brought forward comes due by the clock (the next refresh from the
# head is 5 s away from the one below).
ok(defined after_head_refresh('outbox'), '(a retry in 3 s: a refresh from the head comes first)');
my $later_at = time;
$node->safe_psql('postgres',
	"SELECT FROM durable.outbox_failed('$later', $later_token, 'timeout', retry_in => '3 s')");
send_cycles(5, 'smore');
floor_now('outbox') for 1 .. 3;
SKIP:
{
	skip 'the steps above took too long for the retry in 3 s', 1 if time - $later_at > 2;
	is(claim_one('outbox'), 'nothing', 'a send failed below the floor is not claimed before its retry is due');
}
claimed_at_floor_once_due('outbox', "not_before <= clock_timestamp() FROM durable.outbox WHERE key = 'later'",
	'later', 'and is claimed once it is due');

$node->safe_psql('postgres',
	"SELECT FROM durable.outbox_failed('$killed', $killed_token, 'rejected', retryable => false)");
send_cycles(5, 'sevenmore');
floor_now('outbox') for 1 .. 3;
claimed_at_floor_after('outbox', $killed_id, "SELECT durable.outbox_retry('$killed')",
	'killed', 'a dead send retried below the floor is claimed at once');

# A sender's own transaction: a send that an earlier claim of the same
# transaction leased (an update that takes it out of the claim's index) is
# pending again if it rolls back, and is claimed first, at once.
claimed_first_after_rollback('outbox', 'srolled', "SELECT FROM durable.outbox_claim('rb', 1)",
	'a send leased by a claim that rolled back');

cmp_ok(floor_now('outbox'), '>', 600, 'the outbox floor is above id 600');
$node->safe_psql('postgres', "SELECT setval('durable.outbox_id_seq', 600)");
claimed_at_floor_after('outbox', 601, "SELECT FROM durable.outbox_enqueue('slate', 'chat-slate', '{}')",
	'slate', 'a send enqueued below the floor is claimed at once');
$node->safe_psql('postgres', "SELECT setval('durable.outbox_id_seq', 5000)");

# A deferred send comes due by the clock: passed by the floor right after a
# refresh from the head, claimed at the floor once due.
ok(defined after_head_refresh('outbox'), '(a deferral of 3 s: a refresh from the head comes first)');
my $deferred_from = time;
$node->safe_psql('postgres',
	"SELECT FROM durable.outbox_enqueue('deferred', 'chat-deferred', '{}', not_before => now() + interval '3 s')");
my $deferred_id = $node->safe_psql('postgres', "SELECT id FROM durable.outbox WHERE key = 'deferred'");
send_cycles(5, 'sdeferred');
cmp_ok(floor_now('outbox'), '>', $deferred_id, 'the outbox floor passes a deferred send');
ok(time - $deferred_from < 3, 'the deferred send was not yet due until now')
  or diag('the steps above took too long for the deferral of 3 s');
claimed_at_floor_once_due('outbox', "not_before <= clock_timestamp() FROM durable.outbox WHERE key = 'deferred'",
	'deferred', 'a deferred send below the floor is claimed once due');

# ---- The outbox's floor passes sends held behind an older unfinished send
# of their chat (being sent, or failed and waiting for its retry: a chat
# whose sends back off made every claim walk its backlog), and comes back
# for the next one when that send leaves the chat's unfinished ones: sent
# (noted as freed, as an inbox completion is), dead, flagged unknown or
# discarded (the floor is lowered).

# A head send of chat "chat-$tag" that $head (SQL that returns its token)
# leaves unfinished, and three sends enqueued behind it; returns the head's
# token and the last send's id.
sub held_sends
{
	my ($tag, $head) = @_;
	my $token = $node->safe_psql('postgres', $head);
	$node->safe_psql('postgres',
		join '', map { "SELECT FROM durable.outbox_enqueue('$tag-$_', 'chat-$tag', '{}');" } 1 .. 3);
	send_cycles(5, "past-$tag");
	return ($token, $node->safe_psql('postgres', "SELECT id FROM durable.outbox WHERE key = '$tag-3'"));
}
# SQL that journals send "$tag-head" as being sent by sender-$tag, for an hour.
sub begun_head
{
	my ($tag) = @_;
	return "SELECT token FROM durable.outbox_begin('$tag-head', 'chat-$tag', '{}', 'sender-$tag', lease => '1 h')";
}

# A head whose lease ran out is flagged unknown by the sweep, or by an
# outbox_begin of its key again (its sender retrying after a crash).  (First:
# the sweep flags every send whose lease ran out, and the sends of the cases
# below would come free.)
for my $flagger (['hswept', 'SELECT FROM durable.sweep()', 'the sweep'],
	['hbegun', q{SELECT action FROM durable.outbox_begin('hbegun-head', 'chat-hbegun', '{}', 'sender-hbegun')},
		'an outbox_begin of its key again'])
{
	my ($tag, $flag, $by) = @$flagger;
	my (undef, $expired_last) = held_sends($tag,
		"SELECT token FROM durable.outbox_begin('$tag-head', 'chat-$tag', '{}', 'sender-$tag', lease => '1 s')");
	$node->poll_query_until('postgres',
		"SELECT lease_until < clock_timestamp() FROM durable.outbox WHERE key = '$tag-head'")
	  or die "the lease of $tag-head never ran out";
	claimed_at_floor_after('outbox', $expired_last, $flag, "$tag-1",
		"the head's lease ran out and the head flagged unknown by $by, the next send of its chat is claimed at once");
}
my ($sent_head_token, $sent_last) = held_sends('hsent', begun_head('hsent'));
is(claim_one('outbox'), 'nothing', 'sends held behind their chat\'s head being sent are not claimed');
claimed_at_floor_after('outbox', $sent_last, "SELECT durable.outbox_sent('hsent-head', $sent_head_token, 'p')",
	'hsent-1', 'the head sent, the next send of its chat is claimed at once');
my ($dead_head_token, $dead_last) = held_sends('hdead', begun_head('hdead'));
claimed_at_floor_after('outbox', $dead_last,
	"SELECT FROM durable.outbox_failed('hdead-head', $dead_head_token, 'rejected', retryable => false)",
	'hdead-1', 'the head dead, the next send of its chat is claimed at once');
my (undef, $unknown_last) = held_sends('hunknown', begun_head('hunknown'));
claimed_at_floor_after('outbox', $unknown_last, "SELECT FROM durable.instance_start('sender-hunknown')",
	'hunknown-1', 'the head flagged unknown (its sender restarted), the next send of its chat is claimed at once');
my ($discard_head_token, $discard_last) = held_sends('hdiscard', begun_head('hdiscard'));
$node->safe_psql('postgres',
	"SELECT FROM durable.outbox_failed('hdiscard-head', $discard_head_token, 'flood', retry_in => '1 h')");
claimed_at_floor_after('outbox', $discard_last, "SELECT durable.outbox_discard('hdiscard-head')",
	'hdiscard-1', 'the head, failed and backing off, discarded: the next send of its chat is claimed at once');

# A send older than the one that made a refresh's first scan find its chat
# held fails between the two scans, its failure having read the clock before
# the refresh did (due at once by the refresh's clock, above the floor:
# nothing to tell it).  The second scan starts again below the chats the
# first found held: it must not pass the send as held by its own chat.  The
# failure waits at the second gate with its clock read, the refresh at the
# first between its scans.
floor_now('outbox');
my $rescan_token = $node->safe_psql('postgres', begun_head('hrescan'));
$node->safe_psql('postgres', "SELECT FROM durable.outbox_enqueue('hrescan-1', 'chat-hrescan', '{}')");
my $rescan_gate = gate_close($node, 'postgres');
my $rescan_gate2 = gate_close($node, 'postgres', 'second');
my ($rescan_failing, undef, $failing_waits) = start_at_gate($node, 'postgres', 'outbox_failed_update',
	"SELECT FROM durable.outbox_failed('hrescan-head', $rescan_token, 'timeout', retry_in => '0')",
	'', 'second');
ok($failing_waits, '(a failure of "hrescan-head", its clock read, waits before its update)');
usleep(20_000);
my ($rescan_stalled, undef, $rescan_waits) = start_at_gate($node, 'postgres', 'floor_publish',
	"BEGIN; SELECT count(*) FROM durable.outbox_claim('stalled', 1); ROLLBACK");
ok($rescan_waits, '(a refresh that passed "hrescan-1" as held waits between its scans)');
gate_open($rescan_gate2, 'second');
$rescan_failing->quit;
gate_open($rescan_gate);
$rescan_stalled->quit;
$rescan_gate->quit;
$rescan_gate2->quit;
is($node->safe_psql('postgres', "SELECT state FROM durable.outbox WHERE key = 'hrescan-head'"), 'failed',
	'(the failure went through)');
claimed_at_floor('outbox', 'hrescan-head',
	'a send failed between a refresh\'s scans, older than the send that held its chat, is claimed at once');

# A chat drains its backlog of sends: each send of its head frees the next
# one, noted as freed; a second claimer looking for work at each step must
# not walk the backlog.
my $drain_head_send_token = $node->safe_psql('postgres', begun_head('sdrain'));
$node->safe_psql('postgres',
	join '', map { "SELECT FROM durable.outbox_enqueue('sdrain-$_', 'chat-sdrain', '{}');" } 1 .. 300);
my $sdrain_last = $node->safe_psql('postgres', "SELECT id FROM durable.outbox WHERE key = 'sdrain-300'");
send_cycles(5, 'past-sdrain');
cmp_ok(after_head_refresh('outbox') // -1, '>', $sdrain_last,
	'the outbox floor passes a backlog of 300 sends behind their chat\'s head');
$node->safe_psql('postgres', "SELECT durable.outbox_sent('sdrain-head', $drain_head_send_token, 'p')");
drained_reading_few('outbox_waiting_idx', 20,
	"SELECT c.key AS skey, c.token AS stoken FROM durable.outbox_claim('drainer', 1) c \\gset\n"
	  . "SELECT FROM durable.outbox_claim('looker', 1);\n"
	  . "SELECT :'skey' FROM durable.outbox_sent(:'skey', :stoken, 'p');\n",
	[ map { "sdrain-$_" } 1 .. 20 ], 'the chat\'s sends drain (280 sends behind)');

$node->stop;
done_testing();
