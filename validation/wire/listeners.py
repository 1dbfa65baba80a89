"""The recording listeners: where the traffic of an endpoint can be seen (the emulator; a loopback mapping), the
driver puts one `Listener` per endpoint (`Listeners`) in front of the host the endpoint maps to
(`endpoints.observable_upstreams`).

A `Listener` is a gRPC-level loopback proxy that forwards every call unchanged (status and trailing metadata
included) and records, per client (the channel's user agent names the probe task and role), per method and per
resource (the topic or subscription the request names), the requests, messages, bytes, TCP connections and the
status of each call. With `--nemesis` it hands the Pub/Sub calls to the fault layer (`nemesis`); its upstream to a
TLS host is opened with TLS and the run's credentials (`upstream`). The recorded traffic goes to run.json
(`parameters.endpoints`), where `checks.pinning` reads it; which endpoint each client dials is `endpoints`'.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from concurrent import futures

from . import upstream as upstream_channel
from .endpoints import CHANNEL_LIMITS, USER_AGENT_PREFIX

PUBLISH = "/google.pubsub.v1.Publisher/Publish"
_HOP_HEADERS = ("user-agent", "te", "content-type", "grpc-accept-encoding", "grpc-encoding", "grpc-timeout")


def _request_type(method: str):
    """The request message of a method whose resource the listener records (None: not parsed)."""
    from google.iam.v1 import iam_policy_pb2
    from google.pubsub_v1 import types

    service, _, name = method.rpartition("/")
    if service.endswith("IAMPolicy"):
        return getattr(iam_policy_pb2, f"{name}Request", None)
    if service.endswith("Subscriber") and name == "CreateSubscription":
        return types.Subscription
    if service.endswith("Publisher") and name == "CreateTopic":
        return types.Topic
    cls = getattr(types, f"{name}Request", None)
    return cls


def _resource(method: str, raw: bytes) -> tuple[str, int]:
    """(topic or subscription the request names, messages it carries) of one raw request."""
    cls = _request_type(method)
    if cls is None:
        return "", 0
    try:
        request = cls.deserialize(raw) if hasattr(cls, "deserialize") else cls.FromString(raw)
    except Exception:  # noqa: BLE001 - an unparsable request is still forwarded and counted
        return "", 0
    for field in ("resource", "subscription", "name", "topic"):
        value = getattr(request, field, "")
        if isinstance(value, str) and value:
            return value, len(getattr(request, "messages", ()) or ())
    return "", len(getattr(request, "messages", ()) or ())


LISTENER_WORKERS = 64  # the listener's threads for everything but the run's own streams


def listener_workers(streams: int) -> int:
    """The listener's thread pool for a run that keeps `streams` StreamingPulls open at once: each holds a
    thread, and as many again while streams are replaced (a reset, the final read's fresh streams)."""
    return LISTENER_WORKERS + 2 * max(streams, 0)


class Listener:
    """A loopback gRPC proxy standing for `endpoint` in front of `upstream`; records what passes."""

    def __init__(self, endpoint: str, upstream: str, port: int = 0, nemesis=None, dial: str | None = None,
                 streams: int = 0):
        import grpc

        self.endpoint = endpoint
        self.nemesis = nemesis  # pubsubguard.validation.wire.nemesis.Nemesis: the fault layer (None: forward unchanged)
        self.upstream = upstream
        self.lock = threading.Lock()
        self.stream_ends: dict[str, int] = {}  # subscription -> when a StreamingPull of it last ended other than OK
        # subscription -> when each of its StreamingPulls ended UNKNOWN: the target's own failure (the fault layer
        # ends a stream UNAVAILABLE, a client's cancel is CANCELLED)
        self.target_failures: dict[str, list[int]] = {}
        self.traffic: dict[tuple, dict] = defaultdict(
            lambda: {"requests": 0, "messages": 0, "request_bytes": 0, "response_bytes": 0, "calls": 0,
                     "peers": set(), "status": defaultdict(int)})
        # plaintext to loopback, TLS + the run's credentials to Google (`tls:`): validation/wire/upstream.py;
        # `dial`: the packet-fault link in front of it (validation/wire/netem.py)
        self.channel = upstream_channel.open_channel(upstream, dial, options=CHANNEL_LIMITS)
        # A StreamingPull holds one of the server's threads for its whole life: a pool smaller than the run's
        # streams leaves every other call (Publish included) queued for good -- at 100 topics 300 streams of
        # one subscriber task took all 64 threads and nothing was ever published. Threads start on demand.
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=listener_workers(streams),
                                                             thread_name_prefix="listener"),
                                  handlers=[_Forward(self)], options=CHANNEL_LIMITS)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.address = f"127.0.0.1:{self.port}"

    def start(self) -> "Listener":
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop(grace=1).wait(5)
        self.channel.close()

    def record(self, client: str, method: str, resource: str, peer: str, *, requests=0, messages=0,
               request_bytes=0, response_bytes=0, status: str | None = None) -> None:
        with self.lock:
            row = self.traffic[(client, method, resource)]
            row["requests"] += requests
            row["messages"] += messages
            row["request_bytes"] += request_bytes
            row["response_bytes"] += response_bytes
            row["peers"].add(peer)
            if status is not None:
                row["calls"] += 1
                row["status"][status] += 1
                if status != "OK" and method.endswith("/StreamingPull") and resource:
                    self.stream_ends[resource] = time.time_ns() // 1000
                    if status == "UNKNOWN":
                        self.target_failures.setdefault(resource, []).append(self.stream_ends[resource])

    def rows(self) -> list[dict]:
        """What passed, one row per (client, method, resource): the evidence `pinning_findings` reads."""
        with self.lock:
            return [
                {"endpoint": self.endpoint, "address": self.address, "upstream": self.upstream, "client": client,
                 "method": method.rpartition("/")[2], "service": method.rpartition("/")[0].lstrip("/"),
                 "resource": resource, "requests": r["requests"], "messages": r["messages"],
                 "request_bytes": r["request_bytes"], "response_bytes": r["response_bytes"],
                 "connections": len(r["peers"]), "calls": r["calls"], "status": dict(sorted(r["status"].items()))}
                for (client, method, resource), r in sorted(self.traffic.items())
            ]


class _Forward:
    """The listener's handler: every method, forwarded as a raw byte stream (unary calls included)."""

    def __init__(self, listener: Listener):
        self.listener = listener

    def service(self, details):
        import grpc

        metadata = tuple(details.invocation_metadata or ())
        agent = next((v for k, v in metadata if k == "user-agent"), "")
        client = agent.split(USER_AGENT_PREFIX, 1)[1].split(" ", 1)[0] if USER_AGENT_PREFIX in agent else "other"
        forwarded = tuple((k, v) for k, v in metadata if k not in _HOP_HEADERS and not k.startswith(":"))
        return grpc.stream_stream_rpc_method_handler(
            lambda requests, context: self.forward(details.method, client, forwarded, requests, context))

    def forward(self, method: str, client: str, metadata, requests, context):
        nemesis = self.listener.nemesis
        if nemesis is not None and nemesis.handles(method):
            if method.endswith("/StreamingPull"):
                return self.forward_stream(method, client, metadata, requests, context)
            return self.forward_unary(method, client, metadata, requests, context)
        return self.forward_raw(method, client, metadata, requests, context)

    def forward_raw(self, method: str, client: str, metadata, requests, context):
        import grpc

        listener = self.listener
        peer = context.peer()
        stream = {"resource": ""}

        def upstream_requests():
            try:
                for raw in requests:
                    resource, messages = _resource(method, raw)
                    stream["resource"] = stream["resource"] or resource  # a stream names it in its first request
                    listener.record(client, method, stream["resource"], peer, requests=1, messages=messages,
                                    request_bytes=len(raw))
                    yield raw
            except grpc.RpcError:
                return  # the client went away (cancelled its stream): the upstream call is cancelled with it

        call = listener.channel.stream_stream(method)(upstream_requests(), metadata=metadata,
                                                     timeout=context.time_remaining())
        context.add_callback(call.cancel)
        status = "OK"
        try:
            for response in call:
                listener.record(client, method, stream["resource"], peer, response_bytes=len(response))
                yield response
        except grpc.RpcError as err:
            status = err.code().name if err.code() else "UNKNOWN"
            if err.code() != grpc.StatusCode.CANCELLED or context.is_active():
                context.set_trailing_metadata(tuple(err.trailing_metadata() or ()))
                context.set_code(err.code())
                context.set_details(err.details() or "")
        finally:
            listener.record(client, method, stream["resource"], peer, status=status)

    # -- through the fault layer (pubsubguard.validation.wire.nemesis) -------------------------------
    def _failed(self, err, context) -> str:
        """The target's error, passed on to the client as it came (status, details, trailing metadata)."""
        import grpc

        if err.code() != grpc.StatusCode.CANCELLED or context.is_active():
            context.set_trailing_metadata(tuple(err.trailing_metadata() or ()))
            context.set_code(err.code())
            context.set_details(err.details() or "")
        return err.code().name if err.code() else "UNKNOWN"

    def forward_unary(self, method: str, client: str, metadata, requests, context):
        """A unary call handed to the layer: it may answer itself, alter the request, delay or drop the reply."""
        import grpc

        listener = self.listener
        peer = context.peer()
        raw = next(iter(requests), None)
        if raw is None:
            return
        resource, messages = _resource(method, raw)
        listener.record(client, method, resource, peer, requests=1, messages=messages, request_bytes=len(raw))
        status = "OK"

        def forward(data: bytes) -> bytes:
            return listener.channel.unary_unary(method)(data, metadata=metadata, timeout=context.time_remaining())

        try:
            reply = listener.nemesis.unary(method, raw, client, forward, context)
            listener.record(client, method, resource, peer, response_bytes=len(reply))
            yield reply
        except grpc.RpcError as err:
            status = self._failed(err, context)
        except Exception:  # context.abort: the layer's own status (a partition, a lost reply)
            status = "UNAVAILABLE"
            raise
        finally:
            listener.record(client, method, resource, peer, status=status)

    def forward_stream(self, method: str, client: str, metadata, requests, context):
        """A StreamingPull handed to the layer: the target's responses go through `Nemesis.response` onto the
        stream's queue, where the layer may also put deliveries of its own; a kill ends it with UNAVAILABLE."""
        import grpc

        listener, nemesis = self.listener, self.listener.nemesis
        peer = context.peer()
        requests = iter(requests)
        try:
            first = next(requests)
        except (StopIteration, grpc.RpcError):
            return
        stream = nemesis.open_stream(first, client)
        if stream is None:
            yield from self.forward_raw(method, client, metadata, _chain(first, requests), context)
            return
        resource = stream.subscription
        cut = nemesis.refuse_stream(stream)
        if cut is not None:
            nemesis.close_stream(stream)
            nemesis.refused(cut, "StreamingPull", client)
            listener.record(client, method, resource, peer, requests=1, status="UNAVAILABLE")
            context.abort(grpc.StatusCode.UNAVAILABLE, "pubsubguard nemesis: partition")

        def upstream_requests():
            try:
                for raw in _chain(first, requests):
                    listener.record(client, method, resource, peer, requests=1, request_bytes=len(raw))
                    yield raw
            except grpc.RpcError:
                return

        call = listener.channel.stream_stream(method)(upstream_requests(), metadata=metadata,
                                                     timeout=context.time_remaining())
        context.add_callback(call.cancel)
        ended = object()

        def read() -> None:
            error = None
            try:
                for response in call:
                    listener.record(client, method, resource, peer, response_bytes=len(response))
                    nemesis.response(stream, response, listener.channel, metadata)
            except grpc.RpcError as err:
                error = err
            except Exception as err:  # noqa: BLE001 - a response the layer could not parse: ends the stream
                error = err
            stream.put((ended, error))  # dropped once killed or closed: the loop below ends the call itself

        reader = threading.Thread(target=read, name="nemesis-stream", daemon=True)
        reader.start()
        status = "OK"
        try:
            while True:
                item = stream.out.get()
                if item is None or stream.killed is not None:  # killed (kill_stream, partition)
                    call.cancel()
                    status = "UNAVAILABLE"
                    context.abort(grpc.StatusCode.UNAVAILABLE, f"pubsubguard nemesis: {stream.killed}")
                if isinstance(item, tuple) and item and item[0] is ended:
                    error = item[1]
                    if isinstance(error, grpc.RpcError):
                        status = self._failed(error, context)
                    elif error is not None:
                        status = "INTERNAL"
                        context.abort(grpc.StatusCode.INTERNAL, f"pubsubguard nemesis: {type(error).__name__}: {error}")
                    return
                yield item
        finally:
            call.cancel()
            nemesis.close_stream(stream)
            listener.record(client, method, resource, peer, status=status)


def _chain(first, rest):
    yield first
    yield from rest


class Listeners:
    """One `Listener` per endpoint of a run, each in front of the host the endpoint maps to; with a
    `nemesis`, every listener hands the Pub/Sub calls to it (the fault layer)."""

    def __init__(self, upstreams: dict[str, str], nemesis=None, dial: dict[str, str] | None = None, streams: int = 0):
        """`streams`: how many StreamingPulls the run may hold open at once through one listener."""
        self.listeners = {endpoint: Listener(endpoint, upstream, nemesis=nemesis, dial=(dial or {}).get(upstream),
                                             streams=streams)
                          for endpoint, upstream in sorted(upstreams.items())}

    def start(self) -> "Listeners":
        for listener in self.listeners.values():
            listener.start()
        return self

    def stop(self) -> None:
        for listener in self.listeners.values():
            listener.stop()

    @property
    def mapping(self) -> dict[str, str]:
        """declared endpoint -> the listener's address (what the run's clients dial)."""
        return {endpoint: listener.address for endpoint, listener in self.listeners.items()}

    def rows(self) -> list[dict]:
        return [row for listener in self.listeners.values() for row in listener.rows()]

    def stream_ends(self) -> dict[str, int]:
        """Subscription path -> when one of its StreamingPull calls last ended with a status other than OK (the
        target or the client library reset it, or the client cancelled it), over every listener."""
        out: dict[str, int] = {}
        for listener in self.listeners.values():
            with listener.lock:
                for resource, at in listener.stream_ends.items():
                    out[resource] = max(out.get(resource, 0), at)
        return out

    def target_failures(self) -> dict[str, list[int]]:
        """Subscription path -> when each of its StreamingPull calls ended UNKNOWN (the target failed it), sorted,
        over every listener."""
        out: dict[str, list[int]] = {}
        for listener in self.listeners.values():
            with listener.lock:
                for resource, times in listener.target_failures.items():
                    out.setdefault(resource, []).extend(times)
        return {resource: sorted(times) for resource, times in out.items()}


def iam_calls(rows: list[dict]) -> list[dict]:
    """The IAM calls (testIamPermissions, get/setIamPolicy) the listeners saw, with the target's answers."""
    return [row for row in rows if row["service"].endswith("IAMPolicy")]
