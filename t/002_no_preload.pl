# t/002_no_preload.pl: durable without shared_preload_libraries.
#
# The contract: without preloading, every function still works and sweep()
# can be called by hand or by a scheduler; only what lives in shared memory
# is missing.  On a server that does not preload durable:
#
#   - CREATE EXTENSION works, and no durable process runs;
#   - durable.max_databases left in postgresql.conf is accepted without a
#     WARNING (it has no effect);
#   - the inbox and outbox cycles work (admit, duplicate, claim, heartbeats,
#     complete single and batch, fail to pending and to dead, release,
#     replay; begin, sent, answered from the journal, enqueue, claim,
#     failed, retry, discard), fencing included (a stale token is DR001);
#   - instance_start, sessions and permits work;
#   - a claim with wait still waits, and returns a record admitted
#     meanwhile (it re-checks instead of sleeping on a condition variable);
#   - metrics() and metrics_reset() (and the stat_counters view) raise 55000
#     with a hint to preload; standing() works, it reads the tables;
#   - sweep() and purge() work by hand;
#   - a table inheriting from durable's (the guard refuses one when
#     preloaded) is neither read nor written by durable's statements.
#
# Run (after the library is installed, as a user that may run postgres):
#   prove -v t/002_no_preload.pl
# with PATH holding pg_config --bindir and PERL5LIB the PGXS test/perl
# directory (scripts/test does this).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('no_preload');
$node->init;
$node->append_conf('postgresql.conf', "durable.max_databases = 4\n");
$node->start;

sub q1
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql);
}

# Runs $sql expecting an error; returns "SQLSTATE: message" of the first ERROR line.
sub error_of
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return 'no error' if $ret == 0;
	my ($line) = $err =~ /ERROR:\s+(.*)/;
	return $line // $err;
}

# Runs $sql: its output, or "SQLSTATE: message" of its first ERROR line (a
# check of a call expected to work that goes on if it fails).
sub result_of
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $out if $ret == 0;
	my ($line) = $err =~ /ERROR:\s+(.*)/;
	return $line // $err;
}

is(q1('SHOW shared_preload_libraries'), '', 'the server does not preload durable');

my ($created_rc, $created_out, $created_err) = $node->psql('postgres', 'CREATE EXTENSION durable');
is($created_rc, 0, 'CREATE EXTENSION durable succeeds');
unlike($created_err, qr/WARNING/,
	'durable.max_databases in postgresql.conf is not removed with a WARNING (until 2026-12-05 it was)');
is(q1("LOAD 'durable'; SHOW durable.max_databases"), '4',
	'and once durable is loaded, it reads as set (with no effect)');
is(q1("SELECT extversion IS NOT NULL FROM pg_extension WHERE extname = 'durable'"), 't',
	'CREATE EXTENSION durable works without preloading');
sleep(1);
is(q1("SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'durable%'"), '0',
	'no durable launcher or worker runs');

# ---------------------------------------------------------------------------
# The inbox
# ---------------------------------------------------------------------------
my ($id1, $tok1) = split /\|/, q1(
	"SELECT id, token FROM durable.inbox_admit('np', 'm1', 'c1', '{\"text\":\"hi\"}', instance => 'np-bot')");
ok($tok1 > 0, 'inbox_admit with an instance journals and leases at once');
is(q1("SELECT duplicate || '/' || state FROM durable.inbox_admit('np', 'm1', 'c1', '{\"text\":\"hi\"}')"),
	'true/leased', 'the same message again is a duplicate');
is(q1("SELECT durable.inbox_heartbeat($id1, $tok1, '5 min') > clock_timestamp() + interval '4 min'"),
	't', 'inbox_heartbeat extends the lease');
q1("SELECT durable.inbox_complete($id1, $tok1)");
is(q1("SELECT state FROM durable.inbox WHERE id = $id1"), 'done', 'inbox_complete marks it done');

q1("SELECT * FROM durable.inbox_admit('np', NULL, 'c2', '{\"text\":\"no id\"}')");
is(q1("SELECT duplicate FROM durable.inbox_admit('np', NULL, 'c2', '{\"text\":\"no id\"}')"),
	't', 'a message without id is deduplicated by its content');
my ($id2, $tok2, $att2) = split /\|/, q1("SELECT id, token, attempts FROM durable.inbox_claim('np-bot', 10)");
ok($tok2 > 0 && $att2 == 1, 'inbox_claim leases the pending record');
is(q1("SELECT state || '/' || (not_before > clock_timestamp()) FROM durable.inbox_fail($id2, $tok2, 'boom', '1 hour')"),
	'pending/true', 'inbox_fail with attempts left: pending, due later');

is(error_of("SELECT durable.inbox_complete($id1, $tok1 + 1000000)") =~ /^DR001/ ? 'DR001' : 'other',
	'DR001', 'a stale confirmation raises DR001 (the counter is simply not kept)');

q1("SELECT * FROM durable.inbox_admit('np', 'm3', 'c3')");
my ($id3, $tok3) = split /\|/, q1("SELECT id, token FROM durable.inbox_claim('np-bot', 1)");
q1("SELECT durable.inbox_release($id3, $tok3)");
my ($id3b, $tok3b) = split /\|/, q1("SELECT id, token FROM durable.inbox_claim('np-bot', 1)");
ok($id3b == $id3 && $tok3b != $tok3, 'inbox_release gives it back; claimed again under a new token');
is(q1("SELECT durable.inbox_complete(ARRAY[$id3b], ARRAY[$tok3b])"), '1', 'the batch inbox_complete completes it');

q1("SELECT * FROM durable.inbox_admit('np', 'm4', 'c4')");
my ($id4, $tok4) = split /\|/, q1("SELECT id, token FROM durable.inbox_claim('np-bot', 1)");
is($node->safe_psql('postgres', "SET durable.inbox_max_attempts = 1;\n"
	  . "SELECT state FROM durable.inbox_fail($id4, $tok4, 'fatal')"),
	'dead', 'inbox_fail on the last attempt: dead');
q1("SELECT durable.inbox_replay($id4)");
is(q1("SELECT state || '/' || attempts FROM durable.inbox WHERE id = $id4"), 'pending/0',
	'inbox_replay makes it pending with attempts reset');
my ($id4b, $tok4b) = split /\|/, q1("SELECT id, token FROM durable.inbox_claim('np-bot', 1)");
q1("SELECT durable.inbox_complete($id4b, $tok4b)");

# A claim that waits returns a record admitted while it waits.
{
	my $bg = $node->background_psql('postgres');
	my $started = time();
	$bg->query_until(qr/waiting/,
		"\\echo waiting\nSELECT 'claimed:' || message_id FROM durable.inbox_claim('np-waiter', 1, wait => '20s');\n");
	sleep(1);
	q1("SELECT * FROM durable.inbox_admit('np', 'm5', 'c5')");
	my $out = $bg->query_safe("SELECT 'done'");
	my $elapsed = time() - $started;
	like($out, qr/claimed:m5/, 'a waiting claim gets the record admitted while it waits');
	ok($elapsed < 15, sprintf('... long before its wait ran out (%.1f s)', $elapsed));
	$bg->quit;
}

# ---------------------------------------------------------------------------
# The outbox, instances, sessions, permits
# ---------------------------------------------------------------------------
my ($action, $k1tok) = split /\|/, q1(
	"SELECT action, token FROM durable.outbox_begin('np-k1', 'c1', '{\"text\":\"one\"}', 'np-bot')");
is($action, 'send', 'outbox_begin journals and leases a new send');
is(q1("SELECT durable.outbox_heartbeat('np-k1', $k1tok, '5 min') > clock_timestamp() + interval '4 min'"),
	't', 'outbox_heartbeat extends the send\'s lease');
like(error_of("SELECT durable.outbox_heartbeat('np-k1', $k1tok - 1, '5 min')"), qr/^DR001:/,
	'outbox_heartbeat refuses a stale token (DR001)');
q1("SELECT durable.outbox_sent('np-k1', $k1tok, 'p-1')");
is(q1("SELECT action || '/' || provider_message_id FROM durable.outbox_begin('np-k1', 'c1', '{\"text\":\"one\"}', 'np-bot')"),
	'sent/p-1', 'the same key is answered from the journal');
is(q1("SELECT created FROM durable.outbox_enqueue('np-k2', 'c2', '{\"text\":\"two\"}')"), 't', 'outbox_enqueue');
my ($k2, $k2tok) = split /\|/, q1("SELECT key, token FROM durable.outbox_claim('np-bot', 10)");
is($k2, 'np-k2', 'outbox_claim leases the enqueued send');
is(q1("SELECT state FROM durable.outbox_failed('np-k2', $k2tok, 'HTTP 403', false)"), 'dead',
	'outbox_failed, not retryable: dead');
q1("SELECT durable.outbox_retry('np-k2')");
is(q1("SELECT state FROM durable.outbox WHERE key = 'np-k2'"), 'pending', 'outbox_retry: pending again');
is(q1("SELECT durable.outbox_discard('np-k2')"), 't', 'outbox_discard forgets it');

q1("SELECT * FROM durable.outbox_begin('np-k3', 'c3', '{\"text\":\"three\"}', 'np-old')");
q1("SELECT * FROM durable.inbox_admit('np', 'm6', 'c6', instance => 'np-old')");
is(q1("SELECT inbox_recovered || '/' || outbox_ambiguous FROM durable.instance_start('np-old')"), '1/1',
	'instance_start recovers the leases of a dead incarnation');

q1("SELECT durable.session_save('np-bot', 0, 'secret', 42, 'wss://gw', 1)");
is(q1("SELECT session_id || '/' || sequence FROM durable.session_load('np-bot', 0, 'wss://gw', 1)"),
	'secret/42', 'session_save and session_load');
is(q1("SELECT durable.permit('np-bucket', 1, '1 min') = '0', durable.permit('np-bucket', 1, '1 min') > '0'"),
	't|t', 'permit grants one, then says how long to wait');

# ---------------------------------------------------------------------------
# Observing: the counters need shared memory, the gauges do not
# ---------------------------------------------------------------------------
my $e = error_of('SELECT * FROM durable.metrics()');
like($e, qr/^55000: durable must be loaded via shared_preload_libraries/, "metrics() raises 55000: $e");
my ($ret, $out, $err) = $node->psql('postgres', 'SELECT * FROM durable.metrics()');
like($err, qr/HINT:.*shared_preload_libraries/, '... with a hint to preload durable');
like(error_of('SELECT durable.metrics_reset()'), qr/^55000:/, 'metrics_reset() raises 55000');
like(error_of('SELECT * FROM durable.stat_counters'), qr/^55000:/, 'the stat_counters view raises 55000');
is(q1('SELECT inbox_pending >= 1 AND inbox_dead = 0 AND over_bound IS NOT NULL FROM durable.standing()'),
	't', 'standing() works: it reads the journals');

# ---------------------------------------------------------------------------
# Sweep and purge by hand
# ---------------------------------------------------------------------------
q1("SELECT * FROM durable.inbox_admit('np', 'm7', 'c7', instance => 'np-bot', lease => '30ms')");
q1("SELECT * FROM durable.outbox_begin('np-k7', 'c7', '{\"text\":\"seven\"}', 'np-bot', lease => '30ms')");
sleep(1);
is(q1("SELECT state FROM durable.inbox WHERE message_id = 'm7'") . '/'
	  . q1("SELECT state FROM durable.outbox WHERE key = 'np-k7'"),
	'leased/sending', 'nothing sweeps by itself without preloading');
my ($expired, $ambiguous) = split /\|/, q1('SELECT inbox_expired, outbox_ambiguous FROM durable.sweep()');
ok($expired >= 1 && $ambiguous >= 1, "sweep() by hand: $expired expired lease(s), $ambiguous ambiguous send(s)");
is(q1("SELECT state FROM durable.inbox WHERE message_id = 'm7'") . '/'
	  . q1("SELECT state FROM durable.outbox WHERE key = 'np-k7'"),
	'pending/unknown', '... the lease is back to pending, the send is unknown');

my $done = q1("SELECT (SELECT count(*) FROM durable.inbox WHERE state = 'done') + (SELECT count(*) FROM durable.outbox WHERE state = 'sent')");
ok($done >= 3, "there are $done done and sent records");
is(q1('SELECT durable.purge()'), '0', 'purge() keeps records younger than durable.retention');
is(q1("SELECT durable.purge('0')"), $done, "purge('0') by hand deletes the $done done and sent records");
is(q1("SELECT count(*) FROM durable.inbox WHERE state = 'done'") . '/'
	  . q1("SELECT count(*) FROM durable.outbox WHERE state = 'sent'"),
	'0/0', '... and only those');

# ---------------------------------------------------------------------------
# A column type changed by hand (no hook refuses it without preloading): the
# direct writes refuse it instead of storing values the type cannot hold.
# ---------------------------------------------------------------------------
q1('ALTER TABLE durable.inbox ALTER COLUMN token TYPE numeric');
my $retyped = error_of("SELECT * FROM durable.inbox_admit('np', 'm8', 'c8', instance => 'np-bot')");
like($retyped, qr/^0A000: column "token" of "durable.inbox" has type numeric, not bigint/,
	"a retyped journal column is refused: $retyped");
($ret, $out, $err) = $node->psql('postgres',
	"SELECT * FROM durable.inbox_admit('np', 'm8', 'c8', instance => 'np-bot')");
like($err, qr/HINT:  Change the column back: ALTER TABLE durable.inbox ALTER COLUMN token TYPE bigint\./,
	'... with the command that changes it back');
q1('ALTER TABLE durable.inbox ALTER COLUMN token TYPE bigint');
like(q1("SELECT token FROM durable.inbox_admit('np', 'm8', 'c8', instance => 'np-bot')"), qr/^\d+$/,
	'... and, changed back, the admit works again');

# ---------------------------------------------------------------------------
# A default, NOT NULL or a stored generated column added by hand (no hook
# refuses the ALTER without preloading): the direct writes refuse the journal
# rather than write NULL where INSERT would not, or leave a generated column
# stale.
# ---------------------------------------------------------------------------
q1("ALTER TABLE durable.inbox ADD COLUMN tag text DEFAULT 'x'");
like(error_of("SELECT * FROM durable.inbox_admit('np', 'm9', 'c9')"),
	qr/^0A000: column "tag" of "durable.inbox" is not supported/,
	'a column with a default, added by hand, is refused by the inserts');
q1('ALTER TABLE durable.inbox DROP COLUMN tag');
q1("UPDATE durable.inbox SET owner = 'someone' WHERE owner IS NULL");
q1('ALTER TABLE durable.inbox ALTER COLUMN owner SET NOT NULL');
like(error_of("SELECT * FROM durable.inbox_admit('np', 'm9', 'c9')"),
	qr/^23502: null value in column "owner"/,
	'a NOT NULL on a column the insert leaves NULL is 23502');
q1('ALTER TABLE durable.inbox ALTER COLUMN owner DROP NOT NULL');
my ($g_id, $g_token) = split /\|/,
  q1("SELECT id, token FROM durable.inbox_admit('np', 'm10', 'c10', instance => 'np-bot')");
q1("ALTER TABLE durable.inbox ADD COLUMN shown text GENERATED ALWAYS AS (state || ' record') STORED");
like(error_of("SELECT durable.inbox_complete($g_id, $g_token)"),
	qr/^0A000: generated column "shown" of "durable.inbox" is not supported/,
	'a stored generated column is refused by the direct update');
q1('ALTER TABLE durable.inbox DROP COLUMN shown');
is(q1("SELECT durable.inbox_complete($g_id, $g_token)"), '', '... and, dropped, the record completes');

# A column of a domain type: INSERT would write the domain's default, or
# check NULL against its NOT NULL and CHECK constraints.  A domain given a
# default after the column was added is refused like a column's own default;
# its constraints, at any depth, fail the insert as they fail INSERT.
q1('CREATE DOMAIN public.np_text AS text');
q1('CREATE DOMAIN public.np_note AS public.np_text');
q1('ALTER TABLE durable.outbox ADD COLUMN note public.np_note');
like(q1("SELECT action FROM durable.outbox_begin('np-k11', 'c11', '{}', 'np-bot')"), qr/^send$/,
	'a column of a domain without a default or constraints is written NULL');
q1("ALTER DOMAIN public.np_note SET DEFAULT 'n/a'");
like(error_of("SELECT action FROM durable.outbox_begin('np-k12', 'c12', '{}', 'np-bot')"),
	qr/^0A000: column "note" of "durable.outbox" is not supported/,
	'a domain given a default is refused by the inserts');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT action FROM durable.outbox_begin('np-k12', 'c12', '{}', 'np-bot')");
like($err, qr/HINT:  Drop the column, or the type's default: ALTER DOMAIN public\.np_note DROP DEFAULT\./,
	'... with the command that drops the default');
q1('ALTER DOMAIN public.np_note DROP DEFAULT');
q1("UPDATE durable.outbox SET note = 'filled'");
q1('ALTER DOMAIN public.np_text SET NOT NULL');
like(error_of("SELECT action FROM durable.outbox_begin('np-k12', 'c12', '{}', 'np-bot')"),
	qr/^23502: domain public\.np_note does not allow null values/,
	'a NOT NULL on the domain under it fails the insert, as INSERT fails');
q1('ALTER DOMAIN public.np_text DROP NOT NULL');
q1("ALTER DOMAIN public.np_text ADD CONSTRAINT np_given CHECK (VALUE IS NOT NULL)");
like(error_of("SELECT action FROM durable.outbox_begin('np-k12', 'c12', '{}', 'np-bot')"),
	qr/^23514: value for domain public\.np_note violates check constraint "np_given"/,
	'... and so does a CHECK that refuses NULL');
is(q1("SELECT count(*) FROM durable.outbox WHERE key = 'np-k12'"), '0', '... which journals nothing');
q1('ALTER TABLE durable.outbox DROP COLUMN note');
like(q1("SELECT action FROM durable.outbox_begin('np-k12', 'c12', '{}', 'np-bot')"), qr/^send$/,
	'... and, dropped, the send is journaled');

# A column of a base type with a default of its own (CREATE TYPE ... DEFAULT,
# a superuser's): INSERT writes the type's default into it, so the inserts
# refuse it as they refuse a column's own default.  A domain over such a
# type inherits the default (as text, not as an expression: pg_type's
# typdefault, not typdefaultbin).
q1('CREATE TYPE public.np_word');
q1(q{CREATE FUNCTION public.np_word_in(cstring) RETURNS public.np_word AS 'textin' LANGUAGE internal IMMUTABLE STRICT});
q1(q{CREATE FUNCTION public.np_word_out(public.np_word) RETURNS cstring AS 'textout' LANGUAGE internal IMMUTABLE STRICT});
q1(q{CREATE TYPE public.np_word (INPUT = public.np_word_in, OUTPUT = public.np_word_out,
	LIKE = pg_catalog.text, DEFAULT = 'zippo')});
q1('CREATE TABLE public.np_words (n int, w public.np_word)');
q1('INSERT INTO public.np_words (n) VALUES (1)');
is(q1('SELECT w FROM public.np_words'), 'zippo',
	'INSERT writes the default of a base type into a column it is given no value for');
q1('ALTER TABLE durable.outbox ADD COLUMN word public.np_word');
like(error_of("SELECT action FROM durable.outbox_begin('np-k14', 'c14', '{}', 'np-bot')"),
	qr/^0A000: column "word" of "durable.outbox" is not supported/,
	'a column of a base type with a default is refused by the inserts');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT action FROM durable.outbox_begin('np-k14', 'c14', '{}', 'np-bot')");
like($err, qr/DETAIL:  Its type public\.np_word has a default.*\n.*HINT:  Drop the column, or change it to a type without a default\./,
	'... saying that its type has a default');
q1('ALTER TABLE durable.outbox DROP COLUMN word');
q1('CREATE DOMAIN public.np_word_domain AS public.np_word');
q1('ALTER TABLE durable.outbox ADD COLUMN word public.np_word_domain');
like(error_of("SELECT action FROM durable.outbox_begin('np-k14', 'c14', '{}', 'np-bot')"),
	qr/^0A000: column "word" of "durable.outbox" is not supported/,
	'... and so is a column of a domain over it, which inherits the default');
q1('ALTER DOMAIN public.np_word_domain DROP DEFAULT');
like(result_of("SELECT action FROM durable.outbox_begin('np-k14', 'c14', '{}', 'np-bot')"), qr/^send$/,
	'... until the domain drops it');
q1('ALTER TABLE durable.outbox DROP COLUMN word');

# Constraints and rules (no hook refuses them without preloading): the direct
# writes refuse the journal rather than skip what they would not check.
q1('ALTER TABLE durable.outbox ADD CONSTRAINT short_keys CHECK (length(key) < 100)');
like(error_of("SELECT action FROM durable.outbox_begin('np-k13', 'c13', '{}', 'np-bot')"),
	qr/^0A000: check constraint "short_keys" on "durable.outbox" is not supported/,
	'a CHECK constraint is refused by the inserts');
q1('ALTER TABLE durable.outbox DROP CONSTRAINT short_keys');
q1('CREATE RULE no_sends AS ON INSERT TO durable.outbox DO INSTEAD NOTHING');
like(error_of("SELECT action FROM durable.outbox_begin('np-k13', 'c13', '{}', 'np-bot')"),
	qr/^0A000: rules on "durable.outbox" are not supported/,
	'a rule is refused by the inserts');
q1('DROP RULE no_sends ON durable.outbox');
like(result_of("SELECT action FROM durable.outbox_begin('np-k13', 'c13', '{}', 'np-bot')"), qr/^send$/,
	'... and, dropped, the send is journaled (pg_class.relhasrules stays set until a VACUUM)');
q1('CREATE TABLE public.bots (name text PRIMARY KEY)');
q1('ALTER TABLE durable.inbox ADD CONSTRAINT inbox_owner_fk FOREIGN KEY (owner) REFERENCES public.bots (name) NOT VALID');
like(error_of("SELECT * FROM durable.inbox_admit('np', 'm13', 'c13')"),
	qr/^0A000: foreign key "inbox_owner_fk" on "durable.inbox" is not supported/,
	'a foreign key from a journal is refused by the inserts');
q1('ALTER TABLE durable.inbox DROP CONSTRAINT inbox_owner_fk');
my $t_id = q1("SELECT id FROM durable.inbox_admit('np', 'm14', 'c14')");
q1('ALTER TABLE durable.inbox ADD CONSTRAINT inbox_id_token_key UNIQUE (id, token)');
q1('CREATE TABLE public.fenced (inbox_id bigint, inbox_token bigint, '
	  . 'FOREIGN KEY (inbox_id, inbox_token) REFERENCES durable.inbox (id, token))');
like(error_of("SELECT * FROM durable.inbox_claim('np-bot', max => 100)"),
	qr/^0A000: foreign key "fenced_inbox_id_inbox_token_fkey" referencing "durable.inbox" is not supported/,
	'a foreign key that references the token is refused by the claim');
is(q1("SELECT state FROM durable.inbox WHERE id = $t_id"), 'pending', '... which leases nothing');
q1('DROP TABLE public.fenced');
q1('ALTER TABLE durable.inbox DROP CONSTRAINT inbox_id_token_key');
like(q1("SELECT count(*) FROM durable.inbox_claim('np-bot', max => 100)"), qr/^[1-9]\d*$/,
	'... and, dropped, the claim leases again');

# A deferrable UNIQUE or EXCLUDE constraint is checked by an internal trigger,
# which cannot be dropped: the refusal names the constraint.
q1('ALTER TABLE durable.inbox ADD CONSTRAINT inbox_id_token_key UNIQUE (id, token) DEFERRABLE');
like(error_of("SELECT id FROM durable.inbox_admit('np', 'm15', 'c15')"),
	qr/^0A000: deferrable constraint "inbox_id_token_key" on "durable.inbox" is not supported/,
	'a deferrable unique constraint is refused by the inserts, by its name');
($ret, $out, $err) = $node->psql('postgres', "SELECT id FROM durable.inbox_admit('np', 'm15', 'c15')");
like($err, qr/HINT:  Drop the constraint and add it back NOT DEFERRABLE\./, '... with a hint PostgreSQL allows');
q1('ALTER TABLE durable.inbox DROP CONSTRAINT inbox_id_token_key, '
	  . 'ADD CONSTRAINT inbox_id_token_key UNIQUE (id, token)');
like(q1("SELECT id FROM durable.inbox_admit('np', 'm15', 'c15')"), qr/^\d+$/,
	'... and, added back NOT DEFERRABLE, the admit journals');
q1('ALTER TABLE durable.inbox DROP CONSTRAINT inbox_id_token_key');
q1('ALTER TABLE durable.outbox ADD CONSTRAINT outbox_id_excl EXCLUDE USING btree (id WITH =) '
	  . 'DEFERRABLE INITIALLY DEFERRED');
like(error_of("SELECT action FROM durable.outbox_begin('np-k15', 'c15', '{}', 'np-bot')"),
	qr/^0A000: deferrable constraint "outbox_id_excl" on "durable.outbox" is not supported/,
	'so is a deferrable exclusion constraint');
q1('ALTER TABLE durable.outbox DROP CONSTRAINT outbox_id_excl');

# A trigger that would not fire does not stop the direct writes, by
# PostgreSQL's rule (TriggerEnabled): a disabled trigger never fires; under
# session_replication_role = replica only triggers enabled REPLICA or ALWAYS
# do, otherwise those enabled (ORIGIN) or ALWAYS, and foreign keys' internal
# triggers are enabled ORIGIN.
q1(q{CREATE FUNCTION public.np_trig() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$});
q1('CREATE TRIGGER np_audit BEFORE INSERT OR UPDATE ON durable.inbox '
	  . 'FOR EACH ROW EXECUTE FUNCTION public.np_trig()');
like(error_of("SELECT id FROM durable.inbox_admit('np', 'm16', 'c16')"),
	qr/^0A000: trigger "np_audit" on "durable.inbox" is not supported/,
	'an enabled trigger is refused by the inserts');
q1('ALTER TABLE durable.inbox DISABLE TRIGGER np_audit');
my $admitted = result_of("SELECT id || '|' || token FROM durable.inbox_admit('np', 'm16', 'c16', instance => 'np-bot')");
like($admitted, qr/^\d+\|\d+$/, "disabled, it is not: the admit journals and leases ($admitted)");
my ($d_id, $d_token) = split /\|/, $admitted;
is(result_of("SELECT durable.inbox_complete($d_id, $d_token)"), '', '... and the completion goes through');
q1('ALTER TABLE durable.inbox ENABLE REPLICA TRIGGER np_audit');
like(result_of("SELECT id FROM durable.inbox_admit('np', 'm17', 'c17')"), qr/^\d+$/,
	'a trigger enabled REPLICA is skipped outside replica mode');
like(error_of("SET session_replication_role = replica;\nSELECT id FROM durable.inbox_admit('np', 'm18', 'c18')"),
	qr/^0A000: trigger "np_audit" on "durable.inbox" is not supported/,
	'... and refused in replica mode');
q1('ALTER TABLE durable.inbox ENABLE ALWAYS TRIGGER np_audit');
like(error_of("SET session_replication_role = replica;\nSELECT id FROM durable.inbox_admit('np', 'm18', 'c18')"),
	qr/^0A000: trigger "np_audit" on "durable.inbox" is not supported/,
	'a trigger enabled ALWAYS is refused in replica mode too');
q1('ALTER TABLE durable.inbox ENABLE TRIGGER np_audit');
like(result_of("SET session_replication_role = replica;\nSELECT id FROM durable.inbox_admit('np', 'm18', 'c18')"),
	qr/^\d+$/, 'one enabled ORIGIN is skipped in replica mode');
q1('DROP TRIGGER np_audit ON durable.inbox');
q1('ALTER TABLE durable.inbox ADD CONSTRAINT inbox_owner_fk FOREIGN KEY (owner) REFERENCES public.bots (name) NOT VALID');
like(result_of("SET session_replication_role = replica;\nSELECT id FROM durable.inbox_admit('np', 'm19', 'c19')"),
	qr/^\d+$/, 'a foreign key from the journal is skipped in replica mode, as the executor skips it');
like(error_of("SELECT id FROM durable.inbox_admit('np', 'm20', 'c20')"),
	qr/^0A000: foreign key "inbox_owner_fk" on "durable.inbox" is not supported/,
	'... and refused outside it');
q1('ALTER TABLE durable.inbox DROP CONSTRAINT inbox_owner_fk');

# Attached as a partition (refused when it is attached if durable is
# preloaded), a journal would take rows its partition constraint excludes,
# which the parent's scans then prune away: the writes refuse it (until
# 2026-12-05 the admit journaled such a row).
q1('CREATE TABLE public.np_parent (LIKE durable.inbox) PARTITION BY LIST (source)');
q1("ALTER TABLE public.np_parent ATTACH PARTITION durable.inbox FOR VALUES IN ('np')");
like(error_of("SELECT id FROM durable.inbox_admit('elsewhere', 'm21', 'c21')"),
	qr/^0A000: "durable\.inbox" as a partition is not supported/,
	'a journal attached as a partition is refused by the writes');
q1('ALTER TABLE public.np_parent DETACH PARTITION durable.inbox');
like(result_of("SELECT id FROM durable.inbox_admit('elsewhere', 'm21', 'c21')"), qr/^\d+$/,
	'... and written again once detached');
q1('DROP TABLE public.np_parent');

# Without preloading nothing stops ALTER SEQUENCE on durable's sequences: one
# given a cache (a later admit could draw a lower id from another backend's
# range and be claimed first) is refused by the writes, the admit's direct
# insert and outbox_enqueue's statement alike (55000), with the command that
# puts it back.
for my $case ([ 'inbox_id_seq', "SELECT durable.inbox_admit('np', 'm22', 'c22')" ],
	[ 'outbox_id_seq', "SELECT durable.outbox_enqueue('np-q', 'c22', '{}')" ])
{
	my ($seq, $call) = @$case;
	q1("ALTER SEQUENCE durable.$seq CACHE 20");
	like(error_of($call), qr/^55000: sequence "durable\.$seq" does not have the options durable created/,
		"a cache on durable.$seq is refused by the writes");
	q1("ALTER SEQUENCE durable.$seq CACHE 1");
}
# ... and token_seq given an increment over 1, past which the start-up lift
# gives up as soon as the tokens run ahead of the clock (until 2026-12-07
# only an increment below 1 was refused).
q1('ALTER SEQUENCE durable.token_seq INCREMENT 1000');
like(error_of("SELECT durable.inbox_admit('np', 'm23', 'c23', instance => 'np-bot')"),
	qr/^55000: sequence "durable\.token_seq" does not have the options durable created/,
	'an increment of 1000 on durable.token_seq is refused by the writes');
q1('ALTER SEQUENCE durable.token_seq INCREMENT 1');

# Without preloading nothing stops a table inheriting from durable's (the
# guard refuses one), which 0.2 -> 0.3's rewrite of the inbox and 0.5 ->
# 0.6's change of collation would reach, checking that table's constraints
# as the superuser who updates (t/006 has the owner who is no longer one):
# each step refuses (55000) until it is detached.
for my $case (
	[ '0.2', 'inbox', '0.3', 'finished_at timestamptz CHECK (finished_at IS NULL OR true)' ],
	[ '0.5', 'permit_buckets', '0.6', '' ])
{
	my ($from, $parent, $to, $columns) = @$case;
	$node->safe_psql('postgres', 'CREATE DATABASE np_upgrade');
	$node->safe_psql('np_upgrade', qq{
		CREATE EXTENSION durable VERSION '$from';
		CREATE TABLE public.kid ($columns) INHERITS (durable.$parent);});
	my ($up_rc, $up_out, $up_err) = $node->psql('np_upgrade', "\\set VERBOSITY verbose\nALTER EXTENSION durable UPDATE");
	like($up_err, qr/55000: table public\.kid inherits from durable\.$parent and stands in the way of the update to \Q$to\E/,
		"$from -> $to refuses while a table inherits from durable.$parent");
	$node->safe_psql('np_upgrade', "ALTER TABLE public.kid NO INHERIT durable.$parent; ALTER EXTENSION durable UPDATE");
	is($node->safe_psql('np_upgrade', "SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
		$node->safe_psql('postgres', "SELECT default_version FROM pg_available_extensions WHERE name = 'durable'"),
		'... and goes through once it is detached');
	$node->safe_psql('postgres', 'DROP DATABASE np_upgrade');
}

# Without preloading, REASSIGN OWNED does not move the initial privileges
# of durable's objects to the new owner (the library's utility hook, which
# does, is not installed; PostgreSQL 17 does it itself): dumps carried a
# REVOKE from the old owner and a GRANT to the new one for each object, the
# REVOKE naming the old owner's number once it was dropped, which a restore
# refuses.  The update to 0.13 moves them.
$node->safe_psql('postgres', q{
	CREATE ROLE np_first_owner LOGIN SUPERUSER;
	CREATE ROLE np_next_owner LOGIN SUPERUSER;
	CREATE DATABASE np_moved;
});
$node->safe_psql('np_moved', "CREATE EXTENSION durable VERSION '0.12'",
	extra_params => [ '-U', 'np_first_owner' ]);
$node->safe_psql('np_moved', 'REASSIGN OWNED BY np_first_owner TO np_next_owner');
my $first_owner_named = q{SELECT count(*) FROM pg_init_privs WHERE initprivs::text LIKE '%np_first_owner%'};
cmp_ok($node->safe_psql('np_moved', $first_owner_named), '>',
	($node->safe_psql('np_moved', 'SHOW server_version_num') >= 170000 ? -1 : 0),
	'np_moved: before the update the initial privileges name the first owner (before PostgreSQL 17)');
$node->safe_psql('np_moved', 'ALTER EXTENSION durable UPDATE');
is($node->safe_psql('np_moved', $first_owner_named), '0',
	'np_moved: after the update to 0.13 they name it no more');
$node->safe_psql('np_moved', 'DROP OWNED BY np_first_owner');
$node->safe_psql('postgres', 'DROP ROLE np_first_owner');
{
	my ($dump, $dump_err);
	IPC::Run::run([ 'pg_dump', '--schema-only', '-d', $node->connstr('np_moved') ], '>', \$dump, '2>', \$dump_err)
	  or die "pg_dump np_moved failed: $dump_err";
	unlike($dump, qr/^REVOKE .* FROM "?[0-9]+"?;$/m, 'np_moved: pg_dump names no dropped role by its number');
	unlike($dump, qr/^GRANT ALL ON FUNCTION durable\.inbox_admit\(.*\) TO np_next_owner;$/m,
		'np_moved: nor grants the new owner what it was given');
}
$node->safe_psql('postgres', 'DROP DATABASE np_moved');

# Nor does anything stop a table inheriting from durable's in the database
# itself: durable's statements read and write its own tables only (ONLY),
# never a child's rows, nor fire its triggers as the caller.
q1(q{
	CREATE TABLE public.kid_log (what text);
	CREATE FUNCTION public.kid_reached() RETURNS trigger LANGUAGE plpgsql AS
	  $$BEGIN INSERT INTO public.kid_log VALUES (TG_TABLE_NAME || ' ' || TG_OP); RETURN COALESCE(NEW, OLD); END$$;
	CREATE TABLE public.kid_permits () INHERITS (durable.permits);
	CREATE TABLE public.kid_sessions () INHERITS (durable.sessions);
	CREATE TABLE public.kid_inbox () INHERITS (durable.inbox);
	INSERT INTO public.kid_permits VALUES ('np-kid', now()), ('np-kid', now() - interval '1 day');
	INSERT INTO public.kid_sessions VALUES ('np-kid-bot', 0, 'kid-secret', 7, 'wss://kid', 1, now(), current_user);
	INSERT INTO public.kid_inbox (id, source, message_id, chat_id, kind, payload, state, token, owner, lease_until, not_before, created_at)
	  VALUES (-7, 'np-kid', 'k1', 'kc1', 'message', '{}', 'leased', 1, 'gone', now() - interval '1 h', now(), now());
	CREATE TRIGGER reached BEFORE INSERT OR UPDATE OR DELETE ON public.kid_permits FOR EACH ROW EXECUTE FUNCTION public.kid_reached();
	CREATE TRIGGER reached BEFORE INSERT OR UPDATE OR DELETE ON public.kid_sessions FOR EACH ROW EXECUTE FUNCTION public.kid_reached();
	CREATE TRIGGER reached BEFORE INSERT OR UPDATE OR DELETE ON public.kid_inbox FOR EACH ROW EXECUTE FUNCTION public.kid_reached();});
is(q1("SELECT durable.permit('np-kid', 1, '1 min') = '0'"), 't',
	'permit does not count a child table\'s permits');
is(q1("SELECT count(*) FROM durable.session_load('np-kid-bot', 0, 'wss://kid', 1)"), '0',
	'session_load does not read a child table\'s session');
q1("SELECT durable.session_save('np-kid-bot', 0, 'mine', 1, 'wss://kid', 1)");
is(q1("SELECT session_id FROM durable.session_load('np-kid-bot', 0, 'wss://kid', 1)"), 'mine',
	'... nor save over it');
q1('SELECT durable.sweep()');
is(q1("SELECT state || ' ' || owner FROM public.kid_inbox"), 'leased gone',
	'the sweep does not recover a child table\'s expired lease');
is(q1("SELECT count(*) FROM public.kid_permits"), '2', 'nor are a child table\'s old permits purged');
is(q1("SELECT count(*) || ' ' || coalesce(string_agg(what, ', '), '') FROM public.kid_log"), '0 ',
	'no trigger of a child table fired');
q1('DROP TABLE public.kid_permits, public.kid_sessions, public.kid_inbox, public.kid_log');

$node->stop;
done_testing();
