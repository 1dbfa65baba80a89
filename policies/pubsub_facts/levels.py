"""A policy's enforcement level, the one set of names of the pack (`pubsub_rules`) and the check that runs it
(`pubsubguard.judging`): pulumi-policy's `EnforcementLevel`, the Analyzer protocol's four levels. Here because both
sides read it and the pack's interpreter has pulumi-policy while pubsubguard's does not."""

from __future__ import annotations

from enum import Enum


class EnforcementLevel(str, Enum):
    """mandatory fails the preview (and the check); advisory warns; remediate fixes the resource (the check counts
    it as mandatory); disabled does not run. Its value is the name on the wire, in JSON, SARIF and the policy config
    file, and a member is that string wherever it is written."""

    ADVISORY = "advisory"
    MANDATORY = "mandatory"
    REMEDIATE = "remediate"
    DISABLED = "disabled"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
