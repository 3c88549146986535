"""Linux isolation primitives for the sandbox worker: namespaces, mounts, prctl (ctypes; Python 3.11 has no os.unshare).

Imported by `_worker.py` only (stdlib only, so the worker stays light).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import stat
import struct

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = 0x20000, 0x8000000, 0x40000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
_MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME}
_MOUNT_FLAGS |= {"nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
libc = ctypes.CDLL(None, use_errno=True)


def check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    check(libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [s.encode() if s is not None else None for s in (source, target, fstype, data)]
    check(libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def prctl(option: int, value: int) -> None:
    check(libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), "prctl")


def _mounts() -> list[tuple[str, int]]:
    """(mount point, flags to keep) for every mount, parents before children."""
    result = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")  # octal escapes such as \040
            keep = sum(_MOUNT_FLAGS.get(opt, 0) for opt in fields[5].split(","))
            result.append((point, keep))
    return result


def under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def isolate_fs(work_dir: str, expose: list[str], disk_mb: int, report: dict) -> None:
    unshare(CLONE_NEWNS | CLONE_NEWIPC)
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount from here on reaches the host
    mount("tmpfs", work_dir, "tmpfs", MS_NOSUID | MS_NODEV, f"size={disk_mb}m,mode=700")
    expose = sorted({os.path.realpath(p) for p in [*expose, work_dir] if os.path.isdir(p)})
    # Cover private scratch dirs, and every dir the box uid could not traverse (their files stay hidden).
    covers = {"/tmp", "/var/tmp", "/dev/shm"}
    for path in expose:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            anc = "/" + "/".join(parts[:i])
            if not os.stat(anc).st_mode & stat.S_IXOTH:
                covers.add(anc)
                break
    covers = {c for c in covers if os.path.isdir(c) and not os.path.islink(c)}
    fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in expose if any(under(p, c) for c in covers)}
    for cover in sorted(covers, key=len):
        scratch = cover in ("/tmp", "/var/tmp", "/dev/shm")
        mode, size = ("1777", disk_mb) if scratch else ("755", 1)
        mount("tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size}m,mode={mode}")
    for path, fd in sorted(fds.items()):
        os.makedirs(path, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        os.close(fd)
    writable = {work_dir, "/tmp", "/var/tmp", "/dev/shm"}
    failed = []
    for point, keep in _mounts():
        if point in writable or under(point, "/proc") or point in ("/dev", "/dev/pts"):
            continue
        try:
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)
        except OSError:
            failed.append(point)
    report["readonly_root"] = "/" not in failed
    report["covered"] = sorted(covers)
    report["scratch"] = ["/tmp", "/var/tmp", "/dev/shm"]


def loopback_up() -> None:
    # A fresh network namespace has only `lo`, and it is down; bring it up so box-internal servers work.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, ifreq))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP
