/*-------------------------------------------------------------------------
 *
 * durablectl.c
 *		The operator's command-line tool for durable, over libpq.
 *
 *	 durablectl [OPTION]... status | dlq inbox|outbox | replay ID |
 *		 retry KEY | discard KEY | unknown | watch
 *
 * It is a thin client of the SQL contract: the commands that change records
 * call the extension's functions (inbox_replay, outbox_retry,
 * outbox_discard), so the server applies its own checks and counters; the
 * listings SELECT from durable.inbox / durable.outbox.  Every value goes to
 * the server as a $n parameter of PQexecParams, never spliced into SQL text,
 * and the session's search_path is emptied first (as PostgreSQL's own client
 * tools do), so that no object a user planted can stand in for a built-in.
 *
 * Conventions follow PostgreSQL's client programs: the libpq connection
 * options and environment (-d accepts a connection string, PGSERVICE,
 * PGHOST, ...), -w/-W for passwords, messages on stderr as
 * "durablectl: error: ..." with "detail:" and "hint:" lines, and exit codes
 * 0 (done), 1 (an error from the server, a lost connection, or a refused
 * confirmation) and 2 (bad usage: the usage is printed on stderr).
 *
 * watch LISTENs on durable_dead and durable_ambiguous (and durable_ready
 * with --ready) and prints one line per notification until SIGINT or
 * SIGTERM, which end it with status 0.  The signal handlers only write to a
 * self-pipe that the select() loop also waits on, so a signal that arrives
 * between two waits is never lost.
 *
 * IDENTIFICATION
 *	  cli/durablectl.c
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/select.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

#include "text.h"

#ifndef DURABLECTL_VERSION
#define DURABLECTL_VERSION "unknown"
#endif

#define PROGNAME "durablectl"

/* Exit codes, as for PostgreSQL's client programs. */
#define EXIT_DONE	0
#define EXIT_ERROR	1
#define EXIT_USAGE	2

/* Default page size of the listings, and the most one page may hold. */
#define DEFAULT_LIMIT	50
#define MAX_LIMIT		100000

/* Payloads are clipped to this many bytes in human-readable listings. */
#define PAYLOAD_CLIP	200
/*
 * A listing's payload columns: its first PAYLOAD_HEAD_CHARS characters,
 * whether it has more, and its size in bytes in the database's encoding
 * (what arrives is UTF-8, of another length, but from a SQL_ASCII database,
 * whose bytes arrive as they are).  The head holds the bytes
 * shown and the rest of the character the clip ends in: a SQL_ASCII
 * database counts bytes as characters, and a UTF-8 character across the
 * clip must arrive whole.
 */
#define PAYLOAD_HEAD_CHARS	204
#define STRINGIFY_(x)	#x
#define STRINGIFY(x)	STRINGIFY_(x)
#define PAYLOAD_HEAD(alias) \
	"pg_catalog.left(" alias ".payload::pg_catalog.text, " STRINGIFY(PAYLOAD_HEAD_CHARS) ") AS payload," \
	" pg_catalog.length(" alias ".payload::pg_catalog.text) > " STRINGIFY(PAYLOAD_HEAD_CHARS) " AS payload_cut," \
	" pg_catalog.octet_length(" alias ".payload::pg_catalog.text) AS payload_bytes"

typedef struct Options
{
	const char *dbname;
	const char *host;
	const char *port;
	const char *username;
	int			password_mode;	/* 0 default, -1 never (-w), 1 force (-W) */
	bool		json;
	bool		yes;
	bool		ready;
	const char *state;			/* retry, discard: act only on a send in this state */
	long		limit;
	long		offset;
	bool		offset_given;
	const char *after;			/* dlq, unknown: list records after this id (digits) */
	bool		paged;			/* --limit, --offset or --after given */
} Options;

static PGconn *conn = NULL;
static int	signal_pipe[2] = {-1, -1};
static volatile sig_atomic_t stop_requested = 0;

static const char *shown(const char *text);

/*
 * Messages on stderr in the style of PostgreSQL 16's client programs.
 */
static void
message(const char *level, const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "%s: %s: ", PROGNAME, level);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

#define error(...) message("error", __VA_ARGS__)
#define detail(...) message("detail", __VA_ARGS__)
#define hint(...) message("hint", __VA_ARGS__)

/*
 * A message of the server's or libpq's, then `suffix`: each of its lines
 * escaped as shown() escapes journal text, its line breaks and the tabs
 * that indent a line kept (libpq indents its continuation lines with one),
 * its trailing line breaks dropped (libpq ends its messages with one).
 * Such a message may repeat what the operator typed or pasted (a key, a
 * database name), and that text must not steer the terminal either.
 */
static void
message_lines(const char *level, const char *text, const char *suffix)
{
	size_t		left = strlen(text);
	const char *p = text;

	while (left > 0 && text[left - 1] == '\n')
		left--;
	fprintf(stderr, "%s: %s: ", PROGNAME, level);
	for (;;)
	{
		const char *nl = memchr(p, '\n', left);
		size_t		len = nl ? (size_t) (nl - p) : left;
		size_t		indent = 0;
		char	   *line;
		char	   *escaped;

		while (indent < len && p[indent] == '\t')
			indent++;
		line = strndup(p + indent, len - indent);
		escaped = line ? shown_alloc(line) : NULL;
		if (escaped == NULL)
		{
			fprintf(stderr, "out of memory\n");
			exit(EXIT_ERROR);
		}
		fprintf(stderr, "%.*s%s", (int) indent, p, escaped);
		free(escaped);
		free(line);
		if (nl == NULL)
			break;
		fputc('\n', stderr);
		left -= len + 1;
		p = nl + 1;
	}
	fprintf(stderr, "%s\n", suffix);
}

static void
usage(FILE *out)
{
	fprintf(out,
			"%s is the operator's tool for the durable extension: standing, dead letters,\n"
			"ambiguous sends, and the notifications that announce them.\n\n", PROGNAME);
	fprintf(out, "Usage:\n  %s [OPTION]... COMMAND [ARG]\n\n", PROGNAME);
	fprintf(out,
			"Commands:\n"
			"  status               records by state, bounds and event counters\n"
			"  dlq inbox|outbox     list dead records with their errors (paged)\n"
			"  replay ID            process a dead or done inbox record again\n"
			"  retry KEY            make a dead, failed or unknown send due again now\n"
			"  discard KEY          forget a send (asks for confirmation unless --yes)\n"
			"  unknown              list ambiguous sends (the provider may have them)\n"
			"  watch                print dead and ambiguous records as they are announced,\n"
			"                       until interrupted\n\n");
	fprintf(out,
			"Options:\n"
			"  -j, --json           status, dlq, unknown, watch: JSON output for scripts\n"
			"  -l, --limit=N        dlq, unknown: at most N records (default %d)\n"
			"  -a, --after=ID       dlq, unknown: start after record ID (each page names the\n"
			"                       next one's; records retried meanwhile shift no page)\n"
			"  -o, --offset=N       dlq, unknown: skip the first N records (default 0)\n"
			"  -s, --state=STATE    retry, discard: only if the send is in STATE now\n"
			"  -y, --yes            discard: do not ask for confirmation\n"
			"  -r, --ready          watch: also print durable_ready notifications\n"
			"  -V, --version        output version information, then exit\n"
			"  -?, --help           show this help, then exit\n\n", DEFAULT_LIMIT);
	fprintf(out,
			"Connection options:\n"
			"  -d, --dbname=DBNAME      database name or connection string\n"
			"  -h, --host=HOSTNAME      database server host or socket directory\n"
			"  -p, --port=PORT          database server port\n"
			"  -U, --username=USERNAME  database user name\n"
			"  -w, --no-password        never prompt for password\n"
			"  -W, --password           force password prompt\n\n"
			"The usual libpq environment variables (PGHOST, PGPORT, PGDATABASE, PGUSER,\n"
			"PGSERVICE, ...) apply.\n\n"
			"Exit status: 0 done, 1 error (from the server or the connection, or a\n"
			"refused confirmation), 2 bad usage.\n");
}

/* Bad usage: say why, print the usage on stderr, exit 2. */
static void usage_error(const char *fmt,...) __attribute__((format(printf, 1, 2), noreturn));

static void
usage_error(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "%s: error: ", PROGNAME);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n\n", stderr);
	usage(stderr);
	exit(EXIT_USAGE);
}

/*
 * Whether `typed`, argv[optind - 1] after getopt_long failed on the option
 * whose value is `val`, is that long option (as typed, perhaps
 * abbreviated).  A letter that fails inside a group of short options
 * (-xj) is not passed over yet, and argv[optind - 1] is then the argument
 * before the group, which may be another long option.
 */
static bool
typed_long_option(const char *typed, int val, const struct option *options)
{
	size_t		len;

	if (strncmp(typed, "--", 2) != 0)
		return false;
	typed += 2;
	len = strcspn(typed, "=");
	for (; options->name != NULL; options++)
		if (options->val == val && len > 0 && strncmp(options->name, typed, len) == 0)
			return true;
	return false;
}

/*
 * Refuse an option the command does not use: `retry --json` printing text,
 * or `watch -y`, would leave the caller believing it had taken effect.
 */
static void
check_options_apply(const Options *opt, const char *command)
{
	bool		lists = strcmp(command, "dlq") == 0 || strcmp(command, "unknown") == 0;

	if (opt->json && !lists && strcmp(command, "status") != 0 && strcmp(command, "watch") != 0)
		usage_error("option --json does not apply to %s", command);
	if (opt->paged && !lists)
		usage_error("options --limit, --offset and --after apply to dlq and unknown, not to %s", command);
	if (opt->after && opt->offset_given)
		usage_error("options --after and --offset cannot be used together");
	if (opt->yes && strcmp(command, "discard") != 0)
		usage_error("option --yes applies to discard, not to %s", command);
	if (opt->ready && strcmp(command, "watch") != 0)
		usage_error("option --ready applies to watch, not to %s", command);
	if (opt->state && strcmp(command, "retry") != 0 && strcmp(command, "discard") != 0)
		usage_error("option --state applies to retry and discard, not to %s", command);
}

/*
 * Whether `state` names a state that the command can act on: a send is
 * retried from dead, failed or unknown, and discarded from any state.
 */
static bool
state_applies(const char *state, const char *command)
{
	static const char *const states[] = {"dead", "failed", "unknown", "pending", "sending", "sent", NULL};
	int			retryable = 3;

	for (int i = 0; states[i] != NULL; i++)
		if (strcmp(state, states[i]) == 0)
			return i < retryable || strcmp(command, "discard") == 0;
	return false;
}

static void
finish(int code)
{
	if (conn != NULL)
		PQfinish(conn);
	exit(code);
}

/*
 * Write out what stdout holds.  A write that failed (a full disk) ends the
 * program with status 1: a script must not take a truncated report, or none,
 * for success.
 */
static void
flush_output(void)
{
	if (fflush(stdout) != 0 || ferror(stdout))
	{
		/* watch told to stop while its reader was not reading: a stop */
		if (errno == EINTR && stop_requested)
			finish(EXIT_DONE);
		error("could not write the output: %s", strerror(errno));
		finish(EXIT_ERROR);
	}
}

/*
 * Report a failed query the way psql does, field by field, then exit 1.
 * The server's messages of durable never contain secrets, and this tool
 * never touches the session functions.
 */
static void
report_result_error(const PGresult *res)
{
	const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	const char *sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *det = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
	const char *hin = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_HINT) : NULL;
	char		code[32];

	if (primary == NULL)
	{
		const char *msg = PQerrorMessage(conn);

		message_lines("error", msg[strspn(msg, "\n")] != '\0' ? msg : "query failed", "");
		return;
	}
	snprintf(code, sizeof(code), " (SQLSTATE %s)", sqlstate ? sqlstate : "?????");
	message_lines("error", primary, code);
	if (det)
		message_lines("detail", det, "");
	if (hin)
		message_lines("hint", hin, "");
	else if (sqlstate && strcmp(sqlstate, "42501") == 0)
		hint("Ask an administrator for the grants this command needs (see the README, \"Privileges\").");
}

/*
 * A notice of the server's (a WARNING of durable's, say), shown as its
 * errors are: "durablectl: warning: ...", escaped, with its detail and
 * hint.  Notices sent while the connection starts, before the receiver is
 * set, are printed by libpq as they come, as psql prints them.
 */
static void
notice_receiver(void *arg, const PGresult *res)
{
	const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *det = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	const char *hin = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);
	char		level[16];
	size_t		i;

	(void) arg;
	if (primary == NULL)
	{
		message_lines("warning", PQresultErrorMessage(res), "");
		return;
	}
	for (i = 0; severity != NULL && severity[i] != '\0' && i < sizeof(level) - 1; i++)
		level[i] = (severity[i] >= 'A' && severity[i] <= 'Z') ? severity[i] - 'A' + 'a' :
			(severity[i] >= '0' && severity[i] <= '9') ? severity[i] : '?';
	level[i] = '\0';
	message_lines(i > 0 ? level : "notice", primary, "");
	if (det)
		message_lines("detail", det, "");
	if (hin)
		message_lines("hint", hin, "");
}

/*
 * Run a statement with text parameters and return its result; any status
 * but `expected` is reported and ends the program with status 1.
 */
static PGresult *
run(const char *sql, int nparams, const char *const *params, ExecStatusType expected)
{
	PGresult   *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);

	if (res == NULL || PQresultStatus(res) != expected)
	{
		report_result_error(res);
		PQclear(res);
		finish(EXIT_ERROR);
	}
	return res;
}

/*
 * As run(), but a failure whose SQLSTATE is one of `tolerated` (a
 * NULL-terminated list) is returned to the caller as NULL, with the
 * SQLSTATE in *failed_state when that is not NULL, instead of ending the
 * program; any other failure still does.
 */
static PGresult *
try_run(const char *sql, int nparams, const char *const *params,
		const char *const *tolerated, char (*failed_state)[6])
{
	PGresult   *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
	const char *state;
	bool		is_tolerated = false;

	if (res != NULL && (PQresultStatus(res) == PGRES_TUPLES_OK ||
						PQresultStatus(res) == PGRES_COMMAND_OK))
		return res;
	state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	for (int i = 0; state != NULL && tolerated[i] != NULL; i++)
		is_tolerated |= strcmp(state, tolerated[i]) == 0;
	if (!is_tolerated || PQstatus(conn) == CONNECTION_BAD)
	{
		report_result_error(res);
		PQclear(res);
		finish(EXIT_ERROR);
	}
	if (failed_state)
		snprintf(*failed_state, sizeof(*failed_state), "%s", state);
	PQclear(res);
	return NULL;
}

/*
 * Read a password from the terminal without echo, as PostgreSQL's
 * simple_prompt does.  Returns a malloc'd string.
 */
static char *
prompt_password(void)
{
	FILE	   *tty = fopen("/dev/tty", "r+");
	FILE	   *in = tty ? tty : stdin;
	FILE	   *out = tty ? tty : stderr;
	struct termios saved,
				quiet;
	bool		restore = false;
	char		buf[1024];
	size_t		len;

	fputs("Password: ", out);
	fflush(out);
	if (tcgetattr(fileno(in), &saved) == 0)
	{
		quiet = saved;
		quiet.c_lflag &= ~ECHO;
		restore = (tcsetattr(fileno(in), TCSAFLUSH, &quiet) == 0);
	}
	if (fgets(buf, sizeof(buf), in) == NULL)
		buf[0] = '\0';
	if (restore)
		tcsetattr(fileno(in), TCSAFLUSH, &saved);
	fputc('\n', out);
	fflush(out);
	if (tty)
		fclose(tty);
	len = strlen(buf);
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		buf[--len] = '\0';
	return strdup(buf);
}

/*
 * Whether version a ("major.minor") is older than b; false when either is
 * not of that form (a durablectl built without a version).
 */
static bool
version_older(const char *a, const char *b)
{
	int			a_major,
				a_minor,
				b_major,
				b_minor;
	char		end;

	if (sscanf(a, "%d.%d%c", &a_major, &a_minor, &end) != 2 ||
		sscanf(b, "%d.%d%c", &b_major, &b_minor, &end) != 2)
		return false;
	return a_major < b_major || (a_major == b_major && a_minor < b_minor);
}

/*
 * PQconnectdbParams, with what libpq prints meanwhile shown escaped.  The
 * server may send notices while the connection starts (a setting of the
 * role's or the database's it cannot apply, a collation version mismatch),
 * which name a database or a setting another role chose; libpq hands them
 * to its default notice processor, which prints them to stderr as they are,
 * terminal controls included.  A receiver of our own cannot be set before
 * the connection exists, and starting it with PQconnectStartParams would
 * lose libpq's own connect_timeout, which moves on to the next host of a
 * list: so stderr goes to a temporary file meanwhile, shown escaped after.
 */
static PGconn *
connect_showing_notices(const char *const *keywords, const char *const *values)
{
	FILE	   *caught = NULL;
	int			saved = -1;
	PGconn	   *conn;

	fflush(stderr);
	/* (with no stderr open, the file would take its descriptor) */
	if (fcntl(STDERR_FILENO, F_GETFD) != -1 && (caught = tmpfile()) != NULL &&
		(saved = dup(STDERR_FILENO)) >= 0 && dup2(fileno(caught), STDERR_FILENO) < 0)
	{
		close(saved);
		saved = -1;
	}
	conn = PQconnectdbParams(keywords, values, 1);
	if (saved >= 0)
	{
		char		text[8192];
		size_t		len;

		fflush(stderr);
		(void) dup2(saved, STDERR_FILENO);
		close(saved);
		rewind(caught);
		len = fread(text, 1, sizeof(text) - 1, caught);
		text[len] = '\0';
		if (len > 0)
			message_lines("server", text, fgetc(caught) == EOF ? "" : " [...]");
	}
	if (caught != NULL)
		fclose(caught);
	return conn;
}

/*
 * Connect with the libpq options and environment, prompting for a password
 * when the server asks for one (unless -w), or up front with -W, in UTF-8
 * whatever the environment says (SQL_ASCII from a SQL_ASCII database).  Then
 * pin an empty search_path and check that the extension is installed;
 * returns its version (malloc'd).
 */
static char *
connect_db(const Options *opt)
{
	const char *keywords[12];
	const char *values[12];
	char	   *password = NULL;
	PGresult   *res;
	const char *server_encoding;
	char	   *version;

	if (opt->password_mode > 0)
		password = prompt_password();

	for (;;)
	{
		int			n = 0;

		keywords[n] = "host";
		values[n++] = opt->host;
		keywords[n] = "port";
		values[n++] = opt->port;
		keywords[n] = "user";
		values[n++] = opt->username;
		keywords[n] = "password";
		values[n++] = password;

		/*
		 * TCP keepalives, so that a network that died under a silent watch
		 * ends it (status 1) within two minutes rather than the kernel's two
		 * hours; before dbname, so that a connection string's own win.
		 */
		keywords[n] = "keepalives";
		values[n++] = "1";
		keywords[n] = "keepalives_idle";
		values[n++] = "60";
		keywords[n] = "keepalives_interval";
		values[n++] = "10";
		keywords[n] = "keepalives_count";
		values[n++] = "6";
		keywords[n] = "dbname";
		values[n++] = opt->dbname;
		keywords[n] = "fallback_application_name";
		values[n++] = PROGNAME;
		/* After dbname, so that it wins: text.c reads and writes UTF-8. */
		keywords[n] = "client_encoding";
		values[n++] = "UTF8";
		keywords[n] = NULL;
		values[n] = NULL;

		conn = connect_showing_notices(keywords, values);
		if (conn == NULL)
		{
			error("out of memory");
			exit(EXIT_ERROR);
		}
		if (PQstatus(conn) == CONNECTION_BAD && PQconnectionNeedsPassword(conn) &&
			password == NULL && opt->password_mode >= 0)
		{
			PQfinish(conn);
			conn = NULL;
			password = prompt_password();
			continue;
		}
		break;
	}
	free(password);

	if (PQstatus(conn) == CONNECTION_BAD)
	{
		message_lines("error", PQerrorMessage(conn), "");
		finish(EXIT_ERROR);
	}

	/*
	 * A SQL_ASCII database holds any bytes, which the server refuses to send
	 * as UTF-8 (every listing with such a byte failed, and a NOTIFY with one
	 * ended watch's connection): take them as they are, text.c escapes what
	 * is not UTF-8, and keys typed with them reach the server unchanged.
	 */
	server_encoding = PQparameterStatus(conn, "server_encoding");
	if (server_encoding != NULL && strcmp(server_encoding, "SQL_ASCII") == 0 &&
		PQsetClientEncoding(conn, "SQL_ASCII") != 0)
	{
		error("could not set the client encoding to SQL_ASCII: %s", PQerrorMessage(conn));
		finish(EXIT_ERROR);
	}

	PQsetNoticeReceiver(conn, notice_receiver, NULL);
	res = run("SELECT pg_catalog.set_config('search_path', '', false)", 0, NULL, PGRES_TUPLES_OK);
	PQclear(res);

	res = run("SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname = 'durable'",
			  0, NULL, PGRES_TUPLES_OK);
	if (PQntuples(res) == 0)
	{
		error("extension \"durable\" is not installed in database \"%s\"", shown(PQdb(conn)));
		hint("Connect to the bot's database with -d, or run CREATE EXTENSION durable there.");
		PQclear(res);
		finish(EXIT_ERROR);
	}
	version = strdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (version == NULL)
	{
		error("out of memory");
		finish(EXIT_ERROR);
	}
	/* (the listings read columns that older schemas lack) */
	if (version_older(version, DURABLECTL_VERSION))
	{
		error("this database has durable %s, older than this durablectl (%s)",
			  shown(version), DURABLECTL_VERSION);
		hint("Run ALTER EXTENSION durable UPDATE in this database.");
		finish(EXIT_ERROR);
	}
	return version;
}

/* Parse a non-negative decimal number no larger than max; false if it is not one. */
static bool
parse_count(const char *s, long max, long *result)
{
	char	   *end;
	long		v;

	if (s == NULL || *s == '\0' || *s == '-' || *s == '+')
		return false;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < 0 || v > max)
		return false;
	*result = v;
	return true;
}

/*
 * An inbox record id, a positive bigint in decimal digits, returned without
 * its leading zeros (the id as the server prints it, so "007" is echoed as 7);
 * NULL when the text is not one.
 */
static const char *
record_id_digits(const char *s)
{
	size_t		len;
	size_t		i;

	s += strspn(s, "0");
	len = strlen(s);
	if (len == 0 || len > 19)
		return NULL;
	for (i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return NULL;
	/* 19 digits: at most bigint's largest (equal lengths compare as numbers) */
	return len < 19 || strcmp(s, "9223372036854775807") <= 0 ? s : NULL;
}

/*
 * Journal text (a key, a chat id, an owner: written by bots) as shown on a
 * terminal (see text.c).  NULL stays NULL.  The result lives until the
 * SHOWN_SLOTS-th call after.
 */
#define SHOWN_SLOTS 8
static const char *
shown(const char *text)
{
	static char *slots[SHOWN_SLOTS];
	static int	next;
	char	   *out;

	if (text == NULL)
		return NULL;
	free(slots[next]);
	out = slots[next] = shown_alloc(text);
	next = (next + 1) % SHOWN_SLOTS;
	if (out == NULL)
	{
		fprintf(stderr, "%s: out of memory\n", PROGNAME);
		exit(EXIT_ERROR);
	}
	return out;
}

/*
 * Print text that may hold newlines with every line after the first
 * indented, and the rest as shown() shows it.  Clipped after clip bytes
 * (0: never), at a character's end.  text may be the head of a longer text:
 * cut ("t") says so, and total_bytes is then the whole text's size.
 */
static void
print_indented(const char *label, const char *text, size_t clip, const char *cut,
			   const char *total_bytes)
{
	size_t		len = strlen(text);
	size_t		i = 0;

	printf("  %s: ", label);
	while (i < len && (clip == 0 || i < clip))
	{
		char		out[SHOWN_CHAR_MAX];
		size_t		n;

		if (text[i] == '\n')
		{
			fputs("\n    ", stdout);
			i++;
			continue;
		}
		i += shown_char(text + i, out, &n);
		fwrite(out, 1, n, stdout);
	}
	if (i < len || (cut != NULL && strcmp(cut, "t") == 0))
	{
		if (total_bytes != NULL)
			printf("... (%s bytes)", total_bytes);
		else
			printf("... (%zu bytes)", len);
	}
	putchar('\n');
}

/* Value of a column by name in row 0 (asserts the column exists). */
static const char *
col(const PGresult *res, int row, const char *name)
{
	int			c = PQfnumber(res, name);

	if (c < 0)
	{
		error("internal error: column \"%s\" missing from the result", name);
		finish(EXIT_ERROR);
	}
	return PQgetisnull(res, row, c) ? NULL : PQgetvalue(res, row, c);
}

static long long
col_ll(const PGresult *res, int row, const char *name)
{
	const char *v = col(res, row, name);

	return v ? atoll(v) : 0;
}

/* ------------------------------------------------------------------------
 * status
 */

/*
 * status: standing() and metrics() in one report.  Without preloading
 * (55000), or in a database that got no shared-memory slot (53400: more
 * databases with durable than durable.max_databases, and no worker either),
 * metrics() is unavailable; the report then says why instead of failing,
 * because the gauges alone are still worth having.
 */
static int
cmd_status(const Options *opt, const char *extversion)
{
	static const char *const no_counters[] = {"55000", "53400", NULL};
	PGresult   *st;
	PGresult   *mt;
	char		counters_state[6] = "";
	long long	inbox_dead,
				outbox_dead,
				unknown,
				stale = 0;
	bool		over_bound;
	const char *attention[5];
	char		lines[5][256];
	int			nattention = 0;
	int			i;

	st = run("SELECT s.*,"
			 " pg_catalog.to_json(s) AS json,"
			 " pg_catalog.date_trunc('second', s.oldest_pending) AS oldest,"
			 " pg_catalog.date_trunc('second', pg_catalog.clock_timestamp() - s.oldest_pending) AS waited,"
			 " pg_catalog.current_database() AS db"
			 " FROM durable.standing() s",
			 0, NULL, PGRES_TUPLES_OK);
	mt = try_run("SELECT m.*, pg_catalog.to_json(m) AS json,"
				 " pg_catalog.date_trunc('second', m.since) AS since_s"
				 " FROM durable.metrics() m",
				 0, NULL, no_counters, &counters_state);

	inbox_dead = col_ll(st, 0, "inbox_dead");
	outbox_dead = col_ll(st, 0, "outbox_dead");
	unknown = col_ll(st, 0, "outbox_unknown");
	over_bound = strcmp(col(st, 0, "over_bound"), "t") == 0;
	if (mt)
		stale = col_ll(mt, 0, "stale_leases");

	/* What to alert on: the README's list, in the same order. */
	if (inbox_dead + outbox_dead > 0)
	{
		snprintf(lines[nattention], sizeof(lines[0]),
				 "%lld dead inbox and %lld dead outbox records (durablectl dlq inbox|outbox)",
				 inbox_dead, outbox_dead);
		attention[nattention] = lines[nattention];
		nattention++;
	}
	if (unknown > 0)
	{
		snprintf(lines[nattention], sizeof(lines[0]),
				 "%lld ambiguous sends: check with the provider (durablectl unknown)", unknown);
		attention[nattention] = lines[nattention];
		nattention++;
	}
	if (over_bound)
	{
		snprintf(lines[nattention], sizeof(lines[0]), "over bound: %s",
				 col(st, 0, "why") ? col(st, 0, "why") : "");
		attention[nattention] = lines[nattention];
		nattention++;
	}
	if (strcmp(counters_state, "53400") == 0)
	{
		snprintf(lines[nattention], sizeof(lines[0]),
				 "no worker (no lease recovery, no retention) and no counters: this database got no "
				 "shared-memory slot; raise durable.max_databases (a restart)");
		attention[nattention] = lines[nattention];
		nattention++;
	}
	if (stale > 0)
	{
		snprintf(lines[nattention], sizeof(lines[0]),
				 "%lld stale confirmations rejected since the counters were reset (replicas outliving their leases)",
				 stale);
		attention[nattention] = lines[nattention];
		nattention++;
	}

	if (opt->json)
	{
		/* escaped as a dlq page's strings are (print_json_page) */
		fputs("{\"database\": ", stdout);
		put_json_string(stdout, col(st, 0, "db"));
		printf(", \"extension_version\": \"%s\", \"standing\": ", extversion);
		put_json_object(stdout, col(st, 0, "json"));
		fputs(", \"counters\": ", stdout);
		if (mt)
			put_json_object(stdout, col(mt, 0, "json"));
		else
			fputs("null", stdout);
		fputs(", \"attention\": [", stdout);
		for (i = 0; i < nattention; i++)
		{
			/* the lines are ours, but the bound text comes from the server: escape */
			if (i > 0)
				fputs(", ", stdout);
			put_json_string(stdout, attention[i]);
		}
		printf("]}\n");
	}
	else
	{
		printf("durable %s in database \"%s\"\n\n", extversion, shown(PQdb(conn)));
		printf("Inbox:   %lld pending, %lld leased, %lld dead\n",
			   col_ll(st, 0, "inbox_pending"), col_ll(st, 0, "inbox_leased"), inbox_dead);
		printf("Outbox:  %lld pending, %lld sending, %lld failed, %lld dead, %lld unknown\n",
			   col_ll(st, 0, "outbox_pending"), col_ll(st, 0, "outbox_sending"),
			   col_ll(st, 0, "outbox_failed"), outbox_dead, unknown);
		if (col(st, 0, "oldest"))
			printf("Oldest waiting record: %s (waiting %s)\n", col(st, 0, "oldest"), col(st, 0, "waited"));
		else
			printf("Oldest waiting record: none\n");
		printf("Bounds:  %s\n", over_bound ? "EXCEEDED" : "ok");

		if (mt)
		{
			static const char *const counters[] = {
				"inbound_journaled", "inbound_duplicates", "inbound_replayed", "inbound_dead",
				"outbox_journaled", "outbox_deduped", "outbox_retried", "outbox_deferred",
				"outbox_dead", "outbox_ambiguous", "outbox_bypassed", "stale_leases",
				"outbox_diverged"
			};

			printf("\nCounters since %s:\n", col(mt, 0, "since_s"));
			for (i = 0; i < (int) (sizeof(counters) / sizeof(counters[0])); i++)
				printf("  %-20s %s\n", counters[i], col(mt, 0, counters[i]));
		}
		else if (strcmp(counters_state, "53400") == 0)
			printf("\nCounters: unavailable (this database got no shared-memory slot, and has no worker: "
				   "more databases have durable than durable.max_databases)\n");
		else
			printf("\nCounters: unavailable (durable is not in shared_preload_libraries)\n");

		if (nattention == 0)
			printf("\nNothing needs attention.\n");
		else
		{
			printf("\nNeeds attention:\n");
			for (i = 0; i < nattention; i++)
				printf("  - %s\n", attention[i]);
		}
	}
	PQclear(st);
	PQclear(mt);
	return EXIT_DONE;
}

/* ------------------------------------------------------------------------
 * Listings: dlq inbox, dlq outbox, unknown
 */

/*
 * A listing's records past the --after cursor, parameter param (NULL: all
 * of them).  A statement of libpq's unnamed kind is planned with its
 * parameters' values, so a NULL cursor folds away and a given one is the
 * index scan's start.
 */
#define AFTER_CURSOR(alias, param) \
	"(" param "::pg_catalog.int8 IS NULL OR " alias ".id > " param "::pg_catalog.int8)"

/*
 * A page of a listing: its records, how many records the listing holds, and
 * how many of them come before the page (those at or before --after, and
 * the --offset skipped), all read in one snapshot.
 */
typedef struct Page
{
	PGresult   *res;
	long long	total;
	long long	before;
} Page;

/* The id of the page's last record: where the next page starts. */
static const char *
page_last_id(const Page *page)
{
	int			n = PQntuples(page->res);

	return n > 0 ? col(page->res, n - 1, "id") : NULL;
}

static bool
page_has_next(const Page *page)
{
	return PQntuples(page->res) > 0 && page->before + PQntuples(page->res) < page->total;
}

/*
 * "(showing 51-100 of 120; next page: --after=4711)" and friends.  The next
 * page is named by its cursor, not its offset: an offset counts records,
 * and one retried or replayed between two pages would shift the rest under
 * it and hide one of them from the operator.
 */
static void
print_page_footer(const Page *page, const Options *opt)
{
	int			shown = PQntuples(page->res);

	if (shown == 0 && page->total > 0)
	{
		if (opt->after)
			printf("(no records after id %s; there are %lld)\n", opt->after, page->total);
		else
			printf("(no records at offset %ld; there are %lld)\n", opt->offset, page->total);
	}
	else if (shown > 0 && (page->before > 0 || shown < page->total))
	{
		printf("(showing %lld-%lld of %lld", page->before + 1, page->before + shown, page->total);
		if (page_has_next(page))
			printf("; next page: --after=%s", page_last_id(page));
		printf(")\n");
	}
}

/*
 * A page of records in JSON: one object with the total, the next page's
 * cursor and the records as the server renders them (json_build_object),
 * their strings' characters written as put_json_string writes them: the
 * server escapes only C0 controls, and a bot's DEL, C1 controls, line
 * separators or bidi overrides would otherwise reach the operator's
 * terminal.
 */
static void
print_json_page(const Page *page, const Options *opt)
{
	int			i;

	printf("{\"total\": %lld, \"offset\": %ld, \"limit\": %ld, \"after\": %s, \"next_after\": %s, \"records\": [",
		   page->total, opt->offset, opt->limit, opt->after ? opt->after : "null",
		   page_has_next(page) ? page_last_id(page) : "null");
	for (i = 0; i < PQntuples(page->res); i++)
	{
		if (i > 0)
			fputs(", ", stdout);
		put_json_object(stdout, col(page->res, i, "json"));
	}
	printf("]}\n");
}

/*
 * A listing's page and its counts, read in one snapshot so that they agree
 * while records come and go.  The count statement takes the first
 * count_nparams of params and returns count and after (the records past the
 * cursor).
 */
static Page
run_page(const char *count_sql, int count_nparams, const char *page_sql,
		 int nparams, const char *const *params, const Options *opt)
{
	Page		page;
	PGresult   *res;

	PQclear(run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, PGRES_COMMAND_OK));
	res = run(count_sql, count_nparams, params, PGRES_TUPLES_OK);
	page.total = col_ll(res, 0, "count");
	page.before = page.total - col_ll(res, 0, "after") + opt->offset;
	PQclear(res);
	page.res = run(page_sql, nparams, params, PGRES_TUPLES_OK);
	PQclear(run("COMMIT", 0, NULL, PGRES_COMMAND_OK));
	return page;
}

static int
cmd_dlq_inbox(const Options *opt)
{
	char		limit[32],
				offset[32];
	const char *params[4] = {opt->after, limit, offset, opt->json ? "true" : "false"};
	Page		page;
	PGresult   *res;
	int			i;

	snprintf(limit, sizeof(limit), "%ld", opt->limit);
	snprintf(offset, sizeof(offset), "%ld", opt->offset);
	/*
	 * (finished but not done: the predicate of inbox_dead_idx, alone, so
	 * that the total is counted from the index without reading the records)  The text
	 * listing shows the payload's first PAYLOAD_CLIP bytes and its size: it
	 * fetches no more (a page of large payloads would fill the memory of a
	 * tool that prints a few lines of each), and the JSON only for --json.
	 */
	page = run_page("SELECT pg_catalog.count(*) AS count,"
					" pg_catalog.count(*) FILTER (WHERE " AFTER_CURSOR("i", "$1") ") AS after"
					" FROM ONLY durable.inbox i"
					" WHERE i.finished_at IS NOT NULL AND i.done_at IS NULL", 1,
				   "SELECT i.id, i.source, i.message_id, i.chat_id, i.kind, i.attempts, i.owner,"
				   " i.error, " PAYLOAD_HEAD("i") ","
				   " pg_catalog.date_trunc('second', i.created_at) AS created,"
				   " CASE WHEN $4::pg_catalog.bool THEN"
				   " pg_catalog.json_build_object('id', i.id, 'source', i.source,"
				   "   'message_id', i.message_id, 'chat_id', i.chat_id, 'kind', i.kind,"
				   "   'attempts', i.attempts, 'owner', i.owner, 'error', i.error,"
				   "   'payload', i.payload, 'created_at', i.created_at) END AS json"
				   " FROM ONLY durable.inbox i"
				   " WHERE i.finished_at IS NOT NULL AND i.done_at IS NULL AND i.state = 'dead'"
				   " AND " AFTER_CURSOR("i", "$1")
				   " ORDER BY i.id LIMIT $2::pg_catalog.int8 OFFSET $3::pg_catalog.int8",
				   4, params, opt);
	res = page.res;

	if (opt->json)
		print_json_page(&page, opt);
	else
	{
		printf("Dead inbox records: %lld\n", page.total);
		for (i = 0; i < PQntuples(res); i++)
		{
			printf("\nid %s  source %s  message %s  chat %s  kind %s\n",
				   col(res, i, "id"), shown(col(res, i, "source")),
				   col(res, i, "message_id") ? shown(col(res, i, "message_id")) : "(none)",
				   shown(col(res, i, "chat_id")), shown(col(res, i, "kind")));
			printf("  attempts %s, last owner %s, journaled %s\n", col(res, i, "attempts"),
				   col(res, i, "owner") ? shown(col(res, i, "owner")) : "(none)", col(res, i, "created"));
			print_indented("error", col(res, i, "error") ? col(res, i, "error") : "(none)", 0, NULL, NULL);
			print_indented("payload", col(res, i, "payload"), PAYLOAD_CLIP, col(res, i, "payload_cut"),
						   col(res, i, "payload_bytes"));
		}
		if (PQntuples(res) > 0)
			printf("\n");
		print_page_footer(&page, opt);
		if (page.total > 0)
			printf("Replay one with: durablectl replay ID\n");
	}
	PQclear(res);
	return EXIT_DONE;
}

/*
 * The outbox listings: dead sends (dlq outbox) or ambiguous ones (unknown).
 * The state is a parameter like every other value.
 */
static int
cmd_outbox_list(const Options *opt, const char *state)
{
	char		limit[32],
				offset[32];
	const char *params[5] = {state, opt->after, limit, offset, opt->json ? "true" : "false"};
	Page		page;
	PGresult   *res;
	bool		dead = strcmp(state, "dead") == 0;
	int			i;

	snprintf(limit, sizeof(limit), "%ld", opt->limit);
	snprintf(offset, sizeof(offset), "%ld", opt->offset);
	page = run_page("SELECT pg_catalog.count(*) AS count,"
					" pg_catalog.count(*) FILTER (WHERE " AFTER_CURSOR("o", "$2") ") AS after"
					" FROM ONLY durable.outbox o WHERE o.state = $1", 2,
				   "SELECT o.id, o.key, o.chat_id, o.attempts, o.owner, o.error, o.inbound_id,"
				   " " PAYLOAD_HEAD("o") ","
				   " pg_catalog.date_trunc('second', o.created_at) AS created,"
				   " CASE WHEN $5::pg_catalog.bool THEN"
				   " pg_catalog.json_build_object('id', o.id, 'key', o.key, 'chat_id', o.chat_id,"
				   "   'attempts', o.attempts, 'owner', o.owner, 'error', o.error,"
				   "   'inbound_id', o.inbound_id, 'payload', o.payload,"
				   "   'created_at', o.created_at) END AS json"
				   " FROM ONLY durable.outbox o WHERE o.state = $1 AND " AFTER_CURSOR("o", "$2")
				   " ORDER BY o.id LIMIT $3::pg_catalog.int8 OFFSET $4::pg_catalog.int8",
				   5, params, opt);
	res = page.res;

	if (opt->json)
		print_json_page(&page, opt);
	else
	{
		printf(dead ? "Dead sends: %lld\n" : "Ambiguous sends (the provider may or may not have them): %lld\n",
			   page.total);
		for (i = 0; i < PQntuples(res); i++)
		{
			printf("\nid %s  key %s  chat %s\n", col(res, i, "id"), shown(col(res, i, "key")),
				   shown(col(res, i, "chat_id")));
			printf("  attempts %s, last owner %s, journaled %s", col(res, i, "attempts"),
				   col(res, i, "owner") ? shown(col(res, i, "owner")) : "(none)", col(res, i, "created"));
			if (col(res, i, "inbound_id"))
				printf(", reply to inbox id %s", col(res, i, "inbound_id"));
			printf("\n");
			if (col(res, i, "error"))
				print_indented("error", col(res, i, "error"), 0, NULL, NULL);
			print_indented("payload", col(res, i, "payload"), PAYLOAD_CLIP, col(res, i, "payload_cut"),
						   col(res, i, "payload_bytes"));
		}
		if (PQntuples(res) > 0)
			printf("\n");
		print_page_footer(&page, opt);
		if (page.total > 0)
			printf(dead ? "Send one again with: durablectl retry KEY (or drop it: durablectl discard KEY)\n"
				   : "Check each with the provider, then: durablectl retry --state=unknown KEY (it was not sent)\n"
				   "or durablectl discard --state=unknown KEY (it was)\n");
	}
	PQclear(res);
	return EXIT_DONE;
}

/* ------------------------------------------------------------------------
 * Actions: replay, retry, discard
 */

static int
cmd_replay(const char *id)
{
	const char *params[1] = {id};
	PGresult   *res;

	res = run("SELECT durable.inbox_replay($1::pg_catalog.int8)", 1, params, PGRES_TUPLES_OK);
	PQclear(res);
	printf("inbox record %s is pending again\n", id);
	return EXIT_DONE;
}

/*
 * Call durable.outbox_retry or durable.outbox_discard (fn) on the send
 * only as the operator expects it: in `state` (--state), and still the row
 * version `version` shown to the operator (NULL: no such expectation).
 * Any change of the row gives it another xmin; in a repeatable read
 * snapshot the call fails (40001) rather than act on a version written
 * since by a transaction that was still open when the statement started,
 * and that it waited for.  Returns the call's one row, or NULL when the
 * send is not as expected (gone, or changed).
 */
static PGresult *
outbox_act_as_expected(const char *fn, const char *key, const char *state, const char *version)
{
	static const char *const changed_since[] = {"40001", NULL};
	const char *params[3] = {key, state, version};
	char		sql[512];
	PGresult   *res;

	snprintf(sql, sizeof(sql),
			 "SELECT durable.%s(o.key) AS result FROM ONLY durable.outbox o"
			 " WHERE o.key = $1"
			 " AND ($2::pg_catalog.text IS NULL OR o.state OPERATOR(pg_catalog.=) $2::pg_catalog.text)"
			 " AND ($3::pg_catalog.xid IS NULL OR o.xmin OPERATOR(pg_catalog.=) $3::pg_catalog.xid)",
			 fn);
	PQclear(run("BEGIN ISOLATION LEVEL REPEATABLE READ", 0, NULL, PGRES_COMMAND_OK));
	res = try_run(sql, 3, params, changed_since, NULL);
	if (res != NULL && PQntuples(res) != 1)
	{
		PQclear(res);
		res = NULL;
	}
	PQclear(run(res != NULL ? "COMMIT" : "ROLLBACK", 0, NULL, PGRES_COMMAND_OK));
	return res;
}

/* A send found in another state than --state: say so and end (status 1). */
static void
outbox_state_mismatch(const char *key, const char *now, const char *state, const char *verb)
{
	error("send \"%s\" is %s, not %s: not %s", shown(key), now, state, verb);
	hint("Look at it again before you decide (durablectl status, unknown, dlq outbox).");
	finish(EXIT_ERROR);
}

/*
 * A send that outbox_act_as_expected left alone: say how it is now and
 * end (status 1); returns when it is gone altogether.  `asked`: the
 * operator was shown the send and asked about it.
 */
static void
outbox_not_as_expected(const char *key, const char *verb, const char *state, bool asked)
{
	const char *params[1] = {key};
	PGresult   *res = run("SELECT o.state, o.attempts FROM ONLY durable.outbox o WHERE o.key = $1",
						  1, params, PGRES_TUPLES_OK);
	const char *now;

	if (PQntuples(res) == 0)
	{
		PQclear(res);
		return;
	}
	now = col(res, 0, "state");
	if (state != NULL && strcmp(now, state) != 0)
		outbox_state_mismatch(key, now, state, verb);
	if (asked)
	{
		error("send \"%s\" changed while you were asked (it is now %s, %s attempts): not %s",
			  shown(key), now, col(res, 0, "attempts"), verb);
		hint("Run discard again to see it as it is now.");
	}
	else
	{
		error("send \"%s\" changed as it was being %s (it is now %s, %s attempts): not %s",
			  shown(key), verb, now, col(res, 0, "attempts"), verb);
		hint("Run the command again to act on it as it is now.");
	}
	PQclear(res);
	finish(EXIT_ERROR);
}

/*
 * retry; with --state, only a send in that state now: an operator who saw
 * a failed send (never delivered) must not resend it once a later attempt
 * made it unknown (perhaps delivered).  --state reads the outbox, so it
 * needs SELECT on it besides EXECUTE on outbox_retry.
 */
static int
cmd_retry(const Options *opt, const char *key)
{
	const char *params[1] = {key};
	PGresult   *res;

	if (opt->state == NULL)
		res = run("SELECT durable.outbox_retry($1)", 1, params, PGRES_TUPLES_OK);
	else if ((res = outbox_act_as_expected("outbox_retry", key, opt->state, NULL)) == NULL)
	{
		outbox_not_as_expected(key, "retried", opt->state, false);
		error("no send with key \"%s\"", shown(key));
		finish(EXIT_ERROR);
	}
	PQclear(res);
	printf("send \"%s\" is due again\n", shown(key));
	return EXIT_DONE;
}

/* An answer that confirms: y or yes, any case, alone on its line. */
static bool
confirmed(const char *answer)
{
	size_t		len = strcspn(answer, "\r\n");

	return (len == 1 && strncasecmp(answer, "y", 1) == 0) ||
		(len == 3 && strncasecmp(answer, "yes", 3) == 0);
}

/*
 * discard: show the send when this role may read the outbox, ask unless
 * --yes, then call outbox_discard.  Without a terminal to ask on and
 * without --yes it refuses (status 1): a script must say --yes itself.
 * A send shown is discarded only as it was shown: one that changed while
 * the operator was asked (another operator's retry made it pending, its
 * sender settled it) is left alone, since the answer was about the send
 * as it was.  A key with no send is not asked about.  With --state, only a
 * send in that state is discarded (and one shown in another state is not
 * asked about): a script that discards an unknown send the provider has
 * must not discard it once another operator's retry made it pending.
 */
static int
cmd_discard(const Options *opt, const char *key)
{
	static const char *const no_select[] = {"42501", NULL};
	const char *params[2] = {key, NULL};
	char		shown_version[16] = "";	/* an xid's decimal digits */
	PGresult   *res;
	bool		existed;

	if (!opt->yes)
	{
		char		answer[16] = "";

		if (!isatty(STDIN_FILENO))
		{
			error("discarding send \"%s\" needs confirmation", shown(key));
			hint("Run it on a terminal to be asked, or pass --yes.");
			finish(EXIT_ERROR);
		}
		/* a role with EXECUTE but no SELECT on the outbox is asked all the same */
		res = try_run("SELECT o.state, o.chat_id, o.attempts, o.error,"
					  " pg_catalog.date_trunc('second', o.created_at) AS created,"
					  " o.xmin AS version"
					  " FROM ONLY durable.outbox o WHERE o.key = $1",
					  1, params, no_select, NULL);
		/* nothing to ask about: a yes would discard a send journaled since, never shown */
		if (res != NULL && PQntuples(res) == 0)
		{
			error("no send with key \"%s\"", shown(key));
			finish(EXIT_ERROR);
		}
		if (res != NULL && PQntuples(res) == 1)
		{
			if (opt->state != NULL && strcmp(col(res, 0, "state"), opt->state) != 0)
				outbox_state_mismatch(key, col(res, 0, "state"), opt->state, "discarded");
			snprintf(shown_version, sizeof(shown_version), "%s", col(res, 0, "version"));
			fprintf(stderr, "Send \"%s\": %s, chat %s, %s attempts, journaled %s%s%s\n", shown(key),
					col(res, 0, "state"), shown(col(res, 0, "chat_id")), col(res, 0, "attempts"),
					col(res, 0, "created"), col(res, 0, "error") ? ", error: " : "",
					col(res, 0, "error") ? shown(col(res, 0, "error")) : "");
		}
		PQclear(res);
		fprintf(stderr, "Discard send \"%s\"? Its key will be forgotten: a later send with it starts afresh. [y/N] ",
				shown(key));
		if (fgets(answer, sizeof(answer), stdin) == NULL || !confirmed(answer))
		{
			if (answer[0] == '\0' || answer[strlen(answer) - 1] != '\n')
				fputc('\n', stderr);
			error("discard of send \"%s\" cancelled", shown(key));
			finish(EXIT_ERROR);
		}
	}

	if (shown_version[0] != '\0' || opt->state != NULL)
	{
		res = outbox_act_as_expected("outbox_discard", key, opt->state,
									 shown_version[0] != '\0' ? shown_version : NULL);
		if (res == NULL)
			outbox_not_as_expected(key, "discarded", opt->state, shown_version[0] != '\0');
	}
	else
		res = run("SELECT durable.outbox_discard($1) AS result", 1, params, PGRES_TUPLES_OK);
	existed = res != NULL && strcmp(col(res, 0, "result"), "t") == 0;
	PQclear(res);
	if (!existed)
	{
		error("no send with key \"%s\"", shown(key));
		finish(EXIT_ERROR);
	}
	printf("send \"%s\" discarded\n", shown(key));
	return EXIT_DONE;
}

/* ------------------------------------------------------------------------
 * watch
 */

static void
watch_signal(int signo __attribute__((unused)))
{
	int			saved = errno;
	char		c = 1;

	stop_requested = 1;
	if (write(signal_pipe[1], &c, 1) < 0)
	{
		/* the pipe is full: a wake-up is already pending */
	}
	errno = saved;
}

/* The local time now as "2026-11-29 10:00:01+0000". */
static void
now_text(char *buf, size_t size)
{
	struct timespec ts;
	struct tm	tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(buf, size, "%Y-%m-%d %H:%M:%S%z", &tm);
}

/*
 * Print the notifications libpq holds.  It also keeps those that arrive
 * during a command (a later LISTEN): watch prints them before it first
 * waits, or they would wait for unrelated traffic.
 */
static void
watch_print_notifications(const Options *opt)
{
	PGnotify   *note;

	while ((note = PQnotifies(conn)) != NULL)
	{
		char		when[64];

		now_text(when, sizeof(when));
		if (opt->json)
		{
			char	   *p;

			printf("{\"time\": \"%s\", \"channel\": \"", when);
			for (p = note->relname; *p; p++)
				if (*p != '"' && *p != '\\' && (unsigned char) *p >= 0x20)
					putchar(*p);
			/*
			 * The extension's payloads are JSON objects: passed through.
			 * Anything else (anyone may NOTIFY here) goes as a string.
			 */
			fputs("\", \"payload\": ", stdout);
			if (json_object_payload(note->extra))
				put_json_object(stdout, note->extra);
			else
				put_json_string(stdout, note->extra);
			fputs("}\n", stdout);
		}
		else
			printf("%s  %s  %s\n", when, shown(note->relname), shown(note->extra));
		flush_output();
		PQfreemem(note);
	}
}

/*
 * watch: LISTEN, then print each notification as one line (text) or one
 * JSON object (--json), flushed at once so that a pipe sees it.  The
 * payloads are the extension's own JSON.  SIGINT/SIGTERM end it with 0; a
 * lost connection with 1.
 */
static int
cmd_watch(const Options *opt)
{
	static const char *const channels[] = {"durable_dead", "durable_ambiguous", "durable_ready"};
	int			nchannels = opt->ready ? 3 : 2;
	struct sigaction sa;
	int			i;
	int			sock;

	if (pipe(signal_pipe) != 0)
	{
		error("could not create pipe: %s", strerror(errno));
		finish(EXIT_ERROR);
	}
	fcntl(signal_pipe[0], F_SETFL, O_NONBLOCK);
	fcntl(signal_pipe[1], F_SETFL, O_NONBLOCK);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = watch_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	for (i = 0; i < nchannels; i++)
	{
		char	   *quoted = PQescapeIdentifier(conn, channels[i], strlen(channels[i]));
		char		sql[128];
		PGresult   *res;

		/* LISTEN takes no parameters; the channel names are our constants */
		snprintf(sql, sizeof(sql), "LISTEN %s", quoted);
		PQfreemem(quoted);
		res = run(sql, 0, NULL, PGRES_COMMAND_OK);
		PQclear(res);
	}
	/* A listener is an idle session: a server's idle_session_timeout would end it. */
	PQclear(run("SET idle_session_timeout = 0", 0, NULL, PGRES_COMMAND_OK));
	fprintf(stderr, "%s: listening on durable_dead, durable_ambiguous%s in database \"%s\" (interrupt to stop)\n",
			PROGNAME, opt->ready ? ", durable_ready" : "", shown(PQdb(conn)));

	watch_print_notifications(opt);
	sock = PQsocket(conn);
	while (!stop_requested)
	{
		fd_set		fds;
		int			maxfd = sock > signal_pipe[0] ? sock : signal_pipe[0];

		FD_ZERO(&fds);
		FD_SET(sock, &fds);
		FD_SET(signal_pipe[0], &fds);
		if (select(maxfd + 1, &fds, NULL, NULL, NULL) < 0)
		{
			if (errno == EINTR)
				continue;
			error("select() failed: %s", strerror(errno));
			finish(EXIT_ERROR);
		}
		if (stop_requested)
			break;
		if (!PQconsumeInput(conn))
		{
			report_result_error(NULL);
			finish(EXIT_ERROR);
		}
		watch_print_notifications(opt);
		if (PQstatus(conn) == CONNECTION_BAD)
		{
			report_result_error(NULL);
			finish(EXIT_ERROR);
		}
	}
	return EXIT_DONE;
}

/* ------------------------------------------------------------------------
 * main
 */

int
main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{"dbname", required_argument, NULL, 'd'},
		{"host", required_argument, NULL, 'h'},
		{"port", required_argument, NULL, 'p'},
		{"username", required_argument, NULL, 'U'},
		{"no-password", no_argument, NULL, 'w'},
		{"password", no_argument, NULL, 'W'},
		{"json", no_argument, NULL, 'j'},
		{"limit", required_argument, NULL, 'l'},
		{"offset", required_argument, NULL, 'o'},
		{"after", required_argument, NULL, 'a'},
		{"state", required_argument, NULL, 's'},
		{"yes", no_argument, NULL, 'y'},
		{"ready", no_argument, NULL, 'r'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'H'},
		{NULL, 0, NULL, 0}
	};
	Options		opt;
	const char *command;
	int			nargs;
	char	  **args;
	const char *replay_id = NULL;
	char	   *extversion;
	int			c;
	int			rc;

	memset(&opt, 0, sizeof(opt));
	opt.limit = DEFAULT_LIMIT;

	/* --help and --version alone, before anything else, as PostgreSQL's tools do */
	if (argc > 1)
	{
		if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-?") == 0)
		{
			usage(stdout);
			flush_output();
			exit(EXIT_DONE);
		}
		if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
		{
			printf("%s (durable) %s\n", PROGNAME, DURABLECTL_VERSION);
			flush_output();
			exit(EXIT_DONE);
		}
	}

	opterr = 0;
	/*
	 * -? is not in the option string, so that getopt_long reports it as an
	 * unknown option with optopt '?': told apart from an unknown long option
	 * (optopt 0) also inside a group (-?j, --json -?j), and from byte 0xff
	 * (optopt -1: glibc stores the letter as a char).
	 */
	while ((c = getopt_long(argc, argv, "d:h:p:U:wWjl:o:a:s:yrV", long_options, NULL)) != -1)
	{
		switch (c)
		{
			case 'd':
				opt.dbname = optarg;
				break;
			case 'h':
				opt.host = optarg;
				break;
			case 'p':
				opt.port = optarg;
				break;
			case 'U':
				opt.username = optarg;
				break;
			case 'w':
				opt.password_mode = -1;
				break;
			case 'W':
				opt.password_mode = 1;
				break;
			case 'j':
				opt.json = true;
				break;
			case 'l':
				if (!parse_count(optarg, MAX_LIMIT, &opt.limit) || opt.limit < 1)
					usage_error("invalid value \"%s\" for option --limit (an integer from 1 to %d)",
								shown(optarg), MAX_LIMIT);
				opt.paged = true;
				break;
			case 'o':
				opt.offset_given = true;
				if (!parse_count(optarg, 1000000000L, &opt.offset))
					usage_error("invalid value \"%s\" for option --offset (a non-negative integer)", shown(optarg));
				opt.paged = true;
				break;
			case 'a':
				opt.after = strspn(optarg, "0") == strlen(optarg) && *optarg ? "0" : record_id_digits(optarg);
				if (opt.after == NULL)
					usage_error("invalid value \"%s\" for option --after (a record id: a non-negative integer)",
								shown(optarg));
				opt.paged = true;
				break;
			case 's':
				opt.state = optarg;
				break;
			case 'y':
				opt.yes = true;
				break;
			case 'r':
				opt.ready = true;
				break;
			case 'V':
				printf("%s (durable) %s\n", PROGNAME, DURABLECTL_VERSION);
				flush_output();
				exit(EXIT_DONE);
			case 'H':
				usage(stdout);
				flush_output();
				exit(EXIT_DONE);
			case '?':
				if (optopt == '?')
				{
					usage(stdout);
					flush_output();
					exit(EXIT_DONE);
				}
				if (optopt == 0)
					usage_error("unrecognized option \"%s\"", shown(argv[optind - 1]));
				/* a long option is named as typed: --json=1, --limit, --help=1 */
				if (typed_long_option(argv[optind - 1], optopt, long_options))
				{
					const char *typed = argv[optind - 1];
					const char *value = strchr(typed, '=');

					if (value != NULL)
					{
						char	   *name = strndup(typed, value - typed);

						usage_error("option \"%s\" takes no value", name ? shown(name) : "?");
					}
					usage_error("option \"%s\" requires an argument", shown(typed));
				}
				if (strchr("dhpUlosa", optopt) != NULL)
					usage_error("option -%c requires an argument", optopt);
				{
					char		typed[2] = {(char) optopt, '\0'};

					usage_error("invalid option -- '%s'", shown(typed));
				}
			default:
				usage_error("unexpected option");
		}
	}

	if (optind >= argc)
		usage_error("no command given");
	command = argv[optind];
	args = argv + optind + 1;
	nargs = argc - optind - 1;

	/* Check the command line completely before connecting. */
	if (strcmp(command, "status") == 0 || strcmp(command, "unknown") == 0 ||
		strcmp(command, "watch") == 0)
	{
		if (nargs != 0)
			usage_error("too many arguments for %s: \"%s\"", command, shown(args[0]));
	}
	else if (strcmp(command, "dlq") == 0)
	{
		if (nargs != 1)
			usage_error("dlq needs one argument: inbox or outbox");
		if (strcmp(args[0], "inbox") != 0 && strcmp(args[0], "outbox") != 0)
			usage_error("invalid queue \"%s\" for dlq (inbox or outbox)", shown(args[0]));
	}
	else if (strcmp(command, "replay") == 0)
	{
		if (nargs != 1)
			usage_error("replay needs one argument: the id of an inbox record");
		replay_id = record_id_digits(args[0]);
		if (replay_id == NULL)
			usage_error("invalid inbox record id \"%s\" (a positive integer)", shown(args[0]));
	}
	else if (strcmp(command, "retry") == 0 || strcmp(command, "discard") == 0)
	{
		if (nargs != 1)
			usage_error("%s needs one argument: the idempotency key of a send", command);
		if (args[0][0] == '\0')
			usage_error("the idempotency key must not be empty");
		if (opt.state != NULL && !state_applies(opt.state, command))
			usage_error("invalid state \"%s\" for %s --state (%s)", shown(opt.state), command,
						strcmp(command, "retry") == 0 ? "dead, failed or unknown"
						: "pending, sending, sent, failed, dead or unknown");
	}
	else
		usage_error("unknown command \"%s\"", shown(command));
	check_options_apply(&opt, command);

	extversion = connect_db(&opt);

	if (strcmp(command, "status") == 0)
		rc = cmd_status(&opt, extversion);
	else if (strcmp(command, "dlq") == 0)
		rc = strcmp(args[0], "inbox") == 0 ? cmd_dlq_inbox(&opt) : cmd_outbox_list(&opt, "dead");
	else if (strcmp(command, "unknown") == 0)
		rc = cmd_outbox_list(&opt, "unknown");
	else if (strcmp(command, "replay") == 0)
		rc = cmd_replay(replay_id);
	else if (strcmp(command, "retry") == 0)
		rc = cmd_retry(&opt, args[0]);
	else if (strcmp(command, "discard") == 0)
		rc = cmd_discard(&opt, args[0]);
	else
		rc = cmd_watch(&opt);

	free(extversion);
	flush_output();
	finish(rc);
	return rc;
}
