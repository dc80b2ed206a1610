# t/030_postmaster_kill9.pl: the postmaster killed with SIGKILL under load
# (tests.md, 8).
#
# The crash test stops the server with pg_ctl stop -m immediate, whose
# postmaster still tells its children to quit.  Here the postmaster itself
# dies with SIGKILL while bots run the bot path and the send path: its
# children are orphans that go on until they notice, and the server can
# start again only once they are all gone (it refuses while they hold the
# old shared memory).  Then WAL recovery, and the checks a bot relies on:
#
#   - every cycle pgbench acknowledged (its per-transaction log) is in the
#     journals: the message done, the send sent;
#   - what was in flight is either finished or recovered by the worker
#     once its 2 s lease ran out: messages pending again, sends unknown
#     (never sent again by themselves);
#   - no fencing token comes again: the next one is above every token the
#     journals hold, and above one a bot was handed in a transaction the
#     kill cut short (it is in no journal: the check on the journals alone
#     could not fail, found by review);
#   - the worker is back, and the indexes and heaps check clean (amcheck).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableInvariants;

my $node = PostgreSQL::Test::Cluster->new('postmaster_kill9');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '200ms'
fsync = on
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable; CREATE EXTENSION amcheck');

# One cycle: a message admitted and leased at once (a chat of its own), then
# completed; a reply journaled and leased, then marked sent.  n counts the
# client's cycles from 1, as pgbench's log numbers the transactions it
# finished.
my $script = $node->basedir . '/cycle.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set n :n + 1
SELECT id AS mid, token AS mtok
  FROM durable.inbox_admit('kill9', :client_id || '-' || :n, 'chat-' || :client_id || '-' || :n,
                           instance => 'bot-' || :client_id, lease => '2 s') \gset
SELECT durable.inbox_complete(:mid, :mtok);
SELECT token AS stok
  FROM durable.outbox_begin('send-' || :client_id || '-' || :n, 'chat-' || :client_id || '-' || :n,
                            '{}', 'bot-' || :client_id, lease => '2 s') \gset
SELECT durable.outbox_sent('send-' || :client_id || '-' || :n, :stok, 'p-' || :client_id || '-' || :n);
});

my $logprefix = $node->basedir . '/acked';
my ($out, $err) = ('', '');
my $pgbench = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '4', '-j', '2', '-T', '60', '-D', 'n=0',
		'-l', "--log-prefix=$logprefix", '-f', $script,
		'-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$out, '2>', \$err);

# Let the bots run (a hundred messages, however long a slow machine takes),
# then kill the postmaster mid-cycle.
usleep(3_000_000);
$node->poll_query_until('postgres', 'SELECT count(*) > 100 FROM durable.inbox');
my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM durable.inbox');
cmp_ok($before, '>', 100, "bots are running ($before messages journaled)");
# A bot holds a token in a transaction the kill will cut short.
my $held = $node->background_psql('postgres', on_error_stop => 0);
my ($held_token) = $held->query_safe(
	"BEGIN; SELECT token FROM durable.outbox_begin('held-uncommitted', 'chat-held', '{}', 'bot-held', lease => '1 h');")
  =~ /(\d+)/;
ok(defined $held_token, "a bot holds token $held_token, uncommitted");
my $postmaster = $node->{_pid};
$node->kill9;
eval { $held->quit };
$pgbench->finish;
like($err, qr/terminat|lost|server closed|connection/i, 'pgbench lost its connections');

# The orphans must go before the server can start again (it refuses while
# they hold the old shared memory); a failed start leaves the node marked
# running with the dead postmaster's pid, which the next try must forget.
usleep(100_000) while kill(0, $postmaster);
my $started = 0;
for my $try (1 .. 60)
{
	if ($node->start(fail_ok => 1)) { $started = 1; last; }
	$node->{_pid} = undef;
	usleep(500_000);
}
ok($started, 'the server starts again once the orphans are gone');

# pgbench's per-transaction logs: "client transaction_no ..." per cycle acknowledged.
my (@acked, $acked_clients);
for my $file (glob("$logprefix.*"))
{
	open my $fh, '<', $file or die "$file: $!";
	while (<$fh>)
	{
		my ($client, $t) = split;
		push @acked, "('$client-$t')";
	}
	close $fh;
}
cmp_ok(scalar(@acked), '>', 100, scalar(@acked) . ' cycles were acknowledged before the kill');
$node->safe_psql('postgres',
	'CREATE TABLE acked (cycle text PRIMARY KEY); INSERT INTO acked VALUES ' . join(',', @acked));

is($node->safe_psql('postgres', q{
	SELECT count(*) FROM acked a
	 WHERE NOT EXISTS (SELECT FROM durable.inbox i
	                    WHERE i.source = 'kill9' AND i.message_id = a.cycle AND i.state = 'done')
	    OR NOT EXISTS (SELECT FROM durable.outbox o
	                    WHERE o.key = 'send-' || a.cycle AND o.state = 'sent'
	                      AND o.provider_message_id = 'p-' || a.cycle)}),
	'0', 'every acknowledged cycle is there: its message done, its send sent');

# sweep()'s windows are an unlogged table, which crash recovery empties: a
# sweep() then announces from its process's window, and writes them again.
is($node->safe_psql('postgres', 'SELECT count(*) FROM durable.sweep_windows'),
	'0', "the crash emptied sweep()'s windows (unlogged)");
$node->safe_psql('postgres', 'SELECT * FROM durable.sweep()');
is($node->safe_psql('postgres', 'SELECT count(*) FROM durable.sweep_windows WHERE next_from IS NOT NULL'),
	'2', 'the next sweep() writes them again');

my $max_journaled = $node->safe_psql('postgres',
	'SELECT greatest((SELECT max(token) FROM durable.inbox), (SELECT max(token) FROM durable.outbox))');
my $next_token = $node->safe_psql('postgres',
	"SELECT b.token FROM durable.outbox_begin('after-restart', 'chat-after', '{}', 'bot-after') b, durable.outbox_sent(b.key, b.token, 'p-after')");
cmp_ok($next_token, '>', $max_journaled, 'no fencing token comes again: the next is above every token journaled');
cmp_ok($next_token, '>', $held_token // 0, '... and above the token of the transaction the kill cut short');
is($node->safe_psql('postgres', "SELECT count(*) FROM durable.outbox WHERE key = 'held-uncommitted'"),
	'0', 'whose send was never journaled');

# What was in flight: the worker recovers it once the 2 s leases run out.
my $settled = 0;
for my $try (1 .. 100)
{
	my $open = $node->safe_psql('postgres', q{
		SELECT (SELECT count(*) FROM durable.inbox WHERE state = 'leased')
		     + (SELECT count(*) FROM durable.outbox WHERE state = 'sending')});
	if ($open eq '0') { $settled = 1; last; }
	usleep(200_000);
}
ok($settled, 'the worker recovers every lease of the dead server');
is($node->safe_psql('postgres', q{
	SELECT string_agg(s, ', ' ORDER BY s) FROM (
	  SELECT DISTINCT 'inbox ' || state AS s FROM durable.inbox
	  UNION SELECT DISTINCT 'outbox ' || state FROM durable.outbox) x}),
	$node->safe_psql('postgres', q{
	SELECT string_agg(s, ', ' ORDER BY s) FROM (
	  SELECT DISTINCT 'inbox ' || state AS s FROM durable.inbox WHERE state IN ('done', 'pending')
	  UNION SELECT DISTINCT 'outbox ' || state FROM durable.outbox WHERE state IN ('sent', 'unknown')) x}),
	'messages are done or pending again, sends sent or unknown (none sent again)');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'durable worker'") > 0 ? 'yes' : 'no',
	'yes', "durable's workers are back");

is(invariant_violations($node), '', 'the journals\' invariants hold');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (
	  SELECT bt_index_check(c.oid, true) FROM pg_class c
	   WHERE c.relnamespace = 'durable'::regnamespace AND c.relkind = 'i') x}),
	$node->safe_psql('postgres',
		"SELECT count(*) FROM pg_class WHERE relnamespace = 'durable'::regnamespace AND relkind = 'i'"),
	"durable's indexes check clean (bt_index_check with heapallindexed)");
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM verify_heapam('durable.inbox') UNION ALL
	SELECT count(*) FROM verify_heapam('durable.outbox')}),
	"0\n0", 'the journals\' heaps check clean (verify_heapam)');

$node->stop;
done_testing();
