"""A watch's output directory (`--out DIR`) and what it remembers across restarts.

    DIR/watch.json         which stack and run this directory belongs to, the format of what it holds, and the
                           next probe seq free (reserved before the publisher starts: a seq never repeats
                           under a key, whatever stopped the watch)
    DIR/evidence/          the probe's rows as written (publishes/, deliveries/, clock/), kept `--keep` seconds
    DIR/checkpoint/        Spark's checkpoint of the streaming checks (offsets, state store, commits)
    DIR/findings.jsonl     one JSON object per finding, written when it is decided (`sink`)
    DIR/findings.commit    the last window whose findings are whole in findings.jsonl, and its length
    DIR/windows.jsonl      one line per window (the rolling report reads the last ones)
    DIR/report.json, report.html, spark.log

A directory of another stack, or one whose checkpoint another version of the format wrote, is refused in one
line before anything starts.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from pubsubguard.core.errors import UserError

# what watch.json, the checkpoint's state schema and findings.jsonl look like (judge.STATE, stream.BUCKETS). 1: a
# state per (subscription, key); 2: a state per bucket of keys (issue 65), which Spark cannot read from format 1's
# checkpoint, so a format-1 --out is refused (a new --out starts afresh; its findings.jsonl stays where it is)
FORMAT = 2
MANIFEST = "watch.json"
SEQ_BLOCK = 1_000_000  # seqs a publisher start reserves (at a canary's rate, weeks of publishing)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pubsubguard")
    except PackageNotFoundError:
        return "unknown"


@dataclass
class Manifest:
    format: int
    pubsubguard: str
    stack: str
    project: str
    run_id: str
    next_seq: int = 0
    starts: int = 0  # how many times a watch started on this directory
    block: int | None = None  # the first seq of the block the last publisher started from
    # [topic, key, first, last]: seqs a stopped publisher may have published without writing their rows (after the
    # last row it wrote, within its block): a delivery of one is not `unexpected` (judge.py, form unrecorded)
    unrecorded: list = None  # type: ignore[assignment]
    running: bool = False  # set while a watch runs on it: still set at the next start, the last one crashed
    # [first_us, last_us]: just before a crash, a delivery and its ack may have happened without their row
    crash_windows: list = None  # type: ignore[assignment]
    # the conformance run going on beside the watch (its throwaway resources carry the id), None between runs:
    # what a crashed watch's run left is deleted at the next start
    conformance_run: str | None = None

    def __post_init__(self):
        self.unrecorded = list(self.unrecorded or [])
        self.crash_windows = list(self.crash_windows or [])


class WatchDir:
    def __init__(self, path: Path, manifest: Manifest, resumed: bool):
        self.path, self.manifest, self.resumed = path, manifest, resumed

    @classmethod
    def open(cls, path: Path, stack: str, project: str) -> "WatchDir":
        """The directory for `stack`'s watch: a new one (made), or the one an earlier watch of the same stack
        left (resumed). UserError (exit 2, one line) for one of another stack or format, or not a watch's."""
        path = Path(path).absolute()
        manifest_path = path / MANIFEST
        if manifest_path.exists():
            manifest = cls._read(manifest_path, stack)
            if manifest.project != project:
                raise UserError(f"--out {path}: holds a watch of project {manifest.project!r} ({MANIFEST}), not of "
                                f"{project!r}; use another --out")
            return cls(path, manifest, resumed=True)
        if path.exists() and any(p.name not in ("emulator", "plan.json", ".pubsubguard.lock") for p in path.iterdir()):
            raise UserError(f"--out {path}: exists and is not a watch's directory (no {MANIFEST}); choose an empty "
                            "or new directory")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"--out {path}: cannot be created ({err.strerror})") from None
        manifest = Manifest(format=FORMAT, pubsubguard=_version(), stack=stack, project=project, run_id=uuid.uuid4().hex)
        directory = cls(path, manifest, resumed=False)
        directory.save()
        return directory

    @classmethod
    def refuse_foreign(cls, path: Path, stack: str) -> None:
        """UserError (one line) when `path` holds another stack's watch or another format's checkpoint, or is
        not a watch's directory: decided before anything starts (`open` decides again, with the project)."""
        manifest_path = Path(path) / MANIFEST
        if manifest_path.exists():
            cls._read(manifest_path, stack)
        elif Path(path).exists() and any(p.name not in ("emulator", "plan.json", ".pubsubguard.lock")
                                         for p in Path(path).iterdir()):
            raise UserError(f"--out {path}: exists and is not a watch's directory (no {MANIFEST}); choose an empty "
                            "or new directory")

    @staticmethod
    def _read(manifest_path: Path, stack: str) -> Manifest:
        """watch.json of `stack`'s watch. Another stack's is refused before its format is looked at: whatever format
        it has, it is not this watch's."""
        try:
            data = json.loads(manifest_path.read_text())
        except (OSError, ValueError) as err:
            raise UserError(f"--out {manifest_path.parent}: {MANIFEST} cannot be read "
                            f"({type(err).__name__}); expected what `pubsubguard watch` writes") from None
        if not isinstance(data, dict) or "format" not in data:
            raise UserError(f"--out {manifest_path.parent}: {MANIFEST} is not a watch's manifest")
        if data.get("stack") != stack:
            raise UserError(f"--out {manifest_path.parent}: holds the watch of stack {data.get('stack')!r} ({MANIFEST}), "
                            f"not of {stack!r}; use another --out for this stack")
        if data["format"] != FORMAT:
            raise UserError(f"--out {manifest_path.parent}: its checkpoint was written by pubsubguard "
                            f"{data.get('pubsubguard', '?')} in watch format {data['format']}; this pubsubguard "
                            f"({_version()}) reads format {FORMAT} only: use another --out (or move this one aside)")
        try:
            return Manifest(**{k: data[k] for k in Manifest.__dataclass_fields__ if k in data})
        except TypeError as err:
            raise UserError(f"--out {manifest_path.parent}: {MANIFEST} lacks a field ({err})") from None

    def save(self) -> None:
        """watch.json, whole or not at all (written beside, synced, renamed)."""
        target = self.path / MANIFEST
        temporary = self.path / f".{MANIFEST}.{uuid.uuid4().hex[:8]}"
        with open(temporary, "w") as handle:
            handle.write(json.dumps(asdict(self.manifest), indent=2, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)

    def begin(self, unwritten_s: float) -> bool:
        """Mark the directory running; True when the last watch on it crashed, whose last `unwritten_s` before its
        last clock row are then remembered as a crash window."""
        crashed = self.manifest.running
        if crashed:
            last = last_clock_us(self.evidence)
            if last is not None:
                self.manifest.crash_windows.append([last - int(unwritten_s * 1e6), last + int(5e6)])
                self.manifest.crash_windows = self.manifest.crash_windows[-1000:]
        self.manifest.running = True
        self.save()
        return crashed

    def end(self) -> None:
        self.manifest.running = False
        self.save()

    def reserve_seqs(self, topics: list[str], keys: list[str]) -> int:
        """The first seq of a new block for the publisher, reserved (saved) before any of it is published. The
        block before it: per topic and key, the seqs after the last publish row it wrote are remembered as
        `unrecorded` (a publisher killed with a crashed watch published some it never wrote)."""
        previous = self.manifest.block
        if previous is not None:
            last = _last_recorded(self.evidence / "publishes", previous, previous + SEQ_BLOCK)
            for topic in topics:
                for key in keys:
                    first = last.get((topic, key), previous - 1) + 1
                    self.manifest.unrecorded.append([topic, key, first, previous + SEQ_BLOCK - 1])
            self.manifest.unrecorded = self.manifest.unrecorded[-10_000:]
        first = self.manifest.next_seq
        self.manifest.next_seq = first + SEQ_BLOCK
        self.manifest.block = first
        self.save()
        return first

    @property
    def evidence(self) -> Path:
        return self.path / "evidence"

    @property
    def checkpoint(self) -> Path:
        return self.path / "checkpoint"


def _last_recorded(publishes: Path, low: int, high: int) -> dict[tuple[str, str], int]:
    """(topic, key) -> the highest seq within [low, high) with a publish row in the evidence kept."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    if not publishes.exists() or not any(p.name.startswith("part-") for p in publishes.iterdir()):
        return {}
    table = ds.dataset(str(publishes), format="parquet", exclude_invalid_files=True).to_table(
        columns=["topic", "key", "seq"], filter=(pc.field("seq") >= low) & (pc.field("seq") < high))
    if table.num_rows == 0:
        return {}
    grouped = table.group_by(["topic", "key"]).aggregate([("seq", "max")])
    return {(t, k): s for t, k, s in zip(*(grouped[c].to_pylist() for c in ("topic", "key", "seq_max")))}


def last_clock_us(evidence: Path) -> int | None:
    """When the last clock row was written (a crashed watch's last sign of life), None without one."""
    import pyarrow.dataset as ds

    clock = evidence / "clock"
    if not clock.exists() or not any(p.name.startswith("part-") for p in clock.iterdir()):
        return None
    table = ds.dataset(str(clock), format="parquet", exclude_invalid_files=True).to_table(columns=["t"])
    return max(table["t"].to_pylist(), default=None)
