"""Locational endpoints, exercised: the endpoint map, the recording listeners, the clients, the check.

Ordering and exactly-once hold only for clients pinned to one region: publishers of an ordered topic
on its declared publisher endpoint, consumers of an exactly-once subscription on its declared consumer
endpoint (docs/pubsub-facts.md). The probe proves it used them:

- `--endpoint REGION=HOST:PORT` (repeatable; `global` for pubsub.googleapis.com) maps a locational
  endpoint to a host. A mapping to a loopback host is a local stand-in for Google: it is dialled
  without TLS and with anonymous credentials (as the client library does for the emulator).
- `REGION=tls:HOST:PORT` maps it to a TLS host at another address. With `--nemesis`, every endpoint gets a
  listener, whose upstream to a TLS host is opened with TLS and the run's credentials
  (`pubsubguard.validation.wire.upstream`), optionally across the packet-fault link (`validation/wire/netem.py`).
- Wherever the traffic of an endpoint can be seen (the emulator; a loopback mapping), the driver puts
  one `Listener` per endpoint in front of its host: a gRPC-level loopback proxy that forwards every
  call unchanged (status and trailing metadata included) and records, per client (the channel's user
  agent names the probe task and role), per method and per resource (the topic or subscription the
  request names), the requests, messages, bytes, TCP connections and the status of each call.
- Every client of the run (driver admin calls, publisher and subscriber tasks) is built by
  `client_kwargs` from the endpoint it was given; the recorded traffic goes to run.json
  (`parameters.endpoints`) and `pinning_findings` turns it into `endpoint_mismatch` findings of the
  guarantee `endpoint_pinning` (docs/checks.md), folded by `pubsubguard.validation.checks.verdict`.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from concurrent import futures

from pubsubguard.core.errors import UserError
from pubsubguard.policies import pubsub_facts as facts

from . import upstream as upstream_channel
from .upstream import is_loopback  # noqa: F401 - where the run's callers look for it

# The probe's channels, the listeners' servers and their upstream channels: no message size limit, and room for
# large trailers: with exactly-once, an Acknowledge/ModifyAckDeadline of many expired ack ids is answered with an
# ErrorInfo naming every one of them (status details in the trailer); over gRPC's default 8 KiB of metadata the
# call failed RESOURCE_EXHAUSTED, which the client library's lease maintainer did not survive (measured at 50x the
# main job's traffic: the thread died with "Code in Status proto (INVALID_ARGUMENT) doesn't match status code
# (RESOURCE_EXHAUSTED)" and its messages' leases lapsed).
CHANNEL_LIMITS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1),
                  ("grpc.max_metadata_size", 16 * 1024 * 1024)]

GLOBAL = "global"
USER_AGENT_PREFIX = "pubsubguard-client/"
PUBLISH = "/google.pubsub.v1.Publisher/Publish"
_HOP_HEADERS = ("user-agent", "te", "content-type", "grpc-accept-encoding", "grpc-encoding", "grpc-timeout")


class EndpointMapError(UserError):
    pass


def endpoint_of(region: str) -> str:
    """The endpoint a `--endpoint` key names: `global` or a region's locational endpoint."""
    return facts.GLOBAL_ENDPOINT if region == GLOBAL else facts.locational_endpoint(region)


def parse_endpoint_map(values: list[str] | None, given: dict[str, str] | None = None) -> dict[str, str]:
    """`REGION=HOST:PORT` items -> {declared endpoint: host:port}, added to the map `given` so far (unchanged)."""
    mapping: dict[str, str] = dict(given or {})
    for item in values or ():
        region, sep, host = item.partition("=")
        region, host = region.strip(), host.strip()
        name, colon, port = host.rpartition(":")
        if not sep or not region or not colon or not name or not port.isdigit():
            raise EndpointMapError(f"--endpoint {item!r}: expected REGION=HOST:PORT, e.g. us-east1=127.0.0.1:8601")
        endpoint = endpoint_of(region)
        if endpoint in mapping:
            raise EndpointMapError(f"--endpoint {item!r}: region {region} given twice")
        mapping[endpoint] = host
    return mapping


def client_kwargs(endpoint: str, mapping: dict[str, str], client: str) -> dict:
    """Keyword arguments for `PublisherClient` / `SubscriberClient` talking to `endpoint` as `client`.

    A loopback address (a listener, the emulator, a mapped stand-in) gets a plaintext channel of its
    own (anonymous, not shared with other clients, so each client has its own connections); any other
    address is Google's, with TLS and the application default credentials."""
    address = mapping.get(endpoint, endpoint)
    agent = USER_AGENT_PREFIX + client
    if is_loopback(address):
        import grpc

        options = [("grpc.primary_user_agent", agent), ("grpc.use_local_subchannel_pool", 1), *CHANNEL_LIMITS]
        return {"channel": grpc.insecure_channel(address, options=options)}
    return {"client_options": {"api_endpoint": upstream_channel.host_port(address)}, "client_info": _client_info(agent)}


def _client_info(agent: str):
    from google.api_core.gapic_v1.client_info import ClientInfo

    return ClientInfo(user_agent=agent)


def publisher_client(endpoint: str, mapping: dict[str, str], client: str, **options):
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

    kwargs = client_kwargs(endpoint, mapping, client)
    if "channel" in kwargs:
        kwargs = {"transport": PublisherGrpcTransport(channel=kwargs["channel"])}
    return pubsub_v1.PublisherClient(**options, **kwargs)


def subscriber_client(endpoint: str, mapping: dict[str, str], client: str):
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

    kwargs = client_kwargs(endpoint, mapping, client)
    if "channel" in kwargs:
        kwargs = {"transport": SubscriberGrpcTransport(channel=kwargs["channel"])}
    return pubsub_v1.SubscriberClient(**kwargs)


# --------------------------------------------------------------------------------- the listener
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


GRPC_WAIT_STEP_S = 1.0  # how often a thread blocked on a gRPC call looks at its deadline (gRPC's own: 0.1 s)


def calm_grpc_waits() -> None:
    """gRPC Python waits on a call (a stream's next response, a request iterator's flow control) in steps of
    0.1 s (`grpc._common.MAXIMUM_WAIT_TIMEOUT`), so every open stream wakes a thread ten times a second even
    when nothing moves: at 100 topics, 600 streams in the listener and 300 in each subscriber task kept 2 cores
    busy with wake-ups (load average 550). A step of GRPC_WAIT_STEP_S: a wait that is notified still returns at
    once, and a deadline is still kept to the microsecond; the step only bounds how long a signal waits for a
    blocked main thread. Process-wide; where gRPC has no such constant it changes nothing."""
    from grpc import _common

    if isinstance(getattr(_common, "MAXIMUM_WAIT_TIMEOUT", None), (int, float)):
        _common.MAXIMUM_WAIT_TIMEOUT = max(_common.MAXIMUM_WAIT_TIMEOUT, GRPC_WAIT_STEP_S)


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


def observable_upstreams(endpoints: set[str], mapping: dict[str, str], emulator_host: str | None) -> dict[str, str]:
    """The endpoints whose traffic the run can see, each with the host its listener forwards to: all
    of them on the emulator (to the mapped host, else the emulator), on Google Cloud the ones mapped to
    loopback stand-ins; the others (real Google endpoints, TLS) are not observable."""
    upstreams = {}
    for endpoint in sorted(endpoints):
        address = mapping.get(endpoint) or emulator_host
        if address and is_loopback(address):
            upstreams[endpoint] = address
    return upstreams


def iam_calls(rows: list[dict]) -> list[dict]:
    """The IAM calls (testIamPermissions, get/setIamPolicy) the listeners saw, with the target's answers."""
    return [row for row in rows if row["service"].endswith("IAMPolicy")]
