"""Why a run's findings are there, in one place: what explains each finding and each guarantee that is not
`holds`, and what to do about it. The checks find (validation/checks/: the kernel, the verdict); this module
explains what they found, as Elle keeps each anomaly's explainer beside its analyzer, and returns data that the
report renders (validation/report/). It is here, beside the conformance scenarios, because the explanation is
mostly theirs: when a scenario is `violated` on the same target in the same run, the target lacking its
documented behaviour explains the findings it governs (`EXPLAINS`, `explained_by`); what is left is explained by
the fault layer's schedule (a planted anomaly, `planted_by`), by what the drain saw of the unsettled messages
(`UNSETTLED_FORMS`), or said to be unexplained, each with its action. A finding's sentence is its kind's wording
(validation/checks/wording.py, beside the vocabulary it words).

`explain_findings(verdict, info)`: each finding with its id, its sentence and what explains it;
`finding_groups`: the findings grouped as the report shows them; `explanations(outline, groups)`: one item per
violated or inconclusive guarantee with its causes, and the advisories. The scenarios themselves are
validation/conformance/scenarios.py.
"""

from __future__ import annotations

from pubsubguard.core.settings import Setting

from ..checks import wording
from ..checks.verdict import RunVerdict
from ..evidence import records
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
    "retention-as-declared": (("config_drift", Setting.RETENTION_S),),
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


# ------------------------------------------------------------------------------------ each finding
def explain_findings(verdict: RunVerdict, info: records.RunInfo) -> list[dict]:
    """The verdict's findings, each numbered (`id`), with its sentence (`detail`: wording.describe, its times
    offset from the run's start) and what explains it: the conformance scenarios violated on the same target
    (`explained_by`) and the schedule entries that planted it (`planted_by`, `--nemesis`: the known truth the
    run was meant to find); either left out when empty."""
    from ..checks.applied_faults import covers

    results = scenario_results(info.parameters.get("conformance"))
    ordered = {sub.name for sub in info.subscriptions if sub.ordering}
    start_us = run_start_us(info, verdict.plot)
    planted = _planted(info)
    findings = []
    for number, f in enumerate(verdict.findings, 1):
        finding = {**f, "id": f"finding-{number}", "detail": wording.describe(f, start_us)}
        explained = explained_by(f, results, f["subscription"] in ordered)
        if explained:
            finding["explained_by"] = explained
        by = sorted({f"schedule entry {p['entry']} ({p['planted']})" for p in planted if covers(p, f)})
        if by:  # a planted anomaly (--nemesis): the known truth the run was meant to find
            finding["planted_by"] = by
        findings.append(finding)
    return findings


def scenario_results(conformance: dict | None) -> dict[str, str]:
    """The conformance scenarios' results a run measured (run.json `parameters.conformance`): id -> result."""
    return {s["id"]: s["result"] for s in (conformance or {}).get("scenarios", [])}


def run_start_us(info: records.RunInfo, aggregates: dict) -> int | None:
    """The run's start, which every time in the report is offset from: when the probe's twins existed
    (run.json), else (generated evidence) the run's first publish (on a probed subscription's topic,
    from the checks' pass: `aggregates`, checks.CheckResults.plot)."""
    created = info.parameters.get("twins_created_us")
    if created is not None:
        return int(created)
    return aggregates["first_publish_us"]


def _planted(info: records.RunInfo) -> list[dict]:
    """The findings the schedule's applied planted rows must produce (`applied_faults.expected_findings`)."""
    from ..checks.applied_faults import expected_findings

    applied = (info.parameters.get("nemesis") or {}).get("applied") or []
    return expected_findings(applied, {sub.name: sub for sub in info.subscriptions}) if applied else []


def finding_groups(findings: list[dict]) -> list[dict]:
    """The findings grouped by subscription, kind, form (a config drift: its setting), severity and what
    explains them (a conformance scenario, or the schedule entries that planted them), in the order of each
    group's first finding; that finding is the group's worked example. Every finding is in exactly one group."""
    groups: dict[tuple, dict] = {}
    for f in findings:
        form = f["drift"]["setting"] if f["kind"] == "config_drift" else f.get("form")
        explained, planted = tuple(f.get("explained_by", ())), tuple(f.get("planted_by", ()))
        key = (f["subscription"], f["kind"], form, f["severity"], explained, planted)
        if key not in groups:
            groups[key] = {"subscription": f["subscription"], "kind": f["kind"], "form": form,
                           "severity": f["severity"], "guarantee": f["guarantee"], "explained_by": list(explained),
                           "planted_by": list(planted), "findings": []}
        groups[key]["findings"].append(f)
    # per subscription, errors first, the largest group first
    ordered = sorted(groups.values(), key=lambda g: (g["subscription"], g["severity"] != "error", -len(g["findings"])))
    return [{"id": f"group-{number}", **g} for number, g in enumerate(ordered, 1)]


# what to do about findings a schedule entry planted (`--nemesis`, the self-test): they are the known truth the run
# was meant to find, the fault layer's doing on the target's behalf
PLANTED_ACTION = ("nothing to do on the target: the fault layer planted these (the schedule entries named), and the "
                  "checks found them as the schedule meant")


# what to do about findings that rest on rows the evidence may lack (severity inconclusive)
INCONCLUSIVE_ACTION = ("not an error against the target: these findings rest on rows the evidence may lack (see the "
                       "observation: parts not read, or unsealed); restore the parts and re-check, or re-run")


def _action(target: str, kind: str, explained: list[str], conformance_ran: bool = True) -> str:
    """What the reader should do about findings of `kind` on `target`, explained by `explained` (or not;
    without the conformance scenarios nothing could be)."""
    if explained:
        if target == "emulator":
            return ("not your configuration: the emulator lacks these documented behaviours (docs/emulator.md); "
                    "judge these guarantees on Google Cloud (verify --target gcp) before relying on them")
        return ("the target lacks these documented behaviours: keep conformance.json and the findings' evidence rows "
                "and raise it with the target's owner (Google Cloud support)")
    if kind == "config_drift":
        return "the target holds another value than the plan declares: apply the plan again, or find what changed it"
    if kind == "publish_duplicate":
        return ("a publish retried after its reply was lost (the network, or --nemesis lose_response publish) is a new "
                "message, which exactly-once does not remove (docs/pubsub-facts.md): a consumer that must not process "
                "a payload twice de-duplicates on an id its producer assigns (the probe's run, key and seq attributes)")
    if not conformance_ran:
        return ("unexplained: the conformance scenarios did not run (verify --conform says which documented "
                "behaviours the target lacks); read its worked example (the key's plot and evidence rows) and "
                "the check in docs/checks.md")
    return ("unexplained: no conformance scenario covers it; read its worked example (the key's plot and evidence "
            "rows) and the check in docs/checks.md, and re-run to see whether it repeats")


# ------------------------------------------------------------------------------------ each guarantee
def outline(verdict: RunVerdict, info: records.RunInfo, integrity=None) -> dict:
    """What `explanations` reads of a judged run, in report.json's shape (target, parameters' drain, conformance,
    per subscription its declared ordering, figures and guarantees, evidence_integrity)."""
    return {"target": info.target, "parameters": {"drain": info.parameters.get("drain")},
            "conformance": info.parameters.get("conformance") or None,
            "subscriptions": {sub.name: {"declared": {"ordering": sub.ordering}, "figures": verdict.stats.get(sub.name),
                                         "guarantees": verdict.guarantees[sub.name]} for sub in info.subscriptions},
            "evidence_integrity": integrity.as_dict() if integrity is not None else None}


def _group_causes(selected: list[dict], target: str, ran: bool) -> list[dict]:
    """The finding groups `selected` merged into causes: one per kind, explaining scenarios and planting entries, with
    its count, forms, groups and subscriptions, and what to do (on `target`; `ran`: the conformance scenarios ran)."""
    merged: dict[tuple, dict] = {}
    for group in selected:
        planted = group.get("planted_by") or []
        cause = merged.setdefault((group["kind"], tuple(group["explained_by"]), tuple(planted)), {
            "kind": group["kind"], "count": 0, "forms": {}, "groups": [], "explained_by": group["explained_by"],
            "caused_by": [f"planted by {entry}" for entry in planted],
            "subscriptions": [],
            "action": PLANTED_ACTION if planted else INCONCLUSIVE_ACTION if group["severity"] == "inconclusive"
            else _action(target, group["kind"], group["explained_by"], ran)})
        cause["count"] += len(group["findings"])
        if group["form"]:
            cause["forms"][group["form"]] = cause["forms"].get(group["form"], 0) + len(group["findings"])
        cause["groups"].append(group["id"])
        if group["subscription"] not in cause["subscriptions"]:
            cause["subscriptions"].append(group["subscription"])
    return list(merged.values())



def explanations(result: dict, groups: list[dict]) -> dict:
    """Why the verdict is what it is, as data (`result`: a judged run's `outline`, or report.json's document): one
    item per violated or inconclusive guarantee (each with the error findings behind it, per kind and explanation,
    and what to do), then the advisory findings merged across subscriptions. Unsettled messages (an inconclusive guarantee) are said as a cause
    with their count; nothing here changes a status or leaves a finding out."""
    target, drain = result["target"], result["parameters"].get("drain") or {}
    ran = result.get("conformance") is not None
    results = scenario_results(result.get("conformance"))
    items = []
    for name, sub in result["subscriptions"].items():
        for guarantee, status in sub["guarantees"].items():
            if status not in ("violated", "inconclusive"):
                continue
            behind = [g for g in groups if g["subscription"] == name and g["guarantee"] == guarantee
                      and g["severity"] in ("error", "inconclusive")]
            item = {"subscription": name, "guarantee": guarantee, "status": status,
                    "causes": _group_causes(behind, target, ran)}
            figures = sub["figures"] or {}
            # the checks' count (the verdict's and the figures'), which the drain's tally at its end can differ from
            # by messages settled, or answered, after it: the causes below account for every one of them
            unsettled = figures["published"] - figures["settled"] if "settled" in figures else \
                (drain.get("unsettled") or {}).get(name, 0)
            lost = result.get("evidence_integrity") or {}
            if status == "inconclusive" and name in lost.get("affected_subscriptions", ()):
                item["causes"].append({
                    "kind": "evidence_incomplete", "count": max(1, len(lost["problems"])), "forms": {}, "groups": [],
                    "explained_by": [], "subscriptions": [name],
                    "action": ("the evidence is unsealed (its run was killed before sealing it): re-run to judge this "
                               "guarantee" if not lost["sealed"] else
                               "parts of the evidence were not read (see the observation): restore them from where the "
                               "run wrote them and re-check, or re-run")})
            if status == "inconclusive" and unsettled:
                item["causes"].extend(_unsettled_causes(name, unsettled, drain, sub, results, target, ran))
            items.append(item)
    advisories = _group_causes([g for g in groups if g["severity"] == "advisory"], target, ran)
    return {"guarantees": items, "advisories": advisories}


# Unsettled messages told apart, in this order (each takes what the earlier left): those whose ack reply the
# fault layer dropped (the run's own fault), those whose latest event came after another subscription stalled
# (poison ones included), those of an unordered subscription with a retry policy whose latest delivery was a
# redelivery (`EvidenceTally.after_backoff_stop`, poison ones included), the remaining poison ones, those of a stalled subscription, those on keys silent
# since the fault layer last reset the subscription's streams, the rest where the probe's client library held messages
# on the stream the final read kept, those never delivered when the drain was cut at its ceiling, the rest. Form -> what to do when no conformance scenario explains it.
UNSETTLED_FORMS = {
    "after_lost_reply": "the fault layer dropped the target's reply to their ack (the schedule entries named): the target "
                        "may have applied it, the client never learned so and recorded no success; a consequence of "
                        "the run's own fault, not of the target",
    "after_stall": "their latest event, or the next delivery the target owed them, came after another subscription "
                   "stopped delivering, and the drain ended before the target, no longer slowed by it (one serving "
                   "period after the drain closed its streams), could deliver them; see the observation and 'What "
                   "the target did'",
    "after_backoff_stop": "their latest delivery was a redelivery (delivery_attempt 2 or more), and the target, "
                          "which has a retry policy, neither delivered them again nor forwarded them after their nack or "
                          "expiry, while no other message of the subscription came back after its backoff either (see "
                          "'What the target did')",
    "poison": "unsettled poison messages: the target neither forwarded them to the dead-letter topic nor stopped "
              "redelivering them; see 'What the target did'",
    "stalled": "the subscription delivered nothing after a poison message's last delivery attempt (see the "
               "observation): the target stopped delivering it; see 'What the target did'",
    "after_stream_reset": "the subscription's streams were reset: on an ordered one, keys it delivered nothing of after "
                          "the last reset; on an unordered one, messages stuck when the drain ended (see the observation)",
    "held_in_client": "the probe's client library held messages of this subscription it never handed to the probe "
                      "(or its flow control paused the stream) when the final read began, on a stream the final read "
                      "kept (ordered): a consequence of the probe's own client, not of the target (see the observation)",
    "cut": "never delivered when the drain reached its ceiling while the target still made progress, so no final "
           "read proved them lost: re-run with a longer --drain-timeout or a lower --rate (the observation gives the "
           "rates)",
}


def _unsettled_causes(name: str, unsettled: int, drain: dict, sub: dict, results: dict, target: str,
                      ran: bool) -> list[dict]:
    """The `unsettled` causes of one subscription's inconclusive guarantee (UNSETTLED_FORMS' order)."""
    def of(key: str) -> dict:
        return (drain.get(key) or {}).get(name) or {}

    late, stall, silent, replies = of("after_stall"), of("stalled"), of("after_stream_reset"), of("after_lost_reply")
    stopped = of("after_backoff_stop")
    held = of("held_in_client")
    after_stall = min(unsettled, late.get("messages", 0))
    wanted = {
        "after_lost_reply": replies.get("messages", 0),
        "after_stall": late.get("messages", 0),
        "poison": max(0, min(unsettled, (drain.get("unsettled_poison") or {}).get(name, 0))
                      - min(late.get("poison", 0), after_stall) - stopped.get("poison", 0)),
        "stalled": stall.get("unsettled", 0),
        "after_stream_reset": silent.get("messages", 0),
        "after_backoff_stop": stopped.get("messages", 0),
        "held_in_client": unsettled if held else 0,
        "cut": (drain.get("cut") or {}).get(name, 0),
    }
    causes, left = [], unsettled
    for form, otherwise in UNSETTLED_FORMS.items():
        count = min(left, wanted[form])
        if not count:
            continue
        left -= count
        caused = [f"schedule entry {e} (lose_response on acknowledge)" for e in replies.get("entries", ())] \
            if form == "after_lost_reply" else []
        if form == "held_in_client":
            caused = [f"the probe's client library ({held['leased']:,} messages leased, {held['on_hold']:,} behind "
                      f"their ordering key" + (", the stream paused by its flow control" if held["paused_tasks"] else "")
                      + ")"]
        explained = [] if caused else explained_by({"kind": "unsettled", "form": form}, results,
                                                   bool(sub["declared"].get("ordering")))
        causes.append({"kind": "unsettled", "count": count, "forms": {form: count}, "groups": [],
                       "explained_by": explained, "caused_by": caused, "subscriptions": [name],
                       "action": _action(target, "unsettled", explained, ran) if explained else otherwise})
    if left:
        causes.append({"kind": "unsettled", "count": left, "forms": {}, "groups": [], "explained_by": [],
                       "caused_by": [], "subscriptions": [name],
                       "action": ("unsettled messages: see how their last delivery ended under 'What the target did'; "
                                  "if a re-run with a longer --drain-timeout leaves them unsettled, the target keeps "
                                  "them")})
    return causes
