# t/012_many_databases.pl
# More databases than durable's 128 slots of shared memory, few of them with
# durable.  The launcher checks every connectable database for the extension
# with a short-lived worker, which records in the database's slot that it
# found none.  Those slots used to stay taken: once 128 databases without
# durable held them, a database that then installed durable got no worker
# (no lease recovery, no retention), no counters, and a WARNING from every
# call.  Now a database that needs a slot takes one from a database found
# without the extension, whose next check the launcher keeps in its own
# memory:
#   - after 130 databases without durable have all been checked (the slots
#     are full), a new database with durable gets its worker, and metrics()
#     answers there;
#   - the databases without durable are still checked: one that installs
#     durable afterwards gets its worker too;
#   - the launcher starts those checks a few at a time, so they do not take
#     every background worker slot at once: with max_worker_processes = 16,
#     and with PostgreSQL's default 8.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('many');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '100ms'
max_worker_processes = 16
log_min_messages = debug1
});
$node->start;

sub has_worker
{
	my ($db) = @_;
	return "SELECT count(*) = 1 FROM pg_stat_activity"
	  . " WHERE backend_type = 'durable worker' AND datname = '$db'";
}

my $ndb = 130;
$node->safe_psql('postgres', join('', map { "CREATE DATABASE plain$_;\n" } 1 .. $ndb));
# From a start with every database there, as after a restart or a crash:
# the launcher has all of them to look at in its first look.  The log goes
# on across the restart; what follows starts where the new launcher does
# (as the server is ready; on a loaded machine pg_ctl may see it ready first).
my $offset = -s $node->logfile;
$node->restart;
$node->wait_for_log(qr/durable launcher started/, $offset);
my $restarted = slurp_file($node->logfile, $offset);
die 'no launcher after the restart' unless $restarted =~ /durable launcher started/;
$offset += $-[0];

# Wait until the launcher has sent a worker to look at (nearly) every one:
# the 128 slots are then taken by databases without durable.
my $checked = 0;
for (my $i = 0; $i < 1800; $i++)
{
	my %seen = map { $_ => 1 }
	  (slurp_file($node->logfile, $offset) =~ /registered a worker for database "(plain\d+)"/g);
	$checked = scalar keys %seen;
	last if $checked >= 128;
	select(undef, undef, undef, 0.1);
}
cmp_ok($checked, '>=', 128, "the launcher checked $checked of $ndb databases without durable");
# A few at a time: 130 checks at once would want more than the 16 worker
# slots, and the launcher would have to retry some.
# (A failed registration is logged at DEBUG1 at once, warned of after 10 s.)
my $crowded = () = slurp_file($node->logfile, $offset) =~
  /durable could not start a worker|no background worker slot for database/g;
is($crowded, 0, 'without running out of background worker slots');

$node->safe_psql('postgres', 'CREATE DATABASE late');
$node->safe_psql('late', 'CREATE EXTENSION durable');
ok($node->poll_query_until('late', has_worker('late')),
	'a database that installs durable when every slot is taken gets its worker');
is($node->safe_psql('late', "SELECT inbound_journaled FROM durable.metrics()"), '0',
	'and its counters');
my $late_oid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'late'");
# (taken by the launcher, or by CREATE EXTENSION's backend when the launcher
# had not yet looked at the new database)
my ($taken) = slurp_file($node->logfile) =~
  /database $late_oid takes the slot of database (\d+), which has no durable/;
ok(defined $taken, 'by taking the slot of a database without durable');

# A database whose slot was taken is still checked: installing durable there
# gets it a worker too (CREATE EXTENSION wakes the launcher; at worst the
# database waits for its next check, 30 s).
my $victim = $node->safe_psql('postgres', "SELECT datname FROM pg_database WHERE oid = " . ($taken // 0));
like($victim, qr/^(?:postgres|plain\d+)$/, "the slot taken was that of $victim, checked before");
$node->safe_psql($victim, 'CREATE EXTENSION durable') if $victim ne '';
ok($victim ne '' && $node->poll_query_until($victim, has_worker($victim)),
	"a database checked before, whose slot went to another ($victim), gets its worker once it installs durable");
ok($node->poll_query_until('late', has_worker('late')), 'and the first keeps its worker');

# PostgreSQL's default max_worker_processes, 8, of which the logical
# replication launcher and durable's take two and the two workers above two
# more: a cap of eight checks in flight took every slot left after a restart
# (21 "could not start a worker" with 31 databases, one of them for a
# database with durable, whose worker came late).  A quarter of the setting
# leaves room.
$node->append_conf('postgresql.conf', "max_worker_processes = 8\n");
$offset = -s $node->logfile;
$node->restart;
$node->wait_for_log(qr/durable launcher started/, $offset);
$checked = 0;
for (my $i = 0; $i < 3000; $i++)
{
	my %seen = map { $_ => 1 }
	  (slurp_file($node->logfile, $offset) =~ /registered a worker for database "(plain\d+)"/g);
	$checked = scalar keys %seen;
	last if $checked >= $ndb - 1;
	select(undef, undef, undef, 0.1);
}
cmp_ok($checked, '>=', $ndb - 1,
	"under max_worker_processes = 8 the launcher checked $checked of $ndb databases again");
$crowded = () = slurp_file($node->logfile, $offset) =~
  /durable could not start a worker|no background worker slot for database/g;
is($crowded, 0, 'without running out of background worker slots');
ok($node->poll_query_until('late', has_worker('late')), 'and late has its worker');
ok($victim ne '' && $node->poll_query_until($victim, has_worker($victim)),
	"and so has $victim");

$node->stop;
done_testing();
