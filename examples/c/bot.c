/*-------------------------------------------------------------------------
 *
 * bot.c
 *		An example chat bot on durable, in C over libpq.
 *
 * A complete, runnable loop with a fake chat platform and a fake provider:
 *
 *	 - boot: durable.instance_start(instance) takes back what this instance
 *	   id held when its previous incarnation died;
 *	 - a feeder process (forked, with its own connection) plays the chat
 *	   platform's webhook: it journals each inbound message with inbox_admit
 *	   (no instance: the webhook only journals and acknowledges), including
 *	   redeliveries, which are deduplicated by (source, message_id);
 *	 - the worker waits in the server for work with
 *	   inbox_claim(wait => '2s') instead of polling;
 *	 - each message is handled in the order the discipline requires:
 *		 1. the reply goes out through outbox_begin (key derived from the
 *			inbound lease, so a reprocessed message re-derives the same key),
 *			the provider, then outbox_sent, or outbox_failed + inbox_fail
 *			when the provider refuses (the message comes back later and the
 *			retried send reuses its key);
 *		 2. one transaction writes the handler's effect row and ends with
 *			inbox_complete: the effect commits exactly when the message is
 *			done;
 *	 - slow jobs send inbox_heartbeat while they work;
 *	 - a lost connection (a server restart, a failover) is a reboot: the
 *	   worker connects again and calls instance_start, which takes back the
 *	   leases it held and flags a send it had begun but not confirmed as
 *	   unknown; the provider's answer to that send, when it had one, is then
 *	   told with its token (outbox_sent or outbox_failed), so it ends sent,
 *	   or failed and retried; the webhook repeats an admit whose answer was
 *	   lost, which the journal deduplicates;
 *	 - SIGTERM stops after the message in hand and gives back, with
 *	   inbox_release, whatever the last claim handed out but was not handled;
 *	   while reconnecting, it stops after the current back-off unless the
 *	   journal still lacks the provider's answer to a send: then it keeps
 *	   trying for --stop-grace seconds, to tell it (given up, the send stays
 *	   unknown).
 *
 * Why the send is not inside the completing transaction: the provider is
 * outside the database, so the send record must be committed before the
 * provider is called (outbox_begin) and right after it answered
 * (outbox_sent); were they part of the handler's transaction, a rollback
 * would forget a message the provider already delivered.
 *
 * The provider "delivers" by appending a line to a file; the test
 * (examples/run) checks that every message has exactly one effect row and
 * exactly one delivery.
 *
 *	 make tools && examples/c/bot --feed 20 --deliveries /tmp/deliveries
 *
 * Connection settings come from the libpq environment (PGHOST, PGPORT,
 * PGUSER, PGDATABASE) or --conninfo.  Every value is a $n parameter.
 *
 * IDENTIFICATION
 *	  examples/c/bot.c
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

#define STALE_LEASE "DR001"
#define MAX_BATCH 3				/* the max of each claim */

typedef struct Args
{
	const char *conninfo;
	const char *instance;
	const char *schema;
	const char *deliveries;
	const char *lease;
	const char *send_lease;
	int			feed;
	double		feed_delay;
	int			slow_every;
	double		slow_seconds;
	int			fail_every;
	double		timeout;
	double		stop_grace;
	int			slow_provider_every;	/* 0: never */
	double		slow_provider_seconds;
	int			long_message;	/* the message with a 2,000-character text (0: none) */
} Args;

typedef struct Stats
{
	int			handled;
	int			replies;
	int			provider_errors;
	int			heartbeats;
	int			released;
	int			stale;
	int			reconnects;
} Stats;

static volatile sig_atomic_t stopping = 0;
static Args args;
static Stats stats;
static PGconn *db;

/*
 * The records of the last claim: every one is leased to us until handled,
 * released, or lost (a heartbeat answered DR001).
 */
typedef struct Held
{
	char		id[32];
	char		token[32];
	bool		live;
} Held;
static Held held[MAX_BATCH];
static int	nheld;

/*
 * A lost connection of the worker unwinds to its loop (worker_lost), which
 * reconnects.  The only result held across calls is the last claim's.
 */
static sigjmp_buf worker_lost;
static bool worker_running;
static bool rebooting;			/* reconnect() runs its statements */
static PGresult *claimed;

/*
 * The provider's answer to a send, kept until the journal has it, so that a
 * lost connection does not lose it: reconnect() tells it again.
 */
typedef struct Untold
{
	bool		pending;
	bool		refused;		/* outbox_failed; else outbox_sent with pmid */
	char		key[600];
	char		token[32];
	char		pmid[64];
} Untold;
static Untold untold;

/*
 * The provider's answers, as the journal takes them.  A refused reply is due
 * again after the outbox's backoff (durable.outbox_backoff_base, doubling);
 * due_in says when, and the message comes back then (NULL: dead, out of
 * retries).
 */
#define OUTBOX_SENT_SQL "SELECT durable.outbox_sent($1, $2::bigint, $3)"
#define OUTBOX_REFUSED_SQL \
	"SELECT state, greatest(not_before - clock_timestamp(), interval '0')::text AS due_in" \
	" FROM durable.outbox_failed($1, $2::bigint, $3, retryable => true)"
#define REFUSAL "503 service unavailable"

/* Keys the fake provider refused once (it refuses only the first call). */
static char **refused;
static int	nrefused;
static long provider_calls;

static void
on_term(int signo __attribute__((unused)))
{
	stopping = 1;
}

static void
die(const char *what, PGresult *res)
{
	fprintf(stderr, "%s: %s: %s", args.instance, what,
			res ? PQresultErrorMessage(res) : PQerrorMessage(db));
	exit(1);
}

/*
 * Connect with --conninfo (or the environment), named "<instance> <role>"
 * so that an operator (or examples/run) can tell the connections apart.
 */
static PGconn *
connect_as(const char *role)
{
	char		name[128];
	const char *keys[] = {"dbname", "application_name", NULL};
	const char *values[] = {args.conninfo, name, NULL};

	snprintf(name, sizeof(name), "%s %s", args.instance, role);
	return PQconnectdbParams(keys, values, 1);
}

/*
 * Whether a failed call lost its connection, and its answer with it: libpq
 * marked the connection bad, or reported an error of its own, which has no
 * SQLSTATE -- a server that went away while the connection was idle leaves
 * it reading CONNECTION_OK until the next call.  A refusal by the server
 * (54000, 57014, ...) always has one: the connection is fine.
 */
static bool
connection_lost(PGconn *conn, const PGresult *res)
{
	return PQstatus(conn) == CONNECTION_BAD || PQresultErrorField(res, PG_DIAG_SQLSTATE) == NULL;
}

/*
 * A refusal on a live connection that a later try may not meet: a cancel
 * (57014), a lock or statement timeout (55P03, 57014), a serialization
 * failure (40001), a server short of resources (53xxx): classes 40, 53, 55,
 * 57 and 58, what psycopg calls an OperationalError.
 */
static bool
refused_for_now(const PGresult *res)
{
	static const char *const classes[] = {"40", "53", "55", "57", "58"};
	const char *sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	for (size_t i = 0; sqlstate != NULL && i < sizeof(classes) / sizeof(classes[0]); i++)
		if (strncmp(sqlstate, classes[i], 2) == 0)
			return true;
	return false;
}

/*
 * A failed call of the worker's on a connection that is gone: go reconnect.
 * While reconnect() reboots, a refusal for now (the answer told again was
 * cancelled, say) is tried again, the answer kept, as a lost connection is.
 */
static void
check_lost(PGconn *conn, PGresult *res)
{
	if (conn != db || !worker_running)
		return;
	if (connection_lost(conn, res))
		fprintf(stderr, "%s: connection lost: %s", args.instance, PQresultErrorMessage(res));
	else if (rebooting && refused_for_now(res))
		fprintf(stderr, "%s: reboot refused, trying again: %s", args.instance,
				PQresultErrorMessage(res));
	else
		return;
	PQclear(res);
	siglongjmp(worker_lost, 1);
}

/* Run a statement with text parameters; any failure ends the bot. */
static PGresult *
exec(PGconn *conn, const char *sql, int n, const char *const *params)
{
	PGresult   *res = PQexecParams(conn, sql, n, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		check_lost(conn, res);
		die(sql, res);
	}
	return res;
}

/*
 * As exec(), for a call that names a lease we hold: NULL when the lease was
 * lost (DR001, a stale token: another replica has the record now) or, with
 * settled_too, when the send was settled meanwhile (DR003: sent or dead;
 * DR002: an operator discarded it); any other failure ends the bot.
 */
static PGresult *
fenced_or(const char *sql, PGresult *res, bool settled_too)
{
	const char *sqlstate;

	if (PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK)
		return res;
	check_lost(db, res);
	sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	if (sqlstate == NULL ||
		(strcmp(sqlstate, STALE_LEASE) != 0 &&
		 !(settled_too && (strcmp(sqlstate, "DR003") == 0 || strcmp(sqlstate, "DR002") == 0))))
		die(sql, res);
	PQclear(res);
	return NULL;
}

static PGresult *
exec_fenced_or(const char *sql, int n, const char *const *params, bool settled_too)
{
	return fenced_or(sql, PQexecParams(db, sql, n, NULL, params, NULL, NULL, 0), settled_too);
}

static PGresult *
exec_fenced(const char *sql, int n, const char *const *params)
{
	return exec_fenced_or(sql, n, params, false);
}

static void sleep_s(double s);

/*
 * Tell the journal the kept answer: NULL when the send was settled meanwhile
 * (exec_fenced_or).  A lost connection unwinds with it still kept.  A
 * refusal on a live connection (a cancel, a lock_timeout) is no answer
 * either: the answer is told again, after 0.05 s, then 0.1 ... 3.2 s, before
 * the bot gives up on it (until 2026-12-06 the first refusal ended the bot,
 * and the next boot flagged the delivered send unknown; found by review).
 */
static PGresult *
tell_untold(void)
{
	const char *params[3] = {untold.key, untold.token, untold.refused ? REFUSAL : untold.pmid};
	const char *sql = untold.refused ? OUTBOX_REFUSED_SQL : OUTBOX_SENT_SQL;
	PGresult   *res;

	for (double delay = 0.05;; delay *= 2)
	{
		res = PQexecParams(db, sql, 3, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK ||
			delay > 3.2 || connection_lost(db, res) || !refused_for_now(res))
			break;
		fprintf(stderr, "%s: telling the answer for %s refused, telling it again: %s",
				args.instance, untold.key, PQresultErrorMessage(res));
		PQclear(res);
		sleep_s(delay);
	}
	res = fenced_or(sql, res, true);
	untold.pending = false;
	return res;
}

/* Keep the provider's answer to a send, then tell it: tell_untold(). */
static PGresult *
tell(bool refused, const char *key, const char *token, const char *pmid)
{
	untold.pending = true;
	untold.refused = refused;
	snprintf(untold.key, sizeof(untold.key), "%s", key);
	snprintf(untold.token, sizeof(untold.token), "%s", token);
	snprintf(untold.pmid, sizeof(untold.pmid), "%s", pmid);
	return tell_untold();
}

static void
exec_clear(PGconn *conn, const char *sql, int n, const char *const *params)
{
	PQclear(exec(conn, sql, n, params));
}

static void
sleep_s(double s)
{
	struct timespec ts;

	ts.tv_sec = (time_t) s;
	ts.tv_nsec = (long) ((s - (double) ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * The fake provider: appends "key<TAB>chat<TAB>text" to the deliveries file
 * and answers with a message id, or refuses (false) the first call for a
 * key when asked to; a refused call delivers nothing.
 */
static bool
provider_send(const char *key, const char *chat_id, const char *text, bool refuse_first,
			  double delay, char *pmid, size_t pmid_size)
{
	char	   *line;
	size_t		len;
	int			fd;
	int			i;

	sleep_s(delay);				/* a slow API */
	provider_calls++;
	if (refuse_first)
	{
		for (i = 0; i < nrefused; i++)
			if (strcmp(refused[i], key) == 0)
				break;
		if (i == nrefused)
		{
			char	  **grown = realloc(refused, sizeof(char *) * (nrefused + 1));

			if (grown == NULL || (grown[nrefused] = strdup(key)) == NULL)
			{
				fprintf(stderr, "%s: out of memory\n", args.instance);
				exit(1);
			}
			refused = grown;
			nrefused++;
			return false;
		}
	}
	len = strlen(key) + strlen(chat_id) + strlen(text) + 3;
	line = malloc(len + 1);
	if (line == NULL)
	{
		fprintf(stderr, "%s: out of memory\n", args.instance);
		exit(1);
	}
	snprintf(line, len + 1, "%s\t%s\t%s\n", key, chat_id, text);
	fd = open(args.deliveries, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (fd < 0 || write(fd, line, len) != (ssize_t) len || fsync(fd) != 0)
	{
		fprintf(stderr, "%s: cannot write %s: %s\n", args.instance, args.deliveries, strerror(errno));
		exit(1);
	}
	close(fd);
	free(line);
	snprintf(pmid, pmid_size, "c-%ld", provider_calls);
	return true;
}

/*
 * The platform's webhook, in a child process with its own connection:
 * n messages, every 5th delivered twice.  It stops early on SIGTERM.
 */
static void
feeder_main(void)
{
	PGconn	   *conn = connect_as("webhook");
	int			duplicates = 0;
	int			deliveries = 0;
	int			i,
				copy;

	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "%s webhook: %s", args.instance, PQerrorMessage(conn));
		_exit(1);
	}
	for (i = 1; i <= args.feed && !stopping; i++)
	{
		for (copy = 0; copy < (i % 5 == 0 ? 2 : 1) && !stopping; copy++)
		{
			char		message_id[32],
						chat_id[32],
						payload[2100];
			const char *params[4] = {args.instance, message_id, chat_id, payload};
			PGresult   *res;

			snprintf(message_id, sizeof(message_id), "m%d", i);
			snprintf(chat_id, sizeof(chat_id), "chat-%d", i % 4);
			/* every 3rd says something with quotes and a backslash, as users do */
			if (i % 3 == 0)
				snprintf(payload, sizeof(payload), "{\"text\": \"say \\\"hello\\\" \\\\ %d\", \"n\": %d}", i, i);
			else
				snprintf(payload, sizeof(payload), "{\"text\": \"hello %d\", \"n\": %d}", i, i);
			if (i == args.long_message)
			{
				int			len = snprintf(payload, sizeof(payload), "{\"text\": \"");

				for (int k = 0; k < 400; k++)
					len += snprintf(payload + len, sizeof(payload) - len, "long ");
				snprintf(payload + len, sizeof(payload) - len, "\", \"n\": %d}", i);
			}
			for (;;)
			{
				res = PQexecParams(conn, "SELECT duplicate FROM durable.inbox_admit(source => $1,"
								   " message_id => $2, chat_id => $3, payload => $4::jsonb)",
								   4, NULL, params, NULL, NULL, 0);
				if (PQresultStatus(res) == PGRES_TUPLES_OK)
					break;
				if (!connection_lost(conn, res) || stopping)
				{
					fprintf(stderr, "%s webhook: inbox_admit: %s", args.instance, PQresultErrorMessage(res));
					_exit(1);
				}
				/* did the admit commit?  Admitting again answers: it is deduplicated */
				PQclear(res);
				sleep_s(0.1);
				PQreset(conn);
			}
			deliveries++;
			if (strcmp(PQgetvalue(res, 0, 0), "t") == 0)
				duplicates++;
			PQclear(res);
			sleep_s(args.feed_delay);
		}
	}
	printf("%s webhook: %d deliveries journaled, %d duplicates\n", args.instance, deliveries, duplicates);
	fflush(stdout);
	PQfinish(conn);
	_exit(0);
}

/*
 * Extend every inbox lease we hold; returns the seconds the shortest has
 * left (-1: none held).
 */
static double
heartbeat_held(void)
{
	double		left = -1;
	int			h;

	for (h = 0; h < nheld; h++)
	{
		const char *params[3] = {held[h].id, held[h].token, args.lease};
		PGresult   *res;

		if (!held[h].live)
			continue;
		res = exec_fenced("SELECT extract(epoch FROM durable.inbox_heartbeat($1::bigint, $2::bigint,"
						  " $3::interval) - clock_timestamp())::float8", 3, params);
		if (res == NULL)
			held[h].live = false;	/* lost: someone else has it now */
		else
		{
			double		until = atof(PQgetvalue(res, 0, 0));

			left = left < 0 ? until : (until < left ? until : left);
		}
		PQclear(res);
		stats.heartbeats++;
	}
	return left;
}

/*
 * Work longer than the lease, extending it as we go.  Every record the last
 * claim handed out is leased to us, not just the one in hand: the heartbeat
 * extends them all, or the ones waiting their turn would expire behind the
 * slow job and be swept back.  The next heartbeat goes out a third of the
 * shortest lease's remainder later, whatever the job's length: spaced by the
 * job's length instead, a job longer than a few leases lost its lease
 * between two of them, every attempt, until the message went dead.
 */
static void
slow_job(void)
{
	double		end = now_s() + args.slow_seconds;

	for (;;)
	{
		double		left = heartbeat_held();
		double		rest = end - now_s();
		double		pause = rest;

		if (rest <= 0)
			break;
		if (left >= 0 && left / 3 < rest)
			pause = left / 3 > 0.01 ? left / 3 : 0.01;
		sleep_s(pause);
	}
}

/*
 * The handler failed for now: the message comes back after retry_in, or
 * after the inbox's backoff when it is NULL.  Each return uses one of the
 * message's durable.inbox_max_attempts: a bot with a sender loop of its own
 * (the Python example's) completes the message once its reply is journaled
 * instead, and the outbox retries the reply.
 */
static void
fail_for_now(const char *id, const char *token, const char *why, const char *retry_in)
{
	const char *params[4] = {id, token, why, retry_in};

	/*
	 * NULL too when the record went dead meanwhile (DR003: its lease ran out
	 * on its last attempt and the sweep moved it to the dead-letter queue)
	 */
	PQclear(exec_fenced_or("SELECT * FROM durable.inbox_fail($1::bigint, $2::bigint, $3,"
						   " retry_in => $4::interval)", 4, params, true));
}

/*
 * Handle one claimed message: the reply, then the effects and the
 * completion in one transaction.  The caller holds the lease (id, token).
 */
static void
handle(const char *id, const char *token, const char *message_id, const char *chat_id,
	   int n, const char *text)
{
	char		key[600],
				send_token[32],
				action[16];
	const char *send_to;
	const char *send_text;
	PGresult   *begun;
	PGresult   *res;

	if (n % args.slow_every == 0)
		slow_job();

	/*
	 * 1. the reply: journal, provider, confirm.  The payload is built in SQL
	 * from the text as a parameter: pasted into JSON text here, a quote or a
	 * newline in the message would break it (or add fields to it).
	 */
	{
		const char *params[6] = {chat_id, text, args.instance, id, token, args.send_lease};

		begun = exec_fenced("SELECT action, key, token, journaled_chat_id,"
							" coalesce(journaled_payload ->> 'text', journaled_payload::text, 'echo: ' || $2)"
							" FROM durable.outbox_begin(idempotency_key => NULL,"
							" chat_id => $1, payload => pg_catalog.jsonb_build_object('text', 'echo: ' || $2),"
							" instance => $3, lease => $6::interval,"
							" inbound_id => $4::bigint, inbound_token => $5::bigint)",
							6, params);
		if (begun == NULL)
		{
			stats.stale++;		/* fenced off: its new holder handles it */
			return;
		}
		snprintf(action, sizeof(action), "%s", PQgetvalue(begun, 0, 0));
		snprintf(key, sizeof(key), "%s", PQgetvalue(begun, 0, 1));
		snprintf(send_token, sizeof(send_token), "%s", PQgetvalue(begun, 0, 2));
		/* an earlier run journaled this reply in other words: that one stands */
		send_to = PQgetisnull(begun, 0, 3) ? chat_id : PQgetvalue(begun, 0, 3);
		send_text = PQgetvalue(begun, 0, 4);
	}
	if (strcmp(action, "send") == 0 || strcmp(action, "bypass") == 0)
	{
		char		pmid[64];
		char		due_in[64];
		double		slow = (args.slow_provider_every > 0 && n % args.slow_provider_every == 0) ?
			args.slow_provider_seconds : 0;
		bool		delivered = provider_send(key, send_to, send_text, n % args.fail_every == 0, slow,
											  pmid, sizeof(pmid));

		PQclear(begun);
		if (!delivered)
		{
			stats.provider_errors++;
			/*
			 * NULL: the send was settled before the refusal was told (an
			 * operator retried or discarded it, another sender has it):
			 * left as the journal has it
			 */
			due_in[0] = '\0';
			if (strcmp(action, "send") == 0)
			{
				res = tell(true, key, send_token, "");
				if (res == NULL)
					printf("%s: send %s refused, but settled meanwhile; left as it is\n",
						   args.instance, key);
				else if (!PQgetisnull(res, 0, 1))
					snprintf(due_in, sizeof(due_in), "%s", PQgetvalue(res, 0, 1));
				PQclear(res);
			}
			/*
			 * the message comes back when the reply is due again (its send
			 * reuses the key), or after the inbox's backoff: a bypassed
			 * send is not journaled
			 */
			fail_for_now(id, token, "provider: " REFUSAL, due_in[0] ? due_in : NULL);
			return;
		}
		if (strcmp(action, "send") == 0)
		{
			/*
			 * NULL: settled meanwhile (its lease had run out: an operator
			 * discarded or retried it, another sender has it): the provider
			 * had it, the journal will not say so; the message is handled
			 * all the same
			 */
			PQclear(tell(false, key, send_token, pmid));
		}
		stats.replies++;
	}
	else if (strcmp(action, "busy") == 0 || strcmp(action, "wait") == 0)
	{
		char		why[32];

		PQclear(begun);
		snprintf(why, sizeof(why), "reply %s", action);

		/*
		 * busy: another holder's send lease is live; it sends, or dies and
		 * the send turns unknown, by the end of that lease: come back then,
		 * not sooner (each return uses an attempt).  wait: the reply's retry
		 * is not due yet: come back after the inbox's backoff.
		 */
		fail_for_now(id, token, why, strcmp(action, "busy") == 0 ? args.send_lease : NULL);
		return;
	}
	else
	{
		PQclear(begun);
		/* dead or unknown: an operator decides (durablectl); never resend by ourselves */
		if (strcmp(action, "sent") != 0)
			printf("%s: reply %s is %s; left to the operator\n", args.instance, key, action);
	}

	/* 2. the effects and the completion, in one transaction */
	{
		char	   *effects = PQescapeIdentifier(db, args.schema, strlen(args.schema));
		char		insert[256];
		const char *eparams[4] = {message_id, chat_id, key, args.instance};
		const char *cparams[2] = {id, token};
		const char *sqlstate;

		snprintf(insert, sizeof(insert),
				 "INSERT INTO %s.effects (message_id, chat_id, reply_key, instance) VALUES ($1, $2, $3, $4)",
				 effects);
		PQfreemem(effects);
		exec_clear(db, "BEGIN", 0, NULL);
		exec_clear(db, insert, 4, eparams);
		res = PQexecParams(db, "SELECT durable.inbox_complete($1::bigint, $2::bigint)", 2, NULL,
						   cparams, NULL, NULL, 0);
		if (PQresultStatus(res) == PGRES_TUPLES_OK)
		{
			PQclear(res);
			exec_clear(db, "COMMIT", 0, NULL);
			stats.handled++;
			return;
		}
		check_lost(db, res);	/* (the transaction is gone with the connection) */
		sqlstate = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		if (sqlstate == NULL ||
			(strcmp(sqlstate, STALE_LEASE) != 0 && strcmp(sqlstate, "DR003") != 0))
			die("inbox_complete", res);
		/*
		 * another replica took the message over (DR001), or its lease ran out
		 * on its last attempt and the sweep made it dead (DR003: an operator
		 * replays it): our effects roll back
		 */
		PQclear(res);
		exec_clear(db, "ROLLBACK", 0, NULL);
		stats.stale++;
	}
}

/* durable.instance_start: what this instance held comes back. */
static void
start_instance(const char *what)
{
	const char *params[1] = {args.instance};
	PGresult   *res = exec(db, "SELECT * FROM durable.instance_start($1)", 1, params);

	printf("%s: %s (recovered %s inbox records, %s ambiguous sends)\n", args.instance, what,
		   PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
	fflush(stdout);
	PQclear(res);
}

/*
 * Whether to try connecting again: until the deadline or a SIGTERM, except
 * that a provider's answer the journal was not told of keeps the bot trying
 * for --stop-grace seconds after the SIGTERM.
 */
static bool
keep_reconnecting(double deadline, double *grace_end)
{
	double		now = now_s();

	if (now >= deadline)
		return false;
	if (!stopping)
		return true;
	if (!untold.pending)
		return false;
	if (*grace_end == 0)
		*grace_end = now + args.stop_grace;
	return now < *grace_end;
}

/*
 * The connection was lost: connect again and reboot, as after a crash.
 * First the provider's answer to a send whose outbox_sent or outbox_failed
 * was lost is told again with its token: sent, or failed and due again.
 * Told before instance_start, the send is still ours (sending, or unknown
 * if its lease ran out) and so is its message: no other replica can find
 * the send unknown and finish the message meanwhile, which would leave a
 * refused reply failed with no handler to send it.  (A repeat of a
 * confirmation that did commit is a no-op; of a refusal, DR001: left as it
 * is.)  Then whatever this run held is taken back by instance_start rather
 * than finished.  False if the deadline or a SIGTERM came first.
 */
static bool
reconnect(double deadline)
{
	/* (a loss while reconnecting comes back here: both are kept) */
	static double delay = 0.1;
	static double grace_end = 0;

	stats.reconnects++;
	PQclear(claimed);
	claimed = NULL;
	nheld = 0;
	while (keep_reconnecting(deadline, &grace_end))
	{
		sleep_s(delay);
		delay = delay * 2 > 5 ? 5 : delay * 2;
		PQreset(db);
		if (PQstatus(db) != CONNECTION_OK)
			continue;
		rebooting = true;
		exec_clear(db, "SET client_min_messages = warning", 0, NULL);
		if (untold.pending)
			PQclear(tell_untold());
		start_instance("reconnected");
		rebooting = false;
		delay = 0.1;
		grace_end = 0;
		return true;
	}
	return false;
}

/* Every message finished: done, or dead (out of attempts: an operator's now). */
static bool
feed_done(void)
{
	const char *params[1] = {args.instance};
	PGresult   *res = exec(db, "SELECT pg_catalog.count(*) FROM durable.inbox"
						   " WHERE source = $1 AND state IN ('done', 'dead')", 1, params);
	bool		done = atoi(PQgetvalue(res, 0, 0)) >= args.feed;

	PQclear(res);
	return done;
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: bot [--conninfo C] [--instance I] [--schema S] [--feed N] [--feed-delay S]\n"
			"           [--deliveries FILE] [--lease L] [--send-lease L] [--slow-every K] [--slow-seconds S]\n"
			"           [--fail-every K] [--timeout S] [--stop-grace S]\n"
			"           [--slow-provider-every K] [--slow-provider-seconds S] [--long-message N]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"conninfo", required_argument, NULL, 'c'},
		{"instance", required_argument, NULL, 'i'},
		{"schema", required_argument, NULL, 's'},
		{"feed", required_argument, NULL, 'f'},
		{"feed-delay", required_argument, NULL, 'F'},
		{"deliveries", required_argument, NULL, 'd'},
		{"lease", required_argument, NULL, 'l'},
		{"send-lease", required_argument, NULL, 'L'},
		{"slow-every", required_argument, NULL, 'w'},
		{"slow-seconds", required_argument, NULL, 'W'},
		{"fail-every", required_argument, NULL, 'e'},
		{"timeout", required_argument, NULL, 't'},
		{"stop-grace", required_argument, NULL, 'g'},
		{"slow-provider-every", required_argument, NULL, 'p'},
		{"slow-provider-seconds", required_argument, NULL, 'P'},
		{"long-message", required_argument, NULL, 'M'},
		{NULL, 0, NULL, 0}
	};
	struct sigaction sa;
	pid_t		feeder;
	double		deadline;
	int			c;
	volatile bool feeder_alive = true;	/* (kept across a siglongjmp) */
	int			feeder_status;
	char	   *schema;
	char		sql[512];

	args = (Args)
	{
		"", "example-c", "example_c", "deliveries.txt", "1s", "30s", 20, 0.02, 7, 1.6, 6, 120, 10, 0, 1.5, 0
	};
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
	{
		switch (c)
		{
			case 'c': args.conninfo = optarg; break;
			case 'i': args.instance = optarg; break;
			case 's': args.schema = optarg; break;
			case 'f': args.feed = atoi(optarg); break;
			case 'F': args.feed_delay = atof(optarg); break;
			case 'd': args.deliveries = optarg; break;
			case 'l': args.lease = optarg; break;
			case 'L': args.send_lease = optarg; break;
			case 'w': args.slow_every = atoi(optarg); break;
			case 'W': args.slow_seconds = atof(optarg); break;
			case 'e': args.fail_every = atoi(optarg); break;
			case 't': args.timeout = atof(optarg); break;
			case 'g': args.stop_grace = atof(optarg); break;
			case 'p': args.slow_provider_every = atoi(optarg); break;
			case 'P': args.slow_provider_seconds = atof(optarg); break;
			case 'M': args.long_message = atoi(optarg); break;
			default: usage();
		}
	}
	if (optind < argc || args.feed < 1 || args.slow_every < 1 || args.fail_every < 1 ||
		args.slow_provider_every < 0)
		usage();
	/*
	 * A longer name would be cut by the server (NAMEDATALEN), and the
	 * statements below have room for a name of that length, escaped.
	 */
	if (strlen(args.schema) > 63)
	{
		fprintf(stderr, "bot: --schema names a schema of at most 63 bytes\n");
		exit(2);
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	/* boot */
	db = connect_as("worker");
	if (PQstatus(db) != CONNECTION_OK)
		die("connect", NULL);
	exec_clear(db, "SET client_min_messages = warning", 0, NULL);
	schema = PQescapeIdentifier(db, args.schema, strlen(args.schema));
	snprintf(sql, sizeof(sql), "CREATE SCHEMA IF NOT EXISTS %s", schema);
	exec_clear(db, sql, 0, NULL);
	snprintf(sql, sizeof(sql),
			 "CREATE TABLE IF NOT EXISTS %s.effects (message_id text NOT NULL, chat_id text NOT NULL,"
			 " reply_key text, instance text NOT NULL,"
			 " at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp())", schema);
	exec_clear(db, sql, 0, NULL);
	PQfreemem(schema);
	start_instance("booted");

	feeder = fork();
	if (feeder < 0)
	{
		perror("fork");
		return 1;
	}
	if (feeder == 0)
		feeder_main();

	/* the worker loop */
	deadline = now_s() + args.timeout;
	if (sigsetjmp(worker_lost, 0) != 0)
	{
		if (!reconnect(deadline) && !stopping)
		{
			fprintf(stderr, "%s: timed out reconnecting\n", args.instance);
			kill(feeder, SIGTERM);
			return 1;
		}
	}
	worker_running = true;
	while (!stopping)
	{
		const char *params[2] = {args.instance, args.lease};
		PGresult   *res;
		int			i,
					n;

		if (now_s() > deadline)
		{
			fprintf(stderr, "%s: timed out\n", args.instance);
			kill(feeder, SIGTERM);
			return 1;
		}
		/* waits in the server until work is admitted or due: no polling */
		res = claimed = exec(db, "SELECT c.id, c.token, c.message_id, c.chat_id,"
				   " (c.payload->>'n')::pg_catalog.int4, c.payload->>'text'"
				   " FROM durable.inbox_claim(instance => $1, max => 3, lease => $2::interval,"
				   " wait => '2s') c", 2, params);
		n = PQntuples(res);
		nheld = n;
		for (i = 0; i < n; i++)
		{
			snprintf(held[i].id, sizeof(held[i].id), "%s", PQgetvalue(res, i, 0));
			snprintf(held[i].token, sizeof(held[i].token), "%s", PQgetvalue(res, i, 1));
			held[i].live = true;
		}
		for (i = 0; i < n; i++)
		{
			if (stopping)
			{
				/* clean shutdown: give back what we hold, attempts not counted */
				for (; i < n; i++)
				{
					const char *rparams[2] = {held[i].id, held[i].token};

					if (!held[i].live)
						continue;
					PGresult   *released = exec_fenced("SELECT durable.inbox_release($1::bigint, $2::bigint)",
													 2, rparams);

					/* NULL: its lease had ended (DR001): nothing to give back */
					if (released != NULL)
						stats.released++;
					PQclear(released);
				}
				break;
			}
			if (!held[i].live)
				continue;		/* its lease was lost while it waited its turn */
			handle(held[i].id, held[i].token, PQgetvalue(res, i, 2),
				   PQgetvalue(res, i, 3), atoi(PQgetvalue(res, i, 4)), PQgetvalue(res, i, 5));
			held[i].live = false;
		}
		nheld = 0;
		PQclear(res);
		claimed = NULL;
		if (feeder_alive && waitpid(feeder, &feeder_status, WNOHANG) == feeder)
		{
			feeder_alive = false;
			if (!stopping && (!WIFEXITED(feeder_status) || WEXITSTATUS(feeder_status) != 0))
			{
				/* (it said why on stderr: an admit refused, say) */
				fprintf(stderr, "%s: the webhook failed\n", args.instance);
				return 1;
			}
		}
		if (n == 0 && !feeder_alive && feed_done())
			break;
	}
	if (feeder_alive)
	{
		kill(feeder, SIGTERM);
		waitpid(feeder, NULL, 0);
	}
	printf("%s: %s: handled %d, replies delivered %d, provider errors %d, heartbeats %d,"
		   " released %d, stale %d, reconnects %d\n", args.instance,
		   stopping ? "stopped by SIGTERM" : "feed processed",
		   stats.handled, stats.replies, stats.provider_errors, stats.heartbeats, stats.released,
		   stats.stale, stats.reconnects);
	PQfinish(db);
	return 0;
}
