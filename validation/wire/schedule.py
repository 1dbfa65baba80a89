"""The fault layer's schedule: the file `verify --nemesis FILE` / `run --nemesis FILE` names, read and
validated (docs/schemas/nemesis.schema.json); a bad one is one line naming the entry and field (exit 2).

    seed: any text            # optional: the draws of `rate` selectors (default: the run id)
    faults:
      - {kind: drop_delivery, subscription: orders-plain, key: key-002, seq: 3}
      - {kind: ack_lie, subscription: orders-eod, rate: 0.05}
      - {kind: kill_stream, subscription: orders-ordered, after_s: 5, every_s: 10}
      - {kind: lose_response, rpc: acknowledge, subscription: orders-eod, rate: 0.2}
      - {kind: lose_response, rpc: publish, topic: orders, rate: 0.1}    # publish-side duplicates
      - {kind: delay, rpc: modify_ack_deadline, subscription: orders-eod, ms: 300, after_s: 2, for_s: 5}
      - {kind: delay, rpc: streaming_pull, subscription: orders-plain, ms: 200, rate: 1}  # a slow target
      - {kind: partition, subscription: orders-eod, task: sub-1, after_s: 4, for_s: 15}
      - {kind: netem, delay_ms: 80, loss: 0.05, after_s: 3, for_s: 10}   # packets (root only: validation/wire/netem.py)

What each kind does is `pubsubguard.validation.wire.nemesis` (the layer; the planted kinds in
`pubsubguard.validation.wire.planted`) and `pubsubguard.validation.wire.netem` (packet faults).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from pubsubguard.core.errors import UserError

PLANTED = ("drop_delivery", "duplicate_after_ack", "ack_lie", "swap", "strip_dead_letter_attributes")
NETWORK = ("kill_stream", "lose_response", "delay", "partition", "netem")
KINDS = PLANTED + NETWORK
RPCS = {"publish": "Publish", "acknowledge": "Acknowledge", "modify_ack_deadline": "ModifyAckDeadline",
        "streaming_pull": "StreamingPull"}  # streaming_pull: delay only (each response of the stream: a slow target)


def unit(*parts: object) -> float:
    """A deterministic draw in [0, 1) from the parts."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class ScheduleError(UserError):
    pass


# ---------------------------------------------------------------------------------- the schedule
@dataclass(frozen=True)
class Entry:
    index: int
    kind: str
    subscription: str | None = None
    topic: str | None = None
    key: str | None = None
    seq: int | None = None
    rate: float | None = None
    after_s: float | None = None
    every_s: float | None = None
    for_s: float | None = None
    rpc: str | None = None
    ms: float | None = None
    task: str | None = None
    delay_ms: float | None = None  # netem: added to every packet (each way) of the layer's upstream link
    loss: float | None = None  # netem: share of packets dropped (0-1)
    reorder: float | None = None  # netem: share of packets sent at once, ahead of the delayed ones (0-1)

    @property
    def planted(self) -> bool:
        return self.kind in PLANTED

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.rpc}" if self.rpc else self.kind

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    def active(self, t: float) -> bool:
        """Is a time window of this entry open at `t` s since the layer started (no time selector: always)."""
        if self.after_s is None:
            return True
        if t < self.after_s:
            return False
        if self.every_s is None:
            return self.for_s is None or t < self.after_s + self.for_s
        return (t - self.after_s) % self.every_s < (self.for_s if self.for_s is not None else self.every_s)

    def selects(self, seed: str, key: str | None, seq: int | None) -> bool:
        """Does the entry's message selector take the message (key, seq) (no message selector: yes)."""
        if self.key is not None:
            return key == self.key and seq == self.seq
        if self.rate is not None:
            return key is not None and unit(seed, self.index, self.kind, key, seq) < self.rate
        return True


@dataclass(frozen=True)
class Schedule:
    entries: tuple[Entry, ...] = ()
    seed: str | None = None
    source: str | None = None

    def as_dict(self) -> dict:
        return {"source": self.source, "seed": self.seed, "faults": [e.as_dict() for e in self.entries]}

    def check_names(self, subscriptions: set[str], topics: set[str]) -> None:
        """Every subscription and topic an entry names is one the run probes (one line, exit 2)."""
        for e in self.entries:
            if e.subscription is not None and e.subscription not in subscriptions:
                raise ScheduleError(f"--nemesis {self.source}: faults[{e.index}].subscription {e.subscription!r}: not a "
                                    f"subscription this run probes (expected one of {', '.join(sorted(subscriptions))})")
            if e.topic is not None and e.topic not in topics:
                raise ScheduleError(f"--nemesis {self.source}: faults[{e.index}].topic {e.topic!r}: not a topic this "
                                    f"run publishes to (expected one of {', '.join(sorted(topics))})")


_FIELDS = {"kind", "subscription", "topic", "key", "seq", "rate", "after_s", "every_s", "for_s", "rpc", "ms", "task",
           "delay_ms", "loss", "reorder"}
_NETEM_ONLY = ("delay_ms", "loss", "reorder")
_MESSAGE_KINDS = PLANTED  # selectors: key + seq or rate
_TIME_KINDS = ("kill_stream", "partition")


def load_schedule(path: str | Path) -> Schedule:
    """Read and validate a schedule file (YAML or JSON). A bad one: one line naming the entry and field."""
    import yaml

    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ScheduleError(f"--nemesis {source}: cannot read it: {err.strerror}") from None
    try:
        data = json.loads(text) if source.endswith(".json") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as err:
        raise ScheduleError(f"--nemesis {source}: not YAML or JSON: {' '.join(str(err).split())[:200]}") from None
    return parse_schedule(data, source)


def parse_schedule(data, source: str = "<schedule>") -> Schedule:
    def bad(where: str, why: str) -> ScheduleError:
        return ScheduleError(f"--nemesis {source}: {where}: {why}")

    if not isinstance(data, dict):
        raise bad("the document", "expected a mapping with `faults`, a list of entries")
    extra = sorted(set(data) - {"faults", "seed"})
    if extra:
        raise bad(extra[0], "unknown field (expected `faults` and optionally `seed`)")
    faults = data.get("faults")
    if not isinstance(faults, list):
        raise bad("faults", "expected a list of entries")
    seed = data.get("seed")
    if seed is not None and not isinstance(seed, (str, int)):
        raise bad("seed", "expected text or a number")
    entries = tuple(_entry(i, item, bad) for i, item in enumerate(faults))
    return Schedule(entries=entries, seed=None if seed is None else str(seed), source=source)


def _entry(i: int, item, bad) -> Entry:
    """One entry of the schedule, its fields read and the combinations its kind takes checked."""
    where = f"faults[{i}]"
    entry = _fields(i, item, where, bad)
    if entry.kind == "netem":
        return _netem(entry, item, where, bad)
    for name in _NETEM_ONLY:
        if item.get(name) is not None:
            raise bad(f"{where}.{name}", f"only netem takes {name}")
    selectors, timed = _selectors(entry, where, bad)
    if entry.kind in ("lose_response", "delay"):
        _call_fault(entry, selectors, where, bad)
    else:
        for name in ("rpc", "ms"):
            if item.get(name) is not None:
                raise bad(f"{where}.{name}", f"only lose_response and delay take {name}")
        if entry.subscription is None:
            raise bad(f"{where}.subscription", f"{entry.kind} names a subscription")
        if entry.topic is not None:
            raise bad(f"{where}.topic", f"{entry.kind} names a subscription, not a topic")
    if entry.task is not None and entry.kind != "partition":
        raise bad(f"{where}.task", "only partition takes task (one subscriber task, e.g. sub-1)")
    _selected_as_its_kind_is(entry, selectors, timed, where, bad)
    return entry


def _fields(i: int, item, where: str, bad) -> Entry:
    """The entry's fields, each of its type and range (which combinations are allowed comes after)."""
    if not isinstance(item, dict):
        raise bad(where, "expected a mapping with kind, subscription or topic, and a selector")
    unknown = sorted(set(item) - _FIELDS)
    if unknown:
        raise bad(f"{where}.{unknown[0]}", f"unknown field (expected {', '.join(sorted(_FIELDS))})")
    kind = item.get("kind")
    if kind not in KINDS:
        raise bad(f"{where}.kind", f"{kind!r}: expected one of {', '.join(KINDS)}")

    def number(name: str, low: float = 0.0, high: float | None = None, whole: bool = False):
        value = item.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and value != int(value)):
            raise bad(f"{where}.{name}", f"{value!r}: expected a {'whole ' if whole else ''}number")
        if value < low or (high is not None and value > high):
            raise bad(f"{where}.{name}", f"{value!r}: expected {low:g} to {high:g}" if high is not None
                      else f"{value!r}: expected at least {low:g}")
        return int(value) if whole else float(value)

    def text(name: str):
        value = item.get(name)
        if value is not None and (not isinstance(value, str) or not value):
            raise bad(f"{where}.{name}", f"{value!r}: expected a name")
        return value

    return Entry(index=i, kind=kind, subscription=text("subscription"), topic=text("topic"), key=text("key"),
                 seq=number("seq", whole=True), rate=number("rate", 0.0, 1.0), after_s=number("after_s"),
                 every_s=number("every_s"), for_s=number("for_s"), rpc=text("rpc"), ms=number("ms"), task=text("task"),
                 delay_ms=number("delay_ms"), loss=number("loss", 0.0, 1.0), reorder=number("reorder", 0.0, 1.0))


def _selectors(entry: Entry, where: str, bad) -> tuple[list[str], bool]:
    """Which of the selectors (key + seq, rate, the time window) the entry gives, at most one, and whether
    it is timed."""
    if entry.every_s is not None and entry.every_s <= 0:
        raise bad(f"{where}.every_s", "expected a positive number of seconds")
    if (entry.key is None) != (entry.seq is None):
        raise bad(f"{where}.{'seq' if entry.seq is None else 'key'}", "key and seq select one message together")
    message = entry.key is not None
    timed = any(v is not None for v in (entry.after_s, entry.every_s, entry.for_s))
    selectors = [name for name, on in (("key", message), ("rate", entry.rate is not None), ("after_s", timed)) if on]
    if len(selectors) > 1:
        raise bad(f"{where}.{selectors[1]}", f"one selector per entry: key + seq, rate, or after_s/every_s/for_s "
                                             f"(also given: {selectors[0]})")
    if timed and entry.after_s is None:
        raise bad(f"{where}.after_s", "every_s and for_s need after_s (when the fault starts)")
    return selectors, timed


def _call_fault(entry: Entry, selectors: list[str], where: str, bad) -> None:
    """A lost reply or a delay: the RPC it acts on and what that RPC names (the topic or the subscription)."""
    if entry.rpc not in RPCS:
        raise bad(f"{where}.rpc", f"{entry.rpc!r}: expected one of {', '.join(RPCS)}")
    if entry.rpc == "publish":
        if entry.topic is None:
            raise bad(f"{where}.topic", "a publish fault names the topic")
        if entry.subscription is not None:
            raise bad(f"{where}.subscription", "a publish fault names the topic, not a subscription")
    elif entry.subscription is None:
        raise bad(f"{where}.subscription", f"a {entry.rpc} fault names the subscription")
    if entry.rpc == "streaming_pull" and entry.kind != "delay":
        raise bad(f"{where}.rpc", "streaming_pull: only delay takes it (a stream has no one reply to lose)")
    if entry.kind == "delay" and entry.ms is None:
        raise bad(f"{where}.ms", "a delay needs ms (milliseconds)")
    if not selectors:
        raise bad(f"{where}.rate", "a selector is needed: key + seq, rate, or after_s/every_s/for_s")


def _selected_as_its_kind_is(entry: Entry, selectors: list[str], timed: bool, where: str, bad) -> None:
    """A message fault selects messages (key + seq, or a rate); a timed fault a window (a partition's
    length, a stream kill's instants)."""
    kind = entry.kind
    if kind in _MESSAGE_KINDS:
        allowed = ("key",) if kind == "swap" else ("key", "rate")
        if not selectors or selectors[0] not in allowed:
            raise bad(f"{where}.{selectors[0] if selectors else 'key'}",
                      f"{kind} selects messages: {' or '.join('key + seq' if a == 'key' else a for a in allowed)}")
    if kind in _TIME_KINDS:
        if not timed:
            raise bad(f"{where}.after_s", f"{kind} is timed: after_s (and every_s, for_s)")
        if kind == "partition" and entry.for_s is None:
            raise bad(f"{where}.for_s", "a partition lasts for_s seconds")
        if kind == "kill_stream" and entry.for_s is not None:
            raise bad(f"{where}.for_s", "a stream kill is an instant: after_s and every_s only")


def _netem(entry: Entry, item: dict, where: str, bad) -> Entry:
    """A packet fault: a time window (after_s, for_s, optionally every_s) on the whole upstream link (every
    subscription and topic of the run: it names none), with delay_ms and/or loss (reorder needs delay_ms)."""
    for name in ("subscription", "topic", "key", "seq", "rate", "rpc", "ms", "task"):
        if item.get(name) is not None:
            raise bad(f"{where}.{name}", "netem shapes every packet between the layer and the target: it takes "
                                         "after_s, for_s (every_s), delay_ms, loss, reorder")
    if entry.after_s is None:
        raise bad(f"{where}.after_s", "netem is timed: after_s and for_s (and every_s)")
    if entry.for_s is None:
        raise bad(f"{where}.for_s", "a netem window lasts for_s seconds")
    if entry.delay_ms is None and not entry.loss:
        raise bad(f"{where}.delay_ms", "netem needs delay_ms or loss (or both)")
    if entry.reorder is not None and entry.delay_ms is None:
        raise bad(f"{where}.reorder", "reorder needs delay_ms (the packets it sends ahead of the delayed ones)")
    return entry
