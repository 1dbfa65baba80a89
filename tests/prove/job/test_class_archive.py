"""Spark's class archive (`validation/class_archive.py`, built by `class_archive_build.py`, used by `session.py`):
its key, when it is used and when not, what a corrupt one does, and that a JVM started from it loads its classes
from it. Real JVMs throughout: the archive is built once for the module (~50 s on 2 cores) into a cache of its own,
whose path has a space in it (the options travel through PYSPARK_SUBMIT_ARGS and Spark's launcher)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pubsubguard.core.emulator import find_java
from pubsubguard.validation import class_archive, session

BUILD = "pubsubguard.validation.class_archive_build"
FROM_ARCHIVE = "source: shared objects file (top)"  # a class the JVM loaded from the dynamic archive (-Xlog:class+load)
SESSION = (  # a session as `verify` makes one (its log in a folder), a job, the options its JVM runs with, and
    # PYSPARK_SUBMIT_ARGS after the launch (none: a process the command starts must not inherit them as the user's)
    "import os, sys\n"
    "from pathlib import Path\n"
    "from pubsubguard.validation.session import spark_session\n"
    "spark = spark_session('local[1]', log_dir=Path(sys.argv[1]))\n"
    "print('counted', spark.range(10).count())\n"
    "runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()\n"
    "print('jvm', ' '.join(map(str, runtime.getInputArguments())))\n"
    "print('left', os.environ.get('PYSPARK_SUBMIT_ARGS'))\n"
    "spark.stop()\n"
)


def _jvm_options(done: subprocess.CompletedProcess) -> str:
    """The child JVM's options, as it printed them (`jvm ...`), after it said nothing was left in its environment."""
    lines = done.stdout.splitlines()
    assert "left None" in lines, done.stdout
    return next(line for line in lines if line.startswith("jvm "))


def _env(cache: Path, **more: str) -> dict:
    """This process's environment for a child that launches its own JVM, with `cache` as pubsubguard's cache."""
    env = {**os.environ, "PUBSUBGUARD_CACHE_DIR": str(cache), **more}
    for name in ("PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
        env.pop(name, None)
    if class_archive.OPT_OUT_ENV not in more:
        env.pop(class_archive.OPT_OUT_ENV, None)
    return env


def _session(cache: Path, cwd: Path, **more: str) -> subprocess.CompletedProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-c", SESSION, str(cwd.parent / "logs")], cwd=cwd, capture_output=True,
                          text=True, env=_env(cache, **more), timeout=300)


def _place(cache: Path, monkeypatch) -> Path:
    """Where the archive for this java and these jars goes in `cache` (this process and its children agree)."""
    monkeypatch.setenv("PUBSUBGUARD_CACHE_DIR", str(cache))
    archive = class_archive.archive_path(class_archive.key())
    archive.parent.mkdir(parents=True, exist_ok=True)
    return archive


def _seal(archive: Path) -> None:
    """A sidecar that names the archive as it is now (what a build writes last)."""
    class_archive.sidecar_path(archive).write_text(json.dumps(class_archive.describe(archive)))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = tmp_path_factory.mktemp("class archive")
    done = subprocess.run([sys.executable, "-m", BUILD], capture_output=True, text=True, env=_env(cache), timeout=1200)
    assert done.returncode == 0, (done.stdout, done.stderr)
    archives = list((cache / class_archive.FOLDER).glob("*.jsa"))
    assert len(archives) == 1 and done.stdout.startswith(f"built Spark's class archive {archives[0]} ("), done.stdout
    assert done.stderr == ""  # the build's JVMs and Spark write to its log, not the terminal
    yield archives[0]
    shutil.rmtree(cache, ignore_errors=True)  # ~190 MB


def test_the_key_follows_the_jars_and_the_java(tmp_path, monkeypatch):
    """A JVM maps an archive only for the JVM build and the jars (path, size, time) it was made with: any change
    of those is another key, and one java reached through a symlink is the same."""
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    pyspark_own = class_archive.key()
    assert pyspark_own is not None and class_archive.jars_folder().name == "jars"

    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "a.jar").write_bytes(b"a" * 10)
    monkeypatch.setenv("SPARK_HOME", str(jars.parent))
    keys = [class_archive.key()]
    assert class_archive.key() == keys[0] != pyspark_own  # stable; another jars folder, another key
    (jars / "b.jar").write_bytes(b"b")  # a jar more
    keys.append(class_archive.key())
    (jars / "a.jar").write_bytes(b"a" * 11)  # a jar of another size
    os.utime(jars / "b.jar", ns=(10**18, 10**18))
    keys.append(class_archive.key())
    os.utime(jars / "a.jar", ns=(10**18, 10**18))  # the same size, another time
    keys.append(class_archive.key())

    real_java = Path(os.path.realpath(find_java()))
    linked = tmp_path / "linked-jdk" / "bin"
    linked.mkdir(parents=True)
    (linked / "java").symlink_to(real_java)
    monkeypatch.setenv("JAVA_HOME", str(linked.parent))
    assert class_archive.key() == keys[-1]  # resolved: the same java
    other = tmp_path / "other-jdk" / "bin"
    other.mkdir(parents=True)
    (other / "java").write_text("#!/bin/sh\nexit 0\n")
    (other / "java").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(other.parent))
    keys.append(class_archive.key())  # another java
    (other / "java").write_text("#!/bin/sh\nexit 1\n")
    os.utime(other / "java", ns=(10**18, 10**18))
    keys.append(class_archive.key())  # the same java, changed
    assert len(set(keys)) == len(keys), keys


def test_an_archive_is_used_only_as_its_sidecar_names_it(tmp_path, monkeypatch):
    """Size, modification time and first bytes must match the sidecar's, and the opt-out wins; what `session`
    puts in PYSPARK_SUBMIT_ARGS follows (nothing without an archive and a log folder, as before archives), and a
    value the user set is theirs."""
    archive = _place(tmp_path / "cache", monkeypatch)
    monkeypatch.delenv(class_archive.OPT_OUT_ENV, raising=False)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    assert class_archive.usable() is None and session.launch_args(None) == (None, None)  # nothing built

    archive.write_bytes(b"\xa8\xab\x0b\xf0" + bytes(4092))
    _seal(archive)
    assert class_archive.usable() == archive  # the guard can fail
    args, used = session.launch_args(None)
    assert used == archive and f"-XX:SharedArchiveFile={archive}" in args, args
    assert f"-XX:ErrorFile={archive.parent}" in args and "-Xlog:cds*=off" in args, args
    monkeypatch.setenv(class_archive.OPT_OUT_ENV, "0")
    assert class_archive.usable() is None and session.launch_args(None) == (None, None)
    args, used = session.launch_args(tmp_path / "logs")  # the log alone, as before archives
    assert used is None and args.startswith("--driver-java-options ") and "SharedArchiveFile" not in args, args
    monkeypatch.delenv(class_archive.OPT_OUT_ENV)

    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-memory 1g pyspark-shell")  # the user's, used as it is
    assert session.launch_args(tmp_path / "logs") == (None, None)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")

    recorded = json.loads(class_archive.sidecar_path(archive).read_text())
    with open(archive, "ab") as file:  # longer than the sidecar says
        file.write(b"\0")
    assert class_archive.usable() is None
    archive.write_bytes(b"\0" * 4096)  # the same size and time, other bytes
    os.utime(archive, ns=(recorded["mtime_ns"], recorded["mtime_ns"]))
    assert archive.stat().st_size == recorded["bytes"] and class_archive.usable() is None
    _seal(archive)
    os.utime(archive, ns=(10**18, 10**18))  # touched after its sidecar was written
    assert class_archive.usable() is None


def test_a_jvm_given_an_archive_that_does_not_fit_says_nothing(built, tmp_path):
    """Another classpath, or no archive at the path: the JVM starts without it, and with the session's options
    says nothing of it (its CDS warnings go to its stdout, the user's terminal)."""
    java = find_java()
    other_classpath = ["-cp", str(tmp_path), "-version"]
    plain = subprocess.run([java, f"-XX:SharedArchiveFile={built}", "-Xshare:auto", *other_classpath],
                           capture_output=True, text=True, timeout=60)
    assert "[cds" in plain.stdout + plain.stderr  # what the options must silence
    for archive in (built, tmp_path / "absent.jsa"):
        done = subprocess.run([java, *class_archive.java_options(archive), *other_classpath], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0 and "cds" not in (done.stdout + done.stderr).lower(), done
        assert "shared archive" not in (done.stdout + done.stderr).lower()


def test_a_built_archive_is_what_the_session_loads_its_classes_from(built, tmp_path):
    classes = tmp_path / "classes.log"
    done = _session(built.parent.parent, tmp_path / "cwd",
                    SPARK_SUBMIT_OPTS=f"-Xlog:class+load=info:file={classes}")  # spark-submit's own JVM options
    assert done.returncode == 0, done.stderr[-3000:]
    assert "counted 10" in done.stdout and f"-XX:SharedArchiveFile={built}" in _jvm_options(done), done.stdout
    loaded = classes.read_text().splitlines()
    shared = sum(FROM_ARCHIVE in line for line in loaded)
    assert shared > len(loaded) // 2, (shared, len(loaded))
    assert "[cds" not in done.stdout + done.stderr
    recorded = json.loads(class_archive.sidecar_path(built).read_text())
    assert recorded["bytes"] == built.stat().st_size and recorded["classes_from_archive"] > 1000, recorded


def test_a_build_finds_the_archive_there_and_starts_no_jvm(built):
    """Idempotent and quick (scripts/setup.sh runs it each time): the key from stat alone, no step run."""
    log = built.parent / "build" / "build.log"
    before = (built.stat().st_mtime_ns, log.stat().st_mtime_ns)
    done = subprocess.run([sys.executable, "-m", BUILD], capture_output=True, text=True,
                          env=_env(built.parent.parent), timeout=60)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done
    assert (built.stat().st_mtime_ns, log.stat().st_mtime_ns) == before


def test_an_archive_its_sidecar_does_not_name_is_left_alone(tmp_path, monkeypatch):
    """Garbage at the archive's path whose sidecar gives another size: the session starts as it would without
    one, says nothing, and leaves the file (a build may be replacing it)."""
    archive = _place(tmp_path / "cache", monkeypatch)
    archive.write_bytes(os.urandom(1 << 16))
    _seal(archive)
    sidecar = json.loads(class_archive.sidecar_path(archive).read_text())
    class_archive.sidecar_path(archive).write_text(json.dumps({**sidecar, "bytes": sidecar["bytes"] - 1}))
    done = _session(tmp_path / "cache", tmp_path / "cwd")
    assert done.returncode == 0 and "counted 10" in done.stdout, done.stderr[-3000:]
    assert "SharedArchiveFile" not in _jvm_options(done) and "pubsubguard:" not in done.stderr, done
    assert archive.exists() and class_archive.sidecar_path(archive).exists()


def test_a_corrupt_archive_is_removed_and_spark_starts_without_it(built, tmp_path, monkeypatch):
    """The first half of a real archive, under a sidecar that names it as it is (what no check before the JVM
    catches): the JVM dies mapping it (SIGBUS), the session starts without it, the archive is gone, one line says
    so, and the JVM's crash report is in the cache, not in the folder the command ran in."""
    cache = tmp_path / "other cache"
    archive = _place(cache, monkeypatch)
    with open(built, "rb") as source, open(archive, "wb") as target:
        target.write(source.read(built.stat().st_size // 2))
    _seal(archive)
    assert class_archive.usable() == archive
    cwd = tmp_path / "cwd"
    done = _session(cache, cwd)
    assert done.returncode == 0 and "counted 10" in done.stdout, done.stderr[-3000:]
    ours = [line for line in done.stderr.splitlines() if line.startswith("pubsubguard:")]
    assert len(ours) == 1, done.stderr
    assert ours[0].startswith(f"pubsubguard: Spark's class archive {archive} could not be used (the JVM died")
    assert ours[0].endswith("); removed, started without it")
    assert not archive.exists() and not class_archive.sidecar_path(archive).exists()
    assert list(cwd.glob("hs_err*")) == [] and list(archive.parent.glob("hs_err_*.log")) != []
    assert "SharedArchiveFile" not in _jvm_options(done) and "-Dlog4j2.configurationFile=" in _jvm_options(done)


def test_archives_of_a_jars_folder_that_is_gone_are_pruned(tmp_path, monkeypatch):
    """A fresh clone's archive is keyed to its own jars folder: once that folder is deleted the archive can never be
    used again, and the next build removes it (~190 MB each); one whose jars are still there stays."""
    archive = _place(tmp_path / "cache", monkeypatch)
    gone, kept = archive.with_name("gone.jsa"), archive.with_name("kept.jsa")
    (tmp_path / "jars").mkdir()
    for path, jars in ((gone, tmp_path / "deleted" / "jars"), (kept, tmp_path / "jars")):
        path.write_bytes(b"\xa8\xab\x0b\xf0" + bytes(60))
        class_archive.sidecar_path(path).write_text(json.dumps(class_archive.describe(path, jars=str(jars))))
    assert class_archive.prune() == [gone]
    assert not gone.exists() and not class_archive.sidecar_path(gone).exists()
    assert kept.exists() and class_archive.sidecar_path(kept).exists() and class_archive.prune() == []
