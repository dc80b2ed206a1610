# t/023_logical_replication.pl
# Logical replication (and any change-data-capture reader of the WAL) sees
# durable's journals as they are.  Most of durable's writes skip the
# executor (src/direct.c): speculative inserts confirmed or taken back, HOT
# and non-HOT updates, deletes, payloads large enough to be TOASTed.  Every
# one of them must decode to the change it made, or a subscriber's copy
# drifts from the journal without an error anywhere.
#
# A publisher runs every kind of call against a publication FOR ALL TABLES;
# a subscriber with durable installed (its worker asleep: the copy is not
# worked on) must end with the same rows in every table of durable's.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $publisher = PostgreSQL::Test::Cluster->new('publisher');
$publisher->init(allows_streaming => 'logical');
$publisher->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '1h'
max_prepared_transactions = 10
});
$publisher->start;

my $subscriber = PostgreSQL::Test::Cluster->new('subscriber');
$subscriber->init;
$subscriber->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '1h'
});
$subscriber->start;

$publisher->safe_psql('postgres', qq{
CREATE EXTENSION durable;
CREATE PUBLICATION everything FOR ALL TABLES;
});
$subscriber->safe_psql('postgres', 'CREATE EXTENSION durable');

# Some records before the subscription: the initial copy.
$publisher->safe_psql('postgres', qq{
SELECT count(*) FROM generate_series(1, 20) AS i,
	durable.inbox_admit('tap', 'before-' || i, 'chat-' || i, jsonb_build_object('n', i));
});

my $connstr = $publisher->connstr . ' dbname=postgres';
$subscriber->safe_psql('postgres',
	"CREATE SUBSCRIPTION copy CONNECTION '$connstr' PUBLICATION everything");
$subscriber->wait_for_subscription_sync($publisher, 'copy');

# A payload that does not compress below the TOAST threshold: stored out of
# line, and decoded from its TOAST chunks.
my $big = "(SELECT jsonb_build_object('blob', string_agg(md5(g::text), '')) FROM generate_series(1, 400) AS g)";

$publisher->safe_psql('postgres', qq{
-- inbox: admits (leased at once, pending, duplicates, id-less), claims,
-- every confirmation, replays.
SELECT count(*) FROM generate_series(1, 30) AS i,
	durable.inbox_admit('tap', 'm' || i, 'chat-' || i, jsonb_build_object('n', i));
SELECT count(*) FROM generate_series(1, 5) AS i,
	durable.inbox_admit('tap', 'm' || i, 'chat-' || i);
SELECT count(*) FROM durable.inbox_admit('tap', NULL, 'chat-x', '{"idless": true}');
SELECT count(*) FROM durable.inbox_admit('tap', 'big', 'chat-big', $big, instance => 'bot-a', lease => '1h');
SELECT count(*) FROM generate_series(1, 5) AS i,
	durable.inbox_admit('tap', 'leased-' || i, 'chat-l' || i, instance => 'bot-a', lease => '1h');
});

# One confirmation of each kind, in order, each on a record claimed for it.
sub claim_one
{
	my ($sql_after) = @_;
	my ($id, $token) = split /\|/,
	  $publisher->safe_psql('postgres', "SELECT id, token FROM durable.inbox_claim('bot-b', 1, '1h')");
	(my $sql = $sql_after) =~ s/\$id/$id/g;
	$sql =~ s/\$token/$token/g;
	$publisher->safe_psql('postgres', $sql);
	return $id;
}
# (A released record is due again at once: the release comes last, so that
# no later claim takes it back.)
claim_one('SELECT durable.inbox_complete($id, $token)');
claim_one("SELECT durable.inbox_fail(\$id, \$token, 'temporary', '1h')");
claim_one("SET durable.inbox_max_attempts = 1; SELECT durable.inbox_fail(\$id, \$token, 'for good')");
claim_one("SELECT durable.inbox_heartbeat(\$id, \$token, '2h')");
my $replayed = claim_one('SELECT durable.inbox_complete($id, $token)');
$publisher->safe_psql('postgres', "SELECT durable.inbox_replay($replayed)");
claim_one('SELECT durable.inbox_release($id, $token)');
$publisher->safe_psql('postgres', qq{
SELECT durable.inbox_complete(array_agg(id), array_agg(token))
  FROM durable.inbox_claim('bot-c', 10, '1h');
SELECT durable.inbox_complete(id, token) FROM durable.inbox WHERE source = 'tap' AND message_id = 'big';
});

# A confirmation in a transaction that rolls back, and one prepared and
# committed later: neither may reach the subscriber but as it ended.
$publisher->safe_psql('postgres', qq{
BEGIN;
SELECT durable.inbox_complete(id, token) FROM durable.inbox WHERE message_id = 'leased-1';
ROLLBACK;
BEGIN;
SELECT durable.inbox_complete(id, token) FROM durable.inbox WHERE message_id = 'leased-2';
PREPARE TRANSACTION 'complete-leased-2';
COMMIT PREPARED 'complete-leased-2';
});

# outbox: begins (sent, failed, retried, repeated), a big send, enqueues,
# claims, retries, discards, an instance restart.
$publisher->safe_psql('postgres', qq{
SELECT count(*) FROM generate_series(1, 10) AS i,
	durable.outbox_begin('sent-' || i, 'chat-' || i, jsonb_build_object('n', i), 'bot-a') AS b,
	durable.outbox_sent(b.key, b.token, 'provider-' || i);
SELECT count(*) FROM generate_series(1, 3) AS i,
	durable.outbox_begin('sent-' || i, 'chat-' || i, jsonb_build_object('n', i), 'bot-a');
SELECT count(*) FROM durable.outbox_begin('big', 'chat-big', $big, 'bot-a') AS b,
	durable.outbox_sent(b.key, b.token, 'provider-big');
SELECT count(*) FROM generate_series(1, 5) AS i,
	durable.outbox_begin('failing-' || i, 'chat-f' || i, '{}', 'bot-a') AS b,
	durable.outbox_failed(b.key, b.token, 'provider said no', i % 2 = 0, '1h');
SELECT count(*) FROM generate_series(1, 5) AS i,
	durable.outbox_enqueue('queued-' || i, 'chat-q' || i, jsonb_build_object('n', i));
SELECT count(*) FROM durable.outbox_claim('bot-b', 3, '1h');
SELECT durable.outbox_retry('failing-1');
SELECT durable.outbox_discard('sent-10');
SELECT count(*) FROM generate_series(1, 3) AS i,
	durable.outbox_begin('inflight-' || i, 'chat-i' || i, '{}', 'bot-d', '1h');
SELECT * FROM durable.instance_start('bot-d');
});

# The purge deletes finished records; sessions and permits.
$publisher->safe_psql('postgres', qq{
UPDATE durable.inbox SET done_at = done_at - interval '30 days', finished_at = finished_at - interval '30 days'
 WHERE id IN (SELECT id FROM durable.inbox WHERE state = 'done' ORDER BY id LIMIT 3);
UPDATE durable.outbox SET sent_at = sent_at - interval '30 days'
 WHERE key IN ('sent-1', 'sent-2');
SELECT durable.purge(older_than => '7 days');
SELECT durable.session_save('gateway', 0, 'secret-1', 1, 'wss://a', 2);
SELECT durable.session_save('gateway', 1, 'secret-2', 7, 'wss://a', 2);
SELECT durable.session_save('gateway', 0, 'secret-3', 9, 'wss://b', 2);
SELECT durable.permit('identify', 1, '5s');
SELECT durable.permit('identify', 1, '5s');
SELECT durable.permit('global', 50, '1s') FROM generate_series(1, 3);
});

$publisher->wait_for_catchup('copy');

my %order = (
	inbox => 'id',
	outbox => 'key',
	sessions => 'bot, shard',
	permit_buckets => 'bucket',
	permits => 't::text');
foreach my $table (sort keys %order)
{
	my $digest = "SELECT count(*) || ' rows, ' || md5(coalesce(string_agg(t::text, E'\\n' ORDER BY $order{$table}), ''))"
	  . " FROM durable.$table AS t";
	my $there = $subscriber->safe_psql('postgres', $digest);
	is($there, $publisher->safe_psql('postgres', $digest),
		"durable.$table on the subscriber is the publisher's ($there)");
	unlike($there, qr/^0 rows/, "... and holds rows");
}

is( $subscriber->safe_psql('postgres',
		"SELECT string_agg(state || ' ' || n, ', ' ORDER BY state) FROM"
		  . " (SELECT state, count(*) AS n FROM durable.inbox GROUP BY state) AS s"),
	'dead 1, done 10, leased 5, pending 38',
	'every inbox state arrived (one dead record among them)');
is( $subscriber->safe_psql('postgres',
		"SELECT length(payload->>'blob') FROM durable.inbox WHERE message_id = 'big'"),
	'12800',
	'the TOASTed payload arrived whole');
is( $subscriber->safe_psql('postgres',
		"SELECT state FROM durable.inbox WHERE message_id IN ('leased-1', 'leased-2') ORDER BY message_id"),
	"leased\ndone",
	'a rolled-back confirmation did not arrive, a prepared and committed one did');
is( $subscriber->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM durable.inbox WHERE done_at < now() - interval '7 days')"
		  . " + (SELECT count(*) FROM durable.outbox WHERE key IN ('sent-1', 'sent-2'))"),
	'0',
	'the purge\'s deletes arrived');

# The subscription's walsender is always active, with no transaction: it
# journals nothing, and must not hold the sweep's announcement window back
# (before 2026-12-05 every pass announced the same due send for 30 s).
is( $publisher->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity
		WHERE backend_type = 'walsender' AND state = 'active'}),
	'1', 'the publisher has an active walsender');
$publisher->safe_psql('postgres',
	"SELECT created FROM durable.outbox_enqueue('due-soon', 'chat-due', '{}', clock_timestamp() + interval '100 ms')");
$publisher->safe_psql('postgres', 'SELECT pg_sleep(0.3)');
like( $publisher->safe_psql('postgres',
		q{SELECT (SELECT outbox_due FROM durable.sweep()) || ' ' || (SELECT outbox_due FROM durable.sweep())}),
	qr/^[1-9][0-9]* 0$/, 'sends that came due are announced by one pass, not again by the next, beside the walsender');
# sweep()'s windows are an unlogged table: a publication FOR ALL TABLES
# leaves them out (the initial copy of their rows onto the subscriber's own
# was a duplicate key that stopped the subscription), and both sides keep
# their own.
is( $publisher->safe_psql('postgres',
		q{SELECT count(*) FROM pg_publication_tables WHERE schemaname = 'durable' AND tablename = 'sweep_windows'}),
	'0', 'durable.sweep_windows is not published');
is( $subscriber->safe_psql('postgres', q{SELECT count(*) FROM durable.sweep_windows}),
	'2', 'the subscriber keeps its own sweep() windows');
done_testing();
