"""A run's verdict: the checks run on its evidence, with the config drift found before the probe,
folded per subscription and guarantee (Jepsen's `merge-valid`: a guarantee that was not exercised
is `not_tested`, never `holds`). `guarantee_status` is the one fold of a subscription's guarantees (the
table of guarantees, `pubsubguard.validation.checks.guarantees`, says when each is judged); `verdict_of` folds
the run's.

`run_verdict(publishes, deliveries, info)` is the one place the checks run for a verification run;
the job (`pubsubguard.validation.judgement.judge`) runs it on the evidence it reads, and the report renders
what it returns.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from ..evidence import records
from .guarantees import Exercised, SHOWN
from .pinning import pinning_findings, pinning_tested
from .wording import counted


@dataclass(frozen=True)
class RunVerdict:
    findings: list[dict]  # the checks' findings, the config drift, the endpoint mismatches (findings.FINDING_COLUMNS)
    stats: dict[str, dict]  # subscription -> figures (checks.run.STATS_FIELDS)
    guarantees: dict[str, dict[str, str]]  # subscription -> guarantee -> holds | violated | inconclusive | not_tested
    observations: list[str]  # what the evidence shows about the target beyond the findings
    verdict: str  # holds | violated | inconclusive
    verdict_reason: str = ""  # why, in one sentence (which guarantees, which messages)
    plot: dict | None = None  # what the report plots, from the checks' pass (checks.CheckResults.plot)


def finding_record(row: dict) -> dict:
    """A finding row of the checks as a plain record: evidence parsed, absent facts left out."""
    record = dict(row)
    if isinstance(record.get("evidence"), str):
        record["evidence"] = json.loads(record["evidence"])
    for name in ("seqs", "attempts", "times"):
        present = {k: v for k, v in (record.get(name) or {}).items() if v is not None}
        record[name] = present or None
    return record


def run_verdict(publishes, deliveries, info: records.RunInfo, evidence_dir=None, integrity=None,
                keep: bool = True) -> RunVerdict:
    """Run the checks on a run's evidence and fold them, with its recorded config drift, into a
    verdict per declared subscription and guarantee. `evidence_dir`: the local directory the frames
    were read from, whose bucketed layout the checks read in place, or where they keep (or find) their
    sorted input unless not `keep` (`checks.run_checks`).
    `integrity` (`pubsubguard.validation.evidence.seal.Integrity`): the evidence against its seal; every
    delivery-derived guarantee of a subscription whose rows may be missing (`affected`: unsealed evidence,
    parts not read) is `inconclusive` whatever the rows read show (their findings are all kept: rows
    missing can make a `lost` or an `out_of_order` of their own, and hide a violation)."""
    from pyspark.sql import functions as F

    from .run import run_checks
    from .findings import DEFAULT_SKEW_US

    probed = [s for s in info.subscriptions if s.name not in info.tested]
    drain = info.parameters.get("drain") or {}
    results = run_checks(publishes, deliveries, probed, skew_us=int(info.parameters.get("skew_us", DEFAULT_SKEW_US)),
                         evidence_dir=evidence_dir, unproven=frozenset(drain.get("unproven") or ()), keep=keep)
    if results.sorted_input:
        print(results.sorted_input, file=sys.stderr)
    findings = [finding_record(r) for r in results.findings]
    findings = unsupported_by_evidence(drain_forms(findings, drain), integrity)
    findings += [finding_record(f) for f in info.parameters.get("config_drift", [])]
    endpoint_record = info.parameters.get("endpoints")
    stats = {r["subscription"]: r for r in results.stats}
    # per probed topic, from the checks' pass: messages published with status ok, and whether a poison one was
    published_ok = {sub.topic: stats[sub.name]["published"] for sub in probed}
    poison_topics = {sub.topic for sub in probed if results.poison_published[sub.name]}
    findings += [finding_record(f) for f in pinning_findings(endpoint_record, probed, published_ok)]
    unsettled = {name: s["published"] - s["settled"] for name, s in stats.items()}
    affected = set(integrity.affected) if integrity is not None else set()
    guarantees = {
        sub.name: guarantee_status(
            findings, sub, tested=sub.name not in info.tested, poison_published=sub.topic in poison_topics,
            endpoints_observed=pinning_tested(endpoint_record, sub),
            unsettled=unsettled.get(sub.name, 0), rows_missing=sub.name in affected,
        )
        for sub in info.subscriptions
    }
    observations = []
    seal_note = integrity.observation() if integrity is not None else None
    if seal_note:
        observations.append(seal_note)
    created = info.parameters.get("twins_created_us")
    if created:
        replayed = deliveries.where(
            (F.col("probe_run").isNull() | (F.col("probe_run") != info.run_id)) & (F.col("publish_time_us") < created)
        ).count()
        if replayed:
            observations.append(
                f"{replayed} deliveries on the probe's new twin subscriptions were messages published before the "
                "twins existed (foreign to this run, reported as `unexpected`): this target delivers a topic's "
                "retained backlog to a newly created subscription"
            )
    verdict, reason = verdict_of(guarantees, unsettled, info.parameters.get("drain") or {}, integrity)
    return RunVerdict(findings, stats, guarantees, observations, verdict, reason, results.plot)


def unsupported_by_evidence(findings: list[dict], integrity) -> list[dict]:
    """The checks' error findings of a subscription whose rows may be missing from the evidence (`integrity.affected`:
    parts not read with --partial-evidence, or unsealed evidence) on a guarantee judged from the delivery rows, as
    `inconclusive`: the rows not read could have made them (a delivery of a message whose publish row was in a
    truncated part is `unexpected`, a message whose delivery rows were is `lost`), so they are no error against the
    target; each is kept, with its kind, form and rows, and its guarantee is `inconclusive` (guarantee_status)."""
    affected = set(integrity.affected) if integrity is not None else set()
    if not affected:
        return findings
    judged = {g.name for g in SHOWN if g.settled_by_deliveries}
    return [{**f, "severity": "inconclusive"}
            if f["severity"] == "error" and f["subscription"] in affected and f["guarantee"] in judged else f
            for f in findings]


def drain_forms(findings: list[dict], drain: dict) -> list[dict]:
    """The form of a `lost` message from what the drain saw of its subscription: `stalled`, on a subscription that
    stalled (`drain.stalled`: it delivered nothing after a poison message's last attempt, so what it had not
    delivered by then -- published after, or waiting behind a key's earlier messages -- it never did;
    conformance scenario ordered-dead-letter-keeps-delivering); `after_stream_reset`, on a key the subscription
    delivered nothing of after its streams were last reset (`drain.after_stream_reset`; scenario
    ordered-stream-reset-keeps-delivering). A `dead_letter_missing` message is `after_backoff_stop` when its
    subscription's backoff redelivery stopped before it was owed its forwarding (`drain.after_backoff_stop`, its
    `poison_messages`; scenario dead-letter-after-late-ack). Only the form is set: the finding, its severity and the
    verdict are what the checks said."""
    stalled = {name: stall["since_us"] for name, stall in (drain.get("stalled") or {}).items()}
    silent = {name: set(reset["keys"]) for name, reset in (drain.get("after_stream_reset") or {}).items()}
    stopped = {name: {(key, seq) for key, seq in stop.get("poison_messages", ())}
               for name, stop in (drain.get("after_backoff_stop") or {}).items()}
    out = []
    for f in findings:
        if f["kind"] == "lost" and not f.get("form"):
            if f["subscription"] in stalled:
                f = {**f, "form": "stalled"}
            elif f.get("key") in silent.get(f["subscription"], ()):
                f = {**f, "form": "after_stream_reset"}
        elif f["kind"] == "dead_letter_missing" and not f.get("form") \
                and (f.get("key"), f.get("seq")) in stopped.get(f["subscription"], ()):
            f = {**f, "form": "after_backoff_stop"}
        out.append(f)
    return out


def guarantee_status(
    findings: list[dict], sub: records.DeclaredSubscription, *, tested: bool, poison_published: bool,
    endpoints_observed: bool = False, unsettled: int = 0, rows_missing: bool = False,
) -> dict[str, str]:
    """guarantee -> holds | violated | inconclusive | not_tested, for one declared subscription, in the
    order the table of guarantees shows them in (`pubsubguard.validation.checks.guarantees.SHOWN`): the one place a
    status is decided.

    `not_tested` when the subscription was not probed, or does not declare the guarantee, or the run did not
    exercise it (the table's `declared`: dead-lettering without a poison message published, endpoint pinning
    whose endpoints were not observed). For a guarantee judged from the delivery rows (the table's
    `settled_by_deliveries`): `inconclusive` whatever the rows read show when rows of the subscription may
    be missing from the evidence (`rows_missing`: unsealed, or parts not read; missing rows make `lost` and
    `out_of_order` findings of their own and can hide a violation). Otherwise only `error` findings make a
    guarantee `violated` (`advisory` ones are reported beside it), and one without an error finding is
    `inconclusive`, not `holds`, when `unsettled` published messages were neither acked with success nor
    dead-lettered by the end of the drain: what became of them is unknown (a later redelivery could still
    break it). `endpoint_pinning` is judged from the traffic seen, so neither leaves it open.
    """
    exercised = Exercised(poison_published=poison_published, endpoints_observed=endpoints_observed)
    violated = {f["guarantee"] for f in findings if f["subscription"] == sub.name and f["severity"] == "error"}
    status = {}
    for g in SHOWN:
        if not tested or not g.declared(sub, exercised):
            status[g.name] = "not_tested"
        elif g.settled_by_deliveries and rows_missing:
            status[g.name] = "inconclusive"
        elif g.name in violated:
            status[g.name] = "violated"
        elif g.settled_by_deliveries and unsettled:
            status[g.name] = "inconclusive"
        else:
            status[g.name] = "holds"
    return status


def verdict_of(guarantees: dict[str, dict[str, str]], unsettled: dict[str, int], drain: dict,
               integrity=None) -> tuple[str, str]:
    """The run's verdict and the sentence that says why: `violated` when any declared guarantee is,
    else `inconclusive` when any could not be judged to the end (unsettled messages, evidence unsealed or
    incomplete), else `holds`."""
    def which(status: str) -> list[str]:
        return [f"{name}.{g}" for name, per in sorted(guarantees.items()) for g, s in per.items() if s == status]

    if which("violated"):
        return "violated", f"violated: {', '.join(which('violated'))} (each backed by an error finding)"
    if which("inconclusive") and integrity is not None and integrity.affected:
        what = "unsealed (the run ended before sealing it)" if not integrity.sealed else \
            f"incomplete ({counted(len(integrity.problems), 'file')} not as sealed)"
        return "inconclusive", (f"inconclusive: {', '.join(which('inconclusive'))}: the evidence is {what}, so "
                                f"rows of {', '.join(integrity.affected)} may be missing")
    if which("inconclusive"):
        ended = {"stuck": "stuck (nothing recorded for an ack deadline and more, nor after a final read)",
                 "ceiling": "still outstanding when the drain reached its ceiling while the target made progress",
                 "timeout": "still outstanding at the drain timeout"}.get(drain.get("ended"), "not settled")
        counts = ", ".join(f"{name} {n}" for name, n in sorted(unsettled.items()) if n)
        return "inconclusive", (f"inconclusive: {', '.join(which('inconclusive'))}: no error finding, but published "
                                f"messages were never settled ({counts}), {ended}")
    if not which("holds"):
        return "holds", "holds: no declared guarantee was exercised (everything not_tested)"
    return "holds", f"holds: every exercised guarantee held for every published message ({len(which('holds'))})"
