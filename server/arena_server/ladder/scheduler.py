"""The continuous ladder: picks who plays whom, runs rated matches, refits ratings, pauses failing bots.

One :class:`Ladder` runs inside ``arena serve`` over one or more games (each
game with its parameters is a rating pool). Matchmaking, per pool:

1. A pair is drawn from ALL eligible pairs with a weight that favours the
   pairs whose outcome is least certain (:func:`pair_weights`): close
   ratings, wide intervals, few games between the two. A floor of
   ``PAIR_FLOOR`` times the largest weight keeps every pair reachable.
   Concurrency is filled greedily: each pick takes the bots still free, so
   disjoint pairs play side by side.
2. Coverage: when every pair the free bots could form has been played much
   more often than some pair that waits only for a busy bot
   (:data:`BALANCE_FACTOR`), the free bots wait for the next match to end
   instead of replaying their pair; otherwise two matches of equal length
   re-pair the same bots forever.
3. Seats alternate: the pair's previous games decide who sits first. Games
   with dice (Liar's Dice) are played as duplicate matches: the same seed
   twice with the seats swapped (for more than two players, every rotation),
   so the luck of the dice cancels out.

Ratings are refitted only in the background (:class:`RatingRefitter`, every
``refit_interval`` seconds while a pool has new results, and once more when
the ladder or the refitter stops), never when somebody reads them.

Concurrency is limited overall and per bot (a remote bot plays one match at
a time anyway). A bot that fails ``pause_after`` rated matches in a row
(timeout, crash, disconnect, protocol error or illegal action) is paused with
the last reason; it plays again once a newer version is registered. The run
of failures is counted in the store (``failures_in_a_row``), over every
rated match of that version, whichever worker refereed it and before a
restart too.

On ``arena serve --workers N`` the one ladder runs in the main process
(:class:`~arena_server.ladder.coordinator.LadderCoordinator`, this class with
the global view) and the workers play its units. The ladder never waits for a
remote bot busy in a match it did not start (a challenge): the unit is refused
at once, and the bot is left alone for :data:`PEER_REST` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

import arena_server.store.ratings as ls
from arena_client import SeatInfo, Termination, TimeControl
from arena_games import Game
from arena_server.matches.hub import Hub, HubError, log
from arena_server.ratings.fit import ELO_PER_UNIT, PRIOR_SD_ELO, Z95
from arena_server.referee.records import MatchRecord
from arena_server.referee.seeds import new_seed

FAILURES = frozenset(
    {
        Termination.TIMEOUT,
        Termination.CRASH,
        Termination.DISCONNECT,
        Termination.PROTOCOL_ERROR,
        Termination.ILLEGAL_ACTION,
    }
)
"""Endings that count towards pausing the offending bot."""
_FAILURE_CODES = frozenset(int(t) for t in FAILURES)
"""The same, as the store keeps them."""

DICE_GAMES = frozenset({"liars_dice"})
"""Games played as duplicate matches (same seed, seats rotated)."""

PAIR_FLOOR = 0.05
"""Every eligible pair is drawn with at least this fraction of the most wanted pair's weight."""
MAX_CANDIDATES = 200
"""Pools with more eligible bots weigh a random sample of this many per pick."""
SCRATCH_KEPT = 4
"""Candidate counts whose pick arrays the ladder keeps (:class:`PairScratch`; 1.4 MB for 200 candidates)."""
BALANCE_FACTOR = 2
"""Free bots wait (until the next match ends) rather than replay a pair played more than
``BALANCE_FACTOR * g + BALANCE_FACTOR`` times while a pair with ``g`` games waits for a busy bot."""

PEER_REST = 1.0
"""Seconds the ladder leaves alone a remote bot connected to another process after finding it busy there
(it cannot see that bot's lock; the claim says so, at once)."""
RPS_DRAW_BAND_PER_ROUND = 0.02
"""Ladder RPS matches are drawn when the score difference is within 2% of the rounds (20 of 1000)."""


def ladder_game(game: Game) -> Game:
    """The game as the ladder plays it: RPS gets its draw band (20 per 1000 rounds) unless one was given."""
    if game.name == "rps" and int(game.params.get("draw_band", 0)) == 0:
        params = dict(game.params)
        params["draw_band"] = max(1, round(RPS_DRAW_BAND_PER_ROUND * int(params["rounds"])))
        return type(game)(**params)
    return game


@dataclass
class LadderConfig:
    """How the ladder schedules.

    Attributes:
        games: The games (with parameters) to run ladders for.
        concurrency: Matches running at once, over all games.
        per_bot: Matches one bot may play at once.
        time_control: Clock for ladder matches (the hub default when None).
        pause_after: Consecutive failures that pause a bot.
        refit_interval: Seconds between refits of dirty pools.
        seed: Seeds the pairing RNG (match seeds stay random).
        bots: Restrict the ladder to these bot names (empty: every bot that plays the game).
        min_interval: Seconds between the starts of two ladder matches (0: as fast as the bots
            allow). ``arena serve`` paces its ladder so that a server left running does not fill
            the disk with millions of matches of settled pairs.
    """

    games: Sequence[Game]
    concurrency: int = 2
    per_bot: int = 1
    time_control: TimeControl | None = None
    pause_after: int = 3
    refit_interval: float = 2.0
    seed: int | None = None
    bots: Sequence[str] = ()
    min_interval: float = 0.0


class RatingRefitter:
    """Refits dirty Bradley-Terry pools in the background, and once more when stopped.

    The :class:`Ladder` runs one; ``arena serve --no-ladder`` starts one on its
    own so that challenge results are still rated. Reads never refit.
    """

    def __init__(
        self,
        store: Any,
        interval: float = 2.0,
        after: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Set up (nothing runs until :meth:`start`).

        Args:
            store: The :class:`~arena_server.store.database.Store`.
            interval: Seconds between checks for dirty pools.
            after: Run after every check (the ladder reloads its ratings).
        """
        self.store = store
        self.interval = interval
        self.after = after
        self.refits = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> RatingRefitter:
        """Start the background loop (returns self)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._loop())
        return self

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.refit_now()

    async def refit_now(self) -> list[str]:
        """Refit every dirty pool now; a failure is logged in one line and retried next time."""
        try:
            pools = await ls.refit_dirty(self.store)
            self.refits += len(pools)
            if self.after is not None:
                await self.after()
            return pools
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the server keeps going; the pool stays dirty and is retried
            log(f"arena: rating refit failed (retried later): {exc!r}")
            return []

    def cancel(self) -> None:
        """Stop the background loop (no final refit; see :meth:`stop`)."""
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        """Stop the loop, then refit once more so the stored table is current."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self.refit_now()


@dataclass
class _BotInfo:
    rating: float = 1500.0
    ci: float = Z95 * PRIOR_SD_ELO
    games: int = 0


@dataclass
class _Pool:
    game: Game
    key: str
    bots: dict[str, _BotInfo] = field(default_factory=dict)
    pair_games: dict[tuple[str, str], int] = field(default_factory=dict)


class Ladder:
    """Runs rated matches continuously until :meth:`stop`."""

    def __init__(self, hub: Hub, config: LadderConfig) -> None:
        """Set up for ``hub`` (nothing runs until :meth:`start`)."""
        if hub.store is None:
            raise ValueError("the ladder needs a store")
        if config.concurrency < 1 or config.per_bot < 1:
            raise ValueError("concurrency and per_bot must be at least 1")
        self.hub = hub
        self.store = hub.store
        self.config = config
        self.pools = [_Pool(ladder_game(g), ls.pool_key(ladder_game(g))) for g in config.games]
        self.rng = random.Random(config.seed)
        self.active: dict[str, int] = {}
        self.paused: dict[str, tuple[int, str]] = {}
        self.units: set[asyncio.Task[None]] = set()
        self.matches_played = 0
        self._wake = asyncio.Event()
        self._halted = asyncio.Event()
        self._stopping = False
        self._turn = 0
        self._task: asyncio.Task[None] | None = None
        self.refitter = RatingRefitter(self.store, config.refit_interval, self.refresh)
        self._loaded_pairs = False
        self._wanted_sorted = sorted(set(config.bots))
        """``config.bots``, sorted, for :meth:`eligible` (which a pick calls over every bot)."""
        self._scratch: dict[int, PairScratch] = {}
        """The pairs of a two-seat pick's ``m`` candidates and its arrays (:class:`PairScratch`), by ``m``: the
        last :data:`SCRATCH_KEPT` sizes (while matches play, the free bots' count changes from pick to pick)."""
        self._pairs: dict[int, tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = {}
        """``np.triu_indices(m, 1)`` by ``m``, for :meth:`_balanced` (the last :data:`SCRATCH_KEPT` sizes)."""
        self._resting: dict[str, float] = {}
        """Remote bots of other workers found busy there -> ``time.monotonic()`` until which they are left alone."""

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.ensure_future(self.run())

    async def run(self) -> None:
        await self.refresh()
        self.refitter.start()
        try:
            while not self._stopping:
                launched = False
                while len(self.units) < self.config.concurrency and not self._stopping:
                    try:
                        unit = self.pick()
                    except Exception as exc:  # keep scheduling; say what went wrong
                        log(f"arena: ladder matchmaking failed: {exc!r}")
                        unit = None
                    if unit is None:
                        break
                    pool, names = unit
                    self._launch(pool, names)
                    launched = True
                    if self.config.min_interval > 0:
                        # Only halt() cuts the pause short (a finished match does not).
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self._halted.wait(), self.config.min_interval)
                if not launched or len(self.units) >= self.config.concurrency:
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), 1.0)
                else:
                    await asyncio.sleep(0)
        finally:
            self.refitter.cancel()

    def halt(self) -> None:
        """Stop scheduling new matches (running ones go on)."""
        self._stopping = True
        self._halted.set()
        self._wake.set()

    async def stop(self) -> None:
        """Stop scheduling; running matches are left to the hub's shutdown, then waited for.

        Finally every dirty pool is refitted once more, so the stored table is
        current when the server stops.
        """
        self.halt()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        if self.units:
            await asyncio.wait(list(self.units), timeout=15)
        await self.refitter.stop()

    async def refresh(self) -> None:
        """Reload ratings, pair counts and paused bots from the store."""
        conn = self.store.conn
        self.paused = await ls.paused_bots(conn)
        for pool in self.pools:
            rows = await ls.leaderboard(conn, pool.key, limit=1_000_000)
            for row in rows:
                info = pool.bots.setdefault(row.bot, _BotInfo())
                # A bot new since the last fit is stored with ci 0 until the refit: keep the prior.
                info.rating, info.ci = row.rating, row.ci if row.ci > 0 else Z95 * PRIOR_SD_ELO
                info.games = max(info.games, row.games)
            if not self._loaded_pairs:  # afterwards the ladder counts its own matches
                for pair in await ls.load_pairs(conn, pool.key):
                    pool.pair_games[(pair.a, pair.b)] = pair.games
        self._loaded_pairs = True

    # -- matchmaking ------------------------------------------------------------------------------

    def eligible(self, pool: _Pool, ignore_busy: bool = False) -> list[str]:
        """Bots that may start a match in ``pool`` now (with ``ignore_busy``: once their matches end)."""
        hub = self.hub
        out = []
        now = time.monotonic()
        # With --ladder-bots only those names are looked at (games_of is None for one nobody can seat); else every
        # bot this process can seat, and on several workers the remote bots connected to any of them.
        for name in self._wanted_sorted or hub.all_bot_names():
            games = hub.games_of(name)
            if games is None or (games and pool.game.name not in games):
                continue
            if name in self.paused:
                continue
            limit = self.config.per_bot
            session = hub.sessions.get(name)
            remote = session if session is not None else hub.elsewhere(name)
            if remote is not None:
                if getattr(remote, "guest", True):
                    continue  # guests never play rated games
                if not ignore_busy and (
                    session.busy.locked() if session is not None else self._resting.get(name, 0.0) > now
                ):
                    continue  # a remote bot plays one match at a time
                limit = 1
            if self.active.get(name, 0) >= limit and not ignore_busy:
                continue
            out.append(name)
        return out

    def pick(self) -> tuple[_Pool, list[str]] | None:
        """The next pool and seating to play, or None when nobody can play now."""
        for offset in range(len(self.pools)):
            pool = self.pools[(self._turn + offset) % len(self.pools)]
            names = self._pick_in(pool)
            if names is not None:
                self._turn = (self._turn + offset + 1) % len(self.pools)
                return pool, names
        return None

    def _pick_in(self, pool: _Pool) -> list[str] | None:
        n = pool.game.num_players
        names = sorted(self.eligible(pool))
        if len(names) < n:
            return None
        if n == 2 and not self._balanced(pool, names):
            return None
        if len(names) > MAX_CANDIDATES:  # big pools: weigh a random sample (the weights are O(bots²))
            names = sorted(self.rng.sample(names, MAX_CANDIDATES))
        m = len(names)
        if n == 2:
            # Only the pairs i < j are weighed and drawn from (half a matrix, without its zeros), in arrays
            # kept from pick to pick.
            scratch = self._scratch.get(m)
            if scratch is None:
                if len(self._scratch) >= SCRATCH_KEPT:
                    del self._scratch[next(iter(self._scratch))]  # (the size made longest ago)
                scratch = self._scratch[m] = PairScratch(m)
            ratings, cis = _ratings(pool, names)
            weight = upper_weights(ratings, cis, _games_upper(pool, names, scratch.games), scratch)
            pair = self._draw(weight, scratch.spare)
            chosen = [int(scratch.rows[pair]), int(scratch.cols[pair])]
        else:
            # More seats: a first pair by weight, then each further seat by its weight with those chosen.
            weight = self._weights(pool, names)
            flat = self._draw(weight.ravel())
            chosen = [flat // m, flat % m]
            symmetric = weight + weight.T
            for _ in range(n - 2):
                extra = symmetric[chosen].sum(axis=0)
                extra[chosen] = 0.0
                chosen.append(self._draw(extra))
        return self._seat(pool, [names[i] for i in chosen])

    def _weights(self, pool: _Pool, names: list[str]) -> np.ndarray[Any, Any]:
        """The pair weights among ``names`` (upper triangle; 0 elsewhere), for a game of more than two seats."""
        ratings, cis = _ratings(pool, names)
        return pair_weights(ratings, cis, np.zeros((len(names), len(names))))

    def _balanced(self, pool: _Pool, free: list[str]) -> bool:
        """False when the free bots should wait for a busy one instead of replaying an over-played pair."""
        if not self.units or len(free) > MAX_CANDIDATES:
            return True  # nobody is busy (or the pool is so big that free bots always have fresh pairs)
        everyone = sorted(set(self.eligible(pool, ignore_busy=True)) | set(free))
        if len(everyone) <= len(free) or len(everyone) > MAX_CANDIDATES:
            return True  # nobody to wait for (or a pool so big that free bots always have fresh pairs)
        pairs = self._pairs.get(len(everyone))
        if pairs is None:  # (the pairs of m candidates, kept: this runs at every pick while a match plays)
            if len(self._pairs) >= SCRATCH_KEPT:
                del self._pairs[next(iter(self._pairs))]  # (the size made longest ago)
            pairs = self._pairs[len(everyone)] = np.triu_indices(len(everyone), 1)
        rows, cols = pairs
        games = _games_upper(pool, everyone, np.empty(len(rows)))
        free_set = set(free)
        is_free = np.fromiter((name in free_set for name in everyone), bool, len(everyone))
        both_free = is_free[rows] & is_free[cols]
        best_free = float(games[both_free].min())
        waiting = float(games[~both_free].min())
        return best_free <= BALANCE_FACTOR * waiting + BALANCE_FACTOR

    def _draw(self, weight: np.ndarray[Any, Any], spare: np.ndarray[Any, Any] | None = None) -> int:
        """An index drawn in proportion to ``weight`` (its running sum written to ``spare``, if given)."""
        total = float(weight.sum())
        x = self.rng.random() * total
        index = int(np.searchsorted(np.cumsum(weight, out=spare), x, side="right"))
        return min(index, len(weight) - 1)

    def _seat(self, pool: _Pool, group: list[str]) -> list[str]:
        """Seat order: alternate by how often this group has met."""
        group = sorted(group)
        key = (group[0], group[1]) if len(group) == 2 else (group[0], "|".join(group[1:]))
        met = pool.pair_games.get(key, 0)
        rotation = met % len(group)
        return group[rotation:] + group[:rotation]

    # -- running ----------------------------------------------------------------------------------

    def _launch(self, pool: _Pool, names: list[str]) -> None:
        for name in names:
            self.active[name] = self.active.get(name, 0) + 1
        task = asyncio.ensure_future(self._unit(pool, names))
        self.units.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self.units.discard(t)
            for name in names:
                self.active[name] -= 1
            self._wake.set()

        task.add_done_callback(done)

    async def _unit(self, pool: _Pool, names: list[str]) -> None:
        """One scheduled unit: a match, or the duplicate set of a dice game."""
        try:
            await self._play_unit(pool, names)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the ladder must outlive any one match
            log(f"arena: ladder match between {', '.join(names)} failed: {exc!r}")
            await asyncio.sleep(1.0)

    async def _play_unit(self, pool: _Pool, names: list[str]) -> None:
        """Play the unit here (:func:`play_unit`); a busy remote bot of another worker is left alone a while."""
        busy = await play_unit(
            self.hub, pool.game, names, self.config.time_control, lambda o: self._after(pool, o), self._halting
        )
        if busy:
            self._rest([name for name in busy if self.hub.elsewhere(name) is not None])

    def _halting(self) -> bool:
        return self._stopping

    def _rest(self, names: Sequence[str]) -> None:
        """Leave these remote bots alone for :data:`PEER_REST` seconds (found busy where they are connected)."""
        until = time.monotonic() + PEER_REST
        for name in names:
            self._resting[name] = until

    async def _after(self, pool: _Pool, record: Outcome) -> None:
        """Count a finished match of the ladder's, and pause its offender after ``pause_after`` failures in a row."""
        if record.termination is None or record.termination == Termination.ABORTED:
            return
        self.matches_played += 1
        names = [s.bot_name for s in record.seats]
        group = sorted(names)
        key = (group[0], group[1]) if len(group) == 2 else (group[0], "|".join(group[1:]))
        pool.pair_games[key] = pool.pair_games.get(key, 0) + 1
        for name in names:
            info = pool.bots.setdefault(name, _BotInfo())
            info.games += 1
            # Until the next refit, shrink the uncertainty as a lone new bot's would.
            info.ci = min(info.ci, Z95 * 400.0 / math.log(10) * 2.0 / math.sqrt(info.games))
        offender = record.offender
        if offender is None or record.termination not in FAILURES:
            return
        for seat in record.seats:
            if seat.seat != offender or seat.bot_name in self.paused:
                continue
            # Counted in the store, which holds every match of the bot's (those before a restart too), whichever
            # process refereed them.
            strikes = await ls.failures_in_a_row(
                self.store.conn, seat.bot_name, seat.bot_version, _FAILURE_CODES, self.config.pause_after
            )
            if strikes >= self.config.pause_after:
                reason = (
                    f"paused after {strikes} failed matches in a row "
                    f"(last: {Termination(record.termination).label} in match {record.match_id}: {record.reason}); "
                    "it plays again when a new version is registered"
                )
                await ls.pause_bot(self.store, seat.bot_name, seat.bot_version, reason)
                self.paused[seat.bot_name] = (seat.bot_version, reason)


class Outcome(NamedTuple):
    """What the ladder needs of a finished match (a :class:`MatchRecord` without its moves and seed).

    It is what a worker of ``arena serve --workers N`` sends the coordinator when a match it ran for
    the ladder ends (:mod:`arena_server.ladder.coordinator`).
    """

    match_id: str
    termination: Termination | None
    offender: int | None
    reason: str
    seats: tuple[SeatInfo, ...]

    @classmethod
    def of(cls, record: MatchRecord) -> Outcome:
        return cls(record.match_id, record.termination, record.offender, record.reason, tuple(record.seats))


async def play_unit(
    hub: Hub,
    game: Game,
    names: list[str],
    time_control: TimeControl | None,
    after: Callable[[Outcome], Awaitable[None]],
    halting: Callable[[], bool] = lambda: False,
) -> list[str]:
    """Play one scheduled unit on ``hub``: a rated match, or a dice game's duplicate set; the bots found busy.

    A dice game is played once per rotation of the seats, with one seed that stays sealed until the
    whole set is over (the next match's bots never see it). ``after`` is awaited with each match's
    :class:`Outcome` as it ends. A remote bot playing another match is never waited for: the unit
    stops, and its seating is returned so that the caller pairs someone else meanwhile. Any other
    refusal (a bot gone, the server stopping) ends the unit quietly, with nothing returned. So does
    ``halting()`` turning true between the matches of a set.
    """
    if game.name in DICE_GAMES:
        seed = new_seed()
        seatings = [names[i:] + names[:i] for i in range(len(names))]
        async with hub.sealed_seed(seed):  # revealed after the set, not to the next match's bots
            return await _play_seatings(hub, game, seatings, seed, time_control, after, halting)
    return await _play_seatings(hub, game, [names], None, time_control, after, halting)


async def _play_seatings(
    hub: Hub,
    game: Game,
    seatings: list[list[str]],
    seed: str | None,
    time_control: TimeControl | None,
    after: Callable[[Outcome], Awaitable[None]],
    halting: Callable[[], bool],
) -> list[str]:
    for seating in seatings:
        if halting() or hub.stopping:
            return []
        try:
            running = await hub.start_match(game, seating, time_control, seed, rated=True, wait=False)
        except HubError as exc:
            # (never waited for: the ladder pairs someone else meanwhile)
            return list(seating) if exc.code == "busy" else []
        if running.task is None:
            return []
        record = await asyncio.shield(running.task)
        await after(Outcome.of(record))
    return []


def _ratings(pool: _Pool, names: list[str]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The ratings of ``names`` in this pool and their 95% half-widths (a bot not rated yet: the prior)."""
    infos = [pool.bots.get(b) or _BotInfo() for b in names]
    return np.array([i.rating for i in infos]), np.array([i.ci for i in infos])


def _games_upper(pool: _Pool, names: list[str], games: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``games``, filled: ``games[k]`` is the rated games in this pool of the pair ``k`` of ``names`` (sorted).

    The pairs ``i < j`` row by row, as :class:`PairScratch` lists them.
    """
    games.fill(0.0)
    m = len(names)
    if len(pool.pair_games) < m * m // 2:
        index = {name: i for i, name in enumerate(names)}
        for (a, b), count in pool.pair_games.items():
            i, j = index.get(a), index.get(b)
            if i is not None and j is not None:
                if i > j:
                    i, j = j, i
                games[i * (2 * m - i - 1) // 2 + j - i - 1] = count  # the pair's place, row by row
    else:
        k = 0
        get = pool.pair_games.get
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                games[k] = get((a, b), 0)
                k += 1
    return games


class PairScratch:
    """The pairs ``i < j`` of ``m`` candidates, and the arrays a pick among them computes in.

    The pairs are listed row by row, as ``np.triu_indices(m, 1)`` lists them. A
    pick in a big pool weighs a sample of :data:`MAX_CANDIDATES`: 19,900
    pairs, 160 kB an array. Arrays of that size made afresh at every pick came
    from the system and went back to it, and the first touch of each of their
    pages faulted: more than half of a pick's time (``bench/bench_ladder.py``,
    docs/performance.md). The ladder keeps one of these and reuses it.
    """

    __slots__ = ("cols", "games", "m", "rows", "spare", "work")

    def __init__(self, m: int) -> None:
        self.m = m
        self.rows, self.cols = np.triu_indices(m, 1)
        k = len(self.rows)
        self.games = np.zeros(k)
        """Rated games of each pair (for the caller to fill: :func:`_games_upper`)."""
        self.work = np.empty((5, k))
        """Where :func:`upper_weights` computes; its answer is ``work[4]``."""
        self.spare = np.empty(k)
        """Free for the caller (the draw's running sum)."""


def pair_weights(
    ratings: np.ndarray[Any, Any], cis: np.ndarray[Any, Any], games: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """How much the ladder wants each pair to play: an upper-triangular matrix of weights (:func:`upper_weights`).

    Args:
        ratings: Elo ratings of the candidates.
        cis: Their 95% half-widths (Elo).
        games: ``games[i, j]`` (i < j): rated games the two have played.
    """
    m = len(ratings)
    scratch = PairScratch(m)
    weight = np.zeros((m, m))
    weight[scratch.rows, scratch.cols] = upper_weights(ratings, cis, games[scratch.rows, scratch.cols], scratch)
    return weight


def upper_weights(
    ratings: np.ndarray[Any, Any],
    cis: np.ndarray[Any, Any],
    games: np.ndarray[Any, Any],
    scratch: PairScratch,
) -> np.ndarray[Any, Any]:
    """How much the ladder wants each pair of ``scratch`` to play, computed in its arrays: ``scratch.work[4]``.

    The weight is the variance one more game between the two is expected to
    remove from their ratings, divided by ``sqrt(1 + games_ab)``::

        I = p (1 - p)   at the rating difference shrunk by its uncertainty,
        w = (v_a² I / (1 + v_a I) + v_b² I / (1 + v_b I)) / sqrt(1 + games_ab)

    with ``v`` a rating's variance (log-odds units, from its 95% interval).
    An outcome is worth most when the ratings are close (``I`` large), the
    intervals are wide (``v`` large) and the two have met rarely. Every pair
    then gets at least ``PAIR_FLOOR`` times the largest weight, so every pair
    stays reachable.

    Only the pairs ``i < j`` are computed: with 200 candidates that is 19,900
    values, where the square matrix of :func:`pair_weights` holds 40,000. The
    answer is overwritten by the next call with the same ``scratch``.

    Args:
        ratings: Elo ratings of the candidates.
        cis: Their 95% half-widths (Elo).
        games: ``games[k]``: rated games the pair ``k`` has played.
        scratch: The pairs, and the arrays to compute in.
    """
    rows, cols = scratch.rows, scratch.cols
    va, vb, z, s, weight = scratch.work
    var = (np.maximum(cis, 1e-3) / (Z95 * ELO_PER_UNIT)) ** 2
    # In place, in the scratch arrays: the operations, and so the values, are those of the formula above.
    np.take(var, rows, out=va, mode="clip")  # (the indices are in range: "clip" only spares a copy)
    np.take(var, cols, out=vb, mode="clip")
    np.take(ratings, rows, out=z, mode="clip")
    z -= np.take(ratings, cols, out=s, mode="clip")
    z /= ELO_PER_UNIT  # the rating difference (log-odds units)
    np.add(va, vb, out=s)
    s *= math.pi
    s /= 8.0
    s += 1.0
    np.sqrt(s, out=s)
    np.negative(z, out=z)
    z /= s
    np.exp(z, out=z)
    z += 1.0
    np.divide(1.0, z, out=z)  # p: the expected score, over the rating uncertainty (probit approximation)
    info = np.subtract(1.0, z, out=s)
    info *= z  # p (1 - p)
    np.multiply(va, va, out=weight)
    weight *= info
    va *= info
    va += 1.0
    weight /= va  # v_a² I / (1 + v_a I)
    other = np.multiply(vb, vb, out=z)
    other *= info
    vb *= info
    vb += 1.0
    other /= vb  # v_b² I / (1 + v_b I)
    weight += other
    root = np.add(games, 1.0, out=va)
    np.sqrt(root, out=root)
    weight /= root
    if len(weight):
        np.maximum(weight, PAIR_FLOOR * float(weight.max()), out=weight)
    return weight  # type: ignore[no-any-return]


def parse_game_spec(text: str) -> tuple[str, dict[str, str]]:
    """``"rps:signs=5,rounds=100"`` -> ("rps", {"signs": "5", "rounds": "100"})."""
    name, _, rest = text.partition(":")
    params: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"ladder game {text!r}: parameter {item!r} must look like NAME=VALUE")
        params[key.strip()] = value.strip()
    return name.strip(), params


def duplicate_seed(base: str, index: int) -> str:
    """A deterministic seed for the ``index``-th scheduled unit of ``base`` (tournaments)."""
    return hashlib.sha256(f"{base}:{index}".encode()).hexdigest()[:32]
