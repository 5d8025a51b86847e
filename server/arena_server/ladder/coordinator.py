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
import collections
import itertools
import os
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from arena_games import Game
from arena_server.ladder.scheduler import Ladder, LadderConfig, Outcome, _Pool, play_unit
from arena_server.matches.hub import Hub, log
from arena_server.store.writer import framed, read_message

REDIRECT_WAIT = 5.0
"""Seconds the coordinator waits for a redirected bot to reconnect to the worker of its match."""
UNITS_SOCKET = "ladder-{index}.sock"
"""The socket on which worker ``index`` plays the coordinator's units, in the store writer's directory."""


def units_path(socket_dir: str, index: int) -> str:
    """Worker ``index``'s ladder-unit socket."""
    return os.path.join(socket_dir, UNITS_SOCKET.format(index=index))


class UnitServer:
    """A worker's unit socket (:func:`serve_units`): its listener and the connections it accepted."""

    def __init__(self) -> None:
        self.server: asyncio.AbstractServer | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    def close(self) -> None:
        """Stop listening and close every connection (each handler then ends, its units played out)."""
        if self.server is not None:
            self.server.close()
        for writer in list(self.writers):
            writer.close()


async def serve_units(hub: Hub, path: str) -> UnitServer:
    """Play the units the coordinator sends this worker, each as it comes, over one connection.

    A request is ``("play", unit, game, names, time_control)``, ``unit`` a number the coordinator
    chose. Each match's :class:`Outcome` goes back as ``("ended", unit, outcome)`` when the match ends
    (after the store writer committed it), then ``("done", unit, busy)`` with the seating found busy
    (empty unless a remote bot played another match); the last match's outcome goes with the end, as
    ``("over", unit, (outcome, busy))`` (one message a unit of one match instead of two). A request this
    cannot read, or a unit that fails, is answered ``("failed", unit, reason)`` (``unit`` None when the
    request had none).

    The other request is ``("redirect", unit, name, port, index)``: the remote bot ``name``, if it is
    connected here, follows redirects and is idle, is moved to worker ``index`` on its ``port``, where its
    next match is played (:meth:`Hub.redirect_bot`). The answer is ``("redirected", unit, None)``, or
    ``("done", unit, busy)`` as for a unit when it cannot be.
    """
    served = UnitServer()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.writers.add(writer)
        playing: set[asyncio.Task[None]] = set()

        def tell(message: tuple[Any, ...]) -> None:
            if not writer.is_closing():  # (the main process is gone: the match still counts)
                send_nowait(writer, message)

        def start(step: Coroutine[Any, Any, None]) -> None:
            """Run a request's work as it comes; the connection's end waits for what is still running."""
            task = asyncio.ensure_future(step)
            playing.add(task)
            task.add_done_callback(playing.discard)

        async def play(unit: object, game: Game, names: list[str], time_control: Any) -> None:
            last: list[Outcome] = []  # (the last match's outcome goes with the unit's end: one message, not two)

            async def ended(outcome: Outcome) -> None:
                if last:
                    tell(("ended", unit, last.pop()))
                last.append(outcome)

            try:
                busy = await play_unit(hub, game, names, time_control, ended)
                tell(("over", unit, (last[0], busy)) if last else ("done", unit, busy))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the worker keeps serving; the coordinator logs it
                tell(("failed", unit, repr(exc)))

        async def redirect(unit: object, name: str, port: int, index: int) -> None:
            moved = await hub.redirect_bot(name, port, index, "its next ladder match is refereed there")
            if moved != "moved":  # (gone or not following: relayed; busy here: the ladder pairs someone else)
                tell(("done", unit, [name] if moved == "busy" else []))
                return
            tell(("redirected", unit, None))

        try:
            while True:
                try:
                    request = await read_message(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return  # the coordinator closed (its server stops, or it is gone), or this worker stops
                if isinstance(request, tuple) and len(request) == 5 and request[0] == "redirect":
                    _op, unit, name, port, index = request
                    start(redirect(unit, name, port, index))
                    continue
                try:
                    op, unit, game, names, time_control = request
                    if op != "play" or not isinstance(game, Game):
                        raise ValueError("expected ('play', unit, game, names, time_control)")
                except (TypeError, ValueError) as exc:
                    unit = request[1] if isinstance(request, tuple) and len(request) > 1 else None
                    tell(("failed", unit, f"not a ladder unit: {request!r} ({exc})"))
                    continue
                start(play(unit, game, list(names), time_control))
        finally:
            if playing:  # (the units in flight finish: their matches are rated all the same)
                await asyncio.gather(*playing, return_exceptions=True)
            served.writers.discard(writer)
            writer.close()

    async def quiet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """:func:`handle`, ended rather than cancelled when the worker's loop ends with a unit still starting
        (it stops within the hub's shutdown grace otherwise): asyncio's unix server logs a cancelled handler
        as an error, with a traceback (Python 3.11), and there is nothing left to tell."""
        try:
            await handle(reader, writer)
        except asyncio.CancelledError:
            writer.close()

    served.server = await asyncio.start_unix_server(quiet, path=path)
    return served


def send_nowait(writer: asyncio.StreamWriter, message: tuple[Any, ...]) -> None:
    """Write one length-prefixed pickled message without waiting (the messages are a few hundred bytes)."""
    writer.write(framed(message))


class _Link:
    """The coordinator's one connection to a worker's unit socket, shared by the units it plays there."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.writer: asyncio.StreamWriter | None = None
        self.units: dict[int, asyncio.Queue[tuple[str, Any]]] = {}
        self._opening: asyncio.Lock = asyncio.Lock()
        self._reading: asyncio.Task[None] | None = None

    async def send(self, unit: int, message: tuple[Any, ...]) -> asyncio.Queue[tuple[str, Any]]:
        """Send a unit's request (connecting first if need be); the queue its replies arrive on.

        Raises:
            OSError: the worker's socket cannot be reached.
        """
        async with self._opening:
            if self.writer is None or self.writer.is_closing():
                reader, self.writer = await asyncio.open_unix_connection(self.path)
                self._reading = asyncio.ensure_future(self._read(reader, self.writer))
            replies: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
            self.units[unit] = replies
            send_nowait(self.writer, message)
            return replies

    async def _read(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reason = "the worker closed the connection"
        try:
            while True:
                kind, unit, value = await read_message(reader)
                replies = self.units.get(unit)
                if replies is not None:
                    replies.put_nowait((kind, value))
        except asyncio.IncompleteReadError:
            pass
        except Exception as exc:  # (a reply this cannot read: the connection is no use any more)
            reason = repr(exc)
        finally:
            writer.close()
            if self.writer is writer:
                self.writer = None
        for replies in self.units.values():  # (every unit in flight there is over for the coordinator)
            replies.put_nowait(("lost", reason))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self._reading is not None:
            self._reading.cancel()


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
        ports: Each worker's own port (as they announce it), where a remote bot that follows redirects is
            sent to play a unit there instead of being relayed (empty or missing: never redirect).
    """

    def __init__(
        self,
        hub: Hub,
        config: LadderConfig,
        socket_dir: str,
        workers: int,
        ports: Mapping[int, int] | None = None,
    ) -> None:
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
        self._links = [_Link(units_path(socket_dir, i)) for i in range(workers)]
        self._units = itertools.count(1)
        self.ports: Mapping[int, int] = {} if ports is None else ports
        self.redirects = 0
        """Remote bots moved to the worker of their match (for the operator and the tests)."""
        self.redirect_waits: list[float] = []
        """Seconds from each redirect to the bot's arrival on the worker of its match (the last 1,000)."""

    async def stop(self) -> None:
        """Stop as :meth:`Ladder.stop` does, then close the connections to the workers; one line of totals."""
        try:
            await super().stop()
        finally:
            for link in self._links:
                link.close()
        waits = sorted(self.redirect_waits)
        arrived = (
            f", back in {waits[len(waits) // 2] * 1e3:.1f} ms (median; longest {waits[-1] * 1e3:.1f} ms)"
            if waits
            else ""
        )
        log(
            f"arena: ladder: {sum(self.placed)} units played on the {self.workers} workers "
            f"({', '.join(str(n) for n in self.placed)}); {self.redirects} remote bots moved to the worker "
            f"of their match{arrived}"
        )

    async def refresh(self) -> None:
        """Reload ratings and paused bots, and the submitted programs (accepted through any worker)."""
        if self.hub.registry is not None:
            try:
                await self.hub.registry.refresh()
            except Exception as exc:  # (the ratings are still reloaded; the programs next time)
                log(f"arena: ladder: could not reload the submitted bots: {exc!r}")
        await super().refresh()

    def place(self, names: Sequence[str]) -> int:
        """The worker to play a unit of ``names``.

        With remote bots: a worker one of them is connected to. A bot that cannot be redirected (its Hello
        did not ask, or no worker port is known) stays where it is, so its worker is taken; among the
        candidates left, the one fewest remote bots are connected to (then the least loaded), so that moving
        bots keeps the workers' shares even instead of gathering every bot on one. Without remote bots: the
        worker with the fewest ladder units in flight, ties taken in turn.
        """
        assert self.hub.peers is not None
        directory = self.hub.peers.directory
        remote = [bot for bot in (directory.get(name) for name in names) if bot is not None]
        remote = [bot for bot in remote if 0 <= bot.worker < self.workers]
        if remote:
            staying = {bot.worker for bot in remote if not bot.redirects or not self.ports}
            candidates = sorted(staying or {bot.worker for bot in remote})
            if len(candidates) == 1:
                return int(candidates[0])
            population = collections.Counter(bot.worker for bot in directory.values())
            return int(min(candidates, key=lambda w: (population[w], self.load[w])))
        fewest = min(self.load)
        for offset in range(self.workers):  # (ties taken in turn, so idle workers share the hosted units)
            index = (self._next + offset) % self.workers
            if self.load[index] == fewest:
                self._next = (index + 1) % self.workers
                return index
        return 0  # (not reached)

    async def _gather(self, index: int, names: Sequence[str]) -> None:
        """Redirect to worker ``index`` the remote bots of ``names`` connected elsewhere that follow redirects.

        Each is told by its own worker to reconnect on ``index``'s port; this waits (at most
        :data:`REDIRECT_WAIT` seconds) until the directory shows it there. A bot that cannot be redirected
        (busy, gone, or its Hello did not ask) or does not arrive in time is relayed, as before.
        """
        port = self.ports.get(index, 0)
        assert self.hub.peers is not None
        directory = self.hub.peers.directory
        for name in names:
            bot = directory.get(name)
            if port == 0 or bot is None or not bot.redirects or bot.worker == index:
                continue
            if not 0 <= bot.worker < self.workers:
                continue
            link = self._links[bot.worker]
            unit = next(self._units)
            try:
                replies = await link.send(unit, ("redirect", unit, name, port, index))
                kind, _value = await replies.get()
            except OSError:
                continue
            finally:
                link.units.pop(unit, None)
            if kind != "redirected":
                continue
            self.redirects += 1
            loop = asyncio.get_running_loop()
            began = loop.time()
            while loop.time() < began + REDIRECT_WAIT and not self._stopping:
                here = directory.get(name)
                if here is not None and here.worker == index and not here.moving:
                    self.redirect_waits = [*self.redirect_waits[-999:], loop.time() - began]
                    break
                await asyncio.sleep(0.002)

    async def _play_unit(self, pool: _Pool, names: list[str]) -> None:
        index = self.place(names)
        link = self._links[index]
        unit = next(self._units)
        self.load[index] += 1
        self.placed[index] += 1
        try:
            await self._gather(index, names)
            replies = await link.send(unit, ("play", unit, pool.game, names, self.config.time_control))
            while True:
                kind, value = await replies.get()
                if kind == "ended":
                    outcome: Outcome = value
                    await self._after(pool, outcome)
                elif kind in ("done", "over"):
                    if kind == "over":
                        outcome, value = value
                        await self._after(pool, outcome)
                    assert self.hub.peers is not None
                    self._rest([name for name in value if name in self.hub.peers.directory])
                    return
                else:  # "failed" or "lost"
                    if not self._stopping:  # (a stopping server's workers go first)
                        log(f"arena: ladder: worker {index} could not play {', '.join(names)}: {value}")
                        await asyncio.sleep(1.0)
                    return
        except OSError as exc:
            if not self._stopping:
                log(f"arena: ladder: cannot reach worker {index} to play {', '.join(names)}: {exc!r}")
                await asyncio.sleep(1.0)
        finally:
            self.load[index] -= 1
            link.units.pop(unit, None)
