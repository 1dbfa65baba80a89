"""The push receiver: a small HTTP server on loopback that records every push it gets and answers it (204, or
what its `answer` decides). Push subscriptions applied to the emulator point at one (the emulator's sidecar serves
it, `pubsubguard.core.emulator`), and the verification probe answers its push twins through one
(`pubsubguard.validation.probe.push`). The declared endpoint a push stands in for rides in the receiver's URL
(`local_push_endpoint`, read back by `stood_in_for`)."""

from __future__ import annotations

import collections
import http.server
import threading
import time
import urllib.parse
from dataclasses import dataclass

LOOPBACK = "127.0.0.1"
PUSH_PATH = "/push/"


@dataclass(frozen=True)
class Push:
    """One push the receiver got: the subscription it was for, the endpoint the stack declares."""

    subscription: str
    declared_endpoint: str
    body_bytes: int
    received_us: int


class PushReceiver:
    """A threaded HTTP server on loopback that records each push (the last `keep`) and answers 204.
    `on_push` (optional) sees every push too (the sidecar logs them); `answer(subscription, body)`
    (optional; the verification probe's `pubsubguard.validation.probe.push`) decides the HTTP status instead."""

    def __init__(self, port: int = 0, keep: int = 10_000, on_push=None, answer=None):
        self.pushes: collections.deque[Push] = collections.deque(maxlen=keep)
        self.count = 0
        self._on_push = on_push
        self.answer = answer
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                url = urllib.parse.urlsplit(self.path)
                subscription = urllib.parse.unquote(url.path.removeprefix(PUSH_PATH)) if url.path.startswith(PUSH_PATH) else ""
                endpoint = urllib.parse.parse_qs(url.query).get("endpoint", [""])[0]
                receiver._record(Push(subscription, endpoint, length, time.time_ns() // 1000))
                self.send_response(receiver.answer(subscription, body) if receiver.answer else 204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):  # noqa: N802 - a liveness answer
                body = b"pubsubguard push receiver\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args):  # the records are the log
                pass

        self._server = http.server.ThreadingHTTPServer((LOOPBACK, port), Handler)
        self._server.daemon_threads = True
        self.host = f"{LOOPBACK}:{self._server.server_address[1]}"
        self._thread: threading.Thread | None = None

    def _record(self, push: Push) -> None:
        with self._lock:
            self.pushes.append(push)
            self.count += 1
        if self._on_push is not None:
            self._on_push(push)

    def start(self) -> "PushReceiver":
        self._thread = threading.Thread(target=self._server.serve_forever, name="push-receiver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def local_push_endpoint(endpoint: str, subscription: str, receiver: str) -> str:
    """The receiver's URL standing in for a declared push endpoint (kept in the query, for the record)."""
    return (f"http://{receiver}{PUSH_PATH}{urllib.parse.quote(subscription, safe='')}"
            f"?endpoint={urllib.parse.quote(endpoint, safe='')}")


def stood_in_for(endpoint: str) -> str:
    """The declared endpoint a local receiver URL stands in for (see `local_push_endpoint`); any other
    endpoint as it is."""
    parsed = urllib.parse.urlparse(endpoint or "")
    if parsed.scheme == "http" and parsed.hostname in ("127.0.0.1", "localhost") and parsed.path.startswith(PUSH_PATH):
        declared = urllib.parse.parse_qs(parsed.query).get("endpoint")
        if declared:
            return declared[0]
    return endpoint
