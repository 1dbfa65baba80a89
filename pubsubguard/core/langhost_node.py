"""The language host's part for Node.js programs (`runtime: nodejs`): which `node` and which SDK run the
team's TypeScript or JavaScript program, and how, as `pulumi-language-nodejs` runs it.

- **The SDK** is the project's own: `node_modules/@pulumi/pulumi` found as Node resolves it from the
  program's folder (that folder, then each parent), with the `@pulumi/gcp` and `typescript`/`ts-node`
  installed beside it. Its entry point `@pulumi/pulumi/cmd/run` runs the program with the arguments the
  language host passes: `--monitor`, `--engine`, `--organization`, `--project`, `--root-directory`,
  `--stack`, `--pwd` (the program's folder), `--dry-run`, `--parallel`, and the entry point (Pulumi.yaml's
  `main` file, else `.`: package.json's `exports` or `main`, else `index`). The config is the language
  host's `PULUMI_CONFIG` and `PULUMI_CONFIG_SECRET_KEYS`; `runtime.options.typescript` (default true:
  ts-node, the project's own or the SDK's) and `runtime.options.tsconfig` become `PULUMI_NODEJS_TYPESCRIPT`
  and `PULUMI_NODEJS_TSCONFIG_PATH`, so `tsconfig.json` is honoured as under `pulumi preview`.
- **Before it runs**: a project without its modules installed, or whose SDK's `engines.node` needs a
  newer Node.js than `node --version`, is one line naming what to run (`npm ci` in the folder, the two
  versions): nothing runs.
- **The child** is `langhost_node_exec.js` (copied into the scratch directory, run by `node`), in the
  confinement `langhost.start` gives every program (docs/security.md): it applies the preview semantics
  the engine alone cannot give to the project's SDK, then hands over to `cmd/run`.
Nothing here needs Node.js until a Node.js program is planned.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pubsubguard.core import langhost
from pubsubguard.core.project import PlanError, Project

EXEC_SCRIPT = Path(__file__).resolve().parent / "langhost_node_exec.js"
RUN_PATH = Path("@pulumi") / "pulumi" / "cmd" / "run"


@dataclass(frozen=True)
class NodeRunner:
    """A Node.js program: `langhost_node_exec.js`, then the project's `@pulumi/pulumi/cmd/run`, by `node`."""
    node: str
    node_version: str  # "20.20.2"
    sdk: Path  # the project's node_modules/@pulumi/pulumi
    sdk_version: str

    @classmethod
    def find(cls, project: Project, python: str | None = None) -> "NodeRunner":
        where = project.root / "Pulumi.yaml"
        sdk = installed_sdk(project)
        manifest = _package(sdk / "package.json", where)
        node = shutil.which("node")
        if node is None:
            raise PlanError(f"{where}: runtime: nodejs, but `node` is not on PATH (install Node.js "
                            f"{_engines(manifest) or ''}, as @pulumi/pulumi {manifest.get('version', '?')} needs)".replace("  ", " "))
        version = node_version(node)
        needed = _engines(manifest)
        if needed and version and not satisfies(version, needed):
            raise PlanError(f"{where}: @pulumi/pulumi {manifest.get('version', '?')} in {sdk.parent.parent} needs "
                            f"Node.js {needed} (its package.json engines.node), but `node --version` is v{version}: "
                            "install a newer Node.js")
        return cls(node, version, sdk, str(manifest.get("version", "?")))

    @property
    def program(self) -> str:
        return f"node {self.node_version} (@pulumi/pulumi {self.sdk_version})"

    @property
    def found_by(self) -> str:
        return f"the project's node_modules {self.sdk.parent.parent}"

    @property
    def notes(self) -> list[str]:
        return []

    def environment(self, config_env: dict[str, str], scratch: Path, pass_env: tuple[str, ...]) -> dict:
        return langhost.base_environment(config_env, scratch, pass_env)

    def command(self, scratch: Path, launch: langhost.Launch) -> list[str]:
        script = scratch / "exec" / "pubsubguard-language-nodejs-exec.js"
        shutil.copyfile(EXEC_SCRIPT, script)
        project = launch.project
        options = project.runtime_options if isinstance(project.runtime_options, dict) else {}
        typescript = options.get("typescript", True)
        tsconfig = options.get("tsconfig")
        settings = {"PULUMI_NODEJS_TYPESCRIPT": "true"} if typescript is not False else {}
        if isinstance(tsconfig, str) and tsconfig:
            settings["PULUMI_NODEJS_TSCONFIG_PATH"] = tsconfig
        config = json.loads(launch.config_file.read_text())
        launch.config_file.write_text(json.dumps({**config, **settings}))
        entry = "." if project.main.is_dir() else project.main.name
        return [self.node, str(script), "--config-file", str(launch.config_file),
                "--idle-timeout", f"{launch.idle_timeout_s:g}", "--max-resources", str(launch.max_resources),
                "--root-directory", str(project.root), str(self.sdk / "cmd" / "run"),
                "--monitor", launch.monitor, "--engine", launch.engine, "--organization", "organization",
                "--project", project.name, "--root-directory", str(project.root), "--stack", launch.stack,
                "--pwd", str(project.program_dir), "--dry-run", "--parallel", str(launch.parallel), entry]

    def failure(self, code: int) -> str | None:
        return None


def installed_sdk(project: Project) -> Path:
    """The project's `node_modules/@pulumi/pulumi`, as Node resolves it from the program's folder; or
    PlanError: what to run, where."""
    folder = project.program_dir.resolve()
    for candidate in (folder, *folder.parents):
        sdk = candidate / "node_modules" / RUN_PATH.parent.parent
        if (sdk / "cmd" / "run").is_dir() and (sdk / "package.json").is_file():
            return sdk
    where = project.root / "Pulumi.yaml"
    install_in = project.program_dir if (project.program_dir / "package.json").exists() else project.root
    if not (install_in / "node_modules").is_dir():
        raise PlanError(f"{where}: the program's Node.js modules are not installed ({install_in / 'node_modules'} "
                        f"is missing): run `npm ci` in {install_in}")
    raise PlanError(f"{where}: @pulumi/pulumi is not installed in {install_in / 'node_modules'}: run `npm ci` in "
                    f"{install_in} (package.json needs @pulumi/pulumi and @pulumi/gcp)")


def _package(path: Path, where: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise PlanError(f"{where}: {path} cannot be read ({err.__class__.__name__}): run `npm ci` again") from None
    return data if isinstance(data, dict) else {}


def _engines(manifest: dict) -> str:
    engines = manifest.get("engines")
    needed = engines.get("node") if isinstance(engines, dict) else None
    return needed.strip() if isinstance(needed, str) else ""


def node_version(node: str) -> str:
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise PlanError(f"{node} --version: cannot run Node.js ({err.__class__.__name__})") from None
    return done.stdout.strip().lstrip("v")


# --- engines.node: the semver ranges npm packages declare ----------------------------------------
def _triple(text: str) -> tuple[list[int], int]:
    """(version parts padded with 0, how many were given) of "20", "20.17", "v20.17.0", "20.x"."""
    parts = []
    for part in text.strip().lstrip("v=").split("-")[0].split("."):
        if part in ("x", "X", "*", ""):
            break
        parts.append(int(re.match(r"\d+", part).group()) if re.match(r"\d+", part) else 0)
    given = len(parts)
    return (parts + [0, 0, 0])[:3], given


def _comparator(version: list[int], comparator: str) -> bool:
    match = re.match(r"^(>=|<=|>|<|=|\^|~)?\s*(.*)$", comparator)
    operator, target = match.group(1) or "=", match.group(2)
    if target in ("", "*", "x", "X"):
        return True
    bound, given = _triple(target)
    if operator == "^":
        first = next((i for i, part in enumerate(bound) if part), min(given, 3) - 1 if given else 0)
        upper = bound[:first] + [bound[first] + 1] + [0] * (2 - first)
        return bound <= version < upper
    if operator == "~":
        upper = [bound[0] + 1, 0, 0] if given < 2 else [bound[0], bound[1] + 1, 0]
        return bound <= version < upper
    if operator == "=" and given < 3:  # "20" or "20.x": any 20
        upper = bound[:max(given, 1) - 1] + [bound[max(given, 1) - 1] + 1] + [0] * (3 - max(given, 1))
        return bound <= version < upper
    return {">=": version >= bound, "<=": version <= bound, ">": version > bound, "<": version < bound,
            "=": version == bound}[operator]


def satisfies(version: str, needed: str) -> bool:
    """Whether `version` ("20.20.2") is in the npm range `needed` (">=20", "^20.17.0 || >=22.9.0"); a
    range this does not read counts as satisfied (Node.js itself then says what is wrong)."""
    try:
        current, _ = _triple(version)
        for alternative in needed.split("||"):
            alternative = re.sub(r"\s+-\s+", " - ", alternative.strip())
            if " - " in alternative:  # "18 - 20"
                low, high = alternative.split(" - ", 1)
                comparators = [">=" + low.strip(), "<=" + high.strip()]
            else:
                comparators = re.sub(r"(>=|<=|>|<|=|\^|~)\s+", r"\1", alternative).split()
            if all(_comparator(current, comparator) for comparator in comparators or ["*"]):
                return True
        return False
    except (AttributeError, ValueError, IndexError):
        return True
