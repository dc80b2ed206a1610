# t/016_reindex_concurrently.pl
# REINDEX INDEX CONCURRENTLY of the journals' indexes while bots run.
#
# durable's direct writes look their indexes up by name once per backend
# and open them by OID.  REINDEX CONCURRENTLY builds a copy of an index and
# swaps the two names; the index looked up before is then marked invalid,
# then dead, then dropped.  A call that had looked the name up before the
# swap used to find the old index invalid ('index "durable.inbox_pkey_ccold"
# is not valid') or gone, and failed: maintenance that PostgreSQL offers
# precisely so that it need not stop the application stopped the bots.
#
# Four pgbench clients run the bot path, the queue path, the send path and
# the sender loop (the benchmark's scripts) for 20 s while every index of
# both journals is rebuilt concurrently, over and over.  No client may fail,
# every index is valid at the end, and the journals' records all finished.
# That race is hit in some runs only; the last part stages it.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableGate;

my $seconds = 20;
my $root = $ENV{DURABLE_ROOT} or die 'DURABLE_ROOT must name the source tree';

my $node = PostgreSQL::Test::Cluster->new('reindex');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '1h'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

my ($out, $err) = ('', '');
my $pgbench = IPC::Run::start(
	[
		'pgbench', '--no-vacuum', '--protocol' => 'prepared',
		'--client' => 8, '--jobs' => 2, '--time' => $seconds,
		(map { ('--file' => "$root/bench/sql/$_.sql") } qw(bot queue send sender)),
		'--define' => 'n=0', '--define' => 'run=1',
		$node->connstr('postgres')
	],
	'>' => \$out,
	'2>' => \$err);

my @indexes = split /\n/, $node->safe_psql('postgres', q{
	SELECT indexrelid::regclass FROM pg_index
	 WHERE indrelid IN ('durable.inbox'::regclass, 'durable.outbox'::regclass) ORDER BY 1});
my $rounds = 0;
my @reindex_errors;
my $until = time + $seconds - 2;
while (time < $until)
{
	for my $index (@indexes)
	{
		my ($rc, $o, $e) = $node->psql('postgres', "REINDEX INDEX CONCURRENTLY $index");
		push @reindex_errors, $e if $rc != 0;
	}
	$rounds++;
}
my $ran = $pgbench->finish;

cmp_ok($rounds, '>=', 2, "every index of the journals was rebuilt $rounds times while the bots ran");
is(join('', @reindex_errors), '', 'no rebuild failed');
ok($ran, 'no pgbench client failed') or diag("pgbench:\n$out\n$err");
unlike($err, qr/ERROR/, 'no statement failed');
my ($transactions) = $out =~ /number of transactions actually processed: (\d+)/;
cmp_ok($transactions // 0, '>', 1000, 'the bots ran (' . ($transactions // 0) . ' cycles)');

is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_index
	 WHERE indrelid IN ('durable.inbox'::regclass, 'durable.outbox'::regclass)
	   AND NOT (indisvalid AND indisready AND indislive)}),
	'0', 'every index is valid at the end, none left behind');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM durable.inbox i WHERE state = 'leased'}),
	'0', 'every inbox record leased by a cycle was completed');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM durable.outbox WHERE state = 'sending'}),
	'0', 'every send begun or claimed by a cycle was marked sent');

# The journals answer through the new indexes: a duplicate is still found.
my $known = $node->safe_psql('postgres',
	"SELECT message_id FROM durable.inbox WHERE source = 'bench' ORDER BY id LIMIT 1");
is($node->safe_psql('postgres',
		"SELECT duplicate FROM durable.inbox_admit('bench', '$known', 'any-chat')"),
	't', 'an admitted message is still found as a duplicate');

# ---- The race, staged: a call looks durable's indexes up, then waits
# (fail point index_open:wait, or insert_open:wait before an insert opens
# the journal) before it opens the first of them, while
# what REINDEX CONCURRENTLY's swap leaves is put in place: a copy of the
# index under its name, the index looked up renamed and invalid (the swap),
# or also no longer ready for inserts (set dead, the next phase).
$node->safe_psql('postgres', 'CREATE DATABASE swap');
$node->safe_psql('swap', 'CREATE EXTENSION durable');

# Stage it for `$index`: while `$call` waits, swap a copy of the index in
# under its name and set `$flags` on the index looked up; then `$check`
# must match `$expected`.
sub staged_swap
{
	my ($round, $index, $flags, $point, $call, $check, $expected) = @_;
	my $copy = $node->safe_psql('swap', "SELECT pg_get_indexdef('durable.$index'::regclass)");
	$copy =~ s/^CREATE (UNIQUE )?INDEX \S+ ON/CREATE $1INDEX CONCURRENTLY ${index}_copy ON/
	  or die "unexpected definition: $copy";
	$node->safe_psql('swap', $copy);

	my $gate = gate_close($node, 'swap');
	my ($holder, undef, $waits) = start_at_gate($node, 'swap', $point, $call);
	ok($waits, "$round: the call waits between its look-up and its first index");
	$node->safe_psql('swap', qq{
		BEGIN;
		ALTER INDEX durable.$index RENAME TO ${index}_old_$round;
		ALTER INDEX durable.${index}_copy RENAME TO $index;
		UPDATE pg_index SET $flags WHERE indexrelid = 'durable.${index}_old_$round'::regclass;
		COMMIT;
	});
	gate_open($gate);
	my $result = $holder->query($check);
	like($result, $expected, "$round: the call went on through the index now named $index")
	  or diag("the call's session:\n$result\n" . ($holder->{stderr} // ''));
	$holder->quit;
	$gate->quit;
	return;
}

# A completion (the primary key), swapped, then set dead.
for my $round (['swap', 'indisvalid = false'],
	['dead', 'indisvalid = false, indisready = false, indislive = false'])
{
	my ($name, $flags) = @$round;
	my ($id, $token) = split /\|/, $node->safe_psql('swap',
		"SELECT id || '|' || token FROM durable.inbox_admit('t', 'swapped-$name', 'chat-$name', '{}', 'message', 'bot', '60 s')"
	);
	staged_swap($name, 'inbox_pkey', $flags, 'index_open', "SELECT durable.inbox_complete($id, $token)",
		"SELECT state FROM durable.inbox WHERE id = $id", qr/^done$/m);
}

# An admit that looked its dedupe key (the insert's arbiter) up, held as
# it opens the journal for its insert (fail point insert_open:wait).
staged_swap('arbiter', 'inbox_source_message_id_key', 'indisvalid = false', 'insert_open',
	"SELECT state FROM durable.inbox_admit('t', 'arbiter', 'chat-arbiter', '{}', 'message', 'bot')",
	"SELECT count(*) FROM durable.inbox WHERE message_id = 'arbiter'", qr/^1$/m);
is($node->safe_psql('swap',
		"SELECT duplicate FROM durable.inbox_admit('t', 'arbiter', 'another-chat')"),
	't', 'and the message is found again through the copy');
is($node->safe_psql('swap',
		"SELECT count(*) FROM durable.inbox_claim('after', 1) c, durable.inbox_complete(c.id, c.token) x"),
	'0', 'nothing was left claimable');

$node->stop;
done_testing();
