"""Where Pulumi's engine stops at `pulumi preview` (issue 45; docs/engine-features.md): a feature it cannot offer is
one line, "not judged" is exact in both languages, a program writes only where its user could, strings that are
not UTF-8 fail in one line naming their place, and the engine calls back only a socket the program made."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pubsubguard.core import engine, engine_values, invokes, recorder, signatures
from pubsubguard.core.project import UNKNOWN
from support.programs import inputs_of, judged, line_of, node_project, pubsubguard, python_twin


# --- A feature the engine cannot offer -------------------------------------------------------------
def test_an_unsupported_feature_is_one_line_saying_the_program_is_fine():
    record = recorder.Recorder(project="p", stack="dev", invoke_results=invokes.InvokeResults(), root=None,
                               limits=recorder.Limits())
    record.log("error", "the program failed: __main__.py:3: Exception: The Pulumi CLI does not support "
                        "teleportation. Please update the Pulumi CLI.")
    (line,) = record.errors
    assert "teleportation" in line and "the program itself is fine" in line
    assert "update the Pulumi CLI" not in line
    assert line.startswith("the program failed: __main__.py:3: Exception: ")


def test_every_feature_the_pinned_sdk_can_ask_for_is_offered():
    from pulumi.runtime.proto import resource_pb2

    names = {name for name in dir(resource_pb2) if name.startswith("RESOURCE_MONITOR_FEATURE_")}
    offered = {"RESOURCE_MONITOR_FEATURE_" + re.sub(r"(?<!^)([A-Z])", r"_\1", f).upper() for f in engine.MONITOR_FEATURES}
    assert names <= offered, names - offered


# --- "Not judged" is exact in both languages -------------------------------------------------------
def test_a_known_external_dead_letter_topic_is_not_judged_the_same_in_both_languages(tmp_path):
    """A dead-letter topic in another project, named by a known path: whether it has a subscription
    cannot be known from this stack, so `dead-letter-topic-has-subscription` is listed under "Not judged"
    with that input, for TypeScript as for Python."""
    typescript = node_project(tmp_path, """
        const orders = new gcp.pubsub.Topic("orders", { name: "orders" });
        new gcp.pubsub.Subscription("orders-sub", { name: "orders-sub", topic: orders.id, expirationPolicy: { ttl: "" },
            deadLetterPolicy: { deadLetterTopic: "projects/shared-proj/topics/shared-dlq", maxDeliveryAttempts: 5 } });
    """)
    python = python_twin(tmp_path, """
        import pulumi_gcp as gcp

        orders = gcp.pubsub.Topic("orders", name="orders")
        gcp.pubsub.Subscription("orders-sub", name="orders-sub", topic=orders.id, expiration_policy={"ttl": ""},
            dead_letter_policy={"dead_letter_topic": "projects/shared-proj/topics/shared-dlq", "max_delivery_attempts": 5})
    """)
    node_verdict = judged(typescript)
    assert node_verdict == judged(python)
    assert any(entry[0] == "dead-letter-topic-has-subscription" and entry[1] == "orders-sub" for entry in node_verdict[2])


# --- Writes where the user could write --------------------------------------------------------------
def test_a_program_writes_where_its_user_can_and_nothing_survives(tmp_path):
    """As under `pulumi preview`, the program may write anywhere its user can: a function's zip beside the
    project (`../gcp/cloud-function.zip`, as a Cloud Functions deploy does), a file in the project, a cache
    under /var/tmp. Every write goes to a throwaway overlay (as root) that ends with the program: nothing
    it wrote survives the check, and nothing outside changed."""
    from pubsubguard.core import langhost

    marker = f"pubsubguard-write-{tmp_path.name}"
    root = python_twin(tmp_path, f"""
        import os
        import zipfile

        import pulumi_gcp as gcp

        os.makedirs("../gcp", exist_ok=True)
        with zipfile.ZipFile("../gcp/cloud-function.zip", "w") as archive:
            archive.writestr("main.py", "def handler(event, context): pass")
        with open("Pulumi.dev.yaml", "a") as handle:
            handle.write("# touched by the program")
        os.makedirs("/var/tmp/{marker}", exist_ok=True)
        with open("/var/tmp/{marker}/cache", "w") as handle:
            handle.write("cached")
        gcp.pubsub.Topic("orders", name="orders", labels={{"zip": str(os.path.getsize("../gcp/cloud-function.zip") > 0).lower()}})
    """)
    stack_file = (root / "Pulumi.dev.yaml").read_text()
    before = sorted(p.name for p in tmp_path.iterdir())
    done = pubsubguard(root, "check", "-s", "dev", "--format", "json")
    if not langhost.overlay()[0]:  # not root: only the project's own folder is a writable throwaway copy
        assert done.returncode == 2 and "cloud-function.zip" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert inputs_of(root, "orders")["inputs"]["labels"] == {"zip": "true"}
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no ../gcp beside the project
    assert (root / "Pulumi.dev.yaml").read_text() == stack_file
    assert not Path(f"/var/tmp/{marker}").exists()


def test_a_byte_string_is_judged_as_the_text_it_reads_as():
    """Neither pinned SDK sends the byte-string envelope (the engine offers it; see the next tests for what
    they send instead): the engine's decoding of one."""
    import base64

    wire = {signatures.SIG: signatures.BYTE_STRING_SIG, "value": base64.b64encode("ordérs\xff".encode("latin-1")).decode()}
    assert engine_values.decode({"name": wire}) == {"name": "ord\ufffdrs\ufffd"}
    assert engine_values.decode({signatures.SIG: signatures.BYTE_STRING_SIG, "value": "not base64!"}) == UNKNOWN


def test_a_typescript_string_that_is_not_utf8_fails_the_program_in_one_line_naming_its_place(tmp_path):
    """The Node.js SDK sends a JavaScript string as it is: half of a surrogate pair (a label cut to 63
    characters through an emoji) reaches the engine as bytes that are not UTF-8, which `pulumi preview`'s
    engine refuses ("grpc: error unmarshalling request: string field contains invalid UTF-8"). The check
    fails the program the same way (exit 2), in one line at the resource's line that names the string's
    place, not with gRPC's "Unexpected DecodeError" and its logged traceback."""
    root = node_project(tmp_path, """
        const team = "orders-" + "x".repeat(55) + "\\u{1F600}";
        new gcp.pubsub.Topic("orders", { name: "orders", labels: { team: team.slice(0, 63) } });
    """)
    done = pubsubguard(root, "check", "-s", "dev")
    assert done.returncode == 2, done.stdout
    [line] = done.stderr.strip().splitlines()
    assert f"index.ts:{line_of(root, 'new gcp.pubsub.Topic')}: " in line
    assert "its string at object.labels.team is not valid UTF-8" in line and "orders [gcp:pubsub/topic:Topic]" in line
    assert "DecodeError" not in done.stderr


@pytest.mark.parametrize("value, cause", [
    ('b"orders-\\xff"', "unexpected input of type bytes for team"),
    ('b"orders-\\xff".decode("utf-8", "surrogateescape")', "surrogates not allowed"),
])
def test_python_cannot_send_a_string_that_is_not_utf8_and_says_why_in_one_line(tmp_path, value, cause):
    """The Python SDK refuses bytes (pulumi/runtime/rpc.py: "unexpected input of type bytes") and protobuf
    refuses to encode a lone surrogate: the program fails on its own side, as under `pulumi preview`; the
    check's one line keeps the SDK's cause (it kept only "While processing resource: ...")."""
    root = python_twin(tmp_path, f"""
        import pulumi_gcp as gcp

        gcp.pubsub.Topic("orders", name="orders", labels={{"team": {value}}})
    """)
    done = pubsubguard(root, "check", "-s", "dev")
    assert done.returncode == 2, done.stdout
    [line] = [text for text in done.stderr.strip().splitlines() if text.startswith("pubsubguard check:")]
    assert "While processing resource: 'orders'" in line and cause in line, line


def test_the_engine_names_where_a_request_holds_a_string_that_is_not_utf8():
    from pulumi.runtime.proto import resource_pb2

    from pubsubguard.core import request_reader

    request = resource_pb2.RegisterResourceRequest(type="gcp:pubsub/topic:Topic", name="orders")
    request.object.update({"labels": {"team": "AAA"}, "filters": ["x", {"attribute": "BBB"}]})
    data = request.SerializeToString()
    assert request_reader.invalid_utf8_at(data, request.DESCRIPTOR) is None
    half = "\ud83d".encode("utf-8", "surrogatepass")  # what a JavaScript encoder writes for half a pair
    for text, where in ((b"AAA", "object.labels.team"), (b"BBB", "object.filters[1].attribute"),
                        (b"orders", "name")):
        assert request_reader.invalid_utf8_at(data.replace(text, half, 1), request.DESCRIPTOR) == where
    read = request_reader.reader(resource_pb2.RegisterResourceRequest, "RegisterResource")
    assert read(data) == request
    assert "object.labels.team is not valid UTF-8" in read(data.replace(b"AAA", half)).reason
    assert "not a pulumirpc.RegisterResourceRequest message" in read(b"\xff\xff\xff").reason


def test_the_engine_calls_back_only_a_socket_the_program_made_in_its_scratch_folder(tmp_path):
    """The scratch folder is the program's to write: a symbolic link named like its callbacks socket must not
    send the engine to a socket of the host."""
    import socket

    from pubsubguard.core import callbacks

    scratch, host = tmp_path / "scratch", tmp_path / "host"
    scratch.mkdir()
    host.mkdir()
    listeners = []
    for path in (scratch / "callbacks-1.sock", host / "private.sock"):
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
        listeners.append(listener)
    (scratch / "callbacks-2.sock").symlink_to(host / "private.sock")
    program = callbacks.Program(scratch)
    try:
        assert program.allowed(f"unix:{scratch / 'callbacks-1.sock'}")
        assert not program.allowed(f"unix:{scratch / 'callbacks-2.sock'}")  # a link to the host's socket
        assert not program.allowed(f"unix:{host / 'private.sock'}")
        assert not program.allowed("127.0.0.1:50051")  # the host's loopback, not the program's
    finally:
        for listener in listeners:
            listener.close()
