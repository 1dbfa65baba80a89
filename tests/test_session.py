"""The Spark session the job makes: what it prints when Spark's JVM goes away before the session stops."""

from __future__ import annotations

import socket
import struct
import time
from types import SimpleNamespace


def _speak_as_the_jvm(server, updates: int = 0) -> None:
    """Connect to PySpark's accumulator server as Spark's JVM does (auth token, a batch of updates), read
    its acknowledgement, then hang up without stopping it: what Ctrl-C or a dying JVM leaves behind."""
    host, port = server.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as conn:
        conn.sendall(server.auth_token.encode() + struct.pack("!i", updates))
        assert conn.recv(1) == b"\x01"  # the server took the batch
    time.sleep(2.5)  # it polls each second: it sees the hang-up and reads past the end


def test_the_jvm_hanging_up_on_the_accumulator_server_prints_no_traceback(spark, capfd):
    """Interrupted soak runs ended "pubsubguard run: interrupted" followed by a PySpark traceback
    (accumulators.py read_int: EOFError) that socketserver printed from the server's thread. The JVM's
    end of that connection is reported by the command itself; the server says nothing about it.

    The session's own server serves one connection at a time and the JVM holds it once a task has sent
    updates, so the hang-up is played on a server of the same kind, quietened as the session's is."""
    import secrets

    from pyspark.accumulators import _start_update_server

    from pubsubguard.validation.session import _quiet_accumulator_server

    own = spark.sparkContext._accumulatorServer
    assert getattr(own.handle_error, "__qualname__", "").startswith("_quiet_accumulator_server")  # spark_session did it
    server = _start_update_server(secrets.token_hex(16), False)
    try:
        _quiet_accumulator_server(SimpleNamespace(_accumulatorServer=server))
        _speak_as_the_jvm(server)
        err = capfd.readouterr().err
        assert "Traceback" not in err and "EOFError" not in err, err
        _speak_as_the_jvm(server)  # still serving: a later connection's updates are still read
    finally:
        server.shutdown()
