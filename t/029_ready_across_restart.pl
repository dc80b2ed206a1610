# t/029_ready_across_restart.pl
# Each sweep pass announces (NOTIFY durable_ready) the deferred and retried
# work that came due in its window, which starts where the previous pass's
# ended.  A worker restarted for new settings (ALTER DATABASE ... SET and a
# reload) used to start a window of its own 30 s back at its first pass, a
# naptime after it started, itself up to 10 s after the old worker left:
# with a long naptime, a send that came due in between could go
# unannounced.  The window's end now lives in the database's shared-memory
# slot, and the new worker goes on from it.
#
# Read off the workers' DEBUG1 pass lines ("N due"): the new worker's first
# pass announces the send that came due while the worker restarted.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('ready_restart');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '25s'
log_min_messages = debug1
});
$node->start;

my $swept = qr/durable worker: swept database "postgres": \d+ expired, \d+ ambiguous, (\d+) due/;

my $offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');
$offset = $node->wait_for_log($swept, $offset);
ok(1, "the first worker made its first pass");

# Right after a pass of the old worker: a send due in 3 s, then new settings.
# The old worker leaves at once; the new one starts up to 10 s later and
# passes a naptime after that, beyond 30 s from the send's due time.
$node->safe_psql('postgres',
	"SELECT created FROM durable.outbox_enqueue('k1', 'chat-1', '{}', now() + interval '3 s')");
$node->safe_psql('postgres', q{ALTER DATABASE postgres SET durable.retention = '6d'});
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
$offset = $node->wait_for_log(
	qr/durable worker for database "postgres" restarting to take the settings/, $offset);
ok(1, 'the worker restarts to take the settings');

$offset = $node->wait_for_log(qr/durable worker started for database "postgres"/, $offset);
my $from = $offset;
$offset = $node->wait_for_log($swept, $offset);
my ($due) = slurp_file($node->logfile, $from) =~ $swept;
is($due, 1, "the new worker's first pass announces the send that came due while it restarted");

# Settings given to every role (ALTER ROLE ALL ... SET) reach the worker
# too, at the next reload (untested until 2026-12-05).
$offset = -s $node->logfile;
$node->safe_psql('postgres', q{ALTER ROLE ALL SET durable.retention = '5d'});
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
$node->wait_for_log(qr/durable worker for database "postgres" restarting to take the settings/, $offset);
ok(1, 'ALTER ROLE ALL SET restarts the worker at the reload');
$node->safe_psql('postgres', 'ALTER ROLE ALL RESET durable.retention');

$node->stop;
done_testing();
