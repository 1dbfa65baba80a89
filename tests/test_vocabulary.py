"""One name per subscription field (issue 66): the twin the probe's tasks are handed is `TwinSpec`, a frozen value read
by its fields' names, not a dict built by hand with names of its own (`"ordered"` for `ordering`, a `dead_lettering`
key beside the dead-letter topic). A source line that reads a twin by key again, or brings the old alias back, fails
here, naming the file and line."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [p for d in ("pubsubguard", "validation") for p in sorted((ROOT / d).rglob("*.py"))]

# a twin read by key (`twin["path"]`, `t.get("ordered")`, `by_path[path]["declared_name"]`), or the twin's old aliases
TWIN_BY_KEY = re.compile(r"""\b(twin|t|by_path\[\w+\]|declared\[\w+\])(\[|\.get\()["'](path|declared_name|ack_deadline_s|"""
                         r"""retry_max_backoff_s|consumer_endpoint|dead_lettering|ordered)["']""")
OLD_ALIASES = re.compile(r"""["'](ordered|dead_lettering)["']\s*[:\]]|\.get\(["'](ordered|dead_lettering)["']\)""")


def _offending(pattern: re.Pattern) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
            for path in SOURCES for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]


def test_no_source_reads_a_twin_by_key():
    assert _offending(TWIN_BY_KEY) == []


def test_the_twin_fields_old_aliases_are_gone():
    assert _offending(OLD_ALIASES) == []


def test_the_scan_sees_what_it_forbids(tmp_path):
    """The patterns match the forms they were written against (a scan that matches nothing proves nothing)."""
    assert TWIN_BY_KEY.search('if twin.get("ordered"):') and TWIN_BY_KEY.search('t["declared_name"] for t in twins')
    assert OLD_ALIASES.search('{"path": t.path, "ordered": t.ordering}')
    assert not TWIN_BY_KEY.search('t["name"] for t in self.topics') and not OLD_ALIASES.search("twin.ordering")


def test_the_twin_a_task_is_handed_is_a_frozen_value_that_survives_pickling():
    """What the driver hands a Spark task is pickled to it: the same value arrives, its derived fields with it."""
    import dataclasses

    import pytest

    from pubsubguard.validation.probe.twins import TwinSpec

    twin = TwinSpec("projects/p/subscriptions/s-probe-1", "projects/p/topics/t", "s", ordering=True,
                    dead_letter_topic="projects/p/topics/t-dlq", max_delivery_attempts=5)
    arrived = pickle.loads(pickle.dumps(twin))
    assert arrived == twin and arrived.ordering and arrived.dead_lettering
    assert not TwinSpec("p/d", "p/dl", "d", drain=True).dead_lettering
    with pytest.raises(dataclasses.FrozenInstanceError):
        twin.ack_deadline_s = 1  # type: ignore[misc]
