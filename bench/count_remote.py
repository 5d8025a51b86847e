"""Instructions per remote move, counted rather than timed (``bench_remote.py`` (2) on a host whose speed wanders).

The host this issue was measured on changes speed by up to 1.7x from one minute
to the next, and a round trip's repeats spread by a quarter, so a change of a
few percent in the server cannot be seen in time. Instructions can: this runs
the loops of ``split_remote.py`` (each in one process, client and server on one
event loop, as ``bench_remote.py`` (2)) under valgrind's callgrind, and counts
the instructions executed per round trip. Each loop runs twice, at
:data:`SHORT` and :data:`LONG` rounds; the difference of the two counts over
the difference of the rounds is the count of one more round trip, with the
connection, the Hello and the match's start and end cancelled out.

It prints, for each row (``--kinds``, ``split_remote.py``'s names; the first is
the ratios' base):

* ``all threads``: the process's instructions per round trip, every thread
  counted: the event loop's and gRPC's own (its event engine's pollers). gRPC's
  core does part of its work on whichever thread polls it, so how the count
  splits between the loop's thread and gRPC's moves from run to run by up to
  a tenth; their sum moves by a few percent. The ratio and ``+instr`` (what a
  row adds to the row above) are of this column.
* ``loop thread``: the event loop's thread alone (the main thread).
* ``ticks``: left out of both. The loop's stall monitor (``LoopLag``, a timer
  every 5 ms) ticks by the clock, and under valgrind a move takes some 25 to
  50 times as long (5.2 ms a round trip of the ``sdk`` row against 0.20 ms at
  full speed, on the host of the thirty-second pass), so it would tick that
  much more often per move than at full speed. Each tick is also one more turn
  of the event loop (a ``select``, its timers, its ready queue), which the
  tick's own function does not include: subtracting that function alone left
  the rest of the bias in, and it moved the ``sdk`` row by some 30,000
  instructions a round trip (docs/performance.md, thirty-first and
  thirty-second passes). So each counted process stretches its monitor's
  periods by ``--monitor-scale`` (default :data:`MONITOR_SCALE`, about the
  slowdown): it ticks about as often per move as it does at full speed, about
  once every 25 to 35 round trips, and what is left of its tick is
  subtracted. Only the compiled tick is recognised (pure Python: 0, and
  counted). ``--monitor-scale 1`` counts as the earlier passes did.

Each run has one BLAS thread (``OPENBLAS_NUM_THREADS=1``, as ``arena serve``
sets it). Otherwise numpy's idle worker thread, which polls by the clock, is
counted too, and it moved a row by several thousand instructions per round
trip either way from run to run.

With ``--repeats N`` each figure is the median of N runs.

With ``--cache-sim`` callgrind also simulates the caches and the branch
predictors (``--cache-sim=yes --branch-sim=yes``), and a second table gives,
per round trip of the loop's thread, the simulated misses: first-level
instruction and data cache (reads and writes), and mispredicted conditional
and indirect branches. (The last level's misses are left out: about none a
round trip, every row's working set fits in it.) This VM exposes no hardware counters
(``perf stat -e cycles`` is not supported), so the simulation is the only way
here to see whether a row's time grows faster than its instructions because
its code and data miss the caches more. It is a model (valgrind's default
cache geometry, a simple predictor), not this CPU, and it makes each run
slower still.

Then (``--functions``, default ``protocol``) the compiled move path's functions
(mypyc's ``CPyDef_`` entry points) of that row, with their inclusive
instructions per round trip (what they and everything they call execute).
These repeat to within about 2% from run to run (those that call into gRPC's
reads and writes, or look up dicts, vary the most): the figures to compare before and after a
change to the move path.

Counts are not times: an instruction of the interpreter's dispatch loop and
one that misses every cache count alike, and valgrind's timing distorts what
is timed (a timer fires about fifty times as often per move as it does at full
speed). But where time spreads by a quarter, counts repeat to a few percent,
and a change that removes work shows as such. ``docs/performance.md``
("Twenty-first pass") gives the counts against the times.

Needs valgrind (Debian's ``valgrind`` package). A row takes one to two
minutes (the two lengths run at once, one per core).

Run: ``.venv/bin/python bench/count_remote.py [--kinds bare,protocol,sdk] [--functions protocol] [--cache-sim]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from split_remote import KINDS

SHORT = 200
LONG = 1200
"""The two match lengths (rounds) whose difference is counted."""

TICK = "CPyDef_clock___LoopLag____tick"
"""The stall monitor's tick (compiled): timer-driven, so valgrind's slowness runs it more often per move."""

MONITOR_SCALE = 30.0
"""How much the counted process stretches its stall monitor's periods: about valgrind's slowdown of a round trip."""

MISSES = {
    "I1 miss": ("I1mr",),
    "D1 miss": ("D1mr", "D1mw"),
    "cond. mispred.": ("Bcm",),
    "indirect mispred.": ("Bim",),
}
"""``--cache-sim``'s columns: each the sum of these callgrind events (per round trip of the loop's thread)."""


def stretch_monitor(scale: float, loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Stretch the stall monitor (``LoopLag``) of ``loop`` (the running one) by ``scale``: its period, and its gaps.

    Under valgrind a round trip is some 25 to 50 times slower while the monitor
    ticks by the clock; stretched by about that much, it ticks about as often per
    round trip as at full speed (see the module's notes). Its judgements keep
    their proportions: a gap is a stall when it is as many periods long as before.
    """
    from arena_server.referee.clock import LoopLag

    lag = LoopLag.of(loop)
    lag.PERIOD *= scale
    lag.SLACK *= scale
    lag.LATE *= scale
    lag.RECENT *= scale


def serve_stretched(scale: float, argv: list[str]) -> int:
    """``arena`` with ``argv`` (``serve ...``), every event loop it makes with its monitor stretched by ``scale``.

    For a server counted in a process of its own (``count_loaded.py``): ``asyncio.run``
    takes its loop from the event-loop policy, which stretches each new loop's monitor
    before anything runs on it.
    """

    class Stretched(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self) -> asyncio.AbstractEventLoop:
            loop = super().new_event_loop()
            stretch_monitor(scale, loop)
            return loop

    asyncio.set_event_loop_policy(Stretched())
    from arena_server.cli import main

    return main(argv)


def child(kind: str, rounds: int, scale: float) -> None:
    """Run ``split_remote``'s ``kind`` loop for ``rounds`` round trips (under valgrind, in the parent's plan)."""
    import split_remote

    from arena_server.cli.common import settle_heap

    settle_heap()  # as arena serve does: no full collection walks the imports' objects in one run and not the other
    split_remote.ROUNDS = rounds
    split_remote.WINDOW = (10, rounds - 10)  # (split_remote's own timing window: unused here, but it must be reached)

    async def counted() -> None:
        stretch_monitor(scale)
        await KINDS[kind]()

    asyncio.run(counted())


def counted_env() -> dict[str, str]:
    """The environment of a process counted under callgrind (and of whatever it is measured against)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    # One BLAS thread, as arena serve sets it: numpy's worker thread polls by the clock while idle, so under
    # valgrind it added -8,000 to +6,000 instructions per round trip from run to run.
    env["OPENBLAS_NUM_THREADS"] = "1"
    env["PYTHONHASHSEED"] = "0"  # the same dict and set layouts in every run, so their start-up work cancels out
    return env


def _run(kind: str, rounds: int, repeat: int, out: Path, scale: float, cache_sim: bool) -> Path:
    """``kind`` for ``rounds`` under callgrind, one output file per thread; their common prefix."""
    env = counted_env()
    base = out / f"cg.{kind}.{rounds}.{repeat}"
    simulate = ("--cache-sim=yes", "--branch-sim=yes") if cache_sim else ()
    cmd = [
        *("valgrind", "--tool=callgrind", "--separate-threads=yes", *simulate, f"--callgrind-out-file={base}"),
        *(sys.executable, __file__, "--child", kind, str(rounds), str(scale)),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        raise SystemExit(f"count_remote: {kind} at {rounds} rounds failed under valgrind:\n{tail}")
    return base


def _totals(base: Path) -> dict[int, int]:
    """Instructions per thread (1: the main thread, where the event loop runs) of one run."""
    totals = {int(f.name.rsplit("-", 1)[1]): _events(f)["Ir"] for f in base.parent.glob(base.name + "-*")}
    if 1 not in totals:
        raise SystemExit(f"count_remote: callgrind wrote no count for the main thread ({base}-01)")
    return totals


def _events(path: Path) -> dict[str, int]:
    """Every event callgrind counted in one thread's file (``Ir``, and with ``--cache-sim`` the misses), by name."""
    names: list[str] = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("events:"):
            names = line.split()[1:]
        elif line.startswith(("summary:", "totals:")):
            return dict(zip(names, map(int, line.split()[1:]), strict=False))
    raise SystemExit(f"count_remote: callgrind wrote no totals in {path}")


def _inclusive(path: Path) -> dict[str, int]:
    """Inclusive instructions of each compiled move-path function (mypyc's ``CPyDef_``) in one thread's file."""
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", "--auto=no", "--show=Ir", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: dict[str, int] = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+\S*?:(CPyDef_\w+)", line)
        if m:
            name = m.group(2)
            found[name] = found.get(name, 0) + int(m.group(1).replace(",", ""))
    return found


def require_valgrind(who: str) -> None:
    """Exit, saying what to install, when valgrind's tools are missing."""
    missing = [tool for tool in ("valgrind", "callgrind_annotate") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(
            f"{who}: {' and '.join(missing)} not found; install valgrind (Debian: apt-get install valgrind)"
        )


@contextlib.contextmanager
def callgrind_dir(keep: str | None) -> Iterator[Path]:
    """Where callgrind's files go: ``keep`` (made if missing, and kept), or a temporary directory."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(keep or tmp)
        out.mkdir(parents=True, exist_ok=True)
        yield out


def build_state() -> str | None:
    """Why the processes started now would run the move path as pure Python (None: compiled), checked afresh.

    ``arena_client._native.status`` is decided once a process; a counted process
    started later decides again, and falls back to the sources if one was edited
    since ``make native``.
    """
    from arena_client._native import check

    return check()


@contextlib.contextmanager
def same_build(who: str) -> Iterator[None]:
    """Exit with an error if the move path's build changes (a source edited, a rebuild) while counting.

    A run that straddles the change counts some processes compiled and the rest
    pure Python, and its rows would compare the two. (It compares the start with
    the end: an edit undone before the end goes unseen.)
    """
    before = build_state()
    yield
    after = build_state()
    if after != before:

        def said(why: str | None) -> str:
            return "compiled" if why is None else f"pure Python ({why})"

        raise SystemExit(
            f"{who}: the move path's build changed during the run (at the start {said(before)}, at the end "
            f"{said(after)}): the counts mix the two; leave the sources alone while counting, run `make native` "
            "if one changed, and count again"
        )


def _name(symbol: str) -> str:
    """A readable name for a mypyc entry point (``CPyDef_seats___remote___RemoteSeat___on_action``)."""
    name = symbol.removeprefix("CPyDef_")
    name = re.sub(r"_gen_____mypyc_generator_helper__$", " (a step of the coroutine)", name)
    return name.replace("___", ".")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--kinds", default="bare,protocol,sdk", help=f"rows, from {', '.join(KINDS)} (the first is the base)"
    )
    parser.add_argument(
        "--functions", default="protocol", help="the row whose compiled functions are listed ('' for none)"
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs of each row; each figure is their median")
    parser.add_argument("--top", type=int, default=25, help="how many functions to list (default 25)")
    parser.add_argument(
        "--keep", metavar="DIR", help="write callgrind's files to DIR (kept) instead of a temporary one"
    )
    parser.add_argument(
        "--monitor-scale",
        type=float,
        default=MONITOR_SCALE,
        help=f"stretch the stall monitor's periods by this much under valgrind (default {MONITOR_SCALE:g}; "
        "1 counts as the passes before the thirty-second did)",
    )
    parser.add_argument(
        "--cache-sim", action="store_true", help="also simulate the caches and branch predictors, and print misses"
    )
    parser.add_argument("--child", nargs=3, metavar=("KIND", "ROUNDS", "SCALE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), float(args.child[2]))
        return
    if args.monitor_scale <= 0:
        parser.error(f"--monitor-scale {args.monitor_scale:g}: must be more than 0 (1 leaves the monitor as it is)")
    kinds = args.kinds.split(",")
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; choose from {', '.join(KINDS)}")
    if args.functions and args.functions not in kinds:
        parser.error(f"--functions {args.functions}: not one of the rows ({args.kinds})")
    require_valgrind("count_remote")
    with callgrind_dir(args.keep) as out:
        runs = [(kind, rounds, r) for r in range(args.repeats) for kind in kinds for rounds in (SHORT, LONG)]
        with same_build("count_remote"), ThreadPoolExecutor(max_workers=max(len(os.sched_getaffinity(0)), 1)) as pool:

            def run(plan: tuple[str, int, int]) -> Path:
                kind, rounds, repeat = plan
                return _run(kind, rounds, repeat, out, args.monitor_scale, args.cache_sim)

            bases = dict(zip(runs, pool.map(run, runs), strict=True))
        n = LONG - SHORT
        rows: dict[str, dict[str, float]] = {}
        functions: dict[str, dict[str, float]] = {}
        misses: dict[str, dict[str, float]] = {}
        for kind in kinds:
            samples: list[dict[str, float]] = []
            missed: list[dict[str, float]] = []
            for r in range(args.repeats):
                if args.cache_sim:
                    short_e = _events(Path(f"{bases[kind, SHORT, r]}-01"))
                    long_e = _events(Path(f"{bases[kind, LONG, r]}-01"))
                    missed.append(
                        {
                            column: sum(long_e.get(e, 0) - short_e.get(e, 0) for e in events) / n
                            for column, events in MISSES.items()
                        }
                    )
                short, long_ = _totals(bases[kind, SHORT, r]), _totals(bases[kind, LONG, r])
                short_f = _inclusive(Path(f"{bases[kind, SHORT, r]}-01"))
                long_f = _inclusive(Path(f"{bases[kind, LONG, r]}-01"))
                per = {f: (long_f[f] - short_f.get(f, 0)) / n for f in long_f}
                if r == 0:
                    functions[kind] = per
                ticks = per.get(TICK, 0.0)
                loop = (long_[1] - short[1]) / n - ticks
                every = (sum(long_.values()) - sum(short.values())) / n - ticks
                samples.append({"all": every, "loop": loop, "ticks": ticks})
            rows[kind] = {key: statistics.median(s[key] for s in samples) for key in ("all", "loop", "ticks")}
            if missed:
                misses[kind] = {column: statistics.median(m[column] for m in missed) for column in MISSES}
        from arena_client._native import status as native_status

        print(
            f"instructions per round trip (callgrind; {LONG} rounds less {SHORT}; median of {args.repeats}; "
            f"stall monitor stretched {args.monitor_scale:g}x), Python {sys.version.split()[0]}, "
            f"move path: {native_status()}"
        )
        print(f"{'':10}{'all threads':>13}{'ratio':>8}{'+instr':>10}{'loop thread':>13}{'ticks':>9}")
        base = rows[kinds[0]]["all"]
        above: float | None = None
        for kind in kinds:
            row = rows[kind]
            plus = "" if above is None else f"{row['all'] - above:+10,.0f}"
            ratio = row["all"] / base
            print(f"{kind:10}{row['all']:13,.0f}{ratio:7.2f}x{plus:>10}{row['loop']:13,.0f}{row['ticks']:9,.0f}")
            above = row["all"]
        print("ticks: the stall monitor's, left out of both counts (see the module's notes)")
        if misses:
            print("\nsimulated misses per round trip, the loop's thread (callgrind --cache-sim, --branch-sim)")
            print(f"{'':10}" + "".join(f"{column:>19}" for column in MISSES))
            for kind in kinds:
                cells = "".join(
                    f"{misses[kind][column]:11,.0f} {misses[kind][column] / (misses[kinds[0]][column] or 1):5.2f}x  "
                    for column in MISSES
                )
                print(f"{kind:10}{cells}")
        if args.functions:
            kind = args.functions
            print(f"\n{kind}: the compiled move path's functions, inclusive instructions per round trip")
            shown = sorted(functions[kind].items(), key=lambda kv: -kv[1])[: args.top]
            if not shown:
                print("  (none: the move path is not compiled; see docs/development.md, 'The compiled move path')")
            for symbol, count in shown:
                print(f"{count:12,.0f}  {_name(symbol)}")


if __name__ == "__main__":
    main()
