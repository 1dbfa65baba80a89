"""The evidence's seal: what a run recorded, fixed when it ends, so a re-check knows it judges all of it.

When a probe run ends (also when it was interrupted: SIGINT/SIGTERM), the driver writes
`<evidence>/seal.json`, last: every file of the evidence (run.json, each Parquet part of `publishes/` and
`deliveries/`, the tasks' notes, client logs and failure texts) with its size and SHA-256, and for each
part the rows it holds and the subscriptions (deliveries) or topics (publishes) they are about. A run
killed before that (SIGKILL, a lost driver) leaves its evidence **unsealed**.

`check(evidence_dir, info, partial)` runs before any row is read and decides which part files are read:

- sealed, every file as sealed: the sealed parts are read; nothing else is.
- sealed, a file missing, extra (not sealed), truncated (shorter than sealed) or changed (another size or
  checksum): `EvidenceError`, one line naming every such file (exit 2), unless `partial` (`verify
  --partial-evidence`): then the intact sealed parts are read, the others are not, and every subscription
  whose rows were in a part not read is `affected` (its delivery-derived guarantees are `inconclusive`,
  never `holds`: pubsubguard.validation.checks.verdict).
- unsealed: every part is opened (its Parquet footer, schema and run id); a damaged one is `EvidenceError`
  naming it, unless `partial` (then it is not read). What the run lost when it was killed is unknown,
  so every subscription is `affected`.

run.json is never judged partially: it says what every check is judged against.
Spark skips names starting with `_` or `.` (the probe's flags, temporary files): so does the seal.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import time
from dataclasses import dataclass, field

from pubsubguard.core import storage

from .records import DELIVERY_SCHEMA, EvidenceError, PUBLISH_SCHEMA, RunInfo, read_record

SEAL = "seal.json"
FORMAT = "pubsubguard-seal/1"
LOGS = {"publishes": ("topic", PUBLISH_SCHEMA), "deliveries": ("subscription", DELIVERY_SCHEMA)}
# a cache the checks keep beside the evidence (pubsubguard.validation.checks.sorted_input); a re-check's own report
# (`verify --from-evidence DIR` without --report: evidence.store.recheck_directory)
NOT_SEALED = ("checks-input", "recheck")
RUN_JSON = "run.json"


def sealable(evidence_dir) -> list[str]:
    """The evidence's files (relative names), as a seal lists them."""
    return [name for name in storage.files(evidence_dir)
            if name != SEAL and name.split("/")[0] not in NOT_SEALED
            and not posixpath.basename(name).startswith(("_", "."))]


def _log_of(name: str) -> str | None:
    top, _, rest = name.partition("/")
    return top if top in LOGS and rest.endswith(".parquet") else None


def _part_facts(data: bytes, log: str, location: str, run_id: str | None) -> dict:
    """The rows of a Parquet part and what they are about; EvidenceError naming the part when it is not one
    of this run (not Parquet, another schema, rows of another run)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    column, schema = LOGS[log]
    try:
        table = pq.read_table(pa.BufferReader(data), columns=["run_id", column])
    except (pa.ArrowException, OSError, ValueError) as err:
        raise EvidenceError(f"{location}: not a readable Parquet part of the {log} log "
                            f"({' '.join(str(err).split())[:200]})") from None
    runs = set(table.column("run_id").to_pylist())
    if run_id is not None and runs - {run_id}:
        raise EvidenceError(f"{location}: holds rows of run {', '.join(sorted(r or 'null' for r in runs - {run_id}))}, "
                            f"not of this evidence's run {run_id} (a part of another run)")
    about = sorted({v for v in table.column(column).to_pylist() if v is not None})
    return {"rows": table.num_rows, "about": about}


def seal(evidence_dir, run_id: str) -> dict:
    """Write `<evidence>/seal.json` (last): every file with its size and SHA-256, each part's rows and what
    they are about. Returns the seal."""
    files = []
    rows = {log: 0 for log in LOGS}
    for name in sealable(evidence_dir):
        location = storage.join(evidence_dir, *name.split("/"))
        data = storage.read_bytes(location)
        entry = {"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        log = _log_of(name)
        if log is not None:
            entry.update(_part_facts(data, log, location, run_id))
            rows[log] += entry["rows"]
        files.append(entry)
    document = {"format": FORMAT, "run_id": run_id, "sealed_us": time.time_ns() // 1000, "files": files, "rows": rows}
    storage.write_text(storage.join(evidence_dir, SEAL), json.dumps(document, indent=1, sort_keys=True) + "\n")
    return document


@dataclass(frozen=True)
class Integrity:
    """What a check found of the evidence against its seal, and what the checks then read."""

    sealed: bool
    problems: tuple[str, ...] = ()  # one phrase per file: "missing deliveries/part-… (…)"
    affected: tuple[str, ...] = ()  # subscriptions whose rows may be missing from what is read
    parts: dict = field(default_factory=dict)  # log -> the part files read (relative names)
    rows_read: dict = field(default_factory=dict)  # log -> rows in the parts read (sealed: from the seal)
    rows_sealed: dict | None = None  # log -> rows the seal lists (None: unsealed)
    whole: bool = False  # `parts` are every file of the logs' directories (Spark may read the directories)
    late: tuple[str, ...] = ()  # files beside the logs written after the seal (notes, client logs: no rows)

    @property
    def complete(self) -> bool:
        return self.sealed and not self.problems

    def as_dict(self) -> dict:
        """report.json `evidence_integrity`."""
        return {"sealed": self.sealed, "complete": self.complete, "problems": list(self.problems),
                "affected_subscriptions": list(self.affected), "parts_read": {k: len(v) for k, v in self.parts.items()},
                "rows_read": self.rows_read, "rows_sealed": self.rows_sealed, "written_after_seal": list(self.late)}

    def observation(self) -> str | None:
        if self.complete:
            if self.late:
                return (f"written after the evidence was sealed (no rows, not judged): {', '.join(self.late)}")
            return None
        if not self.sealed:
            return ("evidence unsealed: the run ended before it sealed its evidence (killed, or recorded by an older "
                    "version), so what it lost cannot be known; no guarantee is claimed to hold "
                    f"({', '.join(self.affected) or 'no subscription'}: inconclusive at best)"
                    + (f"; not read: {'; '.join(self.problems)}" if self.problems else ""))
        return (f"evidence incomplete (--partial-evidence): {'; '.join(self.problems)}; judged what is there "
                f"(rows read of those sealed: {_read_of_sealed(self.rows_read, self.rows_sealed)}); the guarantees of "
                f"{', '.join(self.affected) or 'no subscription'} are inconclusive at best")


def _read_of_sealed(read: dict | None, sealed: dict | None) -> str:
    """`deliveries 1,403 of 1,452, publishes 600 of 600`."""
    read, sealed = read or {}, sealed or {}
    return ", ".join(f"{log} {read.get(log, 0):,} of {sealed.get(log, 0):,}" for log in sorted({*read, *sealed}))


def read_seal(evidence_dir) -> dict | None:
    """The seal, None when there is none; EvidenceError (one line) when it is damaged."""
    location = storage.join(evidence_dir, SEAL)
    document = read_record(location, missing=None, damaged="damaged seal", expected="a seal ({format, run_id, files})")
    if document is None:
        return None
    try:
        if document["format"] != FORMAT:
            raise EvidenceError(f"{location}: format {document['format']!r}, expected {FORMAT!r}")
        for entry in document["files"]:
            if not (isinstance(entry["path"], str) and isinstance(entry["bytes"], int) and isinstance(entry["sha256"], str)):
                raise TypeError(entry)
        str(document["run_id"])
    except (KeyError, TypeError) as err:
        raise EvidenceError(f"{location}: damaged seal: expected {{format, run_id, files: [{{path, bytes, sha256, "
                            f"…}}]}} ({type(err).__name__}: {err})") from None
    return document


def check(evidence_dir, info: RunInfo, partial: bool = False) -> Integrity:
    """The evidence against its seal (module docstring); the parts to read. EvidenceError (one line naming
    every damaged file) unless `partial`."""
    document = read_seal(evidence_dir)
    if document is None:
        return _unsealed(evidence_dir, info, partial)
    location = storage.join(evidence_dir, SEAL)
    if str(document["run_id"]) != info.run_id:
        raise EvidenceError(f"{location}: the seal of run {document['run_id']}, not of run.json's run {info.run_id} "
                            "(evidence of two runs mixed)")
    present = _present(evidence_dir)
    names = {"publishes": [], "deliveries": []}
    problems, lost = [], []
    sealed = {entry["path"]: entry for entry in document["files"]}
    for name, entry in sealed.items():
        what = _unlike_its_seal(evidence_dir, name, entry, present.get(name))
        if what is not None:
            problems.append(what)
            if name == RUN_JSON:
                raise EvidenceError(f"{storage.join(evidence_dir, RUN_JSON)}: not as {SEAL} sealed it ({what}): "
                                    "run.json is what every check is judged against (restore it; --partial-evidence "
                                    "judges part files only)")
            lost.append(entry)
        elif _log_of(name) is not None:
            names[_log_of(name)].append(name)
    extra = sorted(name for name in sealable(evidence_dir) if name not in sealed)
    problems += [f"extra {name} (not sealed: not read)" for name in extra if name.split("/")[0] in LOGS]
    # a task's note or client log written after the seal (an interrupted run's task ending late) holds no
    # row: said, not refused
    late = tuple(name for name in extra if name.split("/")[0] not in LOGS)
    if problems and not partial:
        raise EvidenceError(
            f"{evidence_dir}: the evidence does not match its seal ({SEAL}, {len(sealed)} files of run "
            f"{info.run_id[:8]}): {'; '.join(problems)} (restore them, or judge what is there with --partial-evidence)")
    affected = _affected(info, lost)
    rows_read = {log: sum(sealed[n].get("rows", 0) for n in parts) for log, parts in names.items()}
    return Integrity(sealed=True, problems=tuple(problems),
                     affected=tuple(s.name for s in info.subscriptions if s.name in affected),
                     parts=names, rows_read=rows_read, rows_sealed=dict(document.get("rows") or {}), late=late,
                     whole=_whole(evidence_dir, names))


def _unsealed(evidence_dir, info: RunInfo, partial: bool) -> Integrity:
    """Evidence with no seal (a run cut off before it sealed): each part read whole, as far as it parses;
    every subscription affected."""
    names = {"publishes": [], "deliveries": []}
    problems = []
    for name in sealable(evidence_dir):
        log = _log_of(name)
        if log is None:
            continue
        location = storage.join(evidence_dir, *name.split("/"))
        try:
            _part_facts(storage.read_bytes(location), log, location, info.run_id)
        except EvidenceError as err:
            if not partial:
                raise EvidenceError(f"{err} (unsealed evidence; judge the rest with --partial-evidence)") from None
            problems.append(f"damaged {name} ({str(err).split(': ', 1)[1]})")
            continue
        names[log].append(name)
    return Integrity(sealed=False, problems=tuple(problems), affected=tuple(s.name for s in info.subscriptions),
                     parts=names, whole=_whole(evidence_dir, names))


def _present(evidence_dir) -> dict[str, int]:
    """Every file under the evidence directory, by its path inside it: its size."""
    from pyarrow import fs

    store, root = storage.filesystem(evidence_dir)
    return {posixpath.relpath(entry.path, root): entry.size
            for entry in store.get_file_info(fs.FileSelector(root, recursive=True, allow_not_found=True))
            if entry.type == fs.FileType.File}


def _unlike_its_seal(evidence_dir, name: str, entry: dict, size: int | None) -> str | None:
    """How the file differs from its seal's entry (missing, truncated, changed), or None."""
    if size is None:
        return f"missing {name} ({entry['bytes']:,} bytes" + (f", {entry['rows']:,} rows)" if "rows" in entry else ")")
    if size < entry["bytes"]:
        return f"truncated {name} ({size:,} of {entry['bytes']:,} bytes)"
    if size != entry["bytes"]:
        return f"changed {name} ({size:,} bytes, sealed {entry['bytes']:,})"
    if hashlib.sha256(storage.read_bytes(storage.join(evidence_dir, *name.split("/")))).hexdigest() != entry["sha256"]:
        return f"changed {name} (same size, other content: its SHA-256 is not the sealed one)"
    return None


def _affected(info: RunInfo, lost: list[dict]) -> set[str]:
    """The subscriptions whose evidence a lost part held: a deliveries part its subscriptions (`about`, else
    all), a publishes part every subscription of its topics."""
    subscriptions = [s.name for s in info.subscriptions]
    topics = {}
    for sub in info.subscriptions:
        topics.setdefault(sub.topic, []).append(sub.name)
    affected = set()
    for entry in lost:
        log = _log_of(entry["path"])
        if log == "deliveries":
            affected.update(entry.get("about", subscriptions))
        elif log == "publishes":
            for topic in entry.get("about", list(topics)):
                affected.update(topics.get(topic, ()))
    return affected


def _whole(evidence_dir, names: dict) -> bool:
    """Whether the parts to read are every file Spark reads in the logs' directories."""
    everything = sealable(evidence_dir)
    return all(sorted(names[log]) == sorted(n for n in everything if n.split("/")[0] == log) for log in LOGS)
