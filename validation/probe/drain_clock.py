"""When the probe stops waiting: decided from what the target does, never from a clock alone.

After the last publish the driver drains: it reads the flushed evidence (`drain.EvidenceTally`) every
half second and asks a `DrainClock` whether to go on. The drain ends

While publishing, the publisher tasks are held to `IN_FLIGHT_PAIRS` message-subscription pairs published and
not settled (`allowed_per_task`, written to `<evidence>/_flow` every half second): the target is probed at the
rate it settles, not flooded with a backlog its subscribers' leases cannot cover (`--rate` paces on top).

- `settled`: every published message is acked with success or dead-lettered on every probed subscription
  (and the late acks of held deliveries, and any planted effect the fault layer still owes, came due);
- `stuck`: every unsettled message is provably stuck -- nothing recorded of it for one ack deadline (+ retry
  backoff after a nack) + grace (`EvidenceTally.stuck`) -- *and* its subscription made no progress (no
  message delivered for the first time, none settled) for its window: its longest hold + retry backoff +
  grace. A subscription still working through a backlog is never called stuck, however late its messages.
  Past the ceiling, no progress on any unsettled subscription for its window is enough: the final read
  decides, not the clock;
- `ceiling`: the target is still making progress when the ceiling passes. The ceiling is derived from the
  run: the faults' own timing (`probe_setup.default_drain_timeout`) + `CEILING_FACTOR` x the messages not
  settled when publishing ended / the settle rate measured until then, and later, while the drain goes on, never
  earlier than `CEILING_FACTOR` x what is left / the drain's own settle rate (a tail that waits on ack deadlines
  settles far slower than the rate while publishing); `--drain-timeout` replaces it.

A planted effect (the redelivery after an `ack_lie`, one ack deadline of its subscription later) is always
waited for: no end comes before the fault layer's `quiet_after`.

A subscription whose streams the drain closed (it stalled after a poison message's last attempt: nothing
reads it any more) counts its unsettled messages stuck from the close.

Then, unless everything settled, the final read (Jepsen's healed final read): the fault layer applies
nothing more, the subscriber tasks inject no fault, settle every delivery and read on fresh streams
(an ordered subscription keeps its stream), and
the drain goes on until the target delivers nothing for `FINAL_READ_QUIET_S` (at most `final_read_bound_s`). A message the target
accepted and never delivered after that is proven `lost`. When every unsettled subscription has its streams
closed there is nothing to read: the healed probe only settles what the target still sends until it is quiet for
`FINAL_READ_QUIET_S` (`closed`) before the tasks stop. A subscription whose final read was cut (the
ceiling, or the bound while it still delivered) is `unproven`: its never-delivered messages are counted as
unsettled (completeness `inconclusive`), never `lost` (`kernel.completeness`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

CEILING_FACTOR = 3.0  # the ceiling allows this many times the time the measured rate needs for the rest
CEILING_MAX_S = 3600.0  # and never more than this (a target that settles nothing still ends as `stuck`)
MIN_RATE = 1.0  # messages settled per second assumed at least, when the run measured fewer
IN_FLIGHT_PAIRS = 2000  # message-subscription pairs published and not settled, at most, while publishing
MEASURE_S = 10.0  # the drain's own settle rate counts once measured over this long
FINAL_READ_QUIET_S = 5.0  # the final read ends once the target delivered nothing for this long (healed)


def ceiling_s(base_s: float, remaining: int, settled_per_s: float) -> float:
    """The drain's ceiling after the last publish: the faults' own timing (`base_s`) + CEILING_FACTOR x the
    time the measured settle rate needs for the `remaining` messages, at most CEILING_MAX_S."""
    need = remaining / max(settled_per_s, MIN_RATE)
    return round(min(CEILING_MAX_S, base_s + CEILING_FACTOR * need), 1)


def final_read_bound_s(windows_s: dict[str, float], lease_s: float) -> float:
    """How long the final read may take at most: its shortest length (`lease_s`) + the longest subscription
    window (its longest hold + backoff + grace: one redelivery of whatever the target still holds) + the quiet
    time."""
    return lease_s + max(windows_s.values(), default=0.0) + FINAL_READ_QUIET_S


def final_read_quiet_s(gap_us: int) -> float:
    """How long the final read waits without a delivery before it ends: FINAL_READ_QUIET_S, or 1.5 x the longest
    gap between two deliveries seen during the drain (a target that serves in bursts -- the emulator, every 10 s
    while a stalled subscription is read -- must not look quiet between two of them), at most 30 s."""
    return round(min(30.0, max(FINAL_READ_QUIET_S, 1.5 * gap_us / 1e6)), 1)


def allowed_per_task(tally, clock: "DrainClock", now: float, pairs_per_message: float, tasks: int,
                     bound: int = IN_FLIGHT_PAIRS, overdue: dict[str, int] | None = None) -> int:
    """The adaptive publisher's allowance: how many messages each publisher task may have published, so that
    the pairs published and not settled on the subscriptions still making progress stay within `bound`. Neither
    a subscription that stopped (no progress for its window) nor the messages already `overdue` (per
    subscription: past their next delivery's due time + grace, `EvidenceTally.stuck`) hold anybody back: those
    are the drain's business, not a backlog to wait for -- a message a client never hands over would otherwise
    shrink the allowance for good."""
    overdue = overdue or {}
    in_flight = sum(len(tally.unsettled_of(name)) - overdue.get(name, 0) for name in clock.windows_s
                    if not clock.stopped(name, now))
    return int((tally.expected() - in_flight + bound) / pairs_per_message / max(tasks, 1))


@dataclass
class DrainClock:
    """Per-subscription progress during the drain and the ceiling. `windows_s`: subscription -> how long it
    may make no progress before it counts as stopped; `base_s`: the faults' own timing; `override_s`:
    `--drain-timeout` (None: the ceiling is derived)."""

    windows_s: dict[str, float]
    base_s: float
    override_s: float | None = None
    floor_s: float = 0.0  # a derived ceiling is never shorter: what the stuck rule needs to decide
    started: float | None = None  # monotonic, when publishing ended
    ceiling: float | None = None  # seconds after `started`
    rates: dict = field(default_factory=dict)
    extended: dict | None = None  # when the drain's own rate last moved the ceiling later, and that rate
    progress: dict[str, int] = field(default_factory=dict)
    progressed_at: dict[str, float] = field(default_factory=dict)  # monotonic, its last progress

    def begin(self, tally, now: float, first_publish_us: int | None, now_us: int) -> None:
        """Publishing ended: measure the rates so far and fix the ceiling."""
        self.started = now
        elapsed_s = max((now_us - first_publish_us) / 1e6, 1e-3) if first_publish_us else None
        settled = tally.done()
        remaining = tally.expected() - settled
        messages = sum(len(v) for v in tally.published.values())
        self.rates = {
            "messages": messages, "published": tally.expected(), "settled_at_publish_end": settled, "unsettled_at_publish_end": remaining,
            "publish_s": round(elapsed_s, 2) if elapsed_s else None,
            "publish_per_s": round(messages / elapsed_s, 1) if elapsed_s else None,
            "settled_per_s": round(settled / elapsed_s, 1) if elapsed_s else None,
        }
        if self.override_s is not None:
            self.ceiling = self.override_s
        else:
            self.ceiling = max(self.floor_s, ceiling_s(self.base_s, remaining, self.rates["settled_per_s"] or 0.0))
        self.observe(tally, now)

    def observe(self, tally, now: float) -> None:
        for name in self.windows_s:
            count = tally.progress_of(name)
            if count != self.progress.get(name):
                self.progress[name] = count
                self.progressed_at[name] = now
        if self.started is not None and self.override_s is None:
            self._extend(tally, now)

    def _extend(self, tally, now: float) -> None:
        """A derived ceiling follows the rate the drain itself measures: never earlier than CEILING_FACTOR x the
        time that rate needs for what is left (a tail that waits on ack deadlines settles far slower than the
        rate while publishing), at most CEILING_MAX_S."""
        drained = now - self.started
        settled = tally.done() - self.rates.get("settled_at_publish_end", 0)
        if drained < MEASURE_S or settled <= 0:
            return
        need = round(min(CEILING_MAX_S, drained + CEILING_FACTOR * (tally.expected() - tally.done()) * drained / settled), 1)
        if need > self.ceiling:
            self.ceiling, self.extended = need, {"at_s": round(drained, 1), "drain_settled_per_s": round(settled / drained, 1)}

    def stopped(self, name: str, now: float) -> bool:
        """No message delivered for the first time and none settled on `name` for its window."""
        return now - self.progressed_at.get(name, self.started or now) > self.windows_s[name]

    def target_quiet(self, name: str, last_activity_us: int, now_us: int) -> bool:
        """The target did nothing on `name` for its window: no delivery received and nothing dead-lettered
        (`EvidenceTally.last_activity_us`, by the rows' receive times). Unlike `stopped`, the late ack of a delivery
        the expire fault held moves it not: that is the probe's act, its row written one hold after the delivery. A
        delivery received within the window before `now_us` has its row written by then (a held one within its
        hold + the flush, shorter than the window)."""
        return now_us - last_activity_us > self.windows_s[name] * 1e6

    def past_ceiling(self, now: float) -> bool:
        return self.started is not None and now - self.started > self.ceiling

    def end(self, now: float, unsettled: dict[str, int], stuck: dict[str, int],
            closed: frozenset[str] = frozenset()) -> str | None:
        """How the drain ends now, with messages `unsettled` and `stuck` (per subscription), or None: it goes on.
        `stuck` when every unsettled subscription stopped and each message is stuck -- or, past the ceiling, when
        they stopped at all (a message redelivered and nacked over and over is never stuck message by message: the
        final read decides, not the clock); `ceiling` when the ceiling passed while one still makes progress. A
        subscription whose streams the drain `closed` has stopped: nothing reads it any more (its messages are stuck
        from the close)."""
        stopped = all(name in closed or self.stopped(name, now) for name in unsettled)
        if stopped and (stuck == unsettled or self.past_ceiling(now)):
            return "stuck"
        return "ceiling" if self.past_ceiling(now) else None

    def record(self, now: float, ended: str, tally) -> dict:
        """What run.json says of the clock: the ceiling and how it was made, the rates, the windows."""
        drained_s = round(now - self.started, 1) if self.started is not None else None
        settled_after = tally.done() - self.rates.get("settled_at_publish_end", 0)
        return {
            "ceiling_s": self.ceiling, "ceiling_from": "--drain-timeout" if self.override_s is not None else "rates",
            "extended": self.extended,
            "base_s": self.base_s, "floor_s": self.floor_s, "drained_s": drained_s, "windows_s": dict(self.windows_s),
            "rates": {**self.rates, "drain_settled_per_s": round(settled_after / drained_s, 1) if drained_s else None},
            "ended_by": ended,
        }


def clock_sentence(drain: dict) -> str:
    """One line: how the drain ended and with which rates (the run's observations)."""
    clock = drain.get("clock") or {}
    rates = clock.get("rates") or {}
    ceiling = clock.get("ceiling_s")
    how = ("the --drain-timeout" if clock.get("ceiling_from") == "--drain-timeout" else
           f"{clock.get('base_s', 0):.0f}s for the faults + {CEILING_FACTOR:g} x {rates.get('unsettled_at_publish_end', 0):,} "
           f"unsettled at the last publish / {rates.get('settled_per_s') or 0:,.1f} settled per second, at least "
           f"{clock.get('floor_s', 0):.0f}s: the longest ack deadline + backoff + grace")
    if clock.get("extended"):
        how += (f", extended at +{clock['extended']['at_s']:.0f}s to 3 x what was left / the drain's own "
                f"{clock['extended']['drain_settled_per_s']:,.1f} settled per second")
    final = drain.get("final_read")
    tail = ""
    if final and final["ended"] == "closed":
        tail = (f"; nothing for a final read to read: every unsettled subscription ({', '.join(final['closed'])}) "
                f"stalled and has its streams closed; the healed probe settled what still came until the target was "
                f"quiet for {final['quiet_s']:.0f}s ({final['seconds']:.0f}s: {final['deliveries']:,} deliveries)")
    elif final:
        tail = (f"; final read (faults off) {final['ended']} after {final['seconds']:.0f}s: "
                f"{final['deliveries']:,} deliveries, {final['settled']:,} messages settled")
    return (f"drain {drain['ended']} after {clock.get('drained_s') or 0:.0f}s (ceiling {ceiling or 0:.0f}s = {how}); "
            f"published {rates.get('messages', 0):,} messages ({rates.get('published', 0):,} message-subscription pairs) at "
            f"{rates.get('publish_per_s') or 0:,.0f}/s over {rates.get('publish_s') or 0:.0f}s, settled {rates.get('settled_per_s') or 0:,.0f}/s until then and "
            f"{rates.get('drain_settled_per_s') or 0:,.0f}/s during the drain{tail}")

