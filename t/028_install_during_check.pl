# t/028_install_during_check.pl
# A database without durable is looked at by a short-lived worker of the
# launcher's, which records in the database's slot that it found no
# extension; the launcher then looks again only 30 s later.  CREATE
# EXTENSION durable wakes the launcher at commit and clears that record, so
# that the database gets its worker at once.  When the commit came while a
# look was under way, after it had found nothing but before it recorded so,
# the look's record overwrote the clearing: the database waited 30 s for
# its worker (no lease recovery, no retention meanwhile).  Now a look that
# found nothing looks again when an install committed since it began.
#
# The race is staged with the fail point extension_check:wait, where the
# look has found no extension and waits while this test holds
# pg_advisory_lock(4242) in that database.
#
# The same when the commit comes after the look recorded "absent", before
# its worker exited (absent_recorded:wait): that exit must not hold the
# next worker back.
#
# Also: COMMIT PREPARED of a CREATE or DROP EXTENSION wakes the launcher or
# the worker as a plain commit does.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableGate;

my $node = PostgreSQL::Test::Cluster->new('install_during_check');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '100ms'
max_prepared_transactions = 2
});
$node->start;

# Seconds from $since until the log from $from matches (undef: not in 40 s).
sub seconds_until_log
{
	my ($regexp, $from, $since) = @_;
	while (time - $since < 40)
	{
		return time - $since if slurp_file($node->logfile, $from) =~ $regexp;
		select(undef, undef, undef, 0.1);
	}
	return undef;
}

# A query: is the number of durable workers in database $db $n?
sub workers_are
{
	my ($db, $n) = @_;
	return "SELECT count(*) = $n FROM pg_stat_activity"
	  . " WHERE backend_type = 'durable worker' AND datname = '$db'";
}

# A template (the launcher looks at none) until the fail point is set and
# its lock held, so that the launcher's first look stops there.
$node->safe_psql('postgres', 'CREATE DATABASE racy IS_TEMPLATE true');
$node->safe_psql('postgres', "ALTER DATABASE racy SET durable.fail_point = 'extension_check:wait'");
my $gate = gate_close($node, 'racy');
$node->safe_psql('postgres', 'ALTER DATABASE racy IS_TEMPLATE false');

# The launcher's look at the new database finds no durable, and waits.
ok($node->poll_query_until('postgres',
		gate_waits(undef, "a.backend_type = 'durable worker' AND a.datname = 'racy'")),
	'a look at the database has found no durable and waits');

my $offset = -s $node->logfile;
$node->safe_psql('racy', 'CREATE EXTENSION durable');
my $installed_at = time;
gate_open($gate);

# 30 s is when the launcher would look again; 10 s leaves a loaded machine
# room and still tells the two apart.
my $started = seconds_until_log(qr/durable worker started for database "racy"/, $offset,
	$installed_at);
ok(defined $started, 'the database gets its worker');
cmp_ok($started // 99, '<', 10,
	sprintf('at once, not at the next look 30 s later (%.1f s)', $started // -1));
ok( $node->poll_query_until('postgres', workers_are('racy', 1)),
	'and the worker stays');

$gate->quit;

# The same commit coming just after a look recorded that it found nothing,
# while its worker was on its way out: the worker's exit, and the
# launcher's reaping of it, held the next worker back for the restart
# delay (a naptime, at most 10 s) and counted a failed start, undoing the
# commit's "at once".  Staged with absent_recorded:wait, between the record
# and the exit.  A naptime of 10 s makes that delay 10 s.
$node->safe_psql('postgres', q{ALTER SYSTEM SET durable.naptime = '10s'});
$node->reload;
$node->safe_psql('postgres', 'CREATE DATABASE late IS_TEMPLATE true');
$node->safe_psql('postgres', "ALTER DATABASE late SET durable.fail_point = 'absent_recorded:wait'");
$gate = gate_close($node, 'late');
$node->safe_psql('postgres', 'ALTER DATABASE late IS_TEMPLATE false');
ok($node->poll_query_until('postgres',
		gate_waits(undef, "a.backend_type = 'durable worker' AND a.datname = 'late'")),
	'a look at the database has recorded that it found no durable, and waits to exit');
$offset = -s $node->logfile;
$node->safe_psql('late', 'CREATE EXTENSION durable');
$installed_at = time;
gate_open($gate);
$started = seconds_until_log(qr/durable worker started for database "late"/, $offset,
	$installed_at);
cmp_ok($started // 99, '<', 5,
	sprintf('the exit of that look does not hold the worker back 10 s (%.1f s)', $started // -1));
ok( $node->poll_query_until('postgres', workers_are('late', 1)),
	'and the worker stays');
$gate->quit;
$node->safe_psql('postgres', q{ALTER SYSTEM RESET durable.naptime});
$node->reload;

# A prepared transaction's commit callbacks run at PREPARE, which wakes
# nobody: COMMIT PREPARED of a CREATE EXTENSION wakes the launcher, and of a
# DROP EXTENSION the worker, itself (each used to wait for the 30 s look).
# The launcher's first look at a new database finds no durable (its
# worker's DEBUG1 line, at the database's log level).
$offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE DATABASE twophase IS_TEMPLATE true');
$node->safe_psql('postgres', 'ALTER DATABASE twophase SET log_min_messages = debug1');
$node->safe_psql('postgres', 'ALTER DATABASE twophase IS_TEMPLATE false');
$node->wait_for_log(qr/durable worker: extension not installed in database "twophase"/, $offset);
ok( $node->poll_query_until('postgres', workers_are('twophase', 0)),
	'the launcher has looked at a new database, and its worker left');
$offset = -s $node->logfile;
$node->safe_psql('twophase', q{BEGIN; CREATE EXTENSION durable; PREPARE TRANSACTION 'install'});
$node->safe_psql('twophase', q{COMMIT PREPARED 'install'});
$started = seconds_until_log(qr/durable worker started for database "twophase"/, $offset, time);
cmp_ok($started // 99, '<', 10,
	sprintf('COMMIT PREPARED of CREATE EXTENSION starts the worker at once (%.1f s)', $started // -1));

ok( $node->poll_query_until('postgres', workers_are('twophase', 1)),
	'the worker runs');
# A naptime of an hour: only the wake can stop the worker in time.
$node->safe_psql('postgres', q{ALTER SYSTEM SET durable.naptime = '1h'});
$node->reload;
sleep 1;
$offset = -s $node->logfile;
$node->safe_psql('twophase', q{BEGIN; DROP EXTENSION durable; PREPARE TRANSACTION 'uninstall'});
$node->safe_psql('twophase', q{COMMIT PREPARED 'uninstall'});
my $stopped = seconds_until_log(
	qr/durable worker for database "twophase" stopping: the extension was dropped/, $offset, time);
cmp_ok($stopped // 99, '<', 10,
	sprintf('COMMIT PREPARED of DROP EXTENSION stops the worker at once (%.1f s)', $stopped // -1));

$node->stop;
done_testing();
