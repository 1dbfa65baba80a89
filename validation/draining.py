"""The drain's steps of a probe run (`DrainSteps`, which `driver.ProbeDriver` is made of): wait while the target
makes progress, close the subscriptions that provably stopped, say why what is unsettled is so, then the healed
final read. They read the driver's fields (its config, twins, evidence directory, tally of the flushed evidence,
observations) and decide with `probe.drain` (what the evidence says) and `probe.drain_clock` (when to stop)."""

from __future__ import annotations

import json
import time

from pubsubguard.core import storage
from pubsubguard.core.errors import VerifyError

from . import run_setup
from .config import EXPIRE_MARGIN_S
from .probe.clients import CLIENT_STATE_PREFIX, FLUSH_S
from .probe.drain import EvidenceTally
from .probe.drain_clock import (
    DrainClock, FINAL_READ_QUIET_S, IN_FLIGHT_PAIRS, allowed_per_task, clock_sentence, final_read_bound_s,
    final_read_quiet_s,
)
from .probe.progress import progress_bars
from .warmup import WarmUp

# The drain stops waiting for a message this long after one ack deadline (+ retry backoff after a nack)
# since its last recorded event: the expire margin, an evidence flush and scheduling slack.
STUCK_GRACE_S = EXPIRE_MARGIN_S + FLUSH_S + 2.0
# A delivery received this long after the nack that gave a poison message its last attempt was already on
# its way, at least; longer when the subscription's messages took longer than that from publish to delivery just
# before the nack: a subscription whose latest delivery came no later has stopped delivering (`EvidenceTally.stalls`).
STALL_SLACK_S = 1.0
# While a stalled subscription is read by a StreamingPull the emulator serves every other one only every 10 s
# (conformance scenario ordered-dead-letter-spares-other-subscriptions): what the target owed another subscription
# from the stall until this long after the drain closed the stalled streams (+ the grace) was slowed by it.
SLOWED_PERIOD_S = 10.0
WARM_UP_AFTER_S = 3.0  # the checks are warmed up this long after publishing ended (first deliveries done)


class DrainSteps:
    """The drain of `ProbeDriver` (validation/driver.py), apart from starting and running its jobs."""

    def _late_acks_within_s(self) -> float:
        """How long after the last publish every late ack of the expire fault has been sent and flushed: a
        delivery is held only within one (fault) deadline of its publish (pubsubguard.validation.probe.clients), for that
        deadline + the expire margin. 0 without the expire fault."""
        if not self.faults.expire:
            return 0.0
        return 2 * run_setup.longest_hold_s(self.twin_specs, self.config.fault_deadline) + EXPIRE_MARGIN_S + FLUSH_S + 1.0

    def _planted_due(self) -> float:
        """The fault layer may still owe a planted effect until then (a lied ack's redelivery): monotonic time."""
        return self.nemesis.quiet_after if self.nemesis is not None else 0.0

    def _dead_lettering(self) -> set[str]:
        """The probed subscriptions with a dead-letter policy (their poison messages are nacked on every delivery)."""
        return {t.declared_name for t in self.twins + self.push_twins if t.dead_lettering}

    def _unsettled_drain(self, tally: EvidenceTally, ended: str, unsettled: dict[str, int]) -> dict:
        """How the drain ended, with its unsettled messages told apart: the poison ones of a dead-lettering
        subscription (only forwarding settles them) and the subscriptions that delivered nothing after a poison
        message's last attempt (`stalled`; `_stall_text` says each)."""
        dead_lettering = self._dead_lettering()
        limits = {name: self.estate.subscriptions[name].max_delivery_attempts for name in sorted(dead_lettering)}
        stalled = self._stalls(tally, limits)
        since = min((stall["since_us"] for stall in stalled.values()), default=None)
        # the target was slowed until one serving period after the last stalled subscription's streams were closed
        # (+ grace); a stall whose streams were never closed slowed it to the end. What it owed and the reading (it
        # ends now) could have seen after that, never delivered, the slowing does not explain
        closes = [self.closed_at_us.get(name) for name in stalled]
        slowed_until = None if not closes or None in closes else \
            max(closes) + int((SLOWED_PERIOD_S + STUCK_GRACE_S) * 1e6)
        # streams the fault layer reset (kill_stream, partition): the last reset per subscription
        # streams reset: by the fault layer (kill_stream, partition), or seen by the listeners to end other than
        # OK (the target or the client library reset them), the subscriptions whose streams the drain closed aside
        twin_of = self._declared_of_twin()
        resets: dict[str, int] = {}
        ends = self.stream_ends_before_heal
        if ends is None:
            ends = self.listeners.stream_ends() if self.listeners is not None else {}
        for path, at in ends.items():
            name = twin_of.get(path)
            if name is not None and name not in self.closed:
                resets[name] = max(resets.get(name, 0), at)
        # a reset stream of an unordered subscription may hold any of its messages; counted only when the drain found
        # them stuck (a drain cut at its ceiling left them still moving)
        unordered = frozenset(t.declared_name for t in self.twins if not t.ordering) \
            if ended != "ceiling" else frozenset()
        lost_replies: dict[str, dict[str, list[int]]] = {}  # Acknowledge replies the layer dropped, by message id
        for row in (self.nemesis.as_dict()["applied"] if self.nemesis is not None else ()):
            if row["kind"] in ("kill_stream", "partition") and row["rpc"] == "StreamingPull" and row["subscription"] \
                    and not row["detail"].startswith("NOT applied"):
                resets[row["subscription"]] = max(resets.get(row["subscription"], 0), row["time_us"])
            if row["kind"] == "lose_response" and row["rpc"] == "Acknowledge" and row["subscription"]:
                for message_id in row["message_ids"]:
                    lost_replies.setdefault(row["subscription"], {}).setdefault(message_id, []).append(row["entry"])
        return {"ended": ended, "unsettled": unsettled, "unsettled_poison": tally.unsettled_poison(dead_lettering),
                "stalled": stalled,
                "after_stall": tally.after_stall(since, set(stalled), slowed_until, time.time_ns() // 1000) if since else {},
                "after_stream_reset": tally.silent_keys(resets, unordered), "after_lost_reply": tally.after_lost_replies(lost_replies),
                # a drain cut at its ceiling left them still moving: only a stuck one says the target delivers them no more
                "after_backoff_stop": tally.after_backoff_stop(frozenset(
                    t.declared_name for t in self.twins + self.push_twins if not t.ordering)) if ended != "ceiling" else {}}

    @property
    def closed(self) -> set[str]:
        """The subscriptions whose streams the drain closed (`_close_stalled`)."""
        return set(self.closed_at_us)

    def _declared_of_twin(self) -> dict[str, str]:
        """A pulled twin's path -> the declared subscription it stands for."""
        return {t.path: t.declared_name for t in self.twins}

    def _stalls(self, tally: EvidenceTally, limits: dict[str, int]) -> dict[str, dict]:
        """`EvidenceTally.stalls` of the subscriptions in `limits`, with the run's slack and the target's failures."""
        return tally.stalls(limits, int(STALL_SLACK_S * 1e6), self._target_failures())

    def _target_failures(self) -> dict[str, list[int]]:
        """Probed subscription -> when each StreamingPull of its twins ended UNKNOWN, as the listeners saw (the
        target failed it), sorted; empty without listeners."""
        if self.listeners is None:
            return {}
        twin_of = self._declared_of_twin()
        out: dict[str, list[int]] = {}
        for path, times in self.listeners.target_failures().items():
            if path in twin_of:
                out.setdefault(twin_of[path], []).extend(times)
        return {name: sorted(times) for name, times in out.items()}

    @staticmethod
    def _stall_text(tally: EvidenceTally, drain: dict) -> list[str]:
        """One observation per stalled subscription, and one per other subscription with unsettled messages
        whose latest event came after the first stall."""
        start_us = min(tally.published_us.values(), default=0)

        def at(us: int) -> str:
            return f"+{(us - start_us) / 1e6:.1f}s"

        lines = [f"{name} stopped delivering at {at(stall['since_us'])} (its latest delivery: "
                 f"{at(stall['last_delivery_us'])}, what was on its way then arriving within "
                 f"{stall['on_way_us'] / 1e6:.1f} s, its messages' latest latency just before; the target failed its "
                 f"StreamingPulls {stall['target_failures']} times after), when {stall['key']} seq {stall['seq']} "
                 f"(poison) was nacked on "
                 f"delivery attempt {stall['attempt']} (max_delivery_attempts {stall['max_delivery_attempts']}): of its "
                 f"unsettled messages, {stall['unsettled']} are not poison"
                 for name, stall in sorted(drain["stalled"].items())]
        lines += [f"{name}: {late['messages']} unsettled messages ({late['poison']} poison) had their latest event, or "
                  f"the next delivery owed them, after {at(late['since_us'])}, when a subscription stopped delivering"
                  + (f", and the drain ended before the target, no longer slowed from {at(late['until_us'])} (one "
                     f"{SLOWED_PERIOD_S:g} s serving period + grace after the drain closed the stalled streams), could "
                     "deliver them" if late["until_us"] is not None else "")
                  + f"; {name} had {late['deliveries']} deliveries from then on"
                  + (f", the latest at {at(late['last_delivery_us'])}" if late["deliveries"] else "")
                  + (f"; {late['owed_later']} more were owed a delivery the drain waited for after that, when "
                     "nothing slowed the target any more, and never got it: the stall does not explain them"
                     if late["owed_later"] else "")
                  for name, late in sorted(drain["after_stall"].items())]
        lines += [f"{name}: nothing of {len(silent['keys'])} keys with unsettled messages ({', '.join(silent['keys'][:8])}"
                  f"{', ...' if len(silent['keys']) > 8 else ''}) was delivered after its streams were last reset "
                  f"({at(silent['reset_us'])}: by the fault layer, or a StreamingPull seen by the listeners to end other "
                  f"than OK): {silent['messages']} messages (not poison)"
                  for name, silent in sorted(drain["after_stream_reset"].items()) if not silent.get("unordered")]
        lines += [f"{name} (unordered): {silent['messages']} unsettled messages (not poison, on {len(silent['keys'])} "
                  f"keys) were stuck when the drain ended, and its streams had been reset (the last at "
                  f"{at(silent['reset_us'])}: by the fault layer, or a StreamingPull seen by the listeners to end other "
                  "than OK): a target that still dispatches to a reset stream holds them there"
                  for name, silent in sorted(drain["after_stream_reset"].items()) if silent.get("unordered")]
        return lines

    @staticmethod
    def _unsettled_text(tally: EvidenceTally, counts: dict[str, int]) -> str:
        """`orders-ordered 4 (ack: invalid_ack_id 3, expire: none 1), ...`"""
        parts = []
        for name, n in sorted(counts.items()):
            outcomes = ", ".join(f"{what} {k}" for what, k in tally.unsettled_outcomes(name).items())
            parts.append(f"{name} {n} ({outcomes})")
        return "; ".join(parts)

    def _drain(self, tally: EvidenceTally, deadline_us: dict, published_target: int, warm_up: WarmUp) -> None:
        """Drain until settled, provably stuck on every unsettled subscription, or the ceiling
        (`validation/probe/drain_clock.py`); then, unless settled, the healed final read."""
        # a derived ceiling leaves the stuck rule time to decide: a never-delivered message is stuck one declared
        # ack deadline (+ backoff + grace) after its publish, and its subscription one window after its progress
        backoff = {t.declared_name: t.retry_max_backoff_s or 0.0 for t in self.twins + self.push_twins}
        floor = max((deadline_us[name] / 1e6 + backoff.get(name, 0.0) + 2 * STUCK_GRACE_S for name in self.probed),
                    default=0.0)
        clock = DrainClock(self._windows_s(), self.drain_base_s, self.config.drain_timeout, floor_s=round(floor, 1))
        with progress_bars(not self.config.no_progress) as progress:
            pub_bar = progress.add_task("publishing", total=published_target)
            drain_bar = progress.add_task("draining (settled per subscription)", total=None)
            ended = self._until_ended(tally, clock, deadline_us, warm_up, progress, pub_bar, drain_bar)
            self._record_drain(tally, clock, ended, progress, drain_bar, deadline_us)

    def _until_ended(self, tally: EvidenceTally, clock: DrainClock, deadline_us: dict, warm_up: WarmUp, progress,
                     pub_bar, drain_bar) -> str:
        """Watch the evidence every 0.5 s while publishing (the flow of publishes) and then while draining, until
        the clock ends the drain: settled, stuck or ceiling (when not settled, `_end_text` says why)."""
        ticks = 0
        while True:
            time.sleep(0.5)
            tally.refresh()
            progress.update(pub_bar, completed=tally.publish_rows)
            expected = tally.expected()
            progress.update(drain_bar, completed=tally.done(), total=expected or None)
            if self.errors:
                raise VerifyError(f"publisher job failed: {str(self.errors[0]).splitlines()[0][:500]}")
            now = time.monotonic()
            ticks += 1
            if ticks % 4 == 0 and self._dead_lettering():
                self._close_stalled(tally, clock)
            if not self.publish_done.is_set():
                clock.observe(tally, now)
                overdue = tally.stuck(time.time_ns() // 1000, int(STUCK_GRACE_S * 1e6), deadline_us)
                self._flow(allowed_per_task(tally, clock, now, self.pairs_per_message, self.publish_partitions,
                                            overdue=overdue))
                continue
            if clock.started is None:
                self.drain_started_us = time.time_ns() // 1000
                clock.begin(tally, now, min(tally.published_us.values(), default=None), time.time_ns() // 1000)
                late_acks_done = now + self._late_acks_within_s()
                warm_up_at = now + WARM_UP_AFTER_S
            clock.observe(tally, now)
            if warm_up.thread is None and now >= warm_up_at and warm_up.possible() and self._free_slot():
                warm_up.start()
            planted_due = now >= self._planted_due()  # a planted effect is always waited for
            if tally.done() >= expected:
                # every message settled; deliveries the expire fault holds may still await their late ack
                if now >= late_acks_done and planted_due:
                    return "settled"
                continue
            unsettled = tally.unsettled()
            stuck = tally.stuck(time.time_ns() // 1000, int(STUCK_GRACE_S * 1e6), deadline_us)
            # nothing reads a subscription whose streams the drain closed (it stalled): what it has not
            # settled yet stays so, stuck from the close, not one ack deadline after its last event
            closed = {name: unsettled[name] for name in sorted(self.closed) if name in unsettled}
            stuck.update(closed)
            ended = clock.end(now, unsettled, stuck, frozenset(closed)) if planted_due else None
            if ended is not None:  # stuck or ceiling
                self.observations.append(self._end_text(tally, clock, ended, now, expected, unsettled, stuck, closed))
                return ended

    def _end_text(self, tally: EvidenceTally, clock: DrainClock, ended: str, now: float, expected: int,
                  unsettled: dict[str, int], stuck: dict[str, int], closed: dict[str, int]) -> str:
        """The observation of a drain that ended unsettled: `stuck` (why: no event for a window, or the ceiling
        passed with the subscriptions stopped) or `ceiling` (which subscriptions still made progress); each with
        its unsettled messages per subscription."""
        if ended == "stuck":
            on_closed = (f" (on {', '.join(closed)}: since the drain closed its streams)" if closed else "")
            why = ("provably stuck -- no delivery, ack or dead-letter for one ack deadline (+ retry backoff "
                   "after a nack; a poison message nacked on a dead-lettering subscription: the backoff alone) "
                   f"+ {STUCK_GRACE_S:.0f}s since their last recorded event{on_closed}, and no "
                   "progress on their subscription for its window" if stuck == unsettled else
                   f"their subscriptions stopped -- no message delivered for the first time and none settled "
                   f"for its window -- when the ceiling ({clock.ceiling:.0f}s) passed")
            return (f"drain ended: {expected - tally.done()} of {expected} published messages not settled (acked "
                    f"with success or dead-lettered) and {why} -- per subscription (and how their latest delivery "
                    f"ended): {self._unsettled_text(tally, unsettled)}")
        moving = sorted(name for name in unsettled if not clock.stopped(name, now))
        return (f"drain ceiling ({clock.ceiling:.0f}s) passed with {expected - tally.done()} of {expected} "
                f"published messages not settled (acked with success or dead-lettered); still making progress: "
                f"{', '.join(moving) or 'none'}; per subscription (and how their latest delivery ended): "
                f"{self._unsettled_text(tally, unsettled)}; those never delivered are counted unsettled, not "
                "lost (no final read proved them lost)")

    def _record_drain(self, tally: EvidenceTally, clock: DrainClock, ended: str, progress, drain_bar,
                      deadline_us: dict) -> None:
        """`self.drain`: how the drain ended and what it left unsettled, after the healed final read when it ended
        stuck (what no final read proved lost is unsettled, never lost); its sentences among the observations."""
        self.drain = {"clock": clock.record(time.monotonic(), ended, tally)}
        if ended == "stuck":
            final = self._final_read(tally, progress, drain_bar, deadline_us)
            proven = final["ended"] in ("quiet", "settled", "closed")
        else:
            final, proven = None, False
        unsettled = tally.unsettled()
        self.drain.update(self._unsettled_drain(tally, ended, unsettled))
        self.drain["clock"]["publish_flow"] = {
            "in_flight_pairs": IN_FLIGHT_PAIRS, "rate": self.config.rate,
            "waited_s": round(sum(r.get("flow_waited_s", 0.0) for r in self.publish_summary), 1),
            "let_go": sum(1 for r in self.publish_summary if r.get("flow_let_go"))}
        self.drain["final_read"] = final
        # a final read through a stream the client library had paused, or on which it held messages it never
        # handed to the probe, proves nothing of that subscription
        held = self._held_in_client(unsettled) if final else {}
        self.drain["held_in_client"] = held
        # subscriptions whose never-delivered messages no final read proved lost: unsettled, never `lost`
        self.drain["unproven"] = sorted(held) if proven else sorted(unsettled)
        self.drain["cut"] = {name: tally.never_delivered(name) for name in self.drain["unproven"]
                             if name not in held and tally.never_delivered(name)}
        self.observations.append(clock_sentence(self.drain))
        self.observations.extend(self._stall_text(tally, self.drain))

    def _held_in_client(self, unsettled: dict[str, int]) -> dict[str, dict]:
        """The unsettled subscriptions whose stream the final read kept (ordered ones) and on which the client
        library, when the final read ended (the task's last state, written each second of it), held messages it
        never handed to the probe or had paused the stream by its flow control (`<evidence>/client-state-<task>.json`,
        per task): their final read proves nothing; said in one observation each."""
        held: dict[str, dict] = {}
        for file in storage.names(self.evidence_dir, CLIENT_STATE_PREFIX):
            task = file[len(CLIENT_STATE_PREFIX):].removesuffix(".json")
            try:
                states = json.loads(storage.read_text(storage.join(self.evidence_dir, file)) or "{}")
            except (OSError, ValueError):
                continue
            for name, state in states.items():
                if name not in unsettled or state.get("reopened") or not (
                        state["leased"] or state["on_hold"] or state["paused"]):
                    continue
                entry = held.setdefault(name, {"leased": 0, "on_hold": 0, "paused_tasks": [], "tasks": []})
                entry["leased"] += state["leased"]
                entry["on_hold"] += state["on_hold"]
                entry["tasks"].append(task)
                if state["paused"]:
                    entry["paused_tasks"].append(task)
        for name, entry in sorted(held.items()):
            paused = (f"; its flow control had paused the stream of {', '.join(entry['paused_tasks'])}"
                      if entry["paused_tasks"] else "")
            self.observations.append(
                f"final read of {name}: when it ended, the probe's client library held {entry['leased']:,} leased "
                f"messages ({entry['on_hold']:,} behind an earlier message of their ordering key) it never handed to "
                f"the probe{paused}, and an ordered stream is kept for the final read: of its {unsettled[name]:,} "
                "unsettled messages, those no earlier cause takes are form held_in_client, none `lost`")
        return held

    def _windows_s(self) -> dict[str, float]:
        """Per probed subscription: how long it may make no progress before it counts as stopped (its longest
        hold + the retry backoff after a nack + STUCK_GRACE_S)."""
        out = {}
        for spec in self.twin_specs:
            if spec.is_dead_letter_drain:
                continue
            hold = run_setup.held_deadline_s(spec, self.config.fault_deadline) + EXPIRE_MARGIN_S
            window = hold + (spec.retry_max_backoff_s or 0.0) + STUCK_GRACE_S
            out[spec.declared_name] = max(out.get(spec.declared_name, 0.0), window)
        return out

    def _close_stalled(self, tally: EvidenceTally, clock: DrainClock | None) -> set[str]:
        """The ordered dead-lettering subscriptions that stopped delivering after a poison message's last attempt
        (`EvidenceTally.stalls`) and on which the target did nothing for their window (`DrainClock.target_quiet`:
        the probe's own late acks of deliveries held before the stall do not keep a stream open; None: stalled is
        enough): their streams are closed (`<evidence>/_close`, read by the subscriber tasks), said once each. While
        such a subscription is read by a StreamingPull, the emulator serves every other subscription only every
        10 s (conformance scenario ordered-dead-letter-spares-other-subscriptions); what it stopped delivering it
        does not deliver later (ordered-dead-letter-keeps-delivering), so nothing of it is lost by closing. An
        unordered subscription is never closed: no scenario says what it would spare, and its final read reads
        it on fresh streams."""
        limits = {name: self.estate.subscriptions[name].max_delivery_attempts for name in sorted(self._dead_lettering())
                  if self.estate.subscriptions[name].ordering}
        now_us = time.time_ns() // 1000
        stalled = {name for name in self._stalls(tally, limits)
                   if clock is None or clock.target_quiet(name, tally.last_activity_us(name), now_us)}
        new = stalled - self.closed
        if new:
            self.closed_at_us.update({name: now_us for name in new})
            storage.write_text(self.close_file, json.dumps(sorted(t.path for t in self.twins
                                                                  if t.declared_name in self.closed)))
            start_us = min(tally.published_us.values(), default=0)
            self.observations.append(
                f"closed the streams of {', '.join(sorted(new))} at +{(now_us - start_us) / 1e6:.1f}s: "
                "it delivered nothing after a poison message's last delivery attempt, and nothing at all (no delivery, "
                "nothing dead-lettered) for its window; "
                "while a stalled subscription is read by a StreamingPull the emulator serves every other one only "
                "every 10 s (conformance scenario ordered-dead-letter-spares-other-subscriptions)")
        return stalled

    def _flow(self, allowed: int) -> None:
        """The publisher tasks' allowance (`drain.allowed_per_task`), for them to read (`probe.Flow`)."""
        try:
            storage.write_text(self.flow_file, f"{allowed}\n")
        except OSError as err:  # the publishers keep the last allowance they read; said once
            if f"flow: {err}" not in self.observations:
                self.observations.append(f"flow: could not write {self.flow_file}: {err}")

    def _final_read(self, tally: EvidenceTally, progress, drain_bar, deadline_us: dict) -> dict:
        """The healed final read: no fault from here on (the fault layer heals, the subscriber tasks and the push
        receiver settle every delivery); read for at least one ack deadline (+ margin and grace) of every
        subscription with never-delivered messages -- any lease the target still holds on them runs out and they
        must come back -- and until the target delivers nothing for FINAL_READ_QUIET_S (at most
        `final_read_bound_s`), or everything settled."""
        # every subscription that stopped delivering after a poison message's last attempt has its streams closed
        # for the final read (while read by a StreamingPull, a stalled one slows every other on the emulator)
        stalled = self._close_stalled(tally, None)
        # the streams the final read itself cancels and opens anew are no reset of the target's
        self.stream_ends_before_heal = self.listeners.stream_ends() if self.listeners is not None else {}
        reading = [name for name in tally.unsettled() if name not in stalled]
        if self.nemesis is not None:
            self.nemesis.heal()
        self.heal_file.set()
        if self.push is not None:
            self.push.healed = True
        started, started_us = time.monotonic(), time.time_ns() // 1000
        rows_before, settled_before = tally.delivery_rows, tally.done()
        # at least until every unsettled message's next delivery came due (+ grace) -- a rejected ack or a nack
        # leaves the message with the target until its deadline (+ backoff) -- and one ack deadline (+ margin and
        # grace) of every subscription with never-delivered messages: any lease still held on them runs out
        latest_due = tally.latest_due_us(reading, deadline_us)
        lease_s = round(max([(latest_due - started_us) / 1e6 + STUCK_GRACE_S if latest_due else 0.0] + [
            deadline_us[name] / 1e6 + EXPIRE_MARGIN_S + STUCK_GRACE_S for name in reading if tally.never_delivered(name)]
            + [0.0]), 1)
        # nothing to read when every unsettled subscription stalled and has its streams closed: the healed tasks
        # only settle what the target still sends (redeliveries of settled messages) until it is quiet for
        # FINAL_READ_QUIET_S before they stop
        quiet_s = final_read_quiet_s(tally.delivery_gap_us(since_us=self.drain_started_us)) if reading \
            else FINAL_READ_QUIET_S
        bound = final_read_bound_s(self._windows_s(), lease_s) + quiet_s
        last_rows, quiet_since, ended = tally.delivery_rows, started, "bound"
        while time.monotonic() - started < bound:
            time.sleep(0.5)
            tally.refresh()
            progress.update(drain_bar, completed=tally.done())
            if tally.done() >= tally.expected():
                ended = "settled"
                break
            if tally.delivery_rows != last_rows:
                last_rows, quiet_since = tally.delivery_rows, time.monotonic()
            elif time.monotonic() - quiet_since >= quiet_s and time.monotonic() - started >= lease_s:
                ended = "quiet" if reading else "closed"
                break
        return {"started_us": started_us, "ended_us": time.time_ns() // 1000, "ended": ended,
                "seconds": round(time.monotonic() - started, 1), "lease_s": lease_s, "bound_s": bound,
                "quiet_s": quiet_s, "closed": sorted(stalled), "deliveries": tally.delivery_rows - rows_before,
                "settled": tally.done() - settled_before}
