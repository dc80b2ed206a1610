#!/usr/bin/python3
"""An example chat bot on durable, in Python with psycopg 3.

A complete, runnable loop with a fake chat platform and a fake provider:

  * boot: durable.instance_start(instance) takes back what this instance id
    held when its previous incarnation died;
  * a feeder thread plays the chat platform's webhook: it journals each
    inbound message with inbox_admit (no instance: the webhook only
    journals and acknowledges), including redeliveries, which are
    deduplicated by (source, message_id);
  * the worker waits in the server for work with inbox_claim(wait => '2s')
    instead of polling;
  * each message is handled in the order the discipline requires:
      1. the reply goes out through outbox_begin (key derived from the
         inbound lease, so a reprocessed message re-derives the same key),
         the provider, then outbox_sent; when the provider refuses,
         outbox_failed: the journal holds the reply and the sender loop
         retries it (the Node and C bots give the message back instead);
      2. one transaction writes the handler's effect row, enqueues a
         follow-up for every 4th message (outbox_enqueue, due later) and
         ends with inbox_complete: the effect and the follow-up commit
         exactly when the message is done;
  * a sender loop (its own thread, connection and instance id) waits in the
    server with outbox_claim for due sends -- follow-ups, refused replies --
    and sends and confirms them;
  * slow jobs send inbox_heartbeat while they work, and a slow provider call
    outbox_heartbeat as well: a send lease that ran out mid-call would make
    the send unknown (ambiguous);
  * a lost connection (a server restart, a failover) is a reboot: the bot
    connects again and calls instance_start, which takes back the leases it
    held and flags a send it had begun but not confirmed as unknown
    (ambiguous: left to an operator, never resent) -- unless the provider
    had answered: that answer is then told with the send's token
    (outbox_sent, outbox_failed), so it ends sent, or failed and retried;
    the webhook retries its admit, which the journal deduplicates;
  * SIGTERM stops after the message in hand and gives back, with
    inbox_release, whatever the last claim handed out but was not handled;
    while reconnecting, it stops after the current back-off unless the
    journal still lacks the provider's answer to a send: then it keeps
    trying for --stop-grace seconds, to tell it (given up, the send stays
    unknown).

The provider "delivers" by appending a line to a file; the test
(examples/run) checks that every message has exactly one effect row and
exactly one delivery.

    python3 examples/python/bot.py --feed 20 --deliveries /tmp/deliveries

Connection settings come from the usual libpq environment (PGHOST, PGPORT,
PGUSER, PGDATABASE) or --dsn.  Requires the Debian package python3-psycopg.
"""

import argparse
import contextlib
import os
import signal
import sys
import threading
import time

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

STALE_LEASE = "DR001"
# A send settled by someone else meanwhile: another sender has it or an operator retried
# it (DR001), it is sent or dead (DR003), an operator discarded it (DR002).
SETTLED = (STALE_LEASE, "DR002", "DR003")
# The provider's answers to a send, as the journal takes them.
SENT = "SELECT durable.outbox_sent(%s, %s, %s)"
REFUSED = ("SELECT * FROM durable.outbox_failed(%s, %s, %s, retryable => true,"
           " retry_in => %s::interval)")


def connection_lost(conn):
    """Whether the error just raised on conn lost the connection, and the answer with it.

    Not the exception's class: psycopg raises OperationalError for refusals
    too (SQLSTATE classes 40, 53, 54, 55, 57: a payload over
    durable.max_payload_bytes, a cancel).  Those are answers; sending the
    call again would be refused again.
    """
    return conn.broken or conn.closed


def refused_for_now(e):
    """A refusal on a live connection that a later try may not meet: a cancel
    (57014), a lock or statement timeout (55P03, 57014), a serialization
    failure (40001), a server short of resources (53xxx): classes 40, 53, 55,
    57 and 58."""
    return (e.sqlstate or "")[:2] in ("40", "53", "55", "57", "58")


class ProviderError(Exception):
    """The chat provider refused a send; retryable."""


class FakeProvider:
    """Delivers by appending "key<TAB>chat<TAB>text" to a file.

    It refuses the first call for the keys it is told to (a 503), so that
    the retry path runs; the refused call delivers nothing.  The worker and
    the sender loop call it from two threads.
    """

    def __init__(self, path):
        self.path = path
        self.refused = set()
        self.calls = 0
        self.lock = threading.Lock()

    def send(self, key, chat_id, text, refuse_first, delay=0.0):
        time.sleep(delay)  # a slow API
        with self.lock:
            self.calls += 1
            if refuse_first and key not in self.refused:
                self.refused.add(key)
                raise ProviderError("503 service unavailable")
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(f"{key}\t{chat_id}\t{text}\n")
                f.flush()
                os.fsync(f.fileno())
            return f"py-{self.calls}"


def feed_messages(n, long_message=0):
    """The platform's deliveries: n messages, every 5th delivered twice.

    Message long_message (if any) carries a 2,000-character text.
    """
    out = []
    for i in range(1, n + 1):
        # every 3rd says something with quotes and a backslash, as users do
        text = f'say "hello" \\ {i}' if i % 3 == 0 else f"hello {i}"
        if i == long_message:
            text = "long " * 400
        msg = (f"m{i}", f"chat-{i % 4}", {"text": text, "n": i})
        out.append(msg)
        if i % 5 == 0:
            out.append(msg)  # a webhook retry: the same message id again
    return out


def thread_noting_failure(target, failed):
    """A daemon thread that runs target; the error that ends it is appended to failed."""
    def main():
        try:
            target()
        except BaseException as e:
            failed.append(e)
            raise
    return threading.Thread(target=main, daemon=True)


class Bot:
    def __init__(self, args, stop):
        self.args = args
        self.stop = stop
        self.instance = args.instance
        self.source = args.instance
        self.schema = sql.Identifier(args.schema)
        self.provider = FakeProvider(args.deliveries)
        self.stats = dict(handled=0, duplicates=0, provider_errors=0, heartbeats=0,
                          released=0, stale=0, replies=0, followups=0, sender_sent=0,
                          send_heartbeats=0, reconnects=0)
        self.feed_finished = threading.Event()  # tells the sender loop to end once idle
        self.conn = self.connect()
        self.held = {}  # id -> token of every record we hold a lease on
        self.untold = {}  # key -> (SENT or REFUSED, params): the provider's answers not yet journaled

    def connect(self, role="worker"):
        # named, so that an operator (or examples/run) can tell the connections apart
        return psycopg.connect(self.args.dsn, autocommit=True,
                               application_name=f"{self.instance} {role}")

    def connect_retrying(self, role, setup=None, deadline=None, untold=None):
        """A new connection, once setup(conn) ran on it, or None when stopped or past deadline.

        The worker, the webhook and the sender loop all come back this way
        after a lost connection: a server restarting or failing over refuses
        connections for a while, so the tries back off from 0.1 s to 5 s.
        After SIGTERM, only provider answers the journal was not told of
        (untold) keep it trying, for --stop-grace seconds.
        """
        delay = 0.1
        grace_end = None
        while deadline is None or time.monotonic() < deadline:
            if self.stop.is_set():
                if not untold:
                    return None
                grace_end = grace_end or time.monotonic() + self.args.stop_grace
                if time.monotonic() >= grace_end:
                    return None
            conn = None
            try:
                conn = self.connect(role)
                if setup is not None:
                    setup(conn)
                return conn
            except psycopg.OperationalError:
                if conn is not None:
                    conn.close()
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
            except BaseException:
                if conn is not None:
                    conn.close()
                raise
        return None

    # -- boot ---------------------------------------------------------
    def boot(self):
        with self.conn.cursor() as cur:
            cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(self.schema))
            cur.execute(sql.SQL("""CREATE TABLE IF NOT EXISTS {}.effects (
                message_id text NOT NULL, chat_id text NOT NULL,
                reply_key text, instance text NOT NULL,
                at timestamptz NOT NULL DEFAULT clock_timestamp())""").format(self.schema))
        self.start_instance(self.conn, "booted")

    def start_instance(self, conn, what):
        recovered, ambiguous = conn.execute(
            "SELECT * FROM durable.instance_start(%s)", (self.instance,)).fetchone()
        print(f"{self.instance}: {what} (recovered {recovered} inbox records, "
              f"{ambiguous} ambiguous sends)", flush=True)

    def reconnect(self, error, deadline):
        """The connection was lost: connect again and reboot, as after a crash.

        The provider's answers the journal lacks are told first (tell_again);
        then whatever this run held is taken back by instance_start rather
        than finished: a lease's confirmation might have committed or not,
        and a send begun whose answer we do not know might have reached the
        provider or not (instance_start flags it unknown; it is never resent
        by itself).
        """
        self.stats["reconnects"] += 1
        self.held = {}
        print(f"{self.instance}: connection lost ({error.__class__.__name__}); reconnecting",
              flush=True)
        self.conn.close()

        def reboot(conn):
            self.tell_again(conn, self.untold)
            self.start_instance(conn, "reconnected")

        conn = self.connect_retrying("worker", reboot, deadline, self.untold)
        if conn is None:
            return False
        self.conn = conn
        return True

    @staticmethod
    def tell(conn, untold, answer, params):
        """Give the journal the provider's answer to a send (SENT or REFUSED; params[0] is the key).

        Kept in untold until the journal has it: a connection lost on the way
        keeps it for tell_again, after the reboot.  A refusal on a live
        connection (a cancel, lock_timeout) is no answer either: the answer is
        told again, after 0.05 s, then 0.1 ... 3.2 s, before the caller gets
        the error (until 2026-12-06 the first refusal ended the bot, and the
        next boot flagged the delivered send unknown; found by review).
        """
        key = params[0]
        untold[key] = (answer, params)
        delay = 0.05
        while True:
            try:
                conn.execute(answer, params)
                break
            except psycopg.Error as e:
                # kept unless the journal answered that the send is settled otherwise
                if e.sqlstate in SETTLED:
                    del untold[key]
                    raise
                if connection_lost(conn) or not refused_for_now(e) or delay > 3.2:
                    raise
                print(f"telling the answer for {key} refused ({e.sqlstate}); telling it again",
                      flush=True)
                time.sleep(delay)
                delay *= 2
        del untold[key]

    @staticmethod
    def tell_again(conn, untold):
        """Tell the journal the provider's answers that a lost connection kept from it.

        Called before instance_start: the sends are still ours (sending, or
        unknown if their lease ran out; the token settles them either way:
        sent, or failed and due again), and so are their messages, which no
        other replica can then finish while the send looks unknown (as long
        as the inbox lease holds).  A repeat of a confirmation that did
        commit is a no-op; of a refusal, DR001.
        """
        for answer, params in list(untold.values()):
            try:
                Bot.tell(conn, untold, answer, params)
            except psycopg.Error as e:
                if e.sqlstate not in SETTLED:
                    raise

    # -- the sender loop, in its own thread and connection ----------------
    def sender(self):
        """Send what the journal hands out when due: follow-ups, refused replies.

        Its leases are taken under an instance id of its own: instance_start
        takes back everything an id holds, and the worker's reboot after a
        lost connection must not flag the sends this loop is making.  It ends
        on SIGTERM after the send in hand, or once the feed is finished and
        no send of the feed's messages is still due.

        One send at a time, its lease extended while the provider is called:
        sends claimed together and sent one after another wait their turn
        with no heartbeat (their leases ran out, and the provider was called
        for sends the journal already flagged unknown), and a connection lost
        midway left the ones not yet attempted for instance_start to flag
        unknown, although nobody had called the provider for them.
        """
        instance = f"{self.instance}-sender"
        untold = {}  # as the worker keeps them

        def reboot(conn):
            self.tell_again(conn, untold)
            conn.execute("SELECT * FROM durable.instance_start(%s)", (instance,))

        conn = self.connect_retrying("sender", reboot, untold=untold)
        while conn is not None and not self.stop.is_set():
            try:
                rows = conn.execute(
                    "SELECT key, token, chat_id, payload FROM durable.outbox_claim("
                    " instance => %s, max => 1, lease => %s::interval, wait => '1s')",
                    (instance, self.args.send_lease)).fetchall()
                for key, token, chat_id, payload in rows:  # sent even on SIGTERM
                    self.deliver(conn, untold, key, token, chat_id, payload)
                if not rows and self.feed_finished.is_set() and not self.sends_due(conn):
                    break
            except psycopg.OperationalError:
                if not connection_lost(conn):
                    raise
                conn.close()
                conn = self.connect_retrying("sender", reboot, untold=untold)
        if conn is not None:
            conn.close()

    def deliver(self, conn, untold, key, token, chat_id, payload):
        text = payload.get("text", str(payload)) if isinstance(payload, dict) else str(payload)
        try:
            with self.keeping_leases(key, token, conn=conn, inbox=False):
                pmid = self.provider.send(key, chat_id, text, refuse_first=False,
                                          delay=self.args.slow_sender_seconds)
        except ProviderError as e:
            self.report_failure(conn, untold, key, token, str(e))
            return
        try:
            self.tell(conn, untold, SENT, (key, token, pmid))
        except psycopg.Error as e:
            if e.sqlstate not in (STALE_LEASE, "DR002"):
                raise
            # DR001/DR002: its lease ended before the confirmation (another sender has it
            # now, an operator retried or discarded it): the provider had it, the journal
            # will not say so
        self.stats["sender_sent"] += 1

    def report_failure(self, conn, untold, key, token, error, retry_in=None):
        """outbox_failed: due again after retry_in, or the backoff when None.

        Told late -- the send's lease ran out, or instance_start took it
        back -- the refusal still settles an unknown send.  One settled
        meanwhile (SETTLED) is left as the journal has it.
        """
        try:
            self.tell(conn, untold, REFUSED, (key, token, error, retry_in))
        except psycopg.Error as e:
            if e.sqlstate not in SETTLED:
                raise
            print(f"{self.instance}: send {key} refused, but settled meanwhile; left as it is",
                  flush=True)

    def sends_due(self, conn):
        """Whether a send of the feed's messages is still to be sent (or being sent)."""
        return conn.execute(
            "SELECT EXISTS (SELECT FROM durable.outbox o JOIN durable.inbox i ON i.id = o.inbound_id"
            " WHERE i.source = %s AND o.state IN ('pending', 'failed', 'sending'))",
            (self.source,)).fetchone()[0]

    # -- the platform's webhook, in its own thread and connection -------
    def feeder(self):
        conn = self.connect("webhook")
        for message_id, chat_id, payload in feed_messages(self.args.feed, self.args.long_message):
            while conn is not None and not self.stop.is_set():
                try:
                    row = conn.execute(
                        "SELECT duplicate FROM durable.inbox_admit("
                        " source => %s, message_id => %s, chat_id => %s, payload => %s)",
                        (self.source, message_id, chat_id, Jsonb(payload))).fetchone()
                    break
                except psycopg.OperationalError:
                    if not connection_lost(conn):
                        raise  # refused (54000: a payload over the limit): the webhook fails
                    # did the admit commit?  Admitting again answers: it is deduplicated
                    conn.close()
                    conn = self.connect_retrying("webhook")
            if conn is None or self.stop.is_set():
                break
            if row[0]:
                self.stats["duplicates"] += 1
            time.sleep(self.args.feed_delay)
        if conn is not None:
            conn.close()

    # -- one message ----------------------------------------------------
    def handle(self, rec):
        rid, token, chat_id, payload = rec["id"], rec["token"], rec["chat_id"], rec["payload"]
        n = payload["n"]

        if n % self.args.slow_every == 0:
            self.slow_job(rid, token)

        # 1. the reply: journal, provider, confirm
        reply = {"text": f"echo: {payload['text']}"}
        b = self.conn.execute(
            "SELECT action, key, token, journaled_chat_id, journaled_payload"
            " FROM durable.outbox_begin("
            " idempotency_key => NULL, chat_id => %s, payload => %s, instance => %s,"
            " lease => %s::interval, inbound_id => %s, inbound_token => %s)",
            (chat_id, Jsonb(reply), self.instance, self.args.send_lease, rid, token)).fetchone()
        action, key, send_token, journaled_chat_id, journaled_payload = b
        send_to, send_text = chat_id, reply["text"]
        if journaled_payload is not None:
            # an earlier run journaled this reply in other words: that one stands
            send_to = journaled_chat_id
            send_text = journaled_payload.get("text", str(journaled_payload)) \
                if isinstance(journaled_payload, dict) else str(journaled_payload)
        if action in ("send", "bypass"):
            slow = self.args.slow_provider_seconds if n % self.args.slow_provider_every == 0 else 0.0
            try:
                with self.keeping_leases(key, send_token) if action == "send" \
                        else contextlib.nullcontext():
                    pmid = self.provider.send(key, send_to, send_text,
                                              refuse_first=(n % self.args.fail_every == 0), delay=slow)
            except ProviderError as e:
                self.stats["provider_errors"] += 1
                if action == "bypass":
                    # not journaled: nobody else will retry it; the message comes back
                    # (after the inbox's backoff, durable.inbox_backoff_base, doubling)
                    self.conn.execute("SELECT * FROM durable.inbox_fail(%s, %s, %s)",
                                      (rid, token, f"provider: {e}"))
                    return
                # journaled: the sender loop retries it when due (after the outbox's
                # backoff, durable.outbox_backoff_base, doubling); the message is handled
                self.report_failure(self.conn, self.untold, key, send_token, str(e))
            else:
                if action == "send":
                    try:
                        self.tell(self.conn, self.untold, SENT, (key, send_token, pmid))
                    except psycopg.Error as e:
                        if e.sqlstate not in SETTLED:
                            raise
                        # settled meanwhile (its lease had run out: an operator discarded or
                        # retried it, another sender has it): the provider had it, the
                        # journal will not say so; the message is handled all the same
                self.stats["replies"] += 1
        elif action in ("sent", "busy", "wait"):
            # sent by an earlier run of this handler (answered from the journal), or being
            # sent by the sender loop, or due later: the journal has the reply either way
            pass
        else:  # dead or unknown: an operator decides (durablectl); do not resend
            print(f"{self.instance}: reply {key} is {action}; left to the operator", flush=True)

        # 2. the effects and the completion, in one transaction
        try:
            with self.conn.transaction():
                self.conn.execute(
                    sql.SQL("INSERT INTO {}.effects (message_id, chat_id, reply_key, instance)"
                            " VALUES (%s, %s, %s, %s)").format(self.schema),
                    (rec["message_id"], chat_id, key, self.instance))
                if n % self.args.followup_every == 0:
                    # journaled with the effects, sent by the sender loop when due; the key
                    # is derived from the lease as the reply's is (the next one)
                    self.conn.execute(
                        "SELECT * FROM durable.outbox_enqueue(idempotency_key => NULL, chat_id => %s,"
                        " payload => %s, not_before => clock_timestamp() + %s::interval,"
                        " inbound_id => %s, inbound_token => %s)",
                        (chat_id, Jsonb({"text": f"follow-up on {n}"}), self.args.followup_in,
                         rid, token))
                    followups = 1
                else:
                    followups = 0
                self.conn.execute("SELECT durable.inbox_complete(%s, %s)", (rid, token))
        except psycopg.Error as e:
            if e.sqlstate != STALE_LEASE:
                raise
            # another replica took the message over: our effects rolled back
            self.stats["stale"] += 1
            return
        self.stats["handled"] += 1
        self.stats["followups"] += followups

    @contextlib.contextmanager
    def keeping_leases(self, key, token, conn=None, inbox=True):
        """Extend the send's lease, and the inbox leases we hold, while the provider is called.

        (The sender loop passes its own connection, and holds no inbox lease.)

        A send lease that ran out mid-call would make the send unknown; an
        inbox lease, hand the message to another replica.  Each heartbeat
        answers its new lease end; the next round goes out a third of the
        shortest lease later.  The worker's connection is free meanwhile (the
        provider is not the database), and psycopg serializes its use.  A
        heartbeat that fails (DR001: the send's lease is lost; a lost
        connection) ends them: outbox_sent then says what became of the send.
        """
        done = threading.Event()
        conn = conn or self.conn

        def beat():
            while not done.is_set():
                try:
                    left = conn.execute(
                        "SELECT extract(epoch FROM durable.outbox_heartbeat(%s, %s, %s::interval)"
                        " - clock_timestamp())::float8",
                        (key, token, self.args.send_lease)).fetchone()[0]
                    self.stats["send_heartbeats"] += 1
                    inbox_left = self.heartbeat_held() if inbox else None
                except psycopg.Error:
                    return
                if inbox_left is not None:
                    left = min(left, inbox_left)
                done.wait(max(left / 3, 0.01))

        beater = threading.Thread(target=beat, daemon=True)
        beater.start()
        try:
            yield
        finally:
            done.set()
            beater.join()

    def slow_job(self, rid, token):
        """Work longer than the lease, extending it as we go.

        Every record the last claim handed out is leased to us, not just the
        one in hand: the heartbeat extends them all, or the ones waiting
        their turn would expire behind the slow job and be swept back.  The
        next heartbeat goes out a third of the shortest lease's remainder
        later, whatever the job's length: spaced by the job's length instead,
        a job longer than a few leases lost its lease between two of them,
        every attempt, until the message went dead.
        """
        end = time.monotonic() + self.args.slow_seconds
        while True:
            left = self.heartbeat_held()
            rest = end - time.monotonic()
            if rest <= 0:
                return
            time.sleep(max(left / 3, 0.01) if left is not None and left / 3 < rest else rest)

    def heartbeat_held(self):
        """Extend every inbox lease we hold; the seconds the shortest has left."""
        left = None
        for held_id, held_token in list(self.held.items()):
            try:
                until = self.conn.execute(
                    "SELECT extract(epoch FROM durable.inbox_heartbeat(%s, %s, %s::interval)"
                    " - clock_timestamp())::float8",
                    (held_id, held_token, self.args.lease)).fetchone()[0]
                left = until if left is None else min(left, until)
            except psycopg.Error as e:
                if e.sqlstate != STALE_LEASE:
                    raise
                del self.held[held_id]  # lost: someone else has it now
            self.stats["heartbeats"] += 1
        return left

    def feed_done(self):
        """Every message finished: done, or dead (out of attempts: an operator's now)."""
        row = self.conn.execute(
            "SELECT count(*) FROM durable.inbox WHERE source = %s AND state IN ('done', 'dead')",
            (self.source,)).fetchone()
        return row[0] >= self.args.feed

    # -- the worker loop --------------------------------------------------
    def run(self):
        self.boot()
        feeder_failed = []  # the error that ended the webhook (an admit refused), if one did
        feeder = thread_noting_failure(self.feeder, feeder_failed)
        feeder.start()
        sender_failed = []  # the error that ended the sender loop, if one did
        sender = thread_noting_failure(self.sender, sender_failed)
        sender.start()
        deadline = time.monotonic() + self.args.timeout
        while not self.stop.is_set():
            if time.monotonic() > deadline:
                print(f"{self.instance}: timed out", file=sys.stderr)
                return 1
            if feeder_failed:
                # (its traceback is on stderr already)
                print(f"{self.instance}: the webhook failed: {feeder_failed[0]!r}", file=sys.stderr)
                self.stop.set()  # the sender loop stops too, once the send in its hands is told
                sender.join(max(0.0, deadline - time.monotonic()))
                return 1
            try:
                if self.claim_and_handle(feeder):
                    break
            except psycopg.OperationalError as e:
                if not connection_lost(self.conn):
                    raise
                if not self.reconnect(e, deadline):
                    if self.stop.is_set():
                        break
                    print(f"{self.instance}: timed out reconnecting", file=sys.stderr)
                    self.stop.set()  # the webhook and the sender loop stop too
                    feeder.join()
                    return 1
        feeder.join()
        self.feed_finished.set()
        sender.join(max(0.0, deadline - time.monotonic()))
        if sender.is_alive():
            print(f"{self.instance}: timed out waiting for the sender loop", file=sys.stderr)
            return 1
        if sender_failed:
            # (its traceback is on stderr already); the sends it held are the journal's
            print(f"{self.instance}: the sender loop failed: {sender_failed[0]!r}", file=sys.stderr)
            return 1
        s = self.stats
        how = "stopped by SIGTERM" if self.stop.is_set() else "feed processed"
        print(f"{self.instance}: {how}: handled {s['handled']}, replies delivered {s['replies']}, "
              f"duplicates {s['duplicates']}, provider errors {s['provider_errors']}, "
              f"heartbeats {s['heartbeats']}, send heartbeats {s['send_heartbeats']}, "
              f"released {s['released']}, stale {s['stale']}, "
              f"follow-ups {s['followups']}, sent by the sender loop {s['sender_sent']}, "
              f"reconnects {s['reconnects']}",
              flush=True)
        return 0

    def claim_and_handle(self, feeder):
        """One claim and its batch; True once the whole feed is done."""
        # waits in the server until work is admitted or due: no polling
        with self.conn.cursor(row_factory=dict_row) as cur:
            cur.execute("SELECT * FROM durable.inbox_claim(instance => %s, max => 3,"
                        " lease => %s::interval, wait => '2s')",
                        (self.instance, self.args.lease))
            batch = cur.fetchall()
        self.held = {rec["id"]: rec["token"] for rec in batch}
        for rec in batch:
            if self.stop.is_set():
                # clean shutdown: give back what we hold, attempts not counted
                for held_id, held_token in self.held.items():
                    try:
                        self.conn.execute("SELECT durable.inbox_release(%s, %s)",
                                          (held_id, held_token))
                        self.stats["released"] += 1
                    except psycopg.Error as e:
                        if e.sqlstate != STALE_LEASE:
                            raise  # DR001: its lease had ended; nothing to give back
                return False
            if rec["id"] not in self.held:
                continue  # its lease was lost while it waited its turn
            try:
                self.handle(rec)
            except psycopg.Error as e:
                # DR003: its lease ran out on its last attempt and the sweep made it
                # dead (an operator replays it); its effects rolled back all the same
                if e.sqlstate not in (STALE_LEASE, "DR003"):
                    raise
                self.stats["stale"] += 1  # fenced off: drop it, its new holder handles it
            self.held.pop(rec["id"], None)  # (a heartbeat may have dropped it)
        return not batch and not feeder.is_alive() and self.feed_done()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dsn", default="", help="libpq connection string (default: environment)")
    p.add_argument("--instance", default="example-python")
    p.add_argument("--schema", default="example_python", help="schema of the effects table")
    p.add_argument("--feed", type=int, default=20, help="distinct inbound messages")
    p.add_argument("--feed-delay", type=float, default=0.02, help="seconds between deliveries")
    p.add_argument("--long-message", type=int, default=0,
                   help="the message whose text has 2,000 characters (0: none)")
    p.add_argument("--deliveries", default="deliveries.txt", help="the fake provider's file")
    p.add_argument("--lease", default="1s")
    p.add_argument("--send-lease", default="30s", help="lease of a send while the provider is called")
    p.add_argument("--slow-every", type=int, default=7)
    p.add_argument("--slow-seconds", type=float, default=1.6)
    p.add_argument("--fail-every", type=int, default=6)
    p.add_argument("--slow-provider-every", type=int, default=9,
                   help="every K-th reply takes the provider --slow-provider-seconds")
    p.add_argument("--slow-provider-seconds", type=float, default=1.5)
    p.add_argument("--slow-sender-seconds", type=float, default=0.0,
                   help="each provider call of the sender loop takes S seconds")
    p.add_argument("--followup-every", type=int, default=4, help="a follow-up for every K-th message")
    p.add_argument("--followup-in", default="300ms", help="how long after the message it is due")
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--stop-grace", type=float, default=10,
                   help="after SIGTERM, how long to keep reconnecting to journal a provider's answer")
    args = p.parse_args()

    stop = threading.Event()
    # installed first: a SIGTERM during boot must not kill the bot mid-call
    signal.signal(signal.SIGTERM, lambda signo, frame: stop.set())
    signal.signal(signal.SIGINT, lambda signo, frame: stop.set())
    bot = Bot(args, stop)
    sys.exit(bot.run())


if __name__ == "__main__":
    main()
