"""The findings' vocabulary: what the checks produce, in the terms every output shares (report.json,
conformance.json, the terminal, the HTML report): each finding kind's guarantee and severity (from the table of
guarantees), the severities, the guarantees' statuses, a finding row's columns."""

from __future__ import annotations

from . import guarantees

DEFAULT_SKEW_US = 250_000  # clock skew tolerated between tasks (the kernel's comparisons: docs/checks.md)

# -- findings: what the checks produce -------------------------------------------------------
# kind: (guarantee, severity), from the table of guarantees (validation/checks/guarantees.py), and `config_drift`:
# a deployed setting differs from the declaration (pubsubguard.validation.job, via pubsubguard.core.readback).
# The job sets guarantee and severity per setting: `error` on the guarantee a setting carries (ordering,
# exactly_once incl. ack deadline, dead_letter, completeness for a missing resource); this default applies
# to every other setting.
FINDING_KINDS = {
    **{kind: (g.name, severity) for g in guarantees.GUARANTEES for kind, severity in g.kinds.items()},
    "config_drift": ("config", "advisory"),
}
# The one severity vocabulary of every output (report.json, conformance.json, terminal, HTML): `error`
# breaks a declared guarantee or a documented behaviour, `advisory` is reported beside it, `inconclusive`: a
# finding that rests on rows the evidence may lack (verify --partial-evidence, unsealed evidence: the rows not
# read could make it, e.g. a delivery of a message whose publish row was not read), neither an error against
# the target nor cleared (checks.verdict.unsupported_by_evidence).
SEVERITIES = ("error", "advisory", "inconclusive")
GUARANTEE_STATUSES = ("holds", "violated", "inconclusive", "not_tested")


def severity_of_result(result: str) -> str | None:
    """A conformance scenario's result in the severity vocabulary: violated -> error, unsupported or
    inconclusive -> advisory, holds -> none."""
    return {"violated": "error", "unsupported": "advisory", "inconclusive": "advisory"}.get(result)


GUARANTEES = guarantees.NAMES  # as the outputs show them (each guarantee's `column` in the table)

# A finding is data (what was observed), not a sentence; validation/checks/wording.py words each kind.
# A finding row (Spark DataFrame columns, also the JSON report's finding objects):
#   subscription, kind, guarantee, severity: strings (FINDING_KINDS)
#   form            string: the kind's form (kernel.FORMS: e.g. out_of_order skip | regression |
#                   rewind_without_replay; config_drift missing | differs), null for kinds without
#   key, seq, message_id  the message the finding is about (null where none)
#   seqs            struct<previous, blocking>: out_of_order's seq delivered before, and the earliest
#                   seq not settled at the time (skip, regression)
#   attempts        struct<seen, max>: dead-letter kinds' delivery attempts seen and declared maximum
#   times           struct<TIMES>: microseconds since the epoch (FINDING_FACTS below says which kind
#                   sets which)
#   evidence_seqs   array<long>: the seqs of the key whose rows prove it
#   evidence        string: JSON array of the delivery/publish rows that prove it
# A config_drift finding (pubsubguard.validation.checks.drift) has no seqs, attempts, times, evidence_seqs; instead
#   drift           {path, setting, declared, actual}
# An endpoint_mismatch finding (pubsubguard.validation.wire.endpoints) has none of them either; instead
#   endpoint        {declared, used (null: seen on no listener), resource, requests, messages}
TIMES = (
    "published_us", "received_us", "acked_us", "outstanding_until_us", "deadline_us", "superseded_us", "forwarded_us"
)
FINDING_COLUMNS = (
    "subscription", "kind", "guarantee", "severity", "form", "key", "seq", "message_id", "seqs", "attempts", "times",
    "evidence_seqs", "evidence",
)

# What a finding states besides its kind, subscription, seq and form (null where it does not apply):
#   previous_seq          out_of_order: the seq delivered just before, on the key (none: the first)
#   blocking_seq          out_of_order skip/regression: the earliest seq not settled at that time
#   attempts              dead-letter kinds: delivery attempts seen (see checks' docstring)
#   max_attempts          dead-letter kinds: the declared max_delivery_attempts
#   published_us          lost: the first successful publish
#   received_us           the finding's delivery (or dead-letter) row was received
#   acked_us              duplicate_after_ack: the earlier successful ack; stale_ack_accepted: the ack
#   outstanding_until_us  duplicate_while_outstanding: when the earlier delivery stopped being outstanding
#   deadline_us           stale_ack_accepted late_ack: when the delivery's deadline passed
#   superseded_us         stale_ack_accepted superseded: the later delivery that superseded the ack id
#   forwarded_us          dead_letter_after_ack, dead_letter_early: when it was forwarded
# `pubsubguard watch` adds `horizon_s` (lost past_horizon, late_delivery: the delivery horizon the message waited)
FINDING_FACTS = (
    "previous_seq", "blocking_seq", "attempts", "max_attempts", "published_us", "received_us", "acked_us",
    "outstanding_until_us", "deadline_us", "superseded_us", "forwarded_us",
)

# The forms a finding kind takes (`form`; kinds absent here have none), and who sets them. Each form has its
# sentence (validation/checks/wording.py, checked at import).
FORMS = {
    "unexpected": ("foreign", "unpublished",  # the kernel
                   "unrecorded"),  # pubsubguard watch: a seq its crashed publisher may have published unwritten
    "stale_ack_accepted": ("late_ack", "superseded"),  # the kernel
    "out_of_order": ("skip", "regression", "rewind_without_replay"),  # the kernel, in this order
    "lost": ("stalled", "after_stream_reset",  # the verdict, from the drain (verdict.drain_forms)
             "past_horizon",  # pubsubguard watch: not delivered within the subscription's delivery horizon
             "at_crash"),  # watch: published just before a crash of the watch, when rows could go unwritten
    "late_delivery": ("after_lost", "after_close"),  # pubsubguard watch (validation/watch/judge.py)
    "dead_letter_missing": ("after_backoff_stop",),  # the verdict, from the drain
    "endpoint_mismatch": (  # checks/pinning.py
        "publisher", "consumer", "declared_global", "unobserved_publish", "unobserved_consumer"),
    "config_drift": ("missing", "differs"),  # checks/drift.py, from pubsubguard.core.readback
}
