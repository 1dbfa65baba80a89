"""The program's writable throwaway view of the whole file system, as root: run by `langhost.start` as

    unshare --mount --propagation private -- PYTHON -I overlay_root.py WRITES SCRATCH -- bwrap ...

in a mount namespace of its own (the host's mounts never change). It mounts a tmpfs (capped at
`langhost.OVERLAY_MIB`) at WRITES, and in WRITES/root an overlay of every real file system of the host
(`/` and each mount below it, lower: the original, upper: the tmpfs), then executes the rest of its
arguments: bubblewrap, which binds WRITES/root at `/` for the program. So the program may write anywhere
root could, as under `pulumi preview` (a function's zip beside the project, a cache in /var), every write
lands in the tmpfs, and all of it is gone when the program's namespaces end. Pseudo file systems
(`/proc`, `/sys`, `/dev`, cgroups) are not overlaid: bubblewrap gives the program its own `/proc` and
`/dev`, and `/sys` read-only. A mount that cannot be overlaid (a single-file bind, a file system overlayfs
refuses) is bound read-only instead.

Run by pubsubguard's own interpreter before the program starts; it imports nothing but the standard
library and reads nothing from the program.
"""

from __future__ import annotations

import os
import subprocess
import sys

PSEUDO = {"proc", "sysfs", "devtmpfs", "devpts", "mqueue", "cgroup", "cgroup2", "securityfs", "debugfs", "tracefs",
          "pstore", "bpf", "configfs", "fusectl", "hugetlbfs", "autofs", "binfmt_misc", "efivarfs", "rpc_pipefs",
          "nsfs", "selinuxfs"}
SKIPPED_UNDER = ("/proc", "/sys", "/dev")


def _unescape(path: str) -> str:
    return path.encode().decode("unicode_escape") if "\\" in path else path


def mount_points(exclude: tuple[str, ...]) -> list[str]:
    """The host's real file systems' mount points, parents first (from /proc/self/mountinfo)."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields = line.split()
            try:
                point, fstype = _unescape(fields[4]), fields[fields.index("-") + 1]
            except (IndexError, ValueError):
                continue
            if fstype in PSEUDO or any(point == top or point.startswith(top + "/") for top in SKIPPED_UNDER):
                continue
            if any(point == path or point.startswith(path.rstrip("/") + "/") for path in exclude):
                continue
            if point not in points:
                points.append(point)
    return sorted(points, key=lambda point: (point != "/", point.count("/"), point))


def mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def build(writes: str, size_mib: int, exclude: tuple[str, ...]) -> str:
    """Mount the writable view at `writes`/root; returns its path."""
    if not mount("-t", "tmpfs", "-o", f"mode=0700,size={size_mib}m", "pubsubguard-writes", writes):
        raise SystemExit(f"pubsubguard: cannot mount a tmpfs at {writes}")
    root = os.path.join(writes, "root")
    os.mkdir(root)
    for index, point in enumerate(mount_points(exclude)):
        target = root + (point if point != "/" else "")
        upper, work = os.path.join(writes, f"upper{index}"), os.path.join(writes, f"work{index}")
        if os.path.isdir(point) and os.path.isdir(target or root):
            os.mkdir(upper)
            os.mkdir(work)
            if mount("-t", "overlay", "pubsubguard-overlay", "-o",
                     f"lowerdir={point},upperdir={upper},workdir={work}", target or root):
                continue
        if point == "/":
            raise SystemExit("pubsubguard: cannot overlay the root file system")
        if os.path.exists(target) and mount("--bind", point, target):  # kept as it is, read-only
            mount("-o", "remount,bind,ro", target)
    return root


def main(argv: list[str]) -> None:
    writes, size, scratch, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit("usage: overlay_root.py WRITES SIZE_MIB SCRATCH -- COMMAND...")
    build(writes, int(size), (writes, scratch))
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
