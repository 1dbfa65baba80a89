"""The bars that show a run's progress while it probes (none with --no-progress): published and settled,
per subscription, as the drain's tally counts them (`pubsubguard.validation.probe.drain.EvidenceTally`)."""

from __future__ import annotations


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add_task(self, *args, **kwargs):
        return 0

    def update(self, *args, **kwargs):
        pass


def progress_bars(enabled: bool):
    if not enabled:
        return _NoProgress()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    transient=False)

