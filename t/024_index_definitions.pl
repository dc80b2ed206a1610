# t/024_index_definitions.pl
# durable's direct writes refuse an index under the name of one of theirs
# that does not have the definition durable created.
#
# The direct writes (src/direct.c) open ten indexes of the journals by the
# OID of their name and scan or insert into them as the install script
# defines them: the claim walks its open index in id order with an int8
# key, the per-chat probes descend (chat_id, id), the inserts take the
# dedupe key or the primary key as their arbiter.  Another index put under
# the name by hand (the owner or a superuser can) used to crash the backend
# (an int8 scan key compared as text: the postmaster restarted every
# backend) or misbehave without an error: two records of one chat leased at
# once, a chat blocked for good, sends never claimed, every admit failing
# with XX000, every completion "stale".  The definition is now checked when
# the name is looked up, and the call fails with 55000, naming the index,
# with the command that creates durable's in the hint.
#
# Checked here:
#   - the probe's six cases are each refused with 55000;
#   - for each of the ten indexes, the hint's command, run after the wrong
#     index is dropped, gives back the install script's definition, which
#     the calls take again;
#   - the same predicate spelled otherwise (conjuncts in another order,
#     pg_get_indexdef's text) is taken;
#   - REINDEX TABLE CONCURRENTLY of both journals: a session that had looked
#     the names up goes on through the rebuilt copies;
#   - the re-look-up after a REINDEX CONCURRENTLY swap, staged with a wrong
#     copy swapped in (fail points index_open and insert_open, as in
#     t/016_reindex_concurrently.pl), is refused the same way.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableGate;

# Without durable preloaded: with it, the DDL guard refuses ADD PRIMARY KEY
# on a journal, which the primary keys' cases need to put theirs back.
my $node = PostgreSQL::Test::Cluster->new('index_definitions');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

sub q1
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql);
}

# Runs $sql expecting an error: (the first ERROR line as "SQLSTATE: message",
# its HINT line), or ('no error', '').
sub error_of
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return ('no error', '') if $ret == 0;
	my ($line) = $err =~ /ERROR:\s+(.*)/;
	my ($hint) = $err =~ /HINT:\s+(.*)/;
	return ($line // $err, $hint // '');
}

my $refused = qr/^55000: index "durable\.(\w+)" does not have the definition durable created$/;

# A call that looks every index up: claims nothing once the journals are
# finished (every case below leaves them so).
my $probe = "SELECT count(*) FROM durable.inbox_claim('probe', 1)";
my $outbox_probe = "SELECT count(*) FROM durable.outbox_claim('probe', 1)";

# ---------------------------------------------------------------------------
# The probe's cases: each is refused, naming the index.
# ---------------------------------------------------------------------------

# Runs $call with $index replaced by what $make creates, expecting the
# refusal; then puts durable's back.
sub refused_with
{
	my ($index, $make, $call, $what) = @_;
	q1("ALTER INDEX durable.$index RENAME TO ${index}_saved; $make");
	my ($error, $hint) = error_of($call);
	like($error, $refused, "$what: refused ($error)");
	is(($error =~ $refused)[0], $index, '... naming the index');
	like($hint, qr/^Rename or drop that index, then create durable's: /, '... with a hint');
	q1("DROP INDEX durable.$index; ALTER INDEX durable.${index}_saved RENAME TO $index");
	return;
}

my ($id, $token) = split /\|/,
  q1("SELECT id, token FROM durable.inbox_admit('t', 'm1', 'chat-1', '{}', instance => 'bot')");
q1("SELECT * FROM durable.inbox_admit('t', 'm2', 'chat-1')");

refused_with('inbox_unfinished_idx',
	'CREATE INDEX inbox_unfinished_idx ON durable.inbox (chat_id) WHERE finished_at IS NULL',
	"SELECT count(*) FROM durable.inbox_claim('bot')",
	'the claim index on (chat_id), which crashed the backend');
refused_with('inbox_chat_unfinished_idx',
	'CREATE INDEX inbox_chat_unfinished_idx ON durable.inbox (id, chat_id) WHERE finished_at IS NULL',
	"SELECT count(*) FROM durable.inbox_claim('bot', 10)",
	'the per-chat index on (id, chat_id), which leased two records of a chat at once');
refused_with('inbox_chat_unfinished_idx',
	'CREATE INDEX inbox_chat_unfinished_idx ON durable.inbox (chat_id, id)',
	"SELECT count(*) FROM durable.inbox_claim('bot', 10)",
	'the per-chat index without its WHERE clause, which blocked a chat for good');
refused_with('outbox_chat_unfinished_idx',
	"CREATE INDEX outbox_chat_unfinished_idx ON durable.outbox USING hash (chat_id)"
	  . " WHERE state = ANY (ARRAY['pending', 'sending', 'failed'])",
	"SELECT count(*) FROM durable.outbox_claim('bot')",
	'a hash index for the outbox chats, which kept every send from its claim');
refused_with('inbox_source_message_id_key',
	'CREATE INDEX inbox_source_message_id_key ON durable.inbox (source, message_id) WHERE message_id IS NOT NULL',
	"SELECT * FROM durable.inbox_admit('t', 'm3', 'chat-3')",
	'a dedupe key that is not unique, with which every admit failed with XX000');

q1('ALTER TABLE durable.inbox DROP CONSTRAINT inbox_pkey, ADD CONSTRAINT inbox_pkey UNIQUE (token)');
my ($error, $hint) = error_of("SELECT durable.inbox_complete($id, $token)");
like($error, $refused,
	"a primary key on (token), with which every completion was stale: refused ($error)");
is($hint,
	"Rename or drop that index, then create durable's: ALTER TABLE durable.inbox ADD CONSTRAINT inbox_pkey PRIMARY KEY (id).",
	'... with the command that creates the primary key');
q1('ALTER TABLE durable.inbox DROP CONSTRAINT inbox_pkey, ADD CONSTRAINT inbox_pkey PRIMARY KEY (id)');
q1("SELECT durable.inbox_complete($id, $token)");
is(q1("SELECT state FROM durable.inbox WHERE id = $id"), 'done', '... and, put back, the record completes');
my ($id2, $token2) = split /\|/, q1("SELECT id, token FROM durable.inbox_claim('bot')");
q1("SELECT durable.inbox_complete($id2, $token2)");

# ---------------------------------------------------------------------------
# Every index: the hint's command gives back the install script's definition.
# ---------------------------------------------------------------------------
my %definition = map { split /\|/ } split /\n/, q1(q{
	SELECT c.relname || '|' || pg_get_indexdef(c.oid) FROM pg_class c
	 WHERE c.relnamespace = 'durable'::regnamespace AND c.relkind = 'i'
	   AND c.relname IN ('inbox_pkey', 'inbox_chat_unfinished_idx', 'inbox_unfinished_idx',
	                     'inbox_source_message_id_key', 'inbox_source_content_hash_key',
	                     'inbox_done_at_idx', 'outbox_pkey', 'outbox_chat_unfinished_idx',
	                     'outbox_waiting_idx', 'outbox_sent_at_idx')});
is(scalar(keys %definition), 10, 'the ten indexes the direct writes open by name');
for my $index (sort keys %definition)
{
	my ($table) = $index =~ /^(inbox|outbox)_/;
	my $drop = $index =~ /_pkey$/
	  ? "ALTER TABLE durable.$table DROP CONSTRAINT $index"
	  : "DROP INDEX durable.$index";
	q1("$drop; CREATE INDEX $index ON durable.$table (created_at)");
	# (a call checks its own journal's indexes only)
	my $probe_of = $table eq 'inbox' ? $probe : $outbox_probe;
	my ($e, $h) = error_of($probe_of);
	like($e, $refused, "$index on (created_at) is refused");
	is(($e =~ $refused)[0], $index, '... naming it');
	my ($command) = $h =~ /^Rename or drop that index, then create durable's: (.*)\.$/;
	ok(defined $command, '... with a command in the hint') or next;
	q1("DROP INDEX durable.$index; $command");
	is(q1("SELECT pg_get_indexdef('durable.$index'::regclass)"), $definition{$index},
		'... which creates the install script\'s definition');
	is(q1($probe_of), '0', '... which the calls take');
}

# The same predicate written otherwise is the same definition.
q1('DROP INDEX durable.inbox_unfinished_idx');
q1('CREATE INDEX inbox_unfinished_idx ON durable.inbox (id) WHERE id > 0 AND finished_at IS NULL');
is(q1($probe), '0', 'the open index with its conjuncts in another order is taken');
q1('DROP INDEX durable.outbox_waiting_idx');
q1($definition{outbox_waiting_idx});
is(q1($outbox_probe), '0',
	"the waiting index created from pg_get_indexdef's text is taken");
q1('DROP INDEX durable.outbox_waiting_idx');
q1("CREATE INDEX outbox_waiting_idx ON durable.outbox (id) WHERE state IN ('pending', 'failed') AND state <> 'sent'");
like((error_of($outbox_probe))[0], $refused,
	'... and one with a conjunct more is refused');
q1('DROP INDEX durable.outbox_waiting_idx');
q1($definition{outbox_waiting_idx});

# ---------------------------------------------------------------------------
# REINDEX CONCURRENTLY: the rebuilt copies have the same definitions.
# ---------------------------------------------------------------------------
my $bot = $node->background_psql('postgres');
$bot->query_safe("SELECT * FROM durable.inbox_admit('t', 'before', 'chat-r')");
q1('REINDEX TABLE CONCURRENTLY durable.inbox');
q1('REINDEX TABLE CONCURRENTLY durable.outbox');
is($bot->query_safe(q{
	SELECT count(*) FROM durable.inbox_claim('bot', 10) c, durable.inbox_complete(c.id, c.token) x}),
	'1', 'after REINDEX TABLE CONCURRENTLY, a session that looked the indexes up claims and completes');
is($bot->query_safe("SELECT action FROM durable.outbox_begin('k-r', 'chat-r', '{}', 'bot')"), 'send',
	'... and begins a send');
$bot->query_safe("SELECT durable.outbox_sent('k-r', token, 'p-1') FROM durable.outbox WHERE key = 'k-r'");
is(q1("SELECT state FROM durable.outbox WHERE key = 'k-r'"), 'sent', '... and confirms it');
$bot->quit;

# ---------------------------------------------------------------------------
# The re-look-up after a REINDEX CONCURRENTLY swap, staged: a call looks the
# indexes up, waits before it opens the first (fail point), and meanwhile a
# wrong index is put under the name and the one looked up marked invalid, as
# the swap leaves it.  The call must refuse the wrong index.
# ---------------------------------------------------------------------------
# The fail points are a GUC of the preloaded library.
$node->stop;
$node = PostgreSQL::Test::Cluster->new('staged');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '1h'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE staged');
$node->safe_psql('staged', 'CREATE EXTENSION durable');

sub staged_wrong_swap
{
	my ($round, $index, $wrong, $point, $call) = @_;
	$node->safe_psql('staged', $wrong);

	my $gate = gate_close($node, 'staged');
	my ($holder, undef, $waits) =
	  start_at_gate($node, 'staged', $point, $call, "\\set VERBOSITY verbose\n");
	ok($waits, "$round: the call waits between its look-up and its first index");
	$node->safe_psql('staged', qq{
		BEGIN;
		ALTER INDEX durable.$index RENAME TO ${index}_old;
		ALTER INDEX durable.${index}_wrong RENAME TO $index;
		UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'durable.${index}_old'::regclass;
		COMMIT;
	});
	gate_open($gate);
	$holder->query("SELECT 'after'");
	like($holder->{stderr} // '',
		qr/ERROR:  55000: index "durable\.$index" does not have the definition durable created/,
		"$round: the call refuses the index swapped in under the name");
	$holder->quit;
	$gate->quit;

	$node->safe_psql('staged', qq{
		DROP INDEX durable.$index;
		UPDATE pg_index SET indisvalid = true WHERE indexrelid = 'durable.${index}_old'::regclass;
		ALTER INDEX durable.${index}_old RENAME TO $index;
	});
	return;
}

# A completion, through the primary key (direct_index_open_current).
my ($sid, $stoken) = split /\|/, $node->safe_psql('staged',
	"SELECT id, token FROM durable.inbox_admit('t', 'staged', 'chat-s', '{}', instance => 'bot')");
staged_wrong_swap('completion', 'inbox_pkey',
	'CREATE UNIQUE INDEX CONCURRENTLY inbox_pkey_wrong ON durable.inbox (token)',
	'index_open', "SELECT durable.inbox_complete($sid, $stoken)");
# An admit, through its dedupe key as the insert's arbiter (direct_check_arbiter).
staged_wrong_swap('arbiter', 'inbox_source_message_id_key',
	'CREATE INDEX CONCURRENTLY inbox_source_message_id_key_wrong ON durable.inbox (source, message_id) WHERE message_id IS NOT NULL',
	'insert_open', "SELECT state FROM durable.inbox_admit('t', 'arbiter', 'chat-a')");
is($node->safe_psql('staged', "SELECT durable.inbox_complete($sid, $stoken)"), '',
	'with its index back, the completion goes through');
is($node->safe_psql('staged', "SELECT state FROM durable.inbox_admit('t', 'arbiter', 'chat-a')"),
	'pending', '... and so does the admit');

$node->stop;
done_testing();
