"""Spark's class archive: the driver JVM this process launches starts from a class-data-sharing archive (AppCDS).

A session and one job load some 17,000 classes, most from Spark's jars; the JVM reads, parses and verifies each
one on every start. A dynamic archive (`-XX:ArchiveClassesAtExit`, JDK 13 and later) holds them
as the JVM had them in memory: mapped from one file, they cost little. On a 2-core machine a session's launch,
start and first job went from 1.85, 3.5 and 2.5 s to 1.1, 1.85 and 1.3 s (docs/performance.md).

- **Where**: `<cache>/spark-cds/<key>.jsa` (the cache of `pubsubguard/core/cache.py`), beside its sidecar
  `<key>.json`, written last, which gives the archive's byte size, modification time and first bytes. An archive
  is used only when all three match the file: a file cut short, replaced or overwritten is never mapped (a JVM
  maps a truncated archive and dies of SIGBUS), and no option names a file that is not there (Java 17 given a
  missing or unreadable archive starts without its own base archive too: slower than with no option at all).
- **Key**: the archive is valid for one JVM build and one classpath, and the JVM itself checks each jar's path,
  size and modification time against those it was made with. The key is a hash of the java Spark runs (its
  resolved path and the stat of it, of its `libjvm.so`, its base archive `classes.jsa` and its `modules` image),
  pyspark's version, Spark's jars folder (its resolved path and each jar's name, size and modification time) and
  `SPARK_CONF_DIR`: stat only, no JVM is started to compute it. A JVM given an archive that does not fit anyway
  (another classpath: `spark.driver.extraClassPath`) starts without it and says nothing (`-Xlog:cds*=off`).
- **Use**: `validation/session.py` adds `java_options` to the driver's options when this process launches the
  JVM itself and the user did not set `PYSPARK_SUBMIT_ARGS`. `PUBSUBGUARD_SPARK_CDS=0` turns it off.
- **Build**: `validation/class_archive_build.py` (`scripts/setup.sh` runs it when the archive is absent).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pubsubguard.core.cache import cache_root

FORMAT = 1  # of the key and the sidecar: a new number makes every archive an old one
OPT_OUT_ENV = "PUBSUBGUARD_SPARK_CDS"
FOLDER = "spark-cds"
HEAD_BYTES = 16  # of the archive, in its sidecar: the JVM's header (magic number, checksum, version)
CRASH_GLOB = "hs_err_*.log"  # a JVM that dies writes its report here (-XX:ErrorFile), never in the user's folder


def enabled() -> bool:
    return os.environ.get(OPT_OUT_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def folder() -> Path:
    return cache_root() / FOLDER


def jars_folder() -> Path | None:
    """Spark's jars, as pyspark's launcher finds them: `$SPARK_HOME/jars`, else pyspark's own `jars/`."""
    spark_home = os.environ.get("SPARK_HOME")
    if spark_home:
        return Path(spark_home) / "jars"
    from importlib import util

    spec = util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "jars"


def _pyspark_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        return None


def _stat_line(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return f"{path} absent"
    return f"{path} {stat.st_size} {stat.st_mtime_ns}"


def java() -> Path | None:
    """The java Spark's launcher runs (JAVA_HOME's, else PATH's), its links resolved."""
    from pubsubguard.core.emulator import find_java  # here: the emulator's module costs 60 ms to import

    found = find_java()
    return Path(os.path.realpath(found)) if found else None


def key() -> str | None:
    """The archive's key for the java and the jars Spark would run now (see the module doc); None without
    either."""
    binary, jars, version = java(), jars_folder(), _pyspark_version()
    if binary is None or jars is None or version is None:
        return None
    home = binary.parent.parent
    parts = [f"format {FORMAT}", f"pyspark {version}", f"SPARK_CONF_DIR {os.environ.get('SPARK_CONF_DIR', '')}"]
    parts += [_stat_line(p) for p in (binary, home / "lib" / "server" / "libjvm.so",
                                      home / "lib" / "server" / "classes.jsa", home / "lib" / "modules")]
    try:
        jars = jars.resolve(strict=True)
        parts.append(f"jars {jars}")
        for entry in sorted((e for e in os.scandir(jars) if e.name.endswith(".jar")), key=lambda e: e.name):
            stat = entry.stat()
            parts.append(f"{entry.name} {stat.st_size} {stat.st_mtime_ns}")
    except OSError:
        return None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def archive_path(archive_key: str) -> Path:
    return folder() / f"{archive_key}.jsa"


def sidecar_path(archive: Path) -> Path:
    return archive.with_suffix(".json")


def head(archive: Path) -> str:
    with open(archive, "rb") as file:
        return file.read(HEAD_BYTES).hex()


def describe(archive: Path, **more) -> dict:
    """The sidecar of `archive` as it is now: what `matches` compares, and `more`."""
    stat = archive.stat()
    return {"format": FORMAT, "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "head": head(archive), **more}


def matches(archive: Path) -> bool:
    """The archive is there and its sidecar names it as it is: size, modification time and first bytes."""
    try:
        recorded = json.loads(sidecar_path(archive).read_text())
        stat = archive.stat()
        return (isinstance(recorded, dict) and recorded.get("format") == FORMAT
                and recorded.get("bytes") == stat.st_size and recorded.get("mtime_ns") == stat.st_mtime_ns
                and recorded.get("head") == head(archive))
    except (OSError, ValueError):
        return False


def usable() -> Path | None:
    """The archive for the current key, when enabled and its sidecar matches it; else None (Spark starts
    without one)."""
    if not enabled():
        return None
    archive_key = key()
    if archive_key is None:
        return None
    archive = archive_path(archive_key)
    return archive if matches(archive) else None


def java_options(archive: Path) -> list[str]:
    """The driver JVM's options to start from `archive`: mapped when it fits this JVM and classpath, silently
    left out when not (`-Xshare:auto`; the JVM's CDS warnings go to its stdout, the user's terminal, unless
    `-Xlog:cds*=off`), a crash's report in the archive's folder rather than the current directory."""
    return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", "-Xlog:cds*=off", error_file_option(archive.parent)]


def error_file_option(where: Path) -> str:
    return f"-XX:ErrorFile={where / 'hs_err_%p.log'}"


def crash_reports(where: Path) -> set[Path]:
    return set(where.glob(CRASH_GLOB))


def crash_summary(report: Path) -> str:
    """`the JVM died of SIGBUS: <report>`, the signal from the report's banner when it names one."""
    try:
        with open(report, errors="replace") as file:
            banner = [next(file, "") for _ in range(12)]
    except OSError:
        banner = []
    signal = next((word for line in banner for word in line.split() if word.startswith("SIG")), None)
    return f"the JVM died{f' of {signal}' if signal else ''}: {report}"


def discard(archive: Path) -> None:
    """Remove the archive and its sidecar (a JVM that has it mapped keeps its copy until it exits)."""
    for path in (sidecar_path(archive), archive):
        path.unlink(missing_ok=True)


def prune() -> list[Path]:
    """Remove the archives whose sidecar names a jars folder that is gone (a checkout or virtualenv deleted: a
    fresh clone's, a CI run's): no JVM can start from them again, and each is ~190 MB. What was removed."""
    removed = []
    for sidecar in sorted(folder().glob("*.json")):
        try:
            jars = json.loads(sidecar.read_text()).get("jars")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(jars, str) and jars and not Path(jars).exists():
            discard(sidecar.with_suffix(".jsa"))
            sidecar.with_suffix(".lock").unlink(missing_ok=True)  # nobody builds for a jars folder that is gone
            removed.append(sidecar.with_suffix(".jsa"))
    return removed
