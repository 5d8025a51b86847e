"""Per-move round trip of a subprocess bot over stdio, against a bare pipe ping-pong.

Three measurements in the same run, all between two Python processes on pipes:

* **bare**: the parent writes 8 bytes, the child echoes them back (``os.read``/``os.write``),
  the least a round trip through two pipes and two context switches can cost;
* **proto**: ``SubprocessSeat.ask`` with length-delimited protobuf framing: the seat
  builds and encodes a real Turn, a Python bot using the protobuf library decodes it and
  answers an Action, the seat decodes that and resolves the answer;
* **json**: the same with JSON-lines framing (``json_format`` on the server side, the
  ``json`` module in the bot).

Run: ``.venv/bin/python bench/bench_stdio.py [--moves 5000]``. Target: proto <= 1.3x bare.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from arena_client import MatchInfo, SeatInfo, TimeControl, Turn
from arena_games import load_game
from arena_server.sandbox import Limits
from arena_server.stdio import Framing
from arena_server.subprocess_seat import BotProgram, SubprocessSeat

ROOT = Path(__file__).resolve().parents[1]

ECHO = """
import os
while True:
    data = os.read(0, 8)
    if not data:
        break
    os.write(1, data)
"""

PROTO_BOT = """
import sys
from arena.v1 import bot_session_pb2 as bs
from google.protobuf.internal.decoder import _DecodeVarint32
from google.protobuf.internal.encoder import _VarintBytes

out = sys.stdout.buffer
stdin = sys.stdin.buffer

def send(msg):
    body = msg.SerializeToString()
    out.write(_VarintBytes(len(body)) + body)
    out.flush()

send(bs.BotMessage(hello=bs.Hello(protocol_version="arena.v1", games=["rps"])))
while True:
    head = stdin.read(1)
    if not head:
        break
    while head[-1] & 0x80:
        head += stdin.read(1)
    size, _ = _DecodeVarint32(head, 0)
    msg = bs.ServerMessage.FromString(stdin.read(size))
    if msg.WhichOneof("kind") == "turn":
        t = msg.turn
        send(bs.BotMessage(action=bs.Action(match_id=t.match_id, turn_id=t.turn_id, action=t.legal_actions[0])))
"""

JSON_BOT = """
import json, sys
print(json.dumps({"hello": {"protocolVersion": "arena.v1", "games": ["rps"]}}), flush=True)
for line in sys.stdin:
    if line.startswith('{"turn"'):
        t = json.loads(line)["turn"]
        a = {"matchId": t["matchId"], "turnId": t["turnId"], "action": t["legalActions"][0]}
        sys.stdout.write(json.dumps({"action": a}) + "\\n")
        sys.stdout.flush()
"""


def bare_round_trips(moves: int) -> list[float]:
    child = subprocess.Popen([sys.executable, "-c", ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    fd_in, fd_out = child.stdin.fileno(), child.stdout.fileno()
    times = []
    try:
        for _ in range(moves):
            start = time.perf_counter()
            os.write(fd_in, b"ping1234")
            got = b""
            while len(got) < 8:
                got += os.read(fd_out, 8 - len(got))
            times.append(time.perf_counter() - start)
    finally:
        child.stdin.close()
        child.wait()
    return times


async def asyncio_round_trips(moves: int) -> list[float]:
    """The bare ping-pong again, with the parent on asyncio pipes (the seat's transport) and no protocol."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", ECHO, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None
    times = []
    try:
        for _ in range(moves):
            start = time.perf_counter()
            child.stdin.write(b"ping1234")
            await child.stdout.readexactly(8)
            times.append(time.perf_counter() - start)
    finally:
        child.stdin.close()
        await child.wait()
    return times


async def seat_round_trips(framing: Framing, moves: int, script: Path) -> list[float]:
    program = BotProgram(
        [sys.executable, str(script)],
        framing,
        env={"PYTHONPATH": str(ROOT / "proto")},
        limits=Limits(run_as=None),  # the venv interpreter is not readable by nobody on every machine
    )
    seat = SubprocessSeat(program, SeatInfo(0, "bench", 1, "subprocess"))
    game = load_game("rps", rounds=moves)
    tc = TimeControl()
    info = MatchInfo("bench", "rps", dict(game.params), 0, (seat.info,), tc, "")
    failure = await seat.start(info)
    assert failure is None, failure
    state = game.new_initial_state()
    obs = state.observation(0)
    legal = state.legal_actions(0)
    times = []
    try:
        for turn_id in range(1, moves + 1):
            turn = Turn("bench", turn_id, 0, obs, legal, timedelta(seconds=1), timedelta(seconds=10))
            start = time.perf_counter()
            answer = await seat.ask(turn, (), 5.0)
            times.append(time.perf_counter() - start)
            assert answer.failure is None, answer.reason
    finally:
        await seat.close()
    return times


def describe(name: str, times: list[float], base: float | None) -> str:
    med = statistics.median(times)
    p90 = statistics.quantiles(times, n=10)[-1]
    ratio = f"{med / base:5.2f}x bare" if base else "  baseline"
    return f"{name:<8} median {med * 1e6:8.1f} us   p90 {p90 * 1e6:8.1f} us   {ratio}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proto_bot = Path(tmp) / "proto_bot.py"
        proto_bot.write_text(PROTO_BOT)
        json_bot = Path(tmp) / "json_bot.py"
        json_bot.write_text(JSON_BOT)
        warm = max(args.moves // 10, 50)
        bare = bare_round_trips(args.moves + warm)[warm:]
        on_asyncio = (await asyncio_round_trips(args.moves + warm))[warm:]
        proto = (await seat_round_trips(Framing.PROTO, args.moves + warm, proto_bot))[warm:]
        as_json = (await seat_round_trips(Framing.JSON, args.moves + warm, json_bot))[warm:]
        bare2 = bare_round_trips(args.moves + warm)[warm:]  # again, to see the machine's drift
    base = statistics.median(bare + bare2)
    print(f"per-move round trip, {args.moves} moves each, Python {sys.version.split()[0]}")
    base_async = statistics.median(on_asyncio)
    print(describe("bare", bare + bare2, None))
    print(describe("asyncio", on_asyncio, base))
    print(describe("proto", proto, base))
    print(describe("json", as_json, base))
    print(
        f"proto/bare = {statistics.median(proto) / base:.2f} (target <= 1.3); "
        f"proto/asyncio-bare = {statistics.median(proto) / base_async:.2f}; "
        f"json/asyncio-bare = {statistics.median(as_json) / base_async:.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
