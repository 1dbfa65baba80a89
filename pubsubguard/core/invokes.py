"""Invokes (data sources) as the offline engine answers them: given results (`--invoke-results FILE`),
`getIAMPolicy` evaluated here, reads of topics and subscriptions by id, and otherwise a result unknown but for
the arguments it echoes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pubsubguard.core.user_files import read_mapping
from pubsubguard.core.project import UNKNOWN, PlanError

GET_IAM_POLICY = "gcp:organizations/getIAMPolicy:getIAMPolicy"


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class InvokeResults:
    """Given results of invokes: `[{token, args (optional: any args), result}, ...]` from a JSON or
    YAML file (`--invoke-results FILE`)."""

    def __init__(self, entries: list[dict] | None = None, source: str = ""):
        self.source = source
        self.exact: dict[tuple[str, str], dict] = {}
        self.any_args: dict[str, dict] = {}
        for entry in entries or []:
            if entry.get("args") is None:
                self.any_args[entry["token"]] = entry["result"]
            else:
                self.exact[(entry["token"], canonical(entry["args"]))] = entry["result"]

    @classmethod
    def load(cls, path: Path | None) -> "InvokeResults":
        if path is None:
            return cls()
        data = read_mapping(path, PlanError, where=f"--invoke-results {path}", language="JSON or YAML")
        if isinstance(data, dict) and isinstance(data.get("invokes"), list):
            data = data["invokes"]
        if not isinstance(data, list):
            raise PlanError(f"--invoke-results {path}: expected a list of {{token, args, result}} entries")
        for index, entry in enumerate(data):
            if not (isinstance(entry, dict) and isinstance(entry.get("token"), str)
                    and isinstance(entry.get("result"), dict)
                    and (entry.get("args") is None or isinstance(entry.get("args"), dict))):
                raise PlanError(
                    f"--invoke-results {path}: entry {index}: expected {{token: 'pkg:module/fn:fn', "
                    "args: {...} (optional), result: {...}}"
                )
        return cls(data, str(path))

    def lookup(self, token: str, args: dict) -> dict | None:
        found = self.exact.get((token, canonical(args)))
        return found if found is not None else self.any_args.get(token)


def iam_policy_data(args: dict) -> dict:
    """`gcp.organizations.getIAMPolicy` evaluated: the policy JSON its bindings and audit configs make."""
    bindings = []
    for binding in args.get("bindings") or []:
        entry = {"members": sorted(binding.get("members") or []), "role": binding.get("role")}
        if binding.get("condition"):
            entry["condition"] = binding["condition"]
        bindings.append(entry)
    policy: dict[str, Any] = {}
    if args.get("auditConfigs"):
        policy["auditConfigs"] = [
            {"auditLogConfigs": [{k: v for k, v in c.items()} for c in a.get("auditLogConfigs") or []],
             "service": a.get("service")}
            for a in args["auditConfigs"]
        ]
    if bindings:
        policy["bindings"] = bindings
    data = json.dumps(policy, sort_keys=True, separators=(",", ":"))
    return {
        "policyData": data,
        "id": str(int(hashlib.sha256(data.encode()).hexdigest()[:8], 16)),
        "bindings": args.get("bindings") or [],
        "auditConfigs": args.get("auditConfigs") or [],
    }


UNKNOWN_RESULT = "pubsubguard:unknown-result"  # langhost_exec.UNKNOWN_RESULT


def unknown_result(args: dict) -> dict:
    """The answer to an invoke nobody can know offline: the arguments it was given (a data source's
    result echoes them) and the mark that every other field is unknown. The program side makes that an
    instance of the result type of the program's own provider package with those fields unknown
    (`langhost_exec`), so the answer does not depend on what is installed beside pubsubguard."""
    return {**args, UNKNOWN_RESULT: True}


READ_INVOKES = {"gcp:pubsub/getTopic:getTopic": "topics", "gcp:pubsub/getSubscription:getSubscription": "subscriptions"}


def read_invoke_id(token: str, args: dict) -> dict:
    """The id a data source that reads one resource answers, where its arguments determine it
    (`getTopic({name, project})`: `projects/P/topics/N`), as for a resource read with `.get`."""
    collection = READ_INVOKES.get(token)
    name, project = args.get("name"), args.get("project")
    if collection is None or not isinstance(name, str) or UNKNOWN in name:
        return {}
    if name.startswith("projects/") and name.count("/") == 3:
        return {"id": name}
    if isinstance(project, str) and project and UNKNOWN not in project:
        return {"id": f"projects/{project}/{collection}/{name}"}
    return {}
