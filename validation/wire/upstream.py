"""The fault layer's upstream side: the channel each loopback listener opens to the host it stands for.

The probe's clients always talk plaintext gRPC to their listener on loopback
(`pubsubguard.validation.wire.endpoints.client_kwargs`); what the listener opens onward depends on the host:

- a loopback host (the emulator, an `--endpoint REGION=HOST:PORT` stand-in): plaintext, anonymous;
- a TLS host: Google's endpoints under `--target gcp` with `--nemesis` (`pubsub.googleapis.com:443`, a
  region's locational endpoint), or an `--endpoint REGION=tls:HOST:PORT` mapping (a TLS endpoint at
  another address: a private endpoint, or the local TLS server of the tests). The listener opens it with
  TLS, verified against the system's roots or the PEM file `PUBSUBGUARD_UPSTREAM_ROOT_CERT` names, and
  with the run's credentials: Application Default Credentials (`google.auth.default`, the scopes the
  Pub/Sub client library asks for), attached per call as `authorization` metadata from the credentials'
  token (refreshed when it expires) by `google.auth.transport.grpc`, as the client library's own channel
  does. The clients' plaintext channels to the listener carry no call credentials (gRPC refuses them on
  an insecure channel, and the loopback clients are built anonymous), so there is nothing to forward:
  the layer adds them; every other metadata of the client's call is forwarded unchanged.

Before the listener serves, `check_tls` makes one TLS handshake with the host: a certificate the roots
do not verify, or a host that does not answer, is one line and exit 2 before anything is created.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl

from pubsubguard.core.errors import UserError

TLS_PREFIX = "tls:"
ROOT_CERT_ENV = "PUBSUBGUARD_UPSTREAM_ROOT_CERT"
# what google-cloud-pubsub asks of the credentials (google.pubsub_v1 transports' AUTH_SCOPES)
SCOPES = ("https://www.googleapis.com/auth/cloud-platform", "https://www.googleapis.com/auth/pubsub")
HANDSHAKE_TIMEOUT_S = 10.0


class UpstreamError(UserError):
    pass


def host_port(address: str) -> str:
    """`tls:HOST:PORT` or `HOST:PORT` -> `HOST:PORT`."""
    return address[len(TLS_PREFIX):] if address.startswith(TLS_PREFIX) else address


def is_loopback(address: str) -> bool:
    """Is `HOST:PORT` on loopback (127.0.0.0/8, ::1, localhost)."""
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_tls(address: str) -> bool:
    """Is `address` dialled with TLS: a `tls:` mapping, or any host that is not loopback (Google's)."""
    return address.startswith(TLS_PREFIX) or not is_loopback(address)


def layer_upstreams(used: set[str], mapping: dict[str, str], observable: dict[str, str]) -> dict[str, str]:
    """The upstreams of a run with a fault layer: the observable ones (`observable_upstreams`), and every other
    endpoint it uses (Google's, or a `tls:` mapping) as a TLS upstream (`tls:HOST:PORT`)."""
    upstreams = dict(observable)
    for endpoint in sorted(used - set(observable)):
        address = host_port(mapping.get(endpoint) or endpoint)
        upstreams[endpoint] = TLS_PREFIX + address
    return upstreams


def root_certificates() -> tuple[bytes | None, str]:
    """(the PEM roots `PUBSUBGUARD_UPSTREAM_ROOT_CERT` names, or None for the system's; how to say which)."""
    path = os.environ.get(ROOT_CERT_ENV)
    if not path:
        return None, "the system's roots"
    try:
        with open(path, "rb") as f:
            return f.read(), f"the roots of {ROOT_CERT_ENV}={path}"
    except OSError as err:
        raise UpstreamError(f"{ROOT_CERT_ENV}={path}: cannot read it: {err.strerror}") from None


def check_tls(address: str) -> None:
    """One TLS handshake with the upstream (ALPN h2, the host name verified): one line if it fails."""
    target = host_port(address)
    host, _, port = target.rpartition(":")
    host = host.strip("[]")
    roots, which = root_certificates()
    context = ssl.create_default_context(cadata=roots.decode("ascii", "replace") if roots else None)
    context.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection((host, int(port)), timeout=HANDSHAKE_TIMEOUT_S) as raw:
            with context.wrap_socket(raw, server_hostname=host):
                pass
    except ssl.SSLCertVerificationError as err:
        raise UpstreamError(f"upstream {target}: TLS refused its certificate ({err.verify_message}; verified "
                            f"against {which}): a wrong endpoint, or set {ROOT_CERT_ENV} to the PEM file of "
                            "the roots that sign it") from None
    except ssl.SSLError as err:
        raise UpstreamError(f"upstream {target}: TLS handshake failed ({err.reason or err})") from None
    except (OSError, ValueError) as err:
        raise UpstreamError(f"upstream {target}: cannot connect ({getattr(err, 'strerror', None) or err})") from None


def open_channel(address: str, dial: str | None = None, options: list | tuple = ()):
    """The gRPC channel a listener forwards on: plaintext to a loopback host, TLS with the application
    default credentials to a TLS one. `dial`: where to connect instead (the packet-fault link's unix
    socket, `pubsubguard.validation.wire.netem`); the TLS name checked stays the upstream's host."""
    import grpc

    target = dial or host_port(address)
    options = list(options)
    if not is_tls(address):
        return grpc.insecure_channel(target, options=options)
    check_tls(address)
    import google.auth
    from google.auth.transport import grpc as auth_grpc
    from google.auth.transport import requests as auth_requests

    roots, _ = root_certificates()
    credentials, _ = google.auth.default(scopes=SCOPES)
    if dial:
        options += [("grpc.ssl_target_name_override", host_port(address).rpartition(":")[0].strip("[]")),
                    ("grpc.default_authority", host_port(address))]
    return auth_grpc.secure_authorized_channel(credentials, auth_requests.Request(), target,
                                               ssl_credentials=grpc.ssl_channel_credentials(root_certificates=roots),
                                               options=options)
