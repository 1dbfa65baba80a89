"""Endpoint pinning, judged: the `endpoint_mismatch` findings and whether `endpoint_pinning` could be judged,
from the endpoint evidence the run recorded (run.json `parameters.endpoints`: the listeners' traffic per
endpoint, method and resource; validation/wire/listeners.py records it). Ordering and exactly-once hold only
for clients pinned to one region (docs/pubsub-facts.md)."""

from __future__ import annotations

from collections import defaultdict

from pubsubguard.policies import pubsub_facts as facts

from .findings import FINDING_KINDS

CONSUMER_METHODS = ("StreamingPull", "Pull", "Acknowledge", "ModifyAckDeadline")


def pinning_findings(record: dict, subscriptions, published_ok: dict[str, int]) -> list[dict]:
    """`endpoint_mismatch` findings from a run's recorded endpoint evidence (run.json
    `parameters.endpoints`): per ordered subscription, the Publish requests of its topic that came
    through another endpoint than the topic's declared publisher endpoint, or fewer published messages
    seen on any listener than the run published (they went around every listener); per exactly-once
    subscription, its twins' pull and ack calls through another endpoint than its declared consumer
    endpoint, or no pull seen at all. `published_ok`: topic name -> messages published with status ok."""
    if not record or not record.get("observed"):
        return []
    guarantee, severity = FINDING_KINDS["endpoint_mismatch"]
    declared = record["declared"]
    rows = record.get("traffic", [])
    findings = []

    def finding(sub: str, form: str, **endpoint) -> dict:
        return {"subscription": sub, "kind": "endpoint_mismatch", "guarantee": guarantee, "severity": severity,
                "form": form, "key": None, "seq": None, "message_id": None, "seqs": None, "attempts": None,
                "times": None, "evidence_seqs": None, "evidence": [endpoint], "endpoint": endpoint}

    for sub in subscriptions:
        topic = declared["topics"].get(sub.topic)
        if sub.ordering and topic and topic["endpoint"] in record["observed_endpoints"]:
            seen = defaultdict(lambda: [0, 0])
            for row in rows:
                if row["method"] == "Publish" and row["resource"] == topic["path"]:
                    seen[row["endpoint"]][0] += row["requests"]
                    seen[row["endpoint"]][1] += row["messages"]
            for used, (requests, messages) in sorted(seen.items()):
                if used != topic["endpoint"]:
                    findings.append(finding(sub.name, "publisher", declared=topic["endpoint"], used=used,
                                            resource=topic["path"], requests=requests, messages=messages))
                elif used == facts.GLOBAL_ENDPOINT:  # as declared, but not pinned: the pack's finding too
                    findings.append({**finding(sub.name, "declared_global", declared=used, used=used,
                                               resource=topic["path"], requests=requests, messages=messages),
                                     "severity": "advisory"})
            unseen = published_ok.get(sub.topic, 0) - sum(m for _, m in seen.values())
            if unseen > 0:
                findings.append(finding(sub.name, "unobserved_publish", declared=topic["endpoint"], used=None,
                                        resource=topic["path"], requests=None, messages=unseen))
        consumer = declared["subscriptions"].get(sub.name)
        if sub.exactly_once and consumer and consumer["endpoint"] in record["observed_endpoints"]:
            twins = set(consumer["twins"])
            seen = defaultdict(lambda: [0, 0])
            for row in rows:
                if row["method"] in CONSUMER_METHODS and row["resource"] in twins:
                    seen[row["endpoint"]][0] += row["requests"]
            for used, (requests, _) in sorted(seen.items()):
                if used != consumer["endpoint"] or used == facts.GLOBAL_ENDPOINT:
                    found = finding(sub.name, "consumer" if used != consumer["endpoint"] else "declared_global",
                                    declared=consumer["endpoint"], used=used,
                                    resource=sorted(twins)[0] if twins else None, requests=requests, messages=None)
                    findings.append(found if used != consumer["endpoint"] else {**found, "severity": "advisory"})
            pulled = any(row["method"] in ("StreamingPull", "Pull") and row["resource"] in twins
                         and row["endpoint"] == consumer["endpoint"] for row in rows)
            if not pulled:
                findings.append(finding(sub.name, "unobserved_consumer", declared=consumer["endpoint"], used=None,
                                        resource=sorted(twins)[0] if twins else None, requests=0, messages=None))
    return findings


def pinning_tested(record: dict | None, sub) -> bool:
    """Could the run judge `endpoint_pinning` for `sub`: it declares ordering or exactly-once and the
    endpoints that carry it were observed."""
    if not record or not record.get("observed"):
        return False
    observed = set(record.get("observed_endpoints", ()))
    topic = record["declared"]["topics"].get(sub.topic)
    consumer = record["declared"]["subscriptions"].get(sub.name)
    return bool((sub.ordering and topic and topic["endpoint"] in observed)
                or (sub.exactly_once and consumer and consumer["endpoint"] in observed))
