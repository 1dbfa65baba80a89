"""Whether the watched target still answers (`TargetCheck`).

A watch whose target went away (its emulator stopped, the network to Google gone) judged silence for minutes: the
windows went on with nothing published and nothing delivered, and its stop waited for the horizons and for every
client's retries (a twin's delete alone is retried for 60 s), so SIGTERM did not end it. The runner checks the
target every tick of its loop and of its stop's wait: one call, no retry, on a client of its own that dials the
target directly (not through the listeners and the fault layer, whose planted faults are the probe's, not the
target's). The target is gone once no call was answered for `GONE_AFTER_S` (at least two checks; longer for a
target elsewhere than this machine); the watch then ends as an environment error (exit 2), keeping what it decided,
in one line naming the address it dialled.
"""

from __future__ import annotations

import time

from pubsubguard.core.apply import is_unavailable
from pubsubguard.core.errors import UserError

GONE_AFTER_S = 10.0  # not answered for this long (at least two checks): a target on this machine is gone
REMOTE_GONE_AFTER_S = 120.0  # ... Google's endpoint, or a target elsewhere
CALL_TIMEOUT_S = 5.0  # one check: one call, answered within this or not at all


class TargetGone(UserError):
    """The watch's target stopped answering (exit 2)."""


class TargetCheck:
    """One read of a probe twin now and then (`check`); `TargetGone` once the target has not answered for
    `gone_after_s`. Any answer, an error included (NotFound, PermissionDenied), is the target answering."""

    def __init__(self, subscriber, subscription: str, where: str, kept: str, gone_after_s: float = GONE_AFTER_S,
                 timeout_s: float = CALL_TIMEOUT_S):
        """`where`: the target as the line names it ("the emulator at HOST:PORT"); `kept`: where the decided is."""
        self.subscriber, self.subscription, self.where, self.kept = subscriber, subscription, where, kept
        self.gone_after_s, self.timeout_s = gone_after_s, timeout_s
        self.since: float | None = None  # time.monotonic() of the first check of the unanswered ones in a row
        self.since_wall = 0.0
        self.unanswered = 0
        self.error = ""

    @property
    def failing(self) -> bool:
        """The last check was not answered."""
        return self.unanswered > 0

    def check(self) -> None:
        try:
            self.subscriber.get_subscription(subscription=self.subscription, timeout=self.timeout_s, retry=None)
        except Exception as err:  # noqa: BLE001 - only a call not answered counts
            if is_unavailable(err):
                self.failed(f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}")
                if self.unanswered >= 2 and time.monotonic() - self.since >= self.gone_after_s:
                    raise self.gone() from None
                return
        self.since, self.unanswered = None, 0

    def failed(self, error: str) -> None:
        """A call to the target not answered (this check's, or another the runner made)."""
        if self.since is None:
            self.since, self.since_wall = time.monotonic(), time.time()
        self.unanswered += 1
        self.error = error

    def gone(self) -> TargetGone:
        since = time.strftime("%H:%M:%S", time.localtime(self.since_wall))
        return TargetGone(f"{self.where} stopped answering (since {since}: {self.error}); what the watch decided is "
                          f"in {self.kept}, the next watch on this --out decides the rest")
