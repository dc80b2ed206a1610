# t/lib/DurableInvariants.pm: the journals' invariants (test/invariants.sql)
# for the TAP tests that kill processes or race calls.
package DurableInvariants;

use strict;
use warnings;

use Exporter 'import';
use FindBin;
use PostgreSQL::Test::Utils qw(slurp_file);
our @EXPORT = qw(invariant_violations);

my $sql = slurp_file("$FindBin::Bin/../test/invariants.sql");

# The records of database $db that break an invariant, one line each
# ("record|what"); empty when they all hold.
sub invariant_violations
{
	my ($node, $db) = @_;
	return $node->safe_psql($db // 'postgres', $sql);
}

1;
