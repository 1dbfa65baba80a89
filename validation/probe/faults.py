"""Fault injection for the probe: the `--faults` grammar and the per-delivery decision.

Grammar: a comma-separated list of `name=value`, each name at most once:

    nack=F      nack a fraction F (0..1) of deliveries
    expire=F    hold a fraction F of deliveries without ack past their deadline (released from the
                client's lease management at once, so the lease is not extended and the message neither
                blocks its ordering key nor counts against flow control; the deadline set to the probe's
                fault deadline by ModifyAckDeadline, `--fault-deadline`), then ack with the now stale
                ack id (`late_ack`; exactly-once must reject it). Only a delivery received within one
                fault deadline of the publish can be held, so a message expires at most once: its
                redelivery comes later than that and is not held again (no chain of deadlines)
    poison=F    mark a fraction F of published messages poison (at least one per topic when F > 0):
                subscribers on dead-lettering subscriptions nack them every time, so they must reach
                the dead-letter topic after the declared attempts
    crash=N     N subscriber tasks die (the Python worker process exits) mid-run holding unacked messages
                (each given the fault deadline first)
    misroute=1  publishers ignore their topic's declared locational endpoint and use the global one (a
                misconfigured client): `endpoint_pinning` must be violated on every ordered topic

e.g. `nack=0.1,expire=0.05,poison=0.01,crash=1`. The empty string means no faults.

Decisions are deterministic hashes of (run id, subscription, message id, attempt), so a run is
reproducible and every subscriber task agrees on which messages are poison.
"""

from __future__ import annotations

import time

from dataclasses import asdict, dataclass

from pubsubguard.core.errors import UserError

from ..wire.schedule import unit  # the one seeded draw, the schedule's and the client faults'

GRAMMAR = ("comma-separated name=value with nack=F, expire=F, poison=F (fractions 0..1), crash=N (whole number) "
           "and misroute=1")
_FRACTIONS = ("nack", "expire", "poison")


class FaultSpecError(UserError):
    pass


@dataclass(frozen=True)
class Faults:
    nack: float = 0.0
    expire: float = 0.0
    poison: float = 0.0
    crash: int = 0
    misroute: int = 0

    def as_dict(self) -> dict:
        return asdict(self)

    def spec(self) -> str:
        return ",".join(f"{k}={v}" for k, v in asdict(self).items() if v)


def parse_faults(spec: str | None) -> Faults:
    if spec is None or not spec.strip():
        return Faults()
    values: dict = {}
    for item in spec.split(","):
        item = item.strip()
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not name or not raw:
            raise FaultSpecError(f"--faults: {item!r} is not name=value (expected {GRAMMAR})")
        if name in values:
            raise FaultSpecError(f"--faults: {name!r} given twice (expected {GRAMMAR})")
        if name in _FRACTIONS:
            try:
                value = float(raw)
            except ValueError:
                raise FaultSpecError(f"--faults: {name}={raw!r}: expected a fraction from 0 to 1") from None
            if not 0.0 <= value <= 1.0:
                raise FaultSpecError(f"--faults: {name}={raw}: expected a fraction from 0 to 1")
        elif name == "crash":
            if not raw.isdigit():
                raise FaultSpecError(f"--faults: crash={raw!r}: expected a whole number of subscriber tasks")
            value = int(raw)
        elif name == "misroute":
            if raw not in ("0", "1"):
                raise FaultSpecError(f"--faults: misroute={raw!r}: expected 0 or 1")
            value = int(raw)
        else:
            raise FaultSpecError(f"--faults: unknown fault {name!r} (expected {GRAMMAR})")
        values[name] = value
    faults = Faults(**values)
    if faults.nack + faults.expire > 1.0:
        raise FaultSpecError(f"--faults: nack + expire = {faults.nack + faults.expire} exceeds 1")
    return faults


def poison_set(run_id: str, topic: str, keys: list[str], messages_per_key: int, fraction: float) -> set[tuple[str, int]]:
    """The (key, seq) of `topic` published as poison: the ceil-ish `fraction` with the lowest draws, at least one."""
    if fraction <= 0 or not keys or messages_per_key <= 0:
        return set()
    ranked = sorted(((unit(run_id, "poison", topic, k, s), k, s) for k in keys for s in range(messages_per_key)))
    count = max(1, round(fraction * len(ranked)))
    return {(k, s) for _, k, s in ranked[:count]}


def delivery_action(faults: Faults, run_id: str, subscription: str, message_id: str, attempt_token: object,
                    may_expire: bool = True) -> str:
    """'nack', 'expire' or 'ack' for one delivery of a non-poison message.

    `may_expire` False (a delivery later than one ack deadline after the publish, e.g. the redelivery
    of an expired message) turns an 'expire' draw into 'ack'."""
    draw = unit(run_id, "delivery", subscription, message_id, attempt_token)
    if draw < faults.nack:
        return "nack"
    if draw < faults.nack + faults.expire:
        return "expire" if may_expire else "ack"
    return "ack"


class DeliveryCounts:
    """How many times this task was handed each message (a twin's path and the message id), for the fault draw,
    which hashes the count so a redelivery draws afresh. Kept for two generations of `span_s`: a watch runs for
    days, one entry a message would grow without end; a message handed over again later than that counts from 1
    again, long past the one deadline within which a fault may hold it."""

    def __init__(self, span_s: float = 3600.0):
        self.span_s = span_s
        self.current: dict[tuple, int] = {}
        self.previous: dict[tuple, int] = {}
        self.since = time.monotonic()

    def count(self, token: tuple) -> int:
        """One more delivery of `token`: its count so far, this one included."""
        now = time.monotonic()
        if now - self.since >= self.span_s:
            self.previous, self.current, self.since = self.current, {}, now
        count = (self.current.get(token) or self.previous.pop(token, 0)) + 1
        self.current[token] = count
        return count

    def __len__(self) -> int:
        return len(self.current) + len(self.previous)
