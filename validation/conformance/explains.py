"""Which verification findings a conformance scenario explains: when a scenario is `violated` on the same
target in the same run, the target lacking its documented behaviour explains the findings it governs
(`EXPLAINS`, `explained_by`). The report reads this; the scenarios themselves are validation/conformance/scenarios.py."""

from __future__ import annotations

from .harness import UNSUPPORTED, VIOLATED

# Which verification findings (pubsubguard.validation.checks.run: kind, and form -- for config_drift the setting) a
# scenario's documented behaviour governs: when that scenario is `violated` on the same target in the
# same run, the target lacking that behaviour explains the finding. The one place findings are linked
# to scenarios; `explained_by` applies it to measured results only, never to a scenario that held or
# did not run.
EXPLAINS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "eod-stale-ack-rejected": (("stale_ack_accepted", "late_ack"),),
    "eod-superseded-ack-rejected": (("stale_ack_accepted", "superseded"),),
    "eod-no-redelivery-after-ack": (("duplicate_after_ack", None),),
    "ordered-nack-redelivers-in-order": (("out_of_order", None),),
    "ordered-expiry-redelivers-in-order": (("out_of_order", None),),
    "ordered-publish-failure-pauses-key": (("out_of_order", None),),
    "ordered-eod-no-redelivery-while-outstanding": (("duplicate_while_outstanding", None),),
    # ("unsettled", "poison"): poison messages of a dead-lettering subscription not settled when the drain
    # ended (only forwarding settles them: the probe nacks them on every delivery)
    "dead-letter-after-max-attempts": (("dead_letter_missing", None), ("dead_letter_early", None),
                                       ("dead_letter_after_ack", None), ("delivery_attempts_exceeded", None),
                                       ("unsettled", "poison")),
    "dead-letter-ordered-after-max-attempts": (("dead_letter_missing", None), ("dead_letter_early", None),
                                               ("dead_letter_after_ack", None), ("delivery_attempts_exceeded", None),
                                               ("unsettled", "poison")),
    # ("unsettled", "stalled"): messages of an ordered dead-lettering subscription not settled because it
    # delivered nothing after a poison message's max-th nack (`drain.EvidenceTally.stalls`)
    # ("lost", "stalled"): never delivered there, published after it stalled (`verdict.drain_forms`)
    "ordered-dead-letter-keeps-delivering": (("unsettled", "stalled"), ("lost", "stalled")),
    # ("unsettled", "after_stall"): unsettled messages of another subscription whose latest event, or the next
    # delivery owed them, came after a subscription stalled (`drain.EvidenceTally.after_stall`): the emulator
    # then serves every subscription only every 10 s
    # ("lost" / "late_delivery", "after_stall"): `pubsubguard watch`'s message not delivered within its horizon on
    # another subscription, decided once an ordered dead-lettering subscription's messages could have reached their
    # last attempt behind a reset stream (validation/watch/conformance.py)
    "ordered-dead-letter-spares-other-subscriptions": (("unsettled", "after_stall"), ("lost", "after_stall"),
                                                       ("late_delivery", "after_stall")),
    # ("unsettled", "after_stream_reset"): unsettled messages (not poison) of an ordered subscription whose
    # stream the fault layer reset, on keys it delivered nothing of after the last reset
    # (`drain.EvidenceTally.silent_keys`)
    # ("late_delivery", "after_stream_reset"): `pubsubguard watch`'s delivery after its horizon, on a subscription
    # whose streams were reset (validation/watch/conformance.py)
    "ordered-stream-reset-keeps-delivering": (("unsettled", "after_stream_reset"), ("lost", "after_stream_reset"),
                                              ("late_delivery", "after_stream_reset")),
    # the same forms on an unordered subscription: its unsettled messages (not poison) stuck when the drain ended,
    # on a subscription whose streams were reset (`drain.EvidenceTally.silent_keys`)
    "stream-reset-keeps-delivering": (("unsettled", "after_stream_reset"), ("lost", "after_stream_reset"),
                                      ("late_delivery", "after_stream_reset")),
    # ("unsettled", "after_backoff_stop"): unsettled messages of an unordered subscription with a retry policy whose
    # latest delivery was a redelivery, none of the subscription's later ones owed after a backoff
    # (`drain.EvidenceTally.after_backoff_stop`); ("dead_letter_missing", "after_backoff_stop"): such a message
    # nacked at its max-th attempt (`verdict.drain_forms`)
    "redelivery-after-repeated-expiry": (("unsettled", "after_backoff_stop"),),
    "redelivery-after-late-ack": (("unsettled", "after_backoff_stop"),),
    "dead-letter-after-late-ack": (("dead_letter_missing", "after_backoff_stop"),),
    "filter-enforced": (("unexpected", "foreign"),),
    "retention-as-declared": (("config_drift", "retention_seconds"),),
}


# Scenarios that measure a behaviour of ordered subscriptions only: they explain findings on those alone.
ORDERED_ONLY = frozenset({"dead-letter-ordered-after-max-attempts", "ordered-eod-no-redelivery-while-outstanding",
                          "ordered-dead-letter-keeps-delivering", "ordered-stream-reset-keeps-delivering"})


# Scenarios that measure a behaviour of unordered subscriptions only (the emulator's ordered subscriptions keep a
# backlog per key without the retry policy's timer: docs/emulator.md): they explain findings on those alone.
UNORDERED_ONLY = frozenset({"redelivery-after-repeated-expiry", "redelivery-after-late-ack", "dead-letter-after-late-ack"})


# Scenarios whose `unsupported` (the target refused the setting as declared) explains a config_drift of
# that setting too: a target that refuses the declared value holds another one, which is the drift.
EXPLAINS_WHEN_REFUSED = frozenset({"retention-as-declared"})


def explained_by(finding: dict, results: dict[str, str], ordered: bool = False) -> list[str]:
    """The ids of the scenarios, `violated` in `results` (scenario id -> result), whose behaviour
    explains `finding` (EXPLAINS; ORDERED_ONLY ones only when the finding's subscription is `ordered`,
    UNORDERED_ONLY ones only when not;
    EXPLAINS_WHEN_REFUSED ones also when `unsupported`, for config drift); empty when none does."""
    form = (finding.get("drift") or {}).get("setting") if finding["kind"] == "config_drift" else finding.get("form")

    def deviates(scenario: str) -> bool:
        result = results.get(scenario)
        return result == VIOLATED or (result == UNSUPPORTED and scenario in EXPLAINS_WHEN_REFUSED
                                      and finding["kind"] == "config_drift")

    return [scenario for scenario, governs in EXPLAINS.items()
            if deviates(scenario) and (ordered or scenario not in ORDERED_ONLY)
            and not (ordered and scenario in UNORDERED_ONLY)
            and any(kind == finding["kind"] and wanted in (None, form) for kind, wanted in governs)]
