"""``arena serve --workers 2`` and the hosted learners' state: one subdirectory per worker, never a shared file.

The Liar's Dice learners load their table once per host, learn during every
match and save it after each one. Two worker processes sharing one file would
each overwrite the other's learning. Each worker owns
``$ARENA_BOT_STATE_DIR/worker-<i>``, started as a copy of the files directly
in the shared directory. The test plays real learner matches on both workers
of a real server and reads the files they left.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import grpc
import pytest

from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_server.cli.workers import worker_state_dir
from tests.conftest import in_thread
from tests.ladder.test_crash import close, serve
from tests.server.test_workers import port_of


def test_a_new_worker_directory_starts_as_a_copy_of_the_shared_files(tmp_path: Path) -> None:
    (tmp_path / "sarsa-p2d1f6.json").write_text('{"trained": true}')
    (tmp_path / "worker-0").mkdir()
    (tmp_path / "worker-0" / "old.json").write_text("{}")
    first = worker_state_dir(tmp_path, 1)
    assert first == tmp_path / "worker-1"
    assert (first / "sarsa-p2d1f6.json").read_text() == '{"trained": true}'
    assert not (first / "worker-0").exists()  # only the files directly in the shared directory
    (first / "sarsa-p2d1f6.json").write_text('{"learned": 1}')
    assert (worker_state_dir(tmp_path, 1) / "sarsa-p2d1f6.json").read_text() == '{"learned": 1}'  # kept
    assert sorted(p.name for p in (tmp_path / "worker-0").iterdir()) == ["old.json"]  # an existing one is left


def test_each_worker_learns_into_its_own_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "bot-state"
    state.mkdir()
    monkeypatch.setenv("ARENA_BOT_STATE_DIR", str(state))
    proc = serve(tmp_path / "arena.db", "--workers", "2", "--no-ladder", "--host", "0.0.0.0")
    try:
        port = port_of(proc)
        request = mp.CreateMatchRequest(game="liars_dice", bots=["sarsa", "q-learning"], wait=True)
        request.params["dice"].int_value = 1

        async def play(batch: int) -> None:
            async def one(i: int) -> None:
                # one address per connection: the kernel spreads connections over the workers
                async with grpc.aio.insecure_channel(f"127.0.0.{8 * batch + i + 1}:{port}") as channel:
                    for _ in range(3):
                        reply = await mp_grpc.MatchServiceStub(channel).CreateMatch(request)
                        assert reply.record.status == mp.MATCH_STATUS_FINISHED, reply.record.reason

            await asyncio.gather(*(one(i) for i in range(8)))

        # The kernel picks a connection's worker by a hash of its addresses and ports, so 8 connections
        # all land on one worker about once in 128 runs: another batch from new addresses is another draw.
        for batch in range(4):
            in_thread(lambda n: asyncio.run(play(n)), batch)
            if all(any((state / w).glob("*.json")) for w in ("worker-0", "worker-1")):
                break
    finally:
        close(proc)
    assert sorted(p.name for p in state.iterdir()) == ["worker-0", "worker-1"]  # nothing written to the shared one
    tables = {}
    for worker in ("worker-0", "worker-1"):
        files = sorted(p.name for p in (state / worker).iterdir())
        assert files and all(f.endswith(".json") for f in files), files
        tables[worker] = {f: json.loads((state / worker / f).read_text()) for f in files}
    assert tables["worker-0"] != tables["worker-1"]  # each learned from its own matches
