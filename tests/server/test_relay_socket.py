"""A worker's relay socket (``arena_server.api.peers.serve_relay``) in one process: a real Unix socket, a
real hub on the bot's side and a real :class:`PeerSeat` on the other. The two-worker servers of
``test_workers_relay.py`` play whole matches through it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import arena_bots
from arena_client.types import SeatInfo
from arena_server.api.peers import Peers, serve_relay
from arena_server.matches.hub import Hub
from arena_server.seats.peer import PeerSeat, RelayRefused, relay_path
from arena_server.store.writer import Connected


async def test_a_stopping_worker_refuses_a_claim_and_says_why(tmp_path: Path) -> None:
    """A claim that reaches a worker whose shutdown began is refused at once, with the reason: the match it
    would join is being stopped too (a claim that waited there kept the other worker's unit from ending)."""

    async def locate(_match_id: str) -> int | None:
        return None

    hub = Hub(None, arena_bots.hosted_bots())
    hub.peers = Peers(str(tmp_path), locate, me=1, directory={})
    relay = await serve_relay(hub, relay_path(str(tmp_path), 1))
    try:
        await hub.shutdown(grace=1.0)
        seat = PeerSeat(str(tmp_path), Connected("far", 1, ("rps",), False, "key"), SeatInfo(0, "far", 1, "remote"))
        with pytest.raises(RelayRefused, match="the server is shutting down; try again when it is back"):
            await asyncio.wait_for(seat.claim(None, wait=False), 10)
    finally:
        relay.close()
        await relay.wait_closed()
