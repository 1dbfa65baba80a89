"""Locational endpoints, exercised: the endpoint map and the clients built from it.

Ordering and exactly-once hold only for clients pinned to one region: publishers of an ordered topic
on its declared publisher endpoint, consumers of an exactly-once subscription on its declared consumer
endpoint (docs/pubsub-facts.md). The probe proves it used them:

- `--endpoint REGION=HOST:PORT` (repeatable; `global` for pubsub.googleapis.com) maps a locational
  endpoint to a host. A mapping to a loopback host is a local stand-in for Google: it is dialled
  without TLS and with anonymous credentials (as the client library does for the emulator).
- `REGION=tls:HOST:PORT` maps it to a TLS host at another address. With `--nemesis`, every endpoint gets a
  listener, whose upstream to a TLS host is opened with TLS and the run's credentials
  (`pubsubguard.validation.wire.upstream`), optionally across the packet-fault link (`validation/wire/netem.py`).
- Wherever the traffic of an endpoint can be seen (`observable_upstreams`: the emulator; a loopback mapping),
  the driver puts a recording listener in front of its host (`listeners`).
- Every client of the run (driver admin calls, publisher and subscriber tasks) is built by
  `client_kwargs` from the endpoint it was given; the recorded traffic goes to run.json
  (`parameters.endpoints`) and `pinning_findings` turns it into `endpoint_mismatch` findings of the
  guarantee `endpoint_pinning` (docs/checks.md), folded by `pubsubguard.validation.checks.verdict`.
"""

from __future__ import annotations

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
