"""`pubsubguard apply --emulator [--stack NAME | --plan FILE | --state FILE]`: create the plan's topics
and subscriptions on the running emulator, then read them back and print declared vs. actual.

`--state` applies what `pulumi up` deployed (`pulumi stack export`), under the deployed names. A plan of
any program whose names or references a deploy decides (autonames, `topic=topic.id`) is rehearsed as a
deploy would resolve them (`pubsubguard.core.rehearsal`): the names chosen are printed and recorded, so
applying again keeps them and `verify` finds them.

The emulator is found through PUBSUB_EMULATOR_HOST, else `.pubsubguard/emulator.json` (written by
`pubsubguard emulator start`). Resources go into the plan's `gcp_project`. Deploying to Google Cloud
is `pulumi up`'s job; the same code (`pubsubguard.core.apply`) would do it, selected only by
PUBSUB_EMULATOR_HOST being unset.

Exit code: 0 when every topic and subscription of the plan exists on the emulator (settings the
emulator refused or changed are reported and marked, not hidden); 1 when some could not be created;
2 for a usage error (no emulator, bad plan).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pubsubguard.core import apply as applying
from pubsubguard.core import declared
from pubsubguard.core import emulator as emu
from pubsubguard.core import readback
from pubsubguard.commands import options
from pubsubguard.core.errors import UserError
from pubsubguard.core.settings import Setting

DIFFERS = "≠"
SHOW = ("changes", "all")


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "apply", "create the plan's topics and subscriptions on the emulator and compare what it holds",
        exit_codes={0: "every planned topic and subscription exists on the emulator (differences are listed)",
                    1: "some could not be created",
                    2: "bad option, project, stack file or plan; no emulator running"},
        example="pubsubguard emulator start && pubsubguard apply --emulator -s dev",
    )
    parser.add_argument("--emulator", action="store_true", help="target the running emulator (required)")
    options.add_stack_arguments(parser)
    parser.set_defaults(stack=None)  # to tell an explicit --stack from the default
    parser.add_argument("--plan", type=options.input_file, default=None, metavar="FILE",
                        help="apply this plan FILE instead of planning --stack (default: plan --stack dev)")
    parser.add_argument("--state", type=options.or_checkpoint(options.remote_or(options.input_file)), nargs="?", const="", default=None,
                        metavar="FILE",
                        help="apply what `pulumi up` deployed: a `pulumi stack export` FILE or URI (gs://, s3://), "
                             "deployed names and all; `--state` alone with --stack: that stack's checkpoint in a "
                             "self-managed backend (PULUMI_BACKEND_URL=file://DIR)")
    parser.add_argument("--show", choices=SHOW, default="changes",
                        help="changes: resources changed or not fully applied, and settings that differ; "
                             "all: every resource and every declared setting beside what the emulator holds")
    parser.set_defaults(run=run)


def run(args) -> int:
    if not args.emulator:
        raise UserError("--emulator is required: apply targets the local emulator; deploy to Google Cloud with `pulumi up`")
    from pubsubguard.core import rehearsal, state

    host = emu.running_host(args.root)
    plan = declared.plan_from(args.plan, args.stack, args.root, getattr(args, "state", None))
    # Names and references a deploy decides are decided here as `pulumi up` would (kept from the last
    # rehearsal of the stack); the rehearsal is recorded before anything is created, so names survive a
    # partial apply.
    plan, autonamed, stood_in = rehearsal.for_apply(plan, args.root)
    applying.require_known(plan)
    if stood_in:
        print(f"apply: {state.stood_in_caveat(stood_in)}")
    if autonamed:
        record = rehearsal.record(plan, args.root)
        names = ", ".join(f"{urn.rsplit('::', 1)[-1]} -> {name}" for urn, name in sorted(autonamed.items()))
        print(f"apply: deployed names (autonamed, as `pulumi up` names them): {names}; recorded in {record}")
    os.environ[emu.HOST_ENV] = host  # the clients select the emulator through this variable only
    receiver = emu.recorded_push_receiver(args.root, host)
    if receiver:  # push subscriptions point at the emulator's own loopback receiver (else one in this process)
        os.environ.setdefault(emu.PUSH_RECEIVER_ENV, receiver)
    result = applying.apply_plan(plan, target=host)
    wanted = readback.declared(plan)
    held = readback.actual(wanted)
    diffs = readback.differences(wanted, held)
    show_all = args.show == "all"
    console = _console()
    outcomes = outcome_table(result, plan, show_all)
    if outcomes.row_count:
        console.print(outcomes)
    source = state.describe(plan["state"]) if "state" in plan else ""
    comparison = comparison_table(wanted, held, diffs, show_all, source)
    if comparison.row_count:
        console.print(comparison)
    if source:
        console.print(f"declared: {source}: what `pulumi up` deployed", highlight=False, soft_wrap=True)
        for caveat in state.caveats(plan["state"]):
            console.print(f"declared: {caveat}", highlight=False, soft_wrap=True)
    console.print(summary(result, diffs), highlight=False)
    return 0 if result.complete else 1


def _console():
    from rich.console import Console

    console = Console(soft_wrap=False)
    if not console.is_terminal:
        console = Console(width=max(console.width, 160))
    return console


def _short(path: str) -> str:
    return path.split("/", 2)[2] if path.startswith("projects/") else path


def _show(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "{}"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "[]"
    return "—" if value is None else str(value)


_STYLES = {
    applying.CREATED: "green", applying.UPDATED: "cyan", applying.UNCHANGED: "dim",
    applying.NOT_APPLIED: "yellow", applying.FAILED: "bold red", applying.NOT_ATTEMPTED: "red",
}


@dataclass
class ResourceOutcome:
    """Every outcome of one resource, in order (created, then a setting not applied, ...)."""

    path: str
    kind: str
    actions: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    @property
    def action(self) -> str:
        """The resource's own fate: what happened to it, not to one of its settings."""
        main = [a for a in self.actions if a != applying.NOT_APPLIED]
        return main[0] if main else applying.NOT_APPLIED

    @property
    def notable(self) -> bool:
        return self.action != applying.UNCHANGED or len(self.actions) > 1


def by_resource(result: applying.ApplyResult) -> list[ResourceOutcome]:
    merged: dict[str, ResourceOutcome] = {}
    for outcome in result.outcomes:
        entry = merged.setdefault(outcome.path, ResourceOutcome(outcome.path, outcome.kind))
        entry.actions.append(outcome.action)
        if outcome.detail:
            entry.details.append(outcome.detail)
    return list(merged.values())


def outcome_table(result: applying.ApplyResult, plan: dict, show_all: bool = False):
    """One row per resource; unless `show_all`, only those created, updated or not (fully) applied."""
    from rich.table import Table

    table = Table(title=f"apply: project {plan['gcp_project']} on {result.target}", title_justify="left")
    for column in ("resource", "kind", "outcome", "detail"):
        table.add_column(column, overflow="fold")
    for entry in by_resource(result):
        if not (show_all or entry.notable):
            continue
        style = _STYLES.get(entry.action, "")
        label = f"[{style}]{entry.action}[/]"
        if entry.action != applying.NOT_APPLIED and applying.NOT_APPLIED in entry.actions:
            label += f", [{_STYLES[applying.NOT_APPLIED]}]partly {applying.NOT_APPLIED}[/]"
        table.add_row(_short(entry.path), entry.kind, label, "; ".join(entry.details))
    return table


def comparison_table(wanted: dict[str, dict], held: dict[str, dict | None], diffs: list[readback.Difference],
                     show_all: bool = False, source: str = ""):
    """Declared settings beside what the target holds, differences marked; unless `show_all`, only
    the differences (and missing resources). Settings the plan leaves to the service's default are
    shown as "(default)" (when the target holds a value for them) and not compared."""
    from rich.table import Table

    differing = {(d.path, d.setting) for d in diffs}
    table = Table(title=f"declared{f' ({source})' if source else ''} vs. actual"
                        + ("" if show_all else ": differences (--show all for every setting)"),
                  title_justify="left")
    table.add_column("resource", overflow="fold")
    table.add_column("setting")
    table.add_column("declared", overflow="fold")
    table.add_column("actual", overflow="fold")
    table.add_column("", justify="center")
    for path, settings in wanted.items():
        actual = held.get(path)
        first = _short(path)
        if actual is None:
            table.add_row(first, Setting.EXISTS, "True", "[red]False[/]", f"[bold red]{DIFFERS}[/]")
            continue
        # Settings the plan leaves to the service: shown when the target holds a value for them.
        names = list(settings) + [name for name in actual if name not in settings and actual[name] is not None]
        rows = 0
        for name in names:
            mark = (path, name) in differing
            if name == "kind" or not (show_all or mark):
                continue
            declared_text = _show(settings[name]) if name in settings else "[dim](default)[/]"
            actual_text = _show(actual.get(name))
            table.add_row(
                first, name, declared_text,
                f"[red]{actual_text}[/]" if mark else actual_text,
                f"[bold red]{DIFFERS}[/]" if mark else "",
            )
            first = ""
            rows += 1
        if rows:
            table.add_section()
    return table


EXAMPLES = 5  # differences named in the summary line; the table lists them all


def summary(result: applying.ApplyResult, diffs: list[readback.Difference]) -> str:
    """Counts per resource (each once, by its own fate), what was not created, the differences."""
    entries = by_resource(result)
    fates = [entry.action for entry in entries]
    counts = ", ".join(
        f"{action} {fates.count(action)}"
        for action in (applying.CREATED, applying.UPDATED, applying.UNCHANGED, applying.NOT_APPLIED,
                       applying.FAILED, applying.NOT_ATTEMPTED)
        if fates.count(action)
    )
    partly = sum(1 for entry in entries if entry.action != applying.NOT_APPLIED and applying.NOT_APPLIED in entry.actions)
    lines = [f"apply: {counts}" + (f"; {partly} of them partly not applied (a setting the target refused)" if partly else "")
             + f" ({len(entries)} resources, each counted once)."]
    if not result.changed:
        lines.append("apply: nothing changed on the emulator.")
    if not result.complete:
        missing = [entry.path for entry in entries if entry.action in applying.PROBLEMS]
        lines.append(f"apply: INCOMPLETE: {len(missing)} not created: {', '.join(map(_short, missing))}.")
    if diffs:
        named = "; ".join(f"{_short(d.path)} {d.setting}" for d in diffs[:EXAMPLES])
        more = f"; and {len(diffs) - EXAMPLES} more" if len(diffs) > EXAMPLES else ""
        lines.append(f"readback: {len(diffs)} difference{'s' if len(diffs) != 1 else ''} between declared and actual "
                     f"(marked {DIFFERS} above): {named}{more}.")
    else:
        lines.append("readback: the emulator holds every declared setting as declared.")
    return "\n".join(lines)
