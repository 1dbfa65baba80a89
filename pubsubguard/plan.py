"""Offline plan: run the Pulumi program the way the Python language host does, against a recording
monitor, and write the resource graph.

The language host runs `runpy.run_path(<main>, run_name="__main__")` inside
`pulumi.runtime.run_in_stack`, with config from `PULUMI_CONFIG`. This does exactly that, with
`pulumi.runtime.MockMonitor` standing in for the engine (the only part that cannot run here). The
monitor records every RegisterResource request as the engine would receive it: type token, name,
parent, and inputs in camelCase wire form.

Plan format (`format: pubsubguard-plan/1`), deterministic (sorted keys, resources sorted by URN):

    {"format": "pubsubguard-plan/1", "project": "pubsubguard", "stack": "dev",
     "gcp_project": "pubsubguard-dev",
     "resources": [{"urn", "type", "name", "custom", "parent", "id", "inputs", "dependencies",
                    "property_dependencies"}...],
     "outputs": {"topics": {...}, "subscriptions": {...}, "probe_isolation": true}}
"""

from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

PLAN_FORMAT = "pubsubguard-plan/1"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's sentinel for unknown values


from pubsubguard.errors import UserError, read_yaml_mapping


class PlanError(UserError):
    """A plan could not be made; the message is for the user (file, field, expectation)."""


def project_root() -> Path:
    return Path(__file__).resolve().parent.parent


def read_project(root: Path) -> dict:
    project = read_yaml_mapping(
        root / "Pulumi.yaml", PlanError, "run from the project root or pass --root", "a mapping with 'name', 'runtime' and 'main'"
    )
    if "name" not in project:
        raise PlanError(f"{root / 'Pulumi.yaml'}: expected a mapping with 'name', 'runtime' and 'main'")
    return project


def read_stack_config(root: Path, stack: str) -> dict[str, Any]:
    path = root / f"Pulumi.{stack}.yaml"
    if not path.exists():
        known = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))
        raise PlanError(f"{path.name}: no such stack {stack!r} (stacks here: {', '.join(known) or 'none'})")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise PlanError(f"{path.name}: not valid YAML: {err}") from None
    config = data.get("config", {}) if isinstance(data, dict) else None
    if not isinstance(config, dict):
        raise PlanError(f"{path.name}: config: expected a mapping of 'namespace:key' to values")
    return config


def config_env(config: dict[str, Any]) -> str:
    """PULUMI_CONFIG as the CLI passes it: every value a string, structured values as JSON."""
    return json.dumps(
        {key: value if isinstance(value, str) else json.dumps(value) for key, value in config.items()},
        sort_keys=True,
    )


def _project_id(config: dict[str, Any]) -> str:
    return str(config.get("gcp:project") or "unknown-project")


def _fake_id(type_: str, name: str, inputs: dict, project: str) -> str:
    if type_ == "gcp:pubsub/topic:Topic":
        return f"projects/{project}/topics/{inputs.get('name', name)}"
    if type_ == "gcp:pubsub/subscription:Subscription":
        return f"projects/{project}/subscriptions/{inputs.get('name', name)}"
    return f"{name}-id"


@contextmanager
def _environment(values: dict[str, str]):
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def make_plan(stack: str = "dev", root: Path | None = None) -> dict:
    """Run the program of `root` for `stack` and return the plan (see module docstring)."""
    import pulumi
    from pulumi.runtime import mocks, rpc, settings

    root = root or project_root()
    project = read_project(root)
    config = read_stack_config(root, stack)
    gcp_project = _project_id(config)
    main = root / str(project.get("main", "."))

    records: dict[str, dict] = {}
    outputs: dict[str, Any] = {}
    offline_errors: list[str] = []

    class Engine(mocks.Mocks):
        def new_resource(self, args: mocks.MockResourceArgs):
            if not args.custom:
                return "", {}
            return _fake_id(args.typ, args.name, args.inputs, gcp_project), dict(args.inputs)

        def call(self, args: mocks.MockCallArgs):
            # Invokes would ask Google Cloud; offline they cannot. Answer inertly, fail after the run.
            if args.token == "gcp:organizations/getProject:getProject":
                offline_errors.append(
                    f"Pulumi.{stack}.yaml: pubsubguard:projectNumber: required offline (the plan cannot ask "
                    "Google Cloud for the project number)"
                )
                return {"number": "0", "projectId": gcp_project}
            offline_errors.append(f"the program calls {args.token}, which needs Google Cloud (not available offline)")
            return {}

    class RecordingMonitor(mocks.MockMonitor):
        def RegisterResource(self, request):
            response = super().RegisterResource(request)
            mocks._ensure_event_loop()
            inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
            records[response.urn] = {
                "urn": response.urn,
                "type": request.type,
                "name": request.name,
                "custom": bool(request.custom),
                "parent": request.parent or None,
                "id": response.id or None,
                "dependencies": sorted(request.dependencies),
                "property_dependencies": {
                    key: sorted(value.urns)
                    for key, value in sorted(request.propertyDependencies.items())
                    if value.urns
                },
                "inputs": _plain(inputs),
            }
            return response

        def RegisterResourceOutputs(self, request):
            if request.urn.split("::")[2] == "pulumi:pulumi:Stack":
                outputs.update(_plain(rpc.deserialize_properties(request.outputs, keep_unknowns=True)))
            return super().RegisterResourceOutputs(request)

    env = {
        "PULUMI_CONFIG": config_env(config),
        "PULUMI_PROJECT": project["name"],
        "PULUMI_STACK": stack,
        "PULUMI_DRY_RUN": "true",
    }
    saved_path = list(sys.path)
    saved_modules = set(sys.modules)
    with _environment(env):
        try:
            settings.reset_options()
            pulumi.runtime.config.set_all_config(pulumi.runtime.get_config_env(), [])
            monitor = RecordingMonitor(Engine())
            settings.configure(
                mocks.MockSettings(
                    monitor=monitor,
                    monitor_features=set(monitor.GetDeploymentInfo(None).supportedFeatures),
                    engine=mocks.MockEngine(None),
                    project=project["name"],
                    stack=stack,
                    dry_run=True,
                    organization="organization",
                    callbacks=None,
                )
            )
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(
                    pulumi.runtime.run_in_stack(lambda: runpy.run_path(str(main), run_name="__main__"))
                )
            finally:
                pending = asyncio.all_tasks(loop)
                for task in pending:
                    task.cancel()
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.close()
                asyncio.set_event_loop(None)
        except PlanError:
            raise
        except pulumi.RunError as err:
            raise PlanError(str(err)) from None
        finally:
            settings.reset_options()
            sys.path[:] = saved_path
            for name in set(sys.modules) - saved_modules:
                if name == "__main__" or name.startswith(("infra.__main__",)):
                    sys.modules.pop(name, None)

    if offline_errors:
        raise PlanError("\n".join(dict.fromkeys(offline_errors)))
    return {
        "format": PLAN_FORMAT,
        "project": project["name"],
        "stack": stack,
        "gcp_project": gcp_project,
        "resources": [records[urn] for urn in sorted(records)],
        "outputs": outputs,
    }


def _plain(value: Any) -> Any:
    """JSON-safe plain data; unknowns become the engine's sentinel string."""
    from pulumi.runtime.rpc import UNKNOWN as RPC_UNKNOWN  # noqa: N811

    if value is RPC_UNKNOWN:
        return UNKNOWN
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def dumps(plan: dict) -> str:
    return json.dumps(plan, indent=2, sort_keys=True) + "\n"


def load_plan(path: Path) -> dict:
    try:
        plan = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise PlanError(f"{path}: no such plan file (make one with `pubsubguard plan --out {path}`)") from None
    except json.JSONDecodeError as err:
        raise PlanError(f"{path}: not JSON ({err})") from None
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        raise PlanError(f"{path}: format: expected {PLAN_FORMAT!r}, got {plan.get('format') if isinstance(plan, dict) else type(plan).__name__!r}")
    return plan


def resources_of(plan: dict, type_: str) -> list[dict]:
    return [r for r in plan["resources"] if r["type"] == type_]
