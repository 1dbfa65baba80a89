"""A Pulumi project as the CLI reads it: `Pulumi.yaml` (name, runtime, `main`, project-level `config:`)
and a stack's `Pulumi.<stack>.yaml`, merged into the configuration the language host hands the program
(`PULUMI_CONFIG`, every value a string, structured values as JSON; `PULUMI_CONFIG_SECRET_KEYS`).

What the Pulumi CLI does and this does too:
- project-level `config:` entries give defaults: `key: value`, or `key: {type, default | value, secret}`;
  a key without a namespace belongs to the project (`<project>:key`); a declared key with no default
  and no stack value is an error, as is a stack value of the wrong declared type;
- `secure:` values are secrets. The CLI decrypts them with the stack's secrets provider; offline nothing
  can, so the program reads the engine's unknown sentinel there (any value computed from it is unknown
  to the policy pack, as in a preview whose secret is not known) and the key is marked secret.
- `main:` names the program's folder (or file), relative to the project; the program runs with that
  folder as its working directory.
- `environment:` imports Pulumi ESC environments (`environment: [org/env]`, or a definition with
  `imports:`, whose inline `values:` count as one more): under the CLI their `pulumiConfig` values merge
  into the stack's config, the stack file's own values winning. Offline nothing can open them: their names
  are kept (`StackConfig.environments`, said on the first screen), and their values are read only from
  what `esc open ORG/ENV --format json` printed, given as `environment_values` (`--environment-values
  FILE`), every value of it a secret (that form does not say which were). A value they set, or unread may
  set, is unknown to the rules where the program reads it as text (`StackConfig.environment_reads`, made
  so by the program side: `langhost_exec`).
"""

from __future__ import annotations

import errno
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pubsubguard.core.errors import UserError
from pubsubguard.core.user_files import read_mapping

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's sentinel for a value unknown at preview
RUNTIMES = ("python", "nodejs")  # the languages whose programs run offline (core.plan.RUNNERS)
_TYPES = {"string": str, "integer": int, "boolean": bool, "array": list, "object": dict}


class PlanError(UserError):
    """A plan could not be made; the message is for the user (file, field, expectation)."""


@dataclass(frozen=True)
class Project:
    root: Path
    name: str
    runtime: str
    main: Path  # the program: a folder with __main__.py, or a file
    config: dict[str, Any] = field(default_factory=dict)  # project-level `config:` as written
    runtime_options: dict[str, Any] = field(default_factory=dict)  # `runtime.options` (virtualenv, toolchain)

    @property
    def program_dir(self) -> Path:
        return self.main if self.main.is_dir() else self.main.parent

    @property
    def program_files(self) -> list[Path]:
        if not self.main.is_dir():
            return [self.main]
        if self.runtime == "nodejs":
            return [path for path in (self.main / name for name in ("index.ts", "index.js", "index.mts", "index.mjs"))
                    if path.exists()][:1] or [self.main / "index.ts"]
        return [self.main / "__main__.py"]


@dataclass(frozen=True)
class StackConfig:
    values: dict[str, Any]  # "namespace:key" -> value (secrets: the unknown sentinel)
    secret_keys: tuple[str, ...]
    source: str  # "Pulumi.dev.yaml"
    environments: tuple[str, ...] = ()  # the ESC environments the stack file imports, in order
    environment_values: str = ""  # the file their values were read from (`--environment-values`), or ""
    own_keys: tuple[str, ...] = ()  # the keys the stack file's own `config:` sets (they win over environments)
    environment_keys: tuple[str, ...] = ()  # the keys whose value is the file's (`--environment-values`)
    environment_others: tuple[Any, ...] = ()  # the file's values besides its pulumiConfig (kept secret too)

    @property
    def environments_unread(self) -> bool:
        """The stack imports environments whose values nothing here read: a key may be set there."""
        return bool(self.environments) and not self.environment_values

    def secret_strings(self) -> frozenset[str]:
        """The strings inside the secret values known here (every value of `--environment-values`, its
        pulumiConfig and the rest): masked wherever text is shown, whatever the program did with them."""
        found: set[str] = set()
        pending = [self.values[key] for key in self.secret_keys if key in self.values] + list(self.environment_others)
        while pending:
            value = pending.pop()
            if isinstance(value, dict):
                pending.extend(value.values())
            elif isinstance(value, list):
                pending.extend(value)
            elif isinstance(value, (str, int, float)) and not isinstance(value, bool) and value != UNKNOWN \
                    and len(str(value)) >= 3:
                found.add(str(value))
        return frozenset(found)

    def unread_environments(self) -> str:
        """`the stack's environments org/a, org/b (imported by Pulumi.dev.yaml; not read offline: give their
        values with --environment-values FILE)`: where a missing key may live."""
        return (f"the stack's environment{'s' if len(self.environments) > 1 else ''} {', '.join(self.environments)} "
                f"(imported by {self.source}; not read offline: give their values with --environment-values FILE, "
                "what `esc open ORG/ENV --format json` prints)")

    def environments_said(self) -> str:
        """The first screen's line on the environments the stack imports (empty without): which, and whether
        their values were read."""
        return environments_said(self.environments, self.environment_values, self.source)

    def environment_reads(self) -> dict | None:
        """What the program side makes unknown (`ENVIRONMENT_READS`): with the environments' values given,
        the keys they set (`unknown`); unread, every key but those the stack file sets (`known`); None
        without environments."""
        if not self.environments:
            return None
        if self.environment_values:
            return {"unknown": sorted(self.environment_keys)}
        return {"known": sorted(self.own_keys)}

    def env(self) -> dict[str, str]:
        """The language host's environment for this configuration (and what the program side makes
        unknown, `ENVIRONMENT_READS`, when the stack imports environments)."""
        env = {
            "PULUMI_CONFIG": json.dumps(
                {k: v if isinstance(v, str) else json.dumps(v) for k, v in self.values.items()}, sort_keys=True
            ),
            "PULUMI_CONFIG_SECRET_KEYS": json.dumps(sorted(self.secret_keys)),
        }
        reads = self.environment_reads()
        if reads is not None:
            env[ENVIRONMENT_READS] = json.dumps(reads)
        return env


ENVIRONMENT_READS = "PUBSUBGUARD_ENVIRONMENT_READS"  # langhost_exec's and langhost_node_exec.js's name for it


def environments_said(environments: tuple[str, ...], values_from: str, source: str) -> str:
    """`environments: acme/common, acme/pubsub-dev, imported by Pulumi.dev.yaml: their values were NOT
    read (...)`, or where they were read from; "" without environments."""
    if not environments:
        return ""
    names = ", ".join(environments)
    if values_from:
        return (f"environments: {names}, their values from --environment-values {values_from} (every value kept "
                "secret; a value the program reads from them as text is unknown to the rules)")
    return (f"environments: {names}, imported by {source}: their values were NOT read (offline nothing opens them: "
            "a key the stack file does not set is unknown here, and missing where the program requires it; "
            "--environment-values FILE gives them)")


def load_project_yaml(path: Path, what: str) -> Any:
    return read_mapping(path, PlanError, where=path.name, missing=f"{path}: not found ({what})")


def read_project(root: Path) -> Project:
    path = Path(root) / "Pulumi.yaml"
    data = load_project_yaml(path, "a Pulumi project has a Pulumi.yaml; run in the project folder or pass --cwd")
    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected a mapping with 'name' and 'runtime' (and optionally 'main'), "
                        f"got {type(data).__name__}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise PlanError(f"{path}: name: expected the project's name (a string), "
                        + ("it is missing" if name is None else f"got {name!r}"))
    runtime = data.get("runtime")
    runtime_name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if not isinstance(runtime_name, str):
        raise PlanError(f"{path}: runtime: expected a runtime name (`runtime: python`) or a mapping with one "
                        f"(`runtime: {{name: python, options: {{...}}}}`), got {runtime!r}")
    if runtime_name not in RUNTIMES:
        raise PlanError(
            f"{path}: runtime: only Python and Node.js programs can be planned offline, got {runtime_name!r} "
            "(judge other programs with `pulumi preview --policy-pack policies`)"
        )
    main = Path(root) / str(data.get("main") or ".")
    if runtime_name == "python":
        _python_main(path, root, data, main)
    elif not main.exists():  # a folder: package.json's `main` or index.js, as the SDK's cmd/run finds it
        raise PlanError(f"{path}: main: {data.get('main')!r} does not exist in {root}")
    config = data.get("config") or {}
    if not isinstance(config, dict):
        raise PlanError(f"{path}: config: expected a mapping of key to a value or {{type, default}}")
    options = runtime.get("options") if isinstance(runtime, dict) else None
    if options is not None and not isinstance(options, dict):
        raise PlanError(f"{path}: runtime.options: expected a mapping (virtualenv, toolchain), got {options!r}")
    return Project(root=Path(root), name=name, runtime=runtime_name, main=main, config=config,
                   runtime_options=options or {})


def _python_main(path: Path, root: Path, data: dict, main: Path) -> None:
    try:
        main_file = main / "__main__.py" if main.is_dir() else main
        main_file.stat()  # follows symlinks: a dangling or looping one fails here
    except OSError as err:
        what = "is a symbolic link that loops" if err.errno == errno.ELOOP else "does not exist" \
            if err.errno == errno.ENOENT else \
            f"cannot be read ({err.strerror})"
        if main.is_dir():
            raise PlanError(f"{path}: main: {main_file} {what} (the Python language host runs {main_file.name} "
                            "of the program's folder)") from None
        raise PlanError(f"{path}: main: {data.get('main')!r} {what} in {root}") from None


def stack_names(root: Path) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in Path(root).glob("Pulumi.*.yaml"))


def _full_key(key: str, project: str) -> str:
    return key if ":" in key else f"{project}:{key}"


def _unsecured(value: Any) -> tuple[Any, bool]:
    """The value with every `secure:` leaf replaced by the unknown sentinel, and whether it had one."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return UNKNOWN, True
        pairs = {k: _unsecured(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        pairs = [_unsecured(v) for v in value]
        return [v for v, _ in pairs], any(s for _, s in pairs)
    return value, False


def _type_ok(value: Any, type_name: str) -> bool:
    expected = _TYPES.get(type_name)
    if expected is None or value == UNKNOWN:
        return True
    if expected is int:
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, str) and value.lstrip("-").isdigit()
        )
    if expected is bool:
        return isinstance(value, bool) or (isinstance(value, str) and value.lower() in ("true", "false"))
    if expected is str:
        return not isinstance(value, (dict, list))
    return isinstance(value, expected)


INLINE_VALUES = "(the stack file's own environment values)"  # an inline definition's `values:`


def stack_environments(data: dict, name: str) -> tuple[str, ...]:
    """The environments a stack file's `environment:` imports: a list of names, or a definition whose
    `imports:` lists them (a name, or a mapping of one name to its options) and whose `values:` are one more."""
    environment = data.get("environment")
    if environment is None:
        return ()
    expected = "expected a list of environment names (`environment: [org/env]`) or a mapping with `imports:`"
    if isinstance(environment, list):
        imports, inline = environment, False
    elif isinstance(environment, dict):
        imports, inline = environment.get("imports") or [], bool(environment.get("values"))
    else:
        raise PlanError(f"{name}: environment: {expected}, got {json.dumps(environment, default=str)}")
    if not isinstance(imports, list):
        raise PlanError(f"{name}: environment.imports: {expected}, got {json.dumps(imports, default=str)}")
    names = []
    for item in imports:
        if isinstance(item, dict) and len(item) == 1:
            item = next(iter(item))
        if not isinstance(item, str) or not item.strip():
            raise PlanError(f"{name}: environment: {expected}, got the entry {json.dumps(item, default=str)}")
        names.append(item.strip())
    return tuple(names) + ((INLINE_VALUES,) if inline else ())


def read_environment_values(path: Path, project: Project) -> tuple[dict[str, Any], list[Any]]:
    """The `pulumiConfig` of what `esc open ORG/ENV --format json` printed, as `namespace:key` -> value (a
    key without a namespace belongs to the project, as in a stack file), and the file's other values (its
    `environmentVariables`, `files`: never the program's, kept secret all the same)."""
    where = f"--environment-values {path}"
    data = read_mapping(path, PlanError, where=where, language="JSON",
                        expected="the JSON object `esc open ORG/ENV --format json` prints")
    config = data.get("pulumiConfig", {})
    if not isinstance(config, dict):
        raise PlanError(f"{where}: pulumiConfig: expected an object of configuration keys to values, "
                        f"got a {type(config).__name__}")
    return ({_full_key(str(key), project.name): value for key, value in config.items()},
            [value for key, value in data.items() if key != "pulumiConfig"])


def read_stack_config(project: Project, stack: str, environment_values: Path | None = None) -> StackConfig:
    """The stack's configuration as the CLI layers it: the project's own (Pulumi.yaml `config`), under the values
    `--environment-values` gives for the stack's ESC environments, under the stack file's own values; then every key
    Pulumi.yaml declares without a default must be set, and of the type it declares."""
    path, data, config = _stack_file(project, stack)
    environments = stack_environments(data, path.name)
    if environment_values is not None and not environments:
        raise PlanError(f"--environment-values {environment_values}: {path.name} imports no environment "
                        "(its `environment:` lists the ones whose values this gives)")
    values, secret, declared = _project_config(project)
    given: set[str] = set()
    others: list[Any] = []
    if environment_values is not None:  # over the project's defaults, under the stack file's own values
        given_values, others = read_environment_values(environment_values, project)
        for full, value in given_values.items():
            values[full] = value
            given.add(full)
            secret.add(full)  # `--format json` does not say which were secrets: every one is kept secret
    own: set[str] = set()
    for key, value in config.items():
        full = _full_key(str(key), project.name)
        plain, had_secret = _unsecured(value)
        values[full] = plain
        own.add(full)
        if full in given and not declared.get(full, {}).get("secret"):
            secret.discard(full)  # the stack file's own value wins: a secret as it says, not as the value given was
        if had_secret:
            secret.add(full)
    _require_declared(path.name, declared, values, environments, unread=environment_values is None)
    return StackConfig(values=values, secret_keys=tuple(sorted(secret)), source=path.name, environments=environments,
                       environment_values=str(environment_values or ""), own_keys=tuple(sorted(own)),
                       environment_keys=tuple(sorted(given - own)), environment_others=tuple(others))


def _stack_file(project: Project, stack: str) -> tuple[Path, dict, dict]:
    """`Pulumi.<stack>.yaml`: its path, its mapping and its `config` mapping; PlanError in one line where it is
    missing or not of that shape."""
    path = project.root / f"Pulumi.{stack}.yaml"
    if not path.exists():
        known = stack_names(project.root)
        raise PlanError(f"{path.name}: no such stack {stack!r} (stacks here: {', '.join(known) or 'none'})")
    data = load_project_yaml(path, "the stack's settings") or {}
    if not isinstance(data, dict):
        raise PlanError(f"{path.name}: expected a mapping with 'config' (as `pulumi config set` writes it), "
                        f"got a {type(data).__name__}")
    config = data.get("config", {})
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise PlanError(f"{path.name}: config: expected a mapping of 'namespace:key' to values")
    return path, data, config


def _project_config(project: Project) -> tuple[dict[str, Any], set[str], dict[str, dict]]:
    """Pulumi.yaml's `config`: (the values it gives, a declared key's default included; the keys it declares
    secret; the declared keys' specs), each by its full `namespace:key`."""
    values: dict[str, Any] = {}
    secret: set[str] = set()
    declared: dict[str, dict] = {}
    for key, spec in project.config.items():
        full = _full_key(str(key), project.name)
        if isinstance(spec, dict) and ({"type", "default", "value", "secret", "description", "items"} & set(spec)):
            declared[full] = spec
            if "value" in spec or "default" in spec:
                values[full] = spec["value"] if "value" in spec else spec["default"]
            if spec.get("secret"):
                secret.add(full)
        else:
            values[full] = spec
    return values, secret, declared


def _require_declared(source: str, declared: dict[str, dict], values: dict[str, Any], environments: tuple[str, ...],
                      unread: bool) -> None:
    """PlanError in one line for the first key Pulumi.yaml declares that no layer set (naming the environments that
    could, where their values were not read: `unread`), or whose value is not of its declared type."""
    for full, spec in declared.items():
        if full not in values and environments and unread:
            raise PlanError(f"{source}: configuration value {full!r} (declared in Pulumi.yaml without a default) "
                            f"is not in the stack file: only its environment{'s' if len(environments) > 1 else ''} "
                            f"{', '.join(environments)} could supply it, and offline their values are not read "
                            "(give them with --environment-values FILE, what `esc open ORG/ENV --format json` prints)")
        if full not in values:
            raise PlanError(
                f"{source}: missing configuration value {full!r} (declared in Pulumi.yaml without a default); "
                f"set it with `pulumi config set {full.split(':', 1)[1]} VALUE`"
            )
        type_name = spec.get("type")
        if type_name and not _type_ok(values[full], type_name):
            raise PlanError(
                f"{source}: {full}: Pulumi.yaml declares type {type_name}, got {json.dumps(values[full])}"
            )


def source_lines(path: Path) -> list[str]:
    """A program file's lines as Python reads it: its coding declaration (`# -*- coding: latin-1 -*-`)
    or BOM honoured, UTF-8 otherwise; undecodable bytes replaced. OSError when it cannot be read."""
    import tokenize

    try:
        with tokenize.open(path) as handle:
            return handle.read().splitlines()
    except (SyntaxError, UnicodeDecodeError, LookupError):  # a bad declaration: what Python would refuse
        return Path(path).read_bytes().decode("utf-8", errors="replace").splitlines()


def project_root() -> Path:
    """pubsubguard's own project (the checkout holding this package): the default of callers that name no
    project (tests, benchmarks); the command line always names one (the current directory, or -C)."""
    return Path(__file__).resolve().parents[2]
