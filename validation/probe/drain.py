"""The drain's decisions, from the evidence the probe flushed so far (`EvidenceTally`): what is published and
settled, which messages are provably stuck (no event for their hold), which subscriptions stalled, which keys
went silent after a stream reset, what the target's backoff timer still owed. When to stop waiting is
`drain_clock`; the bars that show the tally are `progress`."""

from __future__ import annotations

from pathlib import Path

from pubsubguard.core import storage

# The deliveries whose latency says how long a message the target had sent was still on its way (`stalls`):
# those first delivered this long before the nack at most.
LATENCY_WINDOW_US = 10_000_000
# A subscription whose StreamingPulls the target failed this many times after a poison message's last nack and
# after its latest delivery stopped delivering (`stalls`): more than its streams (2 at the dev stack) failing once.
TARGET_FAILURES = 3
# After a message's nack or expiry, the delivery that follows at this attempt or later is one the target schedules
# after the retry policy's backoff (this emulator sends a first attempt's redelivery at once): `after_backoff_stop`.
BACKOFF_ATTEMPT = 3
# How long after the latest redelivery owed to a message a redelivery at BACKOFF_ATTEMPT or later still counts as
# come before it (the emulator's retry timer runs once a second)
BACKOFF_GRACE_US = 2_000_000


class EvidenceTally:
    """Reads the flushed part files incrementally: what is published and what is settled per subscription."""

    def __init__(self, directory: Path | str, topic_of: dict[str, str], run_id: str, backoff_s: dict[str, float] | None = None,
                 dead_lettering: frozenset[str] = frozenset()):
        """topic_of: probed subscription -> its declared topic; backoff_s: subscription -> the longest
        redelivery backoff after a nack its retry policy allows (0 without one); dead_lettering: the probed
        subscriptions with a dead-letter policy (the probe nacks their poison messages at once, on every delivery)."""
        self.directory = directory
        self.run_id = run_id
        self.topic_of = dict(topic_of)
        self.backoff_us = {name: int((backoff_s or {}).get(name, 0) * 1e6) for name in topic_of}
        self.seen: set[str] = set()
        self.published: dict[str, set] = {}
        self.published_us: dict[tuple, int] = {}  # (topic, key, seq) -> when publish was called
        self.poison: set[tuple] = set()  # (topic, key, seq) published flagged poison
        self.publish_rows = 0
        self.delivery_rows = 0
        self.settled: dict[str, set] = {name: set() for name in topic_of}
        self.dead_lettering = frozenset(dead_lettering) & set(topic_of)
        # (subscription, key, seq) -> until when its last recorded event may still have a sequel: one ack
        # deadline after it (a redelivery, or a held delivery's row), plus the retry backoff after a nack;
        # the nacks the target answered with success are kept apart (`nacked_us`): see `_due`
        self.due_us: dict[tuple, int] = {}
        # (subscription, key, seq) -> (its latest nack answered with success, that delivery's ack deadline in us)
        self.nacked_us: dict[tuple, tuple[int, int]] = {}
        # (subscription, key, seq) -> (receive time, action, ack result, delivery_attempt or 0) of its latest delivery
        self.last: dict[tuple, tuple] = {}
        self.receive_us: dict[str, list[int]] = {}  # subscription -> when each of its deliveries was received
        # subscription -> the latest receive time of any of its rows, a delivery or a dead-lettered message: the
        # target's own latest act there (a late ack of an earlier delivery is the probe's, not the target's)
        self.activity_us: dict[str, int] = {}
        self.key_last_us: dict[tuple, int] = {}  # (subscription, key) -> its latest delivery there
        # subscription -> [(nack time, key, seq, delivery_attempt)] of every nacked delivery with its attempt
        self.nacks: dict[str, list[tuple]] = {}
        self.first_deliveries: dict[str, int] = {name: 0 for name in topic_of}  # messages delivered at least once
        self.deliveries: dict[str, int] = {name: 0 for name in topic_of}  # delivery rows
        self.ids: dict[tuple, set] = {}  # (subscription, key, seq) -> the message ids it was delivered under
        # subscription -> [(receive time, its latency from the publish call)] of each message's first delivery
        self.first_latency: dict[str, list[tuple[int, int]]] = {}
        # (subscription, key, seq) -> how many of its deliveries are recorded (a target without a dead-letter policy
        # may send no delivery_attempt: `after_backoff_stop`)
        self.delivered_times: dict[tuple, int] = {}
        # subscription -> when it last delivered a message at BACKOFF_ATTEMPT or later (`after_backoff_stop`)
        self.backoff_redelivery_us: dict[str, int] = {}

    def refresh(self) -> None:
        for kind in ("publishes", "deliveries"):
            for name in storage.names(storage.join(self.directory, kind), "part-"):
                path = storage.join(self.directory, kind, name)
                if path in self.seen or not name.endswith(".parquet"):
                    continue
                self.seen.add(path)
                rows = storage.read_parquet(path).to_pylist()
                if kind == "publishes":
                    self.publish_rows += len(rows)
                    for row in rows:
                        if row["status"] == "ok":
                            self.published.setdefault(row["topic"], set()).add((row["key"], row["seq"]))
                            self.published_us[(row["topic"], row["key"], row["seq"])] = row["publish_time_us"]
                            if row["poison"]:
                                self.poison.add((row["topic"], row["key"], row["seq"]))
                    continue
                self.delivery_rows += len(rows)
                for row in rows:
                    if row["probe_run"] != self.run_id or row["subscription"] not in self.settled:
                        continue
                    self.activity_us[row["subscription"]] = max(self.activity_us.get(row["subscription"], 0),
                                                                row["receive_time_us"])
                    if row["kind"] == "dead_letter" or (
                        row["action"] in ("ack", "late_ack") and row["ack_result"] == "success"
                    ):
                        self.settled[row["subscription"]].add((row["key"], row["seq"]))
                    if row["kind"] == "delivery":
                        message = (row["subscription"], row["key"], row["seq"])
                        # a later delivery may be held up to one deadline before its row is written (expire)
                        last = max(row["receive_time_us"], row["ack_time_us"] or 0)
                        deadline = row["ack_deadline_s"] * 1_000_000
                        if row["action"] == "nack" and row["ack_result"] == "success":
                            nacked = self.nacked_us.get(message, (0, 0))
                            self.nacked_us[message] = (max(nacked[0], last), max(nacked[1], deadline))
                        else:
                            due = last + deadline
                            if row["action"] == "nack":  # not applied: the message stays leased until its deadline
                                due += self.backoff_us[row["subscription"]]
                            self.due_us[message] = max(self.due_us.get(message, 0), due)
                        event = (row["receive_time_us"], row["action"], row["ack_result"], row["delivery_attempt"] or 0)
                        self.deliveries[row["subscription"]] += 1
                        self.ids.setdefault(message, set()).add(row["message_id"])
                        if message not in self.last:
                            self.first_deliveries[row["subscription"]] += 1
                            # from the publish call, else (its row not flushed yet) from the target's publish time
                            published = self.published_us.get((self.topic_of[row["subscription"]], row["key"], row["seq"]),
                                                              row["publish_time_us"])
                            if published is not None:
                                self.first_latency.setdefault(row["subscription"], []).append(
                                    (row["receive_time_us"], row["receive_time_us"] - published))
                        self.last[message] = max(self.last.get(message, event), event)
                        self.delivered_times[message] = self.delivered_times.get(message, 0) + 1
                        if (row["delivery_attempt"] or 0) >= BACKOFF_ATTEMPT:
                            self.backoff_redelivery_us[row["subscription"]] = max(
                                self.backoff_redelivery_us.get(row["subscription"], 0), row["receive_time_us"])
                        self.receive_us.setdefault(row["subscription"], []).append(row["receive_time_us"])
                        by_key = (row["subscription"], row["key"])
                        self.key_last_us[by_key] = max(self.key_last_us.get(by_key, 0), row["receive_time_us"])
                        if row["action"] == "nack" and row["delivery_attempt"]:
                            self.nacks.setdefault(row["subscription"], []).append(
                                (row["ack_time_us"] or row["receive_time_us"], row["key"], row["seq"],
                                 row["delivery_attempt"]))

    def delivery_gap_us(self, since_us: int | None = None) -> int:
        """The longest time between two deliveries (any subscription) received at or after `since_us`."""
        times = sorted(t for receives in self.receive_us.values() for t in receives if since_us is None or t >= since_us)
        return max((b - a for a, b in zip(times, times[1:])), default=0)

    def progress_of(self, name: str) -> int:
        """What a subscription has done so far that only a working target does: messages delivered for the
        first time + messages settled (redeliveries of the same messages are no progress)."""
        return self.first_deliveries[name] + len(self.settled[name])

    def last_activity_us(self, name: str) -> int:
        """When the target last delivered anything on a probed subscription, or dead-lettered one of its messages
        (0: nothing yet): the rows' receive times, whenever their rows were written (a held delivery's row comes
        with its late ack, one hold after it was received)."""
        return self.activity_us.get(name, 0)

    def never_delivered(self, name: str) -> int:
        """Unsettled messages of a subscription with no delivery recorded at all."""
        return sum(1 for key, seq in self.unsettled_of(name) if (name, key, seq) not in self.last)

    def unsettled_of(self, name: str) -> set[tuple]:
        """The (key, seq) of a probed subscription's published messages not settled yet."""
        return self.published.get(self.topic_of[name], set()) - self.settled[name]

    def expected(self) -> int:
        return sum(len(self.published.get(topic, ())) for topic in self.topic_of.values())

    def unsettled(self) -> dict[str, int]:
        """Published messages not settled yet, per probed subscription (only those with any)."""
        out = {}
        for name, topic in self.topic_of.items():
            published = self.published.get(topic, set())
            missing = len(published - self.settled[name])
            if missing:
                out[name] = missing
        return out

    def unsettled_poison(self, dead_lettering: set[str]) -> dict[str, int]:
        """Unsettled poison messages per dead-lettering subscription (only those with any): the probe nacks
        them on every delivery there, so only the target forwarding them to the dead-letter topic settles them."""
        out = {}
        for name in sorted(dead_lettering & set(self.topic_of)):
            topic = self.topic_of[name]
            count = sum(1 for key, seq in self.unsettled_of(name)
                        if (topic, key, seq) in self.poison)
            if count:
                out[name] = count
        return out

    def stalls(self, max_delivery_attempts: dict[str, int], slack_us: int,
               target_failures: dict[str, list[int]] | None = None) -> dict[str, dict]:
        """Dead-lettering subscriptions (`max_delivery_attempts`: subscription -> its declared one) that stopped
        delivering after a poison message's delivery number max_delivery_attempts was nacked, and have unsettled
        messages (the emulator's ordered dead-lettering subscriptions do: conformance scenario
        `ordered-dead-letter-keeps-delivering`). Stopped, by either sign:
        - nothing delivered after the nack but what was on its way then: received at most `on_way_us` after it,
          the longest time from publish to first delivery of the subscription's messages first delivered in the
          LATENCY_WINDOW_US before it (a message the target sent before it took the nack spent no longer in the
          client than that; `latency_before_us`), at least `slack_us`;
        - the target's own: it failed the subscription's StreamingPulls (`target_failures`: subscription -> when
          each ended UNKNOWN) TARGET_FAILURES times after both the nack and the subscription's latest delivery
          (the emulator fails every stream of a stalled subscription, again and again, docs/emulator.md).
        Per subscription: the nack (`since_us`, `key`, `seq`, `attempt`), `last_delivery_us`, `on_way_us`,
        `target_failures` (its streams' failures after the nack), and `unsettled`: its unsettled messages other
        than poison ones (those are `unsettled_poison`'s)."""
        out = {}
        for name, limit in sorted(max_delivery_attempts.items()):
            if name not in self.topic_of:
                continue
            topic = self.topic_of[name]
            last = max(self.receive_us.get(name, ()), default=0)
            failures = (target_failures or {}).get(name, ())
            at_max = sorted(nack for nack in self.nacks.get(name, ())
                            if nack[3] >= limit and (topic, nack[1], nack[2]) in self.poison)

            on_way = {nack: max(slack_us, self.latency_before_us(name, nack[0])) for nack in at_max}
            since = next((nack for nack in at_max if last <= nack[0] + on_way[nack]
                          or sum(1 for t in failures if t > max(nack[0], last)) >= TARGET_FAILURES), None)
            unsettled = self.unsettled_of(name)
            if since is None or not unsettled:
                continue
            out[name] = {"since_us": since[0], "key": since[1], "seq": since[2], "attempt": since[3],
                         "max_delivery_attempts": limit, "last_delivery_us": last, "on_way_us": on_way[since],
                         "target_failures": sum(1 for t in failures if t > since[0]),
                         "unsettled": sum(1 for key, seq in unsettled if (topic, key, seq) not in self.poison)}
        return out

    def latency_before_us(self, name: str, at_us: int) -> int:
        """The longest publish-to-first-delivery latency of a subscription's messages first delivered in the
        LATENCY_WINDOW_US up to `at_us` (0 without any)."""
        return max((latency for received, latency in self.first_latency.get(name, ())
                    if at_us - LATENCY_WINDOW_US <= received <= at_us), default=0)

    def after_stall(self, since_us: int, stalled: set[str], until_us: int | None = None,
                    ended_us: int | None = None) -> dict[str, dict]:
        """Per probed subscription other than the `stalled` ones (only those with any of either): its unsettled
        messages whose latest recorded event (delivery, or publish when never delivered) came at or after
        `since_us`, when a subscription stalled (`stalls`), or, delivered, whose next delivery the target owed
        then or later (`_due`: a nacked message's redelivery, a held one's after its deadline), and which the
        reading, ended at `ended_us`, could not have seen once the stall no longer slowed the target (`until_us`;
        None: it slowed it to the end): counted (`messages`), the poison ones among them (`poison`), its deliveries
        from then on (`deliveries`) and the latest of them (`last_delivery_us`, None without), with the bound
        (`until_us`). The slowing delays what the target owes; a message owed before the reading ended with the
        target no longer slowed, and never delivered, is no consequence of it: not counted, only said
        (`owed_later`)."""
        out = {}
        for name, topic in self.topic_of.items():
            if name in stalled:
                continue
            owed = [(key, seq, self._owed_us(name, key, seq) or self.published_us[(topic, key, seq)])
                    for key, seq in self.unsettled_of(name)]
            after = [(key, seq, at) for key, seq, at in owed if at >= since_us]
            late = [(key, seq) for key, seq, at in after
                    if until_us is None or ended_us is None or ended_us < max(at, until_us)]
            later = len(after) - len(late)
            if late or later:
                times = [t for t in self.receive_us.get(name, ()) if t >= since_us]
                out[name] = {"since_us": since_us, "until_us": until_us, "messages": len(late),
                             "owed_later": later,
                             "poison": sum(1 for key, seq in late if (topic, key, seq) in self.poison),
                             "deliveries": len(times), "last_delivery_us": max(times, default=None)}
        return out

    def silent_keys(self, last_reset_us: dict[str, int], unordered: frozenset[str] = frozenset()) -> dict[str, dict]:
        """Per subscription whose StreamingPull streams were reset (`last_reset_us`: subscription -> the last
        reset), only those with any: its keys with unsettled messages that it delivered nothing of after that
        reset (`keys`), and those messages other than poison ones (`messages`). On an `unordered` subscription
        a reset stream holds messages, not keys (the emulator still dispatches to it: conformance scenario
        stream-reset-keeps-delivering), so every key with unsettled messages counts, and all of those messages
        (not poison); the caller names a subscription unordered only once its drain found them stuck."""
        out = {}
        for name, reset_us in sorted(last_reset_us.items()):
            topic = self.topic_of.get(name)
            if topic is None:
                continue
            unsettled = [(key, seq) for key, seq in self.unsettled_of(name)
                         if (topic, key, seq) not in self.poison]
            keys = sorted({key for key, _ in unsettled
                           if name in unordered or self.key_last_us.get((name, key), 0) < reset_us})
            if keys:
                out[name] = {"reset_us": reset_us, "keys": keys,
                             "messages": sum(1 for key, _ in unsettled if key in keys),
                             **({"unordered": True} if name in unordered else {})}
        return out

    def after_backoff_stop(self, unordered: frozenset[str]) -> dict[str, dict]:
        """Per `unordered` subscription with a retry policy (only those with any): its unsettled messages whose latest
        delivery was a redelivery (delivery_attempt 2 or more), which the target delivers again, or forwards to a
        dead-letter topic, only after the retry policy's backoff -- this emulator's timer for that stops for good at
        an ack id no longer outstanding (scheduled twice, or acked meanwhile), and the subscription then delivers
        such a message no more (conformance scenarios redelivery-after-repeated-expiry, redelivery-after-late-ack,
        dead-letter-after-late-ack; docs/emulator.md). Counted only while no delivery at BACKOFF_ATTEMPT or later came
        after the redelivery owed it (`_owed_us`, + BACKOFF_GRACE_US): one that did says the target's backoff
        redelivery still ran, and the message is left to the other forms (`timer_ran_after`, counted). `messages`,
        the `poison` ones among them and their (key, seq) (`poison_messages`: a dead_letter_missing finding of one is
        this form), and `owed_us`: the earliest redelivery owed to them."""
        out = {}
        for name in sorted(self.topic_of):
            if not self.backoff_us.get(name) or name not in unordered:
                continue
            later = self.backoff_redelivery_us.get(name, 0)
            hit, ran, owed = [], 0, []
            for key, seq in sorted(self.unsettled_of(name)):
                latest = self.last.get((name, key, seq))
                if latest is None or max(latest[3], self.delivered_times[(name, key, seq)]) < 2:
                    continue
                due = self._owed_us(name, key, seq) or latest[0]
                if later > due + BACKOFF_GRACE_US:
                    ran += 1
                    continue
                hit.append((key, seq))
                owed.append(due)
            if hit or ran:
                topic = self.topic_of[name]
                poison = [[key, seq] for key, seq in hit if (topic, key, seq) in self.poison]
                out[name] = {"messages": len(hit), "poison": len(poison), "poison_messages": poison,
                             "owed_us": min(owed, default=None), "timer_ran_after": ran}
        return out

    def after_lost_replies(self, lost: dict[str, dict[str, list[int]]]) -> dict[str, dict]:
        """Per subscription (only those with any): its unsettled messages delivered under a message id whose
        Acknowledge reply the fault layer dropped (`lost`: subscription -> message id -> the schedule entries
        that dropped it) -- the target applied that ack or not, the client never learned which, so the probe
        recorded no success: a consequence of the run's own fault (`messages`, and the `entries`)."""
        out = {}
        for name, by_id in sorted(lost.items()):
            if name not in self.topic_of:
                continue
            hit = [(key, seq) for key, seq in self.unsettled_of(name) if self.ids.get((name, key, seq), set()) & set(by_id)]
            if hit:
                entries = sorted({e for key, seq in hit for i in self.ids[(name, key, seq)] for e in by_id.get(i, ())})
                out[name] = {"messages": len(hit), "entries": entries}
        return out

    def stuck(self, now_us: int, grace_us: int, deadline_us: dict[str, int]) -> dict[str, int]:
        """Unsettled messages the target has stopped acting on, per subscription (only those with any):
        `grace_us` has passed since one ack deadline (and, after a nack, the retry backoff) after their last
        recorded event -- or, never delivered, after their publish (`deadline_us`: per subscription) --
        with no new delivery and no settlement."""
        out = {}
        for name in self.topic_of:
            count = sum(1 for key, seq in self.unsettled_of(name) if now_us > self._due(name, key, seq, deadline_us) + grace_us)
            if count:
                out[name] = count
        return out

    def _due(self, name: str, key: str, seq: int, deadline_us: dict[str, int]) -> int:
        """When the target owes an unsettled message's next delivery at the latest: one ack deadline (+ the retry
        backoff after a nack) after its last recorded event, or, never delivered, after its publish. The deadline
        after a nack stands for the next delivery's row, which the expire fault may hold back that long; a poison
        message of a dead-lettering subscription is nacked at once on every delivery, before any fault
        (`probe.ProbeSubscriber.callback`), so after a nack the target answered its next row is owed one retry
        backoff later (the grace covers the nack's answer and the flush)."""
        due = self._owed_us(name, key, seq)
        return self.published_us[(self.topic_of[name], key, seq)] + deadline_us[name] if due is None else due

    def _owed_us(self, name: str, key: str, seq: int) -> int | None:
        """`_due` of a delivered message, from its rows (never before its latest delivery); None: never delivered."""
        message = (name, key, seq)
        due, nacked = self.due_us.get(message), self.nacked_us.get(message)
        if nacked is not None:
            at, deadline = nacked
            held = 0 if name in self.dead_lettering and (self.topic_of[name], key, seq) in self.poison else deadline
            due = max(due or 0, at + held + self.backoff_us[name])
        return due

    def latest_due_us(self, names, deadline_us: dict[str, int]) -> int | None:
        """The latest `_due` among the unsettled messages of `names` (None: none unsettled)."""
        return max((self._due(name, key, seq, deadline_us) for name in names if name in self.topic_of
                    for key, seq in self.unsettled_of(name)), default=None)

    def unsettled_outcomes(self, name: str) -> dict[str, int]:
        """How the latest delivery of each unsettled message of a subscription ended, counted:
        `ack: invalid_ack_id` (the target rejected the ack), `expire: none` (held by the expire fault),
        `no row yet` (not delivered, or its ack not answered yet: a row is written with its answer), ... --
        why the drain still waits for them."""
        from collections import Counter

        outcomes = Counter()
        for key, seq in self.unsettled_of(name):
            last = self.last.get((name, key, seq))
            outcomes["no row yet" if last is None else f"{last[1]}: {last[2]}"] += 1
        return dict(outcomes.most_common())

    def done(self) -> int:
        return sum(
            len(self.settled[name] & self.published.get(topic, set())) for name, topic in self.topic_of.items()
        )
