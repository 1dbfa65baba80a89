"""SIGINT and SIGTERM during a verification run: raised as `Interrupted` in the main thread, so the
run's `finally` deletes the probe twins and writes what it observed (exit 130)."""

from __future__ import annotations

import contextlib
import signal
import threading


class Interrupted(KeyboardInterrupt):
    pass


@contextlib.contextmanager
def interruptible():
    """Within the block, SIGINT and SIGTERM raise `Interrupted` (main thread only); the previous
    handlers come back after it."""

    def interrupt(signum, _frame):
        raise Interrupted(f"signal {signum}")

    saved = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            saved[sig] = signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
