# t/018_waiting_yields.pl
# A claim that waits gives way: DDL that needs its journal (which it holds
# locks on until its transaction ends) does not queue behind it for the
# whole wait, and a claim whose client has gone does not lease the next
# record to nobody.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('waiting_yields');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '1h'
log_min_messages = debug2
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

# Start a claim of the inbox that waits $wait in a psql of its own; returns
# the harness and its output.
sub start_waiting_claim
{
	my ($instance, $wait) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres'), '-c',
			"SELECT count(*) || ' claimed' FROM durable.inbox_claim('$instance', wait => '$wait', lease => '10 min')"
		],
		'<' => \$in,
		'>' => \$out,
		'2>' => \$err);
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'Extension' AND query LIKE '%$instance%'"
	) or die "the claim of $instance never waited";
	return ($h, \$out);
}

# ---- DDL on the journal does not wait out the claim's wait ----

my $start = time;
my ($claim, $claim_out) = start_waiting_claim('ddl-waiter', '30 s');
$node->safe_psql('postgres', 'CREATE INDEX inbox_created_at_test ON durable.inbox (created_at)');
my $ddl_seconds = time - $start;
$claim->finish;
ok($ddl_seconds < 5,
	sprintf('CREATE INDEX on the inbox ran in %.1f s beside a claim waiting 30 s', $ddl_seconds));
like($$claim_out, qr/^0 claimed$/m, '... which returned early, empty');
$node->safe_psql('postgres', 'DROP INDEX durable.inbox_created_at_test');

# ---- Not every DDL: ANALYZE waiting behind another ANALYZE does not end a wait ----

my ($in_a, $out_a, $err_a) = ('', '', '');
my $analyze = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('postgres') ],
	'<' => \$in_a, '>' => \$out_a, '2>' => \$err_a);
$in_a .= "BEGIN; ANALYZE durable.inbox; SELECT 'analyzed';\n";
$analyze->pump until $out_a =~ /analyzed/;
$start = time;
($claim, $claim_out) = start_waiting_claim('beside-analyze', '6 s');
my ($in_b, $out_b, $err_b) = ('', '', '');
my $second = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c', 'ANALYZE durable.inbox' ],
	'<' => \$in_b, '>' => \$out_b, '2>' => \$err_b);
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		  WHERE NOT l.granted AND l.relation = 'durable.inbox'::regclass AND a.query = 'ANALYZE durable.inbox'
		    AND EXISTS (SELECT FROM pg_stat_activity w
		                 WHERE w.wait_event = 'Extension' AND w.query LIKE '%beside-analyze%')"),
	'the second ANALYZE queues for the journal behind the first, beside the waiting claim');
$claim->finish;
my $claim_seconds = time - $start;
$in_a .= "COMMIT;\n\\q\n";
$analyze->finish;
$second->finish;
is(($second->results)[0], 0, 'and runs once the first commits') or diag($err_b);
ok($claim_seconds > 5.5,
	sprintf('a claim beside an ANALYZE waiting for another waits its 6 s (%.1f s)', $claim_seconds));

# ---- DDL on one of the journal's indexes only ----

my $tsdir = PostgreSQL::Test::Utils::tempdir;
$node->safe_psql('postgres', "CREATE TABLESPACE waiting_ts LOCATION '$tsdir'");
$start = time;
($claim, $claim_out) = start_waiting_claim('index-ddl', '30 s');
$node->safe_psql('postgres', 'ALTER INDEX durable.inbox_done_at_idx SET TABLESPACE waiting_ts');
$ddl_seconds = time - $start;
$claim->finish;
ok($ddl_seconds < 5,
	sprintf('ALTER INDEX ... SET TABLESPACE on an inbox index ran in %.1f s beside a claim waiting 30 s',
		$ddl_seconds));
$node->safe_psql('postgres', 'ALTER INDEX durable.inbox_done_at_idx SET TABLESPACE pg_default');

# ---- Looking is not claiming: an idle wait reads the journal at its start and end ----

my $log_offset = -s $node->logfile;
($claim, $claim_out) = start_waiting_claim('idle', '6.5 s');
$claim->finish;
my $attempts = () = substr(slurp_file($node->logfile), $log_offset) =~ /durable: waiting claim attempts/g;
ok($attempts >= 1 && $attempts <= 2,
	"an idle claim waiting 6.5 s made $attempts attempts (its looks, once a second, are not attempts)");

# ---- An admit still wakes a waiting claim at once ----

($claim, $claim_out) = start_waiting_claim('woken', '30 s');
$start = time;
$node->safe_psql('postgres', "SELECT durable.inbox_admit('tap', 'w1', 'chat-w')");
$claim->finish;
my $wake_seconds = time - $start;
like($$claim_out, qr/^1 claimed$/m, 'an admit wakes the waiting claim, which leases the record');
ok($wake_seconds < 2, sprintf('... %.2f s after the admit', $wake_seconds));

# ---- A claim whose client has gone leases nothing ----

($claim, $claim_out) = start_waiting_claim('zombie', '30 s');
$claim->kill_kill;
# The admit's wake-up reaches the orphaned claim, which looks at its client
# before it claims.
$node->safe_psql('postgres', "SELECT durable.inbox_admit('tap', 'z1', 'chat-z')");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE query LIKE '%zombie%' AND pid <> pg_backend_pid()"),
	'the backend of a waiting claim whose client was killed ends');
is($node->safe_psql('postgres', "SELECT state || '/' || coalesce(owner, '-') FROM durable.inbox WHERE message_id = 'z1'"),
	'pending/-', '... without leasing the record admitted meanwhile: it stays for a live claimer');
ok($node->log_contains(qr/A waiting claim found its client gone, and claimed nothing/),
	'... and the log says why it ended');

done_testing();
