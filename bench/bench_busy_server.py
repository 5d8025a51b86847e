"""A remote bot's move on a server whose ladder is running (the default), against an idle server.

``bench_remote.py`` times a move on a server with ``--no-ladder``. ``make run``
serves with the ladder on: the hosted bots play each other on the same event
loop, and their work can hold a remote bot's move up. This runs ``arena serve``
twice per repeat, interleaved, once with ``--no-ladder`` (the baseline) and
once with its default ladder, and times every move of an SDK bot (always
scissors, the default ``threaded="auto"``) playing the hosted ``rock``: the
time from one ``act`` to the next, which is one round trip through the
server. It prints the percentiles of both and their ratios. The tail is the
measure: the median is the same round trip either way.

    python bench/bench_busy_server.py [--rounds 20000] [--repeats 2] [--warm 5] [--serve-args "..."]

``--warm`` seconds pass between the server's start and the bot's first move,
so that the ladder is under way. ``--serve-args`` go to both servers, e.g.
``--switch-interval 0.005`` for Python's own GIL switch interval.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

from remote_clients import Scissors

from arena_client.remote import Client

PERCENTILES = (0.5, 0.9, 0.99, 0.999)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(ladder: bool, extra: list[str]) -> Iterator[int]:
    """``arena serve`` with a scratch database, its ladder on or off; yields its port."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "arena_server.cli", "serve", "--no-http", "--host", "127.0.0.1"),
                *("--port", str(port), "--db", os.path.join(tmp, "busy.db"), "--data-dir", tmp),
                *([] if ladder else ["--no-ladder"]),
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if "serving on" not in line:
                raise SystemExit(f"bench_busy_server: the server did not start: {line!r}")
            yield port
        finally:
            proc.terminate()
            proc.communicate(timeout=60)


async def waits(port: int, rounds: int) -> list[float]:
    """One match of ``rounds`` against the hosted ``rock``: the time between consecutive moves, sorted."""
    bot = Scissors()
    await Client(bot, f"127.0.0.1:{port}", name="busy-bench").play(opponent="rock", params={"rounds": rounds})
    return sorted(b - a for a, b in zip(bot.stamps, bot.stamps[1:], strict=False))


def percentile(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(p * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--warm", type=float, default=5.0, help="seconds between the start and the first move")
    parser.add_argument("--serve-args", default="", help="extra `arena serve` arguments for both servers")
    args = parser.parse_args()
    extra = shlex.split(args.serve_args)
    found: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeats):
        for ladder in (False, True):
            with server(ladder, extra) as port:
                time.sleep(args.warm)
                found[ladder].extend(asyncio.run(waits(port, args.rounds)))
    print(
        f"one SDK bot against hosted rock, {args.rounds} rounds, {args.repeats} interleaved repeats"
        f"{' (serve ' + args.serve_args + ')' if args.serve_args else ''}; time from one move to the next:"
    )
    head = "".join(f"{'p' + format(100 * p, 'g'):>10}" for p in PERCENTILES)
    print(f"{'':26}{head}{'worst':>10}{'over 50 ms':>12}")
    rows = {}
    for ladder in (False, True):
        values = sorted(found[ladder])
        cells = [percentile(values, p) for p in PERCENTILES] + [values[-1]]
        rows[ladder] = cells
        label = "ladder running (default)" if ladder else "--no-ladder"
        print(f"{label:26}" + "".join(f"{1e3 * c:8.2f}ms" for c in cells) + f"{sum(v > 0.05 for v in values):12d}")
    print(f"{'ratio':26}" + "".join(f"{b / a:9.2f}x" for a, b in zip(rows[False], rows[True], strict=True)))


if __name__ == "__main__":
    main()
