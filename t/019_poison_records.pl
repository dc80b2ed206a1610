# t/019_poison_records.pl
# The worker's passes against records that refuse to move: triggers of the
# user's raise for expired leases (recovery) and finished records
# (retention), with SQLSTATEs that could also mean "this transaction" (out
# of memory, read-only transaction, query canceled as postgres_fdw passes on
# a remote timeout) or a failure of the moment (lock not available), and a
# deferred constraint trigger refuses one at commit.  The worker must go on
# recovering and purging everything else, stay the same process (no crash
# and restart on the same record, pass after pass), log the failures once,
# not at every pass, and not run passes back to back.
# (sweep() by hand against the same failures: sql/sweep.sql.)

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $node = PostgreSQL::Test::Cluster->new('poison');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.naptime = '200ms'
durable.retention = '1h'
log_min_messages = debug1
});
$node->start;
# exit_on_error, which a database owner may set for the database, would turn
# every failure a pass goes round into the worker's FATAL: the worker
# overrides it.
$node->safe_psql('postgres', 'ALTER DATABASE postgres SET exit_on_error = on');
$node->safe_psql('postgres', 'CREATE EXTENSION durable');

my $worker_sql = "SELECT pid FROM pg_stat_activity WHERE backend_type = 'durable worker'";
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($worker_sql) w"),
	'the worker runs');
my $pid = $node->safe_psql('postgres', $worker_sql);

# Finished records: 'kept' will refuse its delete, 'old-1' and 'old-2' can
# go.  Leases: 'stuck' will refuse to move, 'lost-1' and 'lost-2' can; and
# sends: 'stuck-send' will refuse, 'lost-send' can.  (Written before the
# triggers exist: durable's own writes refuse to run on journals with
# triggers, see "Writes that skip the executor" in the README; the sweep's
# statements fire them.)
$node->safe_psql(
	'postgres', q{
SELECT durable.inbox_complete(a.id, a.token)
  FROM unnest(ARRAY['kept', 'kept-ro', 'old-1', 'old-2']) m,
       durable.inbox_admit('tap', m, 'chat-' || m, instance => 'bot') a;
SELECT count(*) FROM unnest(ARRAY['stuck', 'stuck-deferred', 'lost-1', 'lost-2']) m,
       durable.inbox_admit('tap', m, 'chat-' || m, instance => 'bot', lease => '1h') a;
SELECT count(*) FROM unnest(ARRAY['stuck-send', 'lost-send']) k,
       durable.outbox_begin(k, 'chat-' || k, '{}', 'bot', lease => '1h') b;
});

# The triggers: 'stuck' refuses with out_of_memory, 'stuck-deferred' at
# commit (a deferred constraint trigger), 'stuck-send' with
# lock_not_available, 'kept' with query_canceled, 'kept-ro' with
# read_only_sql_transaction.
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION public.refuse_inbox_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.message_id = 'stuck' AND NEW.state <> OLD.state THEN
        RAISE EXCEPTION 'audit store is full' USING ERRCODE = 'out_of_memory';
    END IF;
    RETURN NEW;
END $$;
CREATE FUNCTION public.refuse_deferred() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.message_id = 'stuck-deferred' AND NEW.state <> OLD.state THEN
        RAISE EXCEPTION 'deferred audit refuses stuck-deferred';
    END IF;
    RETURN NULL;
END $$;
CREATE FUNCTION public.refuse_outbox_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key = 'stuck-send' AND NEW.state <> OLD.state THEN
        RAISE EXCEPTION 'audit row is locked' USING ERRCODE = 'lock_not_available';
    END IF;
    RETURN NEW;
END $$;
CREATE FUNCTION public.refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.message_id = 'kept' THEN
        RAISE EXCEPTION 'remote archive timed out' USING ERRCODE = 'query_canceled';
    END IF;
    IF OLD.message_id = 'kept-ro' THEN
        RAISE EXCEPTION 'remote archive is read-only' USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    RETURN OLD;
END $$;
CREATE TRIGGER refuse_update BEFORE UPDATE ON durable.inbox
    FOR EACH ROW EXECUTE FUNCTION public.refuse_inbox_update();
CREATE TRIGGER refuse_update BEFORE UPDATE ON durable.outbox
    FOR EACH ROW EXECUTE FUNCTION public.refuse_outbox_update();
CREATE TRIGGER refuse_delete BEFORE DELETE ON durable.inbox
    FOR EACH ROW EXECUTE FUNCTION public.refuse_delete();
CREATE CONSTRAINT TRIGGER refuse_deferred AFTER UPDATE ON durable.inbox
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION public.refuse_deferred();
});

# Now the finished records pass the retention and the leases run out.
my $log_offset = -s $node->logfile;
my $logged_from = time;
$node->safe_psql(
	'postgres', q{
UPDATE durable.inbox SET done_at = now() - interval '2 hours' WHERE state = 'done';
UPDATE durable.inbox SET lease_until = now() - interval '1 s' WHERE state = 'leased';
UPDATE durable.outbox SET lease_until = now() - interval '1 s' WHERE state = 'sending';
});

ok( $node->poll_query_until(
		'postgres', q{
SELECT (SELECT count(*) FROM durable.inbox WHERE message_id LIKE 'lost-%' AND state = 'pending') = 2
   AND (SELECT state FROM durable.outbox WHERE key = 'lost-send') = 'unknown'
   AND (SELECT count(*) FROM durable.inbox WHERE message_id LIKE 'old-%') = 0}),
	'the worker recovers and purges the other records');
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(message_id || ' ' || state, ', ' ORDER BY message_id) FROM durable.inbox
 WHERE message_id IN ('kept', 'kept-ro', 'stuck', 'stuck-deferred')}),
	'kept done, kept-ro done, stuck leased, stuck-deferred leased',
	'the records that refuse stay as they are');
is($node->safe_psql('postgres', "SELECT state FROM durable.outbox WHERE key = 'stuck-send'"),
	'sending', 'so does the send that refuses');

# Two seconds more: about ten passes at 200 ms.
sleep 2;
is($node->safe_psql('postgres', $worker_sql), $pid,
	'the worker is the same process: no crash and restart on the same records');
my $log = slurp_file($node->logfile, $log_offset);
my $logged_for = time - $logged_from;
# (Which failure a WARNING names first depends on the order of equal times.)
my $recovery_warnings = () = $log =~ /lease recovery could not recover 2 expired inbox records: /g;
my $send_warnings = () = $log =~ /lease recovery could not recover 1 expired send: audit row is locked/g;
my $purge_warnings = () = $log =~ /retention purge could not delete 2 finished records: /g;
is($recovery_warnings, 1, 'the refused recovery is logged once, not at every pass');
is($send_warnings, 1, 'so is the refused send');
is($purge_warnings, 1, 'and the refused delete');
my $passes = () = $log =~ /durable worker: swept database "postgres"/g;
# (One a naptime, 200 ms, and a few more: a busy loop would log hundreds.)
cmp_ok($passes, '<=', int($logged_for / 0.2) + 10,
	sprintf('the passes keep their pause (%d logged in %.1f s)', $passes, $logged_for));

# Once the causes are gone: the failure of the moment (the send's lock) is
# tried again at the next pass; the others are passed over for a minute,
# and instance_start recovers them at once.
$node->safe_psql('postgres',
	'DROP TRIGGER refuse_update ON durable.inbox; DROP TRIGGER refuse_deferred ON durable.inbox; '
	  . 'DROP TRIGGER refuse_update ON durable.outbox');
ok( $node->poll_query_until(
		'postgres', "SELECT state = 'unknown' FROM durable.outbox WHERE key = 'stuck-send'"),
	'a failure of the moment is tried again at the next pass');
$node->safe_psql('postgres', "SELECT * FROM durable.instance_start('bot')");
is( $node->safe_psql(
		'postgres', q{
SELECT string_agg(message_id || ' ' || state, ', ' ORDER BY message_id) FROM durable.inbox
 WHERE message_id IN ('stuck', 'stuck-deferred')}),
	'stuck pending, stuck-deferred pending',
	'the records passed over are recovered once their cause is gone');

# The worker remembers the records it passes over by id (and key).  Dropped
# and created again, durable starts a new journal whose ids begin at 1
# again: the same worker must not pass over its records for the old
# journal's failures (until 2026-12-05 it did, for a minute; found in
# review).
$node->safe_psql('postgres', 'BEGIN; DROP EXTENSION durable CASCADE; CREATE EXTENSION durable; COMMIT;');
$node->safe_psql('postgres', q{
SELECT count(*) FROM generate_series(1, 20) g,
       durable.inbox_admit('tap', 'again-' || g, 'chat-again-' || g, instance => 'bot', lease => '100 ms') a});
my $recovered_at;
for my $try (1 .. 50)
{
	if ($node->safe_psql('postgres', q{SELECT count(*) FROM durable.inbox WHERE state = 'leased'}) eq '0')
	{
		$recovered_at = $try;
		last;
	}
	usleep(200_000);
}
ok(defined $recovered_at, 'after the extension was created again, every expired lease of the new journal is recovered within 10 s');
is($node->safe_psql('postgres', $worker_sql), $pid, '... by the same worker, which remembered the old journal\'s ids');

$node->stop;
done_testing();
