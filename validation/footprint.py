"""The driver's footprint while it probes: resident memory, threads and open files, sampled at the start, every
`interval_s` and at the end (run.json `parameters.drain.footprint`), so a long run (a soak) shows whether any of
them grows with the traffic. Read from /proc/self where there is one; elsewhere the peak resident size from
`resource.getrusage` and Python's own thread count."""

from __future__ import annotations

import os
import threading
import time

INTERVAL_S = 60.0


def sample() -> dict:
    """One sample of this process: resident MiB, threads, open file descriptors (None where unknown)."""
    rss, threads = None, threading.active_count()
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
    except OSError:
        import resource

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        fds = None
    return {"rss_mib": round(rss, 1) if rss is not None else None, "threads": threads, "open_files": fds}


class Footprint:
    """Samples in a daemon thread from `start()` to `stop()`; `samples` as [{"t_s", "rss_mib", "threads",
    "open_files"}] with t_s the seconds since the start."""

    def __init__(self, interval_s: float = INTERVAL_S):
        self.interval_s = interval_s
        self.samples: list[dict] = []
        self._started = 0.0
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def _take(self) -> None:
        self.samples.append({"t_s": round(time.monotonic() - self._started, 1), **sample()})

    def start(self) -> "Footprint":
        self._started = time.monotonic()
        self._take()
        self._thread = threading.Thread(target=self._run, name="footprint", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._done.wait(self.interval_s):
            self._take()

    def stop(self) -> list[dict]:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._take()
        return self.samples


def sentence(samples: list[dict]) -> str | None:
    """`the driver: resident 410 -> 455 MiB (peak 470), threads 60 -> 62, open files 120 -> 118, 12 samples ...`"""
    if len(samples) < 2:
        return None
    first, last = samples[0], samples[-1]

    def span(key: str, unit: str = "") -> str:
        values = [s[key] for s in samples if s.get(key) is not None]
        if not values:
            return "not known"
        return f"{first[key]:g} -> {last[key]:g}{unit} (peak {max(values):g})"

    return (f"the driver while probing: resident memory {span('rss_mib', ' MiB')}, threads {span('threads')}, open "
            f"files {span('open_files')}; {len(samples)} samples over {last['t_s']:.0f}s (every "
            f"{INTERVAL_S:.0f}s, run.json parameters.drain.footprint)")
