"""A worker's relay socket (``arena_server.api.peers.serve_relay``) in one process: a real Unix socket, a
real hub on the bot's side and a real :class:`PeerSeat` on the other. The two-worker servers of
``test_workers_relay.py`` play whole matches through it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import arena_bots
from arena_client.types import SeatInfo
from arena_games import load_game
from arena_server.api.peers import Peers, serve_relay
from arena_server.matches.hub import Hub, HubError
from arena_server.seats.peer import PeerSeat, RelayRefused, relay_path
from arena_server.store.writer import Connected
from tests.server._relays import nowhere, silent_relay, until


async def test_a_stopping_worker_refuses_a_claim_and_says_why(tmp_path: Path) -> None:
    """A claim that reaches a worker whose shutdown began is refused at once, with the reason: the match it
    would join is being stopped too (a claim that waited there kept the other worker's unit from ending)."""
    hub = Hub(None, arena_bots.hosted_bots())
    hub.peers = Peers(str(tmp_path), nowhere, me=1, directory={})
    relay = await serve_relay(hub, relay_path(str(tmp_path), 1))
    try:
        await hub.shutdown(grace=1.0)
        seat = PeerSeat(str(tmp_path), Connected("far", 1, ("rps",), False, "key"), SeatInfo(0, "far", 1, "remote"))
        with pytest.raises(RelayRefused, match="the server is shutting down; try again when it is back"):
            await asyncio.wait_for(seat.claim(None, wait=False), 10)
    finally:
        relay.close()
        await relay.wait_closed()


async def test_the_shutdown_waits_for_a_match_still_taking_a_seat_through_a_relay(tmp_path: Path) -> None:
    """A match whose seat is being claimed through another worker's relay when the shutdown begins is waited
    for: here that relay answers nothing and closes 0.3 s later (its worker stops), the start fails, and only
    then does the shutdown return. It returned at once before, and the worker's loop ended under the start."""
    hub = Hub(None, arena_bots.hosted_bots())
    hub.peers = Peers(str(tmp_path), nowhere, me=0, directory={"far": Connected("far", 1, ("rps",), False, "key")})
    relay = await silent_relay(str(tmp_path), 1)
    try:
        starting = asyncio.ensure_future(hub.start_match(load_game("rps", rounds=5), ["far", "rock"]))
        await until(lambda: relay.connections, "the match never claimed its seat", timeout=5.0)
        asyncio.get_running_loop().call_later(0.3, relay.close_connections)
        await hub.shutdown(grace=5.0)
        assert starting.done(), "the shutdown returned while a match was still taking its seats"
        with pytest.raises(HubError):
            starting.result()
    finally:
        await relay.close()
