"""A watch judge's bucket called as `applyInPandasWithState` calls it: the configuration of one plain
subscription, the output's columns and a stand-in for Spark's GroupState (tests/prove/watch/)."""

from __future__ import annotations

from pubsubguard.validation.checks import kernel
from pubsubguard.validation.watch import judge

S = 1_000_000  # µs
HORIZON_US = 10 * S
CONFIG = judge.JudgeConfig(
    subscriptions=kernel.SubscriptionConfig(names=("plain",), ordering=(False,), exactly_once=(False,),
                                            max_delivery_attempts=(None,)),
    horizon_us=(HORIZON_US,), skew_us=0)
COLUMNS = [c.split()[0] for c in judge.OUTPUT.split(", ")]


class FakeState:
    """What `applyInPandasWithState` hands the step (pyspark.sql.streaming.state.GroupState), with its checks."""

    def __init__(self, value=None, watermark_ms: int = 0):
        self.value, self.watermark_ms, self.timeout_ms = value, watermark_ms, None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple:
        assert self.value is not None
        return self.value

    def update(self, value: tuple) -> None:
        self.value = tuple(value)

    def remove(self) -> None:
        self.value = None

    def getCurrentWatermarkMs(self) -> int:
        return self.watermark_ms

    def setTimeoutTimestamp(self, ms: int) -> None:
        assert ms > 0 and ms >= self.watermark_ms, (ms, self.watermark_ms)  # as GroupState refuses
        self.timeout_ms = ms

    def next_call(self, watermark_ms: int) -> "FakeState":
        """The bucket's state at a later window: the timeout is set again by each call (as Spark resets it)."""
        return FakeState(self.value, watermark_ms)
