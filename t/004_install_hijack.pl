# t/004_install_hijack.pl: installing, updating and running durable cannot be
# hijacked by objects a low-privilege user planted beforehand.
#
# The attacks are those of CVE-2018-1058, CVE-2020-14350 and CVE-2022-2625
# (and pg_cron PR #192):
#
#   - trojans in a schema the superuser searches: overloads that match the
#     argument types better (integer where the catalog has bigint, text where
#     it has regclass), operators on text, integer, bigint, name, jsonb and
#     timestamptz, functions named like the catalog's (nextval, now,
#     pg_extension_config_dump, count...), every one of them writing to a
#     canary table when it runs.  The superuser then installs version 0.1,
#     updates to the current version and calls every function with that
#     search_path, while the background worker sweeps with the same setting
#     for its database: the canary stays empty.
#   - a schema "durable" created by the attacker before the installation:
#     CREATE EXTENSION fails, and adopts nothing.
#   - an object planted under the name of an extension object (in a schema
#     the attacker may write to): CREATE EXTENSION, or ALTER EXTENSION
#     UPDATE, fails instead of adopting it.
#   - a non-superuser cannot install the extension at all (trusted = false).
#
# It also checks the scripts themselves: no OR REPLACE, no IF NOT EXISTS, no
# @extschema@ inside a string literal, the \echo guard first; and the control
# file: superuser = true, trusted = false, relocatable = false.
#
# Run (after the library is installed, as a user that may run postgres):
#   prove -v t/004_install_hijack.pl
# with PATH holding pg_config --bindir and PERL5LIB the PGXS test/perl
# directory (scripts/test does this).
use strict;
use warnings;

use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = $ENV{DURABLE_ROOT} // "$FindBin::Bin/..";

# ---------------------------------------------------------------------------
# The scripts and the control file
# ---------------------------------------------------------------------------

sub slurp_file_text
{
	my ($path) = @_;
	open my $fh, '<', $path or die "cannot open $path: $!";
	local $/;
	my $text = <$fh>;
	close $fh;
	return $text;
}

# Split SQL into code (comments removed) and the string literals it holds
# ('...' with '' escapes, E'...', and $tag$...$tag$ bodies).
sub sql_code_and_strings
{
	my ($sql) = @_;
	my ($code, @strings) = ('');
	pos($sql) = 0;
	while (pos($sql) < length($sql))
	{
		if ($sql =~ /\G--[^\n]*/gc) { $code .= ' '; }
		elsif ($sql =~ m{\G/\*.*?\*/}gcs) { $code .= ' '; }
		elsif ($sql =~ /\G[Ee]?'((?:[^']|'')*)'/gc) { push @strings, $1; $code .= "''"; }
		elsif ($sql =~ /\G(\$[A-Za-z_0-9]*\$)(.*?)\1/gcs) { push @strings, $2; $code .= '$$'; }
		elsif ($sql =~ /\G(.)/gcs) { $code .= $1; }
	}
	return ($code, @strings);
}

my @scripts = sort glob("$root/durable--*.sql");
ok(scalar(@scripts) >= 1, 'found the extension scripts: ' . join(', ', map { s{.*/}{}r } @scripts));
foreach my $path (@scripts)
{
	my $name = $path =~ s{.*/}{}r;
	my $sql = slurp_file_text($path);
	my ($code, @strings) = sql_code_and_strings($sql);

	unlike($code, qr/\bOR\s+REPLACE\b/i, "$name: no CREATE OR REPLACE");
	unlike($code, qr/\bIF\s+NOT\s+EXISTS\b/i, "$name: no IF NOT EXISTS");
	unlike($code, qr/\bIF\s+EXISTS\b/i, "$name: no IF EXISTS");
	is((grep { /\@extschema\@/ } @strings), 0, "$name: no \@extschema\@ inside a string literal");
	my $command = $name =~ /--.*--/ ? 'ALTER EXTENSION' : 'CREATE EXTENSION';
	like($code, qr/\A\s*\\echo Use "\Q$command\E[^\n]*\\quit/,
		"$name: starts with the \\echo ... \\quit guard");
}

my $control = slurp_file_text("$root/durable.control");
like($control, qr/^\s*superuser\s*=\s*true\s*$/m, 'durable.control: superuser = true');
like($control, qr/^\s*trusted\s*=\s*false\s*$/m, 'durable.control: trusted = false');
like($control, qr/^\s*relocatable\s*=\s*false\s*$/m, 'durable.control: relocatable = false');
like($control, qr/^\s*schema\s*=\s*durable\s*$/m, 'durable.control: schema = durable');
my ($default_version) = $control =~ /^\s*default_version\s*=\s*'([^']+)'/m;
ok(defined $default_version, "durable.control: default_version is $default_version");

# The checker itself must catch what it looks for.
{
	my ($code, @strings) = sql_code_and_strings(
		"/* never OR REPLACE */ -- nor IF NOT EXISTS\nCREATE OR REPLACE FUNCTION f() AS \$\$ SELECT '\@extschema\@.t' \$\$;");
	like($code, qr/\bOR\s+REPLACE\b/i, 'checker: finds OR REPLACE in code');
	unlike($code, qr/IF NOT EXISTS/, 'checker: ignores comments');
	is((grep { /\@extschema\@/ } @strings), 1, 'checker: finds @extschema@ inside a dollar-quoted string');
}

# ---------------------------------------------------------------------------
# A server whose worker sweeps often, so that it runs during the attacks
# ---------------------------------------------------------------------------
my $node = PostgreSQL::Test::Cluster->new('hijack');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '100ms'\n");
$node->start;

# mallory: an ordinary login role.  The database is configured the way
# many still are (the pre-15 default): everybody may create in public, and
# the superuser's search_path puts public before pg_catalog.
$node->safe_psql('postgres', q{
	CREATE ROLE mallory LOGIN;
	GRANT CREATE ON SCHEMA public TO PUBLIC;
	ALTER DATABASE postgres SET search_path = public, pg_catalog;
});

sub as_mallory
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql, extra_params => [ '-U', 'mallory' ]);
}

# A non-superuser cannot install durable (trusted = false).
$node->safe_psql('postgres', 'GRANT CREATE ON DATABASE postgres TO mallory');
{
	my ($ret, $out, $err) = $node->psql('postgres', 'CREATE EXTENSION durable',
		extra_params => [ '-U', 'mallory' ]);
	isnt($ret, 0, 'a non-superuser cannot CREATE EXTENSION durable');
	like($err, qr/permission denied to create extension "durable"/, '... permission denied');
}
$node->safe_psql('postgres', 'REVOKE CREATE ON DATABASE postgres FROM mallory');

# The trojans.
my $trojans = q{
	CREATE TABLE public.canary (what text, by_role name DEFAULT current_user, at timestamptz DEFAULT pg_catalog.clock_timestamp());
	GRANT INSERT, SELECT ON public.canary TO PUBLIC;
	CREATE FUNCTION public.tripped(what text) RETURNS void
	LANGUAGE sql AS $$ INSERT INTO public.canary (what) VALUES (what) $$;
};
# Operators: [name, left, right, catalog function]
my @operators = (
	[ '=', 'text', 'text', 'texteq' ],
	[ '<>', 'text', 'text', 'textne' ],
	[ '=', 'name', 'name', 'nameeq' ],
	[ '=', 'integer', 'integer', 'int4eq' ],
	[ '<', 'integer', 'integer', 'int4lt' ],
	[ '>=', 'integer', 'integer', 'int4ge' ],
	[ '=', 'bigint', 'bigint', 'int8eq' ],
	[ '<>', 'bigint', 'bigint', 'int8ne' ],
	[ '=', 'bigint', 'integer', 'int84eq' ],
	[ '=', 'integer', 'bigint', 'int48eq' ],
	[ '=', 'jsonb', 'jsonb', 'jsonb_eq' ],
	[ '<>', 'jsonb', 'jsonb', 'jsonb_ne' ],
	[ '<', 'timestamptz', 'timestamptz', 'timestamptz_lt' ],
	[ '<=', 'timestamptz', 'timestamptz', 'timestamptz_le' ],
	[ '>', 'timestamptz', 'timestamptz', 'timestamptz_gt' ],
	[ '>=', 'timestamptz', 'timestamptz', 'timestamptz_ge' ],
	[ '=', 'text[]', 'text[]', 'array_eq' ],);
my $i = 0;
foreach my $op (@operators)
{
	my ($name, $left, $right, $fn) = @$op;
	$i++;
	$trojans .= "CREATE FUNCTION public.trojan_op$i($left, $right) RETURNS boolean LANGUAGE plpgsql AS "
	  . "\$\$ BEGIN PERFORM public.tripped('$left $name $right'); RETURN pg_catalog.$fn(\$1, \$2); END \$\$;\n"
	  . "CREATE OPERATOR public.$name (LEFTARG = $left, RIGHTARG = $right, FUNCTION = public.trojan_op$i);\n";
}
$trojans .= q{
	CREATE FUNCTION public.trojan_ts_pl(timestamptz, interval) RETURNS timestamptz LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('timestamptz + interval'); RETURN pg_catalog.timestamptz_pl_interval($1, $2); END $$;
	CREATE OPERATOR public.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = public.trojan_ts_pl);
	CREATE FUNCTION public.trojan_ts_mi(timestamptz, interval) RETURNS timestamptz LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('timestamptz - interval'); RETURN pg_catalog.timestamptz_mi_interval($1, $2); END $$;
	CREATE OPERATOR public.- (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = public.trojan_ts_mi);
	CREATE FUNCTION public.trojan_int4pl(integer, integer) RETURNS integer LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('integer + integer'); RETURN pg_catalog.int4pl($1, $2); END $$;
	CREATE OPERATOR public.+ (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.trojan_int4pl);
	CREATE FUNCTION public.trojan_textcat(text, text) RETURNS text LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('text || text'); RETURN pg_catalog.textcat($1, $2); END $$;
	CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = public.trojan_textcat);

	-- same-named functions, and overloads that match better than the catalog's
	CREATE FUNCTION public.nextval(regclass) RETURNS bigint LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('nextval(regclass)'); RETURN 1; END $$;
	CREATE FUNCTION public.nextval(text) RETURNS bigint LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('nextval(text)'); RETURN 1; END $$;
	CREATE FUNCTION public.setval(regclass, bigint) RETURNS bigint LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('setval(regclass, bigint)'); RETURN 1; END $$;
	CREATE FUNCTION public.setval(text, integer) RETURNS bigint LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('setval(text, integer)'); RETURN 1; END $$;
	CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('now()'); RETURN '2000-01-01'; END $$;
	CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('clock_timestamp()'); RETURN '2000-01-01'; END $$;
	CREATE FUNCTION public.pg_extension_config_dump(regclass, text) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('pg_extension_config_dump(regclass, text)'); END $$;
	CREATE FUNCTION public.pg_extension_config_dump(text, text) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('pg_extension_config_dump(text, text)'); END $$;
	CREATE FUNCTION public.current_user() RETURNS name LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('current_user()'); RETURN 'mallory'; END $$;
	CREATE FUNCTION public.gen_random_uuid() RETURNS uuid LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('gen_random_uuid()'); RETURN '00000000-0000-0000-0000-000000000000'; END $$;
	CREATE FUNCTION public.sha256(bytea) RETURNS bytea LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('sha256(bytea)'); RETURN '\x00'; END $$;
	CREATE FUNCTION public.pg_notify(text, text) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('pg_notify(text, text)'); END $$;
	CREATE FUNCTION public.jsonb_build_object(text, text) RETURNS jsonb LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('jsonb_build_object(text, text)'); RETURN '{}'; END $$;
	CREATE FUNCTION public.length(text) RETURNS integer LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('length(text)'); RETURN 0; END $$;
	CREATE FUNCTION public.octet_length(text) RETURNS integer LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('octet_length(text)'); RETURN 0; END $$;
	CREATE FUNCTION public.trojan_count_sf(bigint) RETURNS bigint LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('count(*)'); RETURN $1 + 1; END $$;
	CREATE AGGREGATE public.count(*) (SFUNC = public.trojan_count_sf, STYPE = bigint, INITCOND = '0');
	CREATE FUNCTION public.trojan_min_sf(timestamptz, timestamptz) RETURNS timestamptz LANGUAGE plpgsql STRICT AS
	$$ BEGIN PERFORM public.tripped('min(timestamptz)'); RETURN pg_catalog.timestamptz_smaller($1, $2); END $$;
	CREATE AGGREGATE public.min(timestamptz) (SFUNC = public.trojan_min_sf, STYPE = timestamptz);

	-- same-named relations and functions of the extension itself, and
	-- overloads of the API with integer where it takes bigint
	CREATE TABLE public.inbox (id bigint, token bigint, state text);
	CREATE TABLE public.outbox (key text, token bigint, state text);
	CREATE TABLE public.sessions (bot text, session_id text);
	CREATE SEQUENCE public.token_seq;
	CREATE FUNCTION public.inbox_complete(id integer, token integer) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('inbox_complete(integer, integer)'); END $$;
	CREATE FUNCTION public.inbox_heartbeat(id integer, token integer, lease interval DEFAULT NULL)
	RETURNS timestamptz LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('inbox_heartbeat(integer, integer, interval)'); RETURN NULL; END $$;
	CREATE FUNCTION public.sweep() RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('sweep()'); END $$;
	CREATE FUNCTION public.trojan_inbox_trg() RETURNS trigger LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('public.inbox written'); RETURN NEW; END $$;
	CREATE TRIGGER trojan BEFORE INSERT OR UPDATE OR DELETE ON public.inbox
	FOR EACH ROW EXECUTE FUNCTION public.trojan_inbox_trg();
	CREATE TRIGGER trojan BEFORE INSERT OR UPDATE OR DELETE ON public.outbox
	FOR EACH ROW EXECUTE FUNCTION public.trojan_inbox_trg();
};
as_mallory($trojans);
pass('mallory planted ' . (scalar(@operators) + 4) . ' operators and the lookalike functions and relations in public');

# The test's own checks run with a clean search_path (PGOPTIONS overrides the
# database's setting), so that they do not trip the trojans themselves.
sub clean_psql
{
	my ($sql) = @_;
	local $ENV{PGOPTIONS} = '-c search_path=pg_catalog,pg_temp';
	return $node->safe_psql('postgres', $sql);
}

sub clean_poll
{
	my ($sql) = @_;
	local $ENV{PGOPTIONS} = '-c search_path=pg_catalog,pg_temp';
	return $node->poll_query_until('postgres', $sql);
}

sub canary
{
	return clean_psql("SELECT coalesce(string_agg(DISTINCT what, ', ' ORDER BY what), '') FROM public.canary");
}

# The trojans are live: the superuser's own unqualified SQL runs them.
$node->safe_psql('postgres',
	"SELECT 1 = 1, 'a'::text = 'a', pg_catalog.now() < now(), nextval('x'), count(*) FROM (VALUES (1)) v(x)");
like(canary(), qr/integer = integer.*nextval\(text\).*now\(\).*text = text/,
	'the trojans run for an unqualified query of the superuser: ' . canary());
$node->safe_psql('postgres', 'TRUNCATE public.canary');

# ---------------------------------------------------------------------------
# Install 0.1, update, and use every function with search_path = public, pg_catalog
# ---------------------------------------------------------------------------
$node->safe_psql('postgres', q{
	SET search_path = public, pg_catalog;
	CREATE EXTENSION durable VERSION '0.1';
});
is(canary(), '', 'CREATE EXTENSION durable VERSION 0.1 ran no trojan');
$node->safe_psql('postgres', q{
	SET search_path = public, pg_catalog;
	ALTER EXTENSION durable UPDATE;
});
is(canary(), '', 'ALTER EXTENSION durable UPDATE ran no trojan');
is(clean_psql("SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
	$default_version, "durable updated to $default_version");

is( clean_psql(q{
	SELECT count(*) FROM pg_depend d
	  JOIN pg_extension e ON e.oid = d.refobjid AND d.refclassid = 'pg_extension'::regclass
	 WHERE e.extname = 'durable' AND d.deptype = 'e'
	   AND pg_describe_object(d.classid, d.objid, d.objsubid) ~ '^(table|sequence|function|view) public\.'}),
	'0', 'the extension adopted none of the objects in public');
is( clean_psql(q{
	SELECT count(*) FROM (
	    SELECT p.proowner AS owner FROM pg_proc p WHERE p.pronamespace = 'durable'::regnamespace
	    UNION ALL SELECT c.relowner FROM pg_class c WHERE c.relnamespace = 'durable'::regnamespace
	    UNION ALL SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'durable') o
	  JOIN pg_roles r ON r.oid = o.owner
	 WHERE NOT r.rolsuper}),
	'0', 'every object of durable is owned by a superuser');

# The worker of the database sweeps with the database's search_path setting.
ok( clean_poll(
		"SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'durable worker' AND datname = 'postgres'"),
	'the worker of database postgres runs');

# Every function, with records in every state, under the hostile search_path.
# This session's own SQL names no operator or function unqualified (\gset,
# LIMIT/OFFSET, OPERATOR(pg_catalog.+)), so only durable's code is on trial.
$node->safe_psql('postgres', q{
	SET search_path = public, pg_catalog;
	SET durable.inbox_max_attempts = 2;
	SELECT id AS m1, token AS t1 FROM durable.inbox_admit('hj', 'm1', 'c1', '{"text":"hi"}', instance => 'hj-bot') \gset
	SELECT * FROM durable.inbox_admit('hj', 'm1', 'c1', '{"text":"hi"}', instance => 'hj-bot');
	SELECT durable.inbox_heartbeat(:m1, :t1, '1h');
	SELECT durable.inbox_complete(:m1, :t1);
	SELECT durable.inbox_replay(:m1);
	SELECT * FROM durable.inbox_admit('hj', NULL, 'c2', '{"text":"no id"}');
	SELECT * FROM durable.inbox_admit('hj', NULL, 'c2', '{"text":"no id"}');
	SELECT * FROM durable.inbox_admit('hj', 'm3', 'c3', '{"n":3}', instance => 'hj-bot', lease => '20ms');
	SELECT * FROM durable.inbox_admit('hj', 'm4', 'c4', '{"n":4}', instance => 'hj-bot-old', lease => '1h');
	SELECT pg_sleep(0.1);
	SELECT * FROM durable.sweep();
	CREATE TEMP TABLE claimed AS SELECT * FROM durable.inbox_claim('hj-bot', 10, '1h');
	SELECT durable.inbox_release(c.id, c.token) FROM (SELECT * FROM claimed ORDER BY id LIMIT 1) c;
	SELECT durable.inbox_fail(c.id, c.token, 'boom', '1 hour') FROM (SELECT * FROM claimed ORDER BY id OFFSET 1 LIMIT 1) c;
	SELECT durable.inbox_complete(array_agg(c.id), array_agg(c.token)) FROM (SELECT * FROM claimed ORDER BY id OFFSET 2) c;
	SELECT * FROM durable.instance_start('hj-bot-old');
	SET durable.inbox_max_attempts = 1;
	SELECT durable.inbox_fail(c.id, c.token, 'dead now') FROM durable.inbox_claim('hj-bot', 10) c;
	RESET durable.inbox_max_attempts;

	SELECT token AS k1 FROM durable.outbox_begin('hj-k1', 'c1', '{"text":"one"}', 'hj-bot') \gset
	SELECT durable.outbox_heartbeat('hj-k1', :k1, '1h');
	SELECT durable.outbox_sent('hj-k1', :k1, 'p1');
	SELECT * FROM durable.outbox_begin('hj-k1', 'c1', '{"text":"one"}', 'hj-bot');
	SELECT * FROM durable.outbox_begin('hj-k1', 'c1', '{"text":"diverged"}', 'hj-bot');
	SELECT * FROM durable.outbox_begin('hj-k2', 'c2', '{"text":"two"}', 'hj-bot', lease => '20ms');
	SELECT * FROM durable.outbox_begin('hj-k3', 'c3', '{"text":"three"}', 'hj-bot-old');
	SELECT * FROM durable.outbox_enqueue('hj-k4', 'c4', '{"text":"four"}');
	SELECT * FROM durable.outbox_enqueue('hj-k4', 'c4', '{"text":"four"}');
	SELECT * FROM durable.outbox_enqueue('hj-k5', 'c5', '{"text":"five"}',
	                                     pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) '1 hour'::interval);
	SELECT durable.outbox_failed(c.key, c.token, 'HTTP 502', true, '1 hour') FROM durable.outbox_claim('hj-bot', 10) c;
	SELECT token AS k6 FROM durable.outbox_begin('hj-k6', 'c6', '{"text":"six"}', 'hj-bot') \gset
	SELECT durable.outbox_failed('hj-k6', :k6, 'HTTP 403', false);
	SELECT durable.outbox_retry('hj-k6');
	SELECT durable.outbox_discard('hj-k6');
	SELECT * FROM durable.instance_start('hj-bot-old');
	SELECT pg_sleep(0.1);
	SELECT * FROM durable.sweep();
	SELECT durable.purge('0', 100);
	SELECT durable.session_save('hj-bot', 0, 'secret-session', 7, 'wss://gw', 1);
	SELECT * FROM durable.session_load('hj-bot', 0, 'wss://gw', 1);
	SELECT * FROM durable.session_load('hj-bot', 0, 'wss://other', 1);
	SELECT durable.permit('hj-bucket', 1, '1 min'), durable.permit('hj-bucket', 1, '1 min');
	SELECT * FROM durable.metrics();
	SELECT * FROM durable.standing();
	SELECT * FROM durable.stat_counters;
	SELECT * FROM durable.stat_standing;
	SELECT durable.metrics_reset();
});
is( clean_psql(q{SELECT string_agg(state || ':' || n, ' ' ORDER BY state)
	  FROM (SELECT state, count(*) AS n FROM durable.inbox GROUP BY state) s}),
	'dead:2 pending:1', 'the workload left inbox records pending and dead (purge took the done one)');
is(canary(), '', 'no trojan ran in any function of durable');

# The control experiment: what protects durable is the pinned search_path
# of its functions (and its schema-qualified SQL).  Unpinned, standing()
# resolves its unqualified "=" with the caller's search_path, and trips.
# ALTER FUNCTION ... RESET search_path is refused by the DDL guard (since
# 2026-12-05: a DBA's RESET ALL did the same); the catalog is changed here.
my ($unpin_rc, $unpin_out, $unpin_err) = $node->psql('postgres',
	'ALTER FUNCTION durable.standing() RESET search_path');
like($unpin_err, qr/cannot change the search_path of function durable\.standing/,
	'the guard refuses to unpin the search_path of a function of durable\'s');
$node->safe_psql('postgres', q{
	UPDATE pg_catalog.pg_proc SET proconfig = NULL WHERE oid = 'durable.standing()'::regprocedure;
	SET search_path = public, pg_catalog;
	SELECT * FROM durable.standing();
});
like(canary(), qr/text = text/, 'control: an unpinned function does run the trojans: ' . canary());
$node->safe_psql('postgres', q{
	UPDATE pg_catalog.pg_proc SET proconfig = '{"search_path=pg_catalog, pg_temp",jit=off}'
	 WHERE oid = 'durable.standing()'::regprocedure;
	TRUNCATE public.canary;
});

# Leave work for the worker: an expired lease, an expired send, a deferred one.
$node->safe_psql('postgres', q{
	SET search_path = public, pg_catalog;
	SELECT * FROM durable.inbox_admit('hj', 'm9', 'c9', instance => 'hj-bot', lease => '20ms');
	SELECT * FROM durable.outbox_begin('hj-k9', 'c9', '{"text":"nine"}', 'hj-bot', lease => '20ms');
	SELECT * FROM durable.outbox_enqueue('hj-k10', 'c10', '{"text":"ten"}',
	                                     pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) '200 ms'::interval);
});
ok( clean_poll(q{
	SELECT (SELECT state FROM durable.inbox WHERE message_id = 'm9') = 'pending'
	   AND (SELECT state FROM durable.outbox WHERE key = 'hj-k9') = 'unknown'}),
	'the worker swept the expired lease and the expired send');
sleep(1);
is(canary(), '', 'no trojan ran in the worker\'s sweeps');
is(clean_psql('SELECT count(*) FROM public.inbox') . '/'
	  . clean_psql('SELECT count(*) FROM public.outbox'),
	'0/0', 'the lookalike tables in public were never written');

# ---------------------------------------------------------------------------
# A schema "durable" planted by the attacker
# ---------------------------------------------------------------------------
# (DROP EXTENSION leaves the schema the control file made: drop it too.)
$node->safe_psql('postgres', 'DROP EXTENSION durable');
$node->safe_psql('postgres', 'DROP SCHEMA durable');
$node->safe_psql('postgres', 'GRANT CREATE ON DATABASE postgres TO mallory');
as_mallory(q{
	CREATE SCHEMA durable;
	CREATE TABLE durable.inbox (id bigint);
	CREATE FUNCTION durable.inbox_admit(source text, message_id text, chat_id text, payload jsonb DEFAULT '{}',
	    kind text DEFAULT 'message', instance text DEFAULT NULL, lease interval DEFAULT NULL)
	RETURNS TABLE(id bigint, token bigint, duplicate boolean, state text) LANGUAGE plpgsql AS
	$$ BEGIN PERFORM public.tripped('planted durable.inbox_admit'); END $$;
});
{
	my ($ret, $out, $err) = $node->psql('postgres', 'CREATE EXTENSION durable');
	isnt($ret, 0, 'CREATE EXTENSION fails when mallory owns a schema "durable"');
	like($err, qr/schema "durable" exists and is not owned by the installing role/,
		'... saying the schema is not owned by the installing role');
}
is(clean_psql("SELECT count(*) FROM pg_extension WHERE extname = 'durable'"),
	'0', '... and nothing is installed');
is( clean_psql(
		"SELECT count(*) FROM pg_class WHERE relnamespace = 'durable'::regnamespace AND relname <> 'inbox'"),
	'0', '... not a single table or sequence of durable was created');
is( clean_psql(
		"SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'durable'"),
	'mallory', '... and mallory still owns the schema');
as_mallory('DROP SCHEMA durable CASCADE');
$node->safe_psql('postgres', 'REVOKE CREATE ON DATABASE postgres FROM mallory');

# ---------------------------------------------------------------------------
# Objects planted under the names of extension objects
# ---------------------------------------------------------------------------
# The schema belongs to the superuser, but was (wrongly) opened to mallory.
$node->safe_psql('postgres', q{
	CREATE SCHEMA durable;
	GRANT USAGE, CREATE ON SCHEMA durable TO mallory;
});
my @planted = (
	[ 'table durable.inbox', 'CREATE TABLE durable.inbox (id bigint)', 'DROP TABLE durable.inbox',
	  qr/relation "inbox" already exists/ ],
	[ 'sequence durable.token_seq', 'CREATE SEQUENCE durable.token_seq', 'DROP SEQUENCE durable.token_seq',
	  qr/relation "token_seq" already exists/ ],
	[ 'function durable.sweep()',
	  "CREATE FUNCTION durable.sweep() RETURNS TABLE(inbox_expired integer, outbox_ambiguous integer, outbox_due integer, purged bigint) LANGUAGE plpgsql AS \$\$ BEGIN PERFORM public.tripped('planted sweep'); END \$\$",
	  'DROP FUNCTION durable.sweep()', qr/function "sweep" already exists with same argument types/ ],
	[ 'function durable.inbox_complete(bigint, bigint)',
	  "CREATE FUNCTION durable.inbox_complete(id bigint, token bigint) RETURNS void LANGUAGE plpgsql AS \$\$ BEGIN PERFORM public.tripped('planted inbox_complete'); END \$\$",
	  'DROP FUNCTION durable.inbox_complete(bigint, bigint)',
	  qr/function "inbox_complete" already exists with same argument types/ ],);
foreach my $p (@planted)
{
	my ($what, $plant, $remove, $error) = @$p;
	as_mallory($plant);
	my ($ret, $out, $err) = $node->psql('postgres', 'CREATE EXTENSION durable');
	isnt($ret, 0, "CREATE EXTENSION fails when mallory planted $what");
	like($err, $error, '... with the name collision as the error');
	is(clean_psql("SELECT count(*) FROM pg_extension WHERE extname = 'durable'"),
		'0', '... and nothing is installed');
	as_mallory($remove);
}

# A function planted beside one the scripts create and call, with text where
# it has regprocedure: a call with untyped literals would prefer it (until
# 2026-12-06 the 0.7 -> 0.8 step's did, found by review).  The install goes
# through the whole chain without running it.
as_mallory(q{CREATE FUNCTION durable.replace_keeping_privileges(old_fn text, create_new text, new_name text)
	RETURNS void LANGUAGE plpgsql AS $$ BEGIN PERFORM public.tripped('planted replace_keeping_privileges'); END $$});
$node->safe_psql('postgres', 'CREATE EXTENSION durable');
is(clean_psql("SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
	$default_version, 'a function planted beside a script\'s helper: the install goes through');
is(canary(), '', '... without running it');
# (the install took the schema's rights from mallory: given back for what follows)
$node->safe_psql('postgres', q{
	DROP EXTENSION durable;
	DROP FUNCTION durable.replace_keeping_privileges(text, text, text);
	GRANT USAGE, CREATE ON SCHEMA durable TO mallory;
});

# The same for an update: a view planted under the name the update creates.
$node->safe_psql('postgres', "CREATE EXTENSION durable VERSION '0.1'");
as_mallory('CREATE VIEW durable.stat_counters AS SELECT 1 AS planted');
{
	my ($ret, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION durable UPDATE');
	isnt($ret, 0, 'ALTER EXTENSION durable UPDATE fails when mallory planted a view durable.stat_counters');
	like($err, qr/relation "stat_counters" already exists/, '... with the name collision as the error');
	is(clean_psql("SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
		'0.1', '... and durable stays at 0.1');
	is( clean_psql(q{
		SELECT count(*) FROM pg_depend
		 WHERE classid = 'pg_class'::regclass AND objid = 'durable.stat_counters'::regclass AND deptype = 'e'}),
		'0', '... without adopting the planted view');
}
as_mallory('DROP VIEW durable.stat_counters');
$node->safe_psql('postgres', 'ALTER EXTENSION durable UPDATE');
is(clean_psql("SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
	$default_version, "once it is removed, the update goes through to $default_version");

is(canary(), '', 'no trojan ran during the whole test');

$node->stop;
done_testing();
