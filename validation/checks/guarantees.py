"""The guarantees a verification run judges: one table, one entry per guarantee.

Every other place reads this table (Jepsen's one checker map): `evidence` (the guarantee names and the
finding kinds with their severities, `FINDING_KINDS`), `kernel` (the function that judges each guarantee
from the message rows, `GUARANTEE_CHECKS`), `checks` (a finding's guarantee), `verdict` (when a guarantee
is judged for a subscription, whether unsettled messages or missing rows leave it open: the status fold),
`report` (the guarantees table's columns) and `docs/checks.md` (its "Which checks run" table, generated
by `markdown_table`; a test keeps it in step).

Adding a guarantee is one `Guarantee` entry here; what the entry names is written where it runs: for one
judged from the message rows, its function in `validation/checks/kernel.py` (`check_table`, run by `kernel` at
import, refuses an entry whose function is missing), and a sentence per new finding kind in
`pubsubguard.validation.checks.wording.describe`.

    python -m pubsubguard.validation.checks.guarantees --update-doc docs/checks.md
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Exercised:
    """What the run did to one probed subscription that decides whether a declared guarantee could be judged."""

    poison_published: bool = False  # a poison message was published (status ok) on its topic
    # the listeners saw the endpoints its guarantees rest on (pinning.pinning_tested)
    endpoints_observed: bool = False


@dataclass(frozen=True)
class Guarantee:
    """One guarantee. `column`: its place among the guarantees wherever they are shown (report.json's
    `verdict_reason`, report.html's and the terminal's columns, docs/checks.md), 0 first; the table's own
    order is the order the kernel judges them in, and so the order of the findings.
    `declared(subscription, exercised)`: the subscription (`evidence.DeclaredSubscription`) declares it
    and the run exercised it (else it is `not_tested`). `kernel`: the name of the function of
    `validation/checks/kernel.py` that judges it from the message rows (`(Chunk, skew_us) -> list[Found]`); None
    for a guarantee judged from what the run recorded apart (`endpoint_pinning`: the record of `wire/listeners.py`).
    `settled_by_deliveries`: judged from the delivery rows, so messages left unsettled by the drain, or rows
    lost from the evidence, leave it `inconclusive` rather than `holds`. `kinds`: its finding kinds and
    their severity (`error` makes it `violated`, `advisory` is reported beside it). `doc`: when it runs, as
    docs/checks.md says it."""

    name: str
    column: int
    kernel: str | None
    declared: Callable[[object, Exercised], bool]
    settled_by_deliveries: bool
    kinds: dict[str, str]
    doc: str


GUARANTEES: tuple[Guarantee, ...] = (
    Guarantee(
        name="completeness", column=3, kernel="completeness", declared=lambda sub, run: True,
        settled_by_deliveries=True,
        # publish_duplicate: the same (key, seq) delivered under a second message id, a publish whose reply
        # was lost and which the client retried (docs/pubsub-facts.md: a new message, which exactly-once
        # does not remove). Reported and counted (figures `publish_duplicates`), never an exactly-once or
        # ordering violation.
        # late_delivery: `pubsubguard watch` only: a delivery of a message after its judgement closed (found lost
        # past its horizon, or settled and no longer retained); recorded, never taking back what was said.
        kinds={"lost": "error", "unexpected": "error", "publish_duplicate": "advisory", "late_delivery": "advisory"},
        doc="every probed subscription",
    ),
    Guarantee(
        name="exactly_once", column=1, kernel="exactly_once", declared=lambda sub, run: sub.exactly_once,
        settled_by_deliveries=True,
        kinds={"duplicate_after_ack": "error", "duplicate_while_outstanding": "error", "stale_ack_accepted": "error"},
        doc="`exactly_once` declared",
    ),
    Guarantee(
        name="ordering", column=0, kernel="ordering", declared=lambda sub, run: sub.ordering,
        settled_by_deliveries=True,
        kinds={"out_of_order": "error"},
        doc="`ordering` declared",
    ),
    Guarantee(
        name="dead_letter", column=2, kernel="dead_letter",
        declared=lambda sub, run: sub.dead_lettering and run.poison_published,
        settled_by_deliveries=True,
        kinds={"dead_letter_missing": "error", "dead_letter_after_ack": "error", "dead_letter_early": "advisory",
               "delivery_attempts_exceeded": "advisory"},
        doc="a dead-letter policy declared, and a poison message published on its topic",
    ),
    Guarantee(
        # Traffic of an ordered topic or exactly-once subscription through another endpoint than the declared
        # one, or around every listener (validation/wire/listeners.py; not derived from message rows).
        name="endpoint_pinning", column=4, kernel=None,
        declared=lambda sub, run: (sub.ordering or sub.exactly_once) and run.endpoints_observed,
        settled_by_deliveries=False,
        kinds={"endpoint_mismatch": "error"},
        doc="`ordering` or `exactly_once` declared, and the endpoints carrying it observed by the probe's listeners",
    ),
)


class GuaranteeTableError(Exception):
    """An entry of the table that cannot be judged as written (a bug of the table, raised at import)."""


def check_table(table: tuple[Guarantee, ...], functions: dict[str, object]) -> dict[str, Callable]:
    """name -> the kernel function of each guarantee judged from the message rows, in table order, looked up
    in `functions` (the kernel module's names); GuaranteeTableError when an entry names none that exists,
    names none although deliveries settle it, or repeats a name or a finding kind."""
    checks: dict[str, Callable] = {}
    columns = sorted(g.column for g in table)
    if columns != list(range(len(table))):
        raise GuaranteeTableError(f"columns {columns}: expected each of 0..{len(table) - 1} once")
    names: set[str] = set()
    kinds: set[str] = set()
    for guarantee in table:
        where = f"guarantee {guarantee.name!r}"
        if guarantee.name in names:
            raise GuaranteeTableError(f"{where}: in the table twice")
        names.add(guarantee.name)
        repeated = kinds & set(guarantee.kinds)
        if repeated:
            raise GuaranteeTableError(f"{where}: finding kind {sorted(repeated)[0]!r} belongs to another guarantee")
        kinds |= set(guarantee.kinds)
        bad = {k: s for k, s in guarantee.kinds.items() if s not in ("error", "advisory")}
        if not guarantee.kinds or bad:
            raise GuaranteeTableError(f"{where}: expected finding kinds with severity error or advisory, got "
                                      f"{guarantee.kinds!r}")
        if guarantee.kernel is None:
            if guarantee.settled_by_deliveries:
                raise GuaranteeTableError(f"{where}: settled by deliveries, so judged from the message rows, but "
                                          "names no kernel function")
            continue
        function = functions.get(guarantee.kernel)
        if not callable(function):
            raise GuaranteeTableError(f"{where}: its kernel function {guarantee.kernel!r} is not in "
                                      "validation/checks/kernel.py")
        checks[guarantee.name] = function
    return checks


SHOWN: tuple[Guarantee, ...] = tuple(sorted(GUARANTEES, key=lambda g: g.column))  # as the outputs show them
NAMES: tuple[str, ...] = tuple(g.name for g in SHOWN)
SETTLED_BY_DELIVERIES: frozenset[str] = frozenset(g.name for g in GUARANTEES if g.settled_by_deliveries)


# ------------------------------------------------------------------------------- docs/checks.md
DOC_BEGIN = "<!-- guarantees:begin (generated from validation/checks/guarantees.py) -->"
DOC_END = "<!-- guarantees:end -->"


def markdown_table(table: tuple[Guarantee, ...] = GUARANTEES) -> str:
    """docs/checks.md's "Which checks run": one row per guarantee (advisory kinds starred), in column order."""
    lines = [DOC_BEGIN, "| guarantee | runs on | findings |", "| --- | --- | --- |"]
    for g in sorted(table, key=lambda g: g.column):
        kinds = ", ".join(f"`{kind}`" + ("*" if severity == "advisory" else "") for kind, severity in g.kinds.items())
        lines.append(f"| {g.name} | {g.doc} | {kinds} |")
    return "\n".join([*lines, DOC_END])


def documented_table(text: str) -> str | None:
    """The generated section as a document holds it (None: the document has none)."""
    if DOC_BEGIN not in text or DOC_END not in text:
        return None
    return DOC_BEGIN + text.split(DOC_BEGIN, 1)[1].split(DOC_END, 1)[0] + DOC_END


def update_doc(path: Path) -> None:
    text = path.read_text()
    section = documented_table(text)
    if section is None:
        raise SystemExit(f"{path}: no generated guarantees section ({DOC_BEGIN} … {DOC_END})")
    path.write_text(text.replace(section, markdown_table(), 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pubsubguard.validation.checks.guarantees",
                                     description="Rewrite a document's generated guarantees table from the table.")
    parser.add_argument("--update-doc", type=Path, required=True, help="the document (docs/checks.md)")
    update_doc(parser.parse_args(argv).update_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
