# t/013_clock_step.pl
# A wall clock set back (an NTP step, an operator's mistake) must not pause
# durable for as long as the step: the worker's pacing and a waiting claim's
# deadline run on the monotonic clock.  Before, a clock set back an hour
# stopped lease recovery for an hour and stretched inbox_claim(wait => 2 s)
# by an hour.
#
# The server runs under a small LD_PRELOAD library that adds the number of
# seconds written in a file to gettimeofday() and clock_gettime(CLOCK_REALTIME)
# (where PostgreSQL reads the wall clock); the monotonic clock is left alone.

use strict;
use warnings;

use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableGate;
use Time::HiRes qw(time usleep);

my $dir = PostgreSQL::Test::Utils::tempdir;
my $shift_file = "$dir/clock_shift";
my $shim_c = "$dir/clock_shift.c";
my $shim_so = "$dir/clock_shift.so";

append_to_file($shift_file, '0');
append_to_file(
	$shim_c, q{
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Seconds to add to the wall clock: the file named by CLOCK_SHIFT_FILE. */
static long
clock_shift(void)
{
	const char *path = getenv("CLOCK_SHIFT_FILE");
	char		buf[32];
	ssize_t		n;
	int			fd;

	if (path == NULL || (fd = open(path, O_RDONLY)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

int
gettimeofday(struct timeval *tv, void *tz)
{
	static int	(*real) (struct timeval *, void *);
	int			rc;

	if (real == NULL)
		real = (int (*) (struct timeval *, void *)) dlsym(RTLD_NEXT, "gettimeofday");
	rc = real(tv, tz);
	if (rc == 0 && tv != NULL)
		tv->tv_sec += clock_shift();
	return rc;
}

int
clock_gettime(clockid_t id, struct timespec *ts)
{
	static int	(*real) (clockid_t, struct timespec *);
	int			rc;

	if (real == NULL)
		real = (int (*) (clockid_t, struct timespec *)) dlsym(RTLD_NEXT, "clock_gettime");
	rc = real(id, ts);
	if (rc == 0 && ts != NULL && id == CLOCK_REALTIME)
		ts->tv_sec += clock_shift();
	return rc;
}
});
my $cc = $ENV{CC} // 'cc';
system_or_bail($cc, '-shared', '-fPIC', '-O2', '-o', $shim_so, $shim_c, '-ldl');

sub set_clock_shift
{
	my ($seconds) = @_;
	open(my $fh, '>', "$shift_file.new") or die "cannot write $shift_file.new: $!";
	print $fh $seconds;
	close($fh);
	rename("$shift_file.new", $shift_file) or die "cannot rename to $shift_file: $!";
}

my $node = PostgreSQL::Test::Cluster->new('clock');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '100ms'
log_min_messages = debug1
});
{
	local $ENV{LD_PRELOAD} = $shim_so;
	local $ENV{CLOCK_SHIFT_FILE} = $shift_file;
	$node->start;
}
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

# The shim works: the server's clock follows the file.
my $before = $node->safe_psql('postgres', 'SELECT extract(epoch FROM now())::bigint');
set_clock_shift(-3600);
my $after = $node->safe_psql('postgres', 'SELECT extract(epoch FROM now())::bigint');
ok($before - $after > 3500 && $before - $after < 3700,
	"the server's wall clock went back an hour ($before -> $after)");

# Let the worker run passes at the clock it knew, then set it back an hour
# more: the worker's next pass would be due an hour later by the wall clock.
my $offset = -s $node->logfile;
$node->poll_query_until('postgres', 'SELECT true')
  or die 'server gone';
for (my $i = 0; $i < 300; $i++)
{
	last if slurp_file($node->logfile, $offset) =~ /durable worker: swept database "postgres"/;
	usleep(100_000);
}
set_clock_shift(-7200);

# --- Lease recovery keeps running: a lease that expires after the step is
# recovered by the worker within seconds.
$node->safe_psql('postgres',
	q{SELECT id FROM durable.inbox_admit('clock', 'm1', 'c1', instance => 'frozen', lease => '1 s')});
ok( $node->poll_query_until(
		'postgres',
		q{SELECT state = 'pending' FROM durable.inbox WHERE source = 'clock' AND message_id = 'm1'}),
	'a lease that expired after the clock was set back is recovered');

# --- A waiting claim ends at its wait, even when the clock is set back
# during the wait.  The queue is emptied first, so that the claim waits.
is( $node->safe_psql(
		'postgres',
		q{SELECT count(durable.inbox_complete(id, token)) FROM durable.inbox_claim('w', max => 10)}),
	'1',
	'the recovered record is claimed and completed');
my $child = fork();
die "fork: $!" unless defined $child;
if ($child == 0)
{
	usleep(700_000);
	set_clock_shift(-10800);
	POSIX::_exit(0);
}
my $started = time();
my ($rc, $out, $err) = $node->psql(
	'postgres',
	q{SELECT count(*) FROM durable.inbox_claim('waiting', max => 1, wait => '3 s')},
	timeout => 30,
	timed_out => \my $timed_out);
my $waited = time() - $started;
waitpid($child, 0);
ok(!$timed_out, 'the waiting claim returned within 30 s');
is($out, '0', 'the waiting claim returned empty-handed') or diag($err);
ok($waited >= 2.5 && $waited < 20,
	sprintf('a 3 s wait with the clock set back an hour during it took %.1f s', $waited));

# --- durable_ready keeps coming.  The worker's announcement windows start
# where the previous one ended: after a step back that point lies ahead of
# the clock (before, every window was empty until the clock caught up), and
# after a step forward the window spans the step (before, it reached back
# 30 s at most, and work due early in the step was never announced).  The
# worker logs each pass's count of sends that came due.
sub announced_after
{
	my ($offset) = @_;
	for (my $i = 0; $i < 150; $i++)
	{
		return 1
		  if slurp_file($node->logfile, $offset) =~
		  /swept database "postgres": \d+ expired, \d+ ambiguous, [1-9]\d* due/;
		usleep(100_000);
	}
	return 0;
}

set_clock_shift(-14400);
$offset = -s $node->logfile;
for (my $i = 0; $i < 100; $i++)
{
	last if slurp_file($node->logfile, $offset) =~ /swept database "postgres"/;
	usleep(100_000);
}
$offset = -s $node->logfile;
$node->safe_psql('postgres',
	q{SELECT created FROM durable.outbox_enqueue('after-back', 'c2', '{}', not_before => now() + interval '1 s')});
ok(announced_after($offset), 'a send due a second after the clock was set back is announced');

$offset = -s $node->logfile;
$node->safe_psql('postgres',
	q{SELECT created FROM durable.outbox_enqueue('in-step', 'c3', '{}', not_before => now() + interval '5 s')});
set_clock_shift(-14400 + 60);
ok(announced_after($offset), 'a send that came due inside a 60 s step forward is announced');

# --- A pass's later steps read the clock when they run, not when the pass
# began.  A pass is held up (here by a trigger of the test's on the inbox,
# which waits at a gate while lease recovery updates a record) while the
# clock is set back an hour; meanwhile a send is begun with a 60 s lease,
# another is sent, and a permit is granted.  By the clock of the pass's
# start each was an hour old (until 2026-12-06): the outbox's recovery
# flagged the live send unknown, the purge (retention 10 min) deleted the
# sent one, and the drop of idle buckets dropped the permit's bucket with its
# grant, letting a second permit through.
$node->safe_psql('postgres', "ALTER SYSTEM SET durable.naptime = '1h'");
$node->reload;
sleep 2;
$node->safe_psql('postgres', q{
	SELECT id FROM durable.inbox_admit('clock', 'held-up', 'c4', instance => 'gone', lease => '20 ms');
	SELECT pg_sleep(0.1);
	CREATE FUNCTION public.wait_at_gate() RETURNS trigger LANGUAGE plpgsql
	  AS $$BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END$$;
	CREATE TRIGGER wait_at_gate BEFORE UPDATE ON durable.inbox
	  FOR EACH ROW EXECUTE FUNCTION public.wait_at_gate();
});
my $gate = gate_close($node, 'postgres');
my ($sweeper, undef, $held) = start_until_gate($node, 'postgres',
	'SELECT inbox_expired FROM durable.sweep()', "SET durable.retention = '10 min'");
ok($held, 'a sweep pass is held in its lease recovery');
set_clock_shift(-14400 + 60 - 3600);
is($node->safe_psql('postgres', q{SELECT durable.permit('identify', 1, '10 min')}),
	'00:00:00', 'the clock set back an hour, a permit is granted');
is($node->safe_psql('postgres',
		q{SELECT action FROM durable.outbox_begin('live-send', 'c5', '{}', 'live', lease => '60 s')}),
	'send', '... a send is begun for 60 s');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM durable.outbox_begin('fresh-sent', 'c6', '{}', 'live') b,
	       durable.outbox_sent(b.key, b.token, 'p-fresh')}),
	'1', '... and another is sent');
gate_open($gate);
$sweeper->quit;
is($node->safe_psql('postgres', q{SELECT state FROM durable.inbox WHERE message_id = 'held-up'}),
	'pending', 'the pass went on and recovered the lease');
is($node->safe_psql('postgres', q{SELECT state FROM durable.outbox WHERE key = 'live-send'}),
	'sending', 'the pass left the send begun after the clock went back to its holder');
is($node->safe_psql('postgres', q{SELECT count(*) FROM durable.outbox WHERE key = 'fresh-sent'}),
	'1', 'the pass kept the send sent after the clock went back');
is($node->safe_psql('postgres', q{SELECT count(*) FROM durable.permits WHERE bucket = 'identify'}),
	'1', 'the pass kept the grant made after the clock went back');
isnt($node->safe_psql('postgres', q{SELECT durable.permit('identify', 1, '10 min')}),
	'00:00:00', 'a second permit of the bucket waits for the window');
$gate->quit;

# --- The same within the purge: each batch reads the clock when it runs.
# A pass held in its first batch (the inbox's, by a trigger on DELETE of the
# test's) while the clock goes back an hour, and a purge() held there the
# same way, went on to the outbox with the cutoff read before the step
# (until 2026-12-07, found by review): a send confirmed meanwhile, by then
# an hour "old", was deleted (with a retention of 10 minutes), and its key
# could be sent again.
$node->safe_psql('postgres', q{
	DROP TRIGGER wait_at_gate ON durable.inbox;
	CREATE FUNCTION public.wait_at_delete() RETURNS trigger LANGUAGE plpgsql
	  AS $$BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN OLD; END$$;
	CREATE TRIGGER wait_at_delete BEFORE DELETE ON durable.inbox
	  FOR EACH ROW EXECUTE FUNCTION public.wait_at_delete();
});
my $shift = -14400 + 60 - 3600;
foreach my $purge ('SELECT purged FROM durable.sweep()', "SELECT durable.purge('10 min')")
{
	my $name = $purge =~ /sweep/ ? 'sweep' : 'purge';
	$node->safe_psql('postgres', qq{
		SELECT durable.inbox_complete(a.id, a.token)
		  FROM durable.inbox_admit('clock', 'old-done-$name', 'c7', instance => 'i') a;
		UPDATE durable.inbox SET done_at = now() - interval '30 days',
		                         finished_at = now() - interval '30 days'
		 WHERE message_id = 'old-done-$name';
	});
	$gate = gate_close($node, 'postgres');
	($sweeper, undef, $held) = start_until_gate($node, 'postgres', $purge,
		"SET durable.retention = '10 min'");
	ok($held, "a $name is held in its purge of the inbox");
	$shift -= 3600;
	set_clock_shift($shift);
	is($node->safe_psql('postgres', qq{
		SELECT count(*) FROM durable.outbox_begin('sent-in-$name', 'c8', '{}', 'live') b,
		       durable.outbox_sent(b.key, b.token, 'p-$name')}),
		'1', "the clock set back an hour, a send is confirmed");
	gate_open($gate);
	$sweeper->query_safe('SELECT 1');
	$sweeper->quit;
	$gate->quit;
	is($node->safe_psql('postgres', qq{SELECT count(*) FROM durable.inbox WHERE message_id = 'old-done-$name'}),
		'0', "the $name purged the inbox's old record");
	is($node->safe_psql('postgres', qq{SELECT count(*) FROM durable.outbox WHERE key = 'sent-in-$name'}),
		'1', "... and kept the send confirmed after the clock went back");
}

$node->stop;

# --- A backend whose database found every slot taken looks again once a
# second, paced on the monotonic clock: until 2026-12-06 on the wall clock,
# so that after a step back it went on without counters, waiting claims'
# wakes and metrics() (53400) for as long as the step, though a slot had
# been free for long (found by review).  durable.max_databases is 1, and
# database a holds the slot; b's session finds none, the clock goes back
# an hour, and a drops the extension, freeing the slot.
set_clock_shift(0);
my $few = PostgreSQL::Test::Cluster->new('few_slots');
$few->init;
$few->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.max_databases = 1
durable.naptime = '100ms'
});
{
	local $ENV{LD_PRELOAD} = $shim_so;
	local $ENV{CLOCK_SHIFT_FILE} = $shift_file;
	$few->start;
}
$few->safe_psql('postgres', 'CREATE DATABASE a');
$few->safe_psql('postgres', 'CREATE DATABASE b');
$few->safe_psql('a', 'CREATE EXTENSION durable');
ok( $few->poll_query_until(
		'postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE datname = 'a' AND backend_type LIKE 'durable worker%'}),
	'database a has the one slot, and its worker');
$few->safe_psql('b', 'SET client_min_messages = error; CREATE EXTENSION durable');
my $slotless = $few->background_psql('b', on_error_stop => 0);
$slotless->query('SELECT count(*) FROM durable.metrics()');
like($slotless->{stderr}, qr/tracks at most 1 databases/, "b's session finds no slot");
set_clock_shift(-3600);
$few->safe_psql('a', 'DROP EXTENSION durable');
my $found = 0;
my $looked = time();
for (my $i = 0; $i < 200 && !$found; $i++)
{
	usleep(100_000);
	$slotless->{stderr} = '';
	my $out = $slotless->query('SELECT count(*) FROM durable.metrics()');
	$found = $slotless->{stderr} eq '' && $out =~ /^\s*1\s*$/;
}
ok($found,
	sprintf("b's session has the slot %.1f s after a freed it, the clock set back an hour", time() - $looked));
$slotless->quit;
$few->stop;
done_testing();
