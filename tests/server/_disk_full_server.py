"""Run by test_disk_full.py inside a private mount namespace: a real server whose database is on a tiny tmpfs.

argv[1] is the (tiny, empty) filesystem. A raw gRPC bot plays a match; when it starts, the
filesystem is filled to the last byte, so the commit of its end fails with "database or disk
is full". Then the fault clears (the filler is removed), another match is played, and the
database is reopened. Prints one JSON object with what the bots were told and what was stored.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import sqlite3
import sys
from pathlib import Path

import arena_bots
from arena.v1 import bot_session_pb2 as bs
from arena_server.api.server import running_server
from arena_server.matches.hub import Hub
from arena_server.store.database import Store
from tests.fakes.grpc_bots import RawBot


def fill(path: Path) -> int:
    """Write ``path`` until the filesystem is full; return the bytes written."""
    written = 0
    chunk = b"\0" * 4096
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                written += f.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return written


async def play(raw: RawBot, on_start: object = None) -> dict[str, object]:
    while True:
        msg = await raw.recv(timeout=60)
        kind = msg.WhichOneof("kind")
        if kind == "match_started" and callable(on_start):
            on_start()
        elif kind == "turn":
            await raw.answer(msg.turn, 1)
        elif kind == "match_ended":
            e = msg.match_ended
            return {
                "match_id": e.match_id,
                "termination": int(e.termination),
                "reason": e.reason,
                "returns": list(e.returns),
            }
        elif kind == "challenge_status" and msg.challenge_status.state == bs.ChallengeStatus.STATE_REFUSED:
            return {"refused": msg.challenge_status.reason}


async def main(root: Path) -> dict[str, object]:
    db = root / "arena.db"
    filler = root / "filler"
    out: dict[str, object] = {}
    store = await Store.open(db)
    try:
        hub = Hub(store, arena_bots.hosted_bots())
        async with running_server(hub, port=0) as (_server, port):
            import grpc

            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                raw = RawBot(channel)
                await raw.hello("disk")
                await raw.challenge("rock", rounds=5)
                out["full"] = await play(raw, lambda: out.__setitem__("filled", fill(filler)))
                await raw.challenge("rock", rounds=5)
                out["while_full"] = await play(raw)
                filler.unlink()
                await asyncio.sleep(0.5)  # the voided match is marked aborted now that there is room
                await raw.challenge("rock", rounds=5)
                out["after"] = await play(raw)
                await raw.call.done_writing()
    finally:
        await store.close()
    store = await Store.open(db)
    out["recovered_at_restart"] = store.recovered_aborted
    await store.close()
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT id, status, termination, reason, returns FROM matches ORDER BY id")
        out["rows"] = rows.fetchall()
        out["running"] = conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'running'").fetchone()[0]
        out["rated_unfinished"] = conn.execute(
            "SELECT COUNT(*) FROM rated_matches r JOIN matches m ON m.id = r.match_id WHERE m.status != 'finished'"
        ).fetchone()[0]
    finally:
        conn.close()
    return out


if __name__ == "__main__":
    sys.path.insert(0, os.getcwd())
    print(json.dumps(asyncio.run(main(Path(sys.argv[1])))))
