"""Stand-ins for the other worker of a two-worker server, for tests that run one worker's hub in-process.

The hub under test is real; what is stood in for is the other worker: where its matches are (:func:`nowhere`) and
its relay socket, as one that accepts a claim and never answers (:func:`silent_relay`). :func:`until` waits on
the loop for what the hub does meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from arena_server.seats.peer import relay_path


async def nowhere(_match_id: str) -> int | None:
    """``Peers``' ``locate``: no worker runs the match."""
    return None


@dataclass
class SilentRelay:
    """Worker ``worker``'s relay socket in ``folder``, which takes connections and claims and answers nothing."""

    server: asyncio.AbstractServer
    connections: list[asyncio.BaseTransport] = field(default_factory=list)
    """Every connection a claim opened to it."""
    received: list[bytes] = field(default_factory=list)
    """The bytes claims sent it."""

    def close_connections(self) -> None:
        """Close every connection from this side, as a worker that stops does."""
        for transport in self.connections:
            transport.close()

    async def close(self) -> None:
        self.server.close()
        self.close_connections()
        await self.server.wait_closed()


async def silent_relay(folder: str, worker: int) -> SilentRelay:
    """Serve :class:`SilentRelay` on worker ``worker``'s relay socket in ``folder``."""
    connections: list[asyncio.BaseTransport] = []
    received: list[bytes] = []

    class Silent(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            connections.append(transport)

        def data_received(self, data: bytes) -> None:
            received.append(data)

    server = await asyncio.get_running_loop().create_unix_server(Silent, relay_path(folder, worker))
    return SilentRelay(server, connections, received)


async def until(condition: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    """Poll ``condition`` every 10 ms until it is true; fail with ``what`` after ``timeout`` seconds."""
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)
