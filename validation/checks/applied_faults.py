"""The fault layer's applied rows, read back (run.json `parameters.nemesis.applied`): what each planted
anomaly must make the checks report, whether they did (the self-test's verdict), and which network faults a
subscription's guarantees held under. The layer that applies them is validation/wire/nemesis.py; this is the
checks' side, which reads only the rows it left."""

from __future__ import annotations

import re

from .wording import counted

# What the checks report for each planted kind (docs/checks.md): (kind of the finding, where).
# `swap` of n and n+1: `out_of_order` on n+1 (n skipped) and, when n+2 follows n, on n+2 (n+1 not
# replayed): the checks' reading of the swapped deliveries.
PLANTED_FINDING = {
    "drop_delivery": "lost",
    "duplicate_after_ack": "duplicate_after_ack",  # exactly-once subscriptions; elsewhere a counted redelivery
    "ack_lie": "duplicate_after_ack",  # exactly-once subscriptions
    "swap": "out_of_order",  # ordered subscriptions
    "strip_dead_letter_attributes": "dead_letter_missing",  # on the source subscription
}
# "held under 12 stream kills, 40 lost ack responses": how a count of applied rows reads.
NOUNS = {  # label -> (one, more)
    "kill_stream": ("stream kill", "stream kills"), "partition": ("partition", "partitions"),
    "netem": ("packet-fault window (netem)", "packet-fault windows (netem)"),
    "lose_response:publish": ("lost publish response", "lost publish responses"),
    "lose_response:acknowledge": ("lost ack response", "lost ack responses"),
    "lose_response:modify_ack_deadline": ("lost modack response", "lost modack responses"),
    "delay:publish": ("delayed publish", "delayed publishes"), "delay:acknowledge": ("delayed ack", "delayed acks"),
    "delay:modify_ack_deadline": ("delayed modack", "delayed modacks"),
    "delay:streaming_pull": ("delayed delivery", "delayed deliveries"),
}


def not_applied(row: dict) -> bool:
    return row["detail"].startswith("NOT applied")


def expected_findings(applied: list[dict], subscriptions: dict) -> list[dict]:
    """The findings the applied planted rows must produce: one per planted message, with the kind the
    checks define (`PLANTED_FINDING`); `subscriptions`: declared name -> DeclaredSubscription (a
    duplicate on a subscription without exactly-once is a counted redelivery, not a finding)."""
    expected = {}
    for row in applied:
        if not row["planted"] or not_applied(row):
            continue
        kind = PLANTED_FINDING[row["kind"]]
        sub = subscriptions.get(row["subscription"])
        if kind == "duplicate_after_ack" and not (sub and sub.exactly_once):
            continue
        if kind == "out_of_order" and not (sub and sub.ordering):
            continue
        expected.setdefault((row["subscription"], kind, row["key"], row["seq"]), row)
    return [{"subscription": s, "kind": k, "key": key, "seq": seq, "planted": row["kind"], "entry": row["entry"]}
            for (s, k, key, seq), row in sorted(expected.items(), key=lambda i: tuple(map(str, i[0])))]


def covers(expected: dict, finding: dict) -> bool:
    """Does `finding` stand for the `expected` one of a planted row (`expected_findings`)?"""
    if expected["subscription"] != finding["subscription"] or expected["kind"] != finding["kind"]:
        return False
    if expected["key"] != finding.get("key"):
        return False
    if expected["kind"] == "out_of_order":  # the swap of n, n+1: found on n+1, and on n+2 if it followed n
        return finding.get("seq") in (expected["seq"], expected["seq"] + 1, expected["seq"] + 2)
    return finding.get("seq") == expected["seq"]


def judge_planted(applied: list[dict], findings: list[dict], subscriptions: dict,
                  explained=lambda finding: False) -> dict:
    """The self-test's verdict: which planted anomalies the checks found (each with its finding), which they
    missed, and the findings no planted anomaly accounts for (`explained` findings — those a violated
    conformance scenario explains, the target's own deviations — are counted apart, not hidden)."""
    expected = expected_findings(applied, subscriptions)
    found, missed = [], []
    for item in expected:
        hits = [f for f in findings if covers(item, f)]
        (found if hits else missed).append({**item, "findings": len(hits)})
    extra, deviations = [], []
    for f in findings:
        if f.get("kind") in ("config_drift",) or f.get("severity") != "error":
            continue
        if any(covers(item, f) for item in expected):
            continue
        (deviations if explained(f) else extra).append(f)
    return {"expected": expected, "found": found, "missed": missed, "unplanted": extra, "explained": deviations}


def judge_redeliveries(applied: list[dict], subscriptions: dict, counted: dict[str, int]) -> dict:
    """duplicate_after_ack planted where exactly-once is not declared: at-least-once allows it, so it is a
    counted redelivery, not a finding; the subscription's `redeliveries` must equal what was planted
    (`counted`: subscription -> redeliveries of its statistics; a run with nacks or expiries would add
    legitimate ones: the self-test runs without)."""
    planted: dict[str, int] = {}
    for row in applied:
        sub = subscriptions.get(row["subscription"])
        if row["kind"] == "duplicate_after_ack" and not not_applied(row) and sub and not sub.exactly_once:
            planted[row["subscription"]] = planted.get(row["subscription"], 0) + 1
    expected = [{"subscription": s, "planted": n, "counted": counted.get(s, 0)} for s, n in sorted(planted.items())]
    return {"expected": expected, "found": [i for i in expected if i["counted"] >= i["planted"]],
            "missed": [i for i in expected if i["counted"] < i["planted"]],
            "unplanted": [i for i in expected if i["counted"] > i["planted"]]}


def guarantee_faults(applied: list[dict], subscription: str) -> dict[str, int]:
    """Network faults applied that touched `subscription` (or its topic's publishes: the caller adds
    those), counted by label (`kill_stream`, `lose_response:acknowledge`, ...)."""
    counts: dict[str, int] = {}
    for row in applied:
        if row["planted"] or not_applied(row) or (row["subscription"] != subscription and row["kind"] != "netem"):
            continue  # a packet fault (netem) shapes the link every subscription's calls cross
        label = row["kind"] if row["kind"] in ("kill_stream", "partition", "netem") else f"{row['kind']}:{_rpc(row['rpc'])}"
        counts[label] = counts.get(label, 0) + 1
    return counts


def _rpc(method: str) -> str:
    """`ModifyAckDeadline` -> `modify_ack_deadline`: the schedule's spelling of an RPC (its `rpc` field)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", method).lower()


def held_under(counts: dict[str, int]) -> str:
    """`12 stream kills, 40 lost ack responses`, `1 stream kill`."""
    return ", ".join(counted(n, *NOUNS.get(label, (label, label))) for label, n in sorted(counts.items()))
