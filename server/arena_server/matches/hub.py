"""The hub: seats bots, runs matches, stores them, and feeds spectators.

Everything that starts a match goes through :meth:`Hub.start_match`: the gRPC
``MatchService.CreateMatch``, a remote bot's ``Challenge``, and the CLI. The
hub resolves bot names to seats (a fresh in-process bot for hosted names, the
open session for connected remote bots), writes the match to the store when
it starts and when it ends, and aborts every running match on shutdown.

Commit before notify: the referee hands the finished record to the hub, which
commits it (with its rating change and the offender's failure report) before
any seat or spectator hears the result. If that commit fails (disk full, a
read-only or locked database), the match is voided and the bots are told it
was aborted, with the reason; the hub then marks it aborted in the store (or
the next start does). A store error when a match should start is a
:class:`HubError` with code ``store``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import itertools
import secrets
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from arena_bots import HostedBot
from arena_client import PublicMove, SeatInfo, TimeControl
from arena_games import CHANCE, Game, GameError, State, load_game
from arena_server.bots.failures import chain_hooks, seat_outcomes
from arena_server.bots.registry import BotRegistry, default_data_dir, reserved_names
from arena_server.matches.terminal import RepeatedLines
from arena_server.referee.loop import play_match
from arena_server.referee.records import COMMIT_FAILED, MatchControl, MatchRecord, void_record
from arena_server.referee.seat import Seat
from arena_server.referee.seeds import bot_seed, new_seed, seed_hash
from arena_server.seats.in_process import InProcessSeat, ThreadedInProcessSeat
from arena_server.seats.peer import PeerSeat, RelayBusy, RelayMoved, RelayRefused
from arena_server.seats.remote import RemoteSeat, RemoteSession
from arena_server.seats.subprocess_seat import SubprocessSeat
from arena_server.store.database import Store, StoreError
from arena_server.store.names import name_key
from arena_server.store.ratings import rating_change
from arena_server.store.writer import moving_key

MAX_SPECTATOR_BACKLOG = 100_000
"""Moves that may wait for one spectator; a spectator further behind is dropped (about 10 MB)."""

STORE_FAULT_PAUSE = 0.5
"""Seconds a start that the database refused waits before it is refused (retries must not spin)."""

ARRIVAL_WAIT = 5.0
"""Seconds a request that names a redirected remote bot waits for it to reconnect (its SDK falls back to the
address it was given after 3 s), before the bot counts as gone."""

SHUTDOWN_LINGER = 0.5
"""Seconds the streams of bots that were playing stay open after their last notice, at shutdown."""


class HubError(Exception):
    """A request the hub refuses; the message says what was wrong and what to do.

    Attributes:
        code: A short category: ``unknown_bot``, ``unsupported_game``,
            ``bad_params``, ``busy``, ``stopping`` or ``store`` (the database
            refused to record the match; the server keeps running).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


async def _wait_while(pending: Callable[[], bool]) -> None:
    """Wait while ``pending()`` holds, at most :data:`ARRIVAL_WAIT` seconds (a remote bot moving between workers)."""
    deadline = time.monotonic() + ARRIVAL_WAIT
    while pending() and time.monotonic() < deadline:
        await asyncio.sleep(0.005)


STOPPING = "the server is shutting down; try again when it is back"
"""Why a match asked for during a shutdown is refused (its seat claims through a relay too)."""


def _not_arrived(name: str) -> HubError:
    """The refusal of a match whose remote bot was moved between workers and did not reconnect in time."""
    return HubError(
        "unknown_bot",
        f"{name!r} was moved to another worker of this server and has not reconnected in {ARRIVAL_WAIT:g} s; "
        "try again when it is back",
    )


@dataclass
class RunningMatch:
    """A match in progress and the people watching it (their queues, told when it closes)."""

    record: MatchRecord
    control: MatchControl
    task: asyncio.Task[MatchRecord] | None = None
    watchers: list[SpectatorQueue] = field(default_factory=list)
    committed: bool = False
    """True once the end of the match is in the store."""
    commit: asyncio.Future[None] | None = None
    """The store write of the end of the match, once started (it is never cancelled)."""
    commit_snapshot: MatchRecord | None = None
    """The ending being committed (a copy: the live record may still change if the commit fails)."""


class Hub:
    """The server's match machinery (transport-independent)."""

    def __init__(
        self,
        store: Store | None,
        hosted: dict[str, HostedBot],
        default_time_control: TimeControl | None = None,
        registry: BotRegistry | None = None,
    ) -> None:
        self.store = store
        self.hosted = hosted
        # Issue 4: registered subprocess bots (a registry next to the database unless one is given).
        if registry is None and store is not None and store.path != ":memory:":
            registry = BotRegistry(store, default_data_dir(store.path), reserved=reserved_names(hosted))
        self.registry = registry
        self.default_time_control = default_time_control or TimeControl()
        self.sessions: dict[str, RemoteSession] = {}
        self.sealed: dict[str, int] = {}
        """Seeds reused by several matches (duplicate sets), by commitment: revealed when the set ends."""
        self.session_keys: dict[str, str] = {}
        """Connected name -> SHA-256 of its session's Welcome.session_token (proof for CreateMatch)."""
        self.running: dict[str, RunningMatch] = {}
        self.stopping = False
        self.streams: dict[RemoteSession, asyncio.Future[None]] = {}
        """Every open bot stream's session, welcomed or not, with the future its handler sets when it has ended
        (``arena_server.api.bot_session``; see :meth:`end_streams`)."""
        self.streams_ended = False
        """True once :meth:`end_streams` has run: a bot stream opened after it ends at once, the same way."""
        self._unsettled: list[MatchRecord] = []
        """Voided matches the database refused to mark aborted; retried after its next successful write."""
        self._pending: set[asyncio.Future[None]] = set()
        """What :meth:`shutdown` waits for besides :attr:`running` (each a future, done when it is over): a match
        being started and not yet in :attr:`running` (its seats being taken, then its start stored), or a
        ``CreateMatch`` passed on to the worker its bots are connected to (see :meth:`pending`)."""
        self.store_fault: str | None = None
        """What the database said when it last refused to start a match (None once it works again)."""
        self.stop_reason = "the server is shutting down"
        self._local_ids = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()
        self.challenging: collections.Counter[RemoteSession] = collections.Counter()
        """The remote sessions with a challenge of their own in progress, and how many (kept out of the session
        object: past 30 attributes CPython stops sharing an instance dict's keys)."""
        self._next_match: dict[str, list[asyncio.Future[str]]] = {}
        self._warming: dict[str, asyncio.Future[None]] = {}
        """Hosted bot name -> its ``warm_up()`` on a worker thread (done: warm in this process)."""
        self.peers: Any = None
        """On a multi-worker server, the other workers (``arena_server.api.peers.Peers``): :meth:`watch`
        follows a match another process runs through them. None in a single-process server."""

    # -- names --------------------------------------------------------------------------------------

    def bot_names(self) -> list[str]:
        """The bots this process can seat itself: hosted, connected here, or registered programs.

        On a multi-worker server the ladder coordinator pairs these and the remote bots connected to any
        worker (:meth:`all_bot_names`).
        """
        programs = self.registry.programs if self.registry is not None else {}
        return sorted(set(self.hosted) | set(self.sessions) | set(programs))

    def all_bot_names(self) -> list[str]:
        """:meth:`bot_names` and, on a multi-worker server, the remote bots connected to the other workers."""
        if self.peers is None:
            return self.bot_names()
        return sorted(set(self.bot_names()) | set(self.peers.directory))

    def elsewhere(self, name: str) -> Any:
        """The remote bot connected under ``name`` to another worker (a ``Connected``), when none is here."""
        if self.peers is None or name in self.sessions:
            return None
        return self.peers.elsewhere(name)

    def match_worker(self, names: Sequence[str]) -> int | None:
        """The other worker that should referee a match of ``names``: the one every remote bot of it is
        connected to, when none is connected here (hosted bots and registered programs play on any worker).

        None: referee it here (no remote bot, one of them is here or on its way, or they are on several
        workers, where the match moves or relays them: see :meth:`_seat_relayed`).
        """
        if self.peers is None:
            return None
        workers = set()
        for name in names:
            if name in self.hosted:
                continue
            if name in self.sessions or self._arriving(name):
                return None
            peer = self.peers.elsewhere(name)
            if peer is not None:
                workers.add(peer.worker)
        return workers.pop() if len(workers) == 1 else None

    @contextlib.contextmanager
    def pending(self) -> Iterator[None]:
        """Have :meth:`shutdown` wait (within its grace) until the block is over: a match being started, or a
        ``CreateMatch`` passed on to another worker, which replies once that worker's own shutdown has aborted
        and stored the match."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.add(future)
        try:
            yield
        finally:
            self._pending.discard(future)
            future.set_result(None)  # (wakes a shutdown waiting for it)

    async def arrivals(self, names: Sequence[str]) -> None:
        """Wait (at most :data:`ARRIVAL_WAIT` seconds) while a remote bot of ``names`` is on its way to another
        worker (redirected there by a match: ``Connected.moving``), so a match or a challenge that names it
        in those few milliseconds seats it where it arrives instead of finding no such bot."""
        if self.peers is not None:
            await _wait_while(lambda: any(self._arriving(name) for name in names))

    def _arriving(self, name: str) -> bool:
        """Whether the remote bot ``name`` is on its way: redirected and not yet reconnected, or claimed here in
        the directory and not yet welcomed (the directory hears of a claim before the claimer's session starts)."""
        peers = self.peers
        bot = None if peers is None else peers.directory.get(name)
        return bot is not None and (bot.moving or (bot.worker == peers.me and name not in self.sessions))

    async def redirect_bot(self, name: str, port: int, worker: int, reason: str) -> str:
        """Move the remote bot ``name`` connected here to worker ``worker`` (its own ``port``), if it can be.

        It can when it is registered (a guest is seated by its session's token), asked in its Hello to follow
        redirects, and is idle: in no match, queued for none, and with no challenge of its own in progress
        (the redirect would end the stream the challenge waits on). Its directory entry is then marked as on
        its way to ``worker`` (``Connected.moving``: taken out after ``2 * ARRIVAL_WAIT`` s if it never
        comes), it is sent a Redirect, and its session here ends.

        Returns:
            ``"moved"``, ``"busy"`` (it plays, or waits to), or ``"no"`` (not here, a guest, or it does not follow).
        """
        session = self.sessions.get(name)
        if session is None or session.is_closed or not session.follows_redirects or session.guest:
            return "no"  # (a guest is seated by its session's token, which a new session would not have)
        if session.busy.locked() or session.queued or session in self.challenging:
            return "busy"
        async with session.busy:  # (nothing seats it here while it is told to go)
            key = self.drop_session(session)
            peers = self.peers
            if peers is not None and await peers.move(name, key, worker):
                self.spawn(self._forget_if_lost(name, key))
            await session.redirect(port, reason)
        return "moved"

    async def _forget_if_lost(self, name: str, key: str) -> None:
        """Take a redirected bot that never reconnected out of the directory."""
        await asyncio.sleep(2 * ARRIVAL_WAIT)
        if self.peers is not None:
            await self.peers.release(name, moving_key(key))

    def games_of(self, name: str) -> tuple[str, ...] | None:
        """The games a bot plays (empty: any), or None if no such bot is available."""
        if name in self.hosted:
            return self.hosted[name].games
        if name in self.sessions:
            return self.sessions[name].games
        peer = self.elsewhere(name)
        if peer is not None:
            return tuple(peer.games)
        if self.registry is not None and name in self.registry.programs:
            return self.registry.programs[name].games
        return None

    def name_in_use(self, name: str) -> tuple[str, str] | None:
        """(kind, existing name) of a hosted or connected bot whose name normalises like ``name``."""
        key = name_key(name)
        for kind, names in (("hosted", self.hosted), ("connected", self.sessions)):
            for other in names:
                if name_key(other) == key:
                    return kind, other
        return None

    def drop_session(self, session: Any) -> str:
        """Take ``session`` out of :attr:`sessions` (if it still holds its name there); the key it held, or ""."""
        name: str = session.name
        if self.sessions.get(name) is not session:
            return ""
        del self.sessions[name]
        return self.session_keys.pop(name, "")

    def evict_guests_named(self, name: str, reason: str) -> int:
        """Drop every guest session whose name normalises like ``name`` (it has just been registered).

        The session leaves :attr:`sessions` at once, so it can never be seated
        under that name again; it is told why and its stream is closed.
        """
        key = name_key(name)
        evicted = [s for n, s in self.sessions.items() if s.guest and name_key(n) == key]
        for session in evicted:
            self.drop_session(session)
            self.spawn(session.evict(reason))
        return len(evicted)

    def new_guest_name(self) -> str:
        while True:
            name = f"guest-{secrets.token_hex(3)}"
            if name not in self.sessions and name not in self.hosted:
                return name

    # -- matches ------------------------------------------------------------------------------------

    def resolve_game(self, game_name: str, params: dict[str, Any]) -> Game:
        try:
            return load_game(game_name, **params)
        except GameError as exc:
            code = "unsupported_game" if "unknown game" in str(exc) else "bad_params"
            raise HubError(code, str(exc)) from None

    def check_bots(self, game: Game, bot_names: Sequence[str]) -> None:
        if len(bot_names) != game.num_players:
            raise HubError("bad_params", f"{game.name} needs {game.num_players} bots, got {len(bot_names)}")
        for name in bot_names:
            games = self.games_of(name)
            if games is None and self.peers is not None and self.peers.moving(name):
                raise _not_arrived(name)
            if games is None:
                available = ", ".join(self.all_bot_names()) or "none"
                raise HubError("unknown_bot", f"no bot named {name!r} is hosted or connected; available: {available}")
            if games and game.name not in games:
                raise HubError(
                    "unsupported_game", f"bot {name!r} does not play {game.name}; it plays {', '.join(games)}"
                )

    async def start_match(
        self,
        game: Game,
        bot_names: Sequence[str],
        time_control: TimeControl | None = None,
        seed: str | None = None,
        rated: bool = False,
        on_queued: Callable[[str, int], Awaitable[None]] | None = None,
        seed_chosen: bool = False,
        wait: bool = True,
    ) -> RunningMatch:
        """Seat the named bots and start the match in the background.

        Remote bots play one match at a time: this waits until each is free,
        calling ``on_queued(bot_name, position)`` first when it has to wait.
        They are taken in the order of their names, whichever seats they get,
        so two matches that want the same two remote bots never wait on each
        other (here, or across the workers of a multi-worker server).

        Args:
            seed: The match seed; a fresh secret one when None. The ladder and
                tournaments pass server-made seeds.
            seed_chosen: ``seed`` came from whoever asks for the match (a
                challenger, a CreateMatch caller, the operator's ``arena match
                --seed``), not from the server. Such a match is never rated,
                and the record says so. (Remote callers are also kept from
                choosing the seed of a match with a hosted bot: see
                :func:`arena_server.api.authority.check_chosen_seed`.)
            wait: False: refuse at once (``busy``) rather than wait for a remote bot
                playing another match (the ladder, which pairs someone else meanwhile).

        Raises:
            HubError: unknown bot, a bot that does not play the game, wrong
                number of bots, a chosen seed where none is allowed, a guest
                in a rated match, or the server is stopping.
        """
        if self.stopping:
            raise HubError("stopping", STOPPING)
        if self.registry is not None and any(self.games_of(n) is None for n in bot_names):
            await self.registry.refresh()  # a bot added by `arena bot add` while the server runs
        await self.arrivals(bot_names)
        self.check_bots(game, bot_names)
        if seed_chosen and rated:
            raise HubError("bad_params", "a rated match cannot have a chosen seed; leave the seed empty")
        for name in bot_names:
            session = self.sessions.get(name)
            connected = session if session is not None else self.elsewhere(name)
            if connected is None or not connected.guest:
                continue
            if rated:
                raise HubError("bad_params", f"{name!r} is a guest; guests never play rated matches")
            if self.registry is not None and await self.registry.registered_like(name) is not None:
                # Registered after the guest connected (e.g. by `arena bot add`): the guest never plays as it.
                self.evict_guests_named(name, f"the name {name!r} is now registered; reconnect with its token")
                # Not seated in the guest's place either: whoever asked spoke to the guest, not the owner.
                raise HubError(
                    "unknown_bot",
                    f"{name!r} was a guest's name and is now registered; the guest was disconnected. "
                    "Ask again to play the registered bot",
                )
        seed = seed or new_seed()
        tc = time_control or self.default_time_control
        locked: list[RemoteSession] = []
        seats: list[Seat] = []
        # From here the shutdown waits for this start: it ends soon once the shutdown began (what it waits
        # for, a bot's running match or another worker's relay, ends with it), at the next `stopping` check.
        with self.pending():
            try:
                for index, name in sorted(enumerate(bot_names), key=lambda seat: seat[1]):
                    if name not in self.sessions and self._arriving(name):
                        # On its way to a worker (another match here, or the ladder, moved it meanwhile).
                        await self.arrivals([name])
                        if name not in self.sessions and self.elsewhere(name) is None:
                            raise _not_arrived(name)
                    if name in self.hosted:
                        bot = self.hosted[name].factory(bot_seed(seed, index))
                        await self._warm(name, bot)
                        # A bot that searches for long on each move thinks on a thread, beside the loop.
                        seat_type = ThreadedInProcessSeat if getattr(bot, "thinks_off_loop", False) else InProcessSeat
                        seats.append(seat_type(bot, SeatInfo(index, name, 1, "hosted")))
                    elif (peer := self.elsewhere(name)) is not None and await self._seat_relayed(
                        peer, SeatInfo(index, name, 1, "remote"), seats, on_queued, wait
                    ):
                        pass  # (connected to another worker, and seated there; one that moved here is seated below)
                    elif name not in self.sessions and self.registry is not None:
                        seats.append(self.registry.seat(name, index))  # a live session under the name wins
                    else:
                        session = self.sessions[name]
                        if session in locked:
                            raise HubError("bad_params", f"remote bot {name!r} cannot take two seats of one match")
                        if session.busy.locked() and not wait:
                            raise HubError("busy", f"{name!r} is playing another match")
                        await session.take(None if on_queued is None else functools.partial(on_queued, name))
                        locked.append(session)
                        seats.append(RemoteSeat(session, SeatInfo(index, name, 1, "remote")))
                seats.sort(key=lambda seat: seat.info.seat)  # (taken in the order of the names)
                if self.stopping:
                    raise HubError("stopping", STOPPING)
                record = MatchRecord(
                    match_id="",
                    game=game,
                    seats=tuple(s.info for s in seats),
                    time_control=tc,
                    seed=seed,
                    seed_sha256=seed_hash(seed),
                    started_at=datetime.now(UTC),
                    rated=rated,
                    seed_chosen=seed_chosen,
                    seed_sealed=seed_hash(seed) in self.sealed,
                )
                if self.store is not None:
                    try:
                        await self.store.start_match(record)
                    except (sqlite3.Error, StoreError) as exc:
                        problem = store_problem(exc)
                        message = f"the server could not record a new match: {problem}; try again later"
                        if problem != self.store_fault:  # one line per fault, not one per attempt
                            log(f"arena: {message} ({' vs '.join(bot_names)}, {game.name})")
                            self.store_fault = problem
                        await asyncio.sleep(STORE_FAULT_PAUSE)  # no busy loop of retries (the ladder) while it lasts
                        raise HubError("store", message) from None
                    if self.store_fault is not None:
                        log(f"arena: the database records matches again (the fault was: {self.store_fault})")
                        self.store_fault = None
                    if self._unsettled:
                        await self._store_unsettled()
                else:
                    record.match_id = f"local-{next(self._local_ids)}"
            except BaseException:
                for session in locked:
                    session.busy.release()
                for seat in seats:
                    if isinstance(seat, (SubprocessSeat, PeerSeat)):
                        await seat.close()
                raise
            running = RunningMatch(record, MatchControl())
            if self.stopping:  # the shutdown began while the match was being stored: it ends at once
                running.control.abort(self.stop_reason)
            self.running[record.match_id] = running
            running.task = asyncio.ensure_future(self._run(running, seats, locked))
        for waiter in self._next_match.pop(game.name, []):
            if not waiter.done():
                waiter.set_result(record.match_id)
        return running

    async def _seat_relayed(
        self,
        peer: Any,
        info: SeatInfo,
        seats: list[Seat],
        on_queued: Callable[[str, int], Awaitable[None]] | None,
        wait: bool,
    ) -> bool:
        """Seat a bot connected to another worker (``peer``, its directory entry) through that worker's relay.

        That worker relays the seat's turns to the bot and its answers back (``arena_server.seats.peer``),
        and holds it to one match at a time as for its own. A bot that follows redirects and is idle there
        is instead sent here (this worker's own port): this waits for it to reconnect and returns False,
        and the caller seats it as a bot of this worker's. One that reconnects elsewhere is relayed from there.

        Returns:
            True when the bot is seated through the relay (the seat is in ``seats``).
        """
        name = info.bot_name
        peers = self.peers
        assert peers is not None
        if any(isinstance(s, PeerSeat) and s.info.bot_name == name for s in seats):
            raise HubError("bad_params", f"remote bot {name!r} cannot take two seats of one match")
        offer = (peers.port, peers.me) if peer.redirects and peers.port and peers.me is not None else None
        for attempt in range(3):
            relayed = PeerSeat(peers.socket_dir, peer, info, offer if attempt == 0 else None)
            seats.append(relayed)
            try:
                await relayed.claim(on_queued, wait)
                return True
            except RelayBusy as exc:
                raise HubError("busy", str(exc)) from None
            except RelayRefused as exc:
                raise HubError("unknown_bot", str(exc)) from None
            except RelayMoved:
                seats.remove(relayed)
                await relayed.close()

            # On its way here, or moved elsewhere by another match. The directory may still show where it was
            # (the writer's notice of the move and the relay's answer come on different sockets): wait for a
            # session here or a settled new entry.
            def unsettled(left: str = peer.key) -> bool:
                now = peers.directory.get(name)
                elsewhere = now is not None and now.key != left and not now.moving and now.worker != peers.me
                return name not in self.sessions and not elsewhere

            await _wait_while(unsettled)
            if name in self.sessions:
                return False
            peer = self.elsewhere(name)
            if peer is None:
                break
        raise _not_arrived(name)

    async def _warm(self, name: str, bot: Any) -> None:
        """Run a hosted bot's one-off first-match work (``warm_up()``) on a worker thread, once per process.

        numba compiles the tic-tac-toe searches the first time they run: up to
        two seconds, during which the event loop, every other match and every
        remote bot would wait (the bot's own ``on_match_start`` would do it on
        the loop). Matches with that bot wait here instead, and the loop runs
        on. A ``warm_up`` that fails is left to the match itself to meet.
        """
        warm_up = getattr(bot, "warm_up", None)
        if warm_up is None:
            return
        done = self._warming.get(name)
        if done is None:
            done = self._warming[name] = asyncio.ensure_future(asyncio.to_thread(_quietly, warm_up))
        if not done.done():
            await asyncio.shield(done)

    @contextlib.asynccontextmanager
    async def sealed_seed(self, seed: str, reveal: Callable[[], bool] = lambda: True) -> AsyncIterator[None]:
        """Keep ``seed`` secret across every match started with it inside the block.

        For duplicate sets (the ladder's Liar's Dice: the same dice, seats
        rotated): revealing the seed at the end of the first match would tell
        the bots of the next one every die. Inside the block the matches end
        without revealing it (``MatchEnded.seed`` and the stored seed stay
        empty); when the block exits it is written to all of them, unless
        ``reveal()`` says the set is unfinished (a tournament stopped halfway
        replays the rest of the set with the same seed when it resumes).
        """
        key = seed_hash(seed)
        self.sealed[key] = self.sealed.get(key, 0) + 1
        try:
            yield
        finally:
            left = self.sealed.get(key, 1) - 1
            if left > 0:
                self.sealed[key] = left
            else:
                self.sealed.pop(key, None)
                if self.store is not None and reveal():
                    await asyncio.shield(self.store.reveal_seed(seed))

    async def next_match(self, game: str) -> str:
        """Wait for the next match of ``game`` to start; return its id.

        On a multi-worker server, the next one any worker starts: this hub's own, or another's,
        which the store writer reports (:attr:`peers`).
        """
        waiter: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._next_match.setdefault(game, []).append(waiter)
        if self.peers is None:
            return await waiter
        elsewhere = asyncio.ensure_future(self.peers.next_match(game))
        try:
            await asyncio.wait({waiter, elsewhere}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not elsewhere.done():
                elsewhere.cancel()
            if not waiter.done():
                waiter.cancel()
                waiters = self._next_match.get(game, [])
                if waiter in waiters:
                    waiters.remove(waiter)
        return waiter.result() if waiter.done() and not waiter.cancelled() else elsewhere.result()

    async def _run(self, running: RunningMatch, seats: list[Seat], locked: list[RemoteSession]) -> MatchRecord:
        record = running.record
        commit_error = ""

        async def commit(finished: MatchRecord) -> None:
            """Store the end of the match and its rating change, before anyone is told (the referee's on_end)."""
            nonlocal commit_error
            if self.store is None:
                return
            # Ladder (issue 5): a rated match and its rating change commit together, with the offender's
            # failure report; the stderr logs follow after the seats stopped (see below).
            # A snapshot: the write may wait for the store's lock, and must store what the bots will hear.
            snapshot = dataclasses.replace(finished)
            hook = chain_hooks(rating_change(snapshot), seat_outcomes(snapshot, seats, logs=False))
            store = self.store

            async def write() -> None:
                await store.finish_match(snapshot, hook)
                running.committed = True  # set even if whoever awaits this was cancelled meanwhile

            running.commit_snapshot = snapshot
            running.commit = asyncio.ensure_future(write())
            try:
                await asyncio.shield(running.commit)
            except (sqlite3.Error, StoreError, OSError) as exc:
                commit_error = store_problem(exc)
                raise StoreError(commit_error) from None

        try:
            await asyncio.sleep(0)  # let spectators already waiting for this match subscribe first
            # The referee fills in this very record and commits it through ``commit`` before any seat hears
            # the end; a failed commit voids the match, and that is what the seats are told.
            await play_match(
                record.game,
                seats,
                record.time_control,
                record.seed,
                record.match_id,
                running.control,
                (),
                record.rated,
                record=record,
                on_end=commit,
            )
        except BaseException as exc:
            commit_error = commit_error or f"the server failed while running the match: {exc!r}"
        finally:
            for session in locked:
                if session.busy.locked():
                    session.busy.release()
            await self._settle(running, seats, commit_error)
            for seat in seats:
                if isinstance(seat, (SubprocessSeat, PeerSeat)):
                    with contextlib.suppress(Exception):
                        await seat.close()
            self.running.pop(record.match_id, None)
            for queue in running.watchers:
                queue.put_nowait(("closed", None))  # one more than the cap at most
        return record

    async def _settle(self, running: RunningMatch, seats: list[Seat], commit_error: str) -> None:
        """After the seats were told: store the stderr logs, or mark an uncommitted match aborted (one log line)."""
        record = running.record
        store = self.store
        if store is None or not record.match_id.isdigit():
            return
        if running.commit is not None and not running.commit.done():
            with contextlib.suppress(BaseException):
                await asyncio.shield(running.commit)  # cancelled while committing: let the commit decide
        if running.committed:
            if running.commit_snapshot is not None and running.commit_snapshot is not record:
                # Cancelled after the commit went through: the stored ending is the true one.
                _copy_ending(running.commit_snapshot, record)
            logs = seat_outcomes(record, seats, failure=False)
            if logs is not None:
                try:
                    await asyncio.shield(store.run_in_transaction(logs))
                except Exception as exc:  # the match itself is recorded; only its logs are missing
                    log(f"arena: match {record.match_id} is recorded, but its bots' logs are not: {store_problem(exc)}")
            return
        problem = commit_error or "the match could not be completed"
        told = record.termination is not None and record.reason.startswith(COMMIT_FAILED)
        if not told:
            void_record(record, problem)  # never store an ending that was not committed with its rating
        try:
            await asyncio.shield(store.finish_match(record))
            after = "it is stored as aborted"
        except Exception as exc:
            self._unsettled.append(record)
            after = (
                f"it stays 'running' until the database accepts writes again, or the next start marks it "
                f"aborted ({store_problem(exc)})"
            )
        log(
            f"arena: could not record the end of match {record.match_id} ({problem}); "
            f"{'its bots were told it was aborted' if told else 'it is void'}; {after}"
        )

    async def _store_unsettled(self) -> None:
        """Store the matches voided while the database refused writes, now that it accepts them."""
        assert self.store is not None
        pending, self._unsettled = self._unsettled, []  # taken at once: concurrent callers never share one
        for index, record in enumerate(pending):
            try:
                await asyncio.shield(self.store.finish_match(record))
            except Exception:
                self._unsettled.extend(pending[index:])  # still refused: again after the next successful write
                return

    async def shutdown(self, reason: str = "the server is shutting down", grace: float = 10.0) -> None:
        """Stop accepting matches, abort the running ones and wait (up to ``grace`` s) until they are recorded.

        It also waits for the matches being started as it begins (they stop at their next ``stopping``
        check, or join :attr:`running` already aborted), and for the ``CreateMatch`` calls passed on to
        another worker (:meth:`pending`), whose answer is that worker's aborted match.

        Every seat is told the match was aborted with ``reason`` before this
        returns. A match still not done after ``grace`` is cancelled and
        recorded as aborted directly. Then, for what is left of ``grace``, it
        waits for the remote bots that were thinking about a Turn to send
        their (now late) answer or hang up: such a bot reads its MatchEnded
        only when it is done, and the stream must still be open then
        (closing it from the server drops what the bot has not read yet).
        """
        self.stopping = True
        self.stop_reason = reason
        deadline = time.monotonic() + grace
        playing = [s for s in self.sessions.values() if s.busy.locked() or s.seat is not None]
        while (self.running or self._pending) and time.monotonic() < deadline - 1.0:
            # Matches being stored when the shutdown began join self.running (already aborted) meanwhile.
            for running in list(self.running.values()):
                running.control.abort(reason)
            waits = [r.task for r in self.running.values() if r.task is not None] + list(self._pending)
            if not waits:
                break
            await asyncio.wait(waits, timeout=max(deadline - 1.0 - time.monotonic(), 0.1))
        stuck = [r for r in self.running.values() if r.task is not None and not r.task.done()]
        for running in stuck:
            assert running.task is not None
            running.task.cancel()
        if stuck:
            left = max(deadline - time.monotonic(), 0.1)
            await asyncio.wait([r.task for r in stuck if r.task is not None], timeout=left)
        for waiter in [w for waiters in self._next_match.values() for w in waiters]:
            waiter.cancel()
        self._next_match.clear()
        thinking = [asyncio.ensure_future(s.wait_settled()) for s in playing if not s.is_settled]
        if thinking:
            await asyncio.wait(thinking, timeout=max(deadline - time.monotonic(), 0.0))
            for waiter_task in thinking:
                waiter_task.cancel()
        if playing:  # a moment to read what is already on the way, before the streams close
            await asyncio.sleep(min(SHUTDOWN_LINGER, max(deadline - time.monotonic(), 0.0)))
        if self._unsettled and self.store is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._store_unsettled(), max(deadline - time.monotonic(), 0.1))

    async def end_streams(self, timeout: float = 1.0) -> None:
        """End the stream of every connected bot, as a stopping server does after :meth:`shutdown`.

        Each session is closed as :meth:`RemoteSession.server_stopping`: its handler writes what is still
        queued for the bot (the MatchEnded of an aborted match has been written already: :meth:`shutdown`
        waits for that), then ends the stream with the shutdown's status, so that the bot knows the server
        stopped on purpose rather than the connection breaking. Bots that are idle or have not said Hello
        yet are ended the same way. Waits at most ``timeout`` seconds for the handlers (they take
        milliseconds unless a bot does not read its stream); what is left is for the transport's own stop.
        """
        self.streams_ended = True
        ending = list(self.streams.items())
        for session, _ended in ending:
            session.server_stopping(self.stop_reason)
        waiting = [ended for _session, ended in ending if not ended.done()]
        if waiting and timeout > 0:
            await asyncio.wait(waiting, timeout=timeout)

    # -- spectators ---------------------------------------------------------------------------------

    async def watch(self, match_id: str) -> AsyncIterator[tuple[str, Any]]:
        """Yield ("started", record), ("moves", (moves, spectator_observation))..., ("ended", record).

        Live matches stream public information only until the end. A spectator
        more than :data:`MAX_SPECTATOR_BACKLOG` events behind gets
        ``("dropped", reason)`` instead and nothing after it. A stored
        match yields its header and its full record at once. A match another
        worker process runs (``--workers``) is followed through :attr:`peers`.
        """
        running = self.running.get(match_id)
        if running is None:
            owner = await self.peers.owner(match_id) if self.peers is not None else None
            if owner is not None and owner != self.peers.me:  # another worker runs it: its feed, relayed
                relayed = False
                async for event in self.peers.watch(owner, match_id, self.store):
                    relayed = True
                    yield event
                if relayed:
                    return
            elif owner is not None:  # this worker's own, stored a moment before it is registered here
                for _ in range(200):
                    await asyncio.sleep(0.01)
                    running = self.running.get(match_id)
                    if running is not None:
                        break
        if running is None:
            stored = await self.store.get_match(match_id) if self.store is not None else None
            if stored is None:
                raise HubError("unknown_match", f"no match with id {match_id!r}")
            yield "started", stored
            if stored.termination is not None:
                yield "ended", stored
            return
        queue = SpectatorQueue()

        def listen(kind: str, payload: Any) -> None:
            if queue.dropped:
                return
            if kind == "moves":  # the spectator's view at this very moment
                moves, state = payload
                payload = (moves, state.observation(None))
            queue.put_nowait((kind, payload))
            if queue.dropped:
                # Too slow: what it did not read is freed and it hears why, instead of buffering without limit.
                queue.put_nowait(
                    (
                        "dropped",
                        f"too slow, dropped: this spectator fell {MAX_SPECTATOR_BACKLOG} moves behind "
                        f"match {match_id}; read the stream as fast as it comes, or get the record with "
                        "GetMatch once the match is over",
                    )
                )
                if listen in control.listeners:
                    control.listeners.remove(listen)

        # Subscribe and take the catch-up in one step: later moves arrive through the queue only.
        control = running.control
        caught_up, seen = _catch_up(running.record.game, control.state)
        control.listeners.append(listen)
        running.watchers.append(queue)
        try:
            yield "started", running.record
            if caught_up and seen is not None:
                yield "moves", (caught_up, seen)
            while True:
                kind, payload = await queue.get()
                if kind == "dropped":
                    yield kind, payload
                    return
                if kind == "closed":
                    # Joined after the referee's "ended": the record is complete by now.
                    yield "ended", running.record
                    return
                yield kind, payload
                if kind == "ended":
                    return
        finally:
            if queue in running.watchers:
                running.watchers.remove(queue)
            if listen in control.listeners:
                control.listeners.remove(listen)

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run a background task the hub keeps a reference to."""
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


_MERGE_AFTER = 256
"""Events a spectator may have pending one by one; later moves merge into the last pending event."""


class SpectatorQueue:
    """One spectator's pending events; past :data:`_MERGE_AFTER`, ``moves`` events merge; the backlog is capped.

    Attributes:
        dropped: Set once more than :data:`MAX_SPECTATOR_BACKLOG` moves were waiting;
            the pending events are then freed.
    """

    def __init__(self) -> None:
        self._items: collections.deque[tuple[str, Any]] = collections.deque()
        self._ready = asyncio.Event()
        self.backlog = 0
        """Moves waiting to be taken."""
        self.dropped = False

    def put_nowait(self, item: tuple[str, Any]) -> None:
        kind, payload = item
        if kind == "dropped":
            self._items.clear()
            self.backlog = 0
        elif kind == "moves":
            moves, seen = payload
            self.backlog += len(moves)
            if self.backlog > MAX_SPECTATOR_BACKLOG:
                self.dropped = True
                return
            if len(self._items) >= _MERGE_AFTER and self._items[-1][0] == "moves":
                pending, _ = self._items[-1][1]
                pending.extend(moves)  # our own list (made below), so extending it in place is safe
                self._items[-1] = ("moves", (pending, seen))
                return
            item = ("moves", (list(moves), seen))
        self._items.append(item)
        self._ready.set()

    async def get(self) -> tuple[str, Any]:
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        kind, payload = self._items.popleft()
        if kind == "moves":
            self.backlog -= len(payload[0])
        return kind, payload


def _catch_up(game: Game, state: State | None) -> tuple[list[PublicMove], Any]:
    """The public moves so far and the spectator's view now, from the live state's history."""
    if state is None or not state.history:
        return [], None
    moves = [
        PublicMove(player, action, game.action_to_string(player, action))
        for player, action in state.history
        if player != CHANCE or game.chance_is_public
    ]
    return moves, state.observation(None)


def _quietly(work: Callable[[], object]) -> None:
    """Call ``work()``, ignoring its failure (a hosted bot's warm-up: its match meets the failure itself)."""
    with contextlib.suppress(Exception):
        work()


def store_problem(exc: BaseException) -> str:
    """What the database said, in one short phrase (e.g. "database or disk is full")."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


_LOG = RepeatedLines(_stderr)


def log(line: str) -> None:
    """One line on the server's stderr; the same line again (a failure repeating) is counted: ``… ×12``."""
    _LOG.emit(line)


def flush_log() -> None:
    """Write the count of a repeated last log line (at shutdown)."""
    _LOG.flush()


def _copy_ending(source: MatchRecord, target: MatchRecord) -> None:
    target.termination = source.termination
    target.offender = source.offender
    target.reason = source.reason
    target.returns = source.returns
    target.ended_at = source.ended_at
