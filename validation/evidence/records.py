"""The evidence format: what the probe records and what the checks read.

This module is the contract between `pubsubguard.validation.probe.clients` (writes), `histories` (generates
legal and mutated histories) and `pubsubguard.validation.checks.run` (reads). All times are integer microseconds
since the epoch, taken from the recording process's clock (`time.time_ns() // 1000`).

A message's identity within a run is (topic, key, seq). Message ids identify one publish; a message
forwarded to a dead-letter topic gets a new message id there, so dead-letter rows are matched by
(key, seq), which every probe message carries as attributes.

Files under the evidence directory (Parquet, one part file per writer flush, so a crash loses at
most the rows not yet flushed):

    <dir>/run.json                       run id, declared subscriptions, parameters
    <dir>/publishes/part-*.parquet       PUBLISH_FIELDS
    <dir>/deliveries/part-*.parquet      DELIVERY_FIELDS
    <dir>/seal.json                      written last: every file's size, SHA-256 and rows (validation/evidence/seal.py)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from pubsubguard.core import storage
from pubsubguard.core.errors import UserError
from pubsubguard.core.user_files import json_problem
from pubsubguard.policies import pubsub_facts as facts

# -- publishes: one row per publish attempt result ---------------------------------------------
PUBLISH_FIELDS = [
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("topic", pa.string(), nullable=False),  # declared topic name
    pa.field("key", pa.string(), nullable=False),  # ordering key ("" for none)
    pa.field("seq", pa.int64(), nullable=False),  # per-key sequence number, from 0
    pa.field("message_id", pa.string()),  # server-assigned; null when the publish failed
    pa.field("poison", pa.bool_(), nullable=False),  # subscribers always nack it
    pa.field("status", pa.string(), nullable=False),  # "ok" | "error"
    pa.field("error", pa.string()),
    # when publish() was called, stamped before the call: a delivery can never precede it, so
    # publish -> receive latency is never negative (clocks of one host; across hosts, their skew)
    pa.field("publish_time_us", pa.int64(), nullable=False),
    pa.field("publisher_task", pa.string(), nullable=False),
    pa.field("result_time_us", pa.int64()),  # when the publish's result (server ack or error) arrived
]

# -- deliveries: one row per message received by a subscriber (or drained from a dead-letter topic)
DELIVERY_FIELDS = [
    pa.field("run_id", pa.string(), nullable=False),
    # The declared subscription this delivery is evidence about. For a dead-letter row, the source
    # subscription it was forwarded from (CloudPubSubDeadLetterSourceSubscription, mapped back to
    # the declared name).
    pa.field("subscription", pa.string(), nullable=False),
    pa.field("kind", pa.string(), nullable=False),  # "delivery" | "dead_letter"
    pa.field("message_id", pa.string(), nullable=False),
    pa.field("key", pa.string()),  # null when the message was not published by a probe
    pa.field("seq", pa.int64()),
    pa.field("probe_run", pa.string()),  # the message's run id attribute (null: not a probe message)
    pa.field("delivery_attempt", pa.int64()),  # Message.delivery_attempt (0/None without DLQ policy)
    pa.field("receive_time_us", pa.int64(), nullable=False),
    pa.field("publish_time_us", pa.int64()),  # server publish time of the delivered message
    pa.field("subscriber_task", pa.string(), nullable=False),
    pa.field("ack_id", pa.string()),  # hash of the ack id of this delivery
    pa.field("ack_deadline_s", pa.int64(), nullable=False),  # deadline in force for this delivery
    # What the subscriber did:
    #   "ack"      acked within the deadline
    #   "nack"     nacked (fault injection or poison)
    #   "expire"   held without ack until the deadline passed (lease not extended)
    #   "late_ack" held past the deadline, then acked with the now stale ack id
    #   "crash"    the subscriber task crashed holding it
    #   "none"     dead-letter rows and drained rows with no verdict
    pa.field("action", pa.string(), nullable=False),
    # Outcome of the ack/nack as the client reported it: "success" | "invalid_ack_id" |
    # "failed_precondition" | "permission_denied" | "other" | "none" (no ack attempted)
    pa.field("ack_result", pa.string(), nullable=False),
    pa.field("ack_time_us", pa.int64()),  # when the ack/nack was sent (null: never)
    pa.field("dl_source_delivery_count", pa.int64()),  # CloudPubSubDeadLetterSourceDeliveryCount
    pa.field("dl_source_subscription", pa.string()),  # raw CloudPubSubDeadLetterSourceSubscription
]

PUBLISH_SCHEMA = pa.schema(PUBLISH_FIELDS)
DELIVERY_SCHEMA = pa.schema(DELIVERY_FIELDS)

ACTIONS = ("ack", "nack", "expire", "late_ack", "crash", "none")
ACK_RESULTS = ("success", "invalid_ack_id", "failed_precondition", "permission_denied", "other", "none")


class EvidenceError(UserError):
    """Evidence that cannot be judged as it is (a damaged or missing file, a part of another run): the
    message names the file and what is wrong (exit 2)."""


def json_error(err) -> str:
    """A JSONDecodeError as the one-line errors say it (`truncated at line L column C (...)`)."""
    return json_problem(err.doc, err)


def read_record(location, *, missing: str | None, damaged: str, expected: str, remedy: str = "",
                read=storage.read_text) -> dict | None:
    """The one loader of a JSON mapping a run records (run.json, seal.json, a kept input's manifest,
    conformance.json), through `read` (`pubsubguard.core.storage`: a path or an object store URI): the mapping;
    when absent, None if `missing` is None, else EvidenceError `{location}: missing ({missing})`; when
    damaged, EvidenceError `{location}: {damaged}: not text|truncated at line L column C (...)|not JSON at
    ...|expected {expected}` (`; {remedy}` after it when given): one line naming the file and what is wrong."""
    after = f"; {remedy}" if remedy else ""
    try:
        text = read(location)
    except FileNotFoundError:
        if missing is None:
            return None
        raise EvidenceError(f"{location}: missing ({missing})") from None
    except UnicodeDecodeError:
        raise EvidenceError(f"{location}: {damaged}: not text (expected {expected}){after}") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise EvidenceError(f"{location}: {damaged}: {json_error(err)}{after}") from None
    if not isinstance(data, dict):
        raise EvidenceError(f"{location}: {damaged}: expected {expected}{after}")
    return data


@dataclass(frozen=True)
class DeclaredSubscription:
    """What a subscription declares, as the checks need it (from the plan)."""

    name: str
    topic: str
    ordering: bool = False
    exactly_once: bool = False
    ack_deadline_s: int = facts.ACK_DEADLINE_DEFAULT_S
    max_delivery_attempts: int | None = None  # None: no dead-letter policy
    dead_letter_topic: str | None = None
    delivery_type: str = facts.PULL  # one of facts.DELIVERY_TYPES

    @property
    def dead_lettering(self) -> bool:
        return self.max_delivery_attempts is not None


@dataclass
class RunInfo:
    run_id: str
    target: str  # "emulator" | "gcp"
    subscriptions: list[DeclaredSubscription]
    parameters: dict = field(default_factory=dict)
    tested: dict = field(default_factory=dict)  # subscription -> why not tested (absent: tested)

    def write(self, directory: Path | str) -> None:
        """`<directory>/run.json`, whole (pubsubguard.core.storage: a path or an object store URI)."""
        storage.write_text(storage.join(directory, "run.json"), json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")

    @classmethod
    def read(cls, directory: Path | str) -> "RunInfo":
        """`<directory>/run.json`; EvidenceError naming it when it is missing or damaged."""
        location = storage.join(directory, "run.json")
        data = read_record(location, missing="expected the run.json of a verify run", damaged="damaged",
                           expected="the run.json of a verify run")
        try:
            data["subscriptions"] = [DeclaredSubscription(**s) for s in data["subscriptions"]]
            return cls(**data)
        except (KeyError, TypeError) as err:
            raise EvidenceError(f"{location}: damaged: expected the fields of a verify run's run.json "
                                f"(run_id, target, subscriptions, parameters, tested): {type(err).__name__}: {err}") from None
