"""Deleting the probe twins against a target that does not answer: each delete retried for the patience given at
most, and once one was not answered the others are not tried (the client library's own retry, 60 s a delete, kept a
watch whose emulator had stopped for minutes); a target that answers, even with an error, is tried for every twin."""

from __future__ import annotations

import time

from google.api_core import exceptions

from pubsubguard.validation.probe.twins import Twins

PATHS = [f"projects/p/subscriptions/t{i}-probe-0123abcd" for i in range(3)]


class Admin:
    """A subscriber client whose DeleteSubscription raises `error` (None: deleted), under the retry it is given as the
    client library applies it; each attempt recorded."""

    def __init__(self, error: Exception | None):
        self.error, self.calls = error, []

    def delete_subscription(self, subscription: str, timeout: float, retry):
        assert 0 < timeout <= 30
        return retry(self._attempt)(subscription)

    def _attempt(self, subscription: str) -> None:
        self.calls.append(subscription)
        if self.error is not None:
            raise self.error


def twins(admin: Admin) -> Twins:
    return Twins(run_id="0123abcd" * 4, specs=[], subscriber=admin, created=list(PATHS))


def test_a_target_that_does_not_answer_costs_one_delete_of_the_patience_and_the_others_are_left():
    admin = Admin(exceptions.ServiceUnavailable("failed to connect to all addresses"))
    gone = twins(admin)
    began = time.monotonic()
    assert sorted(gone.delete(patience_s=0.5)) == sorted(PATHS)
    assert time.monotonic() - began < 3.0
    assert len(set(admin.calls)) == 1 and len(admin.calls) > 1  # retried, the one twin only
    assert gone.unanswered == "ServiceUnavailable: 503 failed to connect to all addresses", gone.unanswered
    assert gone.created == []


def test_a_target_that_answers_is_asked_for_every_twin():
    refusing = Admin(exceptions.PermissionDenied("no"))
    assert sorted(twins(refusing).delete()) == sorted(PATHS) and sorted(refusing.calls) == sorted(PATHS)
    deleted = Admin(exceptions.NotFound("gone already"))
    done = twins(deleted)
    assert done.delete() == [] and done.unanswered is None and len(deleted.calls) == 3
