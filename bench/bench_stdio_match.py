"""A whole stdio match through the referee: µs per move of ``proto_bot.c`` against hosted rock.

``bench_stdio.py`` times the seat alone against bare pipes; this times what a match costs per
move with the referee around it (the Turn built and redacted, the answer judged and logged, the
hosted seat asked), pinned to one CPU, the median of five 3000-round matches after one to warm
up. Compare two versions of the code by running it on each, back to back (there is no bare
baseline for a whole match).

Run: ``.venv/bin/python bench/bench_stdio_match.py [--cpu 1]`` (needs gcc).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from arena_bots.simple import AlwaysRockBot
from arena_client import SeatInfo, TimeControl
from arena_games import load_game
from arena_server.referee.loop import play_match
from arena_server.seats.framing import Framing
from arena_server.seats.in_process import InProcessSeat
from arena_server.seats.process import BotProgram
from arena_server.seats.sandbox import Limits
from arena_server.seats.subprocess_seat import SubprocessSeat

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 3000
MATCHES = 5


async def one_match(bot: str) -> float:
    """Seconds per move of one match."""
    program = BotProgram([bot], Framing.PROTO, limits=Limits(run_as=None))
    seat = SubprocessSeat(program, SeatInfo(0, "proto-bot-c", 1, "subprocess"))
    try:
        game = load_game("rps", rounds=ROUNDS)
        start = time.perf_counter()
        record = await play_match(game, [seat, InProcessSeat(AlwaysRockBot(), SeatInfo(1, "rock"))], TimeControl())
        elapsed = time.perf_counter() - start
    finally:
        await seat.close()
    assert record.termination.name == "NORMAL", record.reason
    return elapsed / ROUNDS


async def measure(bot: str) -> list[float]:
    await one_match(bot)  # warm-up
    return [await one_match(bot) for _ in range(MATCHES)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", type=int, default=1, help="the CPU to run on (with the bot)")
    args = parser.parse_args()
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise SystemExit("bench_stdio_match.py needs gcc (or cc) to build bench/stdio_c/proto_bot.c")
    os.sched_setaffinity(0, {args.cpu})
    with tempfile.TemporaryDirectory() as tmp:
        bot = str(Path(tmp) / "proto_bot")
        subprocess.run([gcc, "-O2", "-o", bot, str(ROOT / "bench" / "stdio_c" / "proto_bot.c")], check=True)
        per_move = asyncio.run(measure(bot))
    runs = " ".join(f"{t * 1e6:.1f}" for t in per_move)
    print(f"stdio match, proto_bot.c vs hosted rock, {ROUNDS} rounds, pinned to CPU {args.cpu}: {runs} us/move")
    print(f"median {statistics.median(per_move) * 1e6:.2f} us/move")


if __name__ == "__main__":
    main()
