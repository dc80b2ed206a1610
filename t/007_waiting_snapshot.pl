# t/007_waiting_snapshot.pl
# A claim that waits in the server does not hold back vacuum while it sleeps:
# its backend advertises no xmin (pg_stat_activity.backend_xmin is NULL), a
# row deleted meanwhile is vacuumed away, and the claim still takes the
# message that wakes it.  Where the statement's snapshot could be read again
# after the wait (REPEATABLE READ, a query that also reads a table, an open
# cursor) the snapshot is kept, as the README documents.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/lib";
use DurableWait;

my $node = PostgreSQL::Test::Cluster->new('waiting');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '1h'\nautovacuum = off\nmax_prepared_transactions = 2\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION durable; CREATE TABLE scratch (n int)');

sub start_waiter
{
	my ($name, $sql) = @_;
	return start_waiting_claim($node, $sql, "$name: the claim");
}

sub backend_xmin
{
	my ($pid) = @_;
	return $node->safe_psql('postgres',
		"SELECT coalesce(backend_xmin::text, 'none') FROM pg_stat_activity WHERE pid = $pid");
}

# Dead rows a VACUUM of scratch had to keep (recently dead) after deleting
# one row that committed while the waiter slept.
sub dead_rows_kept
{
	$node->safe_psql('postgres', 'INSERT INTO scratch VALUES (1)');
	$node->safe_psql('postgres', 'DELETE FROM scratch');
	$node->safe_psql('postgres', 'VACUUM scratch');
	return $node->safe_psql('postgres',
		"SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'scratch'");
}

# ---- a claim on its own, in READ COMMITTED, for each queue: no xmin while
# asleep; then the record that wakes it: [queue, claim, wake, claimed, what]
for my $case (
	[ 'inbox',
	  "SELECT 'claimed:' || message_id FROM durable.inbox_claim('w1', 1, wait => '60 s');",
	  "SELECT * FROM durable.inbox_admit('t', 'm1', 'c1')", 'm1', 'message' ],
	[ 'outbox',
	  "SELECT 'claimed:' || key FROM durable.outbox_claim('w2', 1, wait => '60 s');",
	  "SELECT * FROM durable.outbox_enqueue('k1', 'c1', '{}')", 'k1', 'send' ])
{
	my ($queue, $claim, $wake, $claimed, $what) = @$case;
	my ($bg, $pid) = start_waiter($queue, $claim);
	is(backend_xmin($pid), 'none', "a sleeping $queue claim advertises no xmin");
	is(dead_rows_kept(), '0', 'a row deleted while it sleeps is vacuumed away');
	$node->safe_psql('postgres', $wake);
	like($bg->query_safe("SELECT 'after'"), qr/claimed:$claimed/,
		"the claim then takes the $what that woke it");
	$bg->quit;
}

# ---- a VACUUM or ANALYZE of the journals while the claim sleeps changes
# their relation cache entries: the claim's once-a-second look for DDL
# reloaded them, and the catalog snapshot of the reload kept an xmin until
# the wait ended (found in review, 2026-12-04).  Both queues.
for my $case (
	[ 'inbox', 'durable.inbox',
	  "SELECT 'claimed:' || message_id FROM durable.inbox_claim('w3', 1, wait => '60 s');",
	  "SELECT * FROM durable.inbox_admit('t', 'm-vac', 'c-vac')", 'm-vac' ],
	[ 'outbox', 'durable.outbox',
	  "SELECT 'claimed:' || key FROM durable.outbox_claim('w4', 1, wait => '60 s');",
	  "SELECT * FROM durable.outbox_enqueue('k-vac', 'c-vac', '{}')", 'k-vac' ])
{
	my ($queue, $table, $claim, $wake, $claimed) = @$case;
	my ($bg, $pid) = start_waiter("$queue, vacuumed", $claim);
	$node->safe_psql('postgres', "VACUUM ANALYZE $table");
	# two looks (one a second) after the VACUUM
	sleep 2;
	is(backend_xmin($pid), 'none',
		"a sleeping $queue claim advertises no xmin after a VACUUM ANALYZE of its journal");
	is(dead_rows_kept(), '0', '... and a row deleted meanwhile is vacuumed away');
	$node->safe_psql('postgres', $wake);
	like($bg->query_safe("SELECT 'after'"), qr/claimed:$claimed/,
		"the claim then takes what woke it");
	$bg->quit;
}

# ---- a look for DDL does not wait for a lock on the other journal's
# index: after an invalidation it looked durable's relations up again,
# which opens every index of both journals (found in review, 2026-12-04).
# (An attempt still does, when the claim wakes: README, "Claims that wait".)
{
	my ($bg, $pid) = start_waiter('other journal locked',
		"SELECT 'claimed:' || message_id FROM durable.inbox_claim('w6', 1, wait => '12 s');");
	my $ddl = $node->background_psql('postgres');
	# held 5 s, then committed whatever the claim does
	$ddl->query_until(qr/reindexed/,
		"BEGIN; REINDEX INDEX durable.outbox_sent_at_idx;\n\\echo reindexed\nSELECT pg_sleep(5); COMMIT;\n");
	# any change of the inbox's relation cache entry will do
	$node->safe_psql('postgres', 'ALTER TABLE durable.inbox SET (autovacuum_enabled = off)');
	sleep 2;	# two looks
	is($node->safe_psql('postgres',
			"SELECT wait_event_type FROM pg_stat_activity WHERE pid = $pid"),
		'Extension',
		'a sleeping claim whose looks meet DDL on the outbox goes on sleeping, not waiting for a lock');
	unlike($bg->query_safe("SELECT 'after'"), qr/claimed:/, 'and claims nothing from the empty inbox');
	$ddl->quit;
	$bg->quit;
	$node->safe_psql('postgres', 'ALTER TABLE durable.inbox RESET (autovacuum_enabled)');
}

# ---- inside a transaction block (as drivers that are not in autocommit
# mode send it), with no other snapshot open: no xmin either
my ($bg, $pid) = start_waiter('transaction block',
	"BEGIN; SELECT 'claimed:' || message_id FROM durable.inbox_claim('w5', 1, wait => '60 s');");
is(backend_xmin($pid), 'none', 'a sleeping claim inside BEGIN advertises no xmin');
$node->safe_psql('postgres', "SELECT * FROM durable.inbox_admit('t', 'm3', 'c3')");
like($bg->query_safe("SELECT 'after'"), qr/claimed:m3/, 'and claims the message that woke it');
$bg->query_safe('COMMIT');
$bg->quit;

# ---- where the snapshot is read again after the wait, it is kept
($bg, $pid) = start_waiter('open cursor',
	"BEGIN; DECLARE c CURSOR FOR SELECT n FROM scratch; SELECT 'claimed:' || message_id FROM durable.inbox_claim('w6', 1, wait => '6 s');");
isnt(backend_xmin($pid), 'none', 'with a cursor open in its transaction the claim keeps its snapshot');
$bg->query_safe('COMMIT');
$bg->quit;

($bg, $pid) = start_waiter('repeatable read',
	"BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 'claimed:' || message_id FROM durable.inbox_claim('w3', 1, wait => '6 s');");
isnt(backend_xmin($pid), 'none', 'under REPEATABLE READ the claim keeps its snapshot');
# (it cannot see a record admitted after its snapshot: its short wait ends)
$bg->query_safe('COMMIT');
$bg->quit;

($bg, $pid) = start_waiter('query reading a table',
	"SELECT 'claimed:' || c.message_id, (SELECT count(*) FROM scratch) FROM durable.inbox_claim('w4', 1, wait => '60 s') c;");
isnt(backend_xmin($pid), 'none', 'a query that also reads a table keeps its snapshot');
$node->safe_psql('postgres', "SELECT * FROM durable.inbox_admit('t', 'm2', 'c2')");
like($bg->query_safe("SELECT 'after'"), qr/claimed:m2/, 'and claims as before');
$bg->quit;

# A sort with an operator class of yours calls its comparison function,
# which reads a table, after the claim: nothing in the plan's expressions
# names that function (the sort node holds the operator), so only the plan
# node tells.
$node->safe_psql('postgres', q{
CREATE FUNCTION cmp_with_scratch(text, text) RETURNS int LANGUAGE sql STABLE
    AS 'SELECT bttextcmp($1, $2) + 0 * (SELECT count(*) FROM scratch)::int';
CREATE FUNCTION lt_s(text, text) RETURNS bool LANGUAGE sql STABLE AS 'SELECT cmp_with_scratch($1, $2) < 0';
CREATE FUNCTION le_s(text, text) RETURNS bool LANGUAGE sql STABLE AS 'SELECT cmp_with_scratch($1, $2) <= 0';
CREATE FUNCTION eq_s(text, text) RETURNS bool LANGUAGE sql STABLE AS 'SELECT cmp_with_scratch($1, $2) = 0';
CREATE FUNCTION ge_s(text, text) RETURNS bool LANGUAGE sql STABLE AS 'SELECT cmp_with_scratch($1, $2) >= 0';
CREATE FUNCTION gt_s(text, text) RETURNS bool LANGUAGE sql STABLE AS 'SELECT cmp_with_scratch($1, $2) > 0';
CREATE OPERATOR <<< (LEFTARG = text, RIGHTARG = text, FUNCTION = lt_s);
CREATE OPERATOR <<= (LEFTARG = text, RIGHTARG = text, FUNCTION = le_s);
CREATE OPERATOR === (LEFTARG = text, RIGHTARG = text, FUNCTION = eq_s);
CREATE OPERATOR >>= (LEFTARG = text, RIGHTARG = text, FUNCTION = ge_s);
CREATE OPERATOR >>> (LEFTARG = text, RIGHTARG = text, FUNCTION = gt_s);
CREATE OPERATOR CLASS scratch_text_ops FOR TYPE text USING btree AS
    OPERATOR 1 <<<, OPERATOR 2 <<=, OPERATOR 3 ===, OPERATOR 4 >>=, OPERATOR 5 >>>,
    FUNCTION 1 cmp_with_scratch(text, text);
});
($bg, $pid) = start_waiter('sort of yours',
	"SELECT 'claimed:' || message_id FROM durable.inbox_claim('w10', 2, wait => '60 s') ORDER BY message_id USING <<<;");
isnt(backend_xmin($pid), 'none', 'a query that sorts the claim with an operator of yours keeps its snapshot');
$node->safe_psql('postgres', "SELECT * FROM durable.inbox_admit('t', 'm10', 'c10')");
like($bg->query_safe("SELECT 'after'"), qr/claimed:m10/, 'and claims as before');
$bg->quit;

# A built-in function that reads a table with the statement's snapshot after
# the claim (query_to_xml), and a claim in a FOR loop of a STABLE PL/pgSQL
# function, which shares its caller's snapshot: both keep the snapshot, and
# what they read after the wait is what it shows -- the row deleted and
# vacuumed meanwhile is still counted.  Until 2026-12-05 both released it:
# VACUUM removed the row, and they counted 0.
$node->safe_psql('postgres', q{
CREATE FUNCTION claim_then_count() RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
    r record;
    got text := '';
    n bigint;
BEGIN
    FOR r IN SELECT * FROM durable.inbox_claim('w12', 1, wait => '60 s') LOOP
        got := got || r.message_id;
    END LOOP;
    SELECT count(*) INTO n FROM scratch;
    RETURN 'claimed:' || got || ' counted:' || n;
END $$;
});
for my $case (
	[ 'a built-in function that reads a table',
	  "SELECT 'claimed:' || c.message_id || ' counted:' || (xpath('//n/text()', query_to_xml('SELECT count(*) AS n FROM scratch', false, false, '')))[1]::text FROM durable.inbox_claim('w11', 1, wait => '60 s') c;",
	  'm11' ],
	[ 'a claim in a STABLE PL/pgSQL function', "SELECT claim_then_count();", 'm12' ])
{
	my ($what, $claim, $message) = @$case;
	$node->safe_psql('postgres', 'INSERT INTO scratch VALUES (1)');
	($bg, $pid) = start_waiter($what, $claim);
	isnt(backend_xmin($pid), 'none', "$what: the claim keeps its snapshot while it waits");
	$node->safe_psql('postgres', 'DELETE FROM scratch');
	$node->safe_psql('postgres', 'VACUUM scratch');
	$node->safe_psql('postgres', "SELECT * FROM durable.inbox_admit('t', '$message', 'c-$message')");
	like($bg->query_safe("SELECT 'after'"), qr/claimed:$message counted:1/,
		"$what: it claims, and reads the row deleted during the wait, as its snapshot shows");
	$bg->quit;
}

# A claim in a loop of a DO block or a procedure gives its snapshot up:
# their next statements take new ones.  In a VOLATILE function (PL/pgSQL's
# default) called by a statement, that statement's snapshot stays
# registered, and the claim keeps it.  (The README said t/007 checked these
# forms; until 2026-12-05 it did not.)  Inside a transaction block a DO
# block or a procedure runs atomically, and keeps what it read before the
# claim as pointers to TOAST data that only the DO or CALL statement's
# snapshot protects: the claim keeps its snapshot there (until 2026-12-06
# it gave it up, found by review).
$node->safe_psql('postgres', q{
CREATE PROCEDURE claim_in_procedure() LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM durable.inbox_claim('w15', 1, wait => '60 s') LOOP
        NULL;
    END LOOP;
END $$;
CREATE FUNCTION claim_in_volatile() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r record;
    got text := '';
BEGIN
    FOR r IN SELECT * FROM durable.inbox_claim('w16', 1, wait => '60 s') LOOP
        got := got || r.message_id;
    END LOOP;
    RETURN 'claimed:' || got;
END $$;
});
for my $case (
	[ 'a DO block',
	  q{DO $$DECLARE r record; BEGIN FOR r IN SELECT * FROM durable.inbox_claim('w14', 1, wait => '60 s') LOOP NULL; END LOOP; END$$;},
	  'w14', 'm14', 1 ],
	[ 'a procedure', 'CALL claim_in_procedure();', 'w15', 'm15', 1 ],
	[ 'a DO block in a transaction block',
	  q{BEGIN; DO $$DECLARE r record; BEGIN FOR r IN SELECT * FROM durable.inbox_claim('w17', 1, wait => '60 s') LOOP NULL; END LOOP; END$$; COMMIT;},
	  'w17', 'm17', 0 ],
	[ 'a procedure in a transaction block', 'BEGIN; CALL claim_in_procedure(); COMMIT;', 'w15', 'm18', 0 ],
	[ 'a VOLATILE function', 'SELECT claim_in_volatile();', 'w16', 'm16', 0 ])
{
	my ($what, $claim, $owner, $message, $gives_up) = @$case;
	($bg, $pid) = start_waiter($what, $claim);
	if ($gives_up)
	{
		is(backend_xmin($pid), 'none', "a claim in $what advertises no xmin while it waits");
	}
	else
	{
		isnt(backend_xmin($pid), 'none', "a claim in $what keeps its statement's snapshot");
	}
	$node->safe_psql('postgres', "SELECT * FROM durable.inbox_admit('t', '$message', 'c-$message')");
	$bg->query_safe("SELECT 'after'");
	is($node->safe_psql('postgres', "SELECT owner FROM durable.inbox WHERE message_id = '$message'"),
		$owner, "$what: and claims the message that woke it");
	$bg->quit;
}

# What such a block read before the claim is still there after it, although
# the row was deleted and vacuumed while the claim slept: a text stored
# out of line (TOAST), read into a variable.  Until 2026-12-06 the vacuum
# removed its chunks, and reading the variable failed with XX001
# (unexpected chunk number).
$node->safe_psql('postgres', q{
CREATE TABLE big (id int PRIMARY KEY, t text);
ALTER TABLE big ALTER COLUMN t SET STORAGE EXTERNAL;
INSERT INTO big SELECT 1, string_agg(md5(g::text), '') FROM generate_series(1, 4000) g;
});
my $big_md5 = $node->safe_psql('postgres', 'SELECT md5(t) FROM big');
$bg = $node->background_psql('postgres', on_error_stop => 0);
$pid = $bg->query_safe('SELECT pg_backend_pid()');
$pid =~ s/\s+//g;
$bg->query_until(qr/started/, q{\echo started
BEGIN;
DO $$DECLARE v text; r record; BEGIN
    SELECT t INTO v FROM big WHERE id = 1;
    FOR r IN SELECT * FROM durable.inbox_claim('w19', 1, wait => '60 s') LOOP NULL; END LOOP;
    PERFORM set_config('t007.big_md5', md5(v), false);
END$$;
COMMIT;
});
claim_asleep($node, $pid, 'a DO block in a transaction block that read a TOASTed value: the claim');
$node->safe_psql('postgres', 'DELETE FROM big');
$node->safe_psql('postgres', 'VACUUM big');
$node->safe_psql('postgres', "SELECT * FROM durable.inbox_admit('t', 'm19', 'c-m19')");
is($bg->query("SELECT 'read:' || coalesce(current_setting('t007.big_md5', true), 'nothing')"),
	"read:$big_md5", 'the value it read before the claim reads the same after it, vacuum or not');
$bg->quit;

# A domain's CHECK constraint runs after the claim, and may call any
# function: a cast of the claim's column to such a domain keeps the snapshot.
$node->safe_psql('postgres', q{
CREATE FUNCTION scratch_seen(text) RETURNS bool LANGUAGE sql STABLE
    AS 'SELECT $1 IS NOT NULL OR EXISTS (SELECT FROM scratch)';
CREATE DOMAIN checked_text AS text CHECK (scratch_seen(VALUE));
});
($bg, $pid) = start_waiter('domain check',
	"SELECT 'claimed:' || c.message_id::checked_text FROM durable.inbox_claim('w13', 1, wait => '60 s') c;");
isnt(backend_xmin($pid), 'none', "a cast to a domain with a CHECK constraint keeps the snapshot");
$node->safe_psql('postgres', "SELECT * FROM durable.inbox_admit('t', 'm13', 'c13')");
like($bg->query_safe("SELECT 'after'"), qr/claimed:m13/, 'and claims as before');
$bg->quit;

# ---- an admit committed by COMMIT PREPARED wakes a waiting claim too (the
# commit of a prepared transaction fires no commit callback in the backend
# that prepared it): the claim takes the record well before its 60 s pass
for my $case (
	[ 'inbox', "SELECT 'claimed:' || message_id FROM durable.inbox_claim('w7', 1, wait => '60 s');",
	  "SELECT * FROM durable.inbox_admit('t', 'm4', 'c4')", 'm4' ],
	[ 'outbox', "SELECT 'claimed:' || key FROM durable.outbox_claim('w8', 1, wait => '60 s');",
	  "SELECT * FROM durable.outbox_enqueue('k4', 'c4', '{}')", 'k4' ])
{
	my ($queue, $claim, $wake, $claimed) = @$case;
	($bg, $pid) = start_waiter("prepared $queue", $claim);
	$node->safe_psql('postgres', "BEGIN; $wake; PREPARE TRANSACTION 'wake_$queue';");
	my $started = time;
	$node->safe_psql('postgres', "COMMIT PREPARED 'wake_$queue'");
	like($bg->query_safe("SELECT 'after'"), qr/claimed:$claimed/,
		"a $queue claim takes what COMMIT PREPARED committed");
	cmp_ok(time - $started, '<', 30, "woken by the COMMIT PREPARED, not by the end of its wait");
	$bg->quit;
}

# ---- a long wait does not grow its backend: 300 records queued behind a
# chat's held one wake the claim 300 times, and it claims nothing each time
# (per-chat order); each attempt's memory is freed before it sleeps again
# (the inbox's used to keep every attempt's, about 8 kB each)
sub rss_anon_kb
{
	my ($pid) = @_;
	my ($kb) = slurp_file("/proc/$pid/status") =~ /^RssAnon:\s+(\d+) kB/m;
	return $kb;
}

# $hold: SQL returning the arguments that let the chat go again ($free,
# with %s); $claim: the waiting claim; $queue_one: SQL queueing record %d.
sub wakes_do_not_grow
{
	my ($queue, $hold, $free, $claim, $queue_one) = @_;
	my $held = $node->safe_psql('postgres', $hold);
	my ($bg, $pid) = start_waiter("$queue: blocked chat", $claim);
	my $rss_before = rss_anon_kb($pid);
	$node->safe_psql('postgres',
		join('', map { sprintf($queue_one, $_) . " SELECT pg_sleep(0.005);\n" } 1 .. 300));
	claim_asleep($node, $pid, "$queue: the blocked claim (back to sleep)");
	my $grown = rss_anon_kb($pid) - $rss_before;
	cmp_ok($grown, '<', 1024,
		"$queue: 300 wakes that claim nothing grow the waiting backend by $grown kB, not by megabytes");
	$node->safe_psql('postgres', sprintf($free, $held));
	like($bg->query_safe("SELECT 'after'"), qr/claimed:queued-1\b/,
		"$queue: and once the chat is free it claims the chat's next record");
	$bg->quit;
}

wakes_do_not_grow(
	'inbox',
	"SELECT id || ', ' || token FROM durable.inbox_admit('t', 'held', 'busy-chat', instance => 'b1', lease => '1h')",
	'SELECT durable.inbox_complete(%s)',
	"SELECT 'claimed:' || message_id FROM durable.inbox_claim('w9', 1, wait => '120 s');",
	"SELECT 1 FROM durable.inbox_admit('t', 'queued-%d', 'busy-chat');");
wakes_do_not_grow(
	'outbox',
	"SELECT quote_literal(key) || ', ' || token FROM durable.outbox_begin('held', 'busy-chat', '{}', 'b1', lease => '1h')",
	"SELECT durable.outbox_sent(%s, 'p-held')",
	"SELECT 'claimed:' || key FROM durable.outbox_claim('w9', 1, wait => '120 s');",
	"SELECT 1 FROM durable.outbox_enqueue('queued-%d', 'busy-chat', '{}');");

$node->stop;
done_testing();
