"""Compare what two revisions of pubsubguard print, program by program: the measure of a refactoring
that must not change any output (issue 38: "same outputs before and after").

    .venv/bin/python scripts/compare_outputs.py main            # main against this work tree
    .venv/bin/python scripts/compare_outputs.py main h38c       # two revisions
    .venv/bin/python scripts/compare_outputs.py main --cache out/compare   # keep each commit's outputs

Programs run with this interpreter (`--python`: a program's own virtualenv need not exist). Each
revision is checked out in a temporary worktree (`git worktree add --detach`; the work tree itself
when no second revision is named) and run with this interpreter (`python -m pubsubguard`, the revision's
folder first on PYTHONPATH) and this checkout's pack virtualenv (`policies/venv`, linked in). Per
program of `tests/corpus/` and `examples/` (its one `Pulumi.<stack>.yaml`):
- `check --format text|json|sarif`, and `--create-baseline`;
- the same three formats on a copy of the program with every kind of suppression: a comment
  `# pubsubguard: ignore[rule] reason` above the first violation's line, a `--suppressions` file for the
  second, a `--baseline` holding the rest but the last one, plus an entry found no more, and
  `--unknowns fail`;
- the GitHub Action's job summary of both SARIF runs (`check --summary FILE`; before it existed,
  `python -m pubsubguard.check.summary` over the two SARIF reports).
Then `plan -s dev` of the repository's own project, `check --plan` of that plan in the three formats, and
`verify --from-evidence tests/data/dev-run` (its report.json).

Every output is compared with stdout, stderr and the exit code, after normalising only what must differ
between two runs: the temporary folders' paths and the timings and timestamps report.json records. One
line per difference; exit 1 if any, 0 if none, 2 when a revision cannot be checked out.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FORMATS = ("text", "json", "sarif")
VOLATILE_KEYS = re.compile(r"(_s|_ms|_seconds|_at|time|timestamp|duration|elapsed|created|generated|started|"
                           r"finished|wall|took)$", re.IGNORECASE)


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def programs(root: Path) -> list[tuple[str, Path, str]]:
    """(name, folder, stack) of every program of tests/corpus/ and examples/ in the revision `root`."""
    found = []
    for folder in sorted([*(root / "tests" / "corpus").iterdir(), *(root / "examples").iterdir(),
                          *(root / "examples" / "invalid").iterdir()]):
        stacks = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in folder.glob("Pulumi.*.yaml")) if folder.is_dir() else []
        if (folder / "Pulumi.yaml").is_file() and len(stacks) == 1:
            found.append((folder.relative_to(root).as_posix(), folder, stacks[0]))
    return found


SHIM = '''"""compare_outputs: this revision's pubsubguard.infra, .policies and .validation (the folders
pyproject.toml's package-dir names), not those an editable install of another checkout maps."""
import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = {"pubsubguard.infra": "infra", "pubsubguard.policies": "policies", "pubsubguard.validation": "validation"}
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]


class RevisionFolders:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname not in FOLDERS:
            return None
        folder = os.path.join(ROOT, FOLDERS[fullname])
        return importlib.util.spec_from_file_location(fullname, os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])


sys.meta_path.append(RevisionFolders)
'''


class Runner:
    """Runs one revision's `pubsubguard` from its folder `root`, writing scratch files under `scratch`.
    A revision checked out beside this one gets a `sitecustomize` (`SHIM`, inside its folder, so a confined
    program sees it too) that maps the package's other folders to its own."""

    def __init__(self, root: Path, scratch: Path):
        self.root, self.scratch = root, scratch
        path = [str(root)]
        if root != REPO:
            shim = root / ".compare-shim"
            shim.mkdir(exist_ok=True)
            (shim / "sitecustomize.py").write_text(SHIM)
            path.insert(0, str(shim))
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "PUBSUBGUARD_DEBUG": ""}
        self.env.pop("VIRTUAL_ENV", None)
        # the job summary: `check --summary FILE` renders it from the check's outcome; before that,
        # `python -m pubsubguard.check.summary STACK=SARIF...` rendered it from SARIF reports
        self.summary_option = "--summary" in (root / "pubsubguard" / "commands" / "check.py").read_text()

    def run(self, *args: str, cwd: Path | None = None, module: str = "pubsubguard") -> dict:
        if module == "pubsubguard" and args[0] in ("check", "plan") and "--plan" not in args:
            # a program's own virtualenv may not exist here; a program importing pubsubguard imports this revision's
            args = (*args, "--python", sys.executable, "--pass-env", "PYTHONPATH")
        done = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd or self.root, env=self.env,
                              capture_output=True, text=True, timeout=900)
        return {"exit": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

    def program(self, name: str, folder: Path, stack: str) -> dict[str, dict]:
        out = self.scratch / name.replace("/", "__")
        out.mkdir(parents=True, exist_ok=True)
        results = {}
        baseline = out / "baseline.json"
        summary = out / "summary.md"
        for format_ in FORMATS:
            extra = ("--create-baseline", str(baseline)) if format_ == "json" else ()
            if format_ == "sarif" and self.summary_option:
                extra = ("--summary", str(summary))
            results[f"check {format_}"] = self.run("check", "-C", str(folder), "-s", stack, "--format", format_, *extra)
        if baseline.exists():
            results["baseline"] = {"file": baseline.read_text()}
        sarif = out / "plain.sarif"
        sarif.write_text(results["check sarif"]["stdout"])
        adopted = self.adopt(folder, out, results["check json"]["stdout"], baseline)
        for format_ in FORMATS:
            extra = ("--summary", str(summary)) if format_ == "sarif" and self.summary_option else ()
            results[f"check {format_} (suppressions, baseline, --unknowns fail)"] = self.run(
                "check", "-C", str(adopted), "-s", stack, "--format", format_, "--suppressions", str(out / "suppressions.yaml"),
                "--baseline", str(out / "adopted-baseline.json"), "--unknowns", "fail", *extra)
        (out / "adopted.sarif").write_text(results["check sarif (suppressions, baseline, --unknowns fail)"]["stdout"])
        if self.summary_option:
            text = summary.read_text() if summary.exists() else ""
            results["action summary"] = {"exit": 0, "stdout": "## pubsubguard check\n\n" + text, "stderr": ""}
        else:
            results["action summary"] = self.run(f"{stack}={sarif}", f"{stack}={out / 'adopted.sarif'}",
                                                 module="pubsubguard.check.summary")
        return results

    def adopt(self, folder: Path, out: Path, report: str, baseline: Path) -> Path:
        """A copy of the program with a suppression comment, and a suppressions file and baseline beside it."""
        copy = out / "program"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(folder, copy, symlinks=True)
        try:
            violations = json.loads(report).get("violations") or []
        except json.JSONDecodeError:
            violations = []
        def in_copy(violation: dict) -> Path | None:
            source = (self.root / str(violation.get("file") or "")).resolve()
            inside = source.is_relative_to(folder.resolve()) and source.suffix == ".py" and violation.get("urn")
            return copy / source.relative_to(folder.resolve()) if inside else None

        rest = list(violations)
        located = [v for v in violations if in_copy(v) is not None and (in_copy(v)).is_file()]
        if located:  # a comment above the line that creates the first located violation's resource
            first = located[0]
            path = in_copy(first)
            lines = path.read_text().split("\n")
            lines.insert(int(first["line"]) - 1,
                         f"# pubsubguard: ignore[{first['policy']}] compared by scripts/compare_outputs.py")
            path.write_text("\n".join(lines))
            rest.remove(first)
        entries = []
        if rest:
            second = rest.pop(0)
            entries.append({"rule": second["policy"], "resource": second["resource_name"] or second["urn"] or "stack",
                            "reason": "a suppression file's entry, compared"})
        (out / "suppressions.yaml").write_text(json.dumps({"suppressions": entries}))
        document = json.loads(baseline.read_text()) if baseline.exists() else {
            "format": "pubsubguard-baseline/1", "stack": "", "violations": []}
        kept = document["violations"][:-1] if rest else document["violations"]
        document["violations"] = kept + [{"fingerprint": "no-such-rule::pulumi:pulumi:Stack::gone", "policy": "gone"}]
        (out / "adopted-baseline.json").write_text(json.dumps(document))
        return copy

    def project(self) -> dict[str, dict]:
        """`plan -s dev` of the revision's own project, `check --plan` of it, `verify --from-evidence`."""
        results = {}
        plan = self.scratch / "plan.json"
        results["plan -s dev"] = self.run("plan", "-s", "dev", "--out", str(plan))
        results["plan.json"] = {"file": plan.read_text() if plan.exists() else None}
        for format_ in FORMATS:
            results[f"check --plan {format_}"] = self.run("check", "--plan", str(plan), "--format", format_)
        report = self.scratch / "verify"
        evidence = self.root / "tests" / "data" / "dev-run"
        kept = evidence / "checks-input"  # the sorted input verify keeps beside local evidence (a cache)
        existed = kept.exists()
        lock = evidence.parent / ".pubsubguard.lock"  # the run's lock, which verify rewrites
        locked = lock.read_bytes() if lock.exists() else None
        try:
            results["verify --from-evidence tests/data/dev-run"] = self.run(
                "verify", "--from-evidence", str(evidence), "--report", str(report), "--no-progress")
        finally:
            if not existed:  # leave a work tree as it was
                shutil.rmtree(kept, ignore_errors=True)
            if locked is not None:
                lock.write_bytes(locked)
            else:
                lock.unlink(missing_ok=True)
        document = report / "report.json"
        results["report.json"] = {"file": document.read_text() if document.exists() else None}
        return results


def scrub(value, paths: list[tuple[str, str]]):
    """Only what must differ between two runs: the temporary paths, timings and timestamps."""
    if isinstance(value, str):
        for path, name in paths:
            value = value.replace(path, name)
        value = re.sub(r"/tmp/[A-Za-z0-9_.-]+", "<tmp>", value)
        return value
    if isinstance(value, dict):
        return {k: "<volatile>" if VOLATILE_KEYS.search(k) and isinstance(v, (int, float, str)) and not isinstance(v, bool)
                else scrub(v, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, paths) for v in value]
    return value


def normalised(results: dict, paths: list[tuple[str, str]]) -> dict:
    out = {}
    for key, entry in results.items():
        entry = dict(entry)
        for field in ("stdout", "file"):
            text = entry.get(field)
            if key == "report.json" and text:
                try:
                    entry[field] = json.dumps(scrub(json.loads(text), paths), indent=1, sort_keys=True)
                    continue
                except json.JSONDecodeError:
                    pass
            if text is not None:
                entry[field] = scrub(text, paths)
        if "stderr" in entry:
            entry["stderr"] = re.sub(r"\b\d+(\.\d+)? ?(s|ms)\b", "<time>", scrub(entry["stderr"], paths))
        out[key] = entry
    return out


def outputs(root: Path, jobs: int, only: str | None) -> dict[str, dict]:
    scratch = Path(tempfile.mkdtemp(prefix="compare-"))
    try:
        runner = Runner(root, scratch)
        paths = [(str(scratch), "<scratch>"), (sys.executable, "<python>"), (str(root), "<root>")]
        results: dict[str, dict] = {}
        chosen = [p for p in programs(root) if only is None or only in p[0]]
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(runner.program, *p): p[0] for p in chosen}
            if only is None:
                futures[pool.submit(runner.project)] = "."
            for future in concurrent.futures.as_completed(futures):
                name = futures[future]
                for key, entry in normalised(future.result(), paths).items():
                    results[f"{name}: {key}"] = entry
                print(f"compare: {root.name}: {name} done", file=sys.stderr)
        return results
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def revision_outputs(revision: str | None, cache: Path | None, jobs: int, only: str | None) -> dict[str, dict]:
    """The outputs of `revision` (a commit, branch or tag), or of this work tree when None."""
    if revision is None:
        return outputs(REPO, jobs, only)
    commit = git("rev-parse", "--verify", f"{revision}^{{commit}}")
    cached = cache / f"{commit}{'-' + only if only else ''}.json" if cache else None
    if cached and cached.exists():
        return json.loads(cached.read_text())
    folder = Path(tempfile.mkdtemp(prefix="compare-rev-")) / "pubsubguard"
    git("worktree", "add", "--detach", str(folder), commit)
    try:
        venv = REPO / "policies" / "venv"
        if venv.exists():
            (folder / "policies" / "venv").symlink_to(venv)
        results = outputs(folder, jobs, only)
    finally:
        git("worktree", "remove", "--force", str(folder))
        shutil.rmtree(folder.parent, ignore_errors=True)
    if cached:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(results, indent=1, sort_keys=True))
    return results


def differences(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    lines = []
    for key in sorted(set(before) | set(after)):
        if key not in after or key not in before:
            lines.append(f"{key}: only {'before' if key in before else 'after'}")
            continue
        for field in sorted(set(before[key]) | set(after[key])):
            old, new = before[key].get(field), after[key].get(field)
            if old == new:
                continue
            if isinstance(old, str) and isinstance(new, str):
                changed = [line for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
                           if line[:1] in "+-" and not line.startswith(("+++", "---"))]
                lines.append(f"{key}: {field} differs: {' | '.join(changed[:4])[:400]}")
            else:
                lines.append(f"{key}: {field} {old!r} -> {new!r}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", help="a git revision (the outputs to match)")
    parser.add_argument("after", nargs="?", help="a git revision (default: this work tree)")
    parser.add_argument("--cache", type=Path, help="keep each commit's outputs in this folder and reuse them")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="programs checked at once (default: 2)")
    parser.add_argument("--only", help="only the programs whose path contains this text (no plan or verify)")
    args = parser.parse_args(argv)
    try:
        before = revision_outputs(args.before, args.cache, args.jobs, args.only)
        after = revision_outputs(args.after, args.cache, args.jobs, args.only)
    except subprocess.CalledProcessError as err:
        print(f"compare_outputs: git {' '.join(err.cmd[1:])}: {err.stderr.strip()}", file=sys.stderr)
        return 2
    found = differences(before, after)
    for line in found:
        print(line)
    print(f"compare_outputs: {len(before)} outputs compared, {len(found)} difference{'s' if len(found) != 1 else ''}",
          file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
