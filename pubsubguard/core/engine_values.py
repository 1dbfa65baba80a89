"""Values on the wire between a program and the engine: decoded from the protocol's structs (references, outputs,
secrets, byte strings, unknowns), the known parts of partly unknown strings, documented output forms, and what
a resource read with `.get` is known to hold."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote

from pubsubguard.core.project import UNKNOWN
from pubsubguard.core.signatures import BYTE_STRING_SIG, OUTPUT_SIG, RESOURCE_SIG, SECRET_SIG, SIG
from pubsubguard.policies import pubsub_facts as facts


def decode(value: Any) -> Any:
    """Plain JSON data from a property value as `json_format.MessageToDict` gives it (see module doc)."""
    if isinstance(value, str):
        return UNKNOWN if UNKNOWN in value else value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        sig = value.get(SIG)
        if sig == SECRET_SIG:
            return {SIG: SECRET_SIG, "value": decode(value.get("value"))}
        if sig == RESOURCE_SIG:
            if "id" in value:  # a custom resource: providers that take no references get its id
                ref_id = value.get("id")
                return ref_id if isinstance(ref_id, str) and ref_id and UNKNOWN not in ref_id else UNKNOWN
            return value.get("urn", UNKNOWN)
        if sig == OUTPUT_SIG:
            if "value" not in value:
                return UNKNOWN
            inner = decode(value["value"])
            return {SIG: SECRET_SIG, "value": inner} if value.get("secret") else inner
        if sig == BYTE_STRING_SIG:  # judged as the text it reads as (undecodable bytes as U+FFFD)
            return _byte_string(value.get("value"))
        if sig is not None:
            return value  # assets and archives: kept as they are
        return {str(k): decode(v) for k, v in sorted(value.items()) if v is not None}
    return value


def reference_urn(value: Any) -> str | None:
    """The URN of a resource reference on the wire (also inside an output value), else None."""
    if isinstance(value, dict) and value.get(SIG) == OUTPUT_SIG:
        value = value.get("value")
    if isinstance(value, dict) and value.get(SIG) == RESOURCE_SIG and isinstance(value.get("urn"), str):
        return value["urn"]
    return None


def output_dependencies(value: Any):
    """The URNs the output values in a property value on the wire depend on."""
    if isinstance(value, list):
        for item in value:
            yield from output_dependencies(item)
    elif isinstance(value, dict):
        if value.get(SIG) == OUTPUT_SIG:
            yield from (urn for urn in value.get("dependencies") or [] if isinstance(urn, str))
        for item in value.values():
            yield from output_dependencies(item)


def _byte_string(encoded: Any) -> str:
    import base64
    import binascii

    try:
        return base64.b64decode(str(encoded or ""), validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return UNKNOWN


def contains_unknown(value: Any) -> bool:
    if isinstance(value, dict):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_unknown(v) for v in value)
    return value == UNKNOWN


def unknown_paths(value: Any, path: str):
    """Dotted paths of the unknown leaves of `value` (list items as `path[i]`)."""
    if value == UNKNOWN:
        yield path
    elif isinstance(value, dict):
        if value.get(SIG) == SECRET_SIG:
            yield from unknown_paths(value.get("value"), path)
            return
        for key, item in value.items():
            yield from unknown_paths(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from unknown_paths(item, f"{path}[{index}]")


CONFIG_READ = re.compile(re.escape(UNKNOWN) + r"<config ([^<>\s]{1,400})>")  # langhost_exec.CONFIG_READ: a
# configuration value an ESC environment sets or may set, read by the program (the sentinel, marked with its key)


def config_reads(value: Any, path: str, found: dict[str, list[str]]) -> Any:
    """`value` (a property value on the wire) with the marks of its configuration reads (`CONFIG_READ`)
    taken out, the sentinel left; `found` gets the keys read at each dotted path (as `unknown_paths`
    spells it: secrets and outputs are their value's path, list items `path[i]`)."""
    if isinstance(value, str):
        if "<config " not in value:
            return value
        for key in CONFIG_READ.findall(value):
            keys = found.setdefault(path, [])
            if unquote(key) not in keys:
                keys.append(unquote(key))
        return CONFIG_READ.sub(UNKNOWN, value)
    if isinstance(value, list):
        return [config_reads(item, f"{path}[{index}]", found) for index, item in enumerate(value)]
    if isinstance(value, dict):
        if value.get(SIG) in (SECRET_SIG, OUTPUT_SIG):
            return {key: config_reads(item, path, found) if key == "value" else item for key, item in value.items()}
        if value.get(SIG) is not None:
            return value
        return {key: config_reads(item, f"{path}.{key}" if path else str(key), found) for key, item in value.items()}
    return value


def partial_string_entries(value: Any, path: tuple = ()) -> list[dict]:
    """The strings of a property value (as on the wire, before `decode`) that are built from an unknown
    and a known part: `[{path: [key or index, ...], value: the string with the sentinel in it}]`. The
    recorded inputs keep them unknown; the pack also gets them as they are, so that a rule may judge by
    the known part alone (a URL's scheme, a service agent's form). Secrets stay wholly unknown. The pack reads them
    back from its properties as `{path: string}` (`pubsub_rules.values.partial_strings`)."""
    if isinstance(value, str):
        return [{"path": list(path), "value": value}] if UNKNOWN in value and value != UNKNOWN else []
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in partial_string_entries(item, (*path, index))]
    if isinstance(value, dict):
        sig = value.get(SIG)
        if sig == OUTPUT_SIG and not value.get("secret"):
            return partial_string_entries(value.get("value"), path)
        if sig is not None:
            return []  # a secret's known part is never shown to the pack (it could end up in a message)
        return [found for key, item in sorted(value.items())
                for found in partial_string_entries(item, (*path, str(key)))]
    return []


def _opened(value: Any) -> Any:
    return value["value"] if isinstance(value, dict) and value.get(SIG) == SECRET_SIG else value


def with_partial_strings(inputs: dict, partial: list[dict]) -> dict:
    """`inputs` (recorded, unknowns collapsed) with the partial strings put back where they were."""
    if not partial:
        return inputs
    inputs = json.loads(json.dumps(inputs))
    for entry in partial:
        *where, last = entry["path"]
        try:
            holder = inputs
            for step in where:
                holder = _opened(holder)[step]
            holder = _opened(holder)
            if isinstance(holder[last], dict) and holder[last].get(SIG) == SECRET_SIG:
                holder[last]["value"] = entry["value"]
            else:
                holder[last] = entry["value"]
        except (KeyError, IndexError, TypeError):
            continue  # a plan file edited by hand: that value stays unknown
    return inputs


def _put_where_absent(holder: Any, path: tuple, value: str) -> None:
    """Put `value` at `path` (keys and list indices) unless a value is there already."""
    *steps, last = path
    for step, following in zip(steps, path[1:]):
        empty: Any = [] if isinstance(following, int) else {}
        if isinstance(holder, dict):
            if holder.get(step) in (None, UNKNOWN):
                holder[step] = empty
        elif isinstance(holder, list) and step <= len(holder):
            if step == len(holder):
                holder.append(empty)
        else:
            return
        holder = _opened(holder[step])
    if isinstance(holder, dict) and holder.get(last) in (None, UNKNOWN):
        holder[last] = value
    elif isinstance(holder, list) and last == len(holder):
        holder.append(value)


def with_documented_forms(type_: str, inputs: dict) -> dict:
    """A new resource's outputs at preview: its inputs, and the outputs whose form is documented
    (`facts.documented_forms`) in that form, the sentinel where the value is not known yet."""
    forms = facts.documented_forms(type_, inputs)
    if not forms:
        return inputs
    outputs = json.loads(json.dumps(inputs))
    for path, form in forms.items():
        _put_where_absent(outputs, path, form.replace("{}", UNKNOWN))
    return outputs


READ_ID_FORMS = {  # what a read resource's id determines (the provider's import formats): type -> collection
    facts.TOPIC: "topics", facts.SUBSCRIPTION: "subscriptions",
}


def read_outputs(type_: str, id_: str) -> dict:
    """What the engine knows of a resource read with `.get(name, id)` offline: what its id determines (a
    topic's name and project from `projects/P/topics/N`, `P/N` or `N`); every other output is unknown
    (the SDK reads an absent output as unknown at preview)."""
    collection = READ_ID_FORMS.get(type_)
    if collection is None or not id_ or UNKNOWN in id_:
        return {}
    parts = id_.split("/")
    if len(parts) == 4 and parts[0] == "projects" and parts[2] == collection:
        return {"project": parts[1], "name": parts[3]}
    if len(parts) == 2:
        return {"project": parts[0], "name": parts[1]}
    return {"name": id_} if len(parts) == 1 else {}


def unsecret(value: Any) -> Any:
    """The value with secret envelopes opened (for evaluating invokes)."""
    if isinstance(value, dict):
        if value.get(SIG) == SECRET_SIG:
            return unsecret(value.get("value"))
        return {k: unsecret(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unsecret(v) for v in value]
    return value


def struct(values: dict):
    from google.protobuf import struct_pb2

    struct = struct_pb2.Struct()
    struct.update(values)
    return struct


def fields_of(message) -> set[str]:
    return set(message.DESCRIPTOR.fields_by_name)


def to_dict(message) -> dict:
    from google.protobuf import json_format

    return json_format.MessageToDict(message)
