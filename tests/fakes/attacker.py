"""A bot that tries to break out of its sandbox, reports each attempt on stderr, then plays.

Usage: attacker.py ATTACK... where each ATTACK is ``kind:argument``:

* ``read:PATH`` - read a file; ``list:PATH`` - list a directory; ``write:PATH`` - create a file
  (``~`` is its HOME);
* ``tcp:HOST:PORT``, ``udp:HOST:PORT``, ``unix:PATH``, ``abstract:NAME`` - connect / send;
* ``mem:ROUTE`` - take 2 GiB by ROUTE (``heap``, ``shared``, ``devzero``, ``devshm``,
  ``memfd``, ``sysv``) and touch every page;
* ``keyring:`` - reach the user keyring;
* ``leave:NAME`` - leave files named NAME in /tmp, /dev/shm and $HOME;
* ``procs:`` - list the processes it can see.

Each attempt writes one line ``ATTACK <kind>:<argument> -> OK <detail>`` (it worked) or
``-> BLOCKED <error>``. Standard library only: it runs as an unprivileged user.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import mmap
import os
import signal
import socket
import sys

from _stdio import play  # type: ignore[import-not-found]

GIB2 = 2 << 30
PAGE = mmap.PAGESIZE


def touch(buf: mmap.mmap) -> None:
    for offset in range(0, len(buf), PAGE):
        buf[offset] = 1


def mem(route: str) -> str:
    if route == "heap":
        chunks = [bytearray(64 << 20) for _ in range(GIB2 // (64 << 20))]
        return f"{len(chunks)} chunks"
    if route == "shared":
        buf = mmap.mmap(-1, GIB2, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        touch(buf)
        return "shared anonymous mapping touched"
    if route == "devzero":
        with open("/dev/zero", "r+b") as f:
            buf = mmap.mmap(f.fileno(), GIB2, mmap.MAP_SHARED)
        touch(buf)
        return "shared /dev/zero mapping touched"
    if route in ("devshm", "memfd"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        written, n = 0, 0
        chunk = b"x" * (16 << 20)
        fds = []
        while written < GIB2:
            if route == "memfd":
                fd = os.memfd_create(f"hog{n}")
            else:
                fd = os.open(f"/dev/shm/arena-hog-{os.getpid()}-{n}", os.O_CREAT | os.O_WRONLY, 0o600)
            fds.append(fd)
            n += 1
            try:
                for _ in range(8):
                    written += os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.EFBIG:  # over the per-file limit: go on with another file
                    raise
        return f"{written >> 20} MiB in {n} files"
    if route == "sysv":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        shmid = libc.shmget(0, ctypes.c_size_t(GIB2), 0o600 | 0o1000)
        if shmid < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        addr = libc.shmat(shmid, None, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        ctypes.memset(addr, 1, GIB2)
        return "SysV segment attached and filled"
    raise ValueError(route)


def attack(kind: str, arg: str) -> str:
    if kind == "read":
        with open(arg, "rb") as f:
            data = f.read()
        return f"sha256={hashlib.sha256(data).hexdigest()} len={len(data)}"
    if kind == "list":
        return ",".join(sorted(os.listdir(arg)))
    if kind == "write":
        with open(os.path.expanduser(arg), "w") as f:
            f.write("escaped")
        return "written"
    if kind in ("tcp", "udp"):
        host, port = arg.rsplit(":", 1)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM) as s:
            s.settimeout(2)
            if kind == "tcp":
                s.connect((host, int(port)))
            else:
                s.sendto(b"escaped", (host, int(port)))
        return "connected" if kind == "tcp" else "sent"
    if kind in ("unix", "abstract"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(arg if kind == "unix" else "\0" + arg)
            s.sendall(b"escaped")
        return "connected"
    if kind == "mem":
        return mem(arg)
    if kind == "keyring":  # the user keyring: shared by every process of a user, so a channel between bots
        libc = ctypes.CDLL(None, use_errno=True)
        keyctl = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
        found = libc.syscall(keyctl, 0, -4, 1)  # KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, create
        if found < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return f"user keyring {found}"
    if kind == "leave":
        left = []
        for folder in ("/tmp", "/dev/shm", os.environ.get("HOME", "/tmp")):
            try:
                with open(os.path.join(folder, arg), "w") as f:
                    f.write("left behind")
                left.append(folder)
            except OSError:
                pass
        return "in " + ",".join(left)
    if kind == "procs":
        seen = []
        for entry in sorted(os.listdir("/proc")):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        text = f.read().replace(b"\0", b" ").decode(errors="replace")[:80]
                    seen.append(f"{entry}={text!r}")
                except OSError:
                    seen.append(f"{entry}=?")
        return " ".join(seen)
    raise ValueError(kind)


def main() -> None:
    for item in sys.argv[1:]:
        kind, _, arg = item.partition(":")
        try:
            outcome = "OK " + attack(kind, arg)
        except (OSError, MemoryError, ValueError) as exc:
            outcome = f"BLOCKED {type(exc).__name__}: {exc}"
        sys.stderr.write(f"ATTACK {kind}:{arg} -> {outcome}\n")
        sys.stderr.flush()
    play()


if __name__ == "__main__":
    main()
