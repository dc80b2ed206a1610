#!/usr/bin/env python3
"""A model-based random test of durable's SQL API (test/model/run runs it).

One connection makes random calls of every function (valid and invalid
arguments, live and stale tokens, short leases that expire between calls,
claims that wait in the server) and checks each answer against a model of
the journals written from the contract (api.md) and the README: the rows
returned, the SQLSTATE of every error, the states and attempts of every
record, the metrics' increments and their reset, the NOTIFYs, standing(),
purge()'s batches, the gateway sessions (session_save/session_load), the
permits of permit()'s sliding windows, and every 25 calls the whole of both
journals and of the sessions table.

Time is handled without guessing: every call is bracketed by the client's
clock, and before a call whose answer depends on a deadline (a lease, a
not_before, a permit leaving its window, a session's max_age) that falls
within a few milliseconds of now, the test waits until the deadline has
clearly passed; a claim that waits in the server with nothing claimable is
made only when no deadline falls within its wait.  So a loaded machine
slows the test but does not change its verdict.  The worker of the test's
database must be idle (durable.naptime = '1h', as in test/durable.conf):
the test runs sweep() itself.

A discrepancy is printed as a FINDING with the call, the answer, what the
model expected and the last calls; the model then reloads the journals and
goes on.  Exit status 1 when there was a finding or the harness failed.

    model.py SEED CALLS          (libpq's environment names the database)
"""
import collections
import json
import random
import re
import sys
import time
import traceback

import psycopg

SEED = int(sys.argv[1]) if len(sys.argv) > 1 else int(time.time())
NOPS = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
print("SEED", SEED, "NOPS", NOPS, flush=True)
R = random.Random(SEED)

# Slack around the client's clock readings, for the server's own clock reads.
EPS = 0.004

# Settings of the test's session: small enough that records die, retry and
# come due within the run.
MAXATT = 3
RETRIES = 2
IBASE, ICAP = 0.02, 0.08
OBASE, OCAP = 0.02, 0.08
BOUND_COUNT = 6
BOUND_AGE = 1.0

conn = psycopg.connect(autocommit=True)
notices = []
conn.add_notice_handler(lambda d: notices.append((d.sqlstate, d.message_primary)))
conn.add_notify_handler(lambda n: NOTES.append((n.channel, json.loads(n.payload))))
for ch in ("durable_dead", "durable_ambiguous", "durable_ready"):
    conn.execute(f"LISTEN {ch}")
cur = conn.cursor()
cur.execute("TRUNCATE durable.inbox, durable.outbox, durable.sessions, durable.permits, durable.permit_buckets")
for setting, value in [
        ("durable.inbox_max_attempts", MAXATT),
        ("durable.outbox_retries", RETRIES),
        ("durable.inbox_backoff_base", f"{int(IBASE * 1000)}ms"),
        ("durable.inbox_backoff_cap", f"{int(ICAP * 1000)}ms"),
        ("durable.outbox_backoff_base", f"{int(OBASE * 1000)}ms"),
        ("durable.outbox_backoff_cap", f"{int(OCAP * 1000)}ms"),
        ("durable.max_payload_bytes", "1kB"),
        ("durable.max_error_bytes", "1kB"),
        ("durable.bound_count", BOUND_COUNT),
        ("durable.bound_age", f"{int(BOUND_AGE)}s")]:
    cur.execute("SELECT pg_catalog.set_config(%s, %s, false)", [setting, str(value)])

METRIC_NAMES = ['inbound_journaled', 'inbound_duplicates', 'inbound_replayed', 'inbound_dead',
                'outbox_journaled', 'outbox_deduped', 'outbox_retried', 'outbox_deferred',
                'outbox_dead', 'outbox_ambiguous', 'outbox_bypassed', 'stale_leases',
                'outbox_diverged']


def read_metrics():
    c2 = conn.cursor()
    c2.execute("SELECT " + ",".join(METRIC_NAMES) + " FROM durable.metrics()")
    return dict(zip(METRIC_NAMES, c2.fetchone()))


FINDINGS = collections.OrderedDict()  # signature -> first detail
EXPM = collections.Counter()  # the metrics' expected increments by this call
EXPN = []  # the NOTIFYs expected from this call: (channel, payload; "*" matches any value)
NOTES = []  # the NOTIFYs received since the call began
STATS = collections.Counter()  # calls made, by function and SQLSTATE
CHOICES = collections.Counter()  # which of several allowed answers came


def em(k, n=1):
    EXPM[k] += n


def finding(sig, detail):
    if UNCERTAIN[0]:
        # A deadline passed between settle() and the server's clock read
        # (a loaded machine): the model's expectation may be the wrong one.
        STATS["findings not judged"] += 1
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            resync()
        else:
            RESYNC_AFTER_OP[0] = True  # not from inside the operation's transaction
        return
    if sig not in FINDINGS:
        FINDINGS[sig] = detail
        print("\n### FINDING", sig, "\n", detail, flush=True)
    else:
        STATS["dup:" + sig] += 1


class Rec:  # inbox record
    pass


class Snd:  # outbox send
    pass


class Sess:  # a gateway session saved
    pass


inbox = {}        # id -> Rec
dedupe = {}       # dedupe key -> id
outbox = {}       # key -> Snd
sessions = {}     # (bot, shard) -> Sess
grants = collections.defaultdict(list)  # permit bucket -> (lo, hi) of its grants in its window, oldest first
LAST_ERR = [None]  # the exception of the last call that failed
maxtok = [0]
oldtokens = []
ops_log = collections.deque(maxlen=12)


def canon(p):
    return json.dumps(p, sort_keys=True, separators=(",", ":"))


def ts(x):
    return None if x is None else x.timestamp()


def call(sql, params=()):
    notices.clear()
    t0 = time.time()
    try:
        cur.execute(sql, params)
        rows = cur.fetchall() if cur.description else []
        res = ("ok", rows, t0, time.time())
    except psycopg.Error as e:
        if e.sqlstate == "DR001":
            em("stale_leases")
        LAST_ERR[0] = e
        res = ("err", e.sqlstate, t0, time.time(), str(e).split("\n")[0])
    t1 = res[3]
    if not UNCERTAIN[0] and any(lo <= t1 and hi >= SETTLED_AT[0] for lo, hi in deadlines(SETTLE_EXTRA[0])):
        UNCERTAIN[0] = True
        STATS["calls not judged"] += 1
    return res


def fmtsql(sql, params):
    try:
        return psycopg.sql.SQL(sql).as_string(conn) if not params else cur.mogrify(sql, params)
    except Exception:
        return sql + " " + repr(params)


def newtoken(tok, where):
    if tok is None:
        finding("token-null:" + where, "null token from " + where)
        return
    if tok <= maxtok[0]:
        finding("token-not-growing", f"{where}: token {tok} <= previous max {maxtok[0]}")
    maxtok[0] = max(maxtok[0], tok)


def lease_secs(l):
    return {None: 60.0, "30 milliseconds": 0.03, "60 milliseconds": 0.06, "10 minutes": 600.0, "25 milliseconds": 0.025}[l]


def now():
    return time.time()


RESYNC_AFTER_OP = [False]

# When settle() last returned, and whether a deadline has passed since, before
# the end of a call of this operation (set by call(), cleared per operation).
SETTLED_AT = [0.0]
UNCERTAIN = [False]
SETTLE_EXTRA = [()]


def deadlines(extra=()):
    """The (lo, hi) brackets of every deadline the model knows: leases and
    due times, and extra."""
    bounds = list(extra)
    for r in inbox.values():
        if r.state == "leased":
            bounds.append((r.llo, r.lhi))
        elif r.state == "pending":
            bounds.append((r.nlo, r.nhi))
    for s in outbox.values():
        if s.state == "sending":
            bounds.append((s.llo, s.lhi))
        elif s.state in ("pending", "failed"):
            bounds.append((s.nlo, s.nhi))
    return bounds


def settle(extra=()):
    """Sleep until no deadline is within EPS of now, so that the call that
    follows meets every deadline clearly passed or clearly ahead -- if it
    reads the server's clock within EPS (call() checks that it did)."""
    while True:
        t = now()
        worst = None
        for lo, hi in deadlines(extra):
            if lo - EPS <= t <= hi + EPS:
                worst = max(worst or 0, hi + EPS)
        if worst is None:
            SETTLED_AT[0] = t
            SETTLE_EXTRA[0] = extra
            return
        STATS["settle_sleeps"] += 1
        time.sleep(max(0.0005, worst - t + 0.001))


# ---------------------------------------------------------------- pickers
SOURCES = ["tg", "sl"]
CHATS = ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"]
PAYLOADS = [{"t": 1}, {"t": 2}, {"a": 1, "b": 2}, {}]
INSTANCES = ["i1", "i2", "i3"]
LONGERR = "\u00e9" * 1000 + "x" * 100
LEASES = [None, None, None, "10 minutes", "30 milliseconds", "60 milliseconds"]


def pick_lease():
    return R.choice(LEASES)


def pick(journal, pref, p_pref):
    """Mostly a record or send in one of the states pref; else any; else
    none (a call on a record that does not exist)."""
    x = R.random()
    if x < p_pref:
        c = [r for r in journal.values() if r.state in pref]
        if c:
            return R.choice(c)
    if journal and x < 0.95:
        return R.choice(list(journal.values()))
    return None


def pick_rec(pref=("leased",)):
    return pick(inbox, pref, 0.7)


def pick_send(pref=("sending",)):
    return pick(outbox, pref, 0.6)


def pick_any_token(rec, p_current, p_earlier, others, made_up):
    """Mostly rec's current token; else one it held before; else one of
    others; else NULL or a token never handed out."""
    x = R.random()
    if rec is not None and rec.token is not None and x < p_current:
        return rec.token
    if rec is not None and rec.tokhist and x < p_earlier:
        return R.choice(rec.tokhist)
    if x < 0.95 and others:
        return R.choice(others)
    return None if R.random() < 0.5 else made_up


def pick_token(rec):
    return pick_any_token(rec, 0.7, 0.85, oldtokens, 12345)


def pick_otoken(s):
    return pick_any_token(s, 0.75, 0.9, [], 777)


def chat_open(chat, ids_state=("pending", "leased")):
    return sorted(r.id for r in inbox.values() if r.chat == chat and r.state in ids_state)


def due(rec, lo, hi, deferred=True):
    """rec is due at a time between lo and hi; deferred when that is later
    than its creation (what the sweep's durable_ready announces)."""
    rec.nlo, rec.nhi = lo, hi
    rec.deferred = deferred


def lease_rec(r, inst, lease, t0, t1, tok):
    if r.token is not None:
        r.tokhist.append(r.token)
        oldtokens.append(r.token)
    r.state = "leased"
    r.attempts += 1
    r.token = tok
    r.owner = inst
    L = lease_secs(lease)
    r.llo, r.lhi = t0 + L, t1 + L
    r.sends = 0


def mismatch(opname, sql, params, exp, res, extra=""):
    if res[0] == "ok":
        got = "ok " + repr(res[1])
    else:
        got = f"ERROR {res[1]} {res[4]}"
    sig = f"{opname}: expected {exp} got {got if res[0]=='err' else 'ok'}"
    if res[0] == "err":
        sig = f"{opname}: expected {exp} got {res[1]}"
    detail = f"  call: {fmtsql(sql, params)}\n  expected: {exp}\n  got: {got}\n  {extra}\n  recent: " + "\n    ".join(ops_log)
    return sig, detail


def resync():
    """reload model from the journal after a discrepancy"""
    STATS["resync"] += 1
    RESYNCED[0] = True
    cur.execute("SELECT id, source, message_id, chat_id, kind, payload::text, state, attempts, token, owner, lease_until,"
                " not_before, error, sends, done_at, not_before > created_at FROM durable.inbox")
    seen = set()
    for row in cur.fetchall():
        (id_, src, mid, chat, kind, pl, st, att, tok, own, lu, nb, err, sends, done_at, deferred) = row
        seen.add(id_)
        r = inbox.get(id_)
        if r is None:
            r = Rec()
            r.id = id_
            r.tokhist = []
            inbox[id_] = r
            r.token = None
            r.source, r.mid, r.chat, r.kind, r.payload = src, mid, chat, kind, canon(json.loads(pl))
            r.dkey = (src, mid) if mid is not None else (src, "H", chat, kind, r.payload)
            dedupe[r.dkey] = id_
        r.state, r.attempts, r.owner, r.error = st, att, own, err
        if tok != r.token and r.token is not None:
            r.tokhist.append(r.token)
        r.token = tok
        r.llo = r.lhi = ts(lu) if lu else 0
        r.nlo = r.nhi = ts(nb) if nb else 0
        r.deferred = deferred
        r.sends = sends
        r.done_t = (ts(done_at), ts(done_at)) if done_at else None
    for id_ in list(inbox):
        if id_ not in seen:
            del dedupe[inbox[id_].dkey]
            del inbox[id_]
    cur.execute("SELECT key, chat_id, payload::text, state, attempts, token, owner, lease_until,"
                " greatest(not_before, created_at), provider_message_id, error, id, sent_at,"
                " not_before > created_at, inbound_id FROM durable.outbox")
    seen = set()
    for row in cur.fetchall():
        (k, chat, pl, st, att, tok, own, lu, nb, pm, err, oid, sent_at, deferred, inb) = row
        seen.add(k)
        s = outbox.get(k)
        if s is None:
            s = Snd()
            s.key = k
            s.tokhist = []
            outbox[k] = s
            s.token = None
            s.chat, s.payload, s.seq = chat, canon(json.loads(pl)), oid
        s.inbound = inb
        s.state, s.attempts, s.owner, s.pmid, s.error = st, att, own, pm, err
        if tok != s.token and s.token is not None:
            s.tokhist.append(s.token)
        s.token = tok
        s.llo = s.lhi = ts(lu) if lu else 0
        s.nlo = s.nhi = ts(nb) if nb else 0
        s.deferred = deferred
        s.sent_t = (ts(sent_at), ts(sent_at)) if sent_at else None
    for k in list(outbox):
        if k not in seen:
            del outbox[k]
    sessions.clear()
    cur.execute("SELECT bot, shard, session_id, sequence, resume_url, total_shards, saved_at FROM durable.sessions")
    for bot, shard, sid, seq, url, total, saved_at in cur.fetchall():
        sessions[(bot, shard)] = new_sess(sid, seq, url, total, ts(saved_at), ts(saved_at))
    grants.clear()
    cur.execute("SELECT bucket, granted_at FROM durable.permits ORDER BY granted_at")
    for b, g in cur.fetchall():
        grants[b].append((ts(g), ts(g)))


RESYNCED = [False]


def check(opname, sql, params, exp_err, res, extra="", in_tx=False):
    """exp_err: None (expect success) or set of acceptable SQLSTATEs. returns True if consistent"""
    STATS[opname] += 1
    if exp_err is None and res[0] == "ok":
        return True
    if exp_err is not None and res[0] == "err" and res[1] in exp_err:
        if len(exp_err) > 1:
            CHOICES[f"{opname}:{'/'.join(sorted(exp_err))}->{res[1]}"] += 1
        STATS[opname + ":" + res[1]] += 1
        return True
    exp = "success" if exp_err is None else "ERROR " + "/".join(sorted(exp_err))
    sig, detail = mismatch(opname, sql, params, exp, res, extra)
    if in_tx:
        cur.execute("ROLLBACK")
    finding(sig, detail)
    resync()
    return False


def note(s):
    ops_log.append(s)


# ---------------------------------------------------------------- inbox ops
def op_admit():
    src = R.choice(SOURCES)
    mid = None if R.random() < 0.25 else f"m{R.randrange(40)}"
    chat = R.choice(CHATS)
    pl = R.choice(PAYLOADS)
    kind = R.choice(["message", "message", "callback"])
    inst = R.choice(INSTANCES) if R.random() < 0.6 else None
    lease = pick_lease() if inst else None
    settle()
    sql = "SELECT id, token, duplicate, state FROM durable.inbox_admit(source => %s, message_id => %s, chat_id => %s, payload => %s::jsonb"
    params = [src, mid, chat, json.dumps(pl)]
    if kind != "message" or R.random() < 0.3:
        sql += ", kind => %s"
        params.append(kind)
    if inst is not None or R.random() < 0.2:
        sql += ", instance => %s"
        params.append(inst)
    if lease is not None:
        sql += ", lease => %s::interval"
        params.append(lease)
    sql += ")"
    dk = (src, mid) if mid is not None else (src, "H", chat, kind, canon(pl))
    res = call(sql, params)
    note(f"admit {src} {mid} {chat} {kind} {canon(pl)} inst={inst} lease={lease} -> {res[:2]}")
    if not check("inbox_admit", sql, params, None, res):
        return
    (id_, tok, dup, st), = res[1]
    t0, t1 = res[2], res[3]
    if dk in dedupe:
        r = inbox[dedupe[dk]]
        # Leased to the caller only if an instance is named and the record is
        # pending, due (settle() made that certain) and first of its chat.
        older_open = [i for i in chat_open(r.chat) if i < r.id]
        should = inst is not None and r.state == "pending" and r.nhi < t0 and not older_open
        exp_state = "leased" if should else r.state
        if id_ != r.id or dup is not True or (tok is not None) != should or st != exp_state:
            sig = f"inbox_admit duplicate: expected (dup, token={'yes' if should else 'null'}, state={exp_state}) got (dup={dup}, token={'yes' if tok else 'null'}, state={st})"
            finding(sig, f"  call: {fmtsql(sql, params)}\n  existing id {r.id} state {r.state} attempts {r.attempts} chat {r.chat} older_open {older_open}\n  got {res[1]}\n  recent: " + "\n    ".join(ops_log))
            resync()
            return
        em("inbound_duplicates")
        if should:
            newtoken(tok, "admit-dup")
            lease_rec(r, inst, lease, t0, t1, tok)
        if r.chat != chat:
            if not any(n[0] == "23505" for n in notices):
                finding("admit-dup-other-chat-no-warning", f"  {fmtsql(sql, params)} existing chat {r.chat}: notices {notices}")
        return
    # new record
    if dup is not False or id_ in inbox:
        finding("inbox_admit new: dup flag", f"  {fmtsql(sql, params)} -> {res[1]}; model has no record for key {dk}")
        resync()
        return
    r = Rec()
    r.id = id_
    r.source, r.mid, r.chat, r.kind, r.payload, r.dkey = src, mid, chat, kind, canon(pl), dk
    r.state, r.attempts, r.token, r.owner, r.error, r.tokhist = "pending", 0, None, None, None, []
    due(r, t0, t1, deferred=False)
    r.llo = r.lhi = 0
    r.sends = 0
    r.done_t = None
    older_open = chat_open(chat)
    inbox[id_] = r
    dedupe[dk] = id_
    em("inbound_journaled")
    should = inst is not None and not older_open
    exp_state = "leased" if should else "pending"
    if (tok is not None) != should or st != exp_state:
        finding(f"inbox_admit new: expected token={'yes' if should else 'null'} state={exp_state}, got token={'yes' if tok else 'null'} state={st}",
                f"  {fmtsql(sql, params)} -> {res[1]}; older open of chat: {older_open}\n  recent: " + "\n    ".join(ops_log))
        resync()
        return
    if should:
        newtoken(tok, "admit")
        lease_rec(r, inst, lease, t0, t1, tok)


def claimable_inbox(t):
    out = []
    chats_first = {}
    for r in sorted(inbox.values(), key=lambda r: r.id):
        if r.state in ("pending", "leased") and r.chat not in chats_first:
            chats_first[r.chat] = r.id
    for r in sorted(inbox.values(), key=lambda r: r.id):
        if chats_first.get(r.chat) != r.id:
            continue
        if r.state == "pending" and r.nhi < t:
            out.append(r)
        elif r.state == "leased" and r.lhi < t and r.attempts < MAXATT:
            out.append(r)
    return out


WAITS = {"10 milliseconds": 0.01, "30 milliseconds": 0.03, "50 milliseconds": 0.05, "2 seconds": 2.0}


def settle_ahead(span):
    """settle(), then wait on until no deadline falls within span seconds
    either: a claim that waits that long in the server, with nothing
    claimable, meets no record coming due (which would end its wait)."""
    while True:
        settle()
        t = SETTLED_AT[0]
        ahead = [hi for lo, hi in deadlines() if lo <= t + span and hi >= t]
        if not ahead:
            return
        STATS["settle_ahead_sleeps"] += 1
        time.sleep(max(ahead) - t + EPS + 0.001)


def claim_wait(claimable, mx):
    """settle() before a claim, and its wait argument: mostly none; else
    10-50 ms, or 2 s when something is claimable (it must come at once).
    Nothing claimable: first waits until no deadline falls within the wait.
    Returns (wait, the time the expectation is for, the expected records)."""
    wait = R.choice(list(WAITS)[:3]) if R.random() < 0.3 else None
    settle()
    t = now()
    exp = claimable(t)[:mx]
    if wait and not exp:
        settle_ahead(WAITS[wait] + 0.02)
        t = now()
        exp = claimable(t)[:mx]
    if wait and exp and R.random() < 0.3:
        wait = "2 seconds"
    return wait, t, exp


def claim_waited(opname, sql, params, wait, exp, res):
    """A claim that waited, its rows as the model expects: it came at once
    when it had something to claim, else after its wait (a loose bound)."""
    if wait is None:
        return
    took = res[3] - res[2]
    STATS[f"{opname} wait:{'claimed' if exp else 'nothing'}"] += 1
    if exp and wait == "2 seconds" and took > 1.0:
        finding(f"{opname}: a wait with work claimable did not return at once",
                f"  {fmtsql(sql, params)} took {took:.3f}s for {len(exp)} rows\n  recent: " + "\n    ".join(ops_log))
    if not exp and took < 0.8 * WAITS[wait]:
        finding(f"{opname}: nothing claimable, returned before its wait",
                f"  {fmtsql(sql, params)} took {took:.4f}s\n  recent: " + "\n    ".join(ops_log))


def op_claim():
    inst = R.choice(INSTANCES)
    mx = R.choice([1, 1, 2, 3, 10])
    lease = pick_lease()
    wait, t, exp = claim_wait(claimable_inbox, mx)
    sql = "SELECT id, token, source, message_id, chat_id, kind, payload::text, attempts FROM durable.inbox_claim(instance => %s, max => %s"
    params = [inst, mx]
    if lease:
        sql += ", lease => %s::interval"
        params.append(lease)
    if wait:
        sql += ", wait => %s::interval"
        params.append(wait)
    sql += ")"
    res = call(sql, params)
    note(f"claim {inst} max={mx} lease={lease} wait={wait} -> {res[:2]}")
    if not check("inbox_claim", sql, params, None, res):
        return
    got_ids = [row[0] for row in res[1]]
    exp_ids = [r.id for r in exp]
    if got_ids != exp_ids:
        det = "\n".join(f"    id {r.id} chat {r.chat} {r.state} att {r.attempts} nb {r.nhi - t:+.3f} lease {r.lhi - t:+.3f}" for r in sorted(inbox.values(), key=lambda r: r.id) if r.state in ("pending", "leased"))
        finding("inbox_claim set differs", f"  {fmtsql(sql, params)}\n  expected ids {exp_ids}\n  got ids {got_ids}\n  open records (rel. times):\n{det}\n  recent: " + "\n    ".join(ops_log))
        resync()
        return
    claim_waited("inbox_claim", sql, params, wait, exp, res)
    for row in res[1]:
        r = inbox[row[0]]
        newtoken(row[1], "claim")
        lease_rec(r, inst, lease, res[2], res[3], row[1])
        if row[7] != r.attempts or row[4] != r.chat or row[3] != r.mid or row[2] != r.source or row[5] != r.kind or canon(json.loads(row[6])) != r.payload:
            finding("inbox_claim row fields", f"  row {row} model att {r.attempts} {r.source} {r.mid} {r.chat} {r.kind} {r.payload}")


def stale_errs(r, tok, op):
    """The error an inbox confirmation (op) of record r under tok raises: a
    set of SQLSTATEs, or None for success.  Every call commits on its own, so
    a record done is done by an earlier transaction: "already done"."""
    if tok is None:
        return {"22023"}
    if r is None:
        return {"DR002"}
    if tok == r.token:
        if r.state == "leased":
            return None
        if op == "complete" and r.state == "done":
            return {"DR003"}
        if op in ("complete", "fail") and r.state == "dead":
            return {"DR003"}
    return {"DR001"}


def inbox_confirm(op, sql):
    """A confirmation (id, token) of a picked record: the record and the
    answer when it is what the model expects, else None."""
    r = pick_rec()
    tok = pick_token(r)
    params = [r.id if r else 999999999, tok]
    settle()
    res = call(sql, params)
    note(f"{op} {params} -> {res[:2]}")
    if not check(f"inbox_{op}", sql, params, stale_errs(r, tok, op), res,
                 extra=f"model: {r and (r.state, r.token, r.attempts)}"):
        return None
    return r, res


def op_complete():
    r, res = inbox_confirm("complete", "SELECT durable.inbox_complete(id => %s::bigint, token => %s::bigint)") or (None, None)
    if res and res[0] == "ok":
        r.state = "done"
        r.done_t = (res[2], res[3])


def op_complete_batch():
    """The batch form: all or nothing; an id given twice under its token is
    completed once and counted once."""
    n = R.choice([0, 1, 2, 3])
    recs = [pick_rec() for _ in range(n)]
    toks = [pick_token(r) for r in recs]
    ids = [r.id if r else 999999999 for r in recs]
    if R.random() < 0.05:
        toks = toks + [1]
    settle()
    sql = "SELECT durable.inbox_complete(ids => %s::bigint[], tokens => %s::bigint[])"
    params = [ids, toks]
    if len(toks) != len(ids) or None in toks:
        exp = {"22023"}
    else:
        # The first pair, in the arrays' order, that cannot be completed.
        exp = next((e for e in (stale_errs(r, t, "complete") for r, t in zip(recs, toks)) if e is not None), None)
    res = call(sql, params)
    note(f"complete[] {ids} {toks} -> {res[:2]}")
    if not check("inbox_complete[]", sql, params, exp, res,
                 extra=f"model: {[(r and (r.id, r.state, r.token)) for r in recs]}"):
        return
    if res[0] == "ok":
        completed = {r.id: r for r in recs}
        if res[1][0][0] != len(completed):
            finding("inbox_complete[] count",
                    f"  {fmtsql(sql, params)} returned {res[1][0][0]}, distinct records {len(completed)}")
        for r in completed.values():
            r.state = "done"
            r.done_t = (res[2], res[3])


def op_fail():
    r = pick_rec()
    tok = pick_token(r)
    id_ = r.id if r else 999999999
    retry = R.choice([None, None, "0", "40 milliseconds", "10 minutes", "-1 second"])
    err = R.choice(["boom", "x" * 10, None, LONGERR]) if R.random() < 0.12 else "boom"
    settle()
    sql = "SELECT state, not_before FROM durable.inbox_fail(id => %s, token => %s, error => %s"
    params = [id_, tok, err]
    if retry is not None:
        sql += ", retry_in => %s::interval"
        params.append(retry)
    sql += ")"
    exp = stale_errs(r, tok, "fail")
    if err is None:
        exp = {"22023"}  # arguments are checked before the record
    elif retry == "-1 second" and exp is None and r.attempts < MAXATT:
        exp = {"22023"}  # retry_in, once the record is known to go back to pending
    res = call(sql, params)
    note(f"fail {id_} {tok} retry={retry} err={err} -> {res[:2]}")
    if not check("inbox_fail", sql, params, exp, res, extra=f"model: {r and (r.state, r.token, r.attempts)}"):
        return
    if res[0] == "err":
        return
    st, nb = res[1][0]
    t0, t1 = res[2], res[3]
    if r.attempts >= MAXATT:
        if st != "dead":
            finding("inbox_fail last attempt not dead", f"  {fmtsql(sql, params)} -> {res[1]} attempts {r.attempts} max {MAXATT}")
        r.state = "dead"
        r.error = err
        check_err_stored("inbox", r.id, err)
        em("inbound_dead")
        EXPN.append(("durable_dead", {"kind": "inbox", "id": r.id, "error": "*" if err == LONGERR else err}))
        return
    if st != "pending":
        finding("inbox_fail state", f"  {fmtsql(sql, params)} -> {res[1]} attempts {r.attempts}")
        resync()
        return
    nbt = check_due("inbox_fail", sql, params, nb, t0, t1, retry, r.attempts, IBASE, ICAP)
    r.state = "pending"
    r.error = err
    due(r, nbt, nbt)
    check_err_stored("inbox", r.id, err)


# (a negative retry_in makes a send due at once; inbox_fail refuses it)
RETRY_IN = {"0": 0, "30 milliseconds": 0.03, "40 milliseconds": 0.04, "10 minutes": 600, "-1 second": 0}


def check_due(opname, sql, params, nb, t0, t1, retry, attempts, base, cap):
    """A failure's not_before: retry_in from the call, or the backoff (base
    doubling per attempt, plus up to 25 % jitter; past the cap drawn again up
    to 25 % below it).  Returns it as the client's clock reads it."""
    nbt = ts(nb)
    if retry is not None:
        lo, hi = t0 + RETRY_IN[retry] - EPS, t1 + RETRY_IN[retry] + EPS
    else:
        d = base * 2 ** (attempts - 1)
        lo = t0 + min(d, 0.75 * cap) - EPS
        hi = t1 + min(1.25 * d, cap) + EPS
    if not (lo <= nbt <= hi):
        finding(f"{opname} not_before range (retry_in={retry})",
                f"  {fmtsql(sql, params)} -> delay {nbt - t0:.4f}s, expected [{lo - t0:.4f}, {hi - t0:.4f}] attempts {attempts}")
    return nbt


def check_err_stored(tab, ident, err):
    if err != LONGERR:
        return
    c2 = conn.cursor()
    if tab == "inbox":
        c2.execute("SELECT error FROM durable.inbox WHERE id = %s", [ident])
    else:
        c2.execute("SELECT error FROM durable.outbox WHERE key = %s", [ident])
    stored = c2.fetchone()[0]
    b = err.encode()
    sb = (stored or "").encode()
    m = re.search(r"\[durable clipped (\d+) bytes\]$", stored or "")
    warned = any(n[0] == "01004" for n in notices)
    ok = m is not None and warned and len(sb) <= 1024
    if m:
        prefix = stored[:m.start()]
        if prefix.endswith(" "):
            prefix = prefix[:-1]
        if not err.startswith(prefix) or len(prefix.encode()) + int(m.group(1)) != len(b):
            ok = False
    if not ok:
        finding(f"error clipping {tab}", f"  stored {len(sb)} bytes, tail {stored[-40:]!r}, warned {warned}, notices {notices}")


def op_release():
    r, res = inbox_confirm("release", "SELECT durable.inbox_release(id => %s, token => %s)") or (None, None)
    if res and res[0] == "ok":
        r.state = "pending"
        r.attempts -= 1
        due(r, res[2], res[3])


def heartbeat(opname, sql, params, lease, exp, rec, extra):
    """inbox_heartbeat / outbox_heartbeat: the new lease runs lease from the call."""
    if lease:
        sql += ", lease => %s::interval"
        params.append(lease)
    sql += ")"
    res = call(sql, params)
    note(f"{opname} {params} -> {res[:2]}")
    if not check(opname, sql, params, exp, res, extra=extra) or res[0] != "ok":
        return
    lu = ts(res[1][0][0])
    L = lease_secs(lease)
    if not (res[2] + L - EPS <= lu <= res[3] + L + EPS):
        finding(f"{opname} lease_until", f"  {fmtsql(sql, params)} -> {lu - res[2]:.4f}s expected {L}")
    rec.llo = rec.lhi = lu


def op_heartbeat():
    r = pick_rec()
    tok = pick_token(r)
    settle()
    heartbeat("inbox_heartbeat", "SELECT durable.inbox_heartbeat(id => %s, token => %s",
              [r.id if r else 999999999, tok], pick_lease(), stale_errs(r, tok, "heartbeat"), r,
              f"model: {r and (r.state, r.token, r.attempts)}")


def op_replay():
    r = pick_rec(("done", "dead"))
    id_ = r.id if r else 999999999
    settle()
    sql = "SELECT durable.inbox_replay(id => %s)"
    params = [id_]
    if r is None:
        exp = {"DR002"}
    elif r.state in ("pending", "leased"):
        exp = {"DR003"}
    else:
        newer_leased = [x for x in inbox.values() if x.chat == r.chat and x.id > r.id and x.state == "leased"]
        exp = {"DR003"} if newer_leased else None
    res = call(sql, params)
    note(f"replay {id_} -> {res[:2]}")
    if not check("inbox_replay", sql, params, exp, res, extra=f"model: {r and (r.state, r.token, r.attempts)}"):
        return
    if res[0] == "ok":
        r.state = "pending"
        r.attempts = 0
        due(r, res[2], res[3])
        r.done_t = None
        em("inbound_replayed")


# ---------------------------------------------------------------- outbox ops
def pick_key():
    """A key of the caller's own; now and then one of the derived shape
    '<id>:<n>' of a record in the inbox, whose keyless sends it then refuses."""
    if inbox and R.random() < 0.08:
        return f"{R.choice(list(inbox))}:{R.randint(1, 3)}"
    return f"k{R.randrange(25)}"


def inbound_check(iid, itok, need_token):
    """The error an inbound fence (inbound_id iid, inbound_token itok)
    raises, or None; and the inbound record."""
    r = inbox.get(iid)
    if itok is None:
        return ({"22023"} if need_token else None), r
    if r is None:
        return {"DR002"}, r
    if r.state == "leased" and r.token == itok:
        return None, r
    return {"DR001"}, r


def derived_key(r):
    """The key of the next keyless send of r's handler run."""
    return f"{r.id}:{r.sends + 1}"


def derived_taken(r):
    """The error of a keyless send of r's run whose key a send that is not
    r's holds (a caller's own key of the derived shape), or None."""
    s = outbox.get(derived_key(r))
    return {"23505"} if s is not None and s.inbound != r.id else None


def op_begin():
    mode = R.random()
    inbound = None
    itok = None
    key = pick_key()
    if mode < 0.35 and inbox:
        rr = R.choice([x for x in inbox.values() if x.state == "leased"] or list(inbox.values()))
        inbound = rr.id
        itok = pick_token(rr) if R.random() < 0.95 else None
        if R.random() < 0.6:
            key = None
    elif mode < 0.4:
        key = None
    chat = R.choice(CHATS)
    pl = R.choice(PAYLOADS)
    big = False
    if inbound is None and R.random() < 0.06:
        pl = {"big": "y" * 1500}
        big = True
    inst = R.choice(INSTANCES)
    lease = pick_lease()
    settle()
    sql = "SELECT action, key, token, provider_message_id, state, journaled_chat_id, journaled_payload::text FROM durable.outbox_begin(idempotency_key => %s, chat_id => %s, payload => %s::jsonb, instance => %s"
    params = [key, chat, json.dumps(pl), inst]
    if lease:
        sql += ", lease => %s::interval"
        params.append(lease)
    if inbound is not None:
        sql += ", inbound_id => %s, inbound_token => %s"
        params += [inbound, itok]
    sql += ")"
    exp = None
    rin = None
    if inbound is not None:
        exp, rin = inbound_check(inbound, itok, True)
        if exp is None and key is None:
            exp = derived_taken(rin)
    res = call(sql, params)
    note(f"begin key={key} {chat} {canon(pl)} {inst} lease={lease} in={inbound}/{itok} -> {res[:2]}")
    if not check("outbox_begin", sql, params, exp, res, extra=f"inbound model: {rin and (rin.state, rin.token)}"):
        return
    if res[0] == "err":
        return
    (act, k, tok, pmid, st, jchat, jpl), = res[1]
    t0, t1 = res[2], res[3]
    if key is None and inbound is not None:
        if k != derived_key(rin):
            finding("outbox_begin derived key", f"  {fmtsql(sql, params)} -> key {k}, expected {derived_key(rin)}\n  recent: " + "\n    ".join(ops_log))
            resync()
            return
        rin.sends += 1
    if key is not None and k != key:
        finding("outbox_begin key", f"{fmtsql(sql, params)} -> {k}")
    s = outbox.get(k)
    if s is None and big:
        em("outbox_bypassed")
        if act != "bypass" or tok is not None or not any(n[0] == "54000" for n in notices):
            finding("outbox_begin bypass", f"  {fmtsql(sql, params)} -> {res[1]} notices {notices}")
        c2 = conn.cursor()
        c2.execute("SELECT count(*) FROM durable.outbox WHERE key = %s", [k])
        if c2.fetchone()[0] != 0:
            finding("outbox_begin bypass journaled", f"  {fmtsql(sql, params)} -> {res[1]}")
            resync()
        return
    if s is None:
        if act != "send" or st != "sending" or tok is None or jchat is not None or jpl is not None:
            finding("outbox_begin new", f"  {fmtsql(sql, params)} -> {res[1]}")
            resync()
            return
        newtoken(tok, "begin")
        s = Snd()
        s.key = k
        s.seq = dbid(k)
        s.chat, s.payload = chat, canon(pl)
        s.state, s.attempts, s.token, s.owner, s.pmid, s.error, s.tokhist = "sending", 1, tok, inst, None, None, []
        s.inbound = inbound
        L = lease_secs(lease)
        s.llo, s.lhi = t0 + L, t1 + L
        due(s, 0, 0, deferred=False)
        s.sent_t = None
        outbox[k] = s
        em("outbox_journaled")
        return
    em("outbox_deduped")
    diverged = s.chat != chat or s.payload != canon(pl)
    # expected action
    if s.state == "sent":
        ea = "sent"
    elif s.state == "sending":
        ea = "busy" if s.lhi >= t0 else "unknown"
    elif s.state in ("pending", "failed"):
        ea = "send" if s.nhi < t0 else "wait"
    else:
        ea = s.state  # dead / unknown
    est = {"sent": "sent", "busy": "sending", "unknown": "unknown", "send": "sending", "wait": s.state, "dead": "dead"}[ea]
    bad = act != ea or st != est
    if ea == "sent" and pmid != s.pmid:
        bad = True
    if ea == "send" and tok is None:
        bad = True
    if ea != "send" and tok is not None:
        bad = True
    if diverged and (jchat != s.chat or jpl is None or canon(json.loads(jpl)) != s.payload):
        bad = True
    if not diverged and (jchat is not None or jpl is not None):
        bad = True
    if diverged != any(n[0] == "23505" and k in (n[1] or "") for n in notices):
        finding("outbox_begin diverged WARNING", f"  {fmtsql(sql, params)} notices {notices}")
    if bad:
        finding(f"outbox_begin existing {s.state}{' expired' if ea=='unknown' and s.state=='sending' else ''}: expected ({ea},{est}{',diverged' if diverged else ''}) got ({act},{st})",
                f"  {fmtsql(sql, params)}\n  -> {res[1]}\n  model send: state {s.state} att {s.attempts} tok {s.token} pmid {s.pmid} chat {s.chat} payload {s.payload} lease {s.lhi - t0:+.3f} nb {s.nhi - t0:+.3f}\n  recent: " + "\n    ".join(ops_log))
        resync()
        return
    if diverged:
        em("outbox_diverged")
    if ea == "unknown" and s.state == "sending":
        s.state = "unknown"
        em("outbox_ambiguous")
        EXPN.append(("durable_ambiguous", {"key": s.key, "chat_id": s.chat}))
    if ea == "send" and s.state == "failed":
        em("outbox_retried")
    if ea == "send":
        newtoken(tok, "begin-existing")
        if s.token is not None:
            s.tokhist.append(s.token)
        s.state, s.attempts, s.token, s.owner = "sending", s.attempts + 1, tok, inst
        L = lease_secs(lease)
        s.llo, s.lhi = t0 + L, t1 + L


def op_enqueue():
    mode = R.random()
    inbound = None
    itok = None
    key = pick_key()
    use_tok = False
    if mode < 0.3 and inbox:
        rr = R.choice([x for x in inbox.values() if x.state == "leased"] or list(inbox.values()))
        inbound = rr.id
        use_tok = R.random() < 0.6
        itok = pick_token(rr) if use_tok else None
        if itok is None:
            use_tok = False
        if R.random() < 0.6:
            key = None
    elif mode < 0.35:
        key = None
    chat = R.choice(CHATS)
    pl = R.choice(PAYLOADS)
    nbopt = R.choice(["default", "default", "null", "past", "50ms", "10min", "400d"])
    settle()
    sql = "SELECT key, created, state FROM durable.outbox_enqueue(idempotency_key => %s, chat_id => %s, payload => %s::jsonb"
    params = [key, chat, json.dumps(pl)]
    off = {"past": -5, "50ms": 0.05, "10min": 600, "400d": 400 * 86400}.get(nbopt)
    if nbopt == "null":
        sql += ", not_before => NULL"
    elif off is not None:
        sql += ", not_before => clock_timestamp() + %s::interval"
        params.append(f"{off} seconds")
    if inbound is not None:
        sql += ", inbound_id => %s"
        params.append(inbound)
        if use_tok:
            sql += ", inbound_token => %s"
            params.append(itok)
    sql += ")"
    exp = None
    rin = inbox.get(inbound) if inbound is not None else None
    if inbound is not None:
        if use_tok:
            exp, rin = inbound_check(inbound, itok, True)
        elif key is None:
            # a derived key needs the record leased, to anyone
            if rin is None:
                exp = {"DR002"}
            elif rin.state != "leased":
                exp = {"DR001"}
        if exp is None and key is None:
            exp = derived_taken(rin)
    if nbopt == "400d":
        exp = {"22023"}
    res = call(sql, params)
    note(f"enqueue key={key} {chat} {canon(pl)} nb={nbopt} in={inbound}/{itok if use_tok else '-'} -> {res[:2]}")
    if not check("outbox_enqueue", sql, params, exp, res, extra=f"inbound model: {rin and (rin.state, rin.token)}"):
        return
    if res[0] == "err":
        return
    (k, created, st), = res[1]
    t0, t1 = res[2], res[3]
    if key is None and inbound is not None:
        if k != derived_key(rin):
            finding("outbox_enqueue derived key", f"  {fmtsql(sql, params)} -> key {k}, expected {derived_key(rin)}\n  recent: " + "\n    ".join(ops_log))
            resync()
            return
        rin.sends += 1
    s = outbox.get(k)
    if s is None:
        if created is not True or st != "pending":
            finding("outbox_enqueue new", f"  {fmtsql(sql, params)} -> {res[1]}")
            resync()
            return
        s = Snd()
        s.key = k
        s.seq = dbid(k)
        s.chat, s.payload = chat, canon(pl)
        s.state, s.attempts, s.token, s.owner, s.pmid, s.error, s.tokhist = "pending", 0, None, None, None, None, []
        s.inbound = inbound
        s.llo = s.lhi = 0
        if off is None or off < 0:
            due(s, t0 - 0.001, t1, deferred=False)  # now() = transaction start (autocommit: statement start)
        else:
            due(s, t0 + off, t1 + off)
        s.sent_t = None
        outbox[k] = s
        em("outbox_journaled")
        em("outbox_deferred")
        return
    em("outbox_deduped")
    if s.chat != chat or s.payload != canon(pl):
        em("outbox_diverged")
    if created is not False or st != s.state:
        finding(f"outbox_enqueue existing {s.state}: got created={created} state={st}", f"  {fmtsql(sql, params)} -> {res[1]}")
        resync()


def op_handler_tx():
    """A handler's transaction: its replies enqueued under the inbound lease
    (derived keys), the completion (sometimes twice: a repeat within the
    transaction is a no-op), then COMMIT, or ROLLBACK as if the handler
    failed or its process died before committing: nothing of it stays but
    the counters of calls."""
    r = pick_rec()
    tok = pick_token(r)
    replies = R.choice([0, 1, 2])
    twice = R.random() < 0.3
    commit = R.random() < 0.7
    if r is None or tok is None:
        return
    settle()
    begun = now()
    cur.execute("BEGIN")
    sends_before = r.sends
    created = []
    failed = None
    for _ in range(replies):
        sql = ("SELECT key, created, state FROM durable.outbox_enqueue(idempotency_key => NULL, chat_id => %s,"
               " payload => %s::jsonb, inbound_id => %s, inbound_token => %s)")
        params = [r.chat, json.dumps({"reply": r.id}), r.id, tok]
        exp, _ = inbound_check(r.id, tok, True)
        if exp is None:
            exp = derived_taken(r)
        res = call(sql, params)
        note(f"tx enqueue reply of {r.id}/{tok} -> {res[:2]}")
        if not check("tx:outbox_enqueue", sql, params, exp, res, in_tx=True):
            return
        if res[0] == "err":
            failed = res
            break
        (k, was_created, st), = res[1]
        if k != derived_key(r):
            cur.execute("ROLLBACK")
            finding("tx outbox_enqueue derived key", f"  {fmtsql(sql, params)} -> {k}, expected {derived_key(r)}")
            resync()
            return
        r.sends += 1
        if k in outbox:
            em("outbox_deduped")
            if (outbox[k].chat, outbox[k].payload) != (r.chat, canon({"reply": r.id})):
                em("outbox_diverged")
            if was_created is not False:
                finding("tx outbox_enqueue existing key created", f"  {fmtsql(sql, params)} -> {res[1]}")
        else:
            created.append(k)
            if was_created is not True or st != "pending":
                finding("tx outbox_enqueue new", f"  {fmtsql(sql, params)} -> {res[1]}")
    for _ in range(2 if twice else 1):
        if failed:
            break
        sql = "SELECT durable.inbox_complete(id => %s::bigint, token => %s::bigint)"
        params = [r.id, tok]
        res = call(sql, params)
        note(f"tx complete {r.id} {tok} -> {res[:2]}")
        if not check("tx:inbox_complete", sql, params, stale_errs(r, tok, "complete"), res, in_tx=True):
            return
        if res[0] == "err":
            failed = res
    keep = commit and not failed
    cur.execute("COMMIT" if keep else "ROLLBACK")
    note(f"tx {'COMMIT' if keep else 'ROLLBACK'}")
    if not keep:
        r.sends = sends_before
        return
    r.state = "done"
    r.done_t = (begun, now())
    for k in created:
        s = Snd()
        s.key, s.seq, s.chat, s.payload = k, dbid(k), r.chat, canon({"reply": r.id})
        s.inbound = r.id
        s.state, s.attempts, s.token, s.owner, s.pmid, s.error, s.tokhist = "pending", 0, None, None, None, None, []
        s.llo = s.lhi = 0
        due(s, begun - 0.001, now(), deferred=False)  # due at now(): the transaction's start
        s.sent_t = None
        outbox[k] = s
        em("outbox_journaled")
        em("outbox_deferred")


def dbid(k):
    c2 = conn.cursor()
    c2.execute("SELECT id FROM durable.outbox WHERE key = %s", [k])
    row = c2.fetchone()
    return row[0] if row else 10**12


def claimable_outbox(t):
    first = {}
    for s in sorted(outbox.values(), key=lambda s: s.seq):
        if s.state in ("pending", "sending", "failed") and s.chat not in first:
            first[s.chat] = s.key
    out = []
    for s in sorted(outbox.values(), key=lambda s: s.seq):
        if first.get(s.chat) == s.key and s.state in ("pending", "failed") and s.nhi < t:
            out.append(s)
    return out


def op_oclaim():
    inst = R.choice(INSTANCES)
    mx = R.choice([1, 2, 10, None])
    lease = pick_lease()
    wait, t, exp = claim_wait(claimable_outbox, mx or 10)
    sql = "SELECT key, token, chat_id, payload::text, attempts FROM durable.outbox_claim(instance => %s"
    params = [inst]
    if mx is not None:
        sql += ", max => %s"
        params.append(mx)
    if lease:
        sql += ", lease => %s::interval"
        params.append(lease)
    if wait:
        sql += ", wait => %s::interval"
        params.append(wait)
    sql += ")"
    res = call(sql, params)
    note(f"oclaim {inst} max={mx} lease={lease} wait={wait} -> {res[:2]}")
    if not check("outbox_claim", sql, params, None, res):
        return
    got = [row[0] for row in res[1]]
    expk = [s.key for s in exp]
    if got != expk:
        det = "\n".join(f"    {s.key} seq {s.seq} chat {s.chat} {s.state} att {s.attempts} nb {s.nhi - t:+.3f} lease {s.lhi - t:+.3f}" for s in sorted(outbox.values(), key=lambda s: s.seq) if s.state in ("pending", "failed", "sending"))
        finding("outbox_claim set differs", f"  {fmtsql(sql, params)}\n  expected {expk}\n  got {got}\n  open sends:\n{det}\n  recent: " + "\n    ".join(ops_log))
        resync()
        return
    claim_waited("outbox_claim", sql, params, wait, exp, res)
    for row in res[1]:
        s = outbox[row[0]]
        newtoken(row[1], "oclaim")
        if s.token is not None:
            s.tokhist.append(s.token)
        if s.state == "failed":
            em("outbox_retried")
        s.state, s.attempts, s.token, s.owner = "sending", s.attempts + 1, row[1], inst
        L = lease_secs(lease)
        s.llo, s.lhi = res[2] + L, res[3] + L
        if row[4] != s.attempts or row[2] != s.chat or canon(json.loads(row[3])) != s.payload:
            finding("outbox_claim row fields", f"  row {row} model att {s.attempts} chat {s.chat} payload {s.payload}")


def sent_errs(s, tok, op):
    """The error an outbox confirmation (op: sent, failed, heartbeat) of send s
    under tok raises: a set of SQLSTATEs, or None for success."""
    if tok is None:
        return {"22023"}
    if s is None:
        return {"DR002"}
    if tok != s.token:
        return {"DR001"}
    if s.state == "sending":
        return None
    if op == "heartbeat" or s.state in ("pending", "failed"):
        return {"DR001"}  # the lease ended (outbox_retry, outbox_failed)
    if op == "sent" and s.state in ("unknown", "sent"):
        return None  # resolves an ambiguous send; a repeat is a no-op
    if op == "failed" and s.state == "unknown":
        return None  # the provider's refusal resolves it too
    return {"DR003"}


def op_sent():
    s = pick_send()
    tok = pick_otoken(s)
    k = s.key if s else "nokey"
    pm = R.choice(["p1", "p2"]) if R.random() < 0.97 else None
    settle()
    sql = "SELECT durable.outbox_sent(key => %s, token => %s, provider_message_id => %s)"
    params = [k, tok, pm]
    exp = sent_errs(s, tok, "sent")
    if pm is None or tok is None:
        exp = {"22023"}
    res = call(sql, params)
    note(f"sent {k} {tok} {pm} -> {res[:2]}")
    if not check("outbox_sent", sql, params, exp, res, extra=f"model: {s and (s.state, s.token, s.attempts, s.tokhist)}"):
        return
    if res[0] == "ok":
        if s.state == "sent":
            # A repeat: a no-op that keeps the first provider id, and warns
            # when it names another one (the provider was called twice).
            warned = any(n[0] == "23505" for n in notices)
            if warned != (pm != s.pmid):
                finding("outbox_sent repeat warning", f"  {fmtsql(sql, params)} recorded {s.pmid}: notices {notices}")
            return
        if notices:
            finding("outbox_sent notice", f"  {fmtsql(sql, params)}: notices {notices}")
        s.state, s.pmid = "sent", pm
        s.sent_t = (res[2], res[3])


def op_ofailed():
    s = pick_send()
    tok = pick_otoken(s)
    k = s.key if s else "nokey"
    retryable = R.random() < 0.8
    retry = R.choice([None, None, "0", "30 milliseconds", "10 minutes", "-1 second"])
    settle()
    sql = "SELECT state, not_before FROM durable.outbox_failed(key => %s, token => %s, error => %s, retryable => %s"
    oerr = LONGERR if R.random() < 0.05 else "err"
    params = [k, tok, oerr, retryable]
    if retry:
        sql += ", retry_in => %s::interval"
        params.append(retry)
    sql += ")"
    exp = sent_errs(s, tok, "failed")
    res = call(sql, params)
    note(f"failed {k} {tok} retryable={retryable} retry={retry} -> {res[:2]}")
    if not check("outbox_failed", sql, params, exp, res, extra=f"model: {s and (s.state, s.token, s.attempts)}"):
        return
    if res[0] == "err":
        return
    st, nb = res[1][0]
    t0, t1 = res[2], res[3]
    if not retryable or s.attempts >= RETRIES + 1:
        if st != "dead" or nb is not None:
            finding(f"outbox_failed expected dead (retryable={retryable}, attempts={s.attempts}, retries={RETRIES})", f"  {fmtsql(sql, params)} -> {res[1]}\n  recent: " + "\n    ".join(ops_log))
            resync()
            return
        s.state = "dead"
        s.error = oerr
        check_err_stored("outbox", s.key, oerr)
        em("outbox_dead")
        EXPN.append(("durable_dead", {"kind": "outbox", "key": s.key, "error": "*" if oerr == LONGERR else oerr}))
        return
    if st != "failed":
        finding(f"outbox_failed expected failed (attempts={s.attempts}, retries={RETRIES})", f"  {fmtsql(sql, params)} -> {res[1]}\n  recent: " + "\n    ".join(ops_log))
        resync()
        return
    nbt = check_due("outbox_failed", sql, params, nb, t0, t1, retry, s.attempts, OBASE, OCAP)
    s.state = "failed"
    s.error = oerr
    due(s, nbt, nbt)
    check_err_stored("outbox", s.key, oerr)


def op_oheartbeat():
    s = pick_send()
    tok = pick_otoken(s)
    settle()
    heartbeat("outbox_heartbeat", "SELECT durable.outbox_heartbeat(key => %s, token => %s",
              [s.key if s else "nokey", tok], pick_lease(), sent_errs(s, tok, "heartbeat"), s,
              f"model: {s and (s.state, s.token, s.attempts)}")


def op_oretry():
    s = pick_send(("dead", "failed", "unknown"))
    k = s.key if s else "nokey"
    settle()
    sql = "SELECT durable.outbox_retry(key => %s)"
    params = [k]
    if s is None:
        exp = {"DR002"}
    elif s.state in ("dead", "failed", "unknown"):
        exp = None
    else:
        exp = {"DR003"}
    res = call(sql, params)
    note(f"oretry {k} -> {res[:2]}")
    if not check("outbox_retry", sql, params, exp, res, extra=f"model: {s and (s.state, s.token, s.attempts)}"):
        return
    if res[0] == "ok":
        s.state, s.attempts = "pending", 0
        due(s, res[2], res[3])
        em("outbox_retried")


def op_odiscard():
    s = pick_send()
    k = s.key if s else "nokey"
    settle()
    sql = "SELECT durable.outbox_discard(key => %s)"
    params = [k]
    t = now()
    exp = None
    if s is not None and s.state == "sending" and s.lhi >= t:
        exp = {"DR003"}
    res = call(sql, params)
    note(f"odiscard {k} -> {res[:2]}")
    if not check("outbox_discard", sql, params, exp, res, extra=f"model: {s and (s.state, s.token, s.lhi - t)}"):
        return
    if res[0] == "ok":
        v = res[1][0][0]
        if v != (s is not None):
            finding("outbox_discard result", f"  {fmtsql(sql, params)} -> {v}, model has {s is not None}")
        if s is not None:
            del outbox[k]


# ---------------------------------------------------------------- instances / sweep / purge
def op_instance_start():
    inst = R.choice(INSTANCES)
    settle()
    sql = "SELECT inbox_recovered, outbox_ambiguous FROM durable.instance_start(instance => %s)"
    params = [inst]
    ri = [r for r in inbox.values() if r.state == "leased" and r.owner == inst]
    so = [s for s in outbox.values() if s.state == "sending" and s.owner == inst]
    res = call(sql, params)
    note(f"instance_start {inst} -> {res[:2]}")
    if not check("instance_start", sql, params, None, res):
        return
    a, b = res[1][0]
    if (a, b) != (len(ri), len(so)):
        finding("instance_start counts", f"  {fmtsql(sql, params)} -> {(a, b)} expected {(len(ri), len(so))}\n  recent: " + "\n    ".join(ops_log))
    recover(ri, so, res)


def recover(ri, so, res):
    """Leases taken back (instance_start, sweep): inbox records pending now,
    or dead on their last attempt; sends unknown."""
    for r in ri:
        if r.attempts >= MAXATT:
            r.state = "dead"
            em("inbound_dead")
            EXPN.append(("durable_dead", {"kind": "inbox", "id": r.id, "error": "*"}))
        else:
            r.state = "pending"
            due(r, res[2], res[3])
    for s in so:
        s.state = "unknown"
        em("outbox_ambiguous")
        EXPN.append(("durable_ambiguous", {"key": s.key, "chat_id": s.chat}))


# Where the next sweep's due-work window starts, as the client's clock
# brackets it: the previous sweep's now, or 30 s before the first one's.
SWEEP_WINDOW = [None]


def came_due(recs, start, t0):
    """Of recs (pending or failed, deferred), how many came due after the
    window's start (bracketed by start) and by the sweep's now (after t0,
    settle() having made every due time clearly past or clearly ahead):
    (certainly, possibly)."""
    certain = possible = 0
    for x in recs:
        if not x.deferred or x.nhi > t0:
            continue
        if x.nlo > start[1] + EPS:
            certain += 1
        elif x.nhi >= start[0] - EPS:
            possible += 1
    return certain, possible


def op_sweep():
    """One pass by hand: expired leases recovered, and durable_ready with
    outbox_due for deferred or retried work that came due in the window since
    the previous pass (README, "NOTIFY channels")."""
    settle()
    t = now()
    ri = [r for r in inbox.values() if r.state == "leased" and r.lhi < t]
    so = [s for s in outbox.values() if s.state == "sending" and s.lhi < t]
    sql = "SELECT inbox_expired, outbox_ambiguous, outbox_due, purged FROM durable.sweep()"
    res = call(sql)
    note(f"sweep -> {res[:2]}")
    if not check("sweep", sql, [], None, res):
        return
    a, b, outbox_due, purged = res[1][0]
    if (a, b) != (len(ri), len(so)):
        finding("sweep counts", f"  sweep -> {res[1]} expected inbox_expired {len(ri)} (of which dead {sum(r.attempts >= MAXATT for r in ri)}), outbox_ambiguous {len(so)}\n  recent: " + "\n    ".join(ops_log))
    recover(ri, so, res)
    if purged != 0:
        finding("sweep purged within the retention (7 days)", f"{res[1]}")
    t0, t1 = res[2], res[3]
    start = SWEEP_WINDOW[0] or (t0 - 30, t1 - 30)
    SWEEP_WINDOW[0] = (t0, t1)
    # Records the pass recovered are due at its now: inside the window.
    i_certain, i_possible = came_due([r for r in inbox.values() if r.state == "pending"], start, t1)
    o_certain, o_possible = came_due([x for x in outbox.values() if x.state in ("pending", "failed")], start, t1)
    if not o_certain <= outbox_due <= o_certain + o_possible:
        finding("sweep outbox_due", f"  sweep -> {res[1]}: expected {o_certain} (+{o_possible} at the window's start)"
                "\n  recent: " + "\n    ".join(ops_log))
    kinds = {p["kind"] for c, p in NOTES if c == "durable_ready"}
    STATS["sweep_outbox_due>0"] += outbox_due > 0
    STATS["sweep_ready:" + ",".join(sorted(kinds))] += 1
    for kind, certain, possible in (("inbox", i_certain, i_possible), ("outbox", o_certain, o_possible)):
        if (kind in kinds and certain + possible == 0) or (kind not in kinds and certain > 0):
            finding(f"sweep durable_ready {kind}", f"  sweep -> {res[1]}: announced {sorted(kinds)}, "
                    f"{certain} (+{possible}) {kind} records came due\n  recent: " + "\n    ".join(ops_log))
    if len([1 for c, _ in NOTES if c == "durable_ready"]) != len(kinds):
        finding("sweep durable_ready twice", f"  {NOTES}")


# purge()'s older_than: the finish time a record must be older than (NULL:
# durable.retention, 7 days).
PURGE_AGE = {None: 7 * 86400.0, "0": 0.0, "50 milliseconds": 0.05, "1 hour": 3600.0}


def op_purge():
    """purge(older_than, batch): up to batch (NULL or omitted: 10,000) of the
    done and sent records finished more than older_than ago; with more old
    enough than batch, the inbox's go first, oldest first, then the outbox's
    (README; finish times the model knows within a bracket may tie)."""
    older = R.choice(list(PURGE_AGE))
    batch = R.choice(["omit", "omit", "omit", "NULL", 1, 1, 2, 3])
    age = PURGE_AGE[older]
    fin = [(r, r.done_t) for r in inbox.values() if r.state == "done" and r.done_t] + \
          [(s, s.sent_t) for s in outbox.values() if s.state == "sent" and s.sent_t]
    settle([(lo + age, hi + age) for _, (lo, hi) in fin])
    sql = "SELECT durable.purge(older_than => %s::interval"
    params = [older]
    if batch != "omit":
        sql += ", batch => %s"
        params.append(None if batch == "NULL" else batch)
    sql += ")"
    t = now()
    old = [x for x, (lo, hi) in fin if hi + age < t]
    limit = 10000 if batch in ("omit", "NULL") else batch
    res = call(sql, params)
    note(f"purge {older} batch={batch} -> {res[:2]}")
    if not check("purge", sql, params, None, res):
        return
    n = res[1][0][0]
    if n != min(limit, len(old)):
        finding(f"purge count (older_than={older}, batch={batch})",
                f"  {fmtsql(sql, params)} -> {n} expected {min(limit, len(old))} ({len(old)} old enough)\n  recent: " + "\n    ".join(ops_log))
        resync()
        return
    c2 = conn.cursor()
    c2.execute("SELECT array(SELECT id FROM durable.inbox), array(SELECT key FROM durable.outbox)")
    ids, keys = map(set, c2.fetchone())
    gone = [r for r in inbox.values() if r.id not in ids] + [x for x in outbox.values() if x.key not in keys]
    if len(gone) != n or any(x not in old for x in gone):
        finding(f"purge deleted other records than {n} of the old enough (older_than={older}, batch={batch})",
                f"  {fmtsql(sql, params)} -> {n}; gone {[getattr(x, 'id', None) or x.key for x in gone]}, "
                f"old enough {[getattr(x, 'id', None) or x.key for x in old]}\n  recent: " + "\n    ".join(ops_log))
        resync()
        return
    if n < len(old):
        def fin_t(x):
            return x.sent_t if isinstance(x, Snd) else x.done_t
        kept = [x for x in old if x not in gone]
        out_of_order = any(isinstance(g, Snd) and not isinstance(k, Snd) for g in gone for k in kept) or \
            any(isinstance(g, Snd) == isinstance(k, Snd) and fin_t(g)[0] > fin_t(k)[1] for g in gone for k in kept)
        STATS["purge batch cut short"] += 1
        if out_of_order:
            finding(f"purge batch not inbox first, oldest first (batch={batch})",
                    f"  {fmtsql(sql, params)} -> {n}; gone {[getattr(x, 'id', None) or x.key for x in gone]}, "
                    f"kept {[getattr(x, 'id', None) or x.key for x in kept]}\n  recent: " + "\n    ".join(ops_log))
    for x in gone:
        if isinstance(x, Snd):
            del outbox[x.key]
        else:
            del dedupe[x.dkey]
            del inbox[x.id]


def op_sleep():
    time.sleep(R.choice([0.03, 0.07, 0.1]))
    note("sleep")


# ---------------------------------------------------------------- sessions, permits, metrics_reset
BOTS = ["b1", "b2"]
URLS = ["wss://gateway.example/?v=10", "wss://gateway.example/?v=9"]
TOTALS = [1, 2, 4]
SECRET = "SECRET-7f3a9c"
FUTURE = 5.0  # a session saved further ahead of the clock than this is not trusted
MAX_AGES = {"omit": 60.0, None: 60.0, "0": 0.0, "50 milliseconds": 0.05, "150 milliseconds": 0.15,
            "1 day": 86400.0, "366 days": 366 * 86400.0}
SESSION_TYPES = {"bot": "text", "shard": "int", "session_id": "text", "sequence": "bigint",
                 "resume_url": "text", "total_shards": "int", "max_age": "interval"}
# One argument refused (22023; "total": the shard as high as total_shards).
SAVE_BAD = [("bot", None), ("bot", ""), ("bot", "b" * 513), ("shard", None), ("shard", -1), ("shard", "total"),
            ("session_id", None), ("session_id", ""), ("session_id", SECRET * 40), ("sequence", None),
            ("sequence", -1), ("resume_url", None), ("resume_url", ""), ("resume_url", "u" * 2049),
            ("total_shards", None), ("total_shards", 0), ("total_shards", 16385)]
LOAD_BAD = [(k, v) for k, v in SAVE_BAD if k not in ("session_id", "sequence")] + \
           [("max_age", "-1 second"), ("max_age", "367 days"), ("max_age", "13 mons")]


def new_sess(sid, seq, url, total, lo, hi):
    x = Sess()
    x.sid, x.seq, x.url, x.total, x.slo, x.shi = sid, seq, url, total, lo, hi
    return x


def session_call(fn, args):
    return (f"SELECT * FROM durable.{fn}(" + ", ".join(f"{k} => %s::{SESSION_TYPES[k]}" for k in args) + ")",
            list(args.values()))


def bad_arg(opname, sql, params, name, secret=None):
    """A call with one argument refused: 22023, with a message that names the
    argument (README, "Errors") and never shows the session id."""
    res = call(sql, params)
    note(f"{opname} bad {name} -> {res[:2]}")
    if not check(opname, sql, params, {"22023"}, res) or res[0] != "err":
        return
    d = LAST_ERR[0].diag
    if not re.search(rf"\b{name}\b", d.message_primary or ""):
        finding(f"{opname}: the message does not name {name}", f"  {fmtsql(sql, params)}: {d.message_primary!r}")
    if secret and any(secret in (m or "") for m in (d.message_primary, d.message_detail, d.message_hint, d.context)):
        finding(f"{opname}: an error shows the session id", f"  {fmtsql(sql, params)}: {d.message_primary!r}")


def call_maybe_rolled_back(opname, sql, params, label):
    """A call that must succeed, made one time in ten in a transaction rolled
    back after it (what it did must not count): (the answer, whether it was
    rolled back), or None when the answer was wrong."""
    rollback = R.random() < 0.1
    if rollback:
        cur.execute("BEGIN")
    res = call(sql, params)
    note(f"{label}{' ROLLBACK' if rollback else ''} -> {res[:2]}")
    if not check(opname, sql, params, None, res, in_tx=rollback):
        return None
    if rollback:
        cur.execute("ROLLBACK")
    return res, rollback


def op_session_save():
    """session_save: the shard's session, replacing the last one whatever its
    sequence, stamped with the clock of the call; nothing saved when an
    argument is refused or the transaction rolls back."""
    total = R.choice(TOTALS)
    args = {"bot": R.choice(BOTS), "shard": R.randrange(total), "session_id": f"sid-{R.randrange(10**6)}",
            "sequence": R.choice([0, R.randrange(1, 10**6), 2**63 - 1]), "resume_url": R.choice(URLS),
            "total_shards": total}
    settle()
    if R.random() < 0.2:
        name, v = R.choice(SAVE_BAD)
        secret = args["session_id"] if name != "session_id" else SECRET if v else None
        args[name] = total if v == "total" else v
        bad_arg("session_save", *session_call("session_save", args), name, secret)
        return
    sql, params = session_call("session_save", args)
    made = call_maybe_rolled_back("session_save", sql, params, f"session_save {params}")
    if made is None or made[1]:
        return
    res = made[0]
    sessions[(args["bot"], args["shard"])] = new_sess(args["session_id"], args["sequence"], args["resume_url"],
                                                      total, res[2], res[3])


def op_session_load():
    """session_load: no row when nothing is saved; else the session, or
    session_id and sequence NULL and the first reason that applies in
    ignored: expired (older than max_age, NULL or omitted: 60 s), future
    (saved over 5 s ahead of the clock), resume_url, total_shards; saved_at
    either way."""
    if sessions and R.random() < 0.8:
        (bot, shard), x = R.choice(list(sessions.items()))
        url = x.url if R.random() < 0.7 else R.choice(URLS)
        total = x.total if R.random() < 0.7 else R.choice([n for n in TOTALS if n > shard])
    else:
        bot, total, url = R.choice(BOTS), R.choice(TOTALS), R.choice(URLS)
        shard = R.randrange(total)
    ma = R.choice(["omit", "omit"] + list(MAX_AGES)[1:])
    args = {"bot": bot, "shard": shard, "resume_url": url, "total_shards": total}
    if ma != "omit":
        args["max_age"] = ma
    if R.random() < 0.12:
        name, v = R.choice(LOAD_BAD)
        args[name] = total if v == "total" else v
        settle()
        bad_arg("session_load", *session_call("session_load", args), name)
        return
    sql, params = session_call("session_load", args)
    x = sessions.get((bot, shard))
    age = MAX_AGES[ma]
    # The moments its age passes max_age, and it stops being too far ahead.
    settle([(x.slo + age, x.shi + age), (x.slo - FUTURE, x.shi - FUTURE)] if x else ())
    t = now()
    if x is None:
        exp = []
    else:
        ignored = ("expired" if x.shi + age < t else "future" if x.slo - FUTURE > t else
                   "resume_url" if url != x.url else "total_shards" if total != x.total else None)
        exp = [(None, None, ignored)] if ignored else [(x.sid, x.seq, None)]
    res = call(sql, params)
    note(f"session_load {bot}/{shard} {url} {total} max_age={ma} -> {res[:2]}")
    if not check("session_load", sql, params, None, res):
        return
    got = [(row[0], row[1], row[3]) for row in res[1]]
    STATS["session_load:" + (exp[0][2] or "resumable" if exp else "none saved")] += 1
    if got != exp or (x and not within(res[1][0][2], x.slo, x.shi)):
        what = ["no row" if not rows else rows[0][2] or "the session" for rows in (exp, got)]
        finding(f"session_load: expected {what[0]} got {what[1]}",
                f"  {fmtsql(sql, params)}\n  -> {res[1]}\n  expected {exp}\n  model: "
                + (f"{x.sid} seq {x.seq} {x.url} total {x.total} saved [{x.slo - t:+.4f}, {x.shi - t:+.4f}]" if x else "nothing saved")
                + "\n  recent: " + "\n    ".join(ops_log))
        resync()


def op_session_skew():
    """A session whose saved_at is ahead of the database's clock (a dump
    restored from a server whose clock ran ahead), set by hand: 2 s ahead is
    tolerated, a minute is ignored as 'future' until it is 5 s ahead."""
    if not sessions:
        return
    (bot, shard), x = R.choice(list(sessions.items()))
    ahead = R.choice([2, 60, 60])
    settle()
    sql = "UPDATE durable.sessions SET saved_at = clock_timestamp() + %s::interval WHERE bot = %s AND shard = %s"
    params = [f"{ahead} seconds", bot, shard]
    res = call(sql, params)
    note(f"session saved_at {bot}/{shard} +{ahead}s (by hand) -> {res[:2]}")
    if check("session_skew (by hand)", sql, params, None, res):
        x.slo, x.shi = res[2] + ahead, res[3] + ahead


# permit() buckets: the per of all their calls (one per bucket, as the README
# asks), in seconds, and the max they name (pd raises and lowers it).
BUCKETS = {"pa": ("100 milliseconds", 0.1, [2]), "pb": ("50 milliseconds", 0.05, [1]),
           "pc": ("1 hour", 3600.0, [3]), "pd": ("200 milliseconds", 0.2, [1, 2, 3]),
           "pe": ("7 days", 7 * 86400.0, [1000000]), "pf": ("1 millisecond", 0.001, [1])}
PERMIT_BAD = [("bucket", None), ("bucket", ""), ("bucket", "x" * 513), ("max", None), ("max", 0), ("max", -1),
              ("max", 1000001), ("per", None), ("per", "0"), ("per", "-1 second"), ("per", "0.5 milliseconds"),
              ("per", "7 days 1 second"), ("per", "1 mon")]


def op_permit():
    """permit(bucket, max, per), a few calls in a row: 0 and a grant when
    fewer than max grants are younger than per, else how long until the grant
    that keeps the window full leaves it, nothing consumed; a refused
    argument consumes nothing, nor does a grant rolled back."""
    b = R.choice(list(BUCKETS))
    per_text, per, maxes = BUCKETS[b]
    sql = "SELECT durable.permit(bucket => %s::text, max => %s::int, per => %s::interval)"
    for _ in range(R.choice([1, 1, 2, 3, 4])):
        args = {"bucket": b, "max": R.choice(maxes), "per": per_text}
        if R.random() < 0.08:
            name, v = R.choice(PERMIT_BAD)
            args[name] = v
            settle()
            bad_arg("permit", sql, list(args.values()), name)
            continue
        mine = grants[b]
        settle([(lo + per, hi + per) for lo, hi in mine])
        t = now()
        mine[:] = [g for g in mine if g[0] + per > t]  # the others left the window for good
        mx = args["max"]
        params = list(args.values())
        made = call_maybe_rolled_back("permit", sql, params, f"permit {b} {mx} {per_text} ({len(mine)} in the window)")
        if made is None:
            return
        res, rollback = made
        w = res[1][0][0].total_seconds()
        window = ", ".join(f"[{lo + per - t:+.4f}, {hi + per - t:+.4f}]" for lo, hi in mine)
        if len(mine) < mx:
            STATS["permit:granted"] += 1
            if w != 0:
                finding("permit: a wait with a permit free", f"  {fmtsql(sql, params)} -> {w:.4f}s with {len(mine)} in the "
                        f"window (they leave at {window})\n  recent: " + "\n    ".join(ops_log))
                resync()
                return
            if not rollback:
                mine.append((res[2], res[3]))
        else:
            STATS["permit:wait"] += 1
            lo, hi = mine[len(mine) - mx]
            wlo, whi = lo + per - res[3] - EPS, hi + per - res[2] + EPS
            if not (w > 0 and wlo <= w <= whi):
                finding(f"permit: wait with the window full{' (0: granted)' if w == 0 else ''}",
                        f"  {fmtsql(sql, params)} -> {w:.4f}s expected [{wlo:.4f}, {whi:.4f}] ({len(mine)} in the "
                        f"window, they leave at {window})\n  recent: " + "\n    ".join(ops_log))
                resync()
                return


def op_metrics_reset():
    """metrics_reset(): every counter 0 (post_check reads them after the
    call), since the moment of the call."""
    c2 = conn.cursor()
    c2.execute("SELECT since FROM durable.metrics()")
    since0 = c2.fetchone()[0]
    before = read_metrics()
    settle()
    sql = "SELECT durable.metrics_reset()"
    res = call(sql)
    note(f"metrics_reset -> {res[:2]}")
    if not check("metrics_reset", sql, [], None, res):
        return
    for k, v in before.items():
        em(k, -v)
    c2.execute("SELECT since FROM durable.metrics()")
    since = c2.fetchone()[0]
    if not (within(since, res[2], res[3]) and since > since0):
        finding("metrics_reset since", f"  since {since} (before {since0}), the call [{res[2]}, {res[3]}]")


# ---------------------------------------------------------------- bad arguments
BAD = [
    ("SELECT * FROM durable.inbox_admit(source => '', message_id => 'x', chat_id => 'c0')", {"22023"}),
    ("SELECT * FROM durable.inbox_admit(source => NULL, message_id => 'x', chat_id => 'c0')", {"22023"}),
    ("SELECT * FROM durable.inbox_admit(source => 'tg', message_id => 'x', chat_id => '')", {"22023"}),
    ("SELECT * FROM durable.inbox_admit(source => 'tg', message_id => 'x', chat_id => NULL)", {"22023"}),
    ("SELECT * FROM durable.inbox_admit(source => 'tg', message_id => repeat('m', 513), chat_id => 'c0')", {"22023"}),
    ("SELECT * FROM durable.inbox_admit(source => 'tg', message_id => 'x', chat_id => repeat('c', 513))", {"22023"}),
    ("SELECT * FROM durable.inbox_admit(source => 'tg', message_id => 'x', chat_id => 'c0', instance => '')", {"22023"}),
    ("SELECT * FROM durable.inbox_admit(source => 'tg', message_id => 'x', chat_id => 'c0', instance => 'i1', lease => '10 ms')", {"22023"}),
    ("SELECT * FROM durable.inbox_admit(source => 'tg', message_id => 'x', chat_id => 'c0', instance => 'i1', lease => '8 days')", {"22023"}),
    ("SELECT * FROM durable.inbox_admit(source => 'tg', message_id => 'x', chat_id => 'c0', payload => jsonb_build_object('p', repeat('x', 2000)))", {"54000"}),
    ("SELECT * FROM durable.inbox_claim(instance => '')", {"22023"}),
    ("SELECT * FROM durable.inbox_claim(instance => NULL)", {"22023"}),
    ("SELECT * FROM durable.inbox_claim(instance => 'i1', max => 0)", {"22023"}),
    ("SELECT * FROM durable.inbox_claim(instance => 'i1', max => -5)", {"22023"}),
    ("SELECT * FROM durable.inbox_claim(instance => 'i1', lease => '19 ms')", {"22023"}),
    ("SELECT * FROM durable.inbox_claim(instance => 'i1', lease => '-1 s')", {"22023"}),
    ("SELECT * FROM durable.inbox_claim(instance => 'i1', wait => '-1 s')", {"22023"}),
    ("SELECT * FROM durable.inbox_claim(instance => 'i1', wait => '61 minutes')", {"22023"}),
    ("SELECT * FROM durable.outbox_claim(instance => 'i1', wait => '-1 s')", {"22023"}),
    ("SELECT * FROM durable.outbox_claim(instance => 'i1', wait => '61 minutes')", {"22023"}),
    ("SELECT * FROM durable.inbox_claim(instance => repeat('i', 513))", {"22023"}),
    ("SELECT * FROM durable.outbox_begin(idempotency_key => '', chat_id => 'c0', payload => '{}', instance => 'i1')", {"22023"}),
    ("SELECT * FROM durable.outbox_begin(idempotency_key => 'kk', chat_id => '', payload => '{}', instance => 'i1')", {"22023"}),
    ("SELECT * FROM durable.outbox_begin(idempotency_key => 'kk', chat_id => 'c0', payload => '{}', instance => '')", {"22023"}),
    ("SELECT * FROM durable.outbox_begin(idempotency_key => 'kk', chat_id => 'c0', payload => '{}', instance => NULL)", {"22023"}),
    ("SELECT * FROM durable.outbox_begin(idempotency_key => repeat('k', 513), chat_id => 'c0', payload => '{}', instance => 'i1')", {"22023"}),
    ("SELECT * FROM durable.outbox_begin(idempotency_key => 'kk', chat_id => 'c0', payload => '{}', instance => 'i1', lease => '5 ms')", {"22023"}),
    ("SELECT * FROM durable.outbox_enqueue(idempotency_key => 'kk', chat_id => NULL, payload => '{}')", {"22023"}),
    ("SELECT * FROM durable.outbox_enqueue(idempotency_key => 'kk', chat_id => 'c0', payload => jsonb_build_object('p', repeat('x', 2000)))", {"54000"}),
    ("SELECT * FROM durable.outbox_enqueue(idempotency_key => 'kk', chat_id => 'c0', payload => '{}', not_before => now() + interval '400 days')", {"22023"}),
    ("SELECT * FROM durable.outbox_claim(instance => 'i1', max => 0)", {"22023"}),
    ("SELECT * FROM durable.outbox_claim(instance => '')", {"22023"}),
    ("SELECT * FROM durable.outbox_claim(instance => 'i1', lease => '1 ms')", {"22023"}),
    ("SELECT durable.outbox_heartbeat(key => 'nokey', token => 1, lease => '1 ms')", {"22023"}),
    ("SELECT durable.inbox_heartbeat(id => 1, token => 1, lease => '8 days')", {"22023"}),
    ("SELECT durable.outbox_retry(key => NULL)", {"22023"}),
    ("SELECT durable.outbox_retry(key => '')", {"22023"}),
    ("SELECT durable.outbox_discard(key => NULL)", {"22023"}),
    ("SELECT durable.inbox_replay(id => NULL)", {"22023"}),
    ("SELECT durable.outbox_sent(key => NULL, token => 1, provider_message_id => 'p')", {"22023"}),
    ("SELECT durable.instance_start(instance => '')", {"22023"}),
    ("SELECT durable.instance_start(instance => NULL)", {"22023"}),
    ("SELECT durable.purge(batch => 0)", {"22023"}),
    ("SELECT durable.purge(batch => -1)", {"22023"}),
    ("SELECT durable.purge(older_than => '-1 day')", {"22023"}),
    ("SELECT durable.inbox_complete(ids => ARRAY[1,2]::bigint[], tokens => ARRAY[1]::bigint[])", {"22023"}),
]


def op_bad():
    sql, exp = R.choice(BAD)
    settle()
    res = call(sql)
    note(f"bad {sql} -> {res[:2]}")
    check("bad:" + sql[:60], sql, [], exp, res)
    if res[0] == "ok":
        resync()


def within(t, lo, hi):
    return t is not None and lo - EPS <= ts(t) <= hi + EPS


def compare_all():
    """Both journals and the sessions, whole, against the model; and the rules
    every row keeps whatever the model says (README, "The journals";
    tests.md's invariants)."""
    bad = []
    cur.execute("SELECT id, state, attempts, token, owner, error, lease_until, not_before, finished_at, done_at"
                " FROM durable.inbox")
    db = {row[0]: row for row in cur.fetchall()}
    for id_, (_, state, attempts, token, owner, error, lease_until, not_before, finished_at, done_at) in db.items():
        rules = {
            "finished_at is NULL exactly while pending or leased": (finished_at is None) == (state in ("pending", "leased")),
            "done_at is set exactly when done": (done_at is not None) == (state == "done"),
            "a lease exactly while leased": (lease_until is not None) == (state == "leased"),
            "a leased record has a token and an owner": state != "leased" or (token is not None and owner is not None),
            "attempts within 0..max": 0 <= attempts <= MAXATT,
            "a dead record used every attempt and says why": state != "dead" or (attempts == MAXATT and error),
        }
        bad += [f"inbox {id_} ({state}): {rule}" for rule, ok in rules.items() if not ok]
        r = inbox.get(id_)
        if r is None:
            bad.append(f"inbox {id_} extra in db {db[id_][:6]}")
            continue
        if state != r.state or attempts != r.attempts or (r.state == "leased" and (token != r.token or owner != r.owner)):
            bad.append(f"inbox {id_}: db {(state, attempts, token, owner)} model {(r.state, r.attempts, r.token, r.owner)}")
        elif state == "leased" and not within(lease_until, r.llo, r.lhi):
            bad.append(f"inbox {id_}: lease_until {lease_until} outside the model's [{r.llo}, {r.lhi}]")
        elif state == "pending" and not within(not_before, r.nlo, r.nhi):
            bad.append(f"inbox {id_}: not_before {not_before} outside the model's [{r.nlo}, {r.nhi}]")
    bad += [f"inbox {id_} missing in db (model {r.state})" for id_, r in inbox.items() if id_ not in db]
    cur.execute("SELECT key, state, attempts, token, owner, provider_message_id, lease_until, sent_at,"
                " greatest(not_before, created_at) FROM durable.outbox")
    db = {row[0]: row for row in cur.fetchall()}
    for k, (_, state, attempts, token, owner, pmid, lease_until, sent_at, due_at) in db.items():
        rules = {
            "a lease exactly while sending": (lease_until is not None) == (state == "sending"),
            "a sending send has a token and an owner": state != "sending" or (token is not None and owner is not None),
            "sent_at and the provider id exactly when sent": ((sent_at is not None) == (state == "sent")
                                                               and (pmid is not None) == (state == "sent")),
            "attempts within 0..retries + 1": 0 <= attempts <= RETRIES + 1,
        }
        bad += [f"outbox {k} ({state}): {rule}" for rule, ok in rules.items() if not ok]
        s = outbox.get(k)
        if s is None:
            bad.append(f"outbox {k} extra in db {db[k][:6]}")
            continue
        if (state != s.state or attempts != s.attempts or (s.state == "sending" and (token != s.token or owner != s.owner))
                or (s.state == "sent" and pmid != s.pmid)):
            bad.append(f"outbox {k}: db {db[k][1:6]} model {(s.state, s.attempts, s.token, s.owner, s.pmid)}")
        elif state == "sending" and not within(lease_until, s.llo, s.lhi):
            bad.append(f"outbox {k}: lease_until {lease_until} outside the model's [{s.llo}, {s.lhi}]")
        elif state in ("pending", "failed") and not within(due_at, s.nlo, s.nhi):
            bad.append(f"outbox {k}: due at {due_at}, outside the model's [{s.nlo}, {s.nhi}]")
    bad += [f"outbox {k} missing in db (model {s.state})" for k, s in outbox.items() if k not in db]
    cur.execute("SELECT bot, shard, session_id, sequence, resume_url, total_shards, saved_at FROM durable.sessions")
    db = {row[:2]: row for row in cur.fetchall()}
    for k, (_, _, sid, seq, url, total, saved_at) in db.items():
        x = sessions.get(k)
        if x is None:
            bad.append(f"session {k} extra in db {(sid, seq, url, total)}")
        elif (sid, seq, url, total) != (x.sid, x.seq, x.url, x.total) or not within(saved_at, x.slo, x.shi):
            bad.append(f"session {k}: db {(sid, seq, url, total, saved_at)} model {(x.sid, x.seq, x.url, x.total, x.slo, x.shi)}")
    bad += [f"session {k} missing in db" for k in sessions if k not in db]
    if bad:
        for b in bad:
            finding("state-compare " + b[:140], "  " + b + "\n  recent: " + "\n    ".join(ops_log))
        resync()


OPS = [
    (op_admit, 10), (op_claim, 8), (op_complete, 8), (op_complete_batch, 2), (op_fail, 5), (op_release, 3),
    (op_heartbeat, 3), (op_replay, 3), (op_begin, 10), (op_sent, 5), (op_ofailed, 5), (op_enqueue, 6),
    (op_oclaim, 5), (op_oheartbeat, 2), (op_oretry, 3), (op_odiscard, 2), (op_instance_start, 1),
    (op_sweep, 2), (op_purge, 2), (op_sleep, 3), (op_bad, 2), (op_handler_tx, 4),
    (op_session_save, 2), (op_session_load, 3), (op_session_skew, 0.5), (op_permit, 3), (op_metrics_reset, 0.5),
]
fns = [f for f, w in OPS]
ws = [w for f, w in OPS]

def standing_check():
    settle()
    t = now()
    c2 = conn.cursor()
    c2.execute("SELECT * FROM durable.standing()")
    row = c2.fetchone()
    t2 = now()
    if any(lo <= t2 and hi >= SETTLED_AT[0] for lo, hi in deadlines()):
        STATS["standing overtaken by a deadline"] += 1
        return
    cnt = collections.Counter(r.state for r in inbox.values())
    ocnt = collections.Counter(x.state for x in outbox.values())
    expc = (cnt["pending"], cnt["leased"], cnt["dead"], ocnt["pending"], ocnt["sending"], ocnt["failed"], ocnt["dead"], ocnt["unknown"])
    if tuple(row[:8]) != expc:
        finding("standing counts", f"  standing {row[:8]} model {expc}\n  recent: " + "\n    ".join(ops_log))
        return
    # Waiting: due pending inbox records and sends, and inbox leases that ran
    # out (not yet swept) with attempts left, from the end of the lease.
    waiting = [(r.nlo, r.nhi) for r in inbox.values() if r.state == "pending" and r.nhi < t] + \
              [(r.llo, r.lhi) for r in inbox.values() if r.state == "leased" and r.lhi < t and r.attempts < MAXATT] + \
              [(x.nlo, x.nhi) for x in outbox.values() if x.state in ("pending", "failed") and x.nhi < t]
    if waiting:
        lo = min(w[0] for w in waiting)
        hi = min(w[1] for w in waiting)
        op = ts(row[8])
        if op is None or not (lo - 0.006 <= op <= hi + 0.006):
            finding("standing oldest_pending", f"  oldest_pending {op and op - t:+.4f} model [{lo - t:+.4f}, {hi - t:+.4f}] ({len(waiting)} waiting)\n  recent: " + "\n    ".join(ops_log))
            return
        age_lo, age_hi = t - hi, t2 - lo
        cond_cnt = len(waiting) > BOUND_COUNT
        if not cond_cnt and age_lo - 0.01 < BOUND_AGE < age_hi + 0.01:
            return
        exp_over = cond_cnt or age_lo > BOUND_AGE
    else:
        if row[8] is not None:
            finding("standing oldest_pending not null", f"  {row}")
        exp_over = False
    if row[9] != exp_over:
        finding(f"standing over_bound expected {exp_over}", f"  {row} waiting {len(waiting)}\n  recent: " + "\n    ".join(ops_log))
    STATS["standing_checked"] += 1


def post_check(fname, m0):
    """The metrics moved and the NOTIFYs came as the model expects."""
    if RESYNCED[0]:
        return
    m1 = read_metrics()
    for k in METRIC_NAMES:
        if m1[k] - m0[k] != EXPM[k]:
            finding(f"metrics {k} after {fname}: expected +{EXPM[k]} got +{m1[k] - m0[k]}",
                    "  recent: " + "\n    ".join(ops_log))
    for c, p in NOTES:
        if c == "durable_ready" and (set(p) != {"kind"} or p["kind"] not in ("inbox", "outbox")):
            finding("durable_ready payload", f"  {p}")
    missing = list(EXPN)
    unexpected = []
    for c, p in NOTES:
        if c == "durable_ready":
            continue
        match = next((e for e in missing if e[0] == c and set(e[1]) == set(p)
                      and all(v == "*" or p[kk] == v for kk, v in e[1].items())), None)
        if match:
            missing.remove(match)
        else:
            unexpected.append((c, p))
    if missing or unexpected:
        finding(f"notify after {fname}: missing {[e[0] for e in missing]} unexpected {[g[0] for g in unexpected]}",
                f"  expected {EXPN}\n  got {NOTES}\n  recent: " + "\n    ".join(ops_log))


def main():
    start = time.time()
    harness_errors = 0
    for i in range(NOPS):
        f = R.choices(fns, ws)[0]
        m0 = read_metrics()
        EXPM.clear()
        EXPN.clear()
        NOTES.clear()
        RESYNCED[0] = False
        UNCERTAIN[0] = False
        try:
            f()
            if RESYNC_AFTER_OP[0]:
                RESYNC_AFTER_OP[0] = False
                resync()
            post_check(f.__name__, m0)
            UNCERTAIN[0] = False
            if i % 5 == 0 and not RESYNCED[0]:
                standing_check()
        except Exception:
            harness_errors += 1
            print("harness exception at call", i, f.__name__)
            traceback.print_exc()
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                cur.execute("ROLLBACK")
            resync()
        if i % 25 == 24:
            compare_all()
        # Keep the model small enough to check as a whole every 25 calls.
        if len(inbox) > 150 or len(outbox) > 150:
            cur.execute("TRUNCATE durable.inbox, durable.outbox")
            resync()
            STATS["truncate"] += 1
    compare_all()
    unjudged = STATS["calls not judged"]
    print(f"\nSEED {SEED}: {NOPS} calls in {time.time() - start:.1f}s; "
          f"{len(FINDINGS)} findings, {harness_errors} harness exceptions, "
          f"{unjudged} calls overtaken by a deadline ({STATS['findings not judged']} findings not judged)")
    print("STATS", dict(sorted(STATS.items())))
    print("CHOICES", dict(sorted(CHOICES.items())))
    if unjudged > NOPS * 0.05:
        print(f"too many calls overtaken by a deadline ({unjudged} of {NOPS}): the machine is too slow "
              "for this test's 30 ms leases to say anything")
        return 1
    return 1 if FINDINGS or harness_errors else 0


sys.exit(main())
