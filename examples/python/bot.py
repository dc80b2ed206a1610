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
         the provider, then outbox_sent, or outbox_failed + inbox_fail
         when the provider refuses (the message comes back later and the
         retried send reuses its key);
      2. one transaction writes the handler's effect row and ends with
         inbox_complete: the effect commits exactly when the message is done;
  * slow jobs send inbox_heartbeat while they work;
  * a lost connection (a server restart, a failover) is a reboot: the bot
    connects again and calls instance_start, which takes back the leases it
    held and flags a send it had begun but not confirmed as unknown
    (ambiguous: left to an operator, never resent); the webhook retries its
    admit, which the journal deduplicates;
  * SIGTERM stops after the message in hand and gives back, with
    inbox_release, whatever the last claim handed out but was not handled.

The provider "delivers" by appending a line to a file; the test
(examples/run) checks that every message has exactly one effect row and
exactly one delivery.

    python3 examples/python/bot.py --feed 20 --deliveries /tmp/deliveries

Connection settings come from the usual libpq environment (PGHOST, PGPORT,
PGUSER, PGDATABASE) or --dsn.  Requires the Debian package python3-psycopg.
"""

import argparse
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


class ProviderError(Exception):
    """The chat provider refused a send; retryable."""


class FakeProvider:
    """Delivers by appending "key<TAB>chat<TAB>text" to a file.

    It refuses the first call for the keys it is told to (a 503), so that
    the retry path runs; the refused call delivers nothing.
    """

    def __init__(self, path):
        self.path = path
        self.refused = set()
        self.calls = 0

    def send(self, key, chat_id, text, refuse_first):
        self.calls += 1
        if refuse_first and key not in self.refused:
            self.refused.add(key)
            raise ProviderError("503 service unavailable")
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(f"{key}\t{chat_id}\t{text}\n")
            f.flush()
            os.fsync(f.fileno())
        return f"py-{self.calls}"


def feed_messages(n):
    """The platform's deliveries: n messages, every 5th delivered twice."""
    out = []
    for i in range(1, n + 1):
        # every 3rd says something with quotes and a backslash, as users do
        text = f'say "hello" \\ {i}' if i % 3 == 0 else f"hello {i}"
        msg = (f"m{i}", f"chat-{i % 4}", {"text": text, "n": i})
        out.append(msg)
        if i % 5 == 0:
            out.append(msg)  # a webhook retry: the same message id again
    return out


class Bot:
    def __init__(self, args, stop):
        self.args = args
        self.stop = stop
        self.instance = args.instance
        self.source = args.instance
        self.schema = sql.Identifier(args.schema)
        self.provider = FakeProvider(args.deliveries)
        self.stats = dict(handled=0, duplicates=0, provider_errors=0,
                          heartbeats=0, released=0, stale=0, replies=0, reconnects=0)
        self.conn = self.connect()
        self.held = {}  # id -> token of every record we hold a lease on
        self.unconfirmed = {}  # key -> (token, provider id) the provider gave, not yet journaled

    def connect(self, role="worker"):
        # named, so that an operator (or examples/run) can tell the connections apart
        return psycopg.connect(self.args.dsn, autocommit=True,
                               application_name=f"{self.instance} {role}")

    # -- boot ---------------------------------------------------------
    def boot(self):
        with self.conn.cursor() as cur:
            cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(self.schema))
            cur.execute(sql.SQL("""CREATE TABLE IF NOT EXISTS {}.effects (
                message_id text NOT NULL, chat_id text NOT NULL,
                reply_key text, instance text NOT NULL,
                at timestamptz NOT NULL DEFAULT clock_timestamp())""").format(self.schema))
        self.start_instance("booted")

    def start_instance(self, what):
        recovered, ambiguous = self.conn.execute(
            "SELECT * FROM durable.instance_start(%s)", (self.instance,)).fetchone()
        print(f"{self.instance}: {what} (recovered {recovered} inbox records, "
              f"{ambiguous} ambiguous sends)", flush=True)

    def reconnect(self, error, deadline):
        """The connection was lost: connect again and reboot, as after a crash.

        Whatever this run held is taken back by instance_start rather than
        finished: a lease's confirmation might have committed or not, and a
        send begun but not confirmed might have reached the provider or not
        (instance_start flags it unknown; it is never resent by itself).
        """
        self.stats["reconnects"] += 1
        self.held = {}
        print(f"{self.instance}: connection lost ({error.__class__.__name__}); reconnecting",
              flush=True)
        delay = 0.1
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                self.conn.close()
                self.conn = self.connect()
                self.start_instance("reconnected")
                self.confirm_sends()
                return True
            except psycopg.OperationalError:
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
        return False

    def confirm_sends(self):
        """Journal the sends the provider accepted whose outbox_sent was lost.

        instance_start flagged them unknown; their token still confirms them
        (a repeat of a confirmation that did commit is a no-op).
        """
        for key, (token, pmid) in list(self.unconfirmed.items()):
            try:
                self.conn.execute("SELECT durable.outbox_sent(%s, %s, %s)", (key, token, pmid))
            except psycopg.Error as e:
                if e.sqlstate not in (STALE_LEASE, "DR003"):
                    raise
                # DR001/DR003: an operator settled it meanwhile (retried or discarded)
            del self.unconfirmed[key]

    # -- the platform's webhook, in its own thread and connection -------
    def feeder(self):
        conn = self.connect("webhook")
        for message_id, chat_id, payload in feed_messages(self.args.feed):
            while not self.stop.is_set():
                try:
                    row = conn.execute(
                        "SELECT duplicate FROM durable.inbox_admit("
                        " source => %s, message_id => %s, chat_id => %s, payload => %s)",
                        (self.source, message_id, chat_id, Jsonb(payload))).fetchone()
                    break
                except psycopg.OperationalError:
                    # did the admit commit?  Admitting again answers: it is deduplicated
                    time.sleep(0.1)
                    try:
                        conn.close()
                        conn = self.connect("webhook")
                    except psycopg.OperationalError:
                        pass
            if self.stop.is_set():
                break
            if row[0]:
                self.stats["duplicates"] += 1
            time.sleep(self.args.feed_delay)
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
            try:
                pmid = self.provider.send(key, send_to, send_text,
                                          refuse_first=(n % self.args.fail_every == 0))
            except ProviderError as e:
                self.stats["provider_errors"] += 1
                if action == "send":
                    self.conn.execute(
                        "SELECT * FROM durable.outbox_failed(%s, %s, %s, retryable => true,"
                        " retry_in => '100ms')", (key, send_token, str(e)))
                # the message comes back after the retry is due; its send reuses the key
                self.conn.execute("SELECT * FROM durable.inbox_fail(%s, %s, %s, retry_in => '200ms')",
                                  (rid, token, f"provider: {e}"))
                return
            if action == "send":
                # the provider's answer must reach the journal: kept until it has
                self.unconfirmed[key] = (send_token, pmid)
                self.conn.execute("SELECT durable.outbox_sent(%s, %s, %s)", (key, send_token, pmid))
                del self.unconfirmed[key]
            self.stats["replies"] += 1
        elif action == "sent":
            pass  # sent by an earlier run of this handler: answered from the journal
        elif action in ("busy", "wait"):
            # busy: another holder's send lease is live; it sends, or dies and the send turns
            # unknown, by the end of that lease: come back then, not sooner (each return
            # uses an attempt).  wait: this bot's own outbox_failed asked for 100 ms.
            retry_in = self.args.send_lease if action == "busy" else "200ms"
            self.conn.execute("SELECT * FROM durable.inbox_fail(%s, %s, %s, retry_in => %s::interval)",
                              (rid, token, f"reply {action}", retry_in))
            return
        else:  # dead or unknown: an operator decides (durablectl); do not resend
            print(f"{self.instance}: reply {key} is {action}; left to the operator", flush=True)

        # 2. the effects and the completion, in one transaction
        try:
            with self.conn.transaction():
                self.conn.execute(
                    sql.SQL("INSERT INTO {}.effects (message_id, chat_id, reply_key, instance)"
                            " VALUES (%s, %s, %s, %s)").format(self.schema),
                    (rec["message_id"], chat_id, key, self.instance))
                self.conn.execute("SELECT durable.inbox_complete(%s, %s)", (rid, token))
        except psycopg.Error as e:
            if e.sqlstate != STALE_LEASE:
                raise
            # another replica took the message over: our effects rolled back
            self.stats["stale"] += 1
            return
        self.stats["handled"] += 1

    def slow_job(self, rid, token):
        """Work longer than the lease, extending it as we go.

        Every record the last claim handed out is leased to us, not just the
        one in hand: the heartbeat extends them all, or the ones waiting
        their turn would expire behind the slow job and be swept back.
        """
        steps = 4
        for _ in range(steps):
            time.sleep(self.args.slow_seconds / steps)
            for held_id, held_token in list(self.held.items()):
                try:
                    self.conn.execute("SELECT durable.inbox_heartbeat(%s, %s, %s::interval)",
                                      (held_id, held_token, self.args.lease))
                except psycopg.Error as e:
                    if e.sqlstate != STALE_LEASE:
                        raise
                    del self.held[held_id]  # lost: someone else has it now
                self.stats["heartbeats"] += 1

    def feed_done(self):
        """Every message finished: done, or dead (out of attempts: an operator's now)."""
        row = self.conn.execute(
            "SELECT count(*) FROM durable.inbox WHERE source = %s AND state IN ('done', 'dead')",
            (self.source,)).fetchone()
        return row[0] >= self.args.feed

    # -- the worker loop --------------------------------------------------
    def run(self):
        self.boot()
        feeder = threading.Thread(target=self.feeder, daemon=True)
        feeder.start()
        deadline = time.monotonic() + self.args.timeout
        while not self.stop.is_set():
            if time.monotonic() > deadline:
                print(f"{self.instance}: timed out", file=sys.stderr)
                return 1
            try:
                if self.claim_and_handle(feeder):
                    break
            except psycopg.OperationalError as e:
                if not self.reconnect(e, deadline):
                    break
        feeder.join()
        s = self.stats
        how = "stopped by SIGTERM" if self.stop.is_set() else "feed processed"
        print(f"{self.instance}: {how}: handled {s['handled']}, replies delivered {s['replies']}, "
              f"duplicates {s['duplicates']}, provider errors {s['provider_errors']}, "
              f"heartbeats {s['heartbeats']}, released {s['released']}, stale {s['stale']}, "
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
                if e.sqlstate != STALE_LEASE:
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
    p.add_argument("--deliveries", default="deliveries.txt", help="the fake provider's file")
    p.add_argument("--lease", default="1s")
    p.add_argument("--send-lease", default="30s", help="lease of a send while the provider is called")
    p.add_argument("--slow-every", type=int, default=7)
    p.add_argument("--slow-seconds", type=float, default=1.6)
    p.add_argument("--fail-every", type=int, default=6)
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args()

    stop = threading.Event()
    # installed first: a SIGTERM during boot must not kill the bot mid-call
    signal.signal(signal.SIGTERM, lambda signo, frame: stop.set())
    signal.signal(signal.SIGINT, lambda signo, frame: stop.set())
    bot = Bot(args, stop)
    sys.exit(bot.run())


if __name__ == "__main__":
    main()
