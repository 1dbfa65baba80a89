"""The verification probe's contract with the declared estate (this tool's convention, not a Pub/Sub fact).

Messages the verification probe publishes carry `PROBE_ATTRIBUTE` (value: the run id). Subscriptions
declared with probe isolation exclude them with `PROBE_EXCLUSION_FILTER`; the probe's own twin
subscriptions select exactly one run with `probe_filter(run_id)`.
"""

from __future__ import annotations

PROBE_ATTRIBUTE = "pubsubguard_probe"
PROBE_EXCLUSION_FILTER = f"NOT attributes:{PROBE_ATTRIBUTE}"


def probe_filter(run_id: str) -> str:
    return f'attributes.{PROBE_ATTRIBUTE} = "{run_id}"'


def with_probe_exclusion(user_filter: str | None) -> str:
    """The filter a probe-isolated subscription is declared with: the user's filter AND no probe."""
    if user_filter:
        return f"({user_filter}) AND {PROBE_EXCLUSION_FILTER}"
    return PROBE_EXCLUSION_FILTER
