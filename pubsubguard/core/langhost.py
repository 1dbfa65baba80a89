"""The confined child process a team's program runs in, whatever its language (see docs/security.md for the
threat model and why these facilities). What runs in it is the runner's: `langhost_python` (`runtime: python`),
`langhost_node` (`runtime: nodejs`).

- **The child** runs the runner's command in a fresh scratch directory, under bubblewrap where it works: no
  network (its own network namespace; the engine is reached over Unix sockets in the scratch directory), as root
  a writable throwaway overlay of the whole file system (a program may write wherever its user could, as under
  `pulumi preview`: a function's zip beside the project; the writes go to a tmpfs that ends with the program:
  `overlay_root.py`), else the file system read-only but the scratch directory (HOME and TMPDIR point there) and a
  throwaway copy of the project at the project's own path (virtualenvs, `node_modules`, `.git` and large files
  stay read-only binds), its own PID namespace and session (everything it started dies with it), no
  capabilities. Its environment is an allowlist (`--pass-env NAME` adds). Its data segment is capped
  (RLIMIT_DATA). Where bubblewrap is missing or cannot make namespaces here, the child runs in a session of its
  own with the same environment and limits, and `notes` say what is missing.
- **Streams**: the child's stdout and stderr are read into bounded buffers (never this process's own
  streams), so a program that floods, closes or holds them changes nothing here.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pubsubguard.core.errors import UserError
from pubsubguard.core.project import PlanError, Project

ENV_ALLOWLIST = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "SYSTEMROOT")
STREAM_KEEP = 64 * 1024  # bytes of each stream kept for the report; the rest is counted and dropped


class ConfinementError(UserError):
    """`--require-isolation` and a confinement this machine cannot give."""


@functools.lru_cache(maxsize=1)
def bubblewrap() -> tuple[str | None, str]:
    """(path to a bwrap that can make the namespaces here, why not)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None, "bubblewrap (bwrap) is not installed"
    probe = subprocess.run([bwrap, *_bwrap_args(Path("/tmp"), Path("/")), "true"], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=30)
    if probe.returncode != 0:
        return None, f"bubblewrap cannot make namespaces here ({(probe.stderr.strip().splitlines() or ['?'])[-1]})"
    return bwrap, ""


def _bwrap_args(scratch: Path, cwd: Path, root: Path | None = None) -> list[str]:
    """`/` read-only, or `root` (the writable throwaway view `overlay_root.py` made) bound at `/`."""
    file_system = (["--ro-bind", "/", "/"] if root is None else
                   ["--bind", str(root), "/", "--ro-bind-try", "/sys", "/sys"])
    hidden = [] if root is None else ["--tmpfs", str(root.parent)]  # the overlay's own folder, inside scratch
    return [*file_system, "--dev", "/dev", "--proc", "/proc", "--bind", str(scratch), str(scratch), *hidden,
            "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--chdir", str(cwd)]


OVERLAY_SCRIPT = Path(__file__).resolve().parent / "overlay_root.py"
OVERLAY_MIB = 2048  # the tmpfs that takes the program's writes (a larger write fails with ENOSPC)


def overlay_command(scratch: Path) -> list[str]:
    """The launcher that gives the program a writable throwaway view of the whole file system (see
    `overlay_root.py`); the view is at `scratch / "writes" / "root"`."""
    writes = scratch / "writes"
    writes.mkdir(exist_ok=True)
    return [shutil.which("unshare") or "unshare", "--mount", "--propagation", "private", "--", sys.executable, "-I",
            str(OVERLAY_SCRIPT), str(writes), str(OVERLAY_MIB), str(scratch), "--"]


@functools.lru_cache(maxsize=1)
def overlay() -> tuple[bool, str]:
    """(whether the program's writes can go to an overlay of the whole file system here, why not): as
    root, with util-linux's `unshare` and a kernel that mounts overlayfs; probed once."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False, "not root"
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False, "util-linux's unshare or mount is missing"
    probe_dir = Path(tempfile.mkdtemp(prefix="pubsubguard-probe-", dir="/tmp" if Path("/tmp").is_dir() else None))
    try:
        done = subprocess.run([*overlay_command(probe_dir), "true"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return False, str(err)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    return done.returncode == 0, (done.stderr.strip().splitlines() or [""])[-1]


COPY_MAX_FILES = 20_000  # a project larger than this is read-only to the program (said in a note)
COPY_MAX_BYTES = 256 * 1024 * 1024
COPY_FILE_MAX_BYTES = 8 * 1024 * 1024  # a larger file is a read-only bind of the original
COPY_MAX_BINDS = 256
READ_ONLY_DIRECTORIES = ("node_modules", ".git", ".hg", ".svn")


def writable_copy(root: Path, scratch: Path, hidden: frozenset[Path] = frozenset()) -> tuple[list[str], str]:
    """bubblewrap arguments that put a throwaway copy of the project at its own path, and "" — or no
    arguments and why not (the project then stays read-only to the program). Virtualenvs, `node_modules`,
    VCS folders and large files are not copied: read-only binds of the originals stand in their place.
    The `hidden` files are never copied: an empty file stands in their place (`start` hides it)."""
    copy = scratch / "project"
    binds: list[str] = []
    files = size = 0

    def read_only(source: Path, target: Path, is_dir: bool) -> None:
        if is_dir:
            target.mkdir()
        else:
            target.touch()
        binds.extend(["--ro-bind", str(source), str(root / target.relative_to(copy))])

    try:
        for folder, dirnames, filenames in os.walk(root):
            here, there = Path(folder), copy / Path(folder).relative_to(root)
            there.mkdir(exist_ok=True)
            walked = []
            for name in dirnames:
                source = here / name
                if source.is_symlink():
                    os.symlink(os.readlink(source), there / name)
                elif name in READ_ONLY_DIRECTORIES or (source / "pyvenv.cfg").exists():
                    read_only(source, there / name, True)
                else:
                    walked.append(name)
            dirnames[:] = walked
            for name in filenames:
                source = here / name
                if source.is_symlink():
                    os.symlink(os.readlink(source), there / name)
                    continue
                if source.resolve() in hidden:
                    (there / name).touch()
                    continue
                info = source.stat()
                files, size = files + 1, size + min(info.st_size, COPY_FILE_MAX_BYTES)
                if files > COPY_MAX_FILES or size > COPY_MAX_BYTES:
                    return [], (f"the project has more than {COPY_MAX_FILES:,} files or "
                                f"{COPY_MAX_BYTES >> 20} MiB: it is read-only to the program")
                if info.st_size <= COPY_FILE_MAX_BYTES and source.is_file():
                    try:
                        shutil.copy2(source, there / name)
                        continue
                    except OSError:
                        pass  # unreadable here: kept as it is, like a large file
                read_only(source, there / name, False)
            if len(binds) // 3 > COPY_MAX_BINDS:  # three arguments a bind
                return [], f"the project has more than {COPY_MAX_BINDS} large files or folders kept as they are: it is read-only to the program"
    except OSError as err:
        return [], f"the project could not be copied for the program's writes ({err.strerror or err}): it is read-only to the program"
    return ["--bind", str(copy), str(root), *binds], ""


@dataclass
class Stream:
    """One of the child's output streams: the first `STREAM_KEEP` bytes, and how many there were."""
    kept: bytearray = field(default_factory=bytearray)
    total: int = 0

    def text(self) -> str:
        return self.kept.decode(errors="replace")

    @property
    def truncated(self) -> bool:
        return self.total > len(self.kept)


def _drain(fd: int, stream: Stream) -> None:
    """Read until every writer has closed the pipe (a process the program left behind that escaped the
    kill keeps this daemon thread waiting, never the command)."""
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            stream.total += len(chunk)
            room = STREAM_KEEP - len(stream.kept)
            if room > 0:
                stream.kept += chunk[:room]
    except OSError:
        return
    finally:
        os.close(fd)


@dataclass
class Child:
    """The program's process, confined; `stop()` ends it and everything it started."""
    process: subprocess.Popen
    scratch: Path
    stdout: Stream
    stderr: Stream
    readers: list[threading.Thread]
    confined: bool

    def poll(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        process = self.process
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # bwrap's session: bwrap and, with it, its PID namespace
            except (ProcessLookupError, PermissionError):
                pass
            try:
                process.kill()
            except ProcessLookupError:
                pass
            process.wait()
        else:  # the program is gone; anything it left in its session goes too
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for reader in self.readers:
            reader.join(timeout=0.2)  # a process that escaped may still hold the pipes: do not wait on it


def scratch_directory() -> Path:
    """A private directory for one run: the engine's sockets, the exec script, the program's HOME and
    TMPDIR. Short (a Unix socket's path is limited to about 100 bytes)."""
    base = Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())
    folder = Path(tempfile.mkdtemp(prefix="pubsubguard-", dir=base))
    for name in ("home", "tmp", "exec"):
        (folder / name).mkdir()
    return folder


def base_environment(config_env: dict[str, str], scratch: Path, pass_env: tuple[str, ...]) -> dict:
    """The child's environment, whatever its language: the allowlist, `--pass-env` names, the engine's
    variables, HOME and TMPDIR in the scratch directory, and a preview's `PULUMI_DRY_RUN`."""
    env = {key: os.environ[key] for key in ENV_ALLOWLIST if key in os.environ}
    env.update({key: os.environ[key] for key in pass_env if key in os.environ})
    env.update(config_env)
    env.update({"HOME": str(scratch / "home"), "TMPDIR": str(scratch / "tmp"), "PULUMI_DRY_RUN": "true"})
    return env


@dataclass(frozen=True)
class Launch:
    """What the engine hands any language's program: its addresses, the project, the stack, the limits
    the program side applies itself, the config file (PULUMI_CONFIG and its secret keys as JSON)."""
    monitor: str
    engine: str
    project: Project
    stack: str
    parallel: int
    idle_timeout_s: float
    max_resources: int
    config_file: Path


# The limits without prlimit. Never Python code between fork and exec (`preexec_fn`): this process runs gRPC
# threads, whose fork handlers then run, print a log line, and under load the child died of SIGABRT before exec
# (1 check in 90 with 4 busy loops beside it: a clean program reported as killed).
_LIMITED = ("import os, resource, sys\n"
            "limit = int(sys.argv[1])\n"
            "resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))\n"
            "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
            "try:\n"
            "    os.execvp(sys.argv[2], sys.argv[2:])\n"
            "except OSError as err:\n"
            "    sys.stderr.write(f'{sys.argv[2]}: cannot start the program ({err.strerror})\\n')\n"
            "    sys.exit(127)\n")


def start(command: list[str], project: Project, scratch: Path, env: dict, *, memory_mib: int,
          require_isolation: bool, notes: list[str], program: str = "", hidden: tuple[Path, ...] = ()) -> Child:
    """Start `command` (a program's runner; `program` names what runs it, for messages) in the child (see
    module doc); `notes` gets one line per missing confinement. The `hidden` files (`--environment-values`)
    read as empty to a confined program, and are never copied for it."""
    program = program or command[0]
    bwrap, why = bubblewrap()
    hidden = frozenset(Path(path).resolve() for path in hidden)
    covers = [arg for path in sorted(hidden) for arg in ("--ro-bind", "/dev/null", str(path))]
    if bwrap is not None and overlay()[0]:  # writes anywhere, into a throwaway overlay (`overlay_root.py`)
        command = [*overlay_command(scratch), bwrap, *_bwrap_args(scratch, project.program_dir, scratch / "writes" / "root"),
                   *covers, "--", *command]
    elif bwrap is not None:
        layer, no_layer = writable_copy(project.root.resolve(), scratch, hidden)
        if no_layer:
            notes.append(no_layer)
        command = [bwrap, *_bwrap_args(scratch, project.program_dir), *layer, *covers, "--", *command]  # env: Popen's
    else:
        message = (f"{why}: the program runs without network, file-system and PID isolation "
                   "(its environment is still an allowlist; install bubblewrap for the rest)")
        if require_isolation:
            raise ConfinementError(f"--require-isolation: {message}")
        notes.append(message)
    limit = memory_mib * 1024 * 1024
    prlimit = shutil.which("prlimit")
    if prlimit is not None:  # util-linux
        command = [prlimit, f"--data={limit}:{limit}", "--core=0:0", "--", *command]
    elif shutil.which(command[0], path=env.get("PATH", os.defpath)) is None:
        raise PlanError(f"{program}: cannot start the program (not found, or not executable)")
    else:  # the limits set by a Python of its own that then execs the command (see _LIMITED)
        command = [sys.executable, "-I", "-S", "-c", _LIMITED, str(limit), *command]
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w, env=env,
                                   cwd=str(project.program_dir), start_new_session=True,
                                   close_fds=True)
    except OSError as err:
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        raise PlanError(f"{program}: cannot start the program ({err.strerror})") from None
    os.close(out_w)
    os.close(err_w)
    stdout, stderr = Stream(), Stream()
    readers = [threading.Thread(target=_drain, args=(fd, stream), daemon=True, name=f"program-{name}")
               for fd, stream, name in ((out_r, stdout, "stdout"), (err_r, stderr, "stderr"))]
    for reader in readers:
        reader.start()
    return Child(process, scratch, stdout, stderr, readers, bwrap is not None)


def wait(child: Child, deadline: float, should_stop) -> int | None:
    """Wait for the child's exit, until `deadline` (monotonic) or `should_stop()`; its exit code or None."""
    while True:
        code = child.poll()
        if code is not None:
            return code
        if should_stop() or time.monotonic() > deadline:
            return None
        try:
            child.process.wait(timeout=0.05)
        except subprocess.TimeoutExpired:
            pass
