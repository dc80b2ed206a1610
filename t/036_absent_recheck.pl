# t/036_absent_recheck.pl
# The launcher looks at a database without durable with a short-lived
# worker (a connection, a catalog scan: ~25 ms of a core), and looks again
# after durable.absent_recheck.  Until 2026-12-07 it did so every 30 s
# forever: a review measured 8% of a core at 102 databases without durable.
# Now the pause doubles while the database stays without durable (as long
# as it has been found so), up to ten times the setting, and starts over
# once the extension was there.  With the setting at 1 s: looks at about
# 0, 1, 2, 4, 8, 16 and 26 s.
#
# Each look logs "extension not installed in database" at DEBUG1.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

my $node = PostgreSQL::Test::Cluster->new('absent_recheck');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'durable'
durable.absent_recheck = '1s'
log_min_messages = debug1
});
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE plain');

# The times (seconds, from the log's timestamps) of the looks at "plain" logged from $from.
sub look_times
{
	my ($from) = @_;
	my @times;
	for my $line (split /\n/, slurp_file($node->logfile, $from))
	{
		next unless $line =~ /extension not installed in database "plain"/;
		my ($h, $m, $s) = $line =~ /^\d{4}-\d\d-\d\d (\d\d):(\d\d):(\d\d\.\d+)/
		  or next;
		push @times, $h * 3600 + $m * 60 + $s;
	}
	return @times;
}

sub gaps
{
	my @t = @_;
	return map { $t[$_] - $t[ $_ - 1 ] } 1 .. $#t;
}

my $offset = -s $node->logfile;
sleep 31;
my @looks = look_times($offset);
my @gaps = gaps(@looks);
note sprintf('looks at %s s; gaps %s',
	join(', ', map { sprintf '%.1f', $_ - $looks[0] } @looks),
	join(', ', map { sprintf '%.1f', $_ } @gaps));

# A fixed pause of 1 s would make about 30 looks; 30 s, one or two.
cmp_ok(scalar @looks, '>=', 5, 'the database without durable is looked at again after the setting');
cmp_ok(scalar @looks, '<=', 9, '... ever less often');
ok(@gaps >= 4 && $gaps[0] < 2.5 && $gaps[1] < 2.5,
	'the first two pauses are the setting (1 s)');
ok(!grep({ $gaps[$_] < $gaps[ $_ - 1 ] - 0.5 } 1 .. $#gaps),
	'each pause is at least as long as the one before');
my ($longest) = sort { $b <=> $a } @gaps;
cmp_ok($longest // 0, '>=', 7, 'the pauses grow');
cmp_ok($longest // 99, '<=', 11.5, 'up to ten times the setting');

# The extension created there (seen at once) and dropped again: the pauses
# start over from the setting, not from where they stood.
$node->safe_psql('plain', 'CREATE EXTENSION durable');
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
		  WHERE backend_type = 'durable worker' AND datname = 'plain'}),
	'a CREATE EXTENSION gets the database its worker at once');
$offset = -s $node->logfile;
$node->safe_psql('plain', 'DROP EXTENSION durable');
# (kept on, the pauses would be at ten times the setting by now)
for (1 .. 100)
{
	@looks = look_times($offset);
	last if @looks >= 3;
	sleep 0.1;
}
@gaps = gaps(@looks);
note sprintf('after the drop: %d looks, gaps %s', scalar @looks, join(', ', map { sprintf '%.1f', $_ } @gaps));
ok(@gaps >= 2 && $gaps[0] < 2.5 && $gaps[1] < 4.5,
	'after a DROP EXTENSION the pauses start over from the setting');

# The setting is read at a reload: at 1 h, no look in the next 10 s.
$node->append_conf('postgresql.conf', "durable.absent_recheck = '1h'");
$node->reload;
sleep 2;
$offset = -s $node->logfile;
sleep 10;
is(scalar(look_times($offset)), 0, 'a reload that raises the setting spaces the looks out');

# A database whose slot went to another keeps its next look in the
# launcher's memory: a reload reaches it too.  Until 2026-12-07 (found by
# review) its next look stayed where the old setting put it, up to ten
# times that.  Two slots: postgres's (durable) and one the databases
# without durable take in turn.
$node->safe_psql('postgres', 'CREATE EXTENSION durable');
$node->safe_psql('postgres', "CREATE DATABASE $_") for qw(plain2 plain3);
$node->append_conf('postgresql.conf', "durable.max_databases = 2");
$offset = -s $node->logfile;
$node->restart;
my @plain = qw(plain plain2 plain3);
my $looked = 0;
for (1 .. 300)
{
	my $log = slurp_file($node->logfile, $offset);
	$looked = grep { $log =~ /extension not installed in database "$_"/ } @plain;
	last if $looked == @plain;
	sleep 0.1;
}
is($looked, 3, 'after a restart, each database without durable is looked at once');
$node->append_conf('postgresql.conf', "durable.absent_recheck = '1s'");
$node->reload;
$offset = -s $node->logfile;
sleep 15;
my $log = slurp_file($node->logfile, $offset);
is(join(' ', grep { $log !~ /extension not installed in database "$_"/ } @plain), '',
	'a reload that lowers the setting reaches the databases whose slot went to another');

$node->stop;
done_testing();
