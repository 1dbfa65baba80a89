"""The estate model: one typed description of a Pub/Sub estate, read from a stack's config.

Shape (structured config under the project's namespace, key `pubsubguard:estate`, in
`Pulumi.<stack>.yaml`; see README "The estate"):

    pubsubguard:estate:
      probe_isolation: true          # production subscriptions exclude the probe's messages
      topics:
        - name: orders
          publisher_region: us-east1 # publishers use us-east1-pubsub.googleapis.com:443
          persistence_regions: [us-east1]
          subscriptions:
            - name: orders-ordered
              consumer_region: us-east1
              ordering: true
              dead_letter: {max_delivery_attempts: 5}   # auto-created dead-letter topic

Only value ranges, names and references are checked here. Combinations that are legal to write but
wrong to deploy (push with exactly-once, ...) are the policy pack's job and are kept as written.
"""

from __future__ import annotations

import difflib
import re
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pubsubguard.policies import pubsub_facts as facts

# --- Durations ---------------------------------------------------------------------------------
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_HUMAN_DURATION = re.compile(r"(\d+)([smhd])")


def parse_duration(value: Any) -> int:
    """Seconds from an int (seconds) or a string like "600s", "10m", "12h", "7d"."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like '600s', '10m', '12h', '7d' or whole seconds")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        match = _HUMAN_DURATION.fullmatch(value.strip())
        if match:
            return int(match.group(1)) * _UNITS[match.group(2)]
    raise ValueError(f"expected a duration like '600s', '10m', '12h', '7d' or whole seconds, got {value!r}")


def _ranged_duration(low: int, high: int, what: str):
    def check(value: Any) -> int:
        seconds = parse_duration(value)
        if not low <= seconds <= high:
            raise ValueError(f"{what} must be from {low}s to {high}s, got {seconds}s")
        return seconds

    return check


def _name(value: Any) -> str:
    problem = facts.name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _region(value: Any) -> str:
    if not facts.is_region(value):
        raise ValueError(f"expected a Google Cloud region like 'us-east1' (docs/pubsub-facts.md lists them), got {value!r}")
    return value


def _labels(value: Any) -> Any:
    """GCP's label rules (keys and values: lowercase letters, digits, '_' and '-', at most 63
    characters, keys starting with a letter; at most 64 labels)."""
    problems = facts.label_problems(value)
    if problems:
        raise ValueError("; ".join(problems))
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


# --- Delivery types ----------------------------------------------------------------------------
class PullDelivery(_Strict):
    type: Literal[facts.PULL] = facts.PULL


class PushDelivery(_Strict):
    type: Literal[facts.PUSH]
    endpoint: str
    oidc_service_account: str | None = None
    audience: str | None = None


class BigQueryDelivery(_Strict):
    type: Literal[facts.BIGQUERY]
    table: str = Field(description="project.dataset.table")
    use_topic_schema: bool = False
    write_metadata: bool = False


class CloudStorageDelivery(_Strict):
    type: Literal[facts.CLOUD_STORAGE]
    bucket: str
    filename_prefix: str | None = None
    max_duration: str | None = None


Delivery = Annotated[
    Union[PullDelivery, PushDelivery, BigQueryDelivery, CloudStorageDelivery],
    Field(discriminator="type"),
]


class RetryPolicy(_Strict):
    minimum_backoff: int = 10
    maximum_backoff: int = 600

    _check = field_validator("minimum_backoff", "maximum_backoff", mode="before")(
        staticmethod(_ranged_duration(facts.RETRY_BACKOFF_MIN_S, facts.RETRY_BACKOFF_MAX_S, "backoff"))
    )


class DeadLetter(_Strict):
    """Dead-lettering of one subscription.

    Without `topic`, a dead-letter topic `<subscription>-dead-letter` is created with a subscription
    `<subscription>-dead-letter-drain`, so nothing forwarded is lost. With `topic`, it names a topic
    declared in the estate (which needs its own subscription; the policy pack checks that).
    """

    max_delivery_attempts: int = facts.MAX_DELIVERY_ATTEMPTS_DEFAULT
    topic: str | None = None

    @field_validator("max_delivery_attempts")
    @classmethod
    def _attempts(cls, value: int) -> int:
        low, high = facts.MAX_DELIVERY_ATTEMPTS_MIN, facts.MAX_DELIVERY_ATTEMPTS_MAX
        if not low <= value <= high:
            raise ValueError(f"must be from {low} to {high}, got {value}")
        return value

    _topic_name = field_validator("topic", mode="before")(
        staticmethod(lambda v: None if v is None else _name(v))
    )


class SubscriptionSpec(_Strict):
    name: str
    delivery: Delivery = Field(default_factory=PullDelivery)
    ordering: bool = False
    exactly_once: bool = False
    ack_deadline_seconds: int = facts.ACK_DEADLINE_DEFAULT_S
    retention: int = 7 * 86400
    retain_acked_messages: bool = False
    retry_policy: RetryPolicy | None = None
    filter: str | None = None
    expiration: int | Literal["never"] | None = Field(
        default=None, description="TTL of inactivity; 'never'; or unset for Pub/Sub's default (31d)"
    )
    labels: dict[str, str] = Field(default_factory=dict)
    dead_letter: DeadLetter | None = None
    consumer_region: str | None = None

    _name = field_validator("name", mode="before")(staticmethod(_name))
    _labels = field_validator("labels", mode="before")(staticmethod(_labels))
    _region = field_validator("consumer_region", mode="before")(
        staticmethod(lambda v: None if v is None else _region(v))
    )
    _retention = field_validator("retention", mode="before")(
        staticmethod(_ranged_duration(facts.RETENTION_MIN_S, facts.RETENTION_MAX_S, "retention"))
    )

    @field_validator("ack_deadline_seconds")
    @classmethod
    def _deadline(cls, value: int) -> int:
        low, high = facts.ACK_DEADLINE_MIN_S, facts.ACK_DEADLINE_MAX_S
        if not low <= value <= high:
            raise ValueError(f"must be from {low} to {high} seconds, got {value}")
        return value

    @field_validator("expiration", mode="before")
    @classmethod
    def _expiration(cls, value: Any) -> Any:
        if value is None or value == "never":
            return value
        seconds = parse_duration(value)
        if seconds < facts.EXPIRATION_MIN_S:
            raise ValueError(f"must be 'never' or at least {facts.EXPIRATION_MIN_S}s "
                             f"({facts.spoken_seconds(facts.EXPIRATION_MIN_S)}), got {seconds}s")
        return seconds

    @field_validator("filter")
    @classmethod
    def _filter(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode()) > facts.FILTER_MAX_BYTES:
            raise ValueError(f"must be at most {facts.FILTER_MAX_BYTES} bytes, got {len(value.encode())}")
        return value


class TopicSpec(_Strict):
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    message_retention: int | None = None
    persistence_regions: list[str] | None = None
    enforce_in_transit: bool = False
    kms_key: str | None = None
    publisher_region: str | None = None
    subscriptions: list[SubscriptionSpec] = Field(default_factory=list)

    _name = field_validator("name", mode="before")(staticmethod(_name))
    _labels = field_validator("labels", mode="before")(staticmethod(_labels))
    _region = field_validator("publisher_region", mode="before")(
        staticmethod(lambda v: None if v is None else _region(v))
    )
    _retention = field_validator("message_retention", mode="before")(
        staticmethod(
            lambda v: None
            if v is None
            else _ranged_duration(facts.TOPIC_RETENTION_MIN_S, facts.TOPIC_RETENTION_MAX_S, "retention")(v)
        )
    )

    @field_validator("persistence_regions", mode="before")
    @classmethod
    def _regions(cls, value: Any) -> Any:
        if value is None:
            return value
        if not isinstance(value, list) or not value:
            raise ValueError("expected a non-empty list of regions")
        return [_region(v) for v in value]


class EstateSpec(_Strict):
    topics: list[TopicSpec]
    probe_isolation: bool = False

    @model_validator(mode="after")
    def _references(self) -> "EstateSpec":
        topic_names = [t.name for t in self.topics]
        seen: set[str] = set()
        for index, name in enumerate(topic_names):
            if name in seen:
                raise _FieldError(("topics", index, "name"), f"duplicate topic name {name!r}")
            seen.add(name)
        sub_seen: dict[str, tuple] = {}
        for t_index, topic in enumerate(self.topics):
            for s_index, sub in enumerate(topic.subscriptions):
                loc = ("topics", t_index, "subscriptions", s_index)
                if sub.name in sub_seen:
                    raise _FieldError(loc + ("name",), f"duplicate subscription name {sub.name!r}")
                sub_seen[sub.name] = loc
                if sub.dead_letter and sub.dead_letter.topic and sub.dead_letter.topic not in seen:
                    raise _FieldError(
                        loc + ("dead_letter", "topic"),
                        f"names topic {sub.dead_letter.topic!r}, which the estate does not declare "
                        f"(declared: {', '.join(topic_names)})",
                    )
        # Names the program derives must not collide with declared ones either.
        for t_index, topic in enumerate(self.topics):
            for s_index, sub in enumerate(topic.subscriptions):
                if sub.dead_letter and not sub.dead_letter.topic:
                    loc = ("topics", t_index, "subscriptions", s_index, "dead_letter")
                    dl_topic, dl_sub = auto_dead_letter_names(sub.name)
                    if dl_topic in seen:
                        raise _FieldError(loc, f"auto-created dead-letter topic {dl_topic!r} collides with a declared topic")
                    if dl_sub in sub_seen:
                        raise _FieldError(loc, f"auto-created subscription {dl_sub!r} collides with a declared one")
                    for derived in (dl_topic, dl_sub):
                        problem = facts.name_problem(derived)
                        if problem:
                            raise _FieldError(loc, f"derived name: {problem}")
        return self

    def subscriptions(self):
        for topic in self.topics:
            for sub in topic.subscriptions:
                yield topic, sub


def auto_dead_letter_names(subscription: str) -> tuple[str, str]:
    """(topic, drain subscription) the program creates for a subscription's own dead-letter topic."""
    return f"{subscription}-dead-letter", f"{subscription}-dead-letter-drain"


# --- Errors ------------------------------------------------------------------------------------
class _FieldError(ValueError):
    def __init__(self, loc: tuple, message: str):
        super().__init__(message)
        self.loc = loc
        self.message = message


class EstateError(Exception):
    """Invalid estate config. `str()` is the user-facing message: file, field path, expectation."""

    def __init__(self, source: str, problems: list[tuple[str, str]]):
        self.source = source
        self.problems = problems
        lines = [f"{source}: invalid estate ({len(problems)} problem{'s' if len(problems) != 1 else ''})"]
        lines += [f"  {path}: {message}" for path, message in problems]
        super().__init__("\n".join(lines))


def field_path(prefix: str, loc: tuple) -> str:
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


_DELIVERIES = {facts.PULL: PullDelivery, facts.PUSH: PushDelivery, facts.BIGQUERY: BigQueryDelivery,
               facts.CLOUD_STORAGE: CloudStorageDelivery}
if tuple(_DELIVERIES) != facts.DELIVERY_TYPES:  # a delivery type added to the facts needs its model here
    raise RuntimeError(f"infra/estate.py: delivery models {tuple(_DELIVERIES)} differ from facts.DELIVERY_TYPES")
_TAGS = {*_DELIVERIES, "function-after", "function-before", "function-plain"}
_DELIVERY_TYPES_SPOKEN = ", ".join(repr(delivery) for delivery in facts.DELIVERY_TYPES)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]


def _known_fields(loc: tuple) -> list[str]:
    """The field names allowed where `loc` (pydantic's raw location, delivery tags included) ends."""
    model: type[BaseModel] | None = EstateSpec
    for part in loc[:-1]:
        if part in _DELIVERIES:  # the delivery union's tag
            model = _DELIVERIES[part]
            continue
        if isinstance(part, int) or model is None:
            continue
        field = model.model_fields.get(part)
        models = _models_in(field.annotation) if field is not None else []
        model = models[0] if len(models) == 1 else None
    return list(model.model_fields) if model is not None else []


def _unknown_field(loc: tuple) -> str:
    known = _known_fields(loc)
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close:
        return f"unknown field; did you mean {close[0]!r}?"
    return f"unknown field (expected one of: {', '.join(known)})" if known else "unknown field"


def _message(error: dict) -> str:
    kind = error["type"]
    msg = error["msg"]
    if kind == "extra_forbidden":
        return _unknown_field(tuple(error["loc"]))
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":
        return f"delivery type must be one of {_DELIVERY_TYPES_SPOKEN}, got {error['input']!r}"
    if kind == "union_tag_not_found":
        return f"delivery needs a 'type': one of {_DELIVERY_TYPES_SPOKEN}"
    if kind == "value_error":
        msg = msg.removeprefix("Value error, ")
    elif "input" in error and not isinstance(error["input"], (dict, list)):
        msg = f"{msg}, got {error['input']!r}"
    return msg


SECRET_MESSAGE = (
    "a secret (`secure:`), which the offline plan cannot decrypt (it runs without the stack's secrets "
    "provider or passphrase, so the value is unknown here); write this value in plain text, or preview "
    "with `pulumi preview`, which decrypts it"
)


def is_secret(value: Any) -> bool:
    """A `secure:` value of the stack file: as written (`{secure: <ciphertext>}`) or as the offline
    plan hands it to the program (the engine's sentinel for a value unknown at preview)."""
    from pulumi.runtime.rpc import UNKNOWN

    if isinstance(value, dict):
        return list(value) == ["secure"] and isinstance(value["secure"], str)
    return value == UNKNOWN


def secret_paths(data: Any, loc: tuple = ()) -> list[tuple]:
    if is_secret(data):
        return [loc]
    if isinstance(data, dict):
        return [path for key, value in data.items() for path in secret_paths(value, loc + (key,))]
    if isinstance(data, list):
        return [path for index, value in enumerate(data) for path in secret_paths(value, loc + (index,))]
    return []


def load_spec(data: Any, source: str, prefix: str = "pubsubguard:estate") -> EstateSpec:
    """Validate `data` (the parsed config value) into an EstateSpec, or raise EstateError naming each field."""
    if isinstance(data, str):
        raise EstateError(source, [(prefix, "expected a mapping with 'topics', got a string")])
    secrets = secret_paths(data)
    if secrets:
        raise EstateError(source, [(field_path(prefix, loc), SECRET_MESSAGE) for loc in secrets])
    try:
        return EstateSpec.model_validate(data)
    except _FieldError as err:
        raise EstateError(source, [(field_path(prefix, err.loc), err.message)]) from None
    except ValidationError as err:
        problems = []
        for error in err.errors():
            loc = tuple(part for part in error["loc"] if part not in _TAGS)
            if error["type"] == "value_error" and isinstance(error.get("ctx", {}).get("error"), _FieldError):
                inner = error["ctx"]["error"]
                problems.append((field_path(prefix, inner.loc), inner.message))
                continue
            problems.append((field_path(prefix, loc), _message(error)))
        raise EstateError(source, problems) from None
