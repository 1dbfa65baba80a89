"""Each finding kind in words: the sentence a report shows for a finding, made from its fields alone.

One function per kind of the findings' vocabulary (`findings.FINDING_KINDS`), registered with
`@words(kind, forms)` where `forms` are the kind's forms (`findings.FORMS`) its sentence was written for.
The table is checked at import, as the kernel's functions are against the table of guarantees
(`guarantees.check_table`): a kind without its wording, a wording of no kind, a kind worded twice, or a
form of the vocabulary its wording does not name fails here (WordingError), so a new kind or form cannot
reach a report unworded.

A wording takes the finding and `at(name)`, one of the finding's `times` as the reader reads it (`clock`:
UTC and the offset from the run's start); `describe` is a finding's whole sentence, which the explainer
(`pubsubguard.validation.conformance.explains`) attaches to each finding and the report shows.
"""

from __future__ import annotations

from typing import Callable

from pubsubguard.policies import pubsub_facts as facts

from .findings import FINDING_KINDS, FORMS

At = Callable[[str], str]  # a finding's time (a name of findings.TIMES) as the report renders it
Wording = Callable[[dict, At], str]


def plural(count: int, word: str, words_: str | None = None) -> str:
    """`word` as `count` of it reads (`1 file`, `2 files`; `words_`: the plural where it is not `word` + s)."""
    return word if count == 1 else (words_ or f"{word}s")


def counted(count: int, word: str, words_: str | None = None) -> str:
    """`1 file`, `2 files`, `1,384 messages`: a count with its noun, as every output writes it."""
    return f"{count:,} {plural(count, word, words_)}"


class WordingError(Exception):
    """A finding kind or form without its sentence, or a sentence of no kind (a bug, raised at import)."""


WORDING: dict[str, Wording] = {}
WORDED_FORMS: dict[str, tuple[str, ...]] = {}


def words(kind: str, forms: tuple[str, ...] = ()) -> Callable[[Wording], Wording]:
    """Register the decorated function as the sentence of `kind`, written for each of `forms`."""

    def register(function: Wording) -> Wording:
        if kind in WORDING:
            raise WordingError(f"finding kind {kind!r}: worded twice ({WORDING[kind].__name__}, {function.__name__})")
        WORDING[kind] = function
        WORDED_FORMS[kind] = tuple(forms)
        return function

    return register


def check_wording(wording: dict[str, Wording], worded_forms: dict[str, tuple[str, ...]],
                  kinds: dict = FINDING_KINDS, forms: dict[str, tuple[str, ...]] = FORMS) -> None:
    """WordingError naming the first kind of `kinds` without a sentence, the first sentence of a kind not in
    `kinds`, or the first form of `forms` its kind's sentence was not written for."""
    for kind in kinds:
        if kind not in wording:
            raise WordingError(f"finding kind {kind!r}: no sentence for it in validation/checks/wording.py")
    for kind in wording:
        if kind not in kinds:
            raise WordingError(f"wording {wording[kind].__name__!r}: finding kind {kind!r} is not in the findings' "
                               "vocabulary (validation/checks/findings.py)")
    for kind, kind_forms in forms.items():
        unworded = [form for form in kind_forms if form not in worded_forms.get(kind, ())]
        if unworded:
            raise WordingError(f"finding kind {kind!r}: form {unworded[0]!r} is not among the forms its sentence "
                               f"({wording[kind].__name__}) was written for")


def clock(time_us: int, start_us: int | None = None) -> str:
    """A time as a reader reads it: UTC to the millisecond and its offset from the run's start,
    `10:06:23.704 UTC (+5.819 s)`; without a start, with its date (`2026-11-25 10:06:23.704 UTC`)."""
    from datetime import datetime, timezone

    moment = datetime.fromtimestamp(time_us / 1e6, timezone.utc)
    if start_us is None:
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"
    return f"{moment.strftime('%H:%M:%S.%f')[:-3]} UTC ({(time_us - start_us) / 1e6:+.3f} s)"


def describe(finding: dict, start_us: int | None = None) -> str:
    """The sentence a report shows for a finding: its kind's wording, with times as `clock` renders them, offset
    from `start_us` (the run's start) when given."""
    times = finding.get("times") or {}
    return sentence(finding, lambda name: clock(times[name], start_us))


def sentence(finding: dict, at: At) -> str:
    """The sentence of `finding` (a finding row as report.json holds it); ValueError for a kind without one."""
    kind = finding["kind"]
    if kind not in WORDING:
        raise ValueError(f"finding kind {kind!r}: no sentence for it")
    return WORDING[kind](finding, at)


@words("config_drift", forms=("missing", "differs"))
def _config_drift(finding: dict, at: At) -> str:
    drift = finding["drift"]
    return f"{drift['path']}: {drift['setting']} declared {drift['declared']!r}, target holds {drift['actual']!r}"


@words("endpoint_mismatch",
       forms=("publisher", "consumer", "declared_global", "unobserved_publish", "unobserved_consumer"))
def _endpoint_mismatch(finding: dict, at: At) -> str:
    form, where = finding.get("form"), finding["endpoint"]
    declared = where["declared"]
    if form in ("unobserved_publish", "unobserved_consumer"):
        what = f"{where['messages']} published messages of" if form == "unobserved_publish" else "no pull of"
        return f"{what} {where['resource']} seen on any endpoint listener: the client went around its declared endpoint {declared}"
    used = where["used"] + (" (the global endpoint)" if where["used"] == facts.GLOBAL_ENDPOINT else "")
    if form == "declared_global":
        return f"traffic for {where['resource']} went through {used} as declared: no region is declared, so it is not pinned"
    what = f"{where['messages']} messages in {where['requests']} Publish requests" if form == "publisher" \
        else f"{where['requests']} pull/ack requests"
    return f"{what} for {where['resource']} went through {used}, not the declared {declared}"


@words("lost", forms=("stalled", "after_stream_reset", "past_horizon", "at_crash"))
def _lost(finding: dict, at: At) -> str:
    form = finding.get("form")
    if form == "at_crash":
        return (f"published at {at('published_us')} (status ok), just before the watch crashed, and no delivery row "
                "shows it: the crashed subscriber may have received and acked it without writing the row (advisory)")
    if form == "past_horizon":
        return (f"published at {at('published_us')} (status ok) and not delivered nor dead-lettered within its "
                f"delivery horizon of {finding.get('horizon_s')} s (pubsubguard watch; a later delivery is recorded "
                "as late_delivery)")
    return (f"published at {at('published_us')} (status ok) and never delivered nor dead-lettered"
            + (", on a subscription that stopped delivering after a poison message's last attempt"
               if form == "stalled" else ", on a subscription whose streams were reset (on a key it delivered "
               "nothing of after the last reset, if ordered)" if form == "after_stream_reset" else ""))


@words("late_delivery", forms=("after_lost", "after_close"))
def _late_delivery(finding: dict, at: At) -> str:
    if finding.get("form") == "after_lost":
        return (f"received at {at('received_us')}, after it was found lost past its delivery horizon of "
                f"{finding.get('horizon_s')} s: the lost finding stands, this records that it came")
    return (f"received at {at('received_us')}, after its judgement closed (settled, and kept for its horizon of "
            f"{finding.get('horizon_s')} s): not judged beside its earlier deliveries")


@words("unexpected", forms=("foreign", "unpublished", "unrecorded"))
def _unexpected(finding: dict, at: At) -> str:
    if finding.get("form") == "unrecorded":
        return (f"received at {at('received_us')} a message of this watch with no publish row: its seq lies after the "
                "last row its publisher wrote before it was stopped (a crash), within the seqs it had reserved")
    if finding.get("form") == "foreign":
        return f"received at {at('received_us')} a message without this run's probe attributes (another run, or not a probe message)"
    return f"received at {at('received_us')} a message (key, seq) this run never published"


@words("publish_duplicate")
def _publish_duplicate(finding: dict, at: At) -> str:
    ids = [r.get("message_id") for r in finding.get("evidence") or [] if r.get("source") == "delivery"
           and r.get("kind") == "delivery" and r.get("message_id") not in (None, finding.get("message_id"))]
    also = f" (also delivered as {', '.join(dict.fromkeys(ids))})" if ids else ""
    return (f"delivered at {at('received_us')} under a second message id {finding.get('message_id')}{also}: "
            "the same key and seq published twice, a publish retried after its reply was lost -- a publish-side "
            "duplicate (a new message), not a redelivery")


@words("duplicate_after_ack")
def _duplicate_after_ack(finding: dict, at: At) -> str:
    times = finding.get("times") or {}
    gap = (times["received_us"] - times["acked_us"]) / 1e6
    return f"delivered again at {at('received_us')}, {gap:.3f} s after a successful ack at {at('acked_us')}"


@words("duplicate_while_outstanding")
def _duplicate_while_outstanding(finding: dict, at: At) -> str:
    return (
        f"delivered again at {at('received_us')} while an earlier delivery was outstanding until "
        f"{at('outstanding_until_us')} (no nack, deadline not passed)"
    )


@words("stale_ack_accepted", forms=("late_ack", "superseded"))
def _stale_ack_accepted(finding: dict, at: At) -> str:
    if finding.get("form") == "late_ack":
        return f"ack sent at {at('acked_us')} after the deadline ({at('deadline_us')}) returned success"
    return (
        f"ack sent at {at('acked_us')} returned success although a later delivery at "
        f"{at('superseded_us')} superseded its ack id"
    )


@words("out_of_order", forms=("skip", "regression", "rewind_without_replay"))
def _out_of_order(finding: dict, at: At) -> str:
    form, seq, seqs = finding.get("form"), finding.get("seq"), finding.get("seqs") or {}
    previous = seqs.get("previous")
    if form == "rewind_without_replay":
        said = (
            f"rewind_without_replay: seq {seq} received at {at('received_us')} right after seq {previous}, "
            "below the highest seq delivered so far: the rewind stopped replaying"
        )
    else:
        after = "(none)" if previous is None else previous
        blocked = "?" if seqs.get("blocking") is None else seqs["blocking"]
        said = (f"{form}: seq {seq} received at {at('received_us')} started a run after seq {after} while "
                f"seq {blocked} was not settled")
    if finding["severity"] == "advisory":
        said += "; advisory: the key has a dead-lettered message and order is best effort for those"
    return said


def _attempts(finding: dict) -> tuple:
    """A dead-letter kind's delivery attempts: (seen, the declared maximum)."""
    attempts = finding.get("attempts") or {}
    return attempts["seen"], attempts["max"]


@words("dead_letter_missing", forms=("after_backoff_stop",))
def _dead_letter_missing(finding: dict, at: At) -> str:
    seen, most = _attempts(finding)
    return f"{seen} delivery attempts, never acked, not forwarded to the dead-letter topic (max {most})"


@words("dead_letter_after_ack")
def _dead_letter_after_ack(finding: dict, at: At) -> str:
    return f"forwarded at {at('forwarded_us')} although its last delivery was acked with success"


@words("dead_letter_early")
def _dead_letter_early(finding: dict, at: At) -> str:
    seen, most = _attempts(finding)
    return f"forwarded at {at('forwarded_us')} after {seen} delivery attempts, fewer than the declared {most}"


@words("delivery_attempts_exceeded")
def _delivery_attempts_exceeded(finding: dict, at: At) -> str:
    seen, most = _attempts(finding)
    return f"{seen} delivery attempts, more than the declared {most} (best effort)"


check_wording(WORDING, WORDED_FORMS)  # at import: every kind and form of the vocabulary has its sentence
