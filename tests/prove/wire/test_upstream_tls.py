"""The fault layer toward a TLS target (`--target gcp`), proven against a real local TLS gRPC server.

Google Cloud cannot be reached from the tests: a gRPC server with a self-signed certificate made here
(`cryptography`) stands for it, relaying the Pub/Sub API to the emulator and recording what each call
brought (its transport security, its `authorization` metadata). The run is a real `verify --target gcp
--nemesis FILE` with `--endpoint global=tls:127.0.0.1:PORT`; the credentials are the application default
credentials `google.auth.default` returns, configured here as an access token (google.oauth2).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import threading
import uuid
from concurrent import futures

import grpc
import pytest

from pubsubguard.core.apply import apply_plan
from pubsubguard.validation import job, selftest
from pubsubguard.validation.wire import upstream

TOKEN = "ya29.pubsubguard-test-token"

def certificate(name: str) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM): self-signed, for 127.0.0.1 and localhost."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


class TlsRelay:
    """A TLS gRPC server relaying every call, byte for byte, to `upstream` (plaintext); records each call."""

    def __init__(self, upstream_host: str, cert: bytes, key: bytes):
        self.calls: list[dict] = []
        self.lock = threading.Lock()
        self.channel = grpc.insecure_channel(upstream_host)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=64), handlers=[self])
        self.port = self.server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=1).wait(5)
        self.channel.close()

    def service(self, details):
        metadata = tuple(details.invocation_metadata or ())

        def relay(requests, context):
            security = context.auth_context().get("transport_security_type", [b""])[0].decode()
            with self.lock:
                self.calls.append({"method": details.method, "security": security,
                                   "authorization": [v for k, v in metadata if k == "authorization"],
                                   "keys": {k for k, _ in metadata}})

            def onward():
                try:
                    yield from requests
                except grpc.RpcError:
                    return

            forwarded = [(k, v) for k, v in metadata if k not in ("authorization", "user-agent", "te", "content-type",
                                                                  "grpc-accept-encoding", "grpc-timeout")]
            call = self.channel.stream_stream(details.method)(onward(), metadata=forwarded)
            context.add_callback(call.cancel)
            try:
                yield from call
            except grpc.RpcError as err:
                context.set_code(err.code())
                context.set_details(err.details() or "")

        return grpc.stream_stream_rpc_method_handler(relay)


@pytest.fixture
def tls_target(emulator, tmp_path, monkeypatch):
    """(the TLS relay in front of the emulator, the root certificate file that verifies it); the run sees
    a gcp target: no PUBSUB_EMULATOR_HOST, application default credentials with an access token."""
    import google.auth
    import google.oauth2.credentials

    cert, key = certificate("pubsubguard-test-relay")
    relay = TlsRelay(emulator.host, cert, key)
    root = tmp_path / "relay-root.pem"
    root.write_bytes(cert)
    monkeypatch.setenv(upstream.ROOT_CERT_ENV, str(root))
    given = []

    def default(scopes=None, **_):
        given.append(tuple(scopes or ()))
        return google.oauth2.credentials.Credentials(token=TOKEN), "pubsubguard-tls"

    monkeypatch.setattr(google.auth, "default", default)
    checked = []
    real_check = upstream.check_tls

    def loopback_only(address):  # never a handshake with anything but the relay (no traffic off loopback)
        assert upstream.host_port(address) == f"127.0.0.1:{relay.port}", address
        checked.append(address)
        real_check(address)

    monkeypatch.setattr(upstream, "check_tls", loopback_only)
    try:
        yield relay, root, given, checked
    finally:
        relay.stop()


def _estate(tmp_path, emulator, monkeypatch) -> tuple[str, object]:
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    plan, plan_file = selftest.estate_plan(tmp_path, topic, "test")
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", emulator.host)  # this test's emulator, whatever the process holds
    apply_plan(plan)  # on the emulator, before the run sees a gcp target
    return topic, plan_file


def _args(plan_file, port: int, report, schedule) -> list[str]:
    return ["--plan", str(plan_file), "--target", "gcp", "--endpoint", f"global=tls:127.0.0.1:{port}",
            "--keys", "2", "--messages-per-key", "6", "--drain-timeout", "30", "--report", str(report),
            "--no-progress", "--nemesis", str(schedule)]


@pytest.mark.emulator
def test_layer_forwards_with_tls_and_the_credentials_token(spark, emulator, tls_target, tmp_path, monkeypatch):
    relay, _, given, checked = tls_target
    topic, plan_file = _estate(tmp_path, emulator, monkeypatch)
    schedule = tmp_path / "schedule.json"
    schedule.write_text(json.dumps({"faults": [
        {"kind": "lose_response", "rpc": "acknowledge", "subscription": f"{topic}-eod", "rate": 0.3}]}))
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST")
    report = tmp_path / "report"
    code = job.main(_args(plan_file, relay.port, report, schedule), spark=spark)
    result = json.loads((report / "report.json").read_text())
    assert code in (0, 1), result.get("error")
    assert checked, "the TLS handshake check ran"
    # every call the relay got came over TLS and carried the credentials' token, as the client library sends it
    assert relay.calls
    assert {c["security"] for c in relay.calls} == {"ssl"}, relay.calls[:3]
    assert all(c["authorization"] == [f"Bearer {TOKEN}"] for c in relay.calls), relay.calls[:3]
    assert given and all("https://www.googleapis.com/auth/pubsub" in s for s in given if s)
    methods = {c["method"].rpartition("/")[2] for c in relay.calls}
    assert {"Publish", "StreamingPull", "Acknowledge"} <= methods, methods
    # the client library's own metadata went on unchanged (the layer forwards it, adding the credentials)
    assert any("x-goog-api-client" in c["keys"] for c in relay.calls), relay.calls[:3]
    # messages flowed: every published message delivered on both subscriptions
    subs = result["subscriptions"]
    for name in (f"{topic}-plain", f"{topic}-eod"):
        figures = subs[name]["figures"]
        assert figures["published"] == 12 and figures["distinct_delivered"] == 12, (name, figures)
        assert "lost" not in subs[name]["findings"], subs[name]["findings"]
    endpoints = result["parameters"]["endpoints"]
    assert endpoints["observed_endpoints"] == ["pubsub.googleapis.com:443"]
    assert {r["upstream"] for r in endpoints["traffic"]} == {f"tls:127.0.0.1:{relay.port}"}


@pytest.mark.emulator
def test_wrong_certificate_is_one_line_exit_2(spark, emulator, tls_target, tmp_path, monkeypatch, capsys):
    relay, root, _, _ = tls_target
    other, _ = certificate("someone-else")
    root.write_bytes(other)  # roots that do not sign the relay's certificate
    topic, plan_file = _estate(tmp_path, emulator, monkeypatch)
    schedule = tmp_path / "schedule.json"
    schedule.write_text(json.dumps({"faults": [{"kind": "kill_stream", "subscription": f"{topic}-plain", "after_s": 2}]}))
    monkeypatch.delenv("PUBSUB_EMULATOR_HOST")
    capsys.readouterr()
    code = job.main(_args(plan_file, relay.port, tmp_path / "report", schedule), spark=spark)
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "TLS refused its certificate" in lines[0] and upstream.ROOT_CERT_ENV in lines[0], err
    assert not relay.calls  # nothing was sent: the handshake failed before any call
