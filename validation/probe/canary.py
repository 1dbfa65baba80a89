"""The filter canary: does the target enforce subscription filters? The probe's isolation rests on them
(twins see only the run's messages, production subscriptions none of them); it is tried on a private topic
before the probe, and a target that does not enforce them is said in the report's observations."""

from __future__ import annotations

import time

from pubsubguard.core import probe_contract


def filter_canary(publisher, subscriber, project: str, run_id: str) -> str | None:
    """Does the target enforce subscription filters? Isolation rests on them; try on a private topic."""
    topic = f"projects/{project}/topics/pubsubguard-canary-{run_id[:8]}"
    subs = {
        "probe": (f"projects/{project}/subscriptions/pubsubguard-canary-probe-{run_id[:8]}", probe_contract.probe_filter(run_id)),
        "production": (f"projects/{project}/subscriptions/pubsubguard-canary-prod-{run_id[:8]}", probe_contract.PROBE_EXCLUSION_FILTER),
    }
    created = []
    try:
        publisher.create_topic(name=topic, timeout=30)
        created.append(("topic", topic))
        for path, filter_ in subs.values():
            subscriber.create_subscription(request={"name": path, "topic": topic, "filter": filter_}, timeout=30)
            created.append(("sub", path))
        publisher.publish(topic, b"canary", **{probe_contract.PROBE_ATTRIBUTE: run_id}).result(timeout=30)
        publisher.publish(topic, b"canary").result(timeout=30)
        seen = {}
        for role, (path, _) in subs.items():
            got = 0
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and got < 2:
                response = subscriber.pull(subscription=path, max_messages=10, timeout=5)
                got += len(response.received_messages)
                if response.received_messages:
                    subscriber.acknowledge(subscription=path, ack_ids=[m.ack_id for m in response.received_messages])
                elif got:
                    break
            seen[role] = got
        if seen["probe"] == 1 and seen["production"] == 1:
            return None
        return (
            f"subscription filters NOT enforced by this target: of one probe and one non-probe message, the "
            f"probe-only filter passed {seen['probe']} and the probe-excluding filter passed {seen['production']}; "
            "production subscriptions here also receive probe messages and twins receive foreign ones "
            "(isolation holds only where filters are enforced)"
        )
    except Exception as err:  # noqa: BLE001 - an observation, not a failure of the run
        return f"filter canary could not run: {type(err).__name__}: {err}"
    finally:
        for kind, path in reversed(created):
            try:
                if kind == "sub":
                    subscriber.delete_subscription(subscription=path, timeout=30)
                else:
                    publisher.delete_topic(topic=path, timeout=30)
            except Exception:  # noqa: BLE001
                pass
