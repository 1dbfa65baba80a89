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


def test_a_jvm_launched_first_is_the_session_made_later_with_its_settings(tmp_path):
    """`pubsubguard run` launches Spark's JVM before it opens gRPC channels and makes the session beside plan,
    check and apply (`session.launch`, then `spark_session` in a thread): the JVM must have been launched with
    the session's settings -- the driver's memory is fixed at launch -- and log where the session says."""
    import os
    import subprocess
    import sys

    script = (
        "import sys, threading\n"
        "from pathlib import Path\n"
        "from pubsubguard.validation.session import launch, spark_session\n"
        "logs = Path(sys.argv[1])\n"
        "launch('local[1]', log_dir=logs)\n"
        "made = {}\n"
        "thread = threading.Thread(target=lambda: made.update(s=spark_session('local[1]', log_dir=logs)))\n"
        "thread.start(); thread.join()\n"
        "sc = made['s'].sparkContext\n"
        "print(sc.master, sc._jvm.java.lang.Runtime.getRuntime().maxMemory() // 2**20, (logs / 'spark.log').exists())\n"
        "made['s'].stop()\n"
    )
    env = {**os.environ, "PUBSUBGUARD_DRIVER_MEMORY": "600m"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    master, heap_mib, logged = done.stdout.split()[-3:]
    assert master == "local[1]" and int(heap_mib) <= 600 and logged == "True", done.stdout
