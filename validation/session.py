"""The one place a Spark session is made.

Master: under spark-submit the submitter decides (its `--master` or `spark.master` wins); the job's
`--master` applies only when none is configured, and `DEFAULT_MASTER` when neither says. In local
mode the driver binds to loopback only (`spark.driver.host` and `spark.driver.bindAddress`
127.0.0.1): nothing listens on another interface. When this process launches Spark's JVM itself
(not under spark-submit), Spark's log lines go to `<log_dir>/spark.log`, not the terminal, and the JVM
starts from Spark's class archive when one was built for this java and these jars
(`validation/class_archive.py`); both through `PYSPARK_SUBMIT_ARGS` while pyspark launches the JVM,
unless the user set it.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from . import class_archive

# 3 slots: the publisher task and the two default subscriber tasks all run at once, so every
# subscriber is reading before the first publish (pubsubguard.validation.driver); on 2 cores the tasks mostly wait.
DEFAULT_MASTER = "local[3]"
LOOPBACK = "127.0.0.1"
LOG_FILE = "spark.log"


def configured_master() -> str | None:
    """The master spark-submit (or a running PySpark) configured, if this process runs under one."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # attaches to spark-submit's JVM: its settings load with SparkConf
    return SparkConf().get("spark.master", None)


def _log_to_file(log_dir: Path) -> str:
    """The JVM's option that makes Spark log to `<log_dir>/spark.log` (log4j 2 properties, written here)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    config = log_dir / "spark-log4j2.properties"
    config.write_text(
        "rootLogger.level = warn\n"
        "rootLogger.appenderRef.file.ref = file\n"
        "appender.file.type = File\n"
        "appender.file.name = file\n"
        f"appender.file.fileName = {log_dir / LOG_FILE}\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n\n"
    )
    return f"-Dlog4j2.configurationFile={config.as_uri()}"


def driver_java_options(log_dir: Path | None, archive: Path | None) -> list[str]:
    """The driver JVM's own options: its log to `<log_dir>/spark.log`, its classes from `archive`."""
    options = [_log_to_file(Path(log_dir))] if log_dir is not None else []
    return options + (class_archive.java_options(archive) if archive is not None else [])


def submit_args(java_options: list[str]) -> str:
    """PYSPARK_SUBMIT_ARGS that give the driver JVM `java_options`: one `--driver-java-options` string, which
    Spark's launcher splits again (its own quoting: double quotes, backslashes)."""
    quoted = []
    for option in java_options:
        if any(c.isspace() or c in "\"'\\" for c in option):
            option = '"' + option.replace("\\", "\\\\").replace('"', '\\"') + '"'
        quoted.append(option)
    return f"--driver-java-options {shlex.quote(' '.join(quoted))} pyspark-shell"


def launch_args(log_dir: Path | None, use_archive: bool = True) -> tuple[str | None, Path | None]:
    """PYSPARK_SUBMIT_ARGS for the JVM this process is about to launch (its log to `log_dir`, Spark's class
    archive when one is usable) and that archive. (None, None) when the user set PYSPARK_SUBMIT_ARGS (theirs
    is used as it is, nothing of ours added), or there is nothing to add (the JVM launched as pyspark does)."""
    if "PYSPARK_SUBMIT_ARGS" in os.environ:
        return None, None
    archive = class_archive.usable() if use_archive else None
    options = driver_java_options(log_dir, archive)
    return (submit_args(options) if options else None), archive


def _start_gateway(conf, args: str | None) -> None:
    """pyspark's launch of its JVM, with PYSPARK_SUBMIT_ARGS `args` while it reads them: set for the launch
    only, so that no process this one starts later inherits them as though the user had set them."""
    from pyspark import SparkContext

    if args is None:
        SparkContext._ensure_initialized(conf=conf)
        return
    os.environ["PYSPARK_SUBMIT_ARGS"] = args
    try:
        SparkContext._ensure_initialized(conf=conf)
    finally:
        os.environ.pop("PYSPARK_SUBMIT_ARGS", None)


def _launch_jvm(settings: list[tuple[str, str]], log_dir: Path | None) -> None:
    """Launch Spark's JVM (this process's), from Spark's class archive when one is usable. A JVM that does not
    start with the archive but starts without it (a corrupt archive: SIGBUS while mapping it) had the archive
    at fault: it is removed, in one line on stderr. When neither starts, the archive stays and the error is the
    launch's own."""
    from pyspark import SparkConf

    conf = SparkConf(loadDefaults=False).setAll(settings)
    args, archive = launch_args(log_dir)
    if archive is None:
        _start_gateway(conf, args)
        return
    reports = class_archive.crash_reports(archive.parent)
    try:
        _start_gateway(conf, args)
        return
    except Exception as error:  # noqa: BLE001 - tried again without the archive, which tells whose fault it was
        failed = error
    _start_gateway(conf, launch_args(log_dir, use_archive=False)[0])
    crashed = sorted(class_archive.crash_reports(archive.parent) - reports)
    reason = class_archive.crash_summary(crashed[-1]) if crashed else (str(failed).strip().splitlines() or ["?"])[0]
    class_archive.discard(archive)
    print(f"pubsubguard: Spark's class archive {archive} could not be used ({reason}); removed, started without it",
          file=sys.stderr, flush=True)


def _settings(master: str | None, app_name: str, shuffle_partitions: int) -> list[tuple[str, str]]:
    """What the session is made with (and its JVM launched with). Sets up the environment the JVM is
    launched in: the executors' Python, and loopback in local mode."""
    from pyspark import SparkContext

    # Executors must run the same interpreter as the driver (the project's virtualenv).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    configured = configured_master()
    chosen = configured or master or DEFAULT_MASTER
    local = chosen.startswith("local")
    if configured is None and SparkContext._jvm is None and local:  # this process launches the JVM
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    settings = [
        ("spark.app.name", app_name),
        ("spark.sql.shuffle.partitions", str(shuffle_partitions)),
        ("spark.ui.enabled", "false"),
        ("spark.ui.showConsoleProgress", "false"),  # rich draws the progress bars
        ("spark.sql.session.timeZone", "UTC"),
        ("spark.driver.memory", os.environ.get("PUBSUBGUARD_DRIVER_MEMORY", "2g")),
        # Arrow batches to Python are bounded by rows (maxRecordsPerBatch, 10,000: a few hundred KiB
        # of the checks' narrow rows). A byte bound other than INT_MAX makes Spark measure the batch
        # after every row (ArrowWriter.sizeInBytes), ~15% of the checks' pass in a JFR profile.
        ("spark.sql.execution.arrow.maxBytesPerBatch", str(2**31 - 1)),
    ]
    if configured is None:
        settings.append(("spark.master", chosen))
    if local:
        settings += [("spark.driver.host", LOOPBACK), ("spark.driver.bindAddress", LOOPBACK)]
    return settings


def launch(master: str | None = None, app_name: str = "pubsubguard-verify", shuffle_partitions: int = 8,
           log_dir: Path | None = None) -> None:
    """Launch Spark's JVM now (one fork and exec of spark-submit, then its gateway) with the settings
    `spark_session` makes the session with, which it then finds running: the session's own start (several
    seconds) can go on in another thread while this process opens gRPC channels, which a fork must come
    before. Nothing when a JVM is already there (under spark-submit, or launched before)."""
    from pyspark import SparkContext

    settings = _settings(master, app_name, shuffle_partitions)
    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    _launch_jvm(settings, log_dir)


def spark_session(
    master: str | None = None, app_name: str = "pubsubguard-verify", shuffle_partitions: int = 8, log_dir: Path | None = None,
    conf: dict[str, str] | None = None,
):
    """The session (`conf`: more settings, e.g. a benchmark's event log; they take effect when this launches the
    JVM)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    launching = SparkContext._jvm is None and "PYSPARK_GATEWAY_PORT" not in os.environ
    settings = _settings(master, app_name, shuffle_partitions) + list((conf or {}).items())
    if launching:  # this process launches the JVM, with the session's settings (as `launch`)
        _launch_jvm(settings, log_dir)
    builder = SparkSession.builder
    for key, value in settings:
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    _quiet_accumulator_server(session.sparkContext)
    return session


def _quiet_accumulator_server(context) -> None:
    """PySpark's accumulator server (a socketserver thread of this process) reads updates from the JVM
    until `SparkContext.stop` shuts it down. When the JVM goes first -- Ctrl-C ends Spark's JVM before the
    job's `finally` stops the context, or the JVM dies -- its read ends in EOFError and socketserver prints
    the whole traceback to stderr after the command's own one line. That end of the connection is the
    JVM's end, which the command reports on its own; any other error in the server is one line."""
    server = getattr(context, "_accumulatorServer", None)
    if server is None or not hasattr(server, "handle_error"):
        return

    def handle_error(_request, _address) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (EOFError, ConnectionError)):
            return
        print(f"pubsubguard: Spark's accumulator server: {type(error).__name__}: {error}", file=sys.stderr)

    server.handle_error = handle_error
