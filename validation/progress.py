"""Progress of a verification run: what the flushed evidence says is published and settled, and the
bars that show it (none with --no-progress)."""

from __future__ import annotations

from pathlib import Path


class EvidenceTally:
    """Reads the flushed part files incrementally: what is published and what is settled per subscription."""

    def __init__(self, directory: Path, topic_of: dict[str, str], run_id: str):
        """topic_of: probed subscription -> its declared topic."""
        self.directory = directory
        self.run_id = run_id
        self.topic_of = dict(topic_of)
        self.seen: set[Path] = set()
        self.published: dict[str, set] = {}
        self.publish_rows = 0
        self.delivery_rows = 0
        self.settled: dict[str, set] = {name: set() for name in topic_of}

    def refresh(self) -> None:
        import pyarrow.parquet as pq

        for kind in ("publishes", "deliveries"):
            for path in sorted((self.directory / kind).glob("part-*.parquet")):
                if path in self.seen:
                    continue
                self.seen.add(path)
                rows = pq.read_table(path).to_pylist()
                if kind == "publishes":
                    self.publish_rows += len(rows)
                    for row in rows:
                        if row["status"] == "ok":
                            self.published.setdefault(row["topic"], set()).add((row["key"], row["seq"]))
                    continue
                self.delivery_rows += len(rows)
                for row in rows:
                    if row["probe_run"] != self.run_id or row["subscription"] not in self.settled:
                        continue
                    if row["kind"] == "dead_letter" or (
                        row["action"] in ("ack", "late_ack") and row["ack_result"] == "success"
                    ):
                        self.settled[row["subscription"]].add((row["key"], row["seq"]))

    def expected(self) -> int:
        return sum(len(self.published.get(topic, ())) for topic in self.topic_of.values())

    def unsettled(self) -> dict[str, int]:
        """Published messages not settled yet, per probed subscription (only those with any)."""
        out = {}
        for name, topic in self.topic_of.items():
            published = self.published.get(topic, set())
            missing = len(published - self.settled[name])
            if missing:
                out[name] = missing
        return out

    def done(self) -> int:
        return sum(
            len(self.settled[name] & self.published.get(topic, set())) for name, topic in self.topic_of.items()
        )


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add_task(self, *args, **kwargs):
        return 0

    def update(self, *args, **kwargs):
        pass


def progress_bars(enabled: bool):
    if not enabled:
        return _NoProgress()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    transient=False)

