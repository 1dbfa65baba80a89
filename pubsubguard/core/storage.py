"""One filesystem layer for plans, run metadata (run.json), evidence parts and reports: pyarrow.fs.

A location is a local path or a URI; the scheme picks the filesystem:

    path, file://...   local (pyarrow LocalFileSystem)
    gs://BUCKET/...    Google Cloud Storage (pyarrow GcsFileSystem: Application Default Credentials;
                       with STORAGE_EMULATOR_HOST=http://HOST:PORT, that GCS API server, anonymously,
                       as the Google Cloud client libraries do)
    s3a://, s3://      S3 (pyarrow S3FileSystem; `s3a` is Hadoop's name for the same store, which Spark
                       needs: hadoop-aws on its classpath)
    hdfs://            HDFS (pyarrow HadoopFileSystem: libhdfs and the Hadoop CLASSPATH on this host)

Spark reads the same URIs through its Hadoop filesystem, which needs a connector per scheme: gs://
the GCS connector (gcs-connector-hadoop3, shipped on Dataproc), s3a:// hadoop-aws with its AWS SDK,
hdfs:// none beyond Hadoop's own. `hadoop_can_read(spark, uri)` says whether the session has one.

Writes are whole or nothing: a local file is written beside its name and renamed over it; an object
is written once, under its final name, when its bytes are complete (object stores never show a
half-written object).
"""

from __future__ import annotations

import os
import posixpath
import uuid
from pathlib import Path
from urllib.parse import urlparse

from pubsubguard.core.errors import UserError

SCHEMES = ("gs", "s3", "s3a", "hdfs")
EMULATOR_ENV = "STORAGE_EMULATOR_HOST"


class StorageError(UserError):
    """A location that cannot be used (unknown scheme, no such object, no access): exit 2."""


def scheme(location: str | os.PathLike) -> str:
    """"" for a local path, else the URI scheme ("file" is local)."""
    text = str(location)
    if "://" not in text:
        return ""
    found = text.split("://", 1)[0].lower()
    return "" if found == "file" else found


def is_remote(location: str | os.PathLike) -> bool:
    return scheme(location) != ""


def join(location: str | os.PathLike, *parts: str) -> str:
    """`location/part/...` for paths and URIs alike."""
    if not is_remote(location):
        return str(Path(location, *parts))
    return posixpath.join(str(location).rstrip("/"), *parts)


def parent(location: str | os.PathLike) -> str | Path:
    """The directory holding `location` (a Path for a local path)."""
    if not is_remote(location):
        return Path(location).parent
    return str(location).rstrip("/").rsplit("/", 1)[0]


def check(location: str | os.PathLike) -> str:
    """The location's scheme, once it is one this layer knows (StorageError otherwise); nothing is contacted."""
    kind = scheme(location)
    if kind and kind not in SCHEMES:
        raise StorageError(f"{location}: unknown storage scheme {kind + '://'!r} (expected a local path, gs://, "
                           "s3a://, s3:// or hdfs://)")
    if kind and not urlparse(str(location)).netloc:
        raise StorageError(f"{location}: no bucket or host after {kind}://")
    return kind


def filesystem(location: str | os.PathLike):
    """(pyarrow FileSystem, path within it) for a path or URI; StorageError for an unknown scheme."""
    from pyarrow import fs

    kind = check(location)
    text = str(location)
    if kind == "":
        local = text.split("://", 1)[1] if text.lower().startswith("file://") else text
        return fs.LocalFileSystem(), str(Path(local).expanduser().absolute())
    parsed = urlparse(text)
    try:
        if kind == "gs" and os.environ.get(EMULATOR_ENV):
            endpoint = urlparse(os.environ[EMULATOR_ENV])
            return fs.GcsFileSystem(anonymous=True, scheme=endpoint.scheme or "http",
                                    endpoint_override=endpoint.netloc or endpoint.path), parsed.netloc + parsed.path
        if kind == "s3a":
            text = "s3" + text[3:]
        return fs.FileSystem.from_uri(text)
    except (OSError, ValueError, ImportError) as err:
        raise StorageError(f"{location}: cannot open its filesystem: {err}") from None


def _not_found(err: OSError) -> bool:
    """A store's "no such object" (pyarrow raises it as OSError with the store's text for some stores)."""
    text = str(err).lower()
    return isinstance(err, FileNotFoundError) or "not found" in text or "no such" in text


def _missing(location, err: Exception) -> StorageError:
    return StorageError(f"{location}: cannot read ({err})")


def read_bytes(location: str | os.PathLike) -> bytes:
    store, path = filesystem(location)
    try:
        with store.open_input_stream(path) as stream:
            return stream.read()
    except FileNotFoundError:
        raise
    except OSError as err:
        if _not_found(err):
            raise FileNotFoundError(2, "no such file", str(location)) from None
        raise _missing(location, err) from None


def read_text(location: str | os.PathLike) -> str:
    return read_bytes(location).decode()


def exists(location: str | os.PathLike) -> bool:
    from pyarrow import fs

    store, path = filesystem(location)
    return store.get_file_info(path).type != fs.FileType.NotFound


def write_bytes(location: str | os.PathLike, data: bytes) -> None:
    """Whole or nothing: local temp + rename; an object written once under its final name."""
    store, path = filesystem(location)
    if is_remote(location):
        with store.open_output_stream(path) as out:
            out.write(data)
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(path).with_name(f".{Path(path).name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_text(location: str | os.PathLike, text: str) -> None:
    write_bytes(location, text.encode())


def write_parquet(table, location: str | os.PathLike) -> None:
    """A Parquet file, whole or nothing (see write_bytes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    write_bytes(location, sink.getvalue().to_pybytes())


def require_writable(location: str | os.PathLike) -> None:
    """StorageError (one line) unless an object can be written under `location` (written, then deleted)."""
    probe = join(location, f".pubsubguard-write-check-{uuid.uuid4().hex[:8]}")
    try:
        write_bytes(probe, b"")
    except StorageError:
        raise
    except OSError as err:
        raise StorageError(f"{location}: cannot write there ({' '.join(str(err).split())[:300]})") from None
    try:
        delete(probe)
    except OSError:
        pass


def files(location: str | os.PathLike) -> list[str]:
    """Every file under a directory (or prefix), as locations relative to it, sorted."""
    from pyarrow import fs

    store, path = filesystem(location)
    infos = store.get_file_info(fs.FileSelector(path, recursive=True, allow_not_found=True))
    return sorted(posixpath.relpath(i.path, path) for i in infos if i.type == fs.FileType.File)


def copy_tree(source: str | os.PathLike, destination: str | os.PathLike) -> list[str]:
    """Copy every file under `source` to the same relative names under `destination` (either may be
    remote); the relative names copied."""
    names = files(source)
    for name in names:
        write_bytes(join(destination, *name.split("/")), read_bytes(join(source, *name.split("/"))))
    return names


def names(location: str | os.PathLike, prefix: str = "") -> list[str]:
    """The names of the files directly in a directory (or under a prefix, not below it) that start with
    `prefix`, sorted; [] when there is none."""
    if not is_remote(location):
        try:
            return sorted(entry.name for entry in os.scandir(Path(location))
                          if entry.name.startswith(prefix) and entry.is_file())
        except FileNotFoundError:
            return []
    from pyarrow import fs

    store, path = filesystem(location)
    infos = store.get_file_info(fs.FileSelector(path, recursive=False, allow_not_found=True))
    found = (posixpath.basename(i.path) for i in infos if i.type == fs.FileType.File)
    return sorted(name for name in found if name.startswith(prefix))


def delete(location: str | os.PathLike) -> None:
    """Delete a file or object; nothing when there is none."""
    if not is_remote(location):
        Path(location).unlink(missing_ok=True)
        return
    store, path = filesystem(location)
    try:
        store.delete_file(path)
    except OSError as err:
        if not _not_found(err):
            raise


def delete_tree(location: str | os.PathLike) -> None:
    """Delete a directory (or every object under a prefix) and what it holds; nothing when there is none."""
    if not is_remote(location):
        import shutil

        shutil.rmtree(location, ignore_errors=True)
        return
    for name in files(location):
        delete(join(location, *name.split("/")))


def read_parquet(location: str | os.PathLike):
    """A Parquet file as a pyarrow Table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not is_remote(location):
        return pq.read_table(location)
    return pq.read_table(pa.BufferReader(read_bytes(location)))


class Marker:
    """An empty file (or object) whose existence is a flag between processes that share only the store:
    the driver and Spark tasks on other hosts (the probe's stop and readiness flags). A remote store is
    asked at most once per `poll_s` (a task polls in a loop; every question is a request); once seen set,
    it stays set for this process."""

    def __init__(self, location: str | os.PathLike, poll_s: float = 0.5):
        self.location = str(location)
        self.poll_s = poll_s if is_remote(location) else 0.0
        self._seen = False
        self._asked = float("-inf")

    def set(self) -> None:
        write_bytes(self.location, b"")
        self._seen = True

    def clear(self) -> None:
        delete(self.location)
        self._seen = False

    def is_set(self) -> bool:
        import time

        if self._seen:
            return True
        now = time.monotonic()
        if now - self._asked >= self.poll_s:
            self._asked = now
            self._seen = exists(self.location)
        return self._seen


def hadoop_can_read(spark, location: str | os.PathLike) -> bool:
    """Whether the Spark session's Hadoop has a filesystem (connector) for the location's scheme."""
    kind = scheme(location)
    if kind == "":
        return True
    jvm = spark.sparkContext._jvm
    try:
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(kind, spark.sparkContext._jsc.hadoopConfiguration())
    except Exception:  # noqa: BLE001 - py4j's error for UnsupportedFileSystemException
        return False
    return True


CONNECTORS = {
    "gs": "the GCS connector (com.google.cloud.bigdataoss:gcs-connector, hadoop3; Dataproc ships it)",
    "s3a": "hadoop-aws and its AWS SDK bundle (org.apache.hadoop:hadoop-aws)",
    "s3": "hadoop-aws (use s3a:// URIs with it)",
    "hdfs": "Hadoop's HDFS client (part of Spark's Hadoop)",
}
