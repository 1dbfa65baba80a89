"""The findings as records, each with the rows that prove it: assembled on the driver from Arrow, no Spark.

The pass (`run`) returns each finding with the coordinates of its row (subscription, the key's two hashes, the
row's source, seq, time and, for a foreign row, the hash of its message id) and the seqs whose rows prove it
(`ev_seqs`); the check names its key and reads the rows of the keys with findings (a filtered scan of the log).
Here each finding gets:
- its evidence: the rows of its (subscription, key) whose seq it names, or for `unexpected`, its own row alone;
  each row as the log holds it (`source`: publish or delivery, and every column that is not null), in time order;
- its message id: the id of its own row.
A publish row counts for every declared subscription of its topic; a delivery row for its subscription when it
is declared. A finding's key is matched by name: the pass's (h, h2) named once (`run._named`) -- two names with
the same 96 bits of hash would be judged as one key by the pass, and only the named one's rows are shown.

Findings come out in one order whatever the pass's partitioning: by subscription, kind, key, seq and time.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pyarrow as pa

from ..evidence.records import DeclaredSubscription
from . import buckets, chunk
from .findings import FINDING_KINDS, TIMES


class _Row:
    __slots__ = ("src", "seq", "t", "message_id", "mh", "record", "text")

    def __init__(self, src: int, seq, t, message_id, mh: int, record: dict):
        self.src, self.seq, self.t, self.message_id, self.mh, self.record = src, seq, t, message_id, mh, record
        self.text = json.dumps(record, separators=(",", ":"), ensure_ascii=False)  # ties in time: by the row's text


def _by_key(publishes: pa.Table, deliveries: pa.Table, subscriptions: list[DeclaredSubscription]) -> dict:
    """(subscription, key) -> its rows (`_Row`), of the declared subscriptions."""
    of_topic: dict[str, list[str]] = defaultdict(list)
    for sub in subscriptions:
        of_topic[sub.topic].append(sub.name)
    declared = {sub.name for sub in subscriptions}
    rows: dict[tuple, list[_Row]] = defaultdict(list)
    for source, table, time_column in (("publish", publishes, "publish_time_us"),
                                       ("delivery", deliveries, "receive_time_us")):
        if table.num_rows == 0:
            continue
        columns = {name: table.column(name).combine_chunks() for name in table.column_names}
        kinds = [chunk.PUBLISH] * table.num_rows if source == "publish" else buckets.row_kinds(columns).tolist()
        hashes = buckets.id_hashes(columns["message_id"]).tolist()
        for i, values in enumerate(table.to_pylist()):
            record = {"source": source, **{name: value for name, value in values.items() if value is not None}}
            row = _Row(kinds[i], values["seq"], values[time_column], values["message_id"], hashes[i], record)
            names = of_topic.get(values["topic"], ()) if source == "publish" else (
                (values["subscription"],) if values["subscription"] in declared else ())
            for name in names:
                rows[(name, values["key"])].append(row)
    return rows


def records(found: pa.Table, publishes: pa.Table, deliveries: pa.Table,
            subscriptions: list[DeclaredSubscription]) -> list[dict]:
    """The findings (`found`: the pass's core columns and `key`, the name of the finding's key) as records
    (`findings.FINDING_COLUMNS`; `evidence` a list of rows), from the rows of their keys (`publishes`,
    `deliveries`: every column of the log, the keys with findings at least)."""
    rows = _by_key(publishes, deliveries, subscriptions)
    out = []
    for f in found.to_pylist():
        candidates = rows.get((f["subscription"], f["key"]), ())

        def own(r: _Row) -> bool:
            return r.src == f["src"] and r.t == f["t"] and r.seq == f["seq"] and (f["mh"] is None or r.mh == f["mh"])

        wanted = set(f["ev_seqs"] or ())
        proving = [r for r in candidates if own(r)] if f["kind"] == "unexpected" else [
            r for r in candidates if r.seq is not None and r.seq in wanted]
        ids = [r.message_id for r in candidates if own(r) and r.message_id is not None]
        out.append({
            "subscription": f["subscription"], "kind": f["kind"], "guarantee": FINDING_KINDS[f["kind"]][0],
            "severity": f["severity"], "form": f["form"], "key": f["key"], "seq": f["seq"],
            "message_id": min(ids) if ids else None,
            "seqs": {"previous": f["previous_seq"], "blocking": f["blocking_seq"]},
            "attempts": {"seen": f["attempts"], "max": f["max_attempts"]},
            "times": {name: f[name] for name in TIMES},
            "evidence_seqs": f["ev_seqs"],
            "evidence": [r.record for r in sorted(proving, key=lambda r: (r.t, r.text))],
            "_order": (f["subscription"], f["kind"], f["key"] is None, f["key"] or "",
                       f["seq"] is None, f["seq"] or 0, f["t"], f["row_id"]),
        })
    out.sort(key=lambda r: r["_order"])
    for r in out:
        del r["_order"]
    return out
