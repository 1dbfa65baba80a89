"""Each probed subscription's delivery horizon: how long `pubsubguard watch` waits for a message before it may
call it lost.

A healthy subscription delivers a message within moments; a delivery that is lost on its way (the client
never sees it, the service thinks it outstanding) comes back once its ack deadline passed, then after the
retry policy's backoff; on a subscription with a dead-letter policy of N attempts a message the subscriber
keeps nacking is forwarded after N such rounds. The horizon allows all of it:

    horizon = attempts x (ack deadline + the retry policy's maximum backoff) + GRACE_S

with attempts = the dead-letter policy's maximum delivery attempts, else 2 (the first delivery and one
redelivery). `--horizon SECONDS` sets one horizon for every subscription; it may not be shorter than a
subscription's ack deadline (a message held by a subscriber stays out that long without being lost).
"""

from __future__ import annotations

from pubsubguard.core.errors import UserError
from pubsubguard.policies import pubsub_facts as facts

GRACE_S = 10.0  # publishing, flushing and scheduling on top of the target's own timing
UNDECLARED_ATTEMPTS = 2


def derived(twin) -> float:
    """The horizon of a probed subscription from its twin (`probe.twins.TwinSpec`: the declared settings)."""
    attempts = twin.max_delivery_attempts or UNDECLARED_ATTEMPTS
    return attempts * (twin.ack_deadline_s + (twin.retry_max_backoff_s or 0.0)) + GRACE_S


def check_override(ack_deadlines_s: dict[str, float | None], override: float | None) -> None:
    """UserError (one line, naming the subscription) when `override` is shorter than a subscription's ack
    deadline (None: the service's default)."""
    if override is None:
        return
    for name, deadline in sorted(ack_deadlines_s.items()):
        deadline = deadline or facts.ACK_DEADLINE_DEFAULT_S
        if override < deadline:
            raise UserError(f"--horizon {override:g}: shorter than subscription {name}'s ack deadline ({deadline:g} s); "
                            "a message it holds stays out that long without being lost")


def horizons(twin_specs, probed, override: float | None) -> dict[str, float]:
    """subscription -> its horizon in seconds (`check_override` first)."""
    probed_twins = [t for t in twin_specs if not t.is_dead_letter_drain and t.declared_name in probed]
    check_override({t.declared_name: t.ack_deadline_s for t in probed_twins}, override)
    return {t.declared_name: float(override) if override is not None else derived(t) for t in probed_twins}
