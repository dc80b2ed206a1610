# t/027_worker_as_owner.pl
# The worker's passes run as the extension's owner, not as the bootstrap
# superuser it connects as.
#
# A pass fires the journals' triggers (lease recovery updates, purge
# deletes) and the actions of foreign keys that reference them.  An owner
# that is no longer a superuser (ALTER ROLE ... NOSUPERUSER, REASSIGN OWNED
# to an ordinary role) still owns the journals, so it can put a trigger on
# one; run by the worker as the bootstrap superuser, that trigger's code
# used to get a superuser's rights: the owner could make itself superuser
# again.  sweep(), SECURITY DEFINER, always ran it as the owner.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('worker_as_owner');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'durable'\ndurable.naptime = '200ms'\n");
$node->start;

$node->safe_psql('postgres', q{
	CREATE ROLE installer LOGIN SUPERUSER;
	CREATE DATABASE bots OWNER installer;
});
$node->safe_psql('bots', 'CREATE EXTENSION durable', extra_params => [ '-U', 'installer' ]);
$node->safe_psql('postgres', 'ALTER ROLE installer NOSUPERUSER');

# The demoted owner's trigger on the journal it still owns tries to make it
# superuser again, and notes who ran it.
$node->safe_psql('bots', q{
	CREATE TABLE trigger_runs (who name, escalated boolean);
	CREATE FUNCTION escalate() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		BEGIN
			EXECUTE 'ALTER ROLE installer SUPERUSER';
			INSERT INTO public.trigger_runs VALUES (current_user, true);
		EXCEPTION WHEN insufficient_privilege THEN
			INSERT INTO public.trigger_runs VALUES (current_user, false);
		END;
		RETURN NEW;
	END $$;
	CREATE TRIGGER escalate BEFORE UPDATE ON durable.inbox
		FOR EACH ROW EXECUTE FUNCTION escalate();
	SELECT 1 FROM durable.inbox_admit('tg', 'm-1', 'chat-1', instance => 'bot-1', lease => '20 ms');
}, extra_params => [ '-U', 'installer' ]);

# The worker recovers the expired lease: the trigger fires in its pass.
$node->poll_query_until('bots', 'SELECT count(*) > 0 FROM trigger_runs')
  or die 'the worker never recovered the lease';

is($node->safe_psql('bots', 'SELECT who || \' \' || escalated FROM trigger_runs'),
	'installer false', "the worker's pass ran the owner's trigger as the owner, without a superuser's rights");
is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'installer'"),
	'f', 'the owner did not make itself superuser');
is($node->safe_psql('bots', "SELECT state FROM durable.inbox WHERE message_id = 'm-1'"),
	'pending', 'and the lease was recovered all the same');
is($node->safe_psql('bots', 'SELECT current_user'), 'postgres', '(the test itself runs as the bootstrap superuser)');

$node->stop;
done_testing();
