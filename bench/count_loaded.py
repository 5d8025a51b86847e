"""Instructions per remote move under ``bench_remote.py`` (3)'s load, counted: server and clients apart.

Part (3) of ``bench_remote.py`` times 64 concurrent matches: ``arena serve`` in
one process, 64 SDK clients in another, against the bare echo server and 64
ping-pong streams alike. On this issue's hosts its ratio moved from 0.54x to
0.88x with the same code within an hour, so a change of a few percent on one
side cannot be seen in it. This counts the same load in instructions:

* ``server``: the server process (``arena serve`` or the echo server) runs
  under valgrind's callgrind, and the clients process at full speed;
* ``clients``: the clients process runs under callgrind, and the server at
  full speed.

Each is run at :data:`SHORT` and :data:`LONG` rounds a match (every match of
the 64 with that many), and the difference of the two counts over the
difference of the round trips is the count of one more round trip: the
processes' start, their connections, Hellos and the matches' starts and ends
cancel out. Every thread of the process is counted (``--separate-threads``),
as gRPC's core works on its own threads too.

The server's stall monitor (``LoopLag``'s tick every 5 ms, by the clock)
would run some 25 to 50 times as often per move under valgrind as at full
speed, each tick with a turn of the event loop. As in ``count_remote.py``, the
counted server stretches its monitor by ``--monitor-scale`` (default that
script's ``MONITOR_SCALE``; 1 counts as the passes before the thirty-second
did), and what is left of the tick's own count is subtracted.

What the count does not show: under valgrind the counted side is some fifty
times slower than the other, so it finds more work waiting at each event-loop
iteration than it would at full speed, and its loop turns less often per move.
Both servers (and both clients processes) are counted in that same state, so
the ratios compare like with like, but a count is not the process's own at
full speed. Counts are not times either (``count_remote.py`` says why); what
they give is a figure that repeats to a few percent where times do not.

Each process has one BLAS thread and a fixed hash seed. With two or more
CPUs, the counted process runs on CPU 1 and the other on CPU 0.

Needs valgrind (Debian's ``valgrind`` package). A run takes about ten minutes.

Run: ``.venv/bin/python bench/count_loaded.py [--sides server,clients]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from bench_remote import CLIENTS, ECHO_SERVER, free_port, pinned
from count_remote import MONITOR_SCALE, TICK, _inclusive, callgrind_dir, counted_env, require_valgrind, same_build

MATCHES = 64
"""Concurrent matches (streams), as ``bench_remote.py`` (3)."""
SHORT = 50
LONG = 250
"""The two match lengths (rounds) whose difference is counted."""
KINDS = ("bare", "arena")
SIDES = ("server", "clients")


def _on(cpu: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` keeping a process on ``cpu`` (None with a single CPU)."""
    return pinned(cpu if len(os.sched_getaffinity(0)) >= 2 else None)


def _callgrind(out: Path | None) -> list[str]:
    """The valgrind prefix of a counted command (nothing for one at full speed)."""
    if out is None:
        return []
    return [
        *("valgrind", "--tool=callgrind", "--separate-threads=yes"),
        *(f"--callgrind-out-file={out}", f"--log-file={out}.log"),
    ]


@contextlib.contextmanager
def _server(kind: str, out: Path | None, tmp: Path, scale: float = 1.0) -> Iterator[int]:
    """The ``kind`` server (counted into ``out`` if given), running until the block ends; yields its port.

    Arena's stall monitor is stretched by ``scale`` (``count_remote.serve_stretched``).
    """
    cpu = 1 if out is not None else 0
    if kind == "arena":
        port = free_port()
        serve = "import sys, count_remote; sys.exit(count_remote.serve_stretched(float(sys.argv[1]), sys.argv[2:]))"
        cmd = [
            *(sys.executable, "-c", serve, str(scale), "serve", "--no-http", "--host", "127.0.0.1"),
            *("--port", str(port), "--no-ladder", "--db", str(tmp / f"count-{port}.db")),
        ]
        stdin = subprocess.DEVNULL
    else:
        cmd = [sys.executable, "-c", ECHO_SERVER, "batch"]
        stdin = subprocess.PIPE
    server = subprocess.Popen(
        [*_callgrind(out), *cmd],
        env=counted_env(),
        preexec_fn=_on(cpu),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        if kind == "arena":
            if "serving on" not in first:
                raise SystemExit(f"count_loaded: arena serve did not start (it printed {first!r})")
        else:
            port = int(first)
        yield port
    finally:
        if kind == "arena":
            server.terminate()  # arena serve stops cleanly on SIGTERM, and valgrind then writes its files
        else:
            assert server.stdin is not None
            server.stdin.close()  # the echo server stops when its stdin closes
        server.wait(timeout=900)


def _clients(kind: str, port: int, rounds: int, out: Path | None) -> None:
    """``MATCHES`` concurrent ``kind`` clients (``remote_clients.py``) of ``rounds`` round trips each."""
    done = subprocess.run(
        [*_callgrind(out), sys.executable, CLIENTS, kind, str(port), str(MATCHES), str(rounds)],
        env=counted_env(),
        preexec_fn=_on(1 if out is not None else 0),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        raise SystemExit(f"count_loaded: the {kind} clients ({rounds} rounds) failed:\n{tail}")


def _collected(out: Path) -> int:
    """Instructions valgrind counted in the process, every thread (from its log)."""
    m = re.search(r"Collected\s*:\s*([\d,]+)", Path(f"{out}.log").read_text(errors="replace"))
    if m is None:
        raise SystemExit(f"count_loaded: valgrind's log {out}.log has no count (did the process end cleanly?)")
    return int(m.group(1).replace(",", ""))


def _ticks(out: Path) -> int:
    """The stall monitor's inclusive instructions in the main thread (0 where it does not run)."""
    main_thread = Path(f"{out}-01")
    return _inclusive(main_thread).get(TICK, 0) if main_thread.exists() else 0


def count(kind: str, side: str, tmp: Path, scale: float) -> float:
    """Instructions per round trip of ``side`` under ``kind``'s load, less the (stretched) stall monitor's."""
    totals = {}
    for rounds in (SHORT, LONG):
        out = tmp / f"cg.{kind}.{side}.{rounds}"
        if side == "server":
            with _server(kind, out, tmp, scale) as port:
                _clients(kind, port, rounds, None)
        else:
            with _server(kind, None, tmp) as port:
                _clients(kind, port, rounds, out)
        totals[rounds] = _collected(out) - _ticks(out)
    return (totals[LONG] - totals[SHORT]) / (MATCHES * (LONG - SHORT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", default=",".join(SIDES), help="server, clients or both (default both)")
    parser.add_argument("--keep", metavar="DIR", help="keep callgrind's files in DIR (default: a temporary one)")
    parser.add_argument(
        "--monitor-scale",
        type=float,
        default=MONITOR_SCALE,
        help=f"stretch the counted server's stall monitor by this much (default {MONITOR_SCALE:g}; 1: as before)",
    )
    args = parser.parse_args()
    if args.monitor_scale <= 0:
        parser.error(f"--monitor-scale {args.monitor_scale:g}: must be more than 0 (1 leaves the monitor as it is)")
    sides = args.sides.split(",")
    unknown = [s for s in sides if s not in SIDES]
    if unknown:
        parser.error(f"--sides: unknown {', '.join(unknown)}; choose from {', '.join(SIDES)}")
    require_valgrind("count_loaded")
    with callgrind_dir(args.keep) as tmp, same_build("count_loaded"):
        counts = {(kind, side): count(kind, side, tmp, args.monitor_scale) for side in sides for kind in KINDS}
    from arena_client._native import status as native_status

    print(
        f"instructions per round trip under load ({MATCHES} concurrent matches; callgrind, {LONG} rounds a match "
        f"less {SHORT}; every thread, less the stall monitor, stretched {args.monitor_scale:g}x), "
        f"Python {sys.version.split()[0]}, "
        f"move path: {native_status()}"
    )
    print(f"{'':8}" + "".join(f"{side:>12}{'ratio':>8}" for side in sides))
    for kind in KINDS:
        cells = "".join(f"{counts[kind, s]:12,.0f}{counts[kind, s] / counts['bare', s]:7.2f}x" for s in sides)
        print(f"{kind:8}{cells}")


if __name__ == "__main__":
    main()
