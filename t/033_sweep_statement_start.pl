# t/033_sweep_statement_start.pl
# A sweep pass announces (NOTIFY durable_ready) the work that came due in its
# window; a window reaches back to the start of the oldest transaction that
# may still journal work, and 30 s back when that start is not known.  A
# statement reports itself active a moment before its transaction starts
# and reports its start.  Caught in that moment, it was taken for a writer
# of unknown start: with other sessions issuing statements fast (a pool's
# health checks; isolationtester's lock polls made spec notify flaky), a
# pass now and then reached 30 s back and announced work already announced.
# Such a statement's transaction begins at the statement's start.
#
# Eight pgbench clients run SELECT 1 while one send, due and announced,
# stays unclaimed, and 1,000 passes run: none may count it again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('statement_start');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '1h'\nmax_connections = 30\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

$node->safe_psql('postgres', q{
	SELECT created FROM durable.outbox_enqueue('k1', 'chat-1', '{}',
	                                           not_before => clock_timestamp() + interval '50 ms')});
usleep(200_000);
is($node->safe_psql('postgres', 'SELECT outbox_due FROM durable.sweep()'),
	'1', 'the first pass announces the send that came due');

my $script = $node->basedir . '/select1.sql';
append_to_file($script, "SELECT 1;\n");
my ($out, $err) = ('', '');
my $pgbench = IPC::Run::start(
	[
		'pgbench', '--no-vacuum', '--client' => 8, '--jobs' => 2,
		'--time' => 60, '--file' => $script, $node->connstr('postgres')
	],
	'>' => \$out,
	'2>' => \$err);

# The hazard is there: other sessions are seen active with no transaction
# start (else this test could not fail).
$node->psql('postgres', q{
	DO $$
	DECLARE
		seen int := 0;
		now_seen int;
	BEGIN
		PERFORM pg_sleep(0.5);  -- the clients connect
		FOR i IN 1..3000 LOOP
			PERFORM pg_stat_clear_snapshot();
			SELECT count(*) INTO now_seen FROM pg_stat_activity
			 WHERE datname = current_database() AND backend_type = 'client backend'
			   AND state = 'active' AND xact_start IS NULL;
			seen := seen + now_seen;
		END LOOP;
		RAISE NOTICE 'caught %', seen;
	END $$}, stderr => \my $notice);
my ($starting) = ($notice // '') =~ /caught (\d+)/;
$starting //= 0;
cmp_ok($starting, '>', 0, 'statements were seen active before their transaction started');
note("active without a transaction start: $starting of 3000 looks");

my @due = split /\n/, $node->safe_psql('postgres',
	join('', map { "SELECT outbox_due FROM durable.sweep();\n" } 1 .. 1000));
is(scalar(@due), 1000, '1,000 passes ran');
my $again = grep { $_ ne '0' } @due;
is($again, 0, 'no pass announced the send again');

$pgbench->signal('INT');
$pgbench->finish;
note($out);
$node->stop;
done_testing();
