"""The first program of a sandboxed bot: builds its filesystem view and locks it down, then execs it.

It runs inside fresh user, mount, PID, network and IPC namespaces (made by util-linux
``unshare --map-root-user``), as the root of that user namespace, which owns nothing
outside it. Its source is passed to ``python3 -I -S -c`` (standard library only, no
site-packages, no file the bot's user would have to read), with its configuration
(a Python literal) as its first argument and the bot's argv after it. In order it:

1. builds a new root on a small tmpfs: the system directories and the bot's own files
   bind-mounted read-only, a size-limited tmpfs as ``/tmp`` (also seen as ``/dev/shm``),
   a minimal ``/dev``, a fresh ``/proc`` showing only the bot's PID namespace;
   then ``pivot_root`` into it and detaches the old root;
2. enters a nested user namespace as ``nobody`` (uid 65534), which drops every capability;
3. sets ``no_new_privs``, the resource limits, a Landlock ruleset (filesystem rules,
   no TCP bind/connect, abstract Unix sockets and signals scoped to the sandbox) and a
   seccomp filter (:data:`DENIED_SYSCALLS`: memfd, kernel keyrings, perf events, ...);
4. execs the PID-namespace init shell, which runs the bot.

Without a mount namespace (``"mode": "landlock"``) step 1 is skipped and Landlock alone
confines the bot to the host paths given. Each piece that the kernel refuses is skipped
and reported on stderr as ``[arena] sandbox: ...``; with ``"probe": true`` nothing is
executed and one line (a Python literal) says which pieces worked.
"""

from __future__ import annotations

import ctypes
import os
import resource
import struct
import sys

TYPE_CHECKING = False  # importing typing (and re, collections) costs more than the rest of the launcher
if TYPE_CHECKING:
    from typing import Any

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
MNT_DETACH = 2
CLONE_NEWUSER = 0x10000000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SYS_MOUNT_SETATTR = 442
MOUNT_ATTR_RDONLY, AT_RECURSIVE = 1, 0x8000
SYS_LANDLOCK_CREATE, SYS_LANDLOCK_ADD, SYS_LANDLOCK_RESTRICT = 444, 445, 446

FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1, 2, 4, 8
FS_ALL_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
FS_TRUNCATE, FS_IOCTL_DEV = 1 << 14, 1 << 15
FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1, 2

notes: list[str] = []
done: list[str] = []


def note(text: str) -> None:
    notes.append(text)


def err(what: str) -> str:
    code = ctypes.get_errno()
    return f"{what}: {os.strerror(code)}"


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    if libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) != 0:
        raise OSError(err(f"mount {target}"))


def mountpoint(path: str, like: str) -> None:
    if os.path.isdir(like):
        os.makedirs(path, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.exists(path):
            open(path, "w").close()


def lock_flags(path: str) -> int:
    flags = os.statvfs(path).f_flag
    out = 0
    for st, ms in ((2, MS_NOSUID), (4, MS_NODEV), (8, MS_NOEXEC), (1024, MS_NOATIME), (2048, MS_NODIRATIME)):
        if flags & st:
            out |= ms
    if flags & 4096:
        out |= MS_RELATIME
    return out


def bind(source: str, root: str, writable: bool, target: str | None = None) -> None:
    target = root + (target or source)
    if os.path.islink(source):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.symlink(os.readlink(source), target)
        return
    mountpoint(target, source)
    mount(source, target, None, MS_BIND | MS_REC)
    if writable:
        return
    attr = struct.pack("QQQQ", MOUNT_ATTR_RDONLY, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr)
    rc = libc.syscall(SYS_MOUNT_SETATTR, -100, target.encode(), AT_RECURSIVE, buf, len(attr))
    if rc != 0:
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | lock_flags(source))


def build_root(cfg: dict[str, Any]) -> None:
    root = cfg["root"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    tmp = root + "/tmp"
    os.makedirs(tmp, exist_ok=True)
    mount("tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, f"size={cfg['tmp_bytes']},mode=1777")
    for path in cfg["read"]:
        if os.path.lexists(path) and os.path.realpath(path) != "/":
            try:
                bind(path, root, False)
            except OSError as exc:
                note(f"{path} not visible ({exc})")
    for path in cfg["write"]:
        bind(path, root, True)
    if cfg.get("here"):  # the bot's own directory, entered by the server before the user was dropped
        bind(".", root, False, cfg["here"])
    dev = root + "/dev"
    os.makedirs(dev, exist_ok=True)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
    for name in ("null", "zero", "full", "random", "urandom"):
        open(f"{dev}/{name}", "w").close()
        mount(f"/dev/{name}", f"{dev}/{name}", None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        os.symlink(target, f"{dev}/{name}")
    os.symlink("/proc/self/fd/2", f"{dev}/stderr")
    os.makedirs(dev + "/shm")
    mount(tmp, dev + "/shm", None, MS_BIND)
    os.makedirs(root + "/proc", exist_ok=True)
    try:
        mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        done.append("proc")
        for sub in ("sys", "sysrq-trigger"):  # kernel knobs stay read-only, whoever the bot maps to
            path = f"{root}/proc/{sub}"
            if os.path.exists(path):
                mount(path, path, None, MS_BIND | MS_REC)
                mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | lock_flags(path))
    except OSError as exc:
        note(f"no /proc ({exc})")
    os.chdir(root)
    pivot = SYS_PIVOT_ROOT.get(os.uname().machine, 155)
    if libc.syscall(pivot, b".", b".") != 0:
        raise OSError(err("pivot_root"))
    if libc.umount2(b".", MNT_DETACH) != 0:
        raise OSError(err("detach the old root"))
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    done.append("newroot")


def become_nobody() -> None:
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER) != 0:
        raise OSError(err("nested user namespace"))
    for name, text in (("setgroups", "deny"), ("uid_map", f"65534 {uid} 1"), ("gid_map", f"65534 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    done.append("nobody")


def drop_capabilities() -> None:
    """Fallback when a nested user namespace is refused: an empty capability set."""
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP; fails harmlessly past the last capability
    header = struct.pack("Ii", 0x20080522, 0)
    data = ctypes.create_string_buffer(24)
    if libc.capset(ctypes.create_string_buffer(header), data) != 0:
        raise OSError(err("capset"))
    done.append("nocaps")


def landlock(cfg: dict[str, Any]) -> None:
    abi = libc.syscall(SYS_LANDLOCK_CREATE, None, 0, 1)
    if abi < 1:
        raise OSError(err("Landlock"))
    fs_all = FS_ALL_ABI.get(abi, (1 << 16) - 1)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 and not cfg.get("network") else 0
    attr = struct.pack("QQQ", fs_all, net, SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if abi >= 6 else 0)
    buf = ctypes.create_string_buffer(attr[:size])
    ruleset = libc.syscall(SYS_LANDLOCK_CREATE, buf, size, 0)
    if ruleset < 0:
        raise OSError(err("Landlock ruleset"))
    try:
        read_file = FS_EXECUTE | FS_READ_FILE
        rw_file = FS_READ_FILE | FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)
        rules = [(p, FS_READ) for p in cfg["read"]] + [(p, fs_all) for p in cfg["write"]]
        if cfg.get("here"):
            rules.append((cfg["here"] if cfg["mode"] == "newroot" else ".", FS_READ))
        if cfg["mode"] == "newroot":
            rules += [("/", FS_READ_DIR), ("/tmp", fs_all), ("/proc", FS_READ_FILE | FS_READ_DIR | FS_WRITE_FILE)]
            rules += [("/dev", FS_READ)]
        rules += [(f"/dev/{n}", rw_file) for n in ("null", "zero", "full", "random", "urandom")]
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            if not os.path.isdir(path):
                access &= read_file | rw_file | (FS_IOCTL_DEV if abi >= 5 else 0)
            rule = ctypes.create_string_buffer(struct.pack("=Qi", access & fs_all, fd))
            rc = libc.syscall(SYS_LANDLOCK_ADD, ruleset, 1, rule, 0)
            os.close(fd)
            if rc != 0:
                raise OSError(err(f"Landlock rule for {path}"))
        if libc.syscall(SYS_LANDLOCK_RESTRICT, ruleset, 0) != 0:
            raise OSError(err("Landlock restrict"))
    finally:
        os.close(ruleset)
    done.append(f"landlock{abi}")
    if abi < 4 and not cfg.get("network"):
        note(f"Landlock ABI {abi}: no TCP rules")
    if abi < 6:
        note(f"Landlock ABI {abi}: abstract sockets and signals not scoped")


DENIED_SYSCALLS = {
    # memfd_create, memfd_secret: memory outside every limit; add_key, request_key, keyctl: the
    # user keyring, shared by every bot of the same user (a channel between bots);
    # perf_event_open: a side channel; userfaultfd, io_uring_setup: kernel attack surface
    "x86_64": (0xC000003E, (319, 447, 248, 249, 250, 298, 323, 425)),
    "aarch64": (0xC00000B7, (279, 447, 217, 218, 219, 241, 282, 425)),
}


def seccomp() -> None:
    arch = DENIED_SYSCALLS.get(os.uname().machine)
    if arch is None:
        raise OSError(f"no seccomp filter for {os.uname().machine}")
    audit, denied = arch
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
    n = len(denied)
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, audit), (ret, 0, 0, deny), (ld, 0, 0, 0), (jge, n, 0, 0x40000000)]
    prog += [(jeq, n - 1 - i, 0, nr) for i, nr in enumerate(denied[:-1])]  # jump to the deny below
    prog += [(jeq, 0, 1, denied[-1]), (ret, 0, 0, deny), (ret, 0, 0, allow)]
    filt = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *ins) for ins in prog))
    fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxP", len(prog), ctypes.addressof(filt)))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        raise OSError(err("seccomp"))
    done.append("seccomp")


def set_limits(cfg: dict[str, Any]) -> None:
    for name, value in cfg["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (value[0], value[1]))


def main() -> None:
    # the server writes it with repr() of plain data; eval without builtins is json.loads without
    # the 20 ms that importing json (and re) costs at every bot start
    cfg = eval(sys.argv[1], {"__builtins__": {}})
    argv = sys.argv[2:]
    if cfg["mode"] == "newroot":
        build_root(cfg)
    try:
        become_nobody()
    except OSError as exc:
        if cfg["mode"] == "newroot":
            note(f"runs as the namespace's root without capabilities ({exc})")
            drop_capabilities()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(err("no_new_privs"))
    try:
        landlock(cfg)
    except OSError as exc:
        note(f"no Landlock ({exc})")
    try:
        seccomp()
    except OSError as exc:
        note(f"no seccomp filter: memfd_create and keyrings allowed ({exc})")
    if cfg.get("probe"):
        print(repr({"done": done, "notes": notes}), flush=True)
        return
    for text in notes:
        if text not in cfg.get("known", ()):
            sys.stderr.write(f"[arena] sandbox: {text}\n")
    sys.stderr.flush()
    os.chdir(cfg["cwd"])
    set_limits(cfg)
    os.execve(argv[0], argv, cfg["env"])


if __name__ == "__main__":
    try:
        main()
    except OSError as exc:
        sys.stderr.write(f"[arena] sandbox: could not build the sandbox: {exc}\n")
        sys.exit(126)
