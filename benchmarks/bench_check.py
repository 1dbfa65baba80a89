"""Benchmark (not a test): plan + check of a generated estate, end to end and the check alone.

    .venv/bin/python benchmarks/bench_check.py                 # 100, 1000 and 3000 topics
    .venv/bin/python benchmarks/bench_check.py --topics 1000   # one size
    .venv/bin/python benchmarks/bench_check.py --language nodejs --topics 1000   # the TypeScript program
    .venv/bin/python benchmarks/bench_check.py --formats --topics 1000   # each CLI format vs text (issue 45)

Each topic has 3 subscriptions (pull; exactly-once pinned to a region; ordered), and every tenth
topic's pull subscription dead-letters into an auto-created topic with its drain and service-agent
IAM, so the stack rules have real work. The estate is written as `pubsub:estate` stack config in a
temporary project whose `main` is this repository's `infra/`, and planned with the real program.
Runs what `pubsubguard check` runs (`check.judge_program`: the pack judges each resource while the
program registers them) and prints resources; seconds until the program is done (plan), after it
(check: the remaining Analyze calls and AnalyzeStack) and in total; CPU seconds of this process and the
pack process (comparable across loaded and idle machines); milliseconds per resource; the seconds of
`check --plan` on the saved plan (the pack alone, not overlapped: default pack processes); the peak
memory of this process (the program), of the judge process and of its pack process (`pubsubguard check`
runs the same three); and the ratio of the total to the goal.
Goals (issue 17): plan + check of 1,000 topics <= 10 s; of 10,000 topics <= 60 s and <= 1 GiB.
Goal (issue 23): plan + check within 1.25x the pulumi SDK's own unit-test mocks running the same program
(`pulumi.runtime.set_mocks`, preview, in one process: the `mocks s` column, measured in the same run).

Goal (issue 39): the same for TypeScript (`--language nodejs`, benchmarks/bench_nodejs.py): plan + check within
1.25x the Node SDK's mocks (`pulumi.runtime.setMocks`) running the same program, both with ts-node.

Run each size in its own process (`--topics N` once per run) for a clean peak-memory figure.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import yaml

from pubsubguard import judging
from pubsubguard.judging.judge import default_workers
from pubsubguard.core import plan as planning

ROOT = Path(__file__).resolve().parent.parent


def estate(topics: int) -> dict:
    items = []
    for index in range(topics):
        name = f"topic-{index:05d}"
        pull = {"name": f"{name}-pull", "expiration": "never"}
        if index % 10 == 0:
            pull["dead_letter"] = {"max_delivery_attempts": 10}
        items.append({
            "name": name,
            "publisher_region": "us-east1",
            "persistence_regions": ["us-east1"],
            "subscriptions": [
                pull,
                {"name": f"{name}-exactly-once", "exactly_once": True, "consumer_region": "us-east1", "ack_deadline_seconds": 60},
                {"name": f"{name}-ordered", "ordering": True, "consumer_region": "us-east1"},
            ],
        })
    return {"probe_isolation": True, "topics": items}


def write_project(directory: Path, the_estate: dict, stack: str = "bench") -> None:
    """A project in `directory` whose program is this repository's infra/, with stack `stack` declaring `the_estate`."""
    (directory / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "pubsubguard", "main": str(ROOT / "infra"),
        "runtime": {"name": "python", "options": {"virtualenv": sys.prefix}}}))  # this environment, as the CLI would
    config = {"gcp:project": "bench-project", "pubsubguard:projectNumber": "100000000001", "pubsubguard:estate": the_estate}
    (directory / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": config}))


def project(directory: Path, topics: int) -> None:
    write_project(directory, estate(topics))


GOALS_S = {1000: 10.0, 10000: 60.0}
GOAL_MEMORY_MIB = 1024


def language_project(root: Path, topics: int, language: str) -> None:
    """The estate's project in `root`: this repository's infra/ (Python), or its TypeScript twin."""
    if language == "nodejs":
        import bench_nodejs

        bench_nodejs.project(root, estate(topics))
    else:
        project(root, topics)


def measure(topics: int, language: str = "python") -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        root = Path(tmp)
        language_project(root, topics, language)
        cpu_start = _cpu()
        timings: dict = {}
        judged = judging.judge_program(planning.read_inputs(root, "bench"), source="Pulumi.bench.yaml", timings=timings)
        plan, result = judged.run.plan, judging.compose(judged.judgement)
        cpu_end = _cpu()
        self_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the in-process check below
        # The check of a saved plan alone (`pubsubguard check --plan`): the pack's own cost, not overlapped.
        alone_start = time.perf_counter()
        judging.judge_plan(plan, source="Pulumi.bench.yaml")
        alone_s = time.perf_counter() - alone_start
        if language == "python":
            mocks_s = mocks_seconds(root)
        else:
            import bench_nodejs

            mocks_s = bench_nodejs.mocks_seconds(root)
    return {
        "mocks_s": mocks_s,
        "topics": topics, "resources": len(plan["resources"]), "plan_s": timings["plan_s"], "check_s": timings["check_s"],
        "cpu_s": cpu_end - cpu_start, "check_alone_s": alone_s,
        "workers": default_workers(len(plan["resources"])), "total_s": timings["plan_s"] + timings["check_s"],
        "mandatory": len(result.mandatory), "advisory": len(result.advisory),
        "self_mib": self_mib,
        "judge_mib": timings.get("judge_mib", 0.0), "pack_mib": timings.get("pack_mib", 0.0),
    }


MOCKS = """
import asyncio, json, os, runpy, sys, time
started = time.perf_counter()
os.environ.update(json.load(open(sys.argv[2])))  # PULUMI_CONFIG: too large for one environment variable
import pulumi
from pulumi.runtime import mocks

class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return ["", dict(args.inputs)]

    def call(self, args):
        return {}

pulumi.runtime.set_all_config(pulumi.runtime.get_config_env(), pulumi.runtime.get_config_secret_keys_env())
loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
pulumi.runtime.set_mocks(Mocks(), project="pubsubguard", stack="bench", preview=True)
from pulumi.runtime.stack import wait_for_rpcs  # set_mocks made the root stack: run the program in it
runpy.run_path(sys.argv[1], run_name="__main__")
loop.run_until_complete(wait_for_rpcs())
print(time.perf_counter() - started)
"""


def mocks_seconds(root: Path) -> float:
    """Wall seconds of the same program under the SDK's unit-test mocks, in a fresh process (imports
    included, as the check's own program process pays them)."""
    import json
    import subprocess

    from pubsubguard.core import project as projects

    project = projects.read_project(root)
    config = projects.read_stack_config(project, "bench")
    env = {**os.environ, "PULUMI_PROJECT": project.name, "PULUMI_STACK": "bench"}
    (root / "config.json").write_text(json.dumps(config.env()))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", MOCKS, str(project.main), str(root / "config.json")], env=env,
                          cwd=str(project.program_dir),
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the mocks run failed: {done.stderr.strip().splitlines()[-1:]}")
    json.loads(done.stdout.strip().splitlines()[-1])
    return wall


def plan_only(sizes: list[int]) -> int:
    from pubsubguard.core import plan as planning

    print(f"load average {os.getloadavg()[0]:.1f} at start")
    print(f"{'topics':>7} {'resources':>9} {'plan s':>7} {'cpu s':>7} {'cpu ms/res':>10} {'peak MiB':>8}")
    for topics in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-plan-") as tmp:
            project(Path(tmp), topics)
            wall, cpu = time.perf_counter(), _cpu()
            plan = planning.make_plan("bench", Path(tmp))
            wall, cpu = time.perf_counter() - wall, _cpu() - cpu
        resources = len(plan["resources"])
        print(f"{topics:>7} {resources:>9} {wall:>7.2f} {cpu:>7.2f} {1000 * cpu / resources:>10.2f} "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:>8.0f}", flush=True)
    return 0


CLI_FORMATS = (("text", ()), ("json", ("--format", "json")), ("sarif", ("--format", "sarif")),
               ("text + summary", ("--summary", "summary.md")))  # what a pull request's CI reads


def _cli(root: Path, *args: str) -> float:
    """Wall seconds of one `pubsubguard` command in `root` (its report to a file, as CI keeps it)."""
    import subprocess

    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pubsubguard", *args, "--out", str(root / "report")], cwd=root,
                          capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if done.returncode not in (0, 1):
        raise SystemExit(f"pubsubguard {' '.join(args)} failed: {done.stderr.strip()}")
    return time.perf_counter() - started


def formats(sizes: list[int], language: str) -> int:
    """`pubsubguard check` through the command line in each format, on the program and on its saved plan
    (`--plan`): each format's seconds and its ratio to the text format's (issue 45: within 1.10x)."""
    print(f"{'topics':>7} {'format':>15} {'check s':>8} {'/text':>6} {'--plan s':>8} {'/text':>6} {'load':>5}")
    for topics in sizes:
        with tempfile.TemporaryDirectory(prefix="bench-formats-") as tmp:
            root = Path(tmp)
            language_project(root, topics, language)
            import subprocess

            subprocess.run([sys.executable, "-m", "pubsubguard", "plan", "-s", "bench", "--out", str(root / "plan.json")],
                           cwd=root, capture_output=True, check=True, stdin=subprocess.DEVNULL)
            base: dict[str, float] = {}
            for name, extra in CLI_FORMATS:
                load = os.getloadavg()[0]
                check_s = _cli(root, "check", "-s", "bench", *extra)
                plan_s = _cli(root, "check", "--plan", str(root / "plan.json"), *extra)
                base = base or {"check": check_s, "plan": plan_s}
                print(f"{topics:>7} {name:>15} {check_s:>8.2f} {check_s / base['check']:>5.2f}x {plan_s:>8.2f} "
                      f"{plan_s / base['plan']:>5.2f}x {load:>5.1f}", flush=True)
    return 0


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the pack processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, action="append", help="estate size in topics (repeatable; default 100, 1000, 3000)")
    parser.add_argument("--language", choices=("python", "nodejs"), default="python",
                        help="the program: this repository's infra/ (Python), or the same estate in TypeScript "
                             "(benchmarks/bench_nodejs.py; its mocks are the Node SDK's setMocks)")
    parser.add_argument("--plan-only", action="store_true",
                        help="only run the program (`pubsubguard plan`): its wall and CPU seconds and peak memory")
    parser.add_argument("--formats", action="store_true",
                        help="`pubsubguard check` through the command line in each format (text, json, sarif, text "
                             "with --summary), on the program and with --plan: seconds and ratio to text")
    args = parser.parse_args(argv)
    sizes = args.topics or [100, 1000, 3000]
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    if args.plan_only:
        return plan_only(sizes)
    if args.formats:
        return formats(sizes, args.language)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f} at start (wall times stretch when other work shares the cores)")
    print(f"{'topics':>7} {'resources':>9} {'plan s':>7} {'check s':>7} {'total s':>7} {'cpu s':>7} "
          f"{'ms/res':>6} {'mocks s':>7} {'/mocks':>6} {'--plan s':>8} {'self MiB':>8} {'judge MiB':>9} {'pack MiB':>8} {'sum MiB':>7} {'goal':>6} {'ratio':>5} {'mand.':>5} {'adv.':>6}")
    for topics in sizes:
        m = measure(topics, args.language)
        goal = GOALS_S.get(topics) if args.language == "python" else None  # issue 17: the Python program
        print(f"{m['topics']:>7} {m['resources']:>9} {m['plan_s']:>7.2f} {m['check_s']:>7.2f} {m['total_s']:>7.2f} "
              f"{m['cpu_s']:>7.2f} {1000 * m['total_s'] / m['resources']:>6.2f} {m['mocks_s']:>7.2f} "
              f"{m['total_s'] / m['mocks_s']:>5.2f}x {m['check_alone_s']:>8.2f} "
              f"{m['self_mib']:>8.0f} {m['judge_mib']:>9.0f} {m['pack_mib']:>8.0f} "
              f"{m['self_mib'] + m['judge_mib'] + m['pack_mib']:>7.0f} "
              f"{(f'{goal:.0f} s' if goal else '-'):>6} {(format(m['total_s'] / goal, '.1f') + 'x' if goal else '-'):>5} "
              f"{m['mandatory']:>5} {m['advisory']:>6}", flush=True)
    print(f"memory: peaks of this process (the program), the command's judge process (the pack's client) and its "
          f"pack process; goal at 10,000 topics: their sum <= {GOAL_MEMORY_MIB} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
