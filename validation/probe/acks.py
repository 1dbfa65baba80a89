"""The outcome of an ack, nack or modack, in the evidence's vocabulary (`ACK_RESULTS`): from the streaming
client's futures, from a unary call's error, and the exactly-once errors that name only other ack ids."""

from __future__ import annotations


def future_ack_result(future, ack_id: str | None = None) -> str:
    """The outcome of an ack, nack or modack future of the streaming client (or of `PulledMessage`).

    With `ack_id` given, an `AcknowledgeStatus.OTHER` that only says *another* ack id of the same request
    failed is the success it is (`failed_batch_mates`)."""
    from google.cloud.pubsub_v1.subscriber.exceptions import AcknowledgeError, AcknowledgeStatus

    try:
        future.result(timeout=120)
        return "success"
    except AcknowledgeError as err:
        if ack_id is not None and failed_batch_mates(err, ack_id):
            return "success"
        return {
            AcknowledgeStatus.INVALID_ACK_ID: "invalid_ack_id",
            AcknowledgeStatus.FAILED_PRECONDITION: "failed_precondition",
            AcknowledgeStatus.PERMISSION_DENIED: "permission_denied",
        }.get(err.error_code, "other")
    except Exception as err:  # noqa: BLE001 - a unary call's error (`PulledMessage`)
        return unary_ack_result(err)


def failed_batch_mates(err, ack_id: str) -> list[str]:
    """The ack ids an exactly-once Acknowledge/ModifyAckDeadline error names as failed, when `ack_id` is
    not among them (else, or when the error names none: []).

    With exactly-once the target answers a request whose ack ids partly fail with INVALID_ARGUMENT and an
    `ErrorInfo` (reason EXACTLY_ONCE_ACKID_FAILURE) whose metadata maps each *failed* ack id to its
    reason; the others in the request were applied. The Python client library (2.x, `_process_requests`)
    completes the futures of those others with `AcknowledgeStatus.OTHER` and the request's status as text,
    so an applied ack reads as failed. Measured on the emulator: of `Acknowledge([stale, valid])` the
    valid ack was applied (never redelivered after its deadline), without it the message came back."""
    from google.cloud.pubsub_v1.subscriber.exceptions import AcknowledgeStatus
    from google.protobuf import text_format
    from google.rpc import error_details_pb2, status_pb2

    if getattr(err, "error_code", None) != AcknowledgeStatus.OTHER or not isinstance(getattr(err, "info", None), str):
        return []
    status = status_pb2.Status()
    try:
        text_format.Parse(err.info, status)
    except text_format.ParseError:
        return []
    failed: list[str] = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Is(info.DESCRIPTOR) and detail.Unpack(info) and info.reason == "EXACTLY_ONCE_ACKID_FAILURE":
            failed.extend(info.metadata)
    return [] if ack_id in failed else failed


def error_reason(err) -> str:
    """One line for an ack error: its exactly-once failure reason if it has one."""
    import re

    text = str(err)
    reasons = sorted(set(re.findall(r"(?:TRANSIENT|PERMANENT)_FAILURE_[A-Z_]+", text)))
    return ", ".join(reasons) if reasons else " ".join(text.split())[:200]


def unary_ack_result(err: Exception | None) -> str:
    """The outcome of a unary Acknowledge, in the streaming client's vocabulary (`future_ack_result`)."""
    from google.api_core import exceptions

    if err is None:
        return "success"
    text = f"{err} {getattr(err, 'reason', '')} {getattr(err, 'metadata', '')} {getattr(err, 'details', '')}"
    if isinstance(err, exceptions.InvalidArgument) and "INVALID_ACK_ID" in text:
        return "invalid_ack_id"
    if isinstance(err, exceptions.FailedPrecondition):
        return "failed_precondition"
    if isinstance(err, exceptions.PermissionDenied):
        return "permission_denied"
    return "other"



# The gRPC codes on which the client library retries an exactly-once ack (python-pubsub 2.x,
# `_EXACTLY_ONCE_DELIVERY_TEMPORARY_RETRY_ERRORS`): the answer is not final, the ack may still be taken.
RETRIED_CODES = frozenset({"DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED", "INTERNAL", "UNAVAILABLE"})


def acknowledge_answers(err: Exception | None, ack_ids: list[str]) -> dict[str, tuple[str, str | None]]:
    """What an exactly-once `Acknowledge(ack_ids)` that raised `err` (None: it returned) answered each ack id: its
    `ack_result` and, when that answer is not final, why (else None). The target names each failed ack id in an
    ErrorInfo (reason EXACTLY_ONCE_ACKID_FAILURE, a protobuf map ack id -> reason); one it does not name was applied
    (`failed_batch_mates`); a `TRANSIENT_*` reason (e.g. `TRANSIENT_FAILURE_UNORDERED_ACK_ID`: an earlier message of
    its ordering key is outstanding, acks must come in order) is not final. A call that failed as a whole is not final
    when its code is one the client library retries (`RETRIED_CODES`)."""
    if err is None:
        return {ack_id: ("success", None) for ack_id in ack_ids}
    metadata = getattr(err, "metadata", None)
    if getattr(err, "reason", None) == "EXACTLY_ONCE_ACKID_FAILURE" and hasattr(metadata, "get"):
        answers = {}
        for ack_id in ack_ids:
            reason = metadata.get(ack_id)
            if reason is None:
                answers[ack_id] = ("success", None)
            else:
                result = "invalid_ack_id" if "INVALID_ACK_ID" in reason else "other"
                answers[ack_id] = (result, reason if reason.startswith("TRANSIENT_") else None)
        return answers
    code = getattr(getattr(err, "grpc_status_code", None), "name", None)
    result = unary_ack_result(err)
    return {ack_id: (result, code if code in RETRIED_CODES else None) for ack_id in ack_ids}
