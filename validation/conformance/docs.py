"""The generated conformance section of docs/emulator.md, rewritten from a run's results."""

from __future__ import annotations

import re
from pathlib import Path

DOC_BEGIN = "<!-- conformance:begin -->"
DOC_END = "<!-- conformance:end -->"


def markdown_table(doc: dict) -> str:
    """The conformance section of docs/emulator.md: one row per scenario, from a run's conformance.json."""
    lines = [DOC_BEGIN, "",
             f"`pubsubguard conform --target {doc['target']}`, run {doc['run_id']} ({doc['started']}, "
             f"{doc['duration_s']:g} s): " + ", ".join(f"{n} {r}" for r, n in doc["summary"].items()) + ".", "",
             "| Scenario | Result | What the target did |", "| --- | --- | --- |"]
    for item in doc["scenarios"]:
        detail = re.sub(r"\s+", " ", item["detail"]).replace("|", "\\|")
        lines.append(f"| `{item['id']}` | **{item['result']}** | {detail} |")
    lines += ["", DOC_END]
    return "\n".join(lines)


def documented_results(text: str) -> dict[str, str]:
    """Scenario id -> result as written in the generated section of a document."""
    try:
        section = text[text.index(DOC_BEGIN):text.index(DOC_END)]
    except ValueError:
        return {}
    return dict(re.findall(r"^\| `([a-z0-9-]+)` \| \*\*([a-z]+)\*\* \|", section, flags=re.M))


def update_doc(path: Path, doc: dict) -> None:
    text = path.read_text()
    if DOC_BEGIN not in text or DOC_END not in text:
        raise SystemExit(f"{path}: no generated conformance section ({DOC_BEGIN} … {DOC_END})")
    head, rest = text.split(DOC_BEGIN, 1)
    tail = rest.split(DOC_END, 1)[1]
    path.write_text(head + markdown_table(doc) + tail)
