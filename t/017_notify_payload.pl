# t/017_notify_payload.pl
# durable.notify_payload: the NOTIFY payloads on durable_dead and
# durable_ambiguous carry keys, chat ids and errors by default (the
# contract's), and only record ids with 'ids', since any role that can
# connect may LISTEN.  Every place that sends one is covered: inbox_fail,
# the sweep's dead inbox lease, outbox_failed, the sweep's expired send,
# outbox_begin over an expired send, instance_start, and the background
# worker after a reload.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('notify_payload');
$node->init;
# The worker waits an hour between sweeps until the last part: the sweeps
# below are this test's own, in the listening session.
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '1h'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

# Run SQL in one session that LISTENs on both channels; returns the
# notifications it received, as "channel payload" lines.
sub notifications
{
	my ($sql) = @_;
	my ($stdout, $stderr);
	$node->psql(
		'postgres',
		"LISTEN durable_dead; LISTEN durable_ambiguous;\n$sql",
		stdout => \$stdout,
		stderr => \$stderr,
		on_error_die => 1);
	my @got;
	while ($stdout =~
		/Asynchronous notification "(\w+)" with payload "(.*)" received/g)
	{
		push @got, "$1 $2";
	}
	return join("\n", @got);
}

# Every kind of record that announces itself, in order: an inbound record
# failing its last attempt, one whose last lease expires, a send refused for
# good, a send whose lease expires (seen by the sweep), one whose lease
# expired (seen by outbox_begin), one of a replica that restarts.
my $all_events = q{
SET durable.inbox_max_attempts = 1;
SELECT f.state FROM durable.inbox_admit('tap', 'm-%1$s', 'chat-a', '{}', instance => 'bot') a,
                    durable.inbox_fail(a.id, a.token, 'handler crashed') f;
SELECT state FROM durable.inbox_admit('tap', 'm2-%1$s', 'chat-b', '{}', instance => 'bot', lease => '20ms');
SELECT f.state FROM durable.outbox_begin('k1-%1$s', 'chat-c', '{}', 'bot') b,
                    durable.outbox_failed(b.key, b.token, 'blocked by the user', retryable => false) f;
SELECT action FROM durable.outbox_begin('k2-%1$s', 'chat-d', '{}', 'bot', lease => '20ms');
SELECT action FROM durable.outbox_begin('k3-%1$s', 'chat-e', '{}', 'bot', lease => '400ms');
SELECT pg_sleep(0.1);
SELECT inbox_expired, outbox_ambiguous FROM durable.sweep();
SELECT pg_sleep(0.4);
SELECT action FROM durable.outbox_begin('k3-%1$s', 'chat-e', '{}', 'bot');
SELECT action FROM durable.outbox_begin('k4-%1$s', 'chat-f', '{}', 'bot-2', lease => '1h');
SELECT * FROM durable.instance_start('bot-2');
};

# ---- The default: full payloads ----

is($node->safe_psql('postgres', 'SHOW durable.notify_payload'),
	'full', 'durable.notify_payload is full by default');
is( notifications(sprintf($all_events, 'a')),
	join("\n",
		'durable_dead {"kind":"inbox","id":1,"error":"handler crashed"}',
		'durable_dead {"kind":"outbox","key":"k1-a","error":"blocked by the user"}',
		'durable_dead {"kind":"inbox","id":2,"error":"lease expired after 1 attempt"}',
		'durable_ambiguous {"key":"k2-a","chat_id":"chat-d"}',
		'durable_ambiguous {"key":"k3-a","chat_id":"chat-e"}',
		'durable_ambiguous {"key":"k4-a","chat_id":"chat-f"}'),
	'full: keys, chat ids and errors, as the contract documents them');

# ---- ids ----

my ($rc, $stdout, $stderr) =
  $node->psql('postgres', "SET durable.notify_payload = 'ids'");
like($stderr, qr/cannot be changed now/,
	'a session cannot change it: it is set for the whole server');

$node->safe_psql('postgres', "ALTER SYSTEM SET durable.notify_payload = 'ids'");
$node->reload;
ok( $node->poll_query_until(
		'postgres', "SELECT current_setting('durable.notify_payload') = 'ids'"),
	'a reload sets it');

my $got = notifications(sprintf($all_events, 'b'));
my %outbox_id = map { split /\|/ } split /\n/,
  $node->safe_psql('postgres', "SELECT key, id FROM durable.outbox");
is( $got,
	join("\n",
		'durable_dead {"kind":"inbox","id":3}',
		qq(durable_dead {"kind":"outbox","id":$outbox_id{'k1-b'}}),
		'durable_dead {"kind":"inbox","id":4}',
		qq(durable_ambiguous {"id":$outbox_id{'k2-b'}}),
		qq(durable_ambiguous {"id":$outbox_id{'k3-b'}}),
		qq(durable_ambiguous {"id":$outbox_id{'k4-b'}})),
	'ids: record ids only (durable.outbox.id for sends), no key, chat id or error');
unlike($got, qr/k\d-b|chat-|handler|blocked|lease expired/,
	'ids: no text a bot wrote reaches a listener');

# ---- The background worker follows a reload too ----

$node->safe_psql('postgres', "ALTER SYSTEM SET durable.naptime = '100ms'");
$node->reload;
my ($in, $out, $err) = ("LISTEN durable_ambiguous;\n", '', '');
my $listener = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('postgres') ],
	'<' => \$in,
	'>' => \$out,
	'2>' => \$err);
$in .= "SELECT 'listening';\n";
$listener->pump until $out =~ /listening/;
$node->safe_psql('postgres',
	"SELECT action FROM durable.outbox_begin('k-worker', 'chat-w', '{}', 'bot', lease => '20ms')");
ok( $node->poll_query_until(
		'postgres', "SELECT state = 'unknown' FROM durable.outbox WHERE key = 'k-worker'"),
	'the worker flags the expired send');
my $worker_id = $node->safe_psql('postgres',
	"SELECT id FROM durable.outbox WHERE key = 'k-worker'");
$in .= "SELECT 'checked';\n";
$listener->pump until $out =~ /checked/;
$in .= "\\q\n";
$listener->finish;
like(
	$out,
	qr/Asynchronous notification "durable_ambiguous" with payload "\{"id":$worker_id\}" received/,
	"the worker's durable_ambiguous carries the id only");

done_testing();
