/*-------------------------------------------------------------------------
 *
 * botsim.c
 *		A chat-bot replica simulator over libpq, for the crash test
 *		(test/crash/run).
 *
 * One process is one bot replica with its own instance id.  It takes its
 * share of a deterministic feed of inbound messages, journals each one with
 * inbox_admit (leased at once), and also claims whatever the inbox hands
 * out (records recovered from dead replicas, expired leases, retries).  A
 * message is handled in the order a real bot must follow:
 *
 *	 1. outbox_begin(inbound_id, inbound_token) for the reply, whose key the
 *		server derives as '<inbound id>:1', so a reprocessed message
 *		re-derives the same key and is answered from the journal;
 *	 2. on action "send", the fake provider: a line appended to the ledger
 *		file and fsync'ed before it "answers" with a provider message id,
 *		then outbox_sent (or, when the provider refuses, outbox_failed and
 *		inbox_fail so that the message comes back later);
 *	 3. one transaction that inserts the handler's effect row into
 *		crash.effects, journals two follow-up sends '<inbound id>:f' and
 *		'<inbound id>:g' of its chat with outbox_enqueue (fenced by the
 *		message's token) and calls inbox_complete (the transactional inbox
 *		and outbox): the effect and the follow-ups commit exactly when the
 *		message is marked done.
 *
 * One message in SIM_POISON_EVERY is poison: its handler fails every time
 * (inbox_fail, before any send), so it ends dead after
 * durable.inbox_max_attempts leases.  One follow-up in SIM_REJECT_EVERY
 * (the ':g' one of an inbox id that is a multiple of it) is rejected by the
 * provider for good, and outbox_failed(retryable => false) makes it dead.
 * test/crash/run computes both sets from the ids and checks that exactly
 * they, and nothing else, end dead.
 *
 * Between its admits the replica is also a sender loop: outbox_claim, one
 * send at a time, of the sends that are due (follow-ups, new or refused before; and replies the
 * provider refused, due again before their message is), the provider, then
 * outbox_sent or outbox_failed, as for a reply.
 *
 * The ledger is written outside any database transaction and before
 * outbox_sent, so a key that reached the provider twice shows up as two
 * "sent" lines: that is what makes a duplicate delivery detectable after the
 * fact.  Lines are short and written with one write() on an O_APPEND file
 * shared by all replicas, which keeps them whole.
 *
 * The replica is meant to be killed with SIGKILL at any moment and started
 * again with the same instance id: it then calls instance_start first, and
 * resumes its feed from a position file (a message admitted just before the
 * kill is admitted again, which is one more redelivery).  It survives the
 * server going away: every call that fails because the connection was lost
 * drops the message being handled (its lease expires and it is claimed
 * again) and reconnects with backoff.  The one exception is a provider
 * answer whose outbox_sent was lost with the connection: the replica knows
 * the provider delivered, so it confirms again after reconnecting.
 *
 * SIGTERM asks the replica to stop after the message in hand.  SIGUSR1
 * asks it to stall the next message it handles past the message's lease,
 * just before the effect and the completion (sim_handle).  SIGUSR2 asks it
 * to die (SIGKILL) right after the provider's next delivery, before
 * outbox_sent: a send that was delivered and whose replica died, which the
 * journal must flag unknown and never send again (sim_provider).
 *
 * Every event is appended to a per-instance event log (one word per line
 * after a timestamp) that test/crash/run sums up; unexpected SQLSTATEs are
 * logged as "error <sqlstate> <where>" and make the run fail.
 *
 * Usage:
 *	 botsim feed --feed N --seed S
 *		prints "deliveries N distinct D poison P poison_every E reject_every J":
 *		the size of the feed, its poison messages and the two moduli.
 *	 botsim replica --conninfo C --instance I --replica r --replicas R
 *		 --feed N --seed S --dir D [--rate R] [--lease L] [--refuse P] [--t0 T]
 *		--rate paces the replica's share: its k-th entry is due at T + k / R
 *		(T: the feed's start, epoch seconds; default: when it boots).
 *		--refuse is the share of provider calls refused, in percent;
 *		--provider-ms the provider's longest latency (default 20).
 *
 * IDENTIFICATION
 *	  test/crash/botsim.c
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

/* Records of the feed live in these many chats (per-chat order applies). */
#define SIM_CHATS 64

/* Share of feed entries that redeliver an earlier message, in percent. */
#define SIM_REDELIVER_PCT 30

/* A redelivery repeats one of this many preceding feed entries. */
#define SIM_REDELIVER_WINDOW 64

/* Message number m is poison when m % SIM_POISON_EVERY == SIM_POISON_EVERY - 1. */
#define SIM_POISON_EVERY 50

/* Send '<inbox id>:g' is rejected for good when inbox id % SIM_REJECT_EVERY == 0. */
#define SIM_REJECT_EVERY 20

/* Provider answers whose outbox_sent was lost with the connection. */
#define SIM_MAX_UNCONFIRMED 16

/* How a call ended. */
typedef enum SimStatus
{
	SIM_OK,						/* the call succeeded */
	SIM_LOST,					/* the connection is gone: reconnect */
	SIM_STALE,					/* DR001: our lease was taken over */
	SIM_FAILED					/* any other error (logged) */
} SimStatus;

typedef struct SimUnconfirmed
{
	char		key[128];
	char		token[32];
	char		pmid[64];
} SimUnconfirmed;

typedef struct Sim
{
	const char *conninfo;
	const char *instance;
	const char *dir;
	const char *lease;
	double		lease_secs;		/* the lease, in seconds */
	double		inbox_since;	/* when the call that leased the records in hand was sent */
	int			replica;
	int			replicas;
	long		feed_len;
	uint64_t	seed;
	double		rate;			/* admits per second, 0: as fast as possible */
	double		t0;				/* when the feed started (epoch seconds) */
	int			refuse_pct;		/* share of provider calls that fail */
	int			provider_ms;	/* the provider's longest latency */

	PGconn	   *conn;
	int			ledger_fd;
	int			pos_fd;
	FILE	   *events;
	long	   *feed;			/* message number of each feed entry */
	long		pos;			/* next own feed entry (0-based own index) */
	long		own_total;		/* own entries of the feed */
	long		provider_seq;
	char		last_sqlstate[6];
	SimUnconfirmed unconfirmed[SIM_MAX_UNCONFIRMED];
	int			n_unconfirmed;
} Sim;

static volatile sig_atomic_t sim_stop = 0;
static volatile sig_atomic_t sim_stall_asked = 0;
static volatile sig_atomic_t sim_die_asked = 0;

static void
sim_on_term(int signo)
{
	(void) signo;
	sim_stop = 1;
}

static void
sim_on_stall(int signo)
{
	(void) signo;
	sim_stall_asked = 1;
}

static void
sim_on_die(int signo)
{
	(void) signo;
	sim_die_asked = 1;
}

/* splitmix64: the feed's deterministic random numbers. */
static uint64_t
sim_mix(uint64_t x)
{
	x += UINT64_C(0x9E3779B97F4A7C15);
	x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
	return x ^ (x >> 31);
}

/*
 * Build the feed: entry i carries message number feed[i].  Most entries are
 * new messages, numbered in order; the others redeliver the message of one of
 * the SIM_REDELIVER_WINDOW preceding entries.  Entries are dealt to replicas
 * round-robin, so a redelivery usually reaches another replica than the
 * first delivery, as a webhook retry would.  Returns the number of distinct
 * messages.
 */
static long
sim_build_feed(long n, uint64_t seed, long **feed_out)
{
	long	   *feed = malloc(sizeof(long) * (n > 0 ? n : 1));
	long		next_new = 0;

	if (feed == NULL)
	{
		fprintf(stderr, "botsim: out of memory\n");
		exit(2);
	}
	for (long i = 0; i < n; i++)
	{
		uint64_t	r = sim_mix(seed * UINT64_C(1000003) + (uint64_t) i);

		if (i > 0 && (long) (r % 100) < SIM_REDELIVER_PCT)
		{
			long		window = i < SIM_REDELIVER_WINDOW ? i : SIM_REDELIVER_WINDOW;

			feed[i] = feed[i - 1 - (long) ((r >> 8) % (uint64_t) window)];
		}
		else
			feed[i] = next_new++;
	}
	*feed_out = feed;
	return next_new;
}

static double
sim_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Seconds in a lease given as "<number>s" or "<number>ms" (--lease). */
static double
sim_interval_secs(const char *text)
{
	char	   *end;
	double		value = strtod(text, &end);

	if (end != text && value > 0 && strcmp(end, "s") == 0)
		return value;
	if (end != text && value > 0 && strcmp(end, "ms") == 0)
		return value / 1000;
	fprintf(stderr, "botsim: --lease must be like 2s or 500ms, not \"%s\"\n", text);
	exit(2);
}

static void
sim_sleep(double seconds)
{
	struct timespec ts;

	if (seconds <= 0)
		return;
	ts.tv_sec = (time_t) seconds;
	ts.tv_nsec = (long) ((seconds - ts.tv_sec) * 1e9);
	/* A signal cuts the sleep short, which is what SIGTERM wants. */
	nanosleep(&ts, NULL);
}

/* Append one line to the event log; flushed at once so a SIGKILL keeps it. */
static void
sim_event(Sim *sim, const char *fmt,...)
{
	va_list		ap;

	fprintf(sim->events, "%.3f ", sim_now());
	va_start(ap, fmt);
	vfprintf(sim->events, fmt, ap);
	va_end(ap);
	fputc('\n', sim->events);
	fflush(sim->events);
}

static void
sim_die(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "botsim: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* ---- The position file: the next own feed entry, and the total ---- */

static void
sim_save_pos(Sim *sim)
{
	char		line[64];
	int			len;

	len = snprintf(line, sizeof(line), "%020ld %020ld\n", sim->pos, sim->own_total);
	if (pwrite(sim->pos_fd, line, len, 0) != len)
		sim_die("cannot write the position file: %s", strerror(errno));
}

static void
sim_open_files(Sim *sim)
{
	char		path[1024];
	char		line[64];
	ssize_t		got;

	snprintf(path, sizeof(path), "%s/ledger", sim->dir);
	sim->ledger_fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (sim->ledger_fd < 0)
		sim_die("cannot open %s: %s", path, strerror(errno));

	snprintf(path, sizeof(path), "%s/events.%s", sim->dir, sim->instance);
	sim->events = fopen(path, "a");
	if (sim->events == NULL)
		sim_die("cannot open %s: %s", path, strerror(errno));

	snprintf(path, sizeof(path), "%s/pos.%s", sim->dir, sim->instance);
	sim->pos_fd = open(path, O_RDWR | O_CREAT, 0644);
	if (sim->pos_fd < 0)
		sim_die("cannot open %s: %s", path, strerror(errno));
	got = pread(sim->pos_fd, line, sizeof(line) - 1, 0);
	sim->pos = 0;
	if (got > 0)
	{
		line[got] = '\0';
		sim->pos = strtol(line, NULL, 10);
	}
	sim_save_pos(sim);
}

/* What the fake provider answered. */
typedef enum SimAnswer
{
	SIM_DELIVERED,				/* delivered: pmid holds its message id */
	SIM_REFUSED,				/* refused for now: try again later */
	SIM_REJECTED				/* rejected for good (a chat that blocked the bot) */
} SimAnswer;

/* Whether the provider rejects send `key` for good (see SIM_REJECT_EVERY). */
static bool
sim_rejects(const char *key)
{
	size_t		len = strlen(key);

	return len > 2 && strcmp(key + len - 2, ":g") == 0 &&
		strtol(key, NULL, 10) % SIM_REJECT_EVERY == 0;
}

/*
 * The fake provider: record the delivery (or the refusal) durably, then
 * answer.  A "sent" line means the provider delivered the message to the
 * chat; the ledger is the provider's truth, whatever the journal says.
 * Half its latency comes before the delivery (the request travelling) and
 * half after (the answer travelling), so a replica killed meanwhile leaves
 * both kinds of ambiguous send: delivered, and not.
 */
static SimAnswer
sim_provider(Sim *sim, const char *key, char *pmid, size_t pmid_size)
{
	char		line[512];
	int			len;
	SimAnswer	answer = SIM_DELIVERED;
	double		latency = sim->provider_ms > 0 ? (rand() % (sim->provider_ms + 1)) / 1000.0 : 0;

	if (sim_rejects(key))
		answer = SIM_REJECTED;
	else if ((rand() % 100) < sim->refuse_pct)
		answer = SIM_REFUSED;
	sim_sleep(latency / 2);
	if (answer == SIM_DELIVERED)
	{
		snprintf(pmid, pmid_size, "p-%s-%d-%ld", sim->instance, (int) getpid(),
				 ++sim->provider_seq);
		len = snprintf(line, sizeof(line), "sent %s %s %s\n", key, pmid, sim->instance);
	}
	else
		len = snprintf(line, sizeof(line), "%s %s - %s\n",
					   answer == SIM_REJECTED ? "rejected" : "refused", key, sim->instance);
	if (len >= (int) sizeof(line))
		sim_die("ledger line too long for key %s", key);
	if (write(sim->ledger_fd, line, len) != len)
		sim_die("cannot write the ledger: %s", strerror(errno));
	if (fsync(sim->ledger_fd) != 0)
		sim_die("cannot fsync the ledger: %s", strerror(errno));
	if (answer == SIM_DELIVERED && sim_die_asked)
	{
		sim_event(sim, "die_delivered %s", key);
		raise(SIGKILL);
	}
	sim_sleep(latency / 2);
	return answer;
}

/* ---- Connection and calls ---- */

static void
sim_disconnect(Sim *sim)
{
	if (sim->conn != NULL)
		PQfinish(sim->conn);
	sim->conn = NULL;
}

/*
 * Connect, retrying with capped exponential backoff while the server is
 * down or restarting.  Returns false only when asked to stop.
 */
static bool
sim_connect(Sim *sim)
{
	double		backoff = 0.05;

	while (!sim_stop)
	{
		sim->conn = PQconnectdb(sim->conninfo);
		if (PQstatus(sim->conn) == CONNECTION_OK)
			return true;
		sim_disconnect(sim);
		sim_sleep(backoff * (1.0 + (rand() % 100) / 100.0));
		backoff = backoff * 2 > 1.0 ? 1.0 : backoff * 2;
	}
	return false;
}

/*
 * Run one statement with text parameters.  On success *res holds the result
 * (the caller clears it).  A lost connection, or the server saying it is
 * shutting down or restarting (classes 08 and 57P), gives SIM_LOST and drops
 * the connection; DR001 gives SIM_STALE; anything else is logged under
 * `where` and gives SIM_FAILED.  The SQLSTATE is left in sim->last_sqlstate.
 */
static SimStatus
sim_call(Sim *sim, const char *where, PGresult **res, const char *sql,
		 int nparams, const char *const *params)
{
	PGresult   *r;
	ExecStatusType st;
	const char *state;

	*res = NULL;
	sim->last_sqlstate[0] = '\0';
	if (sim->conn == NULL)
		return SIM_LOST;
	r = PQexecParams(sim->conn, sql, nparams, NULL, params, NULL, NULL, 0);
	st = PQresultStatus(r);
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
	{
		*res = r;
		return SIM_OK;
	}
	state = r != NULL ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	if (state != NULL)
		snprintf(sim->last_sqlstate, sizeof(sim->last_sqlstate), "%s", state);
	if (PQstatus(sim->conn) != CONNECTION_OK || state == NULL ||
		strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0)
	{
		PQclear(r);
		sim_disconnect(sim);
		sim_event(sim, "conn_lost %s", where);
		return SIM_LOST;
	}
	if (strcmp(state, "DR001") == 0)
	{
		PQclear(r);
		sim_event(sim, "stale %s", where);
		return SIM_STALE;
	}
	{
		char		msg[256];

		snprintf(msg, sizeof(msg), "%s", PQresultErrorMessage(r));
		msg[strcspn(msg, "\n")] = '\0';
		sim_event(sim, "error %s %s %s", state, where, msg);
	}
	PQclear(r);
	return SIM_FAILED;
}

/* ROLLBACK after a failed statement inside a transaction, if still connected. */
static void
sim_rollback(Sim *sim)
{
	PGresult   *res;

	if (sim->conn == NULL)
		return;
	res = PQexec(sim->conn, "ROLLBACK");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		sim_disconnect(sim);
	PQclear(res);
}

/*
 * Confirm provider answers whose outbox_sent was lost with the connection.
 * DR001 means the lease expired meanwhile and the send is now unknown (or
 * was taken over), which the run reports; an entry stays queued only while
 * the connection keeps failing.
 */
static void
sim_confirm_unconfirmed(Sim *sim)
{
	while (sim->n_unconfirmed > 0 && sim->conn != NULL)
	{
		SimUnconfirmed *u = &sim->unconfirmed[sim->n_unconfirmed - 1];
		const char *params[3] = {u->key, u->token, u->pmid};
		PGresult   *res;
		SimStatus	st;

		st = sim_call(sim, "outbox_sent_again", &res,
					  "SELECT durable.outbox_sent(key => $1, token => $2::bigint, provider_message_id => $3)",
					  3, params);
		if (st == SIM_LOST)
			return;
		sim_event(sim, "sent_confirmed_late %s %s", u->key,
				  st == SIM_OK ? "ok" : sim->last_sqlstate);
		PQclear(res);
		sim->n_unconfirmed--;
	}
}

/* Make sure there is a connection; after a reconnect, confirm what is owed. */
static bool
sim_ensure_connected(Sim *sim)
{
	if (sim->conn != NULL)
		return true;
	if (!sim_connect(sim))
		return false;
	sim_event(sim, "connected");
	sim_confirm_unconfirmed(sim);
	return sim->conn != NULL;
}

/*
 * Give a message back for later: the attempt is counted and it is due
 * again after retry_in.
 */
/*
 * A call fenced by a lease taken `since` (when the call that took it was
 * sent, no later than the lease began) answered `st`.  DR001 while that
 * lease cannot have run out yet is a fencing bug, not a takeover: nothing
 * in this test takes a live lease over (claims and the sweep take expired
 * ones, instance_start those of a replica that died), so it is an error
 * the run counts.  Otherwise its send would just end unknown, which the
 * run accepts.  Half a second spares the clock's and the call's jitter.
 */
static SimStatus
sim_fenced(Sim *sim, SimStatus st, const char *where, const char *what, double since)
{
	double		held = sim_now() - since;

	if (st == SIM_STALE && held < sim->lease_secs - 0.5)
		sim_event(sim, "error XXBOT %s of %s refused as stale (DR001) %.3f s into a %.3f s lease",
				  where, what, held, sim->lease_secs);
	return st;
}

static void
sim_inbox_fail(Sim *sim, const char *id, const char *token, const char *why,
			   const char *retry_in)
{
	const char *params[4] = {id, token, why, retry_in};
	PGresult   *res;

	if (sim_fenced(sim, sim_call(sim, "inbox_fail", &res,
								 "SELECT state FROM durable.inbox_fail(id => $1::bigint, token => $2::bigint, error => $3, retry_in => $4::interval)",
								 4, params), "inbox_fail", id, sim->inbox_since) == SIM_OK)
		PQclear(res);
}

/* What became of a send we held: the provider's answer, or nothing known. */
typedef enum
{
	SIM_SEND_SENT,				/* delivered and confirmed */
	SIM_SEND_REFUSED,			/* refused or rejected, and outbox_failed recorded it */
	SIM_SEND_ABANDONED			/* the connection failed: the lease decides */
} SimSend;

/*
 * Call the provider for send `key`, held under `otoken`, and tell the
 * journal what it answered: outbox_sent; outbox_failed, retryable and due
 * again after 100 ms, when it refused; not retryable (dead) when it
 * rejected the send for good.  `what` names the send in events.
 */
static SimSend
sim_send(Sim *sim, const char *what, const char *key, const char *otoken, double since)
{
	char		pmid[64] = "";
	PGresult   *res;
	SimStatus	st;
	SimAnswer	answer = sim_provider(sim, key, pmid, sizeof(pmid));

	if (answer != SIM_DELIVERED)
	{
		bool		rejected = answer == SIM_REJECTED;
		const char *params[5] = {key, otoken,
			rejected ? "provider rejected the send for good" : "provider refused",
			rejected ? "false" : "true", "100ms"};

		sim_event(sim, "%s_%s %s", what, rejected ? "rejected" : "refused", key);
		st = sim_fenced(sim, sim_call(sim, "outbox_failed", &res,
									  "SELECT state FROM durable.outbox_failed(key => $1, token => $2::bigint, error => $3, "
									  "retryable => $4::boolean, retry_in => $5::interval)",
									  5, params), "outbox_failed", key, since);
		if (st != SIM_OK)
			return SIM_SEND_ABANDONED;
		PQclear(res);
		return SIM_SEND_REFUSED;
	}
	else
	{
		const char *params[3] = {key, otoken, pmid};

		st = sim_fenced(sim, sim_call(sim, "outbox_sent", &res,
									  "SELECT durable.outbox_sent(key => $1, token => $2::bigint, provider_message_id => $3)",
									  3, params), "outbox_sent", key, since);
		if (st == SIM_LOST && sim->n_unconfirmed < SIM_MAX_UNCONFIRMED)
		{
			SimUnconfirmed *u = &sim->unconfirmed[sim->n_unconfirmed++];

			snprintf(u->key, sizeof(u->key), "%s", key);
			snprintf(u->token, sizeof(u->token), "%s", otoken);
			snprintf(u->pmid, sizeof(u->pmid), "%s", pmid);
		}
		if (st != SIM_OK)
			return SIM_SEND_ABANDONED;
		PQclear(res);
		sim_event(sim, "%s_sent %s", what, key);
		return SIM_SEND_SENT;
	}
}

/*
 * Handle one leased message: reply through the outbox, then commit the
 * effect row and the completion together.  Any failure abandons the
 * message; its lease runs out and the inbox hands it out again.
 */
static void
sim_handle(Sim *sim, const char *id, const char *token, const char *message_id,
		   const char *chat_id)
{
	char		payload[256];
	char		followup_key[64];
	char		key[128] = "";
	char		otoken[32] = "";
	char		action[16] = "";
	const char *reply = "none";
	PGresult   *res;
	SimStatus	st;
	double		send_since;

	/* A poison message fails before it does anything, every time. */
	if (strtol(message_id + 1, NULL, 10) % SIM_POISON_EVERY == SIM_POISON_EVERY - 1)
	{
		sim_event(sim, "poison %s %s", id, message_id);
		sim_inbox_fail(sim, id, token, "poison: the handler fails every time", "50ms");
		return;
	}

	/* 1. Journal the reply; the server derives its key from the lease. */
	snprintf(payload, sizeof(payload), "{\"reply_to\": \"%s\", \"text\": \"ok %s\"}",
			 message_id, message_id);
	{
		const char *params[6] = {chat_id, payload, sim->instance, sim->lease, id, token};

		send_since = sim_now();
		st = sim_fenced(sim, sim_call(sim, "outbox_begin", &res,
									  "SELECT action, key, token, provider_message_id FROM durable.outbox_begin("
									  "idempotency_key => NULL, chat_id => $1, payload => $2::jsonb, instance => $3, "
									  "lease => $4::interval, inbound_id => $5::bigint, inbound_token => $6::bigint)",
									  6, params), "outbox_begin", id, sim->inbox_since);
		if (st != SIM_OK)
			return;
		if (PQntuples(res) != 1)
		{
			sim_event(sim, "error XXBOT outbox_begin returned %d rows", PQntuples(res));
			PQclear(res);
			return;
		}
		snprintf(action, sizeof(action), "%s", PQgetvalue(res, 0, 0));
		snprintf(key, sizeof(key), "%s", PQgetvalue(res, 0, 1));
		snprintf(otoken, sizeof(otoken), "%s", PQgetvalue(res, 0, 2));
		PQclear(res);
	}

	/* 2. Call the provider only when the journal says so. */
	if (strcmp(action, "send") == 0)
	{
		switch (sim_send(sim, "reply", key, otoken, send_since))
		{
			case SIM_SEND_SENT:
				reply = "sent";
				break;
			case SIM_SEND_REFUSED:
				sim_inbox_fail(sim, id, token, "reply refused by the provider", "150ms");
				return;
			case SIM_SEND_ABANDONED:
				return;
		}
	}
	else if (strcmp(action, "sent") == 0)
	{
		/* Sent by an earlier run of this message: answered from the journal. */
		reply = "journal";
		sim_event(sim, "reply_already_sent %s", key);
	}
	else if (strcmp(action, "unknown") == 0)
	{
		/*
		 * The provider may or may not have delivered it: never resend by
		 * ourselves.  The message itself is still handled once.
		 */
		reply = "unknown";
		sim_event(sim, "reply_unknown %s", key);
	}
	else if (strcmp(action, "busy") == 0 || strcmp(action, "wait") == 0)
	{
		/* Another lease holds the send, or its retry is not due: later. */
		sim_event(sim, "reply_%s %s", action, key);
		sim_inbox_fail(sim, id, token, "reply not sendable yet", "200ms");
		return;
	}
	else
	{
		sim_event(sim, "error XXBOT unexpected action %s for %s", action, key);
		sim_inbox_fail(sim, id, token, "unexpected outbox action", "1s");
		return;
	}

	/*
	 * Asked to stall (SIGUSR1): freeze here, the reply journaled and the
	 * lease held, for twice the lease and more, as a replica paused by its
	 * runtime or its host does.  The message is taken over or recovered
	 * meanwhile, so the effect and completion below must be refused
	 * (DR001, "stale" in the events): a build that let them through would
	 * commit a second effect row.  Its token is logged for the run's check.
	 */
	if (sim_stall_asked)
	{
		double		until = sim_now() + 2 * sim->lease_secs + 0.5;

		sim_stall_asked = 0;
		sim_event(sim, "stall %s %s", id, token);
		while (!sim_stop && sim_now() < until)
			sim_sleep(until - sim_now());
		sim_event(sim, "stall_over %s", id);
	}

	/* 3. The effect and the completion commit together, or not at all. */
	if (sim_call(sim, "begin", &res, "BEGIN", 0, NULL) != SIM_OK)
		return;
	PQclear(res);
	{
		const char *params[5] = {id, message_id, sim->instance, token, reply};

		st = sim_call(sim, "effect", &res,
					  "INSERT INTO crash.effects (inbox_id, message_id, instance, token, reply) "
					  "VALUES ($1::bigint, $2, $3, $4::bigint, $5)",
					  5, params);
		if (st != SIM_OK)
		{
			sim_rollback(sim);
			return;
		}
		PQclear(res);
	}
	{
		const char *params[5] = {followup_key, chat_id, payload, id, token};

		/* Two, so that a chat has two sends queued at once (per-chat order). */
		for (const char *part = "fg"; *part != '\0'; part++)
		{
			snprintf(followup_key, sizeof(followup_key), "%s:%c", id, *part);
			snprintf(payload, sizeof(payload), "{\"follow_up_to\": \"%s\", \"part\": \"%c\"}",
					 message_id, *part);
			st = sim_fenced(sim, sim_call(sim, "outbox_enqueue", &res,
										  "SELECT created FROM durable.outbox_enqueue(idempotency_key => $1, chat_id => $2, "
										  "payload => $3::jsonb, inbound_id => $4::bigint, inbound_token => $5::bigint)",
										  5, params), "outbox_enqueue", id, sim->inbox_since);
			if (st != SIM_OK)
			{
				sim_rollback(sim);
				return;
			}
			PQclear(res);
		}
	}
	{
		const char *params[2] = {id, token};

		st = sim_fenced(sim, sim_call(sim, "inbox_complete", &res,
									  "SELECT durable.inbox_complete(id => $1::bigint, token => $2::bigint)",
									  2, params), "inbox_complete", id, sim->inbox_since);
		if (st != SIM_OK)
		{
			sim_rollback(sim);
			return;
		}
		PQclear(res);
	}
	if (sim_call(sim, "commit", &res, "COMMIT", 0, NULL) != SIM_OK)
	{
		/* The COMMIT's fate is unknown; the journal knows. */
		sim_event(sim, "commit_unknown %s", id);
		return;
	}
	PQclear(res);
	sim_event(sim, "handled %s %s %s", id, message_id, token);
}

/* Journal our next feed entry, leased to us at once, and handle it. */
static void
sim_admit_next(Sim *sim)
{
	long		entry = (long) sim->replica + sim->pos * sim->replicas;
	long		msg = sim->feed[entry];
	char		message_id[32];
	char		chat_id[32];
	char		payload[128];
	const char *params[6];
	PGresult   *res;
	char		id[32];
	char		token[32];
	bool		duplicate;
	bool		leased;

	snprintf(message_id, sizeof(message_id), "m%ld", msg);
	snprintf(chat_id, sizeof(chat_id), "c%ld", msg % SIM_CHATS);
	snprintf(payload, sizeof(payload), "{\"n\": %ld, \"text\": \"hello %ld\"}", msg, msg);
	params[0] = "crash";
	params[1] = message_id;
	params[2] = chat_id;
	params[3] = payload;
	params[4] = sim->instance;
	params[5] = sim->lease;
	sim->inbox_since = sim_now();
	if (sim_call(sim, "inbox_admit", &res,
				 "SELECT id, token, duplicate, state FROM durable.inbox_admit(source => $1, message_id => $2, "
				 "chat_id => $3, payload => $4::jsonb, instance => $5, lease => $6::interval)",
				 6, params) != SIM_OK)
		return;
	if (PQntuples(res) != 1)
	{
		sim_event(sim, "error XXBOT inbox_admit returned %d rows", PQntuples(res));
		PQclear(res);
		return;
	}
	snprintf(id, sizeof(id), "%s", PQgetvalue(res, 0, 0));
	leased = !PQgetisnull(res, 0, 1);
	snprintf(token, sizeof(token), "%s", PQgetvalue(res, 0, 1));
	duplicate = strcmp(PQgetvalue(res, 0, 2), "t") == 0;
	PQclear(res);

	/* The delivery is done: the next one is the next entry, kill or not. */
	sim->pos++;
	sim_save_pos(sim);
	sim_event(sim, "admit %s %s %s %s", duplicate ? "dup" : "new", message_id,
			  leased ? "leased" : "-", id);
	if (leased)
		sim_handle(sim, id, token, message_id, chat_id);
}

/* Claim what is due (recovered, expired, retried) and handle it. */
static void
sim_claim(Sim *sim, int wait_ms)
{
	char		wait[32];
	const char *params[4];
	PGresult   *res;
	int			n;
	char		(*rows)[4][64];

	snprintf(wait, sizeof(wait), "%d ms", wait_ms);
	params[0] = sim->instance;
	params[1] = "4";
	params[2] = sim->lease;
	params[3] = wait;
	sim->inbox_since = sim_now();
	if (sim_call(sim, "inbox_claim", &res,
				 "SELECT id, token, message_id, chat_id FROM durable.inbox_claim(instance => $1, max => $2::integer, "
				 "lease => $3::interval, wait => $4::interval)",
				 4, params) != SIM_OK)
		return;
	n = PQntuples(res);
	rows = calloc(n > 0 ? n : 1, sizeof(*rows));
	if (rows == NULL)
		sim_die("out of memory");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < 4; c++)
			snprintf(rows[i][c], sizeof(rows[i][c]), "%s", PQgetvalue(res, i, c));
	PQclear(res);
	for (int i = 0; i < n && sim->conn != NULL; i++)
	{
		sim_event(sim, "claimed %s %s", rows[i][0], rows[i][2]);
		sim_handle(sim, rows[i][0], rows[i][1], rows[i][2], rows[i][3]);
	}
	free(rows);
}

/*
 * The sender loop: claim the sends that are due (follow-ups, and sends
 * refused before) and send them.  True when it claimed any.
 */
static bool
sim_send_queued(Sim *sim)
{
	/* One at a time, so that a chat's two follow-ups may go to two replicas. */
	const char *params[3] = {sim->instance, "1", sim->lease};
	PGresult   *res;
	int			n;
	char		(*rows)[2][128];
	double		since = sim_now();

	if (sim_call(sim, "outbox_claim", &res,
				 "SELECT key, token FROM durable.outbox_claim(instance => $1, max => $2::integer, "
				 "lease => $3::interval)",
				 3, params) != SIM_OK)
		return false;
	n = PQntuples(res);
	rows = calloc(n > 0 ? n : 1, sizeof(*rows));
	if (rows == NULL)
		sim_die("out of memory");
	for (int i = 0; i < n; i++)
		for (int c = 0; c < 2; c++)
			snprintf(rows[i][c], sizeof(rows[i][c]), "%s", PQgetvalue(res, i, c));
	PQclear(res);
	for (int i = 0; i < n && sim->conn != NULL; i++)
	{
		sim_event(sim, "queued_claimed %s", rows[i][0]);
		(void) sim_send(sim, "queued", rows[i][0], rows[i][1], since);
	}
	free(rows);
	return n > 0;
}

/* A replica boots: recover what its dead incarnation held. */
static bool
sim_instance_start(Sim *sim)
{
	const char *params[1] = {sim->instance};

	while (!sim_stop)
	{
		PGresult   *res;
		SimStatus	st;

		if (!sim_ensure_connected(sim))
			return false;
		st = sim_call(sim, "instance_start", &res,
					  "SELECT inbox_recovered, outbox_ambiguous FROM durable.instance_start(instance => $1)",
					  1, params);
		if (st == SIM_OK)
		{
			sim_event(sim, "instance_start %s %s", PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
			PQclear(res);
			return true;
		}
		if (st != SIM_LOST)
			sim_sleep(0.5);
	}
	return false;
}

static int
sim_replica(Sim *sim)
{
	double		interval = sim->rate > 0 ? 1.0 / sim->rate : 0;
	double		next_admit;

	sim->own_total = sim->feed_len > sim->replica ?
		(sim->feed_len - sim->replica + sim->replicas - 1) / sim->replicas : 0;
	srand((unsigned) (sim->seed ^ (uint64_t) getpid() ^ ((uint64_t) sim->replica << 20)));
	sim_open_files(sim);
	sim_event(sim, "boot pos %ld of %ld", sim->pos, sim->own_total);

	if (!sim_instance_start(sim))
		return 0;

	/*
	 * The k-th own entry is due at t0 + k / rate, so a replica that was
	 * down catches up in a burst, as a real one would with a backlog.
	 */
	if (sim->t0 <= 0)
		sim->t0 = sim_now() - sim->pos * interval;
	next_admit = sim->t0 + sim->pos * interval;
	while (!sim_stop)
	{
		double		now;
		int			wait_ms = 250;

		if (!sim_ensure_connected(sim))
			break;
		now = sim_now();
		if (sim->pos < sim->own_total && now >= next_admit)
		{
			sim_admit_next(sim);
			next_admit = sim->t0 + sim->pos * interval;
			continue;
		}
		if (sim->pos < sim->own_total)
		{
			wait_ms = (int) ((next_admit - now) * 1000);
			if (wait_ms > 250)
				wait_ms = 250;
		}
		if (sim_send_queued(sim))
			wait_ms = 0;
		if (sim->conn != NULL)
			sim_claim(sim, wait_ms < 20 ? 0 : wait_ms);
	}
	sim_event(sim, "stop pos %ld of %ld", sim->pos, sim->own_total);
	sim_disconnect(sim);
	return 0;
}

static void
sim_usage(void)
{
	fprintf(stderr,
			"usage: botsim feed --feed N --seed S\n"
			"       botsim replica --conninfo C --instance I --replica r --replicas R\n"
			"              --feed N --seed S --dir D [--rate PER_SECOND] [--lease INTERVAL]\n"
			"              [--refuse PERCENT] [--t0 EPOCH_SECONDS] [--provider-ms MS]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
		{"conninfo", required_argument, NULL, 'c'},
		{"instance", required_argument, NULL, 'i'},
		{"replica", required_argument, NULL, 'r'},
		{"replicas", required_argument, NULL, 'R'},
		{"feed", required_argument, NULL, 'n'},
		{"seed", required_argument, NULL, 's'},
		{"dir", required_argument, NULL, 'd'},
		{"rate", required_argument, NULL, 'a'},
		{"lease", required_argument, NULL, 'l'},
		{"refuse", required_argument, NULL, 'f'},
		{"t0", required_argument, NULL, 't'},
		{"provider-ms", required_argument, NULL, 'p'},
		{NULL, 0, NULL, 0}
	};
	Sim			sim;
	const char *cmd;
	int			c;
	long		distinct;
	int			rc = 0;
	struct sigaction sa;

	if (argc < 2)
		sim_usage();
	cmd = argv[1];
	memset(&sim, 0, sizeof(sim));
	sim.replicas = 1;
	sim.seed = 42;
	sim.lease = "2s";
	sim.lease_secs = 2;
	sim.refuse_pct = 5;
	sim.provider_ms = 20;
	sim.ledger_fd = -1;
	sim.pos_fd = -1;

	optind = 2;
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1)
	{
		switch (c)
		{
			case 'c':
				sim.conninfo = optarg;
				break;
			case 'i':
				sim.instance = optarg;
				break;
			case 'r':
				sim.replica = atoi(optarg);
				break;
			case 'R':
				sim.replicas = atoi(optarg);
				break;
			case 'n':
				sim.feed_len = atol(optarg);
				break;
			case 's':
				sim.seed = strtoull(optarg, NULL, 10);
				break;
			case 'd':
				sim.dir = optarg;
				break;
			case 'a':
				sim.rate = atof(optarg);
				break;
			case 'l':
				sim.lease = optarg;
				sim.lease_secs = sim_interval_secs(optarg);
				break;
			case 'f':
				sim.refuse_pct = atoi(optarg);
				break;
			case 't':
				sim.t0 = atof(optarg);
				break;
			case 'p':
				sim.provider_ms = atoi(optarg);
				break;
			default:
				sim_usage();
		}
	}
	if (sim.feed_len < 0 || sim.replicas < 1)
		sim_usage();
	if (strcmp(cmd, "feed") != 0 &&
		(strcmp(cmd, "replica") != 0 || sim.conninfo == NULL || sim.instance == NULL ||
		 sim.dir == NULL || sim.replica < 0 || sim.replica >= sim.replicas))
		sim_usage();
	distinct = sim_build_feed(sim.feed_len, sim.seed, &sim.feed);

	if (strcmp(cmd, "feed") == 0)
		printf("deliveries %ld distinct %ld poison %ld poison_every %d reject_every %d\n",
			   sim.feed_len, distinct, distinct / SIM_POISON_EVERY, SIM_POISON_EVERY,
			   SIM_REJECT_EVERY);
	else
	{
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = sim_on_term;
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGINT, &sa, NULL);
		/* A stall waits for the next message in hand: calls go on. */
		sa.sa_handler = sim_on_stall;
		sa.sa_flags = SA_RESTART;
		sigaction(SIGUSR1, &sa, NULL);
		sa.sa_handler = sim_on_die;
		sigaction(SIGUSR2, &sa, NULL);
		signal(SIGPIPE, SIG_IGN);
		rc = sim_replica(&sim);
	}
	free(sim.feed);
	return rc;
}
