"""`pubsubguard conform`: directed conformance scenarios on a target (validation/conformance/runner.py).

Each scenario runs on its own throwaway topics and subscriptions named with the run id, deleted
afterwards (also on Ctrl-C / SIGTERM), never on a declared estate. Writes `DIR/conformance.json` and
prints one row per scenario. Exit 0: no scenario violated; 1: at least one violated; 2: usage or
environment error; 130: interrupted.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pubsubguard.commands import options
from pubsubguard.validation.probe.access import check_credentials
from pubsubguard.core.errors import UserError

DEFAULT_EMULATOR_PROJECT = "pubsubguard-conform"
RESULT_STYLE = {"holds": "green", "violated": "bold red", "unsupported": "yellow", "inconclusive": "cyan"}


class ConformError(UserError):
    pass


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "conform", "directed scenarios: which documented Pub/Sub behaviours does the target keep?",
        exit_codes={0: "no scenario violated", 1: "at least one scenario violated",
                    2: "bad option; no emulator, credentials or project"},
        example="pubsubguard conform --target emulator --report out/conform",
    )
    options.add_project_argument(parser)
    parser.add_argument("--target", choices=("emulator", "gcp"), default="emulator",
                        help="emulator: PUBSUB_EMULATOR_HOST, else one started for the run; gcp: Google Cloud "
                             "with application default credentials")
    parser.add_argument("--project", default=None,
                        help=f"project for the throwaway resources (required with gcp; emulator default: "
                             f"{DEFAULT_EMULATOR_PROJECT})")
    parser.add_argument("--project-number", default=None,
                        help="gcp: the project's number, to grant the Pub/Sub service agent its dead-letter roles")
    parser.add_argument("--region", default=None,
                        help="gcp: use the locational endpoint REGION-pubsub.googleapis.com:443 for every client "
                             "(exactly-once holds only for subscribers of one region; default: the global endpoint)")
    parser.add_argument("--report", type=options.output_directory, default=None, metavar="DIR",
                        help="output DIRECTORY for conformance.json (default: <project>/out/conform)")
    parser.add_argument("--scenario", action="append", default=None, metavar="ID",
                        help="run only this scenario (repeatable; default: all)")
    parser.add_argument("--self-test", action="store_true",
                        help="prove the verifier first: verify a built-in estate on the emulator with planted "
                             "anomalies (the fault layer answers wrongly, with a known truth) and check that the "
                             "checks report exactly them; last line `self-test: planted N/N found, 0 unplanted "
                             "errors, A unplanted advisories` (exit 0 only then; each unplanted finding named)")
    parser.set_defaults(run=run)


def _select(ids: list[str] | None):
    from pubsubguard.validation.conformance.runner import SCENARIOS

    if not ids:
        return list(SCENARIOS)
    known = {s.id: s for s in SCENARIOS}
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise ConformError(f"--scenario {', '.join(unknown)}: unknown; expected one of {', '.join(known)}")
    return [known[i] for i in ids]


def _check_gcp(project: str | None) -> None:
    if not project:
        raise ConformError("--target gcp needs --project (the project that holds the throwaway resources)")
    if os.environ.get("PUBSUB_EMULATOR_HOST"):
        raise ConformError("--target gcp: PUBSUB_EMULATOR_HOST is set, so clients would talk to an emulator; unset it")
    check_credentials()


def _locational_endpoint(region: str | None) -> str | None:
    from pubsubguard.policies import pubsub_facts as facts

    if region is None:
        return None
    if not facts.REGION_RE.fullmatch(region):
        raise ConformError(f"--region {region!r}: expected a region such as us-east1")
    return facts.locational_endpoint(region)


def print_table(doc: dict, report: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"conformance on {doc['target']}" + (f" ({doc['endpoint']})" if doc["endpoint"] else ""),
                  show_lines=True)
    table.add_column("scenario", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("s", justify="right")
    table.add_column("what the target did")
    for item in doc["scenarios"]:
        table.add_row(item["id"], f"[{RESULT_STYLE[item['result']]}]{item['result']}[/]", f"{item['duration_s']:.0f}",
                      item["detail"])
    console = Console()
    if not console.is_terminal:  # a log or a pipe: wide rows rather than 80 columns of wrapped detail
        console = Console(width=160)
    console.print(table)
    counts = ", ".join(f"{n} {r}" for r, n in doc["summary"].items())
    console.print(f"conform: {len(doc['scenarios'])} scenarios in {doc['duration_s']:.0f} s: {counts}; "
                  f"run {doc['run_id']}, {len(doc['cleanup']['deleted'])} throwaway resources deleted"
                  + (f", [bold red]{len(doc['cleanup']['failed'])} NOT deleted[/]" if doc["cleanup"]["failed"] else "")
                  + f"; evidence: {report / 'conformance.json'}", highlight=False)


def run(args) -> int:
    from pubsubguard.validation.conformance import runner

    scenarios = _select(args.scenario)
    report = (args.report or args.root / "out" / "conform").resolve()
    try:
        report.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConformError(f"--report {args.report}: cannot create it: {err.strerror}") from None

    emulator = None
    if args.self_test and (args.target == "gcp" or args.scenario or args.region):
        raise ConformError("--self-test runs on the emulator only (the fault layer in front of Google's endpoints, "
                           "TLS onward, is not built yet) and takes no --scenario or --region")
    if args.target == "gcp":
        _check_gcp(args.project)
        project, endpoint = args.project, _locational_endpoint(args.region)
    elif args.region:
        raise ConformError("--region: only with --target gcp (the emulator has one endpoint)")
    else:
        from pubsubguard.core.emulator import Emulator, running_host

        project = args.project or DEFAULT_EMULATOR_PROJECT
        if os.environ.get("PUBSUB_EMULATOR_HOST"):
            endpoint = running_host()
        else:
            print("conform: starting the Pub/Sub emulator on a free loopback port", flush=True)
            emulator = Emulator.start(project=project, state_dir=report / "emulator")
            os.environ["PUBSUB_EMULATOR_HOST"] = endpoint = emulator.host
    try:
        if args.self_test:
            from pubsubguard.validation.selftest import self_test

            return self_test(report / "self-test", log=lambda line: print(line, flush=True))
        return _run(args, runner, scenarios, project, endpoint, report)
    finally:
        if emulator is not None:
            emulator.stop()
            os.environ.pop("PUBSUB_EMULATOR_HOST", None)


def _run(args, runner, scenarios, project: str, endpoint: str | None, report: Path) -> int:
    run_id = runner.new_run_id()
    print(f"conform: {len(scenarios)} scenarios on {args.target}{f' {endpoint}' if endpoint else ''}, "
          f"project {project}, run {run_id}", flush=True)
    doc = runner.conform(
        args.target, project, project_number=args.project_number, endpoint=endpoint, scenarios=scenarios, run_id=run_id,
        on_done=lambda r: print(f"  {r['id']}: {r['result']} ({r['duration_s']:.0f} s)", flush=True),
        log=lambda line: print(line, flush=True), client_log=report / "client-log-conformance.txt")
    path = report / "conformance.json"
    path.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    print_table(doc, report)
    from pubsubguard.validation.conformance.beside import library_note

    note = library_note("scenarios", doc["client_log"])
    if note:
        print(f"conform: {note}", flush=True)
    return runner.exit_code(doc)
