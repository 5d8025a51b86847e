"""Ladder matches between remote bots on different workers: moved by a Redirect, against relayed.

A real ``arena serve --workers 2 --host 0.0.0.0`` runs its ladder, one match at a time, over ``BOTS``
registered remote SDK bots in this process (answering at once, inline), each connecting from its own
address (127.0.0.N), so the kernel spreads them over both workers; ``/proc/net/tcp`` says which worker
each first reached. Two configurations alternate ``--repeats`` times, each on a fresh server and
database:

- ``relayed``: the bots do not follow redirects (``follow_redirects=False``); a match between bots that
  reached different workers is refereed by one worker and the other bot's moves cross the relay;
- ``redirected``: the bots follow redirects (the SDK's default); before such a match the ladder moves
  the other bot to the refereeing worker, which costs it a reconnection, and the match is direct.

From the stored start and end of each rated match over ``--seconds`` seconds (after ``WARMUP`` matches)
it takes the time a round, and prints the median for the pairs that first reached different workers
(``across``) and for those on one worker (``same``), per configuration; then the main process's last
line (units, redirects, and how long a moved bot took to arrive) for each redirected run. The time a
round includes the bots' SDK work in this process, as ``bench_relay.py``'s does.

Then the same for a challenge (``--no-ladder``): registered bot ``x`` challenges ``y`` for
``CHALLENGES`` matches of ``ROUNDS`` rounds, connected to the own port of the other worker than ``y``'s
(through the shared port the kernel picks a worker per connection, by a hash that includes the source
port). Relayed, every match crosses the relay; redirected, ``y`` is moved to ``x``'s worker
before the first and stays there. It prints the median time a round over the matches of all runs and
how many times ``y`` was moved.

Run: ``.venv/bin/python bench/bench_redirect.py [--seconds S] [--repeats N]``.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # (the tests' helper that finds a worker)

from bench_ladder_workers import timed_runs
from bench_workers import start_server

from arena.v1 import bots_pb2 as bp
from arena.v1 import bots_pb2_grpc as bp_grpc
from arena_client import Bot, Turn
from arena_client.remote import Client
from tests.server.test_workers import own_ports, worker_holding

BOTS = 8
ROUNDS = 1000
WARMUP = 4
SECONDS = 8.0
REPEATS = 3
CHALLENGES = 6
FINISHED = "SELECT COUNT(*) FROM matches WHERE rated = 1 AND status = 'finished'"
SPANS = (
    "SELECT m.started_at, m.ended_at, a.bot_name, b.bot_name FROM matches m "
    "JOIN match_seats a ON a.match_id = m.id AND a.seat = 0 JOIN match_seats b ON b.match_id = m.id AND b.seat = 1 "
    "WHERE m.rated = 1 AND m.status = 'finished' AND m.id > ?"
)


class Quick(Bot):
    games = ("rps",)

    def act(self, turn: Turn) -> int:
        return turn.turn_id % 3


def query(db: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def finished(db: str) -> int:
    try:
        return int(query(db, FINISHED)[0][0])
    except sqlite3.OperationalError:
        return 0


def measure(follow: bool, folder: str, repeat: int, seconds: float) -> tuple[list[float], list[float], str]:
    """Microseconds a round of each match across workers and on one worker, and the server's ladder line."""
    db = str(Path(folder) / f"redirect-{follow}-{repeat}.db")
    names = [f"b-{i}" for i in range(BOTS)]
    options = ("--ladder-game", f"rps:rounds={ROUNDS}", "--ladder-bots", ",".join(names), "--concurrency", "1")
    proc, port = start_server(2, db, "0.0.0.0", (*options, "--ladder-interval", "0"), stderr=subprocess.PIPE)

    async def play() -> tuple[dict[str, int], int]:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = bp_grpc.BotServiceStub(channel)
            tokens = {n: (await stub.RegisterBot(bp.RegisterBotRequest(name=n, games=["rps"]))).token for n in names}
        clients = [
            Client(Quick(), f"127.0.0.{i + 2}:{port}", name=n, token=tokens[n], threaded=False, follow_redirects=follow)
            for i, n in enumerate(names)
        ]
        tasks = [asyncio.ensure_future(c.play()) for c in clients]
        try:
            while not all(c.session_token for c in clients):
                await asyncio.sleep(0.01)
            where = {n: worker_holding(proc, f"127.0.0.{i + 2}", port) for i, n in enumerate(names)}
            while finished(db) < WARMUP:
                await asyncio.sleep(0.05)
            first = int(query(db, "SELECT COALESCE(MAX(id), 0) FROM matches")[0][0])
            await asyncio.sleep(seconds)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return where, first

    try:
        where, first = asyncio.run(play())
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    across, same = [], []
    for started, ended, a, b in query(db, SPANS, first):
        took = (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()
        (across if where[a] != where[b] else same).append(took / ROUNDS * 1e6)
    line = next((x for x in err.splitlines() if "remote bots moved" in x), "")
    return across, same, line.removeprefix("arena: ladder: ")


def measure_challenge(follow: bool, folder: str, repeat: int) -> tuple[list[float], int]:
    """Microseconds a round of each of ``x``'s challenge matches against ``y`` on the other worker; y's moves."""
    db = str(Path(folder) / f"challenge-{follow}-{repeat}.db")
    proc, port = start_server(2, db, "0.0.0.0")

    async def play() -> int:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = bp_grpc.BotServiceStub(channel)
            tokens = {n: (await stub.RegisterBot(bp.RegisterBotRequest(name=n, games=["rps"]))).token for n in "xy"}
        y = Client(Quick(), f"127.0.0.2:{port}", name="y", token=tokens["y"], threaded=False, follow_redirects=follow)
        waiting = asyncio.ensure_future(y.play())
        try:
            while not y.session_token:
                await asyncio.sleep(0.01)
            theirs = worker_holding(proc, "127.0.0.2", port)
            # (the other worker's own port: through the shared one the kernel picks a worker per connection)
            other = next(own for pid, own in own_ports(proc, port).items() if pid != theirs)
            x = Client(Quick(), f"127.0.0.1:{other}", name="x", token=tokens["x"], threaded=False)
            await x.play(opponent="y", params={"rounds": ROUNDS}, matches=CHALLENGES)
            return y.redirects
        finally:
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)

    try:
        moves = asyncio.run(play())
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    spans = query(db, "SELECT started_at, ended_at FROM matches WHERE status = 'finished'")
    times = [(datetime.fromisoformat(e) - datetime.fromisoformat(s)).total_seconds() / ROUNDS * 1e6 for s, e in spans]
    return times, moves


def main() -> None:
    args = timed_runs(__doc__.splitlines()[0], SECONDS, REPEATS)
    relayed, redirected = [], []
    challenges: dict[bool, list[tuple[list[float], int]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(args.repeats):
            relayed.append(measure(False, folder, repeat, args.seconds))
            redirected.append(measure(True, folder, repeat, args.seconds))
            for follow in (False, True):
                challenges[follow].append(measure_challenge(follow, folder, repeat))
    print(
        f"ladder of {BOTS} remote SDK bots (inline) on arena serve --workers 2, {ROUNDS}-round RPS, one match at a "
        f"time, {args.seconds:g} s counted after {WARMUP} matches, {args.repeats} runs each"
    )
    print("median time a round (both bots' moves), over the matches of all runs: pairs that first reached")
    medians = {}
    for label, runs in (("relayed", relayed), ("redirected", redirected)):
        across = [x for run in runs for x in run[0]]
        same = [x for run in runs for x in run[1]]
        medians[label] = statistics.median(across) if across else None
        print(f"  {label:10s}  different workers {spread(across)}   one worker {spread(same)}")
    for _across, _same, line in redirected:
        print(f"    redirected run: {line}")
    if medians["relayed"] is None or medians["redirected"] is None:
        print("  different workers: no match in one configuration; count longer (--seconds) or more runs (--repeats)")
    else:
        print(f"  different workers, redirected / relayed: {medians['redirected'] / medians['relayed']:.2f}x")
    what = f"a challenge of {CHALLENGES} {ROUNDS}-round matches against a bot on the other worker"
    print(f"{what} ({args.repeats} runs):")
    rounds = {}
    for follow, label in ((False, "relayed"), (True, "redirected")):
        times = [t for run in challenges[follow] for t in run[0]]
        moved = [run[1] for run in challenges[follow]]
        rounds[follow] = statistics.median(times)
        print(f"  {label:10s}  {spread(times)}   the opponent moved {'/'.join(map(str, moved))} times")
    print(f"  challenge, redirected / relayed: {rounds[True] / rounds[False]:.2f}x")


def spread(times: list[float]) -> str:
    """The median time a round of some matches and how many, or that there were none."""
    if not times:
        return "   none (0 matches)"
    return f"{statistics.median(times):7.1f} us ({len(times)} matches)"


if __name__ == "__main__":
    main()
