# t/lib/DurableLog.pm: reading the server log of a TAP node that writes
# log_line_prefix = '%m [%p] ' with log_timezone = 'UTC' (the settings
# log_settings gives).
package DurableLog;

use strict;
use warnings;

use Exporter 'import';
use Time::Local qw(timegm);
our @EXPORT = qw(log_lines log_settings);

# The postgresql.conf lines the parse below relies on.
sub log_settings
{
	return "log_line_prefix = '%m [%p] '\nlog_timezone = 'UTC'\n";
}

# The lines of $text (a slice of the log) that start with the prefix, as
# hashes: at (seconds since the epoch, with the milliseconds), pid, message.
sub log_lines
{
	my ($text) = @_;
	my @lines;
	foreach my $line (split /\n/, $text)
	{
		next
		  unless $line =~
		  /^(\d+)-(\d+)-(\d+) (\d+):(\d+):(\d+\.\d+) UTC \[(\d+)\] (.*)$/;
		push @lines,
		  {
			at => timegm(0, $5, $4, $3, $2 - 1, $1) + $6,
			pid => $7,
			message => $8
		  };
	}
	return @lines;
}

1;
