#!/usr/bin/env node
// An example chat bot on durable, in Node.js with node-postgres (pg).
//
// A complete, runnable loop with a fake chat platform and a fake provider:
//
//  * boot: durable.instance_start(instance) takes back what this instance id
//    held when its previous incarnation died;
//  * a feeder (its own connection, running concurrently) plays the chat
//    platform's webhook: it journals each inbound message with inbox_admit
//    (no instance: the webhook only journals and acknowledges), including
//    redeliveries, which are deduplicated by (source, message_id);
//  * the worker waits in the server for work with inbox_claim(wait => '2s')
//    instead of polling;
//  * each message is handled in the order the discipline requires:
//      1. the reply goes out through outbox_begin (key derived from the
//         inbound lease, so a reprocessed message re-derives the same key),
//         the provider, then outbox_sent, or outbox_failed + inbox_fail when
//         the provider refuses (the message comes back later and the retried
//         send reuses its key);
//      2. one transaction writes the handler's effect row and ends with
//         inbox_complete: the effect commits exactly when the message is done;
//  * slow jobs send inbox_heartbeat while they work, and a slow provider call
//    outbox_heartbeat as well: a send lease that ran out mid-call would make
//    the send unknown (ambiguous);
//  * a lost connection (a server restart, a failover) is a reboot: the bot
//    connects again and calls instance_start, which takes back the leases it
//    held and flags a send it had begun but not confirmed as unknown
//    (ambiguous: left to an operator, never resent) -- unless the provider
//    had answered: that answer is then told with the send's token
//    (outbox_sent, outbox_failed), so it ends sent, or failed and retried;
//    the webhook retries its admit, which the journal deduplicates;
//  * SIGTERM stops after the message in hand and gives back, with
//    inbox_release, whatever the last claim handed out but was not handled;
//    while reconnecting, it stops after the current back-off unless the
//    journal still lacks the provider's answer to a send: then it keeps
//    trying for --stop-grace seconds, to tell it (given up, the send stays
//    unknown).
//
// The provider "delivers" by appending a line to a file; the test
// (examples/run) checks that every message has exactly one effect row and
// exactly one delivery.
//
//   npm ci && node bot.js --feed 20 --deliveries /tmp/deliveries
//
// Connection settings come from the usual libpq environment (PGHOST, PGPORT,
// PGUSER, PGDATABASE), which pg reads too.
'use strict';

const fs = require('fs');
const { Client, escapeIdentifier } = require('pg');

const STALE_LEASE = 'DR001';
// A send settled by someone else meanwhile: another sender has it or an operator retried
// it (DR001), it is sent or dead (DR003), an operator discarded it (DR002).
const SETTLED = [STALE_LEASE, 'DR002', 'DR003'];
// The provider's answers to a send, as the journal takes them.  A refused
// reply is due again after the outbox's backoff (durable.outbox_backoff_base,
// doubling); due_in says when (NULL: dead, out of retries).
const SENT = 'SELECT durable.outbox_sent($1, $2, $3)';
const REFUSED = "SELECT state, greatest(not_before - clock_timestamp(), interval '0')::text AS due_in"
  + ' FROM durable.outbox_failed($1, $2, $3, retryable => true)';

// The server ended the session (57P01-57P03: shutdown, crash, not accepting
// connections yet; 53300: too many connections), the connection failed
// (class 08), or its socket closed or is not there (a restarting server's
// Unix socket: ENOENT).
function connectionLost(e) {
  return ['57P01', '57P02', '57P03', '53300'].includes(e.code) || String(e.code || '').startsWith('08')
    || ['ECONNRESET', 'ECONNREFUSED', 'ENOENT', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH'].includes(e.code)
    || /Connection terminated|not queryable|Client was closed/.test(e.message);
}

// A refusal on a live connection that a later try may not meet: a cancel
// (57014), a lock or statement timeout (55P03, 57014), a serialization
// failure (40001), a server short of resources (53xxx): classes 40, 53, 55,
// 57 and 58, what psycopg calls an OperationalError.
function refusedForNow(e) {
  return ['40', '53', '55', '57', '58'].includes(String(e.code || '').slice(0, 2));
}

function parseArgs(argv) {
  const o = {
    instance: 'example-node', schema: 'example_node', feed: 20, feedDelay: 0.02,
    deliveries: 'deliveries.txt', lease: '1s', sendLease: '30s', slowEvery: 7, slowSeconds: 1.6,
    failEvery: 6, slowProviderEvery: 9, slowProviderSeconds: 1.5, timeout: 120, stopGrace: 10,
    longMessage: 0,
  };
  const names = {
    '--instance': ['instance', String], '--schema': ['schema', String],
    '--feed': ['feed', Number], '--feed-delay': ['feedDelay', Number],
    '--deliveries': ['deliveries', String], '--lease': ['lease', String],
    '--send-lease': ['sendLease', String],
    '--slow-every': ['slowEvery', Number], '--slow-seconds': ['slowSeconds', Number],
    '--fail-every': ['failEvery', Number], '--timeout': ['timeout', Number],
    // after SIGTERM, how long to keep reconnecting to journal a provider's answer
    '--stop-grace': ['stopGrace', Number],
    // every K-th reply takes the provider --slow-provider-seconds
    '--slow-provider-every': ['slowProviderEvery', Number],
    '--slow-provider-seconds': ['slowProviderSeconds', Number],
    // the message whose text has 2,000 characters (0: none)
    '--long-message': ['longMessage', Number],
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s);
    const spec = names[flag];
    if (!spec) {
      console.error(`bot.js: unknown option ${argv[i]}\nusage: node bot.js [${Object.keys(names).join(' V] [')} V]`);
      process.exit(2);
    }
    const v = inline !== undefined ? inline : argv[++i];
    o[spec[0]] = spec[1](v);
  }
  return o;
}

const sleep = (s) => new Promise((r) => setTimeout(r, s * 1000));

class ProviderError extends Error {}

// Delivers by appending "key<TAB>chat<TAB>text" to a file, after `delay`
// seconds (a slow API).  It refuses the first call for the keys it is told
// to (a 503), so that the retry path runs; the refused call delivers nothing.
class FakeProvider {
  constructor(path) { this.path = path; this.refused = new Set(); this.calls = 0; }

  async send(key, chatId, text, refuseFirst, delay = 0) {
    await sleep(delay);
    this.calls++;
    if (refuseFirst && !this.refused.has(key)) {
      this.refused.add(key);
      throw new ProviderError('503 service unavailable');
    }
    const fd = fs.openSync(this.path, 'a');
    fs.writeSync(fd, `${key}\t${chatId}\t${text}\n`);
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    return `node-${this.calls}`;
  }
}

// The platform's deliveries: n messages, every 5th delivered twice.
function feedMessages(n, longMessage = 0) {
  const out = [];
  for (let i = 1; i <= n; i++) {
    // every 3rd says something with quotes and a backslash, as users do
    let text = i % 3 === 0 ? `say "hello" \\ ${i}` : `hello ${i}`;
    if (i === longMessage) text = 'long '.repeat(400);
    const msg = [`m${i}`, `chat-${i % 4}`, { text, n: i }];
    out.push(msg);
    if (i % 5 === 0) out.push(msg); // a webhook retry: the same message id again
  }
  return out;
}

class Bot {
  constructor(args) {
    this.args = args;
    this.instance = args.instance;
    this.source = args.instance;
    this.stopping = false;
    this.provider = new FakeProvider(args.deliveries);
    this.stats = {
      handled: 0, duplicates: 0, providerErrors: 0, heartbeats: 0, sendHeartbeats: 0, released: 0, stale: 0,
      replies: 0, reconnects: 0,
    };
    this.db = this.newClient('worker');
    this.held = new Map(); // id -> token of every record we hold a lease on
    this.untold = new Map(); // key -> [SENT or REFUSED, params]: the provider's answers not yet journaled
    this.effects = `${escapeIdentifier(args.schema)}.effects`;
  }

  // Named, so that an operator (or examples/run) can tell the connections apart.
  newClient(role) {
    const client = new Client({ application_name: `${this.instance} ${role}` });
    // an idle connection's loss comes as an event: unheard, it would end the process
    client.on('error', () => {});
    return client;
  }

  async boot() {
    await this.db.connect();
    const schema = escapeIdentifier(this.args.schema);
    await this.db.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await this.db.query(`CREATE TABLE IF NOT EXISTS ${this.effects} (
        message_id text NOT NULL, chat_id text NOT NULL, reply_key text,
        instance text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`);
    await this.startInstance('booted');
  }

  async startInstance(what) {
    const r = await this.db.query('SELECT * FROM durable.instance_start($1)', [this.instance]);
    const { inbox_recovered: rec, outbox_ambiguous: amb } = r.rows[0];
    console.log(`${this.instance}: ${what} (recovered ${rec} inbox records, ${amb} ambiguous sends)`);
  }

  // The connection was lost: connect again and reboot, as after a crash.
  // The provider's answers the journal lacks are told first (tellAgain);
  // then whatever this run held is taken back by instance_start rather than
  // finished: a confirmation might have committed or not, and a send begun
  // whose answer we do not know might have reached the provider or not
  // (instance_start flags it unknown; it is never resent by itself).
  async reconnect(error, deadline) {
    this.stats.reconnects++;
    this.held = new Map();
    console.log(`${this.instance}: connection lost (${error.code || error.message}); reconnecting`);
    let delay = 0.1;
    let graceEnd = null;
    while (Date.now() < deadline) {
      if (this.stopping) {
        // after SIGTERM, only a provider's answer the journal lacks keeps us trying, for a while
        if (this.untold.size === 0) return false;
        graceEnd = graceEnd || Date.now() + this.args.stopGrace * 1000;
        if (Date.now() >= graceEnd) return false;
      }
      try {
        this.db.end().catch(() => {});
        this.db = this.newClient('worker');
        // any error of connect() is a failure to connect (a server that refuses
        // connections for now answers with its own SQLSTATE, 57P03, 55000, ...)
        await this.db.connect().catch((e) => { e.connecting = true; throw e; });
        await this.tellAgain();
        await this.startInstance('reconnected');
        return true;
      } catch (e) {
        // (a refusal of the reboot's statements -- the answer told again was
        // cancelled, say -- is tried again, the answer kept, as a lost connection is)
        if (!e.connecting && !connectionLost(e) && !refusedForNow(e)) throw e;
        await sleep(delay);
        delay = Math.min(delay * 2, 5);
      }
    }
    return false;
  }

  // Give the journal the provider's answer to a send (SENT or REFUSED;
  // params[0] is the key), kept in untold until the journal has it: a
  // connection lost on the way keeps it for tellAgain, after the reboot.  A
  // refusal on a live connection (a cancel, lock_timeout) is no answer
  // either: the answer is told again, after 0.05 s, then 0.1 ... 3.2 s,
  // before the caller gets the error (until 2026-12-06 the first refusal
  // ended the bot, and the next boot flagged the delivered send unknown;
  // found by review).
  async tell(answer, params) {
    let told;
    this.untold.set(params[0], [answer, params]);
    for (let delay = 0.05; ; delay *= 2) {
      try {
        told = await this.db.query(answer, params);
        break;
      } catch (e) {
        // kept unless the journal answered that the send is settled otherwise
        if (SETTLED.includes(e.code)) this.untold.delete(params[0]);
        if (SETTLED.includes(e.code) || connectionLost(e) || !refusedForNow(e) || delay > 3.2) throw e;
        console.log(`telling the answer for ${params[0]} refused (${e.code}); telling it again`);
        await sleep(delay);
      }
    }
    this.untold.delete(params[0]);
    return told;
  }

  // Tell the journal the provider's answers that a lost connection kept from
  // it.  Called before instance_start: the sends are still ours (sending, or
  // unknown if their lease ran out; the token settles them either way: sent,
  // or failed and due again), and so are their messages, which no other
  // replica can then finish while the send looks unknown (as long as the
  // inbox lease holds) -- leaving a refused reply failed with no handler to
  // send it.  A repeat of a confirmation that did commit is a no-op; of a
  // refusal, DR001.
  async tellAgain() {
    for (const [answer, params] of [...this.untold.values()]) {
      try {
        await this.tell(answer, params);
      } catch (e) {
        if (!SETTLED.includes(e.code)) throw e;
      }
    }
  }

  // The platform's webhook, on its own connection, concurrently with the worker.
  async feeder() {
    let conn = this.newClient('webhook');
    await conn.connect();
    try {
      for (const [messageId, chatId, payload] of feedMessages(this.args.feed, this.args.longMessage)) {
        let r = null;
        while (r === null && !this.stopping) {
          try {
            r = await conn.query(
              'SELECT duplicate FROM durable.inbox_admit(source => $1, message_id => $2,'
              + ' chat_id => $3, payload => $4::jsonb)',
              [this.source, messageId, chatId, JSON.stringify(payload)]);
          } catch (e) {
            if (!connectionLost(e)) throw e;
            // did the admit commit?  Admitting again answers: it is deduplicated
            await sleep(0.1);
            conn.end().catch(() => {});
            conn = this.newClient('webhook');
            await conn.connect().catch(() => {});
          }
        }
        if (this.stopping) return;
        if (r.rows[0].duplicate) this.stats.duplicates++;
        await sleep(this.args.feedDelay);
      }
    } finally {
      await conn.end().catch(() => {});
    }
  }

  async handle(rec) {
    const { id, token, chat_id: chatId, payload } = rec;
    const n = payload.n;

    if (n % this.args.slowEvery === 0) await this.slowJob();

    // 1. the reply: journal, provider, confirm
    const reply = { text: `echo: ${payload.text}` };
    const b = (await this.db.query(
      'SELECT action, key, token, journaled_chat_id, journaled_payload FROM durable.outbox_begin(idempotency_key => NULL,'
      + ' chat_id => $1, payload => $2::jsonb, instance => $3, lease => $4::interval,'
      + ' inbound_id => $5, inbound_token => $6)',
      [chatId, JSON.stringify(reply), this.instance, this.args.sendLease, id, token])).rows[0];
    // an earlier run journaled this reply in other words: that one stands
    const sendTo = b.journaled_payload !== null ? b.journaled_chat_id : chatId;
    const journaled = b.journaled_payload;
    const text = journaled === null ? reply.text
      : (typeof journaled === 'object' && journaled !== null && 'text' in journaled ? journaled.text
        : JSON.stringify(journaled));
    if (b.action === 'send' || b.action === 'bypass') {
      const slow = n % this.args.slowProviderEvery === 0 ? this.args.slowProviderSeconds : 0;
      const call = () => this.provider.send(b.key, sendTo, text, n % this.args.failEvery === 0, slow);
      let pmid;
      try {
        // (a bypassed send has no lease to keep)
        pmid = await (b.action === 'send' ? this.keepingLeases(b.key, b.token, call) : call());
      } catch (e) {
        if (!(e instanceof ProviderError)) throw e;
        this.stats.providerErrors++;
        let dueIn = null;
        if (b.action === 'send') {
          try {
            dueIn = (await this.tell(REFUSED, [b.key, b.token, e.message])).rows[0].due_in;
          } catch (err) {
            // SETTLED before the refusal was told (an operator retried or discarded
            // it, another sender has it): left as the journal has it.  (Told
            // late, after the lease ran out, the refusal still settles an unknown send.)
            if (!SETTLED.includes(err.code)) throw err;
            console.log(`${this.instance}: send ${b.key} refused, but settled meanwhile; left as it is`);
          }
        }
        // the message comes back when the reply is due again (its send reuses the key),
        // or after the inbox's backoff (dueIn null: a bypassed send is not journaled).
        // Each return uses one of the message's durable.inbox_max_attempts: a bot with a
        // sender loop (the Python example) completes the message once its reply is
        // journaled instead, and the outbox retries the reply.
        await this.db.query('SELECT * FROM durable.inbox_fail($1::bigint, $2::bigint, $3, retry_in => $4::interval)',
          [id, token, `provider: ${e.message}`, dueIn]);
        return;
      }
      if (b.action === 'send') {
        try {
          await this.tell(SENT, [b.key, b.token, pmid]);
        } catch (e) {
          // settled meanwhile (its lease had run out: an operator discarded or retried it,
          // another sender has it): the provider had it, the journal will not say so; the
          // message is handled all the same
          if (!SETTLED.includes(e.code)) throw e;
        }
      }
      this.stats.replies++;
    } else if (b.action === 'busy' || b.action === 'wait') {
      // busy: another holder's send lease is live; it sends, or dies and the send turns
      // unknown, by the end of that lease: come back then, not sooner (each return uses
      // an attempt).  wait: the reply's retry is not due yet: come back after the
      // inbox's backoff (retry_in null).
      const retryIn = b.action === 'busy' ? this.args.sendLease : null;
      await this.db.query('SELECT * FROM durable.inbox_fail($1::bigint, $2::bigint, $3, retry_in => $4::interval)',
        [id, token, `reply ${b.action}`, retryIn]);
      return;
    } else if (b.action !== 'sent') {
      // dead or unknown: an operator decides (durablectl); never resend by ourselves
      console.log(`${this.instance}: reply ${b.key} is ${b.action}; left to the operator`);
    }

    // 2. the effects and the completion, in one transaction
    try {
      await this.db.query('BEGIN');
      await this.db.query(
        `INSERT INTO ${this.effects} (message_id, chat_id, reply_key, instance) VALUES ($1, $2, $3, $4)`,
        [rec.message_id, chatId, b.key, this.instance]);
      await this.db.query('SELECT durable.inbox_complete($1::bigint, $2::bigint)', [id, token]);
      await this.db.query('COMMIT');
    } catch (e) {
      await this.db.query('ROLLBACK').catch(() => {}); // (none to roll back on a lost connection)
      if (e.code !== STALE_LEASE) throw e;
      // another replica took the message over: our effects rolled back
      this.stats.stale++;
      return;
    }
    this.stats.handled++;
  }

  // Run fn (the provider call), extending the send's lease and the inbox
  // leases we hold while it runs.  A send lease that ran out mid-call would
  // make the send unknown; an inbox lease, hand the message to another
  // replica.  Each heartbeat answers its new lease end; the next round goes
  // out a third of the shortest lease later.  The worker's connection is
  // free meanwhile (the provider is not the database; pg queues a client's
  // queries).  A heartbeat that fails (DR001: the send's lease is lost; a
  // lost connection) ends them: outbox_sent then says what became of the
  // send.
  async keepingLeases(key, token, fn) {
    let done = false;
    let timer = null;
    let wake = () => {};
    const beat = async () => {
      while (!done) {
        let left;
        try {
          left = (await this.db.query(
            'SELECT extract(epoch FROM durable.outbox_heartbeat($1, $2::bigint, $3::interval)'
            + ' - clock_timestamp())::float8 AS left', [key, token, this.args.sendLease])).rows[0].left;
          this.stats.sendHeartbeats++;
          const inboxLeft = await this.heartbeatHeld();
          if (inboxLeft !== null) left = Math.min(left, inboxLeft);
        } catch (e) {
          return;
        }
        if (done) return;
        await new Promise((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, Math.max(left / 3, 0.01) * 1000);
        });
      }
    };
    const beater = beat();
    try {
      return await fn();
    } finally {
      done = true;
      clearTimeout(timer);
      wake();
      await beater;
    }
  }

  // Work longer than the lease, extending it as we go.  Every record the
  // last claim handed out is leased to us, not just the one in hand: the
  // heartbeat extends them all, or the ones waiting their turn would expire
  // behind the slow job and be swept back.  The next heartbeat goes out a
  // third of the shortest lease's remainder later, whatever the job's
  // length: spaced by the job's length instead, a job longer than a few
  // leases lost its lease between two of them, every attempt, until the
  // message went dead.
  async slowJob() {
    const end = Date.now() + this.args.slowSeconds * 1000;
    for (;;) {
      const left = await this.heartbeatHeld();
      const rest = (end - Date.now()) / 1000;
      if (rest <= 0) return;
      await sleep(left !== null && left / 3 < rest ? Math.max(left / 3, 0.01) : rest);
    }
  }

  // Extend every inbox lease we hold; the seconds the shortest has left (null: none held).
  async heartbeatHeld() {
    let left = null;
    for (const [heldId, heldToken] of [...this.held]) {
      try {
        const until = (await this.db.query(
          'SELECT extract(epoch FROM durable.inbox_heartbeat($1::bigint, $2::bigint, $3::interval)'
          + ' - clock_timestamp())::float8 AS left', [heldId, heldToken, this.args.lease])).rows[0].left;
        left = left === null ? until : Math.min(left, until);
      } catch (e) {
        if (e.code !== STALE_LEASE) throw e;
        this.held.delete(heldId); // lost: someone else has it now
      }
      this.stats.heartbeats++;
    }
    return left;
  }

  // Every message finished: done, or dead (out of attempts: an operator's now).
  async feedDone() {
    const r = await this.db.query(
      "SELECT count(*)::int AS n FROM durable.inbox WHERE source = $1 AND state IN ('done', 'dead')", [this.source]);
    return r.rows[0].n >= this.args.feed;
  }

  async run() {
    await this.boot();
    let feederDone = false;
    let feederError = null;
    // (caught here, or an error of the webhook's would end the process at once)
    const feeder = this.feeder().catch((e) => { feederError = e; }).finally(() => { feederDone = true; });
    const deadline = Date.now() + this.args.timeout * 1000;
    while (!this.stopping) {
      if (Date.now() > deadline) {
        console.error(`${this.instance}: timed out`);
        return 1;
      }
      if (feederError) {
        // an admit refused (54000: a payload over the limit, say): the webhook failed
        console.error(`${this.instance}: the webhook failed: ${feederError.message}`);
        this.stopping = true;
        return 1;
      }
      try {
        if (await this.claimAndHandle(() => feederDone)) break;
      } catch (e) {
        if (!connectionLost(e)) throw e;
        if (!await this.reconnect(e, deadline)) {
          if (this.stopping) break;
          console.error(`${this.instance}: timed out reconnecting`);
          this.stopping = true; // the webhook stops too
          await feeder;
          return 1;
        }
      }
    }
    await feeder;
    if (feederError) throw feederError;
    await this.db.end().catch(() => {});
    const s = this.stats;
    console.log(`${this.instance}: ${this.stopping ? 'stopped by SIGTERM' : 'feed processed'}: `
      + `handled ${s.handled}, replies delivered ${s.replies}, duplicates ${s.duplicates}, `
      + `provider errors ${s.providerErrors}, heartbeats ${s.heartbeats}, send heartbeats ${s.sendHeartbeats}, `
      + `released ${s.released}, stale ${s.stale}, `
      + `reconnects ${s.reconnects}`);
    return 0;
  }

  // One claim and its batch; true once the whole feed is done.
  async claimAndHandle(feederDone) {
    // waits in the server until work is admitted or due: no polling
    const batch = (await this.db.query(
      "SELECT * FROM durable.inbox_claim(instance => $1, max => 3, lease => $2::interval, wait => '2s')",
      [this.instance, this.args.lease])).rows;
    this.held = new Map(batch.map((r) => [r.id, r.token]));
    for (const rec of batch) {
      if (this.stopping) {
        // clean shutdown: give back what we hold, attempts not counted
        for (const [heldId, heldToken] of this.held) {
          try {
            await this.db.query('SELECT durable.inbox_release($1::bigint, $2::bigint)', [heldId, heldToken]);
            this.stats.released++;
          } catch (e) {
            if (e.code !== STALE_LEASE) throw e; // its lease had ended: nothing to give back
          }
        }
        return false;
      }
      if (!this.held.has(rec.id)) continue; // its lease was lost while it waited its turn
      try {
        await this.handle(rec);
      } catch (e) {
        // DR003: its lease ran out on its last attempt and the sweep made it dead
        // (an operator replays it); its effects rolled back all the same
        if (e.code !== STALE_LEASE && e.code !== 'DR003') throw e;
        this.stats.stale++; // fenced off: drop it, its new holder handles it
      }
      this.held.delete(rec.id);
    }
    return batch.length === 0 && feederDone() && await this.feedDone();
  }
}

const bot = new Bot(parseArgs(process.argv.slice(2)));
process.on('SIGTERM', () => { bot.stopping = true; });
process.on('SIGINT', () => { bot.stopping = true; });
bot.run().then((code) => process.exit(code), (err) => {
  console.error(`${bot.instance}: ${err.code ? `${err.code} ` : ''}${err.message}`);
  process.exit(1);
});
