"""Evidence as the probe writes it, for the drain's tests: one topic `t` read by subscription `s`, key `k`, message
`m<seq>` published at T; the rows a test gives for each delivery (validation/probe/drain.py reads them)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from pubsubguard.validation.evidence.records import DELIVERY_SCHEMA, PUBLISH_SCHEMA

S = 1_000_000
T = 1_700_000_000 * S
RUN = "run1"


def publish(seq: int) -> dict:
    return {"run_id": RUN, "topic": "t", "key": "k", "seq": seq, "message_id": f"m{seq}", "poison": False, "status": "ok",
            "error": None, "publish_time_us": T, "publisher_task": "p", "result_time_us": T + 1000}


def delivery(seq: int, at: int, action: str, result: str = "success") -> dict:
    return {"run_id": RUN, "subscription": "s", "kind": "delivery", "message_id": f"m{seq}", "key": "k", "seq": seq,
            "probe_run": RUN, "delivery_attempt": None, "receive_time_us": at, "publish_time_us": T,
            "subscriber_task": "sub-0", "ack_id": "a", "ack_deadline_s": 10, "action": action, "ack_result": result,
            "ack_time_us": at + 1000, "dl_source_delivery_count": None, "dl_source_subscription": None}


def evidence(directory, published: int, rows: list[dict]) -> None:
    """`published` messages seq 0.. and the delivery rows, in the probe's layout."""
    (directory / "publishes").mkdir()
    (directory / "deliveries").mkdir()
    pq.write_table(pa.Table.from_pylist([publish(s) for s in range(published)], schema=PUBLISH_SCHEMA),
                   directory / "publishes" / "part-0.parquet")
    pq.write_table(pa.Table.from_pylist(rows, schema=DELIVERY_SCHEMA), directory / "deliveries" / "part-0.parquet")
