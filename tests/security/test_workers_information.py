"""Hidden information stays hidden on ``arena serve --workers 2``, where the store writer is another process.

The referee runs in a worker and the match is written by the main process.
A raw gRPC bot holds a Liar's Dice match open and attacks while it runs: the
database files (main file, WAL, shm), ``GetMatch``, ``ListMatches``,
``WatchMatch`` and every message it received. None of them may hold the seed.
At the end the seed is revealed, stored, and really produced the dice.
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
from pathlib import Path

import grpc

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_games import CHANCE
from tests.ladder.test_crash import close, serve
from tests.security.test_information import _command_lines, _database_bytes, _hold_a_dice_match, _replay_chance


class _Remote:
    """What ``_hold_a_dice_match`` needs of a server: a channel (one connection, so one worker)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._channel = channel

    def channel(self) -> grpc.aio.Channel:
        return self._channel


async def test_seed_is_secret_across_the_writer_hop(tmp_path: Path) -> None:
    db = tmp_path / "arena.db"
    proc = serve(db, "--workers", "2", "--no-ladder")
    try:
        port = int(proc.args[proc.args.index("--port") + 1])  # type: ignore[union-attr]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            raw, started, seen = await _hold_a_dice_match(_Remote(channel))  # type: ignore[arg-type]
            match_id = started.match_id
            files_while_running = _database_bytes(db)
            stub = mp_grpc.MatchServiceStub(channel)
            got = await stub.GetMatch(mp.GetMatchRequest(match_id=match_id))
            assert got.status == mp.MATCH_STATUS_RUNNING and got.seed == "" and got.seed_sha256 == started.seed_sha256
            listed = await stub.ListMatches(mp.ListMatchesRequest(game="liars_dice"))
            watch = stub.WatchMatch(mp.WatchMatchRequest(match_id=match_id))
            first = await asyncio.wait_for(watch.read(), 10)
            watch.cancel()
            commands = _command_lines()

            await raw.send(bs.BotMessage(resign=bs.Resign(match_id=match_id, reason="test over")))
            ended = (await raw.recv_kind("match_ended")).match_ended
            seed = ended.seed
            assert seed and hashlib.sha256(seed.encode()).hexdigest() == started.seed_sha256
            needle = seed.encode()
            assert needle not in files_while_running, "the running match's seed reached the database files"
            for message in (got, listed, first, *seen):
                assert needle not in message.SerializeToString()
            assert not [c for c in commands if needle in c]  # not on any command line (workers included)

            record = await stub.GetMatch(mp.GetMatchRequest(match_id=match_id))  # stored before the bot heard
            assert record.status == mp.MATCH_STATUS_ABORTED or record.status == mp.MATCH_STATUS_FINISHED
            assert record.seed == seed and needle in _database_bytes(db)
            params = {k: v.int_value for k, v in record.params.items() if v.WhichOneof("kind") == "int_value"}
            rolls = sum(1 for m in record.moves if m.seat == CHANCE)
            assert rolls > 0 and _replay_chance("liars_dice", params, seed, record.moves) == rolls
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        close(proc)
