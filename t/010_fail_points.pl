# t/010_fail_points.pl: the recovery the contract promises when a backend
# dies at each fail point of durable.
#
# durable.fail_point (a superuser-only setting) names a point in the C code
# where the backend dies as if its process crashed: "<point>" ends it with
# FATAL (its transaction rolls back, the server stays up), "<point>:crash"
# SIGKILLs it, so the postmaster restarts every process and WAL recovery
# runs (restart_after_crash = on).  For every point below, and both
# variants, a scenario kills a backend there and then checks what a bot
# relies on:
#
#   inbox_admit     nothing is journaled; the provider's redelivery is
#                   journaled as new, once.
#   inbox_complete  the handler's effects, written in the same transaction,
#                   roll back with the completion; the lease expires, the
#                   worker returns the message to pending, it is handled
#                   again and its effects commit exactly once (single and
#                   batch forms).
#   inbox_fail      the failure report is lost, not the message: it comes
#                   back when the lease expires.
#   outbox_begin    nothing is journaled (so the provider was never called);
#                   a new send, or the retry of a failed one, just goes on.
#   outbox_sent     after the provider was called: the send stays sending,
#                   the worker makes it unknown when the lease expires, and
#                   outbox_begin never sends it again by itself.
#   outbox_failed   the refusal is lost: the send ends unknown as well.
#   sweep           a sweep that dies changes nothing; the next one (the
#                   worker's) does the work.
#   instance_start  the recovery of a dead incarnation is all or nothing and
#                   can simply be run again.
#   claim_lock      a claim that chose its record and had not locked it:
#                   nothing was leased, the next claim gets the record.
#   index_open      a completion opening one of durable's indexes rolls
#                   back with the handler's effect; it can be run again.
#   insert_open     an admit opening the journal for its insert journals
#                   nothing; the redelivery is journaled once.
#
# The list of points is kept here on purpose: the test greps src/ for
# DURABLE_FAIL_POINT("...") and fails when a point exists there but has no
# scenario, so a new point cannot go untested.  A point that only stages a
# race with ":wait" (extension_check and absent_recorded, in a look of the
# launcher's worker, before and after it records that it found nothing;
# floor_refresh, floor_publish and floor_write, at the start of a claim
# floor's refresh, between its scans and before it writes its result;
# outbox_failed_update, between a failure's clock and its update) is named
# below with the test that stages it.
#
# Run (after the library is installed, as a user that may run postgres):
#   prove -v t/010_fail_points.pl
# with PATH holding pg_config --bindir and PERL5LIB the PGXS test/perl
# directory (scripts/test does this).
use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableInvariants;

my @points = qw(inbox_admit inbox_complete inbox_fail outbox_begin
  outbox_sent outbox_failed sweep instance_start claim_lock index_open insert_open);

# ---- every point in src/ has a scenario, every scenario a point ----
my $root = $ENV{DURABLE_ROOT} // abs_path(dirname(__FILE__) . '/..');
my %in_src;
for my $file (glob "$root/src/*.c")
{
	my $text = slurp_file($file);
	$in_src{$1} = 1 while $text =~ /DURABLE_FAIL_POINT\("([^"]+)"\)/g;
}
ok(scalar(keys %in_src) > 0, "fail points found in $root/src");
# Points that stage a race in a test of their own rather than a death here.
my %staged_elsewhere = (
	extension_check => '028_install_during_check.pl',
	absent_recorded => '028_install_during_check.pl',
	floor_refresh => '009_claim_floor.pl',
	floor_publish => '009_claim_floor.pl',
	outbox_failed_update => '009_claim_floor.pl',
	floor_write => '009_claim_floor.pl');
for my $point (sort keys %in_src)
{
	if (my $test = $staged_elsewhere{$point})
	{
		like(slurp_file("$root/t/$test"), qr/\Q$point\E:wait|start_at_gate\([^;]*'\Q$point\E'/,
			"fail point $point of src/ is staged in t/$test");
		next;
	}
	ok((grep { $_ eq $point } @points),
		"fail point $point of src/ has a scenario in this test");
}
for my $point (@points)
{
	ok($in_src{$point}, "fail point $point is placed in src/");
}

# ---- the node ----
my $node = PostgreSQL::Test::Cluster->new('fail_points');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '100ms'
restart_after_crash = on
fsync = on
synchronous_commit = on
log_statement = none
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');
$node->safe_psql('postgres',
	'CREATE TABLE fp_effects (inbox_id bigint NOT NULL, token bigint NOT NULL)');

sub sql
{
	my ($query) = @_;
	return $node->safe_psql('postgres', $query);
}

sub row
{
	my ($query) = @_;
	return split /\|/, sql($query);
}

sub poll
{
	my ($query, $expected) = @_;
	return $node->poll_query_until('postgres', $query, $expected);
}

# Only the superuser may arm a fail point.
{
	sql('CREATE ROLE fp_user');
	my ($ret, $out, $err) = $node->psql('postgres',
		"SET ROLE fp_user; SET durable.fail_point = 'inbox_admit'");
	like($err, qr/permission denied to set parameter "durable.fail_point"/,
		'a non-superuser cannot set durable.fail_point');
}

my $crashes = 0;

# Wait until the restarting server accepts connections.  poll_query_until
# alone can die: its psql, refused while the server restarts, exits before
# IPC::Run has written the query to it ("ack Broken pipe").
sub wait_accepting
{
	foreach (1 .. 1800)
	{
		return 1
		  if system('pg_isready', '-q', '-h', $node->host, '-p', $node->port) == 0;
		usleep(100_000);
	}
	return 0;
}

# Run $query in a session armed with durable.fail_point = $spec and check
# that the session died at that point: the FATAL reaches the client, or,
# for ":crash", the log shows the kill and the server restarting, and the
# server accepts connections again after recovery.
sub die_at
{
	my ($spec, $query) = @_;
	my ($point, $crash) = split /:/, $spec;
	my $offset = -s $node->logfile;
	my ($ret, $out, $err) = $node->psql('postgres',
		"SET durable.fail_point = '$spec';\n$query",
		on_error_stop => 1);

	isnt($ret, 0, "$spec: the session died");
	if ($crash)
	{
		$crashes++;
		like(
			slurp_file($node->logfile, $offset),
			qr/durable fail point "\Q$spec\E" reached: killing the backend/,
			"$spec: killed at the point");
		$node->wait_for_log(
			qr/all server processes terminated; reinitializing/, $offset);
		ok(wait_accepting() && $node->poll_query_until('postgres', 'SELECT 1', '1'),
			"$spec: the server restarted and recovered");
		like(
			slurp_file($node->logfile, $offset),
			qr/database system was not properly shut down; automatic recovery in progress/,
			"$spec: WAL recovery ran");
	}
	else
	{
		like($err,
			qr/FATAL:  durable fail point "\Q$point\E" reached: terminating the backend/,
			"$spec: FATAL at the point");
	}
	return;
}

sub reset_journals
{
	sql('TRUNCATE durable.inbox, durable.outbox, fp_effects');
	sql('SELECT durable.metrics_reset()');
	return;
}

# The transactional-inbox handler: the effect row and the completion commit
# together.
sub handler_sql
{
	my ($id, $token, $form) = @_;
	my $complete =
	  $form eq 'batch'
	  ? "SELECT durable.inbox_complete(ARRAY[$id]::bigint[], ARRAY[$token]::bigint[]);"
	  : "SELECT durable.inbox_complete($id, $token);";
	return "BEGIN;\nINSERT INTO fp_effects VALUES ($id, $token);\n$complete\nCOMMIT;";
}

# ---- the scenarios, one per point; $v is '' (FATAL) or ':crash' ----

sub scenario_inbox_admit
{
	my ($v) = @_;
	my $name = "inbox_admit$v";
	my $admit =
	  "SELECT duplicate, token IS NOT NULL, state FROM durable.inbox_admit("
	  . "'fp', 'm-admit', 'chat-1', '{\"text\": \"hi\"}', 'message', 'bot-a', '10s')";

	reset_journals();
	die_at($name, "$admit;");
	is(sql('SELECT count(*) FROM durable.inbox'),
		'0', "$name: nothing journaled, so the provider's redelivery is still owed");
	is(sql($admit), 'f|t|leased',
		"$name: the redelivery is journaled as new and leased");
	is(sql($admit), 't|f|leased', "$name: a further redelivery is a duplicate");
	is(sql('SELECT count(*) FROM durable.inbox'), '1', "$name: one record");
	return;
}

sub scenario_inbox_complete
{
	my ($v, $form) = @_;
	my $name = "inbox_complete$v ($form)";

	reset_journals();
	my ($id, $token) = row(
		"SELECT id, token FROM durable.inbox_admit('fp', 'm-complete', 'chat-1', '{}', 'message', 'bot-a', '3s')"
	);
	die_at("inbox_complete$v", handler_sql($id, $token, $form));
	is(sql("SELECT count(*) FROM fp_effects"),
		'0', "$name: the handler's effect rolled back with the completion");
	is(sql("SELECT state <> 'done', attempts FROM durable.inbox WHERE id = $id"),
		't|1', "$name: the message is not done");
	ok(poll("SELECT state FROM durable.inbox WHERE id = $id", 'pending'),
		"$name: the expired lease goes back to pending (worker)");

	my ($id2, $token2) =
	  row("SELECT id, token FROM durable.inbox_claim('bot-b', 1, '10s')");
	is($id2, $id, "$name: the message is handed out again");
	isnt($token2, $token, "$name: under a new token");
	sql(handler_sql($id2, $token2, $form));
	is(sql("SELECT count(*) FROM fp_effects WHERE inbox_id = $id"),
		'1', "$name: its effects committed exactly once");
	is(sql("SELECT state, attempts FROM durable.inbox WHERE id = $id"),
		'done|2', "$name: done after two attempts");

	my ($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\n" . handler_sql($id, $token, $form));
	like($err, qr/ERROR:  DR001: /,
		"$name: the dead handler's token is refused (DR001)");
	is(sql("SELECT count(*) FROM fp_effects WHERE inbox_id = $id"),
		'1', "$name: and its effects with it");
	return;
}

sub scenario_inbox_fail
{
	my ($v) = @_;
	my $name = "inbox_fail$v";

	reset_journals();
	my ($id, $token) = row(
		"SELECT id, token FROM durable.inbox_admit('fp', 'm-fail', 'chat-1', '{}', 'message', 'bot-a', '3s')"
	);
	die_at($name,
		"SELECT * FROM durable.inbox_fail($id, $token, 'handler failed', '0');");
	is(sql("SELECT state <> 'dead', attempts, error IS NULL FROM durable.inbox WHERE id = $id"),
		't|1|t', "$name: the failure report is lost, the message is not");
	ok(poll("SELECT state FROM durable.inbox WHERE id = $id", 'pending'),
		"$name: the expired lease goes back to pending (worker)");
	is(sql("SELECT id = $id, attempts FROM durable.inbox_claim('bot-b', 1, '10s')"),
		't|2', "$name: the message is handed out again");
	return;
}

sub scenario_outbox_begin
{
	my ($v) = @_;
	my $name = "outbox_begin$v";

	reset_journals();
	die_at($name,
		"SELECT * FROM durable.outbox_begin('k-new', 'chat-1', '{\"text\": \"a\"}', 'bot-a', '10s');"
	);
	is(sql("SELECT count(*) FROM durable.outbox"),
		'0', "$name (new key): nothing journaled, so the provider was not called");
	is(sql("SELECT action, state FROM durable.outbox_begin('k-new', 'chat-1', '{\"text\": \"a\"}', 'bot-a', '10s')"),
		'send|sending', "$name (new key): the retry journals it and sends");

	# The same point on the path that leases a failed send again.
	my ($token) = row(
		"SELECT token FROM durable.outbox_begin('k-failed', 'chat-2', '{\"text\": \"b\"}', 'bot-a', '10s')"
	);
	is(sql("SELECT state FROM durable.outbox_failed('k-failed', $token, 'refused', true, '0')"),
		'failed', "$name (retry): the send failed and is due again");
	die_at($name,
		"SELECT * FROM durable.outbox_begin('k-failed', 'chat-2', '{\"text\": \"b\"}', 'bot-a', '10s');"
	);
	is(sql("SELECT state, attempts FROM durable.outbox WHERE key = 'k-failed'"),
		'failed|1', "$name (retry): the retry was not journaled");
	is(sql("SELECT action FROM durable.outbox_begin('k-failed', 'chat-2', '{\"text\": \"b\"}', 'bot-a', '10s')"),
		'send', "$name (retry): retrying again sends");
	is(sql("SELECT attempts FROM durable.outbox WHERE key = 'k-failed'"),
		'2', "$name (retry): the second try is counted once");
	return;
}

# A send whose confirmation (or refusal) died with the backend: unknown.
sub check_ends_unknown
{
	my ($name, $key) = @_;
	isnt(sql("SELECT state FROM durable.outbox WHERE key = '$key'"),
		'sent', "$name: the provider's answer was not journaled");
	ok(poll("SELECT state FROM durable.outbox WHERE key = '$key'", 'unknown'),
		"$name: the expired send becomes unknown (worker)");
	is(sql("SELECT action, state FROM durable.outbox_begin('$key', 'chat-1', '{\"text\": \"c\"}', 'bot-b', '10s')"),
		'unknown|unknown', "$name: outbox_begin does not send it again");
	# (reset_journals resets the counters, and so does a crash's restart)
	is(sql("SELECT outbox_ambiguous FROM durable.metrics()"),
		'1', "$name: counted once in outbox_ambiguous");
	return;
}

sub scenario_outbox_sent
{
	my ($v) = @_;
	my $name = "outbox_sent$v";

	reset_journals();
	my ($token) = row(
		"SELECT token FROM durable.outbox_begin('k-sent', 'chat-1', '{\"text\": \"c\"}', 'bot-a', '3s')"
	);
	# Here the bot called the provider, which delivered the message.
	die_at($name,
		"SELECT durable.outbox_sent('k-sent', $token, 'provider-1');");
	check_ends_unknown($name, 'k-sent');
	return;
}

sub scenario_outbox_failed
{
	my ($v) = @_;
	my $name = "outbox_failed$v";

	reset_journals();
	my ($token) = row(
		"SELECT token FROM durable.outbox_begin('k-refused', 'chat-1', '{\"text\": \"c\"}', 'bot-a', '3s')"
	);
	die_at($name,
		"SELECT * FROM durable.outbox_failed('k-refused', $token, 'refused', true, '0');"
	);
	check_ends_unknown($name, 'k-refused');
	return;
}

sub scenario_sweep
{
	my ($v) = @_;
	my $name = "sweep$v";

	reset_journals();
	# Keep the worker out of the way while the leases expire.
	sql("ALTER SYSTEM SET durable.naptime = '1h'");
	sql('SELECT pg_reload_conf()');
	usleep(2_000_000);
	my ($id) = row(
		"SELECT id FROM durable.inbox_admit('fp', 'm-sweep', 'chat-1', '{}', 'message', 'bot-a', '50ms')"
	);
	sql("SELECT * FROM durable.outbox_begin('k-sweep', 'chat-2', '{}', 'bot-a', '50ms')");
	usleep(200_000);
	die_at($name, "SELECT * FROM durable.sweep();");
	if (!$v)
	{
		# (After a crash restart the new worker may sweep at once.)
		is(sql("SELECT state FROM durable.inbox WHERE id = $id")
			  . '/' . sql("SELECT state FROM durable.outbox WHERE key = 'k-sweep'"),
			'leased/sending', "$name: the dead sweep changed nothing");
	}
	sql('ALTER SYSTEM RESET durable.naptime');
	sql('SELECT pg_reload_conf()');
	ok(poll("SELECT state FROM durable.inbox WHERE id = $id", 'pending'),
		"$name: the next sweep (worker) returns the expired lease");
	ok(poll("SELECT state FROM durable.outbox WHERE key = 'k-sweep'", 'unknown'),
		"$name: and makes the expired send unknown");
	return;
}

sub scenario_instance_start
{
	my ($v) = @_;
	my $name = "instance_start$v";

	reset_journals();
	my ($id) = row(
		"SELECT id FROM durable.inbox_admit('fp', 'm-boot', 'chat-1', '{}', 'message', 'bot-i', '60s')"
	);
	sql("SELECT * FROM durable.outbox_begin('k-boot', 'chat-2', '{}', 'bot-i', '60s')");
	die_at($name, "SELECT * FROM durable.instance_start('bot-i');");
	is(sql("SELECT state, owner FROM durable.inbox WHERE id = $id")
		  . '/' . sql("SELECT state, owner FROM durable.outbox WHERE key = 'k-boot'"),
		'leased|bot-i/sending|bot-i', "$name: the recovery rolled back as a whole");
	is(sql("SELECT * FROM durable.instance_start('bot-i')"),
		'1|1', "$name: running it again recovers both");
	is(sql("SELECT state FROM durable.inbox WHERE id = $id")
		  . '/' . sql("SELECT state FROM durable.outbox WHERE key = 'k-boot'"),
		'pending/unknown', "$name: the message is pending, the send unknown");
	return;
}

# A claim that dies after choosing its record and before locking it (the
# point is also where spec claim_replaced holds a claim with ":wait"):
# nothing was leased, and the next claim gets the record.
sub scenario_claim_lock
{
	my ($v) = @_;
	my $name = "claim_lock$v";

	reset_journals();
	sql("SELECT 1 FROM durable.inbox_admit('fp', 'm-claim', 'chat-1')");
	sql("SELECT 1 FROM durable.outbox_enqueue('k-claim', 'chat-2', '{}')");
	die_at($name, "SELECT * FROM durable.inbox_claim('bot-a');");
	die_at($name, "SELECT * FROM durable.outbox_claim('bot-a');");
	is(sql("SELECT state || '/' || attempts FROM durable.inbox WHERE message_id = 'm-claim'")
		  . ' ' . sql("SELECT state || '/' || attempts FROM durable.outbox WHERE key = 'k-claim'"),
		'pending/0 pending/0', "$name: nothing was leased");
	is(sql("SELECT message_id, attempts FROM durable.inbox_claim('bot-b')"),
		'm-claim|1', "$name: the next inbox claim gets the message");
	is(sql("SELECT key, attempts FROM durable.outbox_claim('bot-b')"),
		'k-claim|1', "$name: the next outbox claim gets the send");
	return;
}

# A call that dies as it opens one of durable's indexes (the point is also
# where t/016_reindex_concurrently holds a completion while an index is
# swapped under it, with ":wait"): the completion and the handler's effect
# roll back together, and the holder completes under its token afterwards.
sub scenario_index_open
{
	my ($v) = @_;
	my $name = "index_open$v";

	reset_journals();
	my ($id, $token) = row(
		"SELECT id, token FROM durable.inbox_admit('fp', 'm-index', 'chat-1', '{}', 'message', 'bot-a', '60s')"
	);
	die_at($name, handler_sql($id, $token, 'single'));
	is(sql("SELECT count(*) FROM fp_effects") . ' ' . sql("SELECT state FROM durable.inbox WHERE id = $id"),
		'0 leased', "$name: the completion and the handler's effect rolled back together");
	sql(handler_sql($id, $token, 'single'));
	is(sql("SELECT count(*) FROM fp_effects") . ' ' . sql("SELECT state FROM durable.inbox WHERE id = $id"),
		'1 done', "$name: the holder completes under its token afterwards");
	return;
}

# A journal insert that dies as it opens the journal (the point is also
# where t/016_reindex_concurrently holds an admit while its dedupe key is
# swapped, with ":wait"): nothing is journaled, the redelivery is, once.
sub scenario_insert_open
{
	my ($v) = @_;
	my $name = "insert_open$v";
	my $admit = "SELECT duplicate, state FROM durable.inbox_admit('fp', 'm-insert', 'chat-1')";

	reset_journals();
	die_at($name, "$admit;");
	is(sql('SELECT count(*) FROM durable.inbox'), '0', "$name: nothing journaled");
	is(sql($admit), 'f|pending', "$name: the redelivery is journaled as new");
	is(sql($admit), 't|pending', "$name: a further redelivery is a duplicate");
	return;
}

my %scenario = (
	inbox_admit => \&scenario_inbox_admit,
	inbox_complete => sub {
		scenario_inbox_complete($_[0], 'single');
		scenario_inbox_complete($_[0], 'batch');
	},
	inbox_fail => \&scenario_inbox_fail,
	outbox_begin => \&scenario_outbox_begin,
	outbox_sent => \&scenario_outbox_sent,
	outbox_failed => \&scenario_outbox_failed,
	sweep => \&scenario_sweep,
	instance_start => \&scenario_instance_start,
	claim_lock => \&scenario_claim_lock,
	index_open => \&scenario_index_open,
	insert_open => \&scenario_insert_open,);

for my $point (@points)
{
	die "no scenario for $point" unless $scenario{$point};
	for my $variant ('', ':crash')
	{
		$scenario{$point}->($variant);
	}
}

is(invariant_violations($node), '', "the journals' invariants hold after every scenario");

# Nothing but the deliberate kills: no other signal, no PANIC, no failed
# assertion.
my $log = slurp_file($node->logfile);
my $kills = () = $log =~ /terminated by signal 9/g;
is($kills, $crashes, 'the only backends killed are the ones the test killed');
unlike($log, qr/terminated by signal [^9]|PANIC|TRAP:/,
	'no other crash in the server log');

$node->stop;
done_testing();
