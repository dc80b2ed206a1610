# t/022_standby.pl
# A streaming standby, then a failover to it.
#
# On the standby (hot standby) durable runs no launcher and no worker, every
# call that would write refuses with 25006 (read-only transaction) instead of
# doing anything else first (a claim that may wait returns at once), and the
# reads a monitor or a gateway makes on a standby work: standing(), metrics(),
# session_load().
#
# Promoted, the standby starts the launcher and its database's worker; the
# worker recovers the expired leases the old primary's replicas held,
# instance_start() the live ones of a replica that restarts; every admit and
# send the old primary committed is there (synchronous replication), a key
# already sent is answered from the journal, and tokens continue above every
# token the old primary handed out, also one it never sent to the standby,
# so a replica still holding an old lease is fenced off (DR001).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
# The primary's worker never sweeps after its first pass (a naptime of an
# hour): the expired leases of bot-b must be recovered by the promoted
# standby's worker, not replicated from the primary's (until 2026-12-06 the
# primary's recovered them first, and the checks after the failover could
# not fail).
$primary->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '1h'
});
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION durable; CREATE EXTENSION amcheck');

$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->append_conf('postgresql.conf', "durable.naptime = '100ms'");
$standby->start;

# Every commit from here on waits for the standby: what the primary
# confirmed to a bot survives the failover.
$primary->append_conf('postgresql.conf', "synchronous_standby_names = 'standby'");
$primary->reload;
$primary->poll_query_until('postgres',
	"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby'")
  or die 'the standby did not become synchronous';

sub durable_processes
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type IN ('durable launcher', 'durable worker')"
	);
}

ok($primary->poll_query_until('postgres',
		"SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type IN ('durable launcher', 'durable worker')"),
	'the primary runs the launcher and its database\'s worker');

# The old primary's work: 100 admits; replica bot-a holds 10 of them under a
# lease of an hour (it will restart and call instance_start), bot-b 10 under
# a lease of 2 s (it dies: the sweep recovers them); 20 sends, 10 of them
# sent, 5 leased to bot-b for 2 s (ambiguous after the failover), 5 waiting.
$primary->safe_psql('postgres', qq{
SELECT count(*) FROM generate_series(1, 100) AS i,
	durable.inbox_admit('tap', 'm' || i, 'chat-' || i);
SELECT count(*) FROM durable.inbox_claim('bot-a', 10, '1h');
SELECT count(*) FROM durable.inbox_claim('bot-b', 10, '2s');
SELECT count(*) FROM generate_series(1, 10) AS i,
	durable.outbox_begin('sent-' || i, 'chat-' || i, '{"text": "hi"}', 'bot-a') AS b,
	durable.outbox_sent(b.key, b.token, 'provider-' || i);
SELECT count(*) FROM generate_series(1, 5) AS i,
	durable.outbox_begin('sending-' || i, 'chat-' || i, '{"text": "hi"}', 'bot-b', '2s');
SELECT count(*) FROM generate_series(1, 5) AS i,
	durable.outbox_enqueue('queued-' || i, 'chat-' || i, '{"text": "later"}');
SELECT durable.session_save('gateway', 0, 'session-secret', 42, 'wss://resume', 1);
});
my $bot_a_record = $primary->safe_psql('postgres',
	"SELECT id || '|' || token FROM durable.inbox WHERE owner = 'bot-a' ORDER BY id LIMIT 1");
my ($old_id, $old_token) = split /\|/, $bot_a_record;

# --- On the standby -------------------------------------------------------

# Most of durable's writes skip the executor: their WAL, replayed, must give
# the standby indexes that agree with its heap.
sub amcheck
{
	my ($node) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) || ' indexes, '
       || (SELECT count(*) FROM verify_heapam('durable.inbox'))
        + (SELECT count(*) FROM verify_heapam('durable.outbox')) || ' heap corruptions'
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid,
       LATERAL bt_index_check(i.indexrelid, true)
 WHERE c.relnamespace = 'durable'::regnamespace});
}
like(amcheck($standby), qr/^1[0-9] indexes, 0 heap corruptions$/,
	'amcheck on the standby: every index of durable\'s agrees with the replayed heap');

is(durable_processes($standby), 0, 'the standby runs neither the launcher nor a worker');

my @writes = (
	"durable.inbox_admit('tap', 'standby-1', 'chat-1')",
	"durable.inbox_admit('tap', 'm1', 'chat-1')",
	# leased at once: a token is drawn first (until 2026-12-06 the first
	# draw's lock was refused with 55000 on a standby; found by review)
	"durable.inbox_admit('tap', 'standby-3', 'chat-no-record', instance => 'bot-d')",
	"durable.inbox_admit('tap', 'm1', 'chat-1', instance => 'bot-d')",
	"durable.inbox_claim('bot-d')",
	"durable.inbox_complete($old_id, $old_token)",
	"durable.inbox_complete(ARRAY[$old_id]::bigint[], ARRAY[$old_token]::bigint[])",
	"durable.inbox_fail($old_id, $old_token, 'x')",
	"durable.inbox_heartbeat($old_id, $old_token)",
	"durable.inbox_release($old_id, $old_token)",
	"durable.inbox_replay($old_id)",
	"durable.outbox_begin('standby-1', 'chat-1', '{}', 'bot-d')",
	"durable.outbox_begin('sent-1', 'chat-1', '{\"text\": \"hi\"}', 'bot-d')",
	"durable.outbox_enqueue('standby-2', 'chat-1', '{}')",
	"durable.outbox_claim('bot-d')",
	"durable.outbox_sent('sending-1', 1, 'p')",
	"durable.outbox_failed('sending-1', 1, 'x')",
	"durable.outbox_heartbeat('sending-1', 1)",
	"durable.outbox_retry('queued-1')",
	"durable.outbox_discard('sent-1')",
	"durable.instance_start('bot-a')",
	"durable.sweep()",
	"durable.purge()",
	"durable.permit('identify', 1, '5s')",
	"durable.session_save('gateway', 0, 'other', 43, 'wss://resume', 1)");
foreach my $call (@writes)
{
	my ($ret, $out, $err) =
	  $standby->psql('postgres', "\\set VERBOSITY verbose\nSELECT * FROM $call");
	like($err, qr/ERROR:  25006: cannot execute \w+/, "on the standby, $call refuses: 25006");
}

foreach my $claim ('inbox_claim', 'outbox_claim')
{
	my $start = time;
	my ($ret, $out, $err) = $standby->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT * FROM durable.$claim('bot-d', 1, wait => '30s')");
	my $took = time - $start;
	like($err, qr/25006/, "on the standby, $claim(wait => '30s') refuses: 25006");
	cmp_ok($took, '<', 10, "... at once, without waiting ($took s)");
}

# The primary's worker may move the leases of bot-b meanwhile: compare the
# standby's gauges with the primary's from a moment the primary's stood still.
my ($on_primary, $on_standby);
for (1 .. 5)
{
	$on_primary = $primary->safe_psql('postgres', 'SELECT * FROM durable.standing()');
	$primary->wait_for_catchup($standby, 'replay');
	$on_standby = $standby->safe_psql('postgres', 'SELECT * FROM durable.standing()');
	last if $on_primary eq $primary->safe_psql('postgres', 'SELECT * FROM durable.standing()');
}
is($on_standby, $on_primary, 'standing() on the standby reads what the primary reads');
is( $standby->safe_psql('postgres',
		"SELECT session_id, sequence, ignored FROM durable.session_load('gateway', 0, 'wss://resume', 1, '1h')"
	),
	'session-secret|42|',
	'session_load() on the standby returns the session the primary saved');
is($standby->safe_psql('postgres', 'SELECT inbound_journaled FROM durable.metrics()'),
	'0', 'metrics() on the standby counts what this server did: nothing');

# The standby stops receiving WAL; then the old primary leases 60 records in
# a transaction it never commits.  Those tokens reach no confirmation, but a
# bot has seen them, and the sequence's WAL that covered them (it logs 32
# values ahead) never reached the standby: without the lift at the first
# token after the promotion, the new primary would hand the same tokens out
# again.
$standby->append_conf('postgresql.conf', "primary_conninfo = ''");
$standby->reload;
$primary->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_stat_replication')
  or die 'the standby still streams';
my $open = $primary->background_psql('postgres');
my ($uncommitted_token) = $open->query_safe(
	"BEGIN; SELECT max(token) FROM durable.inbox_claim('bot-c', 60, '1h');") =~ /(\d+)/;
my $old_max_token = $primary->safe_psql('postgres',
	"SELECT greatest(max(token), $uncommitted_token) FROM (SELECT token FROM durable.inbox"
	  . " UNION ALL SELECT token FROM durable.outbox) AS t");
cmp_ok($uncommitted_token, '>', $standby->safe_psql('postgres', 'SELECT last_value FROM durable.token_seq'),
	'the old primary handed out tokens the standby\'s sequence has not reached');

# bot-b's leases have run out, and nobody recovered them: that is the
# promoted standby's worker's job.
sleep 2;
is( $standby->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM durable.inbox WHERE owner = 'bot-b' AND state = 'leased' AND lease_until < now())"
		  . " || ' ' || (SELECT count(*) FROM durable.outbox WHERE key LIKE 'sending-%' AND state = 'sending')"),
	'10 5',
	'before the failover the standby still has bot-b\'s 10 expired leases and 5 sends in flight');

# --- Failover -------------------------------------------------------------

$primary->stop('immediate');
eval { $open->quit };
$standby->promote;

ok($standby->poll_query_until('postgres',
		"SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type IN ('durable launcher', 'durable worker')"),
	'promoted, the standby starts the launcher and its database\'s worker');

is($standby->safe_psql('postgres', 'SELECT count(*) FROM durable.inbox'),
	'100', 'every admit the old primary committed is there');
is( $standby->safe_psql('postgres',
		"SELECT count(*) FROM durable.outbox WHERE state = 'sent' AND provider_message_id LIKE 'provider-%'"),
	'10',
	'every send the old primary confirmed is there, with its provider message id');

ok( $standby->poll_query_until('postgres',
		"SELECT count(*) = 10 FROM durable.inbox WHERE state = 'pending' AND attempts = 1"),
	'the worker returns the expired leases of the replica that died to pending');
ok( $standby->poll_query_until('postgres',
		"SELECT count(*) = 5 FROM durable.outbox WHERE state = 'unknown' AND key LIKE 'sending-%'"),
	'and flags its sends in flight as ambiguous (unknown)');
is($standby->safe_psql('postgres', 'SELECT * FROM durable.instance_start(\'bot-a\')'),
	'10|0', 'instance_start() of the replica that restarts recovers its 10 live leases');

my ($new_id, $new_token) = split /\|/, $standby->safe_psql('postgres',
	"SELECT id || '|' || token FROM durable.inbox_claim('bot-e', 1, '1h') ORDER BY id");
ok($new_id > 0, 'the new primary hands out claims');
cmp_ok($new_token, '>', $old_max_token,
	'under a token above every token the old primary handed out, the uncommitted one included');
my ($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT durable.inbox_complete($old_id, $old_token)");
like($err, qr/DR001/, 'the old holder of a lease is fenced off (DR001)');

is( $standby->safe_psql('postgres',
		"SELECT action, provider_message_id FROM durable.outbox_begin('sent-3', 'chat-3', '{\"text\": \"hi\"}', 'bot-e')"
	),
	'sent|provider-3',
	'a key the old primary sent is answered from the journal, not sent again');
is( $standby->safe_psql('postgres',
		"SELECT count(*) FROM durable.outbox_claim('bot-e', 10) WHERE key LIKE 'queued-%'"),
	'5',
	'the sends the old primary queued are claimed on the new one');

# A claim that waits on the new primary is woken by an admit there.  Every
# record it could claim is taken first, so it waits.
$standby->safe_psql('postgres', "SELECT count(*) FROM durable.inbox_claim('bot-g', 1000, '1h')");
my $waiter = $standby->background_psql('postgres');
$waiter->query_until(qr/waiting/,
	"\\echo waiting\nSELECT message_id FROM durable.inbox_claim('bot-f', 1, wait => '60s');\n");
ok( $standby->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event_type = 'Extension'"
		  . " AND query LIKE '%bot-f%'"),
	'a claim on the new primary waits in the server');
my $start = time;
$standby->safe_psql('postgres',
	"SELECT count(*) FROM durable.inbox_admit('tap', 'after-failover', 'chat-new')");
my $claimed = $waiter->query_safe('');
like($claimed, qr/after-failover/, 'and takes the message admitted there');
cmp_ok(time - $start, '<', 30, '... when it is admitted, not when its wait ends');
$waiter->quit;

like(amcheck($standby), qr/^1[0-9] indexes, 0 heap corruptions$/,
	'amcheck on the promoted standby after its own writes: intact');

done_testing();
