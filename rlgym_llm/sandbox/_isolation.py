"""Linux isolation primitives for the sandbox worker: namespaces, mounts, prctl (ctypes; Python 3.11 has no os.unshare).

Imported by `_worker.py` only (stdlib only, so the worker stays light).

The box's filesystem (`isolate_fs`) is built, not filtered: a fresh root that holds the system dirs
(`SYSTEM_DIRS`) and the interpreter read-only, with every `site-packages`/`dist-packages` under them
hidden, one size-capped tmpfs for the work dir and the scratch dirs, a few device nodes and /proc.
So no folder of the caller (its cwd, its `sys.path`, a checkout under /tmp, the task data of an
installed package) can be reached from a box, whatever the caller's cwd.

The interpreter may live anywhere: mounts are made parents first (`mount_order`), so a venv under
/tmp, /var/tmp or /dev/shm is bound inside the box's private scratch dir, where it is the only host
folder. Refused (`private_conflict`): an interpreter folder that is, or holds, one of the scratch
dirs (an interpreter at /tmp/python3, a prefix of /): showing it would show the host's /tmp.

The interpreter is shown at the path it was started by, not only its resolved one: binds are of
resolved folders, so each symlink met on the way to `sys.executable` and the prefixes (a venv at
/opt/link/venv with /opt/link -> /data/real, a `.venv -> ~/.cache/...`) is made again in the new
root, with the same text, in an empty folder of the new root (or of the box's /tmp); the same holds
for `expose`. Refused (`Refused`): such a link where the box keeps a folder of its own (a host whose
/var/tmp links to /tmp, a `root_dir` reached through the interpreter's link).
"""

from __future__ import annotations

import ctypes
import fcntl
import glob
import os
import platform
import socket
import struct
import sys

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = 0x20000, 0x8000000, 0x40000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
MNT_DETACH = 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine(), -1)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
SCRATCH = {"tmp": "/tmp", "var_tmp": "/var/tmp", "shm": "/dev/shm"}  # name in the box tmpfs -> place
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
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


class Refused(Exception):
    """The box cannot be built as asked (e.g. the interpreter's folder is the box's private /tmp)."""


def interpreter_dirs() -> list[str]:
    """The running interpreter's prefixes and its executable's dir (a venv and its base both)."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable)}
    dirs.add(os.path.dirname(os.path.realpath(sys.executable)))
    return sorted(os.path.realpath(d) for d in dirs if d)


def private_conflict(path: str) -> str | None:
    """The box's private scratch dir that `path` is or holds, if any (such a host folder can't be shown)."""
    return next((place for place in SCRATCH.values() if under(place, path)), None)


def symlinks_on_the_way(path: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The symlinks met resolving `path`, as (where, its text), and the folders looked up in, both in order.

    Each `where` is in a resolved folder, so making these links again, over binds of resolved
    folders, makes `path` itself resolve the same way. E.g. `/opt/link/venv/bin/python` with
    `/opt/link -> /data/real` gives `[("/opt/link", "/data/real"), ("/data/real/venv/bin/python", ...)]`.
    """
    links: list[tuple[str, str]] = []
    folders: dict[str, None] = {}  # ordered, no repeats

    def walk(real: str, rest: str) -> str:
        for name in rest.split("/"):
            if name in ("", "."):
                continue
            folders[real] = None
            if name == "..":
                real = os.path.dirname(real)
                continue
            here = os.path.join(real, name)
            if os.path.islink(here) and len(links) < 40:  # 40: the kernel's limit (ELOOP)
                text = os.readlink(here)
                links.append((here, text))
                real = walk("/" if text.startswith("/") else real, text)
            else:
                real = here
        return real

    walk("/", path)
    return links, list(folders)


def mount_order(paths: list[str]) -> list[str]:
    """`paths` with every folder before the ones inside it, so a later mount never hides an earlier one.

    E.g. the box's /tmp (a scratch tmpfs) comes before a venv under /tmp, bound into it; an
    interpreter folder holding the work dir comes before the work dir's tmpfs.
    """
    return sorted(paths, key=lambda p: p.rstrip("/").count("/"))


def isolate_fs(work_dir: str, expose: list[str], disk_mb: int, report: dict) -> None:
    """Moves the worker into a fresh root holding only what a box may see (see the module docstring).

    The new root is an empty tmpfs with read-only binds of the system dirs and the interpreter
    (its site-packages hidden), one size-capped tmpfs for the work dir and the scratch dirs, a few
    device nodes and /proc. Nothing else of the host (the caller's cwd, `sys.path`, /root, /home,
    the host's /tmp) exists in it; `expose` adds read-only host dirs on request.
    """
    interpreter = interpreter_dirs()
    for path in interpreter:
        if place := private_conflict(path):
            raise Refused(
                f"the interpreter {sys.executable} cannot be shown to the box: its folder {path} is or holds "
                f"{place}, which the box replaces with a private tmpfs; run Python from a folder of its own "
                f"(e.g. {place}/venv/bin/python, not {place}/python)"
            )
    as_run = [p for p in (sys.executable, sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix) if p]
    shown = [p for p in expose if not under(os.path.realpath(p), work_dir)]
    ways = {p: symlinks_on_the_way(p) for p in dict.fromkeys([*as_run, *shown]) if os.path.exists(p)}
    own = [*SCRATCH.values(), work_dir]  # folders the box makes for itself: no host link may stand there
    for path, (links, _) in ways.items():
        for where, text in links:
            if place := next((o for o in own if under(o, where)), None):
                why = f"it goes through the link {where} -> {text}, where the box makes its own private {place}"
                if place == work_dir:
                    why = f"it goes through the link {where} -> {text}, where the box makes its work dir {place} "
                    why += f"(root_dir {os.path.dirname(work_dir)} is behind that link)"
                raise Refused(_unlinkable(path, why))
    unshare(CLONE_NEWNS | CLONE_NEWIPC)
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount from here on reaches the host
    new = work_dir  # an empty host dir: mounted over, it becomes the new root's mount point
    mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    seen: list[str] = []

    def bind(src: str, *, inside_seen: bool = False) -> None:
        src = os.path.realpath(src)
        if not os.path.exists(src) or src in seen or (not inside_seen and any(under(src, s) for s in seen)):
            return
        target = new + src
        if os.path.isdir(src):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        mount(src, target, None, MS_BIND | MS_REC)
        seen.append(src)

    for path in SYSTEM_DIRS:
        if os.path.islink(path):  # usr-merged systems: /bin -> usr/bin
            os.symlink(os.readlink(path), new + path)
        elif os.path.isdir(path):
            bind(path)
    # One tmpfs, one size cap, for everything the box may write; bound to its four places.
    box = new + "/.rlgym-box"
    os.makedirs(box)
    mount("tmpfs", box, "tmpfs", MS_NOSUID | MS_NODEV, f"size={disk_mb}m,mode=755")
    writable = {place: (name, 0o1777) for name, place in SCRATCH.items()} | {work_dir: ("work", 0o700)}
    # Parents first: the work dir or a venv may lie under /tmp, their mount points then inside the box's /tmp.
    for path in mount_order([*writable, *interpreter]):
        if path not in writable:
            bind(path)
            continue
        name, mode = writable[path]
        os.mkdir(f"{box}/{name}")
        os.chmod(f"{box}/{name}", mode)
        os.makedirs(new + path, exist_ok=True)
        mount(f"{box}/{name}", new + path, None, MS_BIND)
    check(libc.umount2(box.encode(), MNT_DETACH), "umount2")
    os.rmdir(box)
    # Installed packages (this project's task data among them, in a non-editable install) stay hidden.
    for tree in list(seen):
        for pattern in ("lib*/python*/*-packages", "local/lib*/python*/*-packages"):
            for hidden in glob.glob(os.path.join(new + tree, pattern)):
                if os.path.basename(hidden) in ("site-packages", "dist-packages") and os.path.isdir(hidden):
                    mount("tmpfs", hidden, "tmpfs", MS_NOSUID | MS_NODEV, "size=4k,mode=755")
    for dev in DEVICES:
        os.makedirs(os.path.dirname(new + dev), exist_ok=True)
        open(new + dev, "a").close()
        mount(dev, new + dev, None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        os.symlink(target, f"{new}/dev/{name}")
    os.symlink("/proc/self/fd/2", f"{new}/dev/stderr")
    os.makedirs(new + "/proc")
    mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for path in shown:
        bind(path, inside_seen=True)  # e.g. one package of a hidden site-packages
    # The paths as run: their links again, in empty folders (inside a bound folder, the host's link shows).
    made: list[str] = []
    for path, (links, folders) in ways.items():
        for folder in folders:
            if os.path.isdir(folder) and not any(under(folder, s) for s in seen):
                os.makedirs(new + folder, exist_ok=True)
        for where, text in links:
            if any(under(where, s) for s in seen) or (os.path.islink(new + where) and os.readlink(new + where) == text):
                continue  # already there: in a bound folder, or a system link such as /bin -> usr/bin
            if os.path.lexists(new + where):
                why = f"it goes through the link {where} -> {text}, where the box has something else"
                raise Refused(_unlinkable(path, why))
            os.symlink(text, new + where)
            made.append(f"{where} -> {text}")
    unresolved = {p: _unlinkable(p, "it does not resolve in the box") for p in ways}  # said with the host's view
    os.chdir(new)
    os.mkdir(".old-root")
    try:
        check(libc.syscall(ctypes.c_long(SYS_PIVOT_ROOT), b".", b".old-root"), "pivot_root")
        check(libc.umount2(b"/.old-root", MNT_DETACH), "umount2")
        report["root_switch"] = "pivot_root"
    except OSError:  # e.g. a root on initramfs: chroot instead (the box may not chroot: seccomp, no caps)
        os.chroot(".")
        report["root_switch"] = "chroot"
    os.rmdir("/.old-root")
    os.chdir("/")
    if lost := next((p for p in ways if not os.path.exists(p)), None):  # a shape not foreseen above
        raise Refused(unresolved[lost])
    failed = []
    for point, keep in _mounts():
        if point in writable or point in DEVICES or under(point, "/proc"):
            continue
        try:
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep)
        except OSError:
            failed.append(point)
    report["readonly_root"] = not failed
    report["visible"] = sorted(seen)
    report["links"] = made


def _unlinkable(path: str, why: str) -> str:
    """The one-line refusal for a path (the interpreter's or an exposed one) the box cannot show where it is."""
    if path in (sys.executable, sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix):
        run = os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))
        what, fix = (
            f"the interpreter {sys.executable}",
            f"run {run} instead (the same interpreter, by its resolved path)",
        )
    else:
        what, fix = f"the exposed path {path}", f"expose {os.path.realpath(path)} instead (its resolved path)"
    return f"{what} cannot be shown to the box at that path: {why}; {fix}"


def loopback_up() -> None:
    # A fresh network namespace has only `lo`, and it is down; bring it up so box-internal servers work.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, ifreq))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP


# ---------------------------------------------------------------- seccomp: what no box may call

# Denied with EPERM inside every box: new namespaces (user namespaces would give the box uid 0 and
# mounts), tracing other processes, keyrings (they outlive the box, per uid), eBPF, perf, io_uring
# (its operations bypass seccomp), mounting, module/kexec/swap/reboot, and file-handle opens.
# Numbers per architecture: (x86_64, aarch64).
DENIED_SYSCALLS = {
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "kcmp": (312, 272),
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41),
    "chroot": (161, 51), "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433), "mount_setattr": (442, 442),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218), "bpf": (321, 280),
    "perf_event_open": (298, 241), "userfaultfd": (323, 282), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "kexec_load": (246, 104),
    "kexec_file_load": (320, 294), "init_module": (175, 105), "finit_module": (313, 273),
    "delete_module": (176, 106), "reboot": (169, 142), "swapon": (167, 224), "swapoff": (168, 225),
    "acct": (163, 89), "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "quotactl": (179, 60), "syslog": (103, 116), "lookup_dcookie": (212, 18), "settimeofday": (164, 170),
    "clock_settime": (227, 112), "vhangup": (153, 58),
}  # fmt: skip
CLONE_SYSCALL, CLONE3_SYSCALL = (56, 220), (435, 435)  # clone: namespace flags denied; clone3: ENOSYS
CLONE_NAMESPACES = 0x7E020000 | 0x80  # CLONE_NEW{NS,CGROUP,UTS,IPC,USER,PID,NET} and CLONE_NEWTIME
_ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}  # column, AUDIT_ARCH_*
_RET_ALLOW, _RET_KILL, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|J*|K, BPF_RET|K
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


class _SockFilter(ctypes.Structure):
    _fields_ = (("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint))


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter)))


def seccomp_program(machine: str | None = None) -> list[tuple[int, int, int, int]] | None:
    """The classic-BPF filter (code, jt, jf, k) denying `DENIED_SYSCALLS`; None on other architectures."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        return None
    column, arch = _ARCHES[machine]
    denied = sorted({numbers[column] for numbers in DENIED_SYSCALLS.values()})
    head = [(_LD, 0, 0, 4), (_JEQ, 1, 0, arch), (_RET, 0, 0, _RET_KILL), (_LD, 0, 0, 0)]
    checks: list[tuple[int, int, int, int]] = []
    if machine == "x86_64":
        checks.append((_JGE, 0, 0, 0x40000000))  # the x32 ABI: a second syscall table, all denied
    checks += [(_JEQ, 0, 0, nr) for nr in denied]
    # After the checks: [clone3 -> ENOSYS], [clone -> flag test], allow, flag test (ld, jset, allow), deny, enosys
    n = len(checks)
    tail_start = n + 2  # index (within the part after `head`) of "ret allow"
    deny_at, enosys_at, clone_test_at = tail_start + 4, tail_start + 5, tail_start + 1
    body = [(code, deny_at - (i + 1), 0, k) for i, (code, _, _, k) in enumerate(checks)]
    body.append((_JEQ, enosys_at - (n + 1), 0, CLONE3_SYSCALL[column]))
    body.append((_JEQ, clone_test_at - (n + 2), 0, CLONE_SYSCALL[column]))
    body += [
        (_RET, 0, 0, _RET_ALLOW),
        (_LD, 0, 0, 16),  # args[0], low 32 bits: clone's flags
        (_JSET, 1, 0, CLONE_NAMESPACES),
        (_RET, 0, 0, _RET_ALLOW),
        (_RET, 0, 0, _RET_ERRNO | 1),  # EPERM
        (_RET, 0, 0, _RET_ERRNO | 38),  # ENOSYS: libc falls back to clone, whose flags we can see
    ]
    return head + body


def install_seccomp(program: list[tuple[int, int, int, int]]) -> None:
    """Applies the filter to this process and its future children (needs no_new_privs first)."""
    filters = (_SockFilter * len(program))(*(_SockFilter(*ins) for ins in program))
    fprog = _SockFprog(len(program), filters)
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def read_oom_kills(fd: int) -> int:
    """The `oom_kill` counter of an open memory.events (cgroup v2) or memory.oom_control (v1) file."""
    try:
        text = os.pread(fd, 4096, 0).decode()
    except OSError:
        return 0
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return 0
