"""A model of legal Pub/Sub delivery histories, and mutators that inject one anomaly each.

`generate(subscriptions, workload, seed)` simulates, deterministically from `seed`, what Pub/Sub's
documented semantics allow (`docs/pubsub-facts.md`) for each declared subscription, and
returns the evidence a probe would have recorded (`pubsubguard.validation.evidence.records` schema):

- at-least-once: on subscriptions without exactly-once, an acked message may be delivered again;
  nacks, expiries, crashes and late acks lead to a redelivery after the nack / the deadline;
- ordering: per key one batch outstanding at a time, the next batch only after the previous one is
  settled; a failed message n rewinds the key to n and the following messages are delivered again,
  acked ones included; with exactly-once, acks must come in order: after a failure the subscriber
  either abandons (nacks) the rest of the batch, or acks it and the target holds those acks back and
  rejects them (or never answers) once the rewind has superseded those deliveries;
- exactly-once: no redelivery after a successful ack nor while a delivery is outstanding (unless an
  ordered key's rewind supersedes it); a late ack returns `invalid_ack_id`; without exactly-once it
  returns `success`; a delivery a fault holds may carry the probe's shorter fault deadline;
- dead-lettering: a message that failed N = max_delivery_attempts times is forwarded (a dead-letter
  row after its last attempt ended); poison messages (only published on topics whose subscriptions
  all dead-letter) are always nacked; no message is delivered more than N times;
- several subscriber tasks, each with a clock offset within +-max_skew_us/2, and a redelivery delay
  that exceeds the checks' skew tolerance.

Mutators (`MUTATORS`, one per finding kind and one per out_of_order form) take a legal history and
return a copy with exactly one anomaly and where it is, or None when the history offers no place.

Benchmarks and the cluster test reuse `History.write(dir)` (the probe's directory layout) and
`tile(history, copies)` (the same history under renamed keys: still legal, any size).
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pubsubguard.validation.evidence import layout, seal
from pubsubguard.validation.evidence.records import DELIVERY_SCHEMA, PUBLISH_SCHEMA, DeclaredSubscription, RunInfo
from pubsubguard.validation.checks.findings import DEFAULT_SKEW_US

FAULT_DEADLINE_S = 10  # the probe's default --fault-deadline (pubsubguard.validation.config.DEFAULT_FAULT_DEADLINE_S)

T0_US = 1_700_000_000_000_000
MS = 1_000
S = 1_000_000
DEAD_LETTER_TASK = "dead-letter-drain"
CHECK_SKEW_US = DEFAULT_SKEW_US  # the checks' default tolerance; the model keeps its margins above it
REDELIVERY_DELAY_US = (2 * CHECK_SKEW_US + 100 * MS, 3 * S)


@dataclass(frozen=True)
class Workload:
    keys: int = 3
    messages_per_key: int = 6
    poison_rate: float = 0.0  # share of messages published as poison (topics that dead-letter)
    publish_error_rate: float = 0.0  # share of publishes that fail (never delivered)
    fault_rate: float = 0.2  # share of deliveries that fail (nack, expire, late ack, crash)
    duplicate_rate: float = 0.1  # at-least-once redelivery after an ack (no exactly-once)
    subscriber_tasks: int = 3
    max_skew_us: int = 20_000
    max_batch: int = 3  # ordered pull: messages of one key per response


@dataclass
class History:
    run_id: str
    subscriptions: list[DeclaredSubscription]
    publishes: list[dict] = field(default_factory=list)
    deliveries: list[dict] = field(default_factory=list)

    def publish_table(self) -> pa.Table:
        return pa.Table.from_pylist(self.publishes, schema=PUBLISH_SCHEMA)

    def delivery_table(self) -> pa.Table:
        return pa.Table.from_pylist(self.deliveries, schema=DELIVERY_SCHEMA)

    def copy(self) -> "History":
        return History(self.run_id, list(self.subscriptions), copy.deepcopy(self.publishes), copy.deepcopy(self.deliveries))

    def write(self, directory: Path, target: str = "generated") -> Path:
        return write_evidence(directory, self.run_id, self.subscriptions, self.publish_table(), self.delivery_table(), target)


def write_evidence(
    directory: Path,
    run_id: str,
    subscriptions: list[DeclaredSubscription],
    publishes: pa.Table,
    deliveries: pa.Table,
    target: str = "generated",
    row_group_size: int = 1_000_000,
    bucketed: bool = True,
) -> Path:
    """Write tables as the probe does: run.json, publishes/part-*.parquet, deliveries/part-*.parquet (up to
    `row_group_size` rows each, in the bucketed layout, `pubsubguard.validation.evidence.layout`, unless not
    `bucketed`: as the probe wrote them before it), and seal them as a probe run does when it ends
    (pubsubguard.validation.evidence.seal)."""
    directory = Path(directory)
    for name, table in (("publishes", publishes), ("deliveries", deliveries)):
        sub = directory / name
        sub.mkdir(parents=True, exist_ok=True)
        for i, start in enumerate(range(0, max(table.num_rows, 1), row_group_size)):
            part = sub / f"part-{i:05d}.parquet"
            if bucketed:
                layout.write_part(table.slice(start, row_group_size), part)
            else:
                pq.write_table(table.slice(start, row_group_size), part)
    RunInfo(run_id=run_id, target=target, subscriptions=list(subscriptions), parameters={"generator": "histories"}).write(directory)
    seal.seal(directory, run_id)
    return directory


# -- the model --------------------------------------------------------------------------------
class _Sim:
    def __init__(self, history: History, workload: Workload, rng: random.Random):
        self.h, self.w, self.rng = history, workload, rng
        self.offsets = {
            f"task-{i}": rng.randint(-workload.max_skew_us // 2, workload.max_skew_us // 2)
            for i in range(workload.subscriber_tasks)
        }
        self.offsets[DEAD_LETTER_TASK] = rng.randint(-workload.max_skew_us // 2, workload.max_skew_us // 2)
        self.ack_ids = 0

    def delay(self) -> int:
        return self.rng.randint(*REDELIVERY_DELAY_US)

    def task(self) -> str:
        return f"task-{self.rng.randrange(self.w.subscriber_tasks)}"

    def fault(self) -> str:
        return self.rng.choice(("nack", "expire", "late_ack", "crash"))

    def deliver(self, sub: DeclaredSubscription, msg: dict, t: int, task: str, action: str, attempt: int, ack_after: int):
        """Record one delivery received at true time t; returns (end, settled) in true time. A delivery a
        fault holds (expire, crash, late ack) may have had its deadline shortened to the probe's fault
        deadline (ModifyAckDeadline); the row records the deadline in force."""
        deadline_s = sub.ack_deadline_s
        if action in ("expire", "crash", "late_ack") and deadline_s > FAULT_DEADLINE_S and self.rng.random() < 0.5:
            deadline_s = FAULT_DEADLINE_S
        deadline = deadline_s * S
        ack_t, result = None, "none"
        if action == "ack":
            ack_t, result = t + min(ack_after, deadline - 100 * MS), "success"
            end = ack_t
        elif action == "nack":
            ack_t, result = t + self.rng.randint(10 * MS, 200 * MS), "success"
            end = ack_t
        elif action == "late_ack":
            ack_t = t + deadline + self.rng.randint(100 * MS, 2 * S)
            result = "invalid_ack_id" if sub.exactly_once else "success"
            end = t + deadline
        else:  # expire, crash
            end = t + deadline
        off = self.offsets[task]
        self.ack_ids += 1
        self.h.deliveries.append(
            {
                "run_id": self.h.run_id,
                "subscription": sub.name,
                "kind": "delivery",
                "message_id": msg["message_id"],
                "key": msg["key"],
                "seq": msg["seq"],
                "probe_run": self.h.run_id,
                "delivery_attempt": attempt if sub.dead_lettering else None,
                "receive_time_us": t + off,
                "publish_time_us": msg["publish_time_us"] - 2 * MS,
                "subscriber_task": task,
                "ack_id": f"ack-{self.ack_ids:08d}",
                "ack_deadline_s": deadline_s,
                "action": action,
                "ack_result": result,
                "ack_time_us": None if ack_t is None else ack_t + off,
                "dl_source_delivery_count": None,
                "dl_source_subscription": None,
            }
        )
        return end, action == "ack"

    def dead_letter(self, sub: DeclaredSubscription, msg: dict, after: int, attempts: int):
        t = after + self.rng.randint(10 * MS, 500 * MS) + self.offsets[DEAD_LETTER_TASK]
        self.ack_ids += 1
        self.h.deliveries.append(
            {
                "run_id": self.h.run_id,
                "subscription": sub.name,
                "kind": "dead_letter",
                "message_id": f"dl-{msg['message_id']}",
                "key": msg["key"],
                "seq": msg["seq"],
                "probe_run": self.h.run_id,
                "delivery_attempt": None,
                "receive_time_us": t,
                "publish_time_us": after,
                "subscriber_task": DEAD_LETTER_TASK,
                "ack_id": f"ack-{self.ack_ids:08d}",
                "ack_deadline_s": sub.ack_deadline_s,
                "action": "none",
                "ack_result": "none",
                "ack_time_us": None,
                "dl_source_delivery_count": attempts,
                "dl_source_subscription": f"projects/pubsubguard-dev/subscriptions/{sub.name}",
            }
        )

    def ack_after(self, sub: DeclaredSubscription) -> int:
        return self.rng.randint(50 * MS, max(60 * MS, sub.ack_deadline_s * S // 3))

    # unordered: each message on its own
    def plain(self, sub: DeclaredSubscription, msg: dict):
        n = sub.max_delivery_attempts
        t = msg["true_publish"] + self.rng.randint(5 * MS, 300 * MS)
        attempts, own_faults = 0, 0
        while True:
            attempts += 1
            if msg["poison"]:
                action = "nack"
            elif own_faults < (1 if n else 2) and self.rng.random() < self.w.fault_rate:
                action = self.fault()
            else:
                action = "ack"
            own_faults += action != "ack"
            end, ok = self.deliver(sub, msg, t, self.task(), action, attempts, self.ack_after(sub))
            if ok:
                budget = attempts < (n - 1 if n else 3)
                if not sub.exactly_once and budget and self.rng.random() < self.w.duplicate_rate:
                    t = end + self.delay()
                    continue
                return
            if action == "late_ack" and not sub.exactly_once and self.rng.random() < 0.5:
                return  # the service honoured the late ack
            if n and attempts >= n:
                self.dead_letter(sub, msg, end, attempts)
                return
            if msg["poison"] and not n and attempts >= 3:
                return  # the run ends; a poison message without dead-lettering is redelivered forever
            t = end + self.delay()

    # ordered: one key at a time, one batch outstanding
    def ordered(self, sub: DeclaredSubscription, msgs: list[dict]):
        n = sub.max_delivery_attempts
        if not msgs:
            return
        deliveries = {m["seq"]: 0 for m in msgs}
        faults = {m["seq"]: 0 for m in msgs}
        pos, t, size_one, dup_rewinds = 0, msgs[0]["true_publish"] + self.rng.randint(5 * MS, 300 * MS), False, 0
        while pos < len(msgs):
            size = 1 if size_one else self.rng.randint(1, self.w.max_batch)
            batch = msgs[pos : pos + size]
            t = max(t, batch[-1]["true_publish"] + MS)
            task = self.task()
            failed, resolution, ack_after, held_back = None, t, 0, []
            abandon = self.rng.random() < 0.5
            for j, m in enumerate(batch):
                deliveries[m["seq"]] += 1
                if failed is not None and sub.exactly_once and not abandon:
                    # acks must come in order: the target holds back the acks of the rest of the batch
                    # and answers them (rejected, or not at all) only after the rewind supersedes them
                    ack_after += self.ack_after(sub) // max(1, len(batch))
                    self.deliver(sub, m, t, task, "ack", deliveries[m["seq"]], ack_after)
                    held_back.append(self.h.deliveries[-1])
                    continue
                if failed is not None and sub.exactly_once:
                    action = "nack"  # acks must come in order: abandon the rest of the batch
                elif m["poison"]:
                    action = "nack"
                elif faults[m["seq"]] < (1 if n else 2) and self.rng.random() < self.w.fault_rate:
                    action = self.fault()
                else:
                    action = "ack"
                if action != "ack" and not m["poison"] and failed is None:
                    faults[m["seq"]] += 1
                ack_after += self.ack_after(sub) // max(1, len(batch))
                end, ok = self.deliver(sub, m, t, task, action, deliveries[m["seq"]], ack_after)
                resolution = max(resolution, end)
                if not ok and failed is None:
                    if action == "late_ack" and not sub.exactly_once and self.rng.random() < 0.5:
                        # the service honoured the late ack: the message is settled only then, so the
                        # key's next redelivery comes after it (else it would start past an unsettled seq)
                        resolution = max(resolution, self.h.deliveries[-1]["ack_time_us"] - self.offsets[task])
                        continue
                    failed = j
            t = resolution + self.delay()
            for row in held_back:
                row.update(ack_result=self.rng.choice(("invalid_ack_id", "other")),
                           ack_time_us=t + self.rng.randint(10 * MS, 1 * S) + self.offsets[row["subscriber_task"]])
            size_one = False
            if failed is None:
                pos += len(batch)
                if not sub.exactly_once and not n and dup_rewinds < 2 and self.rng.random() < self.w.duplicate_rate:
                    dup_rewinds += 1
                    pos -= self.rng.randint(1, len(batch))  # an ack got lost: rewind to an acked message
                continue
            m = batch[failed]
            if n and deliveries[m["seq"]] >= n:
                self.dead_letter(sub, m, resolution, deliveries[m["seq"]])
                pos += failed + 1
            else:
                pos += failed
                size_one = bool(n)  # with dead-lettering, redeliver the failed message alone


def generate(subscriptions: list[DeclaredSubscription], workload: Workload, seed: int, run_id: str | None = None) -> History:
    """A legal history for the declared subscriptions (subscriptions of one topic share its publishes)."""
    rng = random.Random(seed)
    history = History(run_id or f"run-{seed}", list(subscriptions))
    sim = _Sim(history, workload, rng)
    topics: dict[str, list[DeclaredSubscription]] = {}
    for sub in subscriptions:
        topics.setdefault(sub.topic, []).append(sub)
    for topic, subs in topics.items():
        poison_ok = all(s.dead_lettering for s in subs)
        messages: dict[str, list[dict]] = {}
        for k in range(workload.keys):
            key = f"k{k}"
            for seq in range(workload.messages_per_key):
                true_t = T0_US + (seq * workload.keys + k) * 10 * MS + rng.randint(0, 5 * MS)
                ok = rng.random() >= workload.publish_error_rate
                row = {
                    "run_id": history.run_id,
                    "topic": topic,
                    "key": key,
                    "seq": seq,
                    "message_id": f"{topic}/{key}/{seq}" if ok else None,
                    "poison": poison_ok and rng.random() < workload.poison_rate,
                    "status": "ok" if ok else "error",
                    "error": None if ok else "DEADLINE_EXCEEDED: generated publish failure",
                    "publish_time_us": true_t + rng.randint(1 * MS, 30 * MS),
                    "publisher_task": "publisher-0",
                }
                history.publishes.append(row)
                if ok:
                    messages.setdefault(key, []).append({**row, "true_publish": true_t})
        for sub in subs:
            for key in sorted(messages):
                if sub.ordering:
                    sim.ordered(sub, messages[key])
                else:
                    for m in messages[key]:
                        sim.plain(sub, m)
    return history


def tile(history: History, copies: int) -> tuple[pa.Table, pa.Table]:
    """The history `copies` times over, keys renamed `<key>~<i>`: still legal, `copies` times the rows."""
    pubs, dels = history.publish_table(), history.delivery_table()

    def renamed(table: pa.Table, i: int) -> pa.Table:
        suffix = f"~{i}"
        key = pc.binary_join_element_wise(table["key"], pa.scalar(suffix), "")
        table = table.set_column(table.schema.get_field_index("key"), table.schema.field("key"), key)
        mid = pc.binary_join_element_wise(table["message_id"], pa.scalar(suffix), "")
        return table.set_column(table.schema.get_field_index("message_id"), table.schema.field("message_id"), mid)

    return (
        pa.concat_tables([renamed(pubs, i) for i in range(copies)]),
        pa.concat_tables([renamed(dels, i) for i in range(copies)]),
    )


# -- mutators ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Injection:
    kind: str  # the finding kind the checks must report
    subscription: str
    key: str | None
    seq: int | None
    form: str | None = None  # out_of_order form
    note: str = ""


def _sub(h: History, name: str) -> DeclaredSubscription:
    return next(s for s in h.subscriptions if s.name == name)


def _rows(h: History, sub: str, key=None, seq=None, kind="delivery") -> list[dict]:
    return [
        d
        for d in h.deliveries
        if d["subscription"] == sub
        and d["kind"] == kind
        and (key is None or d["key"] == key)
        and (seq is None or d["seq"] == seq)
    ]


def _messages(h: History, pred) -> list[tuple[str, str, int]]:
    """(subscription, key, seq) of delivered messages whose deliveries satisfy pred(sub, rows, dl_rows)."""
    out = []
    by_msg: dict[tuple, list] = {}
    for d in h.deliveries:
        by_msg.setdefault((d["subscription"], d["key"], d["seq"]), []).append(d)
    for (s, k, q), rows in sorted(by_msg.items()):
        dels = sorted((r for r in rows if r["kind"] == "delivery"), key=lambda r: r["receive_time_us"])
        dls = [r for r in rows if r["kind"] == "dead_letter"]
        if dels and pred(_sub(h, s), dels, dls):
            out.append((s, k, q))
    return out


def _key_order(h: History, sub: str, key: str) -> list[dict]:
    return sorted(_rows(h, sub, key), key=lambda r: (r["receive_time_us"], r["seq"]))


def _last_seq(h: History, sub: str, key: str) -> int:
    topic = _sub(h, sub).topic
    return max(p["seq"] for p in h.publishes if p["topic"] == topic and p["key"] == key and p["status"] == "ok")


def _first_seq(h: History, sub: str, key: str) -> int:
    topic = _sub(h, sub).topic
    return min(p["seq"] for p in h.publishes if p["topic"] == topic and p["key"] == key and p["status"] == "ok")


def _settled_at(h: History, sub: str, key: str, seq: int, without: dict | None = None) -> int | None:
    """When the model considers a message settled: first successful ack, or its dead-lettering."""
    rows = [d for d in _rows(h, sub, key, seq) if d is not without]
    times = [d["ack_time_us"] for d in rows if d["action"] in ("ack", "late_ack") and d["ack_result"] == "success"]
    dead = _rows(h, sub, key, seq, kind="dead_letter")
    if dead:
        ends = [d["ack_time_us"] if d["action"] in ("ack", "nack") and d["ack_result"] == "success" else d["receive_time_us"] + d["ack_deadline_s"] * S for d in rows]
        times.append(min(min(d["receive_time_us"] for d in dead), max(ends, default=dead[0]["receive_time_us"])))
    return min(times, default=None)


def _clone_delivery(row: dict, t: int, action: str, h: History) -> dict:
    new = dict(row)
    new.update(
        receive_time_us=t,
        action=action,
        ack_id=f"ack-mut-{len(h.deliveries)}",
        ack_result="success" if action in ("ack", "nack") else "none",
        ack_time_us=t + MS if action in ("ack", "nack") else None,
    )
    return new


def _pick(rng: random.Random, items: list):
    return rng.choice(items) if items else None


def _not_dead_lettered_last_if_ordered(h: History, subscription: str | None = None):
    """A place predicate (`_messages`): a message not dead-lettered (of `subscription` when given), the
    last seq of its key on an ordered subscription (nothing comes after it to reorder)."""
    def ok(sub, dels, dls):
        if dls or subscription not in (None, sub.name):
            return False
        return not sub.ordering or dels[0]["seq"] == _last_seq(h, sub.name, dels[0]["key"])

    return ok


def mutate_lost(h: History, rng: random.Random):
    place = _pick(rng, _messages(h, _not_dead_lettered_last_if_ordered(h)))
    if not place:
        return None
    s, k, q = place
    m = h.copy()
    m.deliveries = [d for d in m.deliveries if not (d["subscription"] == s and d["key"] == k and d["seq"] == q)]
    return m, Injection("lost", s, k, q, note="all deliveries removed")


def mutate_unexpected(h: History, rng: random.Random):
    s = _pick(rng, sorted({d["subscription"] for d in h.deliveries if d["kind"] == "delivery"}))
    if not s:
        return None
    base = _pick(rng, _rows(h, s))
    m = h.copy()
    row = _clone_delivery(base, base["receive_time_us"] + 7 * MS, "ack", m)
    if rng.random() < 0.5:
        row.update(key="never-published", seq=0, message_id="unexpected-1", delivery_attempt=1 if base["delivery_attempt"] else None)
        key, seq, note = "never-published", 0, "a message with a key this run never published"
    else:
        row.update(probe_run="some-other-run", message_id="unexpected-2")
        key, seq, note = base["key"], base["seq"], "a message of another run"
    m.deliveries.append(row)
    return m, Injection("unexpected", s, key, seq, note=note)


def mutate_duplicate_after_ack(h: History, rng: random.Random):
    def ok(sub, dels, dls):
        if not sub.exactly_once or dls or not any(d["action"] == "ack" for d in dels):
            return False
        return not sub.ordering or dels[0]["seq"] == _last_seq(h, sub.name, dels[0]["key"])

    place = _pick(rng, _messages(h, ok))
    if not place:
        return None
    s, k, q = place
    m = h.copy()
    last = max(d["receive_time_us"] for d in _rows(m, s, k))
    acked = next(d for d in _rows(m, s, k, q) if d["action"] == "ack")
    t = max(last, acked["ack_time_us"]) + CHECK_SKEW_US + S
    m.deliveries.append(_clone_delivery(acked, t, "ack", m))
    return m, Injection("duplicate_after_ack", s, k, q, note="redelivered after its successful ack")


def mutate_duplicate_while_outstanding(h: History, rng: random.Random):
    def ok(sub, dels, dls):
        if not sub.exactly_once or not any(d["action"] == "ack" for d in dels):
            return False
        if sub.ordering and dels[0]["seq"] != _first_seq(h, sub.name, dels[0]["key"]):
            return False
        return any(d["action"] in ("expire", "crash", "late_ack") for d in dels)

    place = _pick(rng, _messages(h, ok))
    if not place:
        return None
    s, k, q = place
    m = h.copy()
    d1 = next(d for d in sorted(_rows(m, s, k, q), key=lambda r: r["receive_time_us"]) if d["action"] in ("expire", "crash", "late_ack"))
    m.deliveries.append(_clone_delivery(d1, d1["receive_time_us"] + MS, "nack", m))
    return m, Injection("duplicate_while_outstanding", s, k, q, note="delivered again 1 ms after a delivery it did not settle")


def mutate_stale_ack_accepted(h: History, rng: random.Random):
    cands = [d for d in h.deliveries if d["kind"] == "delivery" and d["action"] in ("late_ack", "expire")]
    cands = [d for d in cands if _sub(h, d["subscription"]).exactly_once]
    if not cands:
        return None
    i = h.deliveries.index(rng.choice(cands))
    m = h.copy()
    d = m.deliveries[i]
    sub = _sub(m, d["subscription"])
    if d["action"] == "expire":
        d["ack_time_us"] = d["receive_time_us"] + sub.ack_deadline_s * S + S
    d.update(action="late_ack", ack_result="success")
    return m, Injection("stale_ack_accepted", d["subscription"], d["key"], d["seq"], note="a late ack accepted")


def _ordered_keys(h: History):
    return sorted({(d["subscription"], d["key"]) for d in h.deliveries if d["kind"] == "delivery" and _sub(h, d["subscription"]).ordering})


def mutate_out_of_order_skip(h: History, rng: random.Random):
    cands = []
    for s, k in _ordered_keys(h):
        order = _key_order(h, s, k)
        later = sorted({d["seq"] for d in order if d["seq"] != order[0]["seq"]})
        if later:
            cands.append((s, k, order[0], later))
    if not cands:
        return None
    s, k, first, later = rng.choice(cands)
    seq = rng.choice(later)
    m = h.copy()
    template = next(d for d in _rows(m, s, k, seq))
    # earlier than the key's first delivery by more than the skew, so its first seq is surely unsettled
    m.deliveries.append(_clone_delivery(template, first["receive_time_us"] - CHECK_SKEW_US - 100 * MS, "nack", m))
    return m, Injection("out_of_order", s, k, seq, form="skip", note="delivered before the key's first message")


def mutate_out_of_order_regression(h: History, rng: random.Random):
    cands = []
    for s, k in _ordered_keys(h):
        order = _key_order(h, s, k)
        for i, d in enumerate(order):
            batch = [x for x in order if x["receive_time_us"] == d["receive_time_us"] and x["subscriber_task"] == d["subscriber_task"]]
            if d is not batch[0] or len(batch) < 2 or d["action"] not in ("nack", "expire", "crash"):
                continue
            rest = order[order.index(batch[-1]) + 1 :]
            if not rest:
                continue
            resolved = max(
                x["ack_time_us"] or x["receive_time_us"] + x["ack_deadline_s"] * S for x in batch
            )
            settled = _settled_at(h, s, k, d["seq"])
            if settled is not None and settled <= resolved + MS + CHECK_SKEW_US + 100 * MS:
                continue  # the failed message was already settled (a replay): going back above it is legal
            if resolved + MS >= rest[0]["receive_time_us"]:
                continue  # the key moved on first (the failed message came again): a clone would follow that, a skip
            cands.append((s, k, batch[-1], resolved + MS))
    if not cands:
        return None
    s, k, last, t = rng.choice(cands)
    m = h.copy()
    m.deliveries.append(_clone_delivery(last, t, "nack", m))
    return m, Injection("out_of_order", s, k, last["seq"], form="regression", note="a message of a failed batch delivered again before the failed one")


def mutate_out_of_order_rewind_without_replay(h: History, rng: random.Random):
    cands = []
    for s, k in _ordered_keys(h):
        if _sub(h, s).exactly_once:
            continue
        order = _key_order(h, s, k)
        for p in range(1, len(order) - 2):
            a, b, c = order[p], order[p + 1], order[p + 2]
            high = max(x["seq"] for x in order[:p])
            if a["seq"] <= order[p - 1]["seq"] and b["seq"] == a["seq"] + 1 and c["seq"] == a["seq"] + 2 and b["seq"] <= high:
                # every seq below c settled well before c arrives: only the missing replay is wrong
                below = [_settled_at(h, s, k, q, without=b) for q in {x["seq"] for x in order if x["seq"] < c["seq"]}]
                if all(t is not None and t < c["receive_time_us"] + CHECK_SKEW_US - 100 * MS for t in below):
                    cands.append((s, k, b, c))
    if not cands:
        return None
    s, k, b, c = rng.choice(cands)
    m = h.copy()
    i = next(i for i, d in enumerate(m.deliveries) if d == b)
    del m.deliveries[i]
    return m, Injection("out_of_order", s, k, c["seq"], form="rewind_without_replay", note=f"the replay of seq {b['seq']} removed")


def _dead_lettered(h: History, rng: random.Random, need_quiet_tail: bool):
    def ok(sub, dels, dls):
        if not dls:
            return False
        if sub.ordering and need_quiet_tail:
            # no run may start after this message on its key, or its unsettled seq would show there
            order = _key_order(h, sub.name, dels[0]["key"])
            last = max(i for i, d in enumerate(order) if d["seq"] == dels[0]["seq"])
            return all(order[i + 1]["seq"] == order[i]["seq"] + 1 for i in range(last, len(order) - 1))
        return True

    return _pick(rng, _messages(h, ok))


def _dead_lettered_copy(h: History, rng: random.Random, need_quiet_tail: bool = False):
    """A copy of h, a dead-lettered message's place in it and its last delivery there (or None)."""
    place = _dead_lettered(h, rng, need_quiet_tail)
    if not place:
        return None
    s, k, q = place
    m = h.copy()
    return m, s, k, q, max(_rows(m, s, k, q), key=lambda r: r["receive_time_us"])


def mutate_dead_letter_missing(h: History, rng: random.Random):
    found = _dead_lettered_copy(h, rng, need_quiet_tail=True)
    if not found:
        return None
    m, s, k, q, _ = found
    m.deliveries = [d for d in m.deliveries if not (d["kind"] == "dead_letter" and d["subscription"] == s and d["key"] == k and d["seq"] == q)]
    return m, Injection("dead_letter_missing", s, k, q, note="the dead-letter row removed")


def mutate_dead_letter_after_ack(h: History, rng: random.Random):
    found = _dead_lettered_copy(h, rng)
    if not found:
        return None
    m, s, k, q, last = found
    last.update(action="ack", ack_result="success", ack_time_us=last["receive_time_us"] + 20 * MS)
    return m, Injection("dead_letter_after_ack", s, k, q, note="its last delivery acked")


def mutate_dead_letter_early(h: History, rng: random.Random):
    found = _dead_lettered_copy(h, rng)
    if not found:
        return None
    m, s, k, q, last = found
    m.deliveries.remove(last)
    for d in _rows(m, s, k, q, kind="dead_letter"):
        d["dl_source_delivery_count"] = len(_rows(m, s, k, q))
    return m, Injection("dead_letter_early", s, k, q, note="its last attempt removed")


def mutate_delivery_attempts_exceeded(h: History, rng: random.Random):
    found = _dead_lettered_copy(h, rng)
    if not found:
        return None
    m, s, k, q, last = found
    extra = _clone_delivery(last, (last["ack_time_us"] or last["receive_time_us"] + last["ack_deadline_s"] * S) + MS, "nack", m)
    extra["delivery_attempt"] = (last["delivery_attempt"] or 0) + 1
    m.deliveries.append(extra)
    return m, Injection("delivery_attempts_exceeded", s, k, q, note="one attempt more than declared")


def mutate_publish_duplicate(h: History, rng: random.Random, subscription: str | None = None):
    """A publish whose reply was lost and which the client retried: the same (key, seq) under a second
    message id, delivered right after the first id's first delivery and acked (docs/pubsub-facts.md: a new
    message; a publish-side duplicate, never a redelivery). On an ordered key, the key's last seq (its
    second id right after it, as the service orders a key's messages by publish)."""
    place = _pick(rng, _messages(h, _not_dead_lettered_last_if_ordered(h, subscription)))
    if not place:
        return None
    s, k, q = place
    m = h.copy()
    first = min(_rows(m, s, k, q), key=lambda r: r["receive_time_us"])
    retried = _clone_delivery(first, first["receive_time_us"] + 1, "ack", m)
    retried.update(message_id=f"{first['message_id']}/retried", delivery_attempt=1 if first["delivery_attempt"] else None)
    m.deliveries.append(retried)
    return m, Injection("publish_duplicate", s, k, q, note="delivered again under a second message id")


MUTATORS = {
    "lost": mutate_lost,
    "unexpected": mutate_unexpected,
    "duplicate_after_ack": mutate_duplicate_after_ack,
    "duplicate_while_outstanding": mutate_duplicate_while_outstanding,
    "stale_ack_accepted": mutate_stale_ack_accepted,
    "out_of_order/skip": mutate_out_of_order_skip,
    "out_of_order/regression": mutate_out_of_order_regression,
    "out_of_order/rewind_without_replay": mutate_out_of_order_rewind_without_replay,
    "dead_letter_missing": mutate_dead_letter_missing,
    "dead_letter_after_ack": mutate_dead_letter_after_ack,
    "dead_letter_early": mutate_dead_letter_early,
    "delivery_attempts_exceeded": mutate_delivery_attempts_exceeded,
    "publish_duplicate": mutate_publish_duplicate,  # last: the other mutators keep their seeds
}


def renamed(h: History, suffix: str) -> History:
    """The same history with every subscription and topic renamed (to batch many in one run)."""
    subs = {s.name: replace(s, name=f"{s.name}{suffix}", topic=f"{s.topic}{suffix}") for s in h.subscriptions}
    topics = {s.topic: subs[s.name].topic for s in h.subscriptions}
    out = h.copy()
    out.subscriptions = list(subs.values())
    for p in out.publishes:
        p["topic"] = topics[p["topic"]]
    for d in out.deliveries:
        d["subscription"] = subs[d["subscription"]].name
    return out


# The subscriptions the property tests generate histories for: every declared shape the checks judge.
SUBSCRIPTIONS = [
    DeclaredSubscription("plain", "t-plain"),
    DeclaredSubscription("ordered", "t-ordered", ordering=True),
    DeclaredSubscription("eod", "t-eod", exactly_once=True, ack_deadline_s=60),
    DeclaredSubscription("eod-ordered", "t-eod-ordered", ordering=True, exactly_once=True, ack_deadline_s=60),
    DeclaredSubscription("dl", "t-dl", ack_deadline_s=20, max_delivery_attempts=5, dead_letter_topic="t-dlq"),
    DeclaredSubscription("dl-ordered", "t-dl-ordered", ordering=True, max_delivery_attempts=5, dead_letter_topic="t-dlq"),
]
