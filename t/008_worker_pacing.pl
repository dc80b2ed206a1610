# t/008_worker_pacing.pl
# The background worker paces the work that grows with the tables, so that
# a backlog does not turn it into a busy loop:
#  - lease recovery and the inbox's due-work announcement scan every open
#    record; after these scans took T, the worker skips them for 19 T (a
#    healthy queue is still scanned at every pass), and a lease lost during
#    a backlog is still recovered;
#  - after a retention pass that filled its batch, it rests 5 times as long
#    as the pass took before the next one.
# Both read from the worker's DEBUG1 line of each pass.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableLog;

my $node = PostgreSQL::Test::Cluster->new('pacing');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '20ms'
log_min_messages = debug1
} . log_settings());
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

# The worker's passes logged from byte $offset on: a list of hashes with
# at (seconds, end of the pass), pass_ms, scan ('ran' or 'skipped': the
# open-record scans), scan_ms and purged.
sub passes_since
{
	my ($offset) = @_;
	my @passes;
	foreach my $line (log_lines(slurp_file($node->logfile, $offset)))
	{
		next
		  unless $line->{message} =~
		  /^DEBUG:  durable worker: swept database "postgres": .* (\d+) purged; pass ([\d.]+) ms, open-record scans (ran|skipped) ([\d.]+) ms$/;
		push @passes,
		  {
			at => $line->{at},
			purged => $1,
			pass_ms => $2,
			scan => $3,
			scan_ms => $4
		  };
	}
	return @passes;
}

# Wait (at most three minutes) until the passes logged after byte $offset
# satisfy $done, a function of the list; returns the list.
sub wait_for_passes
{
	my ($offset, $done) = @_;
	my @p;
	for (my $i = 0; $i < 1800; $i++)
	{
		@p = passes_since($offset);
		last if $done->(@p);
		select(undef, undef, undef, 0.1);
	}
	return @p;
}

# Conditions for wait_for_passes.
sub at_least { my ($n) = @_; return sub { @_ >= $n }; }
sub scans_ran { my ($n) = @_; return sub { grep({ $_->{scan} eq 'ran' } @_) >= $n }; }

# --- A healthy queue: the scans run at (nearly) every pass.  The first
# passes plan their statements, which is slow enough to be paced: they are
# left out.
my $offset = -s $node->logfile;
wait_for_passes($offset, at_least(10));
$offset = -s $node->logfile;
# (A first scan slowed by a busy machine rests the scans for 19 times as
# long: the window runs until three of them ran.)
my @healthy = wait_for_passes($offset, sub { at_least(20)->(@_) && scans_ran(3)->(@_) });
cmp_ok(scalar @healthy, '>=', 20, 'the worker passes every naptime');
# A pass skips the scans only within 19 T of scans that took T: with few
# open records, a millisecond's scan skips none at a naptime of 20 ms.  (A
# count of passes that ran them depended on the machine: a scan slowed to
# 6 ms by another process skips five passes, as it should.)
my @unpaced;
my $last_ran;
for my $pass (@healthy)
{
	if ($pass->{scan} eq 'ran')
	{
		$last_ran = $pass;
		next;
	}
	next unless $last_ran;
	my $rest_ms = 19 * $last_ran->{scan_ms} + $pass->{pass_ms} + 2;
	my $after_ms = ($pass->{at} - $last_ran->{at}) * 1000;
	push @unpaced, sprintf('skipped %.0f ms after scans of %s ms', $after_ms, $last_ran->{scan_ms})
	  if $after_ms > $rest_ms;
}
is(join('; ', @unpaced), '', 'with few open records, a pass skips the scans only to rest 19 T after them');
cmp_ok(scalar(grep { $_->{scan} eq 'ran' } @healthy), '>=', 3, '... and the scans run');

# --- A backlog of 300,000 pending records (written straight into the journal).
$node->safe_psql(
	'postgres', q{
	INSERT INTO durable.inbox (source, message_id, chat_id, kind, payload, state,
	                           attempts, not_before, created_at)
	SELECT 'tap', 'backlog-' || g, (g % 1000)::text, 'message', '{}', 'pending', 0,
	       now(), now()
	  FROM generate_series(1, 300000) g;
	VACUUM ANALYZE durable.inbox;
});
# A lease lost during the backlog (held 50 ms by an instance that vanished).
$node->safe_psql('postgres',
	"SELECT durable.inbox_admit('tap', 'lost', 'chat-lost', instance => 'gone', lease => '50ms')"
);
$offset = -s $node->logfile;
my @backlog = wait_for_passes($offset, scans_ran(3));
my @ran = grep { $_->{scan} eq 'ran' } @backlog;
cmp_ok(scalar(grep { $_->{scan} eq 'skipped' } @backlog),
	'>', 0, 'with a backlog, passes skip the open-record scans');
cmp_ok(scalar @ran, '>=', 3, 'with a backlog, the scans still run');

# After scans that took T, the next ones come 19 T later (checked with
# 15 T: the log's timestamps are to the millisecond).
my $rested = 1;
for my $i (0 .. $#backlog - 1)
{
	next unless $backlog[$i]{scan} eq 'ran';
	my ($next) = grep { $_->{scan} eq 'ran' } @backlog[ $i + 1 .. $#backlog ];
	last unless $next;
	my $gap_ms = ($next->{at} - $backlog[$i]{at}) * 1000;
	if ($gap_ms < 15 * $backlog[$i]{scan_ms} - 1)
	{
		diag("scans of $backlog[$i]{scan_ms} ms followed by more after $gap_ms ms");
		$rested = 0;
	}
}
ok($rested, 'scans that took T are followed by 19 T without them');

ok( $node->poll_query_until(
		'postgres',
		"SELECT state = 'pending' FROM durable.inbox WHERE message_id = 'lost'"),
	'the lease lost during the backlog is recovered');

# --- Retention: 1,250 done records two days old, a retention of one day
# and a naptime long enough that only the purge's rest can pace the passes.
$node->safe_psql(
	'postgres', q{
	TRUNCATE durable.inbox;
	INSERT INTO durable.inbox (source, message_id, chat_id, kind, payload, state, attempts,
	                           token, owner, not_before, created_at, done_at, finished_at)
	SELECT 'tap', 'old-' || g, (g % 1000)::text, 'message', '{}', 'done', 1,
	       nextval('durable.token_seq'), 'bot', now() - interval '2 days',
	       now() - interval '2 days', now() - interval '2 days', now() - interval '2 days'
	  FROM generate_series(1, 1250) g;
});
$offset = -s $node->logfile;
$node->safe_psql(
	'postgres', q{
	ALTER SYSTEM SET durable.naptime = '30s';
	ALTER SYSTEM SET durable.retention = '1d';
	SELECT pg_reload_conf();
});
ok( $node->poll_query_until('postgres', 'SELECT count(*) = 0 FROM durable.inbox'),
	'the worker purges the 1,250 records');
my @purge = grep { $_->{purged} > 0 } passes_since($offset);
is(scalar @purge, 5, 'in five passes of 250');
my $paced = 1;
for my $i (0 .. $#purge - 1)
{
	my $gap_ms = ($purge[ $i + 1 ]{at} - $purge[$i]{at}) * 1000;
	if ($gap_ms < 4 * $purge[$i]{pass_ms} || $gap_ms > 20000)
	{
		diag("purge pass of $purge[$i]{pass_ms} ms followed by the next after $gap_ms ms");
		$paced = 0;
	}
}
ok($paced, 'after a full retention pass the worker rests 5 times its duration, not a naptime');

# --- A pass that fails every time (here the fail point at the end of every
# pass): each worker that ends before finishing a pass doubles the restart
# delay (1 s, 2 s, 4 s, 8 s ... up to 5 min) instead of restarting, and
# logging, every second; one finished pass brings it back to a naptime.
$node->safe_psql(
	'postgres', q{
	ALTER SYSTEM SET durable.naptime = '100ms';
	SELECT pg_reload_conf();
	CREATE DATABASE failing;
});
$node->safe_psql('failing', 'CREATE EXTENSION durable');
my $workers_of_failing = "SELECT count(*) FROM pg_stat_activity"
  . " WHERE backend_type = 'durable worker' AND datname = 'failing'";
ok($node->poll_query_until('postgres', "SELECT ($workers_of_failing) = 1"),
	'database failing has a worker');
$node->safe_psql('postgres', "ALTER DATABASE failing SET durable.fail_point = 'sweep'");
$offset = -s $node->logfile;
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'durable worker' AND datname = 'failing'");
# Meanwhile a role that can only connect runs CREATE EXTENSION IF NOT EXISTS
# durable every half second: it succeeds (a NOTICE) without creating
# anything, and must not cut the delays short (it did: a start a second).
$node->safe_psql('postgres', 'CREATE ROLE tap_connect_only LOGIN');
my $until = time + 16;
while (time < $until)
{
	$node->psql('failing', 'SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS durable',
		extra_params => [ '-U', 'tap_connect_only' ]);
	usleep(500_000);
}
my $log = slurp_file($node->logfile, $offset);
my $starts = () = $log =~ /durable worker started for database "failing"/g;
my $failures = () = $log =~ /FATAL:  durable fail point "sweep" reached/g;
ok($starts >= 3 && $starts <= 7,
	"a worker whose every pass fails is restarted with growing delays: $starts starts in 16 s (14 without)");
ok($failures >= 3, "and each of them failed ($failures)");

$offset = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER DATABASE failing RESET durable.fail_point');
$node->wait_for_log(qr/durable worker: swept database "failing"/, $offset);
ok(1, 'once the cause is gone, the next worker finishes its passes');
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'durable worker' AND datname = 'failing'");
my $stopped_at = time;
ok($node->poll_query_until('postgres', "SELECT ($workers_of_failing) = 1"),
	'a worker stopped after a finished pass comes back');
ok(time - $stopped_at < 8, 'after a naptime again, not the grown delay (16 s by now)');

# Stops durable makes on purpose (a copy of the database stops its worker
# before its first pass) are not failures: after four copies in a row, a
# stopped worker still comes back after a naptime.
$node->safe_psql('postgres', q{ALTER SYSTEM SET durable.naptime = '3s'; SELECT pg_reload_conf();});
for my $i (1 .. 4)
{
	ok($node->poll_query_until('postgres', "SELECT ($workers_of_failing) = 1"), "worker back before copy $i");
	$node->safe_psql('postgres', "CREATE DATABASE copy_$i TEMPLATE failing");
}
ok($node->poll_query_until('postgres', "SELECT ($workers_of_failing) = 1"), 'worker back after the copies');
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'durable worker' AND datname = 'failing'");
$stopped_at = time;
ok($node->poll_query_until('postgres', "SELECT ($workers_of_failing) = 1"),
	'a worker stopped after four copies comes back');
ok(time - $stopped_at < 12, 'after a naptime, not a delay grown by the copies (16 s)');

$node->stop;
done_testing();
