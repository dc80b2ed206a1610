# t/006_upgrade.pl: every ALTER EXTENSION durable UPDATE step, from every
# released version, keeps the data and ends in the schema a fresh install
# makes.
#
# For each version the server offers (pg_available_extension_versions) other
# than the default one, a database gets CREATE EXTENSION durable VERSION v,
# then walks the path pg_extension_update_paths gives to the default
# version, one ALTER EXTENSION ... UPDATE TO per step, checking extversion
# after each.  The first released version's database is loaded first with
# records in every state through the API; after the walk:
#
#   - every table's rows are unchanged (count and md5 over the rows), and so
#     are the sequences; 0.3's inbox.finished_at is filled from the state;
#   - the journals still work across the upgrade: the leased record
#     completes under its token (and a stale token is refused), a sent key is
#     answered from the journal, a message seen before is a duplicate;
#   - the extension's members, functions (signature, result, security,
#     search_path, volatility, strictness, C symbol, owner, parallel safety,
#     cost, rows, leakproof), relations (owner, replica identity, row
#     security), columns (collation, storage, compression, statistics
#     target), defaults, indexes, constraints, views, sequences' parameters,
#     triggers, policies, comments, ACLs, the schema's ACL and owner, and the
#     dumped configuration tables with their conditions equal those of a fresh
#     CREATE EXTENSION durable in another database; pg_dump --schema-only of
#     the two databases is identical;
#   - the monitoring views of 0.2 answer for a member of pg_monitor.
#
# The upgrade scripts themselves are checked as durable--0.1.sql is: the
# \echo guard first, no CREATE OR REPLACE, no IF NOT EXISTS.
#
# Run (after the extension is installed, as a user that may run postgres):
#   prove -v t/006_upgrade.pl
# with PATH holding pg_config --bindir and PERL5LIB the PGXS test/perl
# directory (scripts/test does this).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
# The worker sleeps: the records stay exactly as the test leaves them.
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'durable'\ndurable.naptime = '1h'\n");
$node->start;

my $default = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'durable'");
my @versions = split /\n/, $node->safe_psql('postgres', q{
	SELECT version FROM pg_available_extension_versions
	 WHERE name = 'durable' ORDER BY string_to_array(version, '.')::int[]});
ok(scalar(@versions) >= 2, "versions offered: @versions (default $default)");
my $first = $versions[0];

# ---- the upgrade scripts are written like the base script
my $extdir = `pg_config --sharedir`;
chomp $extdir;
$extdir .= '/extension';
for my $script (sort glob("$extdir/durable--*--*.sql"))
{
	my $text = slurp_file($script);
	my $name = $script =~ s{.*/}{}r;
	(my $body = $text) =~ s{/\*.*?\*/}{}gs;
	$body =~ s{--[^\n]*}{}g;
	like($text, qr/\A(?:\/\*.*?\*\/\s*)?\\echo Use "ALTER EXTENSION durable UPDATE TO '[0-9.]+'" to load this file\. \\quit/s,
		"$name starts with the \\echo guard");
	unlike($body, qr/\bOR\s+REPLACE\b/i, "$name uses no CREATE OR REPLACE");
	unlike($body, qr/\bIF\s+NOT\s+EXISTS\b/i, "$name uses no IF NOT EXISTS");
	unlike($body, qr/'[^']*\@extschema\@[^']*'/, "$name puts no \@extschema\@ in a string literal");
}

# ---- the catalog of an installed durable, as text to compare
my $catalog_sql = q{
	WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'durable')
	SELECT 'member ' || pg_describe_object(d.classid, d.objid, d.objsubid)
	  FROM pg_depend d, ext
	 WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
	UNION ALL
	SELECT concat_ws(' | ', 'function ' || p.oid::regprocedure, pg_get_function_arguments(p.oid),
	                 pg_get_function_result(p.oid), p.prosecdef, p.proconfig::text, p.provolatile,
	                 p.proisstrict, p.proretset, l.lanname, p.prosrc, p.probin, p.proacl::text,
	                 obj_description(p.oid, 'pg_proc'), p.proowner::regrole, p.proparallel,
	                 p.procost, p.prorows, p.proleakproof, p.prosupport)
	  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
	 WHERE p.pronamespace = 'durable'::regnamespace
	UNION ALL
	SELECT concat_ws(' | ', 'relation ' || c.relname, c.relkind, c.relpersistence, c.reloptions::text,
	                 c.relacl::text, obj_description(c.oid, 'pg_class'),
	                 CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) END,
	                 c.relowner::regrole, c.relreplident, c.relrowsecurity, c.relforcerowsecurity)
	  FROM pg_class c WHERE c.relnamespace = 'durable'::regnamespace
	UNION ALL
	SELECT concat_ws(' | ', 'column ' || c.relname || '.' || a.attname, a.attnum,
	                 format_type(a.atttypid, a.atttypmod), a.attnotnull,
	                 pg_get_expr(ad.adbin, ad.adrelid), a.attacl::text,
	                 col_description(c.oid, a.attnum), a.attcollation::regcollation, a.attstorage,
	                 a.attcompression, a.attstattarget, a.attidentity, a.attgenerated)
	  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
	  LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
	 WHERE c.relnamespace = 'durable'::regnamespace AND c.relkind IN ('r', 'v')
	UNION ALL
	SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'durable'
	UNION ALL
	SELECT concat_ws(' | ', 'constraint ' || conrelid::regclass || '.' || conname, pg_get_constraintdef(oid))
	  FROM pg_constraint WHERE connamespace = 'durable'::regnamespace
	UNION ALL
	SELECT concat_ws(' | ', 'schema ' || nspname, nspacl::text, obj_description(oid, 'pg_namespace'),
	                 nspowner::regrole)
	  FROM pg_namespace WHERE nspname = 'durable'
	UNION ALL
	SELECT concat_ws(' | ', 'extension ' || extname, extversion, extrelocatable,
	                 (SELECT string_agg(x::regclass::text || '=' || coalesce(extcondition[i], ''), ','
	                                    ORDER BY x::regclass::text)
	                    FROM unnest(extconfig) WITH ORDINALITY u(x, i)),
	                 extowner::regrole)
	  FROM pg_extension WHERE extname = 'durable'
	UNION ALL
	SELECT concat_ws(' | ', 'sequence ' || sequencename, sequenceowner, data_type, start_value,
	                 min_value, max_value, increment_by, cycle, cache_size)
	  FROM pg_sequences WHERE schemaname = 'durable'
	UNION ALL
	SELECT concat_ws(' | ', 'trigger ' || t.tgrelid::regclass || '.' || t.tgname, pg_get_triggerdef(t.oid),
	                 t.tgenabled)
	  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
	 WHERE c.relnamespace = 'durable'::regnamespace AND NOT t.tgisinternal
	UNION ALL
	SELECT concat_ws(' | ', 'policy ' || polrelid::regclass || '.' || polname, polcmd, polpermissive)
	  FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
	 WHERE c.relnamespace = 'durable'::regnamespace
	UNION ALL
	SELECT concat_ws(' | ', 'init_privs ' || pg_describe_object(classoid, objoid, objsubid), privtype,
	                 initprivs::text)
	  FROM pg_init_privs
	 WHERE pg_describe_object(classoid, objoid, objsubid) ~ '(^| )durable\.|schema durable'
	ORDER BY 1};

# ---- records in every state, as the 0.1 API writes them
# (written directly: the installed library is the newest version's, and its
# functions refuse to run on an older schema until the update; see below)
my $setup = q{
	INSERT INTO durable.inbox (source, message_id, content_hash, chat_id, kind, payload, state, attempts,
	                           token, owner, lease_until, not_before, error, created_at, done_at)
	VALUES ('tg', 'done-1', NULL, 'chat-1', 'message', '{"text":"done"}', 'done', 1,
	        nextval('durable.token_seq'), 'bot-1', NULL, now(), NULL, now(), now()),
	       ('tg', 'pending-1', NULL, 'chat-2', 'message', '{"text":"pending"}', 'pending', 0,
	        NULL, NULL, NULL, now(), NULL, now(), NULL),
	       ('tg', NULL, sha256('no id'), 'chat-3', 'message', '{"text":"no id"}', 'pending', 0,
	        NULL, NULL, NULL, now(), NULL, now(), NULL),
	       ('tg', 'leased-1', NULL, 'chat-4', 'message', '{"text":"leased"}', 'leased', 1,
	        nextval('durable.token_seq'), 'bot-1', now() + interval '1 hour', now(), NULL, now(), NULL),
	       ('tg', 'failed-1', NULL, 'chat-5', 'message', '{"text":"failed"}', 'pending', 1,
	        nextval('durable.token_seq'), 'bot-1', NULL, now() + interval '1 hour', 'handler crashed', now(), NULL),
	       ('tg', 'dead-1', NULL, 'chat-6', 'message', '{"text":"dead"}', 'dead', 1,
	        nextval('durable.token_seq'), 'bot-1', NULL, now(), 'poison message', now(), NULL);
	INSERT INTO durable.outbox (key, chat_id, payload, state, attempts, token, owner, lease_until,
	                            not_before, provider_message_id, error, created_at, sent_at)
	VALUES ('k-pending', 'chat-1', '{"text":"pending"}', 'pending', 0, NULL, NULL, NULL,
	        now(), NULL, NULL, now(), NULL),
	       ('k-sending', 'chat-3', '{"text":"sending"}', 'sending', 1, nextval('durable.token_seq'), 'bot-1',
	        now() + interval '1 hour', now(), NULL, NULL, now(), NULL),
	       ('k-sent', 'chat-4', '{"text":"sent"}', 'sent', 1, nextval('durable.token_seq'), 'bot-1', NULL,
	        now(), 'provider-42', NULL, now(), now()),
	       ('k-dead', 'chat-6', '{"text":"dead"}', 'dead', 1, nextval('durable.token_seq'), 'bot-1', NULL,
	        now(), NULL, 'HTTP 403', now(), NULL),
	       ('k-unknown', 'chat-7', '{"text":"unknown"}', 'unknown', 1, nextval('durable.token_seq'), 'bot-old', NULL,
	        now(), NULL, NULL, now(), NULL);
	INSERT INTO durable.sessions (bot, shard, session_id, sequence, resume_url, total_shards, saved_at)
	VALUES ('bot-1', 0, 'session-secret', 1234, 'wss://gateway', 1, now());
	INSERT INTO durable.permit_buckets (bucket, per, last_granted_at) VALUES ('identify:1.2.3.4', '1 hour', now());
	INSERT INTO durable.permits (bucket, granted_at) VALUES ('identify:1.2.3.4', now());
};

# count and md5 of every table of the extension, and the sequences' positions
# (the inbox's without finished_at, the column 0.3 adds and fills, and the
# sessions' without owned_by, which 0.10 adds, '' for the rows it finds)
my $data_sql = q{
	SELECT string_agg(line, E'\n' ORDER BY line) FROM (
	  SELECT 'durable.inbox ' || count(*) || ' ' || md5(coalesce(string_agg((to_jsonb(t) - 'finished_at')::text, ',' ORDER BY t.id), '')) FROM durable.inbox t
	  UNION ALL
	  SELECT 'durable.outbox ' || count(*) || ' ' || md5(coalesce(string_agg(t::text, ',' ORDER BY t.key), '')) FROM durable.outbox t
	  UNION ALL
	  SELECT 'durable.sessions ' || count(*) || ' ' || md5(coalesce(string_agg((to_jsonb(t) - 'owned_by')::text, ',' ORDER BY t.bot, t.shard), '')) FROM durable.sessions t
	  UNION ALL
	  SELECT 'durable.permits ' || count(*) || ' ' || md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM durable.permits t
	  UNION ALL
	  SELECT 'durable.permit_buckets ' || count(*) || ' ' || md5(coalesce(string_agg(t::text, ',' ORDER BY t.bucket), '')) FROM durable.permit_buckets t
	  UNION ALL
	  SELECT 'sequence ' || sequencename || ' ' || coalesce(last_value::text, 'unused')
	    FROM pg_sequences WHERE schemaname = 'durable'
	) s(line)};

$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION durable');
is($node->safe_psql('fresh', "SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
	$default, "a fresh CREATE EXTENSION durable installs the default version $default");
my $fresh_catalog = $node->safe_psql('fresh', $catalog_sql);
my $fresh_dump = schema_dump('fresh');

sub schema_dump
{
	my ($db) = @_;
	my ($stdout, $stderr);
	IPC::Run::run([ 'pg_dump', '--schema-only', '--no-owner', '-d', $node->connstr($db) ],
		'>', \$stdout, '2>', \$stderr)
	  or die "pg_dump $db failed: $stderr";
	# newer minor releases fence the dump with a random \restrict key
	$stdout =~ s/^\\(?:un)?restrict .*$//mg;
	return $stdout;
}

for my $from (@versions)
{
	next if $from eq $default;
	my $db = "from_" . ($from =~ s/\./_/gr);
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION durable VERSION '$from'");
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
		$from, "$db: CREATE EXTENSION durable VERSION '$from'");

	my $loaded = ($from eq $first);
	my ($leased_id, $leased_token, $before);
	if ($loaded)
	{
		$node->safe_psql($db, $setup);
		# the newest library refuses the older schema, with what to do
		my ($rc, $stdout, $stderr) = $node->psql($db,
			"SELECT * FROM durable.inbox_admit('tg', 'too-early', 'chat-9', '{}')",
			extra_params => [ '-v', 'VERBOSITY=verbose' ]);
		like($stderr, qr/55000.*durable's library is version \Q$default\E but this database has durable \Q$from\E.*HINT:\s+Run ALTER EXTENSION durable UPDATE/s,
			"$db: before the update the API refuses the older schema (55000, with the hint)");
		($leased_id, $leased_token) = split /\|/,
		  $node->safe_psql($db, "SELECT id, token FROM durable.inbox WHERE message_id = 'leased-1'");
		$before = $node->safe_psql($db, $data_sql);
		is($node->safe_psql($db, q{SELECT string_agg(state || ':' || n, ' ' ORDER BY state) FROM
			(SELECT state, count(*) n FROM durable.inbox GROUP BY state UNION ALL
			 SELECT 'out-' || state, count(*) FROM durable.outbox GROUP BY state) s}),
			'dead:1 done:1 leased:1 out-dead:1 out-pending:1 out-sending:1 out-sent:1 out-unknown:1 pending:3',
			"$db: records in every state before the update");
	}

	# the path the server would take, one step at a time
	my $path = $node->safe_psql($db,
		"SELECT path FROM pg_extension_update_paths('durable') WHERE source = '$from' AND target = '$default'");
	ok($path ne '', "$db: an update path from $from to $default exists ($path)");
	my @steps = split /--/, $path;
	shift @steps;
	for my $to (@steps)
	{
		$node->safe_psql($db, "ALTER EXTENSION durable UPDATE TO '$to'");
		is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
			$to, "$db: ALTER EXTENSION durable UPDATE TO '$to'");
	}

	my $catalog = $node->safe_psql($db, $catalog_sql);
	is($catalog, $fresh_catalog, "$db: the updated catalog equals a fresh install's")
	  or diag(diff_lines($fresh_catalog, $catalog));
	is(schema_dump($db), $fresh_dump, "$db: pg_dump --schema-only equals a fresh install's");

	next unless $loaded;

	is($node->safe_psql($db, $data_sql), $before, "$db: every row and sequence is unchanged by the update");
	is($node->safe_psql($db, q{SELECT count(*) FROM durable.inbox
		 WHERE (finished_at IS NULL) <> (state IN ('pending', 'leased'))
		    OR (state = 'done' AND finished_at IS DISTINCT FROM done_at)}),
		'0', "$db: finished_at is filled for the done and dead records, and only for them");

	# the journals still work across the upgrade
	my ($ret, $out, $err) = $node->psql($db,
		"\\set VERBOSITY verbose\nSELECT durable.inbox_complete($leased_id, $leased_token - 1)");
	isnt($ret, 0, "$db: a stale token's completion fails after the update");
	like($err, qr/ERROR:\s+DR001:/, "$db: with DR001, the stale token's code") or diag($err);
	$node->safe_psql($db, "SELECT durable.inbox_complete($leased_id, $leased_token)");
	is($node->safe_psql($db, "SELECT state FROM durable.inbox WHERE id = $leased_id"),
		'done', "$db: the record leased before the update completes under its token");
	is($node->safe_psql($db,
		"SELECT action || ' ' || provider_message_id FROM durable.outbox_begin('k-sent', 'chat-4', '{\"text\":\"sent\"}', 'bot-2')"),
		'sent provider-42', "$db: a key sent before the update is answered from the journal");
	is($node->safe_psql($db, "SELECT duplicate FROM durable.inbox_admit('tg', 'done-1', 'chat-1', '{\"text\":\"done\"}')"),
		't', "$db: a message admitted before the update is a duplicate");

	# a session saved before 0.10 belongs to no role: a gateway role loads
	# it, and its save replaces it with a row of its own
	is($node->safe_psql($db, "SELECT count(*) FROM durable.sessions WHERE owned_by = ''"),
		'1', "$db: the session saved before the update belongs to no role");
	$node->safe_psql($db, q{
		CREATE ROLE upgrade_gateway LOGIN;
		GRANT USAGE ON SCHEMA durable TO upgrade_gateway;
		GRANT EXECUTE ON FUNCTION durable.session_save(text, integer, text, bigint, text, integer),
		                          durable.session_load(text, integer, text, integer, interval)
		   TO upgrade_gateway;
		UPDATE durable.sessions SET saved_at = now() WHERE bot = 'bot-1'});
	is($node->safe_psql($db,
			"SELECT session_id FROM durable.session_load('bot-1', 0, 'wss://gateway', 1)",
			extra_params => [ '-U', 'upgrade_gateway' ]),
		'session-secret', "$db: a gateway role loads the session saved before the update");
	$node->safe_psql($db, "SELECT durable.session_save('bot-1', 0, 'session-next', 1235, 'wss://gateway', 1)",
		extra_params => [ '-U', 'upgrade_gateway' ]);
	is($node->safe_psql($db, "SELECT owned_by || ' ' || session_id FROM durable.sessions WHERE bot = 'bot-1'"),
		'upgrade_gateway session-next', "$db: its first save after the update replaces it with the role's own");
	$node->safe_psql($db, q{
		DELETE FROM durable.sessions WHERE bot = 'bot-1';
		DROP OWNED BY upgrade_gateway;
		DROP ROLE upgrade_gateway});

	# the monitoring views of 0.2, for a member of pg_monitor
	$node->safe_psql($db, 'CREATE ROLE upgrade_monitor LOGIN IN ROLE pg_monitor');
	is($node->safe_psql($db, q{SELECT inbox_dead || ' ' || outbox_dead || ' ' || outbox_unknown FROM durable.stat_standing},
			extra_params => [ '-U', 'upgrade_monitor' ]),
		'1 1 1', "$db: pg_monitor reads durable.stat_standing after the update");
	is($node->safe_psql($db, q{SELECT stale_leases >= 1 FROM durable.stat_counters},
			extra_params => [ '-U', 'upgrade_monitor' ]),
		't', "$db: pg_monitor reads durable.stat_counters after the update");
	($ret, $out, $err) = $node->psql($db, 'SELECT durable.metrics_reset()',
		extra_params => [ '-U', 'upgrade_monitor' ]);
	like($err, qr/permission denied/, "$db: pg_monitor still cannot reset the counters");
	$node->safe_psql($db, 'DROP ROLE upgrade_monitor');
}

# ---- an update run by another superuser than the extension's creator, whose
# default privileges grant to PUBLIC and to a role (one grant with its grant
# option, passed on).  The 0.1 -> 0.2 step creates its two views owned by the
# updating role, with that role's default privileges; 0.8 -> 0.9 gives them
# to durable's owner, revokes what default privileges granted (named in a
# WARNING) and keeps what was granted by hand, outside the initial
# privileges, so that pg_dump still writes it.
$node->safe_psql('postgres', q{
	CREATE ROLE upgrade_admin2 LOGIN SUPERUSER;
	CREATE ROLE upgrade_analytics;
	CREATE ROLE upgrade_passed;
	CREATE ROLE upgrade_reader;
	CREATE DATABASE other_updater;
});
$node->safe_psql('other_updater', "CREATE EXTENSION durable VERSION '$first'");
$node->safe_psql('other_updater', q{
	ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC, upgrade_analytics;
	ALTER DEFAULT PRIVILEGES GRANT INSERT ON TABLES TO upgrade_analytics WITH GRANT OPTION;
	ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO pg_monitor WITH GRANT OPTION;
	ALTER EXTENSION durable UPDATE TO '0.8';
	GRANT SELECT ON durable.stat_counters TO upgrade_reader;
	GRANT SELECT (inbox_pending) ON durable.stat_standing TO upgrade_reader;
	GRANT USAGE ON SCHEMA durable TO upgrade_analytics;
	SET ROLE upgrade_analytics;
	GRANT INSERT ON durable.stat_standing TO upgrade_passed;
}, extra_params => [ '-U', 'upgrade_admin2' ]);
is($node->safe_psql('other_updater', q{SELECT relowner::regrole FROM pg_class WHERE oid = 'durable.stat_counters'::regclass}),
	'upgrade_admin2', 'other_updater: at 0.8 the views belong to the role that ran the 0.2 step');
my ($other_rc, $other_out, $other_err) = $node->psql('other_updater',
	'ALTER EXTENSION durable UPDATE', extra_params => [ '-U', 'upgrade_admin2' ]);
is($other_rc, 0, 'other_updater: the update to 0.9 runs') or diag($other_err);
like($other_err,
	qr/WARNING:  durable: revoked what default privileges granted on its monitoring views: PUBLIC \(SELECT\) on durable\.stat_counters, pg_monitor \(grant option for SELECT\) on durable\.stat_counters, upgrade_analytics \(INSERT, SELECT\) on durable\.stat_counters, PUBLIC \(SELECT\) on durable\.stat_standing, pg_monitor \(grant option for SELECT\) on durable\.stat_standing, upgrade_analytics \(INSERT, SELECT\) on durable\.stat_standing\n.*owned by upgrade_admin2/s,
	'other_updater: the WARNING names each revoked grant and the former owner') or diag($other_err);
is($node->safe_psql('other_updater', q{
	SELECT string_agg(c.relname || ' ' || c.relowner::regrole || ' ' || c.relacl::text, '; ' ORDER BY c.relname)
	  FROM pg_class c WHERE c.relnamespace = 'durable'::regnamespace AND c.relkind = 'v'}),
	'stat_counters postgres {postgres=arwdDxt/postgres,upgrade_reader=r/postgres,pg_monitor=r/postgres}; '
	  . 'stat_standing postgres {postgres=arwdDxt/postgres,pg_monitor=r/postgres}',
	"other_updater: the views belong to durable's owner; the grant made by hand stays, the passed-on one went with its grant option, pg_monitor keeps SELECT without one");
like(schema_dump('other_updater'), qr/^GRANT SELECT ON TABLE durable\.stat_counters TO upgrade_reader;$/m,
	'other_updater: pg_dump writes the grant made by hand (not taken for an initial privilege)');
$node->safe_psql('other_updater', q{
	REVOKE SELECT ON durable.stat_counters FROM upgrade_reader;
	REVOKE SELECT (inbox_pending) ON durable.stat_standing FROM upgrade_reader;
	REVOKE USAGE ON SCHEMA durable FROM upgrade_analytics;
});
is(diff_lines($fresh_catalog, $node->safe_psql('other_updater', $catalog_sql)), '',
	"other_updater: an update by another superuser ends in a fresh install's catalog");
is($node->safe_psql('other_updater', q{
	SELECT count(*) FROM pg_class c, aclexplode(c.relacl) a
	 WHERE c.relnamespace = 'durable'::regnamespace AND a.grantee = 0}),
	'0', 'other_updater: nothing in schema durable is granted to PUBLIC');
($other_rc, $other_out, $other_err) = $node->psql('other_updater', 'DROP OWNED BY upgrade_admin2');
is($other_err, '', 'other_updater: DROP OWNED BY the superuser who ran the updates finds nothing of durable to drop');
($other_rc, $other_out, $other_err) = $node->psql('postgres', 'DROP ROLE upgrade_admin2');
is($other_err, '', 'other_updater: that superuser can be dropped');

# a database at 0.8 is refused by this library before its update (0.10
# added sessions.owned_by; 0.9's library served 0.8, whose tables were its
# own), and an update by the creator says nothing: nothing to repair
$node->safe_psql('postgres', 'CREATE DATABASE still_0_8');
$node->safe_psql('still_0_8', "CREATE EXTENSION durable VERSION '0.8'");
($other_rc, $other_out, $other_err) = $node->psql('still_0_8',
	q{SELECT state FROM durable.inbox_admit('tg', 'm-1', 'chat-1', '{}')});
like($other_err, qr/durable's library is version \Q$default\E but this database has durable 0\.8/,
	'still_0_8: the API refuses a database at 0.8 before its update');
($other_rc, $other_out, $other_err) = $node->psql('still_0_8', 'ALTER EXTENSION durable UPDATE');
is($other_err, '', 'still_0_8: the update by the creator says nothing (nothing to repair)');
is($node->safe_psql('still_0_8', q{SELECT state FROM durable.inbox_admit('tg', 'm-1', 'chat-1', '{}')}),
	'pending', 'still_0_8: after the update the API serves it');

# a database at 0.11 is served before its update: 0.12 only gave
# sessions.owned_by a default, which no statement of the library relies on
$node->safe_psql('postgres', 'CREATE DATABASE still_0_11');
$node->safe_psql('still_0_11', "CREATE EXTENSION durable VERSION '0.11'");
is( $node->safe_psql('still_0_11', q{
		SELECT state FROM durable.inbox_admit('tg', 'm-1', 'chat-1', '{}');
		SELECT durable.session_save('bot', 0, 'sid', 1, 'wss://gw', 1);
		SELECT session_id FROM durable.session_load('bot', 0, 'wss://gw', 1);
		SELECT outbox_due FROM durable.sweep()}),
	"pending\n\nsid\n0", 'still_0_11: the API serves a database at 0.11 before its update');

# The views given back before 0.9 (REASSIGN OWNED, or the hand repair that
# the README of 0.8 described) still carry the default grants and, in their
# initial privileges, the role that ran the 0.2 step: after DROP ROLE of it
# pg_dump would write a REVOKE naming its number, which a restore refuses.
# A database created at the first version, then updated to $to by $role,
# whose default privileges grant SELECT on tables to PUBLIC and
# upgrade_analytics.
sub updated_with_defaults
{
	my ($db, $role, $to) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION durable VERSION '$first'");
	$node->safe_psql($db, qq{
		ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC, upgrade_analytics;
		ALTER EXTENSION durable UPDATE TO '$to';
	}, extra_params => [ '-U', $role ]);
	return;
}

$node->safe_psql('postgres', 'CREATE ROLE upgrade_admin3 LOGIN SUPERUSER');
updated_with_defaults('reassigned', 'upgrade_admin3', '0.8');
$node->safe_psql('reassigned', 'REASSIGN OWNED BY upgrade_admin3 TO postgres');
($other_rc, $other_out, $other_err) = $node->psql('reassigned', 'ALTER EXTENSION durable UPDATE');
like($other_err,
	qr/WARNING:  durable: revoked what default privileges granted on its monitoring views: PUBLIC \(SELECT\) on durable\.stat_counters, upgrade_analytics \(SELECT\) on durable\.stat_counters, PUBLIC \(SELECT\) on durable\.stat_standing, upgrade_analytics \(SELECT\) on durable\.stat_standing\n/,
	'reassigned: views given back before 0.9 lose their default grants too') or diag($other_err);
$node->safe_psql('reassigned', 'DROP OWNED BY upgrade_admin3');
$node->safe_psql('postgres', 'DROP ROLE upgrade_admin3');
is(diff_lines($fresh_catalog, $node->safe_psql('reassigned', $catalog_sql)), '',
	"reassigned: a fresh install's catalog, initial privileges included (nothing names the dropped role)");

# A grant made by hand between the 0.2 and 0.5 steps is recorded as initial
# by 0.5's GRANT to pg_monitor; no default privilege names its role: it
# stays, and pg_dump writes it.
$node->safe_psql('postgres', q{
	CREATE ROLE upgrade_admin5 LOGIN SUPERUSER;
	CREATE DATABASE hand_grant_0_2;
});
$node->safe_psql('hand_grant_0_2', "CREATE EXTENSION durable VERSION '$first'");
$node->safe_psql('hand_grant_0_2', q{
	ALTER EXTENSION durable UPDATE TO '0.2';
	GRANT SELECT ON durable.stat_counters TO upgrade_reader;
	ALTER EXTENSION durable UPDATE TO '0.8';
}, extra_params => [ '-U', 'upgrade_admin5' ]);
like($node->safe_psql('hand_grant_0_2', q{SELECT initprivs::text FROM pg_init_privs
	WHERE objoid = 'durable.stat_counters'::regclass AND objsubid = 0}),
	qr/upgrade_reader=r\/upgrade_admin5/, 'hand_grant_0_2: at 0.8 the hand grant is among the initial privileges');
($other_rc, $other_out, $other_err) = $node->psql('hand_grant_0_2', 'ALTER EXTENSION durable UPDATE');
like($other_err, qr/\A[^\n]*WARNING:  durable: its monitoring views now belong to postgres, as in a fresh install: durable\.stat_counters \(owned by upgrade_admin5\), durable\.stat_standing \(owned by upgrade_admin5\)\nDETAIL:  [^\n]*\z/,
	'hand_grant_0_2: the update says that it gave the views back, and revokes nothing') or diag($other_err);
is($node->safe_psql('hand_grant_0_2', q{SELECT relacl::text FROM pg_class WHERE oid = 'durable.stat_counters'::regclass}),
	'{postgres=arwdDxt/postgres,pg_monitor=r/postgres,upgrade_reader=r/postgres}',
	'hand_grant_0_2: the hand grant stays');
like(schema_dump('hand_grant_0_2'), qr/^GRANT SELECT ON TABLE durable\.stat_counters TO upgrade_reader;$/m,
	'hand_grant_0_2: pg_dump writes it');
$node->safe_psql('hand_grant_0_2', 'REVOKE SELECT ON durable.stat_counters FROM upgrade_reader');
is(diff_lines($fresh_catalog, $node->safe_psql('hand_grant_0_2', $catalog_sql)), '',
	"hand_grant_0_2: without it, a fresh install's catalog");
$node->safe_psql('postgres', 'DROP ROLE upgrade_admin5');

# Grants made by hand on the schema, metrics() and standing() before the
# steps that grant them to pg_monitor (0.1 -> 0.2, 0.4 -> 0.5), and on a
# schema durable before an install (every reinstall: the schema outlives
# DROP EXTENSION), were recorded as initial privileges and left out of
# dumps; 0.13 makes those initial privileges a fresh install's, so pg_dump
# writes the grants (t/005_dump_restore.pl restores them).
$node->safe_psql('postgres', q{
	CREATE ROLE upgrade_early_reader;
	CREATE DATABASE granted_early;
	CREATE DATABASE reinstalled;
});
$node->safe_psql('granted_early', "CREATE EXTENSION durable VERSION '$first'");
$node->safe_psql('granted_early', q{
	GRANT USAGE ON SCHEMA durable TO upgrade_early_reader;
	GRANT EXECUTE ON FUNCTION durable.metrics(), durable.standing() TO upgrade_early_reader;
	ALTER EXTENSION durable UPDATE TO '0.12';
});
$node->safe_psql('reinstalled', q{
	CREATE EXTENSION durable VERSION '0.12';
	GRANT USAGE ON SCHEMA durable TO upgrade_early_reader;
	DROP EXTENSION durable;
	CREATE EXTENSION durable VERSION '0.12';
});
my $early_initprivs_sql = q{
	SELECT string_agg(object, ', ' ORDER BY object)
	  FROM (SELECT pg_describe_object(classoid, objoid, objsubid) AS object FROM pg_init_privs
	         WHERE initprivs::text LIKE '%upgrade_early_reader=%') o};
is($node->safe_psql('granted_early', $early_initprivs_sql),
	'function durable.metrics(), function durable.standing(), schema durable',
	'granted_early: at 0.12 the grants are among the initial privileges');
is($node->safe_psql('reinstalled', $early_initprivs_sql), 'schema durable',
	'reinstalled: at 0.12 the grant on the schema is among its initial privileges');
for my $db ('granted_early', 'reinstalled')
{
	($other_rc, $other_out, $other_err) = $node->psql($db, 'ALTER EXTENSION durable UPDATE');
	is($other_err, '', "$db: the update says nothing");
	is($node->safe_psql($db, $early_initprivs_sql), '', "$db: the initial privileges name the reader no more");
	my $dump = schema_dump($db);
	like($dump, qr/^GRANT USAGE ON SCHEMA durable TO upgrade_early_reader;$/m, "$db: pg_dump writes the grant on the schema");
	next unless $db eq 'granted_early';
	like($dump, qr/^GRANT ALL ON FUNCTION durable\.metrics\(.*\) TO upgrade_early_reader;$/m,
		"$db: pg_dump writes the grant on metrics()");
	like($dump, qr/^GRANT ALL ON FUNCTION durable\.standing\(.*\) TO upgrade_early_reader;$/m,
		"$db: pg_dump writes the grant on standing()");
}
$node->safe_psql('granted_early', q{
	REVOKE USAGE ON SCHEMA durable FROM upgrade_early_reader;
	REVOKE EXECUTE ON FUNCTION durable.metrics(), durable.standing() FROM upgrade_early_reader});
$node->safe_psql('reinstalled', 'REVOKE USAGE ON SCHEMA durable FROM upgrade_early_reader');
for my $db ('granted_early', 'reinstalled')
{
	is(diff_lines($fresh_catalog, $node->safe_psql($db, $catalog_sql)), '',
		"$db: without the grants, a fresh install's catalog, initial privileges included");
}
# PostgreSQL 17 records the roles of initial privileges in pg_shdepend: a
# row left behind would make DROP ROLE fail
$node->safe_psql('postgres', 'DROP ROLE upgrade_early_reader');

# The owner's entry there is PostgreSQL's default (all rights), whatever the
# old record held: a right the owner took from itself before the record was
# made is dumped as a REVOKE, and so is one taken after REASSIGN OWNED moved
# durable to another role, whose old record (PostgreSQL 15 and 16) named the
# previous owner and none for the new one.
$node->safe_psql('postgres', q{
	CREATE ROLE upgrade_first_owner LOGIN SUPERUSER;
	CREATE ROLE upgrade_next_owner LOGIN SUPERUSER;
	CREATE DATABASE owner_narrowed;
	CREATE DATABASE owner_moved;
});
$node->safe_psql('owner_narrowed', "CREATE EXTENSION durable VERSION '$first'");
$node->safe_psql('owner_narrowed', q{
	REVOKE CREATE ON SCHEMA durable FROM postgres;
	ALTER EXTENSION durable UPDATE;
});
like(schema_dump('owner_narrowed'), qr/^REVOKE ALL ON SCHEMA durable FROM postgres;\nGRANT USAGE ON SCHEMA durable TO postgres;$/m,
	'owner_narrowed: pg_dump writes the right the owner took from itself before 0.2');
$node->safe_psql('owner_moved', "CREATE EXTENSION durable VERSION '0.12'",
	extra_params => [ '-U', 'upgrade_first_owner' ]);
$node->safe_psql('owner_moved', 'REASSIGN OWNED BY upgrade_first_owner TO upgrade_next_owner');
$node->safe_psql('owner_moved', q{
	ALTER EXTENSION durable UPDATE;
	REVOKE CREATE ON SCHEMA durable FROM upgrade_next_owner;
	REVOKE EXECUTE ON FUNCTION durable.metrics() FROM upgrade_next_owner;
});
is($node->safe_psql('owner_moved', q{
	SELECT string_agg(i.initprivs::text, ' ' ORDER BY i.classoid, i.objoid) FROM pg_init_privs i
	 WHERE (i.classoid, i.objoid) IN (('pg_namespace'::regclass, 'durable'::regnamespace),
	                                   ('pg_proc'::regclass, 'durable.metrics()'::regprocedure))}),
	'{upgrade_next_owner=X/upgrade_next_owner,pg_monitor=X/upgrade_next_owner} {upgrade_next_owner=UC/upgrade_next_owner,pg_monitor=U/upgrade_next_owner}',
	'owner_moved: the initial privileges name the new owner, with all its rights');
my $moved_dump = schema_dump('owner_moved');
like($moved_dump, qr/^REVOKE ALL ON SCHEMA durable FROM upgrade_next_owner;\nGRANT USAGE ON SCHEMA durable TO upgrade_next_owner;$/m,
	'owner_moved: pg_dump writes the right the new owner took from itself on the schema');
like($moved_dump, qr/^REVOKE ALL ON FUNCTION durable\.metrics\(.*\) FROM upgrade_next_owner;$/m,
	'owner_moved: and on metrics()');
unlike($moved_dump, qr/^GRANT ALL ON FUNCTION durable\.inbox_admit\(.*\) TO upgrade_next_owner;$/m,
	'owner_moved: pg_dump writes no GRANT to the new owner of what it was given');
is($node->safe_psql('owner_moved', q{SELECT count(*) FROM pg_init_privs WHERE initprivs::text LIKE '%upgrade_first_owner%'}),
	'0', 'owner_moved: after the update no initial privilege names the first owner');

# REASSIGN OWNED at the current version: the library's utility hook moves
# the initial privileges as PostgreSQL 17 does (before, they kept naming the
# old owner, and once it was dropped pg_dump wrote a REVOKE naming its
# number for each of durable's objects, which a restore refuses).  It leaves
# a database at an older version to its update to 0.13, whose step runs
# after 0.9's repair of the monitoring views, which reads the role that made
# them from their initial privileges (creator_dropped below).
$node->safe_psql('postgres', q{
	CREATE ROLE upgrade_owner_now LOGIN SUPERUSER;
	CREATE DATABASE owner_moved_now;
});
$node->safe_psql('owner_moved_now', 'CREATE EXTENSION durable', extra_params => [ '-U', 'upgrade_owner_now' ]);
# (a role named twice: the hook's second pass must see the first's rows --
# for one day it failed, "tuple already updated by self", found by review)
$node->safe_psql('owner_moved_now', 'REASSIGN OWNED BY upgrade_owner_now, upgrade_owner_now TO upgrade_next_owner');
is($node->safe_psql('owner_moved_now', q{SELECT count(*) FROM pg_init_privs WHERE initprivs::text LIKE '%upgrade_owner_now%'}),
	'0', 'owner_moved_now: after REASSIGN OWNED no initial privilege names the first owner');
unlike(schema_dump('owner_moved_now'), qr/^(REVOKE|GRANT) /m,
	'owner_moved_now: pg_dump writes no GRANT or REVOKE at all');
# Given before 0.13 to a role that its default privileges had made a
# grantee of durable's objects (an install at 0.4, whose grants 0.5 keeps):
# the update merges the new owner's entries, as ALTER ... OWNER TO does (for
# one day the update left such rows naming the old owner, found by review).
$node->safe_psql('postgres', q{
	CREATE ROLE upgrade_owner_then LOGIN SUPERUSER;
	CREATE ROLE upgrade_app_now LOGIN;
	CREATE DATABASE owner_was_grantee;
});
$node->safe_psql('owner_was_grantee', q{
	ALTER DEFAULT PRIVILEGES FOR ROLE upgrade_owner_then GRANT SELECT ON TABLES TO upgrade_app_now;
	ALTER DEFAULT PRIVILEGES FOR ROLE upgrade_owner_then GRANT EXECUTE ON FUNCTIONS TO upgrade_app_now;
	CREATE EXTENSION durable VERSION '0.4';
	ALTER EXTENSION durable UPDATE TO '0.12';
}, extra_params => [ '-U', 'upgrade_owner_then' ]);
$node->safe_psql('owner_was_grantee', q{
	REASSIGN OWNED BY upgrade_owner_then TO upgrade_app_now;
	ALTER EXTENSION durable UPDATE;
});
is($node->safe_psql('owner_was_grantee', q{SELECT count(*) FROM pg_init_privs WHERE initprivs::text LIKE '%upgrade_owner_then%'}),
	'0', 'owner_was_grantee: after the update no initial privilege names the first owner');
$node->safe_psql('owner_was_grantee', 'DROP OWNED BY upgrade_owner_then');
$node->safe_psql('postgres', 'DROP ROLE upgrade_owner_then');
unlike(schema_dump('owner_was_grantee'), qr/^REVOKE .* FROM "?[0-9]+"?;$/m,
	'owner_was_grantee: once the first owner is dropped, pg_dump names no role by its number');

for my $db ('owner_moved', 'owner_moved_now')
{
	$node->safe_psql($db, 'DROP OWNED BY upgrade_first_owner, upgrade_owner_now');
}
$node->safe_psql('postgres', 'DROP ROLE upgrade_first_owner, upgrade_owner_now');
for my $db ('owner_moved', 'owner_moved_now')
{
	unlike(schema_dump($db), qr/^REVOKE .* FROM "?[0-9]+"?;$/m,
		"$db: once the first owner is dropped, pg_dump names no role by its number");
}

# Given back before 0.5 recorded the ACL as initial (so the grantor there is
# durable's owner, not the role whose default privileges made the grants),
# or given back and that role dropped: the default grants go all the same.
$node->safe_psql('postgres', q{
	CREATE ROLE upgrade_admin6 LOGIN SUPERUSER;
	CREATE ROLE upgrade_admin7 LOGIN SUPERUSER;
});
updated_with_defaults('reassigned_early', 'upgrade_admin6', '0.2');
$node->safe_psql('reassigned_early', q{
	REASSIGN OWNED BY upgrade_admin6 TO postgres;
	ALTER EXTENSION durable UPDATE TO '0.8';
});
updated_with_defaults('creator_dropped', 'upgrade_admin7', '0.8');
$node->safe_psql('creator_dropped', q{
	REASSIGN OWNED BY upgrade_admin7 TO postgres;
	DROP OWNED BY upgrade_admin7;
});
$node->safe_psql('postgres', 'DROP ROLE upgrade_admin7');
for my $db ('reassigned_early', 'creator_dropped')
{
	($other_rc, $other_out, $other_err) = $node->psql($db, 'ALTER EXTENSION durable UPDATE');
	like($other_err, qr/revoked what default privileges granted on its monitoring views: PUBLIC \(SELECT\) on durable\.stat_counters, upgrade_analytics \(SELECT\) on durable\.stat_counters,/,
		"$db: the default grants are revoked and named") or diag($other_err);
	is(diff_lines($fresh_catalog, $node->safe_psql($db, $catalog_sql)), '', "$db: a fresh install's catalog");
}
$node->safe_psql('reassigned_early', 'DROP OWNED BY upgrade_admin6');
$node->safe_psql('postgres', 'DROP ROLE upgrade_admin6');

# A fresh install by a role whose default privileges take some of its own
# rights on tables keeps them so, its initial privileges included: 0.9
# leaves it alone, and pg_dump writes nothing for the views.
$node->safe_psql('postgres', q{
	CREATE ROLE upgrade_admin8 LOGIN SUPERUSER;
	CREATE DATABASE self_restricted;
});
$node->safe_psql('self_restricted', q{
	ALTER DEFAULT PRIVILEGES REVOKE TRUNCATE, REFERENCES, TRIGGER, DELETE ON TABLES FROM upgrade_admin8;
	CREATE EXTENSION durable;
}, extra_params => [ '-U', 'upgrade_admin8' ]);
is($node->safe_psql('self_restricted', q{SELECT string_agg(c.relacl::text || ' ' || i.initprivs::text, '; ')
	FROM pg_class c JOIN pg_init_privs i ON i.objoid = c.oid AND i.objsubid = 0
	WHERE c.oid = 'durable.stat_counters'::regclass}),
	'{upgrade_admin8=arw/upgrade_admin8,pg_monitor=r/upgrade_admin8} {upgrade_admin8=arw/upgrade_admin8,pg_monitor=r/upgrade_admin8}',
	'self_restricted: the views keep the owner\'s own entry, as their initial privileges say');
unlike(schema_dump('self_restricted'), qr/ON TABLE durable\.stat_/, 'self_restricted: pg_dump writes no GRANT or REVOKE for the views');

# The owner that took a right from itself by hand keeps that REVOKE (0.9
# leaves the view alone: pg_dump still writes it); views that another
# superuser's update created with its own rights narrowed by its default
# privileges get a fresh install's owner entry.
$node->safe_psql('postgres', q{
	CREATE ROLE upgrade_admin9 LOGIN SUPERUSER;
	CREATE DATABASE owner_revoked_itself;
	CREATE DATABASE narrowed_by_updater;
});
$node->safe_psql('owner_revoked_itself', "CREATE EXTENSION durable VERSION '0.8'");
$node->safe_psql('owner_revoked_itself', 'REVOKE TRUNCATE ON durable.stat_counters FROM postgres');
($other_rc, $other_out, $other_err) = $node->psql('owner_revoked_itself', 'ALTER EXTENSION durable UPDATE');
is($other_err, '', 'owner_revoked_itself: the update says nothing');
like(schema_dump('owner_revoked_itself'), qr/^REVOKE ALL ON TABLE durable\.stat_counters FROM postgres;$/m,
	'owner_revoked_itself: pg_dump still writes the REVOKE');
$node->safe_psql('narrowed_by_updater', "CREATE EXTENSION durable VERSION '$first'");
$node->safe_psql('narrowed_by_updater', q{
	ALTER DEFAULT PRIVILEGES REVOKE TRUNCATE, DELETE ON TABLES FROM upgrade_admin9;
	ALTER EXTENSION durable UPDATE TO '0.8';
}, extra_params => [ '-U', 'upgrade_admin9' ]);
$node->safe_psql('narrowed_by_updater', 'ALTER EXTENSION durable UPDATE');
is(diff_lines($fresh_catalog, $node->safe_psql('narrowed_by_updater', $catalog_sql)), '',
	"narrowed_by_updater: a fresh install's catalog (the owner has all its rights on the views)");

# A non-superuser owner of durable (made so after the install) plants an
# operator for aclitem[] in schema durable, first on the update's
# search_path; a superuser then runs the update.  Every comparison of the
# step names pg_catalog's operators: the planted one never runs.
$node->safe_psql('postgres', q{
	CREATE ROLE upgrade_owner LOGIN SUPERUSER;
	CREATE DATABASE hostile_operator OWNER upgrade_owner;
});
$node->safe_psql('hostile_operator', "CREATE EXTENSION durable VERSION '0.8'",
	extra_params => [ '-U', 'upgrade_owner' ]);
$node->safe_psql('postgres', 'ALTER ROLE upgrade_owner NOSUPERUSER');
$node->safe_psql('hostile_operator', q{
	CREATE FUNCTION durable.acl_eq(aclitem[], aclitem[]) RETURNS bool LANGUAGE sql
	  AS $$ ALTER ROLE upgrade_owner SUPERUSER; SELECT pg_catalog.array_eq($1, $2) $$;
	CREATE OPERATOR durable.= (LEFTARG = aclitem[], RIGHTARG = aclitem[], FUNCTION = durable.acl_eq);
}, extra_params => [ '-U', 'upgrade_owner' ]);
$node->safe_psql('hostile_operator', 'ALTER EXTENSION durable UPDATE');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'upgrade_owner'}),
	'f', 'hostile_operator: the update ran no operator of schema durable (its owner is still no superuser)');

# The same owner plants, from 0.7, a function of the name of the helper the
# 0.7 -> 0.8 step creates and calls, taking text where the helper takes
# regprocedure: called with untyped literals, it was the better match, and
# ran as the superuser updating (until 2026-12-06, found by review).  The
# step's arguments are typed now.
if (grep { $_ eq '0.7' } @versions)
{
	$node->safe_psql('postgres', q{
		ALTER ROLE upgrade_owner SUPERUSER;
		CREATE DATABASE hostile_helper OWNER upgrade_owner;
	});
	$node->safe_psql('hostile_helper', "CREATE EXTENSION durable VERSION '0.7'",
		extra_params => [ '-U', 'upgrade_owner' ]);
	$node->safe_psql('postgres', 'ALTER ROLE upgrade_owner NOSUPERUSER');
	$node->safe_psql('hostile_helper', q{
		CREATE FUNCTION durable.replace_keeping_privileges(old_fn text, create_new text, new_name text)
		RETURNS void LANGUAGE plpgsql AS $$
		BEGIN
			ALTER ROLE upgrade_owner SUPERUSER;
			PERFORM durable.replace_keeping_privileges(old_fn::pg_catalog.regprocedure, create_new, new_name);
		END $$;
	}, extra_params => [ '-U', 'upgrade_owner' ]);
	$node->safe_psql('hostile_helper', 'ALTER EXTENSION durable UPDATE');
	is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'upgrade_owner'}),
		'f', 'hostile_helper: the update ran no function the owner planted (its owner is still no superuser)');
	is($node->safe_psql('hostile_helper', q{SELECT extversion FROM pg_extension WHERE extname = 'durable'}),
		$default, '... and went through');
}

# ---- 0.8 replaced outbox_enqueue (a sixth argument) and outbox_begin (two
# result columns): their privileges carry over.  The new functions' ACLs
# equal the old ones, grantors and grant options included (a grant passed
# on by a holder of the grant option goes with that holder's REVOKE
# CASCADE); the updating role's default privileges do not reach them; the
# initial privileges stay a fresh install's, so pg_dump still writes the
# grants and a restore keeps them; the grants are real ones (DROP ROLE sees
# them).
if (grep { $_ eq '0.7' } @versions)
{
	my %replaced = (
		'durable.outbox_enqueue(text, text, jsonb, timestamptz, bigint)' =>
		  'durable.outbox_enqueue(text, text, jsonb, timestamptz, bigint, bigint)',
		'durable.outbox_begin(text, text, jsonb, text, interval, bigint, bigint)' =>
		  'durable.outbox_begin(text, text, jsonb, text, interval, bigint, bigint)');
	$node->safe_psql('postgres', q{
		CREATE ROLE upgrade_bot LOGIN;
		CREATE ROLE upgrade_delegate;
		CREATE ROLE upgrade_passed_on;
		CREATE ROLE upgrade_nosy;
		CREATE DATABASE grants_0_7;
	});
	$node->safe_psql('grants_0_7', join("\n",
		"CREATE EXTENSION durable VERSION '0.7';",
		'GRANT USAGE ON SCHEMA durable TO upgrade_bot, upgrade_delegate;',
		(map { ("GRANT EXECUTE ON FUNCTION $_ TO upgrade_bot;",
				"GRANT EXECUTE ON FUNCTION $_ TO upgrade_delegate WITH GRANT OPTION;",
				"SET ROLE upgrade_delegate;",
				"GRANT EXECUTE ON FUNCTION $_ TO upgrade_passed_on;",
				"RESET ROLE;") } sort keys %replaced),
		'ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO upgrade_nosy;',
		# a role's defaults may take its own EXECUTE away from its new functions
		'ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM CURRENT_USER;'));
	my $acl_sql = join(' UNION ALL ', map { qq{
		SELECT proacl::text FROM pg_proc WHERE oid = '$_'::regprocedure} } sort keys %replaced);
	my $acl_before = $node->safe_psql('grants_0_7', $acl_sql);
	like($acl_before, qr/upgrade_passed_on=X\/upgrade_delegate/, '0.7: a grant passed on by the delegate');
	$node->safe_psql('grants_0_7', "ALTER EXTENSION durable UPDATE TO '0.8'");
	$acl_sql = join(' UNION ALL ', map { qq{
		SELECT proacl::text FROM pg_proc WHERE oid = '$_'::regprocedure} } sort values %replaced);
	is($node->safe_psql('grants_0_7', $acl_sql), $acl_before,
		'0.7 -> 0.8: the new functions\' ACLs equal the old ones, grantors included');
	my $privileges_sql = join(' UNION ALL ', map { qq{
		SELECT concat_ws(' ', '$_',
			has_function_privilege('upgrade_bot', '$_', 'EXECUTE'),
			has_function_privilege('upgrade_delegate', '$_', 'EXECUTE WITH GRANT OPTION'),
			has_function_privilege('upgrade_nosy', '$_', 'EXECUTE'),
			(SELECT count(*) FROM pg_proc p, aclexplode(p.proacl) a
			  WHERE p.oid = '$_'::regprocedure AND a.grantee = 0))} } sort values %replaced);
	my $want = join("\n", map { "$_ t t f 0" } sort values %replaced);
	is($node->safe_psql('grants_0_7', $privileges_sql), $want,
		'0.7 -> 0.8: outbox_enqueue and outbox_begin keep their grants (and grant option), gain no default privilege and nothing for PUBLIC');
	# (this library serves its own version's tables only: the rest of the
	# steps, which leave those two functions alone, first)
	$node->safe_psql('grants_0_7', "ALTER EXTENSION durable UPDATE");
	is($node->safe_psql('grants_0_7', q{
			SELECT e.key || ' ' || b.action
			  FROM durable.outbox_enqueue('k-granted', 'chat-1', '{}') e,
			       durable.outbox_begin('k-granted', 'chat-1', '{}', 'bot-1') b},
			extra_params => [ '-U', 'upgrade_bot' ]),
		'k-granted send', '0.7 -> 0.8: the granted bot calls the new outbox_enqueue and outbox_begin');
	my $init_sql = join(' UNION ALL ', map { qq{
		SELECT '$_ ' || initprivs::text FROM pg_init_privs WHERE objoid = '$_'::regprocedure} } sort values %replaced);
	is($node->safe_psql('grants_0_7', $init_sql), $node->safe_psql('fresh', $init_sql),
		'0.7 -> 0.8: the initial privileges of the new functions are a fresh install\'s');

	my $dump = schema_dump('grants_0_7');
	like($dump, qr/^GRANT ALL ON FUNCTION durable\.outbox_enqueue\([^)]*inbound_token bigint\) TO upgrade_bot;$/m,
		'0.7 -> 0.8: pg_dump writes the carried-over grant of outbox_enqueue');
	like($dump, qr/^GRANT ALL ON FUNCTION durable\.outbox_begin\([^)]*\) TO upgrade_delegate WITH GRANT OPTION;$/m,
		'0.7 -> 0.8: pg_dump writes the carried-over grant of outbox_begin');
	$node->safe_psql('postgres', 'CREATE DATABASE grants_restored');
	my ($restore_out, $restore_err);
	IPC::Run::run([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('grants_restored') ],
		'<', \$dump, '>', \$restore_out, '2>', \$restore_err)
	  or die "restore failed: $restore_err";
	is($node->safe_psql('grants_restored', $privileges_sql), $want,
		'0.7 -> 0.8: a restore of the dump keeps the grants');

	my ($ret, $out, $err) = $node->psql('grants_0_7', 'DROP ROLE upgrade_bot');
	like($err, qr/privileges for function durable\.outbox_enqueue.*privileges for function durable\.outbox_begin|privileges for function durable\.outbox_begin.*privileges for function durable\.outbox_enqueue/s,
		'0.7 -> 0.8: the carried-over grants are dependencies of their roles');
	$node->safe_psql('grants_0_7', join("\n", map { "REVOKE EXECUTE ON FUNCTION $_ FROM upgrade_delegate CASCADE;" } sort values %replaced));
	is($node->safe_psql('grants_0_7', join(' UNION ALL ', map { qq{
			SELECT has_function_privilege('upgrade_passed_on', '$_', 'EXECUTE')::text} } sort values %replaced)),
		"false\nfalse", '0.7 -> 0.8: REVOKE ... CASCADE from the delegate reaches the grants it passed on');
	for my $db ('grants_0_7', 'grants_restored')
	{
		$node->safe_psql($db, qq{
			DROP EXTENSION durable;
			ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM upgrade_nosy;
		});
	}
	$node->safe_psql('postgres', 'DROP DATABASE grants_0_7; DROP DATABASE grants_restored; DROP ROLE upgrade_bot, upgrade_delegate, upgrade_passed_on, upgrade_nosy');
}

# ---- the update runs none of a demoted owner's code as the superuser
# The steps run as the superuser who updates, on tables that durable's owner
# owns: an owner that is no longer a superuser can still put a trigger or a
# CHECK constraint on them.  0.3 filled inbox.finished_at with an UPDATE,
# which fired such a trigger as that superuser, and 0.6 changes the
# collation of columns such a constraint may check, which validates it
# again as that superuser: either way the owner made itself superuser again
# (until 2026-12-05).  0.3 now fills the column with a rewrite, which fires
# nothing; 0.6 refuses (55000) while such a constraint stands.
{
	$node->safe_psql('postgres', q{
		CREATE ROLE upgrade_demoted LOGIN SUPERUSER;
		CREATE DATABASE demoted_0_2 OWNER upgrade_demoted;
		CREATE DATABASE demoted_0_5 OWNER upgrade_demoted;});
	my $regain = q{
		CREATE FUNCTION public.regain(text) RETURNS boolean LANGUAGE plpgsql AS $$
		BEGIN
			IF current_user <> 'upgrade_demoted' THEN
				EXECUTE 'ALTER ROLE upgrade_demoted SUPERUSER';
			END IF;
			RETURN true;
		END $$;
		CREATE FUNCTION public.regain_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM public.regain(''); RETURN NULL; END $$;};
	for my $case ([ 'demoted_0_2', '0.2' ], [ 'demoted_0_5', '0.5' ])
	{
		$node->safe_psql($case->[0], "CREATE EXTENSION durable VERSION '$case->[1]'; $regain",
			extra_params => [ '-U', 'upgrade_demoted' ]);
	}
	$node->safe_psql('postgres', 'ALTER ROLE upgrade_demoted NOSUPERUSER');
	my $rolsuper = "SELECT rolsuper FROM pg_roles WHERE rolname = 'upgrade_demoted'";

	$node->safe_psql('demoted_0_2', q{
		INSERT INTO durable.inbox (source, message_id, chat_id, kind, payload, state, not_before, created_at, done_at)
		VALUES ('s', 'm', 'c', 'message', '{}', 'done', now(), now(), now() - interval '1 day');
		CREATE TRIGGER regain AFTER UPDATE ON durable.inbox
			FOR EACH STATEMENT EXECUTE FUNCTION public.regain_trigger();},
		extra_params => [ '-U', 'upgrade_demoted' ]);
	$node->safe_psql('demoted_0_2', 'ALTER EXTENSION durable UPDATE');
	is($node->safe_psql('demoted_0_2', $rolsuper), 'f',
		'0.2 -> 0.3: the update fires no trigger of the demoted owner\'s');
	is($node->safe_psql('demoted_0_2', 'SELECT finished_at = done_at FROM durable.inbox'), 't',
		'0.2 -> 0.3: and fills finished_at all the same');

	$node->safe_psql('demoted_0_5', q{
		INSERT INTO durable.permit_buckets VALUES ('b', '1 min', now());
		ALTER TABLE durable.permit_buckets ADD CONSTRAINT regain CHECK (public.regain(bucket));},
		extra_params => [ '-U', 'upgrade_demoted' ]);
	my ($ret, $out, $err) = $node->psql('demoted_0_5', "\\set VERBOSITY verbose\nALTER EXTENSION durable UPDATE");
	like($err, qr/55000: CHECK constraint "regain" on durable\.permit_buckets stands in the way of the update to 0\.6/,
		'0.5 -> 0.6: refused while a CHECK constraint of the owner\'s checks a column it changes');
	is($node->safe_psql('demoted_0_5', $rolsuper), 'f', '0.5 -> 0.6: which never ran');
	# A table inheriting from one of durable's, which the change of collation
	# would reach with its constraints: refused by the guard when it is made
	# (the update's own refusal of one, made without preloading: t/002).
	$node->safe_psql('demoted_0_5', 'ALTER TABLE durable.permit_buckets DROP CONSTRAINT regain',
		extra_params => [ '-U', 'upgrade_demoted' ]);
	($ret, $out, $err) = $node->psql('demoted_0_5',
		'CREATE TABLE public.kid (CHECK (public.regain(bucket))) INHERITS (durable.permit_buckets)',
		extra_params => [ '-U', 'upgrade_demoted' ]);
	like($err, qr/"durable\.permit_buckets" cannot have child tables/,
		'0.5: the guard refuses a table inheriting from one of durable\'s');
	$node->safe_psql('demoted_0_5', 'ALTER EXTENSION durable UPDATE');
	is($node->safe_psql('demoted_0_5', "SELECT extversion FROM pg_extension WHERE extname = 'durable'"),
		$node->safe_psql('postgres', "SELECT default_version FROM pg_available_extensions WHERE name = 'durable'"),
		'0.5 -> 0.6: and goes through once they are gone');
	$node->safe_psql('postgres', 'DROP DATABASE demoted_0_2; DROP DATABASE demoted_0_5; DROP ROLE upgrade_demoted');
}

# A line diff for the failure message.
sub diff_lines
{
	my ($want, $got) = @_;
	my %w = map { $_ => 1 } split /\n/, $want;
	my %g = map { $_ => 1 } split /\n/, $got;
	return join("\n",
		(map { "missing after update: $_" } grep { !$g{$_} } split /\n/, $want),
		(map { "extra after update:   $_" } grep { !$w{$_} } split /\n/, $got));
}

# One backend (a pooled connection) runs a call, then durable is dropped
# and created again at an older version: its next call says which version
# the database has, as a new backend's does, instead of failing on a
# missing relation (until 2026-12-06 the check ran once per backend; found
# by review).
if (grep { $_ eq '0.9' } @versions)
{
	$node->safe_psql('postgres', 'CREATE DATABASE moved_back');
	my ($ret, $out, $err) = $node->psql('moved_back', q{
		CREATE EXTENSION durable;
		SELECT outbox_due FROM durable.sweep();
		DROP EXTENSION durable;
		CREATE EXTENSION durable VERSION '0.9';
		\set VERBOSITY verbose
		SELECT outbox_due FROM durable.sweep();
	});
	like($err, qr/ERROR:  55000: durable's library is version \Q$default\E but this database has durable 0\.9/,
		'moved_back: the same backend is told the database has 0.9 (55000)');
}

# One backend updates in a transaction that rolls back (a dry run, a
# migration that failed), after a call of durable in it: the database is
# back at its version, and the backend's next call says so, as a new
# backend's does. Until 2026-12-07 the check passed in the aborted
# transaction was kept, and the backend ran this library's statements on
# the older tables for as long as it lived: writes that succeeded, and
# sweep() failing on a relation 0.11 adds (found by review).
if (grep { $_ eq '0.10' } @versions)
{
	$node->safe_psql('postgres', 'CREATE DATABASE rolled_back');
	$node->safe_psql('rolled_back', "CREATE EXTENSION durable VERSION '0.10'");
	my ($ret, $out, $err) = $node->psql('rolled_back', q{
		BEGIN;
		ALTER EXTENSION durable UPDATE;
		SELECT state FROM durable.inbox_admit('rb', 'm-0', 'chat-0', '{}');
		SAVEPOINT s;
		SELECT state FROM durable.inbox_admit('rb', 'm-1', 'chat-1', '{}');
		ROLLBACK TO s;
		SELECT state FROM durable.inbox_admit('rb', 'm-2', 'chat-2', '{}');
		ROLLBACK;
		\set VERBOSITY verbose
		SELECT state FROM durable.inbox_admit('rb', 'm-3', 'chat-3', '{}');
		SELECT outbox_due FROM durable.sweep();
	}, on_error_stop => 0);
	is($out, "pending\npending\npending", 'rolled_back: in the transaction that updates, the API serves it');
	my @refused = ($err =~ /ERROR:  55000: durable's library is version \Q$default\E but this database has durable 0\.10/g);
	is(scalar @refused, 2, 'rolled_back: after its rollback, the same backend is told the database has 0.10 (55000), for a write and for sweep()');
	is($node->safe_psql('rolled_back', 'SELECT count(*) FROM durable.inbox'), '0',
		'rolled_back: nothing was written to the older tables');
}

$node->stop;
done_testing();
