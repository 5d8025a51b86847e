"""One ladder for every worker of ``arena serve --workers N``: pairs chosen in the main process.

Before, each worker ran a ladder of its own over the bots it could reach, with a share of
``--concurrency``. Each counted only its own matches: the pair counts that keep coverage even
diverged between workers, ``--per-bot`` held per worker (a hosted bot could play N times as many
matches at once as asked), and two ladders could pick the same remote bot at the same moment (the
second was refused and the bot left alone for a second, so bots on different workers met less often).

Now the main process runs the one :class:`LadderCoordinator`. It has the global view: every hosted
and submitted bot, every remote bot connected to any worker (the store writer's directory), every
ladder match in flight (it started them all), the ratings it refits itself and the pair counts of
every match. It picks as :class:`~arena_server.ladder.scheduler.Ladder` does, then asks one worker
to play the unit (:func:`serve_units`, over that worker's private Unix socket in the writer's
directory):

* a unit with a remote bot goes to the worker that bot's stream reached (a second remote bot on
  another worker is relayed, :mod:`arena_server.seats.peer`);
* a unit of hosted or submitted bots only goes to the worker with the fewest ladder units in flight.

The worker plays it with :func:`~arena_server.ladder.scheduler.play_unit` (a dice game's duplicate
set with its seed sealed there, as in one process) and sends back each match's
:class:`~arena_server.ladder.scheduler.Outcome` once the store writer has committed it. The
coordinator counts it and pauses a failing bot (the run of failures is read from the store). The
match's record, moves and seed never leave the worker; only the outcome does.

A remote bot can still be busy in a challenge or a ``CreateMatch`` on its worker, which the
coordinator cannot see: the worker refuses the unit at once and the bot is left alone for
:data:`~arena_server.ladder.scheduler.PEER_REST` seconds, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from typing import Any

from arena_games import Game
from arena_server.ladder.scheduler import Ladder, LadderConfig, Outcome, _Pool, play_unit
from arena_server.matches.hub import Hub, log
from arena_server.store.writer import read_message, send_message

UNITS_SOCKET = "ladder-{index}.sock"
"""The socket on which worker ``index`` plays the coordinator's units, in the store writer's directory."""


def units_path(socket_dir: str, index: int) -> str:
    """Worker ``index``'s ladder-unit socket."""
    return os.path.join(socket_dir, UNITS_SOCKET.format(index=index))


async def serve_units(hub: Hub, path: str) -> asyncio.AbstractServer:
    """Play the units the coordinator sends this worker; one connection per unit.

    The request is ``("play", game, names, time_control)``. Each match's :class:`Outcome` goes back as
    ``("ended", outcome)`` when the match ends (after the store writer committed it), then
    ``("done", busy)`` with the seating found busy (empty unless a remote bot played another match).
    A request this cannot read, or a unit that fails, is answered ``("failed", reason)``.
    """

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def tell(message: tuple[Any, ...]) -> None:
            with contextlib.suppress(ConnectionError):  # (the main process is gone: the match still counts)
                await send_message(writer, message)

        try:
            request = await read_message(reader)
            op, game, names, time_control = request
            if op != "play" or not isinstance(game, Game):
                raise ValueError(f"not a ladder unit: {request!r}")
            busy = await play_unit(hub, game, list(names), time_control, lambda o: tell(("ended", o)))
            await tell(("done", busy))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the worker keeps serving; the coordinator logs it
            await tell(("failed", repr(exc)))
        finally:
            writer.close()

    return await asyncio.start_unix_server(handle, path=path)


class LadderConfigError(ValueError):
    """The coordinator was set up wrongly (no workers, no directory of theirs)."""


class LadderCoordinator(Ladder):
    """The rated ladder of a multi-worker server, run in its main process; the workers play the units.

    Args:
        hub: The main process's hub (no matches of its own; it knows the hosted and submitted bots,
            and, through ``hub.peers``, the remote bots connected to every worker).
        config: The whole ladder: ``concurrency`` and ``per_bot`` hold over all the workers.
        socket_dir: The store writer's directory, where each worker serves :func:`units_path`.
        workers: How many workers there are.
    """

    def __init__(self, hub: Hub, config: LadderConfig, socket_dir: str, workers: int) -> None:
        if workers < 1:
            raise LadderConfigError("the coordinator needs at least one worker")
        if hub.peers is None:
            raise LadderConfigError("the coordinator needs the workers' directory (hub.peers)")
        super().__init__(hub, config)
        self.socket_dir = socket_dir
        self.workers = workers
        self.load = [0] * workers
        """Ladder units in flight on each worker."""
        self.placed = [0] * workers
        """Ladder units each worker was given (for the operator and the tests)."""
        self._next = 0

    async def refresh(self) -> None:
        """Reload ratings and paused bots, and the submitted programs (accepted through any worker)."""
        if self.hub.registry is not None:
            try:
                await self.hub.registry.refresh()
            except Exception as exc:  # (the ratings are still reloaded; the programs next time)
                log(f"arena: ladder: could not reload the submitted bots: {exc!r}")
        await super().refresh()

    def place(self, names: Sequence[str]) -> int:
        """The worker to play a unit of ``names``: the first remote bot's, else the least loaded."""
        assert self.hub.peers is not None
        directory = self.hub.peers.directory
        for name in names:
            bot = directory.get(name)
            if bot is not None and 0 <= bot.worker < self.workers:
                return int(bot.worker)
        fewest = min(self.load)
        for offset in range(self.workers):  # (ties taken in turn, so idle workers share the hosted units)
            index = (self._next + offset) % self.workers
            if self.load[index] == fewest:
                self._next = (index + 1) % self.workers
                return index
        return 0  # (not reached)

    async def _play_unit(self, pool: _Pool, names: list[str]) -> None:
        index = self.place(names)
        self.load[index] += 1
        self.placed[index] += 1
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.open_unix_connection(units_path(self.socket_dir, index))
            await send_message(writer, ("play", pool.game, names, self.config.time_control))
            while True:
                kind, value = await read_message(reader)
                if kind == "ended":
                    outcome: Outcome = value
                    await self._after(pool, outcome)
                elif kind == "done":
                    assert self.hub.peers is not None
                    self._rest([name for name in value if name in self.hub.peers.directory])
                    return
                else:
                    log(f"arena: ladder: worker {index} could not play {', '.join(names)}: {value}")
                    await asyncio.sleep(1.0)
                    return
        except (OSError, asyncio.IncompleteReadError) as exc:
            if not self._stopping:  # (a stopping server's workers go first)
                log(f"arena: ladder: lost worker {index} while it played {', '.join(names)}: {exc!r}")
                await asyncio.sleep(1.0)
        finally:
            self.load[index] -= 1
            if writer is not None:
                writer.close()
