"""Reading resource properties defensively: unknowns, missing values and wrong types.

The policy SDK hands rules an "unknown-checking proxy" that raises `UnknownValueError` on any access
to a value not known during preview. Rules never touch it directly: `plain()` turns the proxy into
plain dicts and lists in which every unknown is the single marker `UNKNOWN`. The typed readers below
return the value, `UNKNOWN`, or `None` when the property is missing or of a type the rule cannot
judge (the provider rejects those itself). Every rule treats `UNKNOWN` and `None` as "cannot judge":
it reports nothing, so an unknown never produces a violation and a wrong type never crashes a rule.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Callable

import pubsub_facts as facts

# The engine's sentinels for values unknown during preview (pulumi_policy.proxy; the CLI marshals
# every computed value as the string sentinel).
UNKNOWN_SENTINELS = frozenset(
    {
        "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # boolean
        "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
        "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string (and any computed value on the wire)
        "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
        "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
        "e48ece36-62e2-4504-bad9-02848725956a",  # archive
        "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
    }
)


SECRET_SIG_KEY, SECRET_SIG = "4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270"


class _Unknown:
    """The one marker for "not known until the update runs"."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unknown>"

    def __bool__(self) -> bool:
        raise TypeError("an unknown value has no truth value; check `is UNKNOWN` first")


UNKNOWN = _Unknown()


STRING_SENTINEL = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def plain(value: Any) -> Any:
    """Plain data from SDK proxies (or plain data): dicts, lists, scalars; unknowns -> UNKNOWN, and so is
    a string built from an unknown and a known part (its known part: `partial_strings`)."""
    if isinstance(value, str):
        return UNKNOWN if value in UNKNOWN_SENTINELS or STRING_SENTINEL in value else value
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, Mapping):
        if value.get(SECRET_SIG_KEY) == SECRET_SIG:  # a secret as the engine marshals it: its value
            return plain(value.get("value"))
        target = _proxy_target(value)
        source = target if target is not None else value
        return {str(key): plain(item) for key, item in _items(source)}
    if isinstance(value, Sequence):
        target = _proxy_target(value)
        source = target if target is not None else value
        return [plain(item) for item in list(source)]
    return value  # assets, archives, secrets' payloads: no rule reads them


def same_for_same_object(convert: Callable[[Any], Any], size: int = 1 << 16) -> Callable[[Any], Any]:
    """`convert`, answered once per distinct argument object (by identity; the argument is held while it
    is remembered, so its identity is not reused). For conversions whose result depends only on an
    argument nobody mutates: the SDK's per-policy conversions of one request's properties."""
    remembered: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
    lock = threading.Lock()

    def converted(value: Any) -> Any:
        key = id(value)
        with lock:
            hit = remembered.get(key)
            if hit is not None and hit[0] is value:
                remembered.move_to_end(key)
                return hit[1]
        result = convert(value)
        with lock:
            remembered[key] = (value, result)
            if len(remembered) > size:
                remembered.popitem(last=False)
        return result

    return converted


_request = threading.local()  # the memo of the request this thread is answering (pack.py opens it)


@contextmanager
def request_scope() -> Iterator[None]:
    """Remember conversions (`in_request`) until this request is answered: the SDK converts the same
    request's resources once per policy (`AnalyzeStack`: every resource, for each stack policy)."""
    outer = getattr(_request, "memo", None)
    _request.memo = {}
    try:
        yield
    finally:
        _request.memo = outer


def in_request(owner: Any, value: Any, make: Callable[[], Any]) -> Any:
    """`make()`, answered once per (owner, object `value`) within the current request (`value` is held
    until the request ends, so its identity is not reused); outside a request, `make()` every time."""
    memo = getattr(_request, "memo", None)
    if memo is None:
        return make()
    key = (owner, id(value))
    hit = memo.get(key)
    if hit is not None and hit[0] is value:
        return hit[1]
    result = make()
    memo[key] = (value, result)
    return result


def once_in_request(key: str, make: Callable[[], Any]) -> Any:
    """`make()`, once within the current request; outside a request, every time."""
    memo = getattr(_request, "memo", None)
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return memo[key]


plain_props = same_for_same_object(plain)
"""`plain` of a resource's whole property bag (the SDK hands every policy the same one: see pack.py)."""


def partial_strings(value: Any, path: tuple = ()) -> dict[tuple, str]:
    """{path: string} of the strings built from an unknown and a known part (`"https://" + <unknown>`):
    unknown to every reader, but their known parts can decide a rule (`known_parts`). A real `pulumi
    preview` sends none (an interpolation of an unknown is wholly unknown); pubsubguard's engine keeps
    them where the documented form of an output or the program's own text gives a part."""
    if isinstance(value, str):
        return {path: value} if STRING_SENTINEL in value and value != STRING_SENTINEL else {}
    if value is None or isinstance(value, (bool, int, float)):
        return {}
    if isinstance(value, Mapping):
        if value.get(SECRET_SIG_KEY) == SECRET_SIG:
            return {}  # a secret's known part stays unknown (it could end up in a message)
        target = _proxy_target(value)
        return {found: text for key, item in _items(target if target is not None else value)
                for found, text in partial_strings(item, (*path, str(key))).items()}
    if isinstance(value, Sequence):
        target = _proxy_target(value)
        return {found: text for index, item in enumerate(list(target if target is not None else value))
                for found, text in partial_strings(item, (*path, index)).items()}
    return {}


partial_props = same_for_same_object(partial_strings)


def known_parts(partial: Mapping[tuple, str], *path: Any) -> list[str] | None:
    """The known parts of the string at `path` (around its unknown ones), or None when it has none."""
    text = partial.get(tuple(path))
    return text.split(STRING_SENTINEL) if text is not None else None


def could_be(form: str, text: str) -> bool:
    """Whether a string with unknown parts (`partial_strings`) could be `text`, whatever the unknowns are."""
    pattern = ".*".join(re.escape(part) for part in form.split(STRING_SENTINEL))
    return re.fullmatch(pattern, text, re.S) is not None


def _proxy_target(value: Any) -> Any:
    """The wrapped container of an SDK proxy (the SDK's own serializer reads it the same way)."""
    if type(value).__name__ in ("_DictProxy", "_ListProxy", "_DictSecretsProxy", "_ListSecretsProxy"):
        return value["__target"]
    return None


def _items(mapping: Any):
    if isinstance(mapping, dict):
        return mapping.items()
    return ((key, mapping[key]) for key in mapping)


# --- Typed readers -------------------------------------------------------------------------------
def get(props: Any, *path: str) -> Any:
    """The value at `path`, UNKNOWN if any step is unknown, None if missing or not a mapping."""
    value = props
    for key in path:
        if value is UNKNOWN:
            return UNKNOWN
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def as_bool(value: Any) -> Any:
    """True/False (also from "true"/"false"), UNKNOWN, or None."""
    if value is UNKNOWN or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def enabled(value: Any) -> Any:
    """Whether a boolean switch is on: True, False (also when unset), or UNKNOWN."""
    flag = as_bool(value)
    return False if flag is None else flag


def as_number(value: Any) -> Any:
    """A finite number (also from a numeric string), UNKNOWN, or None."""
    if value is UNKNOWN:
        return UNKNOWN
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value) if isinstance(value, str) else value
    except ValueError:
        return None
    return number if number == number and abs(number) != float("inf") else None


def as_str(value: Any) -> Any:
    if value is UNKNOWN or isinstance(value, str):
        return value
    return None


def as_duration(value: Any) -> Any:
    """Seconds of an API duration ("600s"), UNKNOWN, or None."""
    if value is UNKNOWN:
        return UNKNOWN
    return facts.parse_api_duration(value)


def as_list(value: Any) -> Any:
    if value is UNKNOWN or isinstance(value, list):
        return value
    return None


def known(*values: Any) -> bool:
    """Every value is known and of the expected type (None marks a wrong type or a missing value)."""
    return all(value is not None and value is not UNKNOWN for value in values)


# --- Resource names and references ----------------------------------------------------------------
def resource_path_key(value: Any, collection: str) -> tuple[str | None, str] | None:
    """(project or None, short name) of "projects/P/<collection>/N" or of a bare name "N"."""
    if not isinstance(value, str) or not value or value is UNKNOWN or value in UNKNOWN_SENTINELS:
        return None
    parts = value.split("/")
    if len(parts) == 4 and parts[0] == "projects" and parts[2] == collection and parts[1] and parts[3]:
        return parts[1], parts[3]
    if "/" not in value:
        return None, value
    return None


def display(props: Any, logical_name: str) -> str:
    """How a message names a resource: its Pub/Sub name when known, else its Pulumi name."""
    name = get(props, "name")
    if isinstance(name, str) and name:
        return name if name == logical_name else f"{name} (Pulumi resource {logical_name})"
    return logical_name
