"""A verification run's configuration: its options, declared once, and `RunConfig`, the frozen value built
once from them and passed down (target, driver, probe, checks, report never read an argparse namespace
and never change what they were given).

`add_arguments(parser, project=...)` is the one set of options, with their validators (a bad value is one
line naming what was expected, exit 2), used by both command lines: `spark-submit ... validation/job.py`
(the project is `--stack`/`--root`) and `pubsubguard verify` (the project is the CLI's `-s`/`-C`,
passed as `project`).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from pubsubguard.core.arguments import (
    input_file, non_negative_int, or_checkpoint, output_directory, port, positive_int, positive_seconds, remote_or,
)
from pubsubguard.core.errors import UserError
from pubsubguard.policies import pubsub_facts as facts

from .checks.findings import DEFAULT_SKEW_US
from .probe.faults import Faults
from .session import DEFAULT_MASTER

if TYPE_CHECKING:
    from .wire.schedule import Schedule

# Deliveries the expire and crash faults hold get this ack deadline (ModifyAckDeadline): Pub/Sub's smallest
# subscription deadline and the client library's default lease, so a fault costs 10 s, not the declared
# deadline (60 s on exactly-once subscriptions). `--fault-deadline declared` keeps the subscription's.
DEFAULT_FAULT_DEADLINE_S = float(facts.ACK_DEADLINE_MIN_S)
EXPIRE_MARGIN_S = 2.0  # an expired delivery is acked this long after its deadline
# Added to the default drain timeout (driver.default_drain_timeout): dead-lettering's repeated attempts
# after their backoffs, scheduling, an evidence flush.
DRAIN_SLACK_S = 30.0

# Spark master URLs (Spark's "Master URLs" documentation): local, local[N], local[*], local[N,F],
# local[*,F], local-cluster[N,C,M], spark://HOST:PORT[,HOST:PORT...], yarn, k8s://..., mesos://...
_MASTER = re.compile(
    r"local(\[([1-9]\d*|\*)(,[1-9]\d*)?\])?"
    r"|local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"
    r"|spark://[\w.-]+:\d{1,5}(,[\w.-]+:\d{1,5})*"
    r"|yarn"
    r"|k8s://\S+"
    r"|mesos://\S+"
)
MASTER_FORMS = "local, local[N], local[*], local[N,F], spark://HOST:PORT, yarn, k8s://URL or mesos://URL"


def publish_rate(text: str) -> float:
    """--rate: messages per second, a number greater than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected messages per second (a number greater than 0), got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected messages per second (a number greater than 0), got {text}")
    return value


@dataclass(frozen=True)
class RunConfig:
    """What a verification run was asked to do (the options' values, by their names), each parsed once, at the
    command line: `faults` the parsed `Faults`, `nemesis` the loaded and validated schedule, `endpoint` the
    endpoint map ({declared endpoint: host:port}). Nothing downstream parses an option again."""

    # what to verify
    stack: str | None = None
    root: Path | None = None
    plan: Path | str | None = None
    state: Path | str | None = None  # "" : the stack's checkpoint in its backend
    target: str = "emulator"
    project: str | None = None
    endpoint: dict[str, str] = field(default_factory=dict)  # --endpoint: declared endpoint -> host:port dialled
    push_receiver: str | None = None
    push_port: int = 8080
    allow_shared_subscriptions: bool = False
    # workload
    faults: Faults = Faults()
    nemesis: Schedule | None = None  # the fault layer's schedule (pubsubguard.validation.wire.nemesis)
    keys: int = 8
    messages_per_key: int = 25
    subscribers: int = 2
    fault_deadline: float | None = DEFAULT_FAULT_DEADLINE_S  # None: each subscription's own
    drain_timeout: float | None = None  # None: the drain's ceiling is derived from the run (validation/probe/drain_clock.py)
    rate: float | None = None  # messages published per second, over all publisher tasks (None: in-flight bound only)
    conform: bool = False
    conform_apart: str | None = None  # host:port of a second emulator for the scenarios that disturb the target
    skew_us: int = DEFAULT_SKEW_US
    # output
    report: Path | str | None = None
    from_evidence: Path | str | None = None
    cleanup: bool = False
    master: str | None = None
    no_progress: bool = False
    no_checks_input: bool = False
    partial_evidence: bool = False

    @classmethod
    def from_options(cls, options: argparse.Namespace, **overrides) -> "RunConfig":
        """The run's configuration from parsed options (those this class names; others are the command's)."""
        values = {f.name: getattr(options, f.name) for f in fields(cls) if hasattr(options, f.name)}
        values["endpoint"] = dict(values.get("endpoint") or {})
        values["faults"] = values.get("faults") or Faults()
        return cls(**{**values, **overrides})

    def but(self, **changes) -> "RunConfig":
        """A copy with `changes` (the value itself never changes)."""
        return replace(self, **changes)


def host_port(text: str) -> str:
    """`HOST:PORT` as given, once it parses (a port from 1 to 65535)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT")
    return text


def fault_deadline(text: str) -> float | None:
    """`--fault-deadline`: seconds (1..600, what ModifyAckDeadline accepts) or `declared` (None)."""
    if text.strip() == "declared":
        return None
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 1 <= value <= facts.ACK_DEADLINE_MAX_S or value != int(value):
        raise argparse.ArgumentTypeError(f"{text!r}: expected whole seconds from 1 to {facts.ACK_DEADLINE_MAX_S}, "
                                         "or `declared`")
    return value


def faults(text: str) -> Faults:
    """`--faults`: the parsed `Faults` (pubsubguard.validation.probe.faults holds the grammar)."""
    from .probe.faults import parse_faults

    try:
        return parse_faults(text)
    except UserError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--faults: ")) from None


def nemesis_schedule(text: str) -> "Schedule":
    """`--nemesis FILE`: the schedule, read and validated (pubsubguard.validation.wire.nemesis)."""
    from .wire.schedule import load_schedule

    try:
        return load_schedule(text)
    except UserError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--nemesis ")) from None


class EndpointMap(argparse.Action):
    """`--endpoint REGION=HOST:PORT`, repeatable: the endpoint map ({declared endpoint: host:port}), each item
    parsed as it is given (pubsubguard.validation.wire.endpoints); a region given twice is refused."""

    def __call__(self, parser, namespace, text, option_string=None):
        from .wire.endpoints import parse_endpoint_map

        try:
            mapping = parse_endpoint_map([text], getattr(namespace, self.dest, None) or {})
        except UserError as err:
            raise argparse.ArgumentError(self, str(err).split(": ", 1)[1]) from None
        setattr(namespace, self.dest, mapping)


def spark_master(text: str) -> str:
    if not _MASTER.fullmatch(text.strip()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Spark master URL (expected {MASTER_FORMS})")
    return text.strip()


def evidence_directory(text: str) -> Path:
    path = Path(text).expanduser()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory (expected the evidence/ directory of a report)")
    return path


def job_project_arguments(parser: argparse.ArgumentParser) -> None:
    """How spark-submit's job names the project: `--stack` (planned offline) and `--root`."""
    parser.add_argument("--stack", default=None, help="stack whose plan is made offline (default: dev)")
    parser.add_argument("--root", type=Path, default=None, help="project directory holding Pulumi.yaml")


def add_arguments(parser: argparse.ArgumentParser,
                  project: Callable[[argparse.ArgumentParser], None] = job_project_arguments) -> None:
    """The run's options (every `RunConfig` field), and the project's, as `project` adds them, in the groups
    `--help` shows: what to verify, the workload, the output."""
    project(parser)
    _what_to_verify(parser.add_argument_group("what to verify"))
    _workload(parser.add_argument_group("workload"))
    _output(parser.add_argument_group("output"))


def _what_to_verify(source) -> None:
    """The declared estate (a plan, a deployed state), the target and how it is reached."""
    source.add_argument("--plan", type=remote_or(input_file), default=None, metavar="FILE",
                        help="a plan FILE or URI (gs://, s3a://, hdfs://) (`pubsubguard plan --out`) instead of "
                             "planning --stack")
    source.add_argument("--state", type=or_checkpoint(remote_or(input_file)), nargs="?", const="", default=None,
                        metavar="FILE",
                        help="verify what `pulumi up` deployed: a `pulumi stack export` FILE or URI (gs://, s3a://) "
                             "instead of a plan, judged under the deployed names; `--state` alone with --stack: that "
                             "stack's checkpoint in a self-managed backend (PULUMI_BACKEND_URL=file://DIR)")
    source.add_argument("--target", choices=("emulator", "gcp"), default="emulator",
                        help="where the estate is deployed: emulator (PUBSUB_EMULATOR_HOST, else this project's "
                             "`pubsubguard emulator`) or gcp (Application Default Credentials)")
    source.add_argument("--project", default=None, help="Google Cloud project (default: the plan's gcp:project)")
    source.add_argument("--endpoint", action=EndpointMap, default=None, metavar="REGION=HOST:PORT",
                        help="map a declared locational endpoint (REGION, or `global` for the global endpoint) to a "
                             "host; repeatable. A loopback host is dialled without TLS or credentials and its "
                             "traffic is recorded (endpoint_pinning); tls:HOST:PORT is a TLS endpoint at another "
                             "address (dialled with TLS and the credentials)")
    source.add_argument("--push-receiver", default=None, metavar="URL",
                        help="on gcp, a URL Pub/Sub can push to that reaches the probe's push receiver on loopback "
                             "port --push-port; push subscriptions are probed through it (else not_tested)")
    source.add_argument("--push-port", type=port, default=8080,
                        help="the loopback port of the probe's push receiver with --push-receiver")
    source.add_argument("--allow-shared-subscriptions", action="store_true",
                        help="on gcp, probe although production subscriptions do not exclude probe messages")


def _workload(work) -> None:
    """What the probe publishes and reads, and the faults it injects."""
    work.add_argument("--faults", type=faults, default=Faults(),
                      help="faults to inject: nack=F,expire=F,poison=F (fractions 0..1), crash=N (subscriber tasks "
                           "killed), misroute=1 (publishers on the global endpoint); "
                           "e.g. nack=0.1,expire=0.05,poison=0.01,crash=1 (default: none)")
    work.add_argument("--nemesis", type=nemesis_schedule, default=None, metavar="FILE",
                      help="a fault schedule (YAML or JSON, docs/schemas/nemesis.schema.json) the fault layer on the "
                           "wire applies: planted anomalies (drop_delivery, duplicate_after_ack, ack_lie, swap, "
                           "strip_dead_letter_attributes) and network faults (kill_stream, lose_response, delay, "
                           "partition); docs/verification.md")
    work.add_argument("--keys", type=positive_int, default=8, help="ordering keys per topic")
    work.add_argument("--messages-per-key", type=positive_int, default=25, help="messages published per key")
    work.add_argument("--subscribers", type=positive_int, default=2, help="subscriber tasks")
    work.add_argument("--fault-deadline", type=fault_deadline, default=DEFAULT_FAULT_DEADLINE_S, metavar="SECONDS",
                      help="ack deadline the probe sets (ModifyAckDeadline) on deliveries the expire and crash faults "
                           "hold, so they come back after it; `declared` keeps each subscription's own "
                           f"(default {DEFAULT_FAULT_DEADLINE_S:.0f}, Pub/Sub's smallest)")
    work.add_argument("--drain-timeout", type=positive_seconds, default=None,
                      help="the drain's ceiling: seconds after the last publish to wait at most while the target "
                           "still delivers (default: derived from the run: the fault deadline (push: the ack "
                           f"deadline) + {EXPIRE_MARGIN_S:.0f} s expire margin + the longest retry backoff + "
                           f"{DRAIN_SLACK_S:.0f} s, + 3x the time the measured settle rate needs for what is not "
                           "settled when publishing ends); a target that stops delivering ends the drain sooner")
    work.add_argument("--rate", type=publish_rate, default=None, metavar="MSG/S",
                      help="publish at this many messages per second over all publisher tasks (default: as fast as "
                           "the target settles: at most 2,000 message-subscription pairs published and not settled "
                           "over all publisher tasks, and 1,000 publishes unanswered per task)")
    work.add_argument("--conform", action="store_true",
                      help="run the conformance scenarios (pubsubguard.validation.conformance) on the same target, "
                           "beside the probe; the report names, per finding, the violated scenarios that explain it")
    work.add_argument("--conform-apart", type=host_port, default=None, metavar="HOST:PORT",
                      help="with --conform on the emulator: a second emulator, started with the same command as the "
                           "target, on which the scenarios that disturb the target's other subscriptions run at once, "
                           "beside the probe, instead of after its drain (`pubsubguard run` starts one)")
    work.add_argument("--skew-us", type=non_negative_int, default=DEFAULT_SKEW_US,
                      help="clock skew tolerated between tasks, in microseconds")


def _output(out) -> None:
    """Where the report goes, what is re-checked, how Spark runs, what the terminal shows."""
    out.add_argument("--report", type=remote_or(output_directory), default=None, metavar="DIR",
                     help="report DIRECTORY: report.json, report.html and evidence/ (default: "
                          "<project>/out/<stack>/report; with --from-evidence DIR: the evidence's own recheck/, "
                          "never beside it; a URI with --from-evidence only)")
    out.add_argument("--from-evidence", type=remote_or(evidence_directory), default=None, metavar="DIR",
                     help="re-run checks and report on recorded evidence only (no target needed)")
    out.add_argument("--partial-evidence", action="store_true",
                     help="with --from-evidence: judge what is intact of evidence that does not match its seal (files "
                          "missing, extra, truncated, changed) or is unsealed; the report names what was not read and "
                          "every guarantee whose rows were lost is inconclusive, never holds (without it: exit 2)")
    out.add_argument("--cleanup", action="store_true", help="delete probe twins left by killed runs, then exit")
    out.add_argument("--master", type=spark_master, default=None,
                     help=f"Spark master URL ({MASTER_FORMS}) when none is configured (spark-submit's --master "
                          f"wins; default: {DEFAULT_MASTER})")
    out.add_argument("--no-progress", action="store_true",
                     help="no progress bars (the summary, observations and verdict still go to stdout)")
    out.add_argument("--no-checks-input", action="store_true",
                     help="neither keep the checks' sorted input in <evidence>/checks-input/ nor read one kept "
                          "there: every check of evidence not in the probe's bucketed layout reads, shuffles and "
                          "sorts the log (for evidence nothing may be written to)")
