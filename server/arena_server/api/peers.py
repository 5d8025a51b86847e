"""Following a match that another worker process runs (``arena serve --workers N``).

The kernel hands each connection to one worker, so a spectator's ``WatchMatch``
(and, in the main process, the web interface's live view) often reaches a
process that does not run the match. Each worker therefore also serves its
gRPC services on a private Unix socket (:func:`peer_address`, in the store
writer's directory), and the store writer notes which worker started each
match until it ends (``StoreWriter.owners``). A process asked for a match it
does not run looks the owner up and relays that worker's own ``WatchMatch``:
the public moves and the spectator observation as they happen. The header and
the final record come from the database, where the match's start is written
before it plays and its end is committed before anyone hears of it.

:class:`Peers` gives the hub what it needs for that
(``Hub.watch`` asks :meth:`Peers.owner` and follows :meth:`Peers.watch`), so the
hub itself stays free of gRPC.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client.convert import moves_from_proto, observation_from_proto
from arena_server.matches.hub import HubError
from arena_server.store.database import Store, StoreError

PEER_SOCKET = "worker-{index}.sock"
"""The private socket of worker ``index``, in the directory of the store writer's socket."""


def peer_address(socket_dir: str, index: int) -> str:
    """The gRPC address of worker ``index``'s private socket (``unix:...``)."""
    return "unix:" + os.path.join(socket_dir, PEER_SOCKET.format(index=index))


class Peers:
    """The workers of this server, as a process that may be asked about their matches sees them.

    Args:
        socket_dir: The directory of the workers' private sockets.
        locate: The index of the worker running a match, or None (a stored or unknown match).
        me: This process's own worker index (None in the main process, which runs no match).
        running: The ids of the matches the workers run now, when this process can know them
            (the main process, which holds the writer), for the web interface's list.
        next_match: Wait for the next match of a game that a worker other than the one given starts
            (the store writer hears of every start); its id.
    """

    def __init__(
        self,
        socket_dir: str,
        locate: Callable[[str], Awaitable[int | None]],
        me: int | None = None,
        running: Callable[[], list[str]] | None = None,
        next_match: Callable[[str, int | None], Awaitable[str]] | None = None,
    ) -> None:
        self.socket_dir = socket_dir
        self._locate = locate
        self.me = me
        self._running = running
        self._next = next_match

    def running_ids(self) -> list[str]:
        """The matches the workers run now (in no order); empty where this process cannot know."""
        return [] if self._running is None else self._running()

    async def owner(self, match_id: str) -> int | None:
        """The index of the worker that runs ``match_id`` (this one's own included); None when none does."""
        try:
            return await self._locate(match_id)
        except Exception:  # (the writer is gone: the server is stopping; the match is followed from the store)
            return None

    async def next_match(self, game: str) -> str:
        """The id of the next match of ``game`` that another worker starts (this one's own are the hub's)."""
        if self._next is None:
            raise HubError("unknown_match", "this process cannot hear of the other workers' matches")
        try:
            return await self._next(game, self.me)
        except StoreError as exc:
            raise HubError("stopping", f"the server is shutting down ({exc}); try again when it is back") from None

    async def watch(self, index: int, match_id: str, store: Store | None) -> AsyncIterator[tuple[str, Any]]:
        """``Hub.watch``'s events for ``match_id``, which worker ``index`` runs: its own feed, relayed.

        The header and the end come from ``store`` (the end is committed before the worker sends it);
        a relay that breaks ends with ``("dropped", reason)``.
        """
        started = False
        try:
            async with grpc.aio.insecure_channel(peer_address(self.socket_dir, index)) as channel:
                stub = mp_grpc.MatchServiceStub(channel)
                async for event in stub.WatchMatch(mp.WatchMatchRequest(match_id=match_id)):
                    kind = event.WhichOneof("kind")
                    if kind == "started":
                        record = await store.get_match(match_id, with_moves=False) if store is not None else None
                        if record is None:
                            yield "dropped", f"match {match_id} is running on worker {index} but is not in the database"
                            return
                        started = True
                        yield "started", record
                    elif kind == "update":
                        update = event.update
                        yield "moves", (moves_from_proto(update.moves), observation_from_proto(update.observation))
                    elif kind == "ended":
                        record = await store.get_match(match_id) if store is not None else None
                        if record is not None and record.termination is not None:
                            yield "ended", record
                        return
        except grpc.aio.AioRpcError as exc:
            where = f"worker {index}, which runs match {match_id}"
            if not started and exc.code() == grpc.StatusCode.NOT_FOUND:
                return  # it ended meanwhile: Hub.watch falls back on the store
            yield "dropped", f"lost the feed from {where}: {exc.details() or exc.code().name}; reload to follow it"
