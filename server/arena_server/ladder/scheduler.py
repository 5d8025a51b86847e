"""The continuous ladder: picks who plays whom, runs rated matches, refits ratings, pauses failing bots.

One :class:`Ladder` runs inside ``arena serve`` over one or more games (each
game with its parameters is a rating pool). Matchmaking, per pool:

1. Bots whose rating is still uncertain (fewer than ``min_games`` rated games,
   or a 95% half-width above ``settle_ci`` Elo) play first, the one with the
   fewest games first, against an opponent of similar rating.
2. Otherwise the first bot is drawn with probability proportional to its
   uncertainty, and its opponent with weight
   ``exp(-(Δrating / closeness)^2 / 2) * (ci_a + ci_b) + floor``: close
   ratings and large uncertainty are favoured, and the floor keeps every pair
   reachable.
3. Seats alternate: the pair's previous games decide who sits first. Games
   with dice (Liar's Dice) are played as duplicate matches: the same seed
   twice with the seats swapped (for more than two players, every rotation),
   so the luck of the dice cancels out.

Concurrency is limited overall and per bot (a remote bot plays one match at
a time anyway). A bot that fails ``pause_after`` rated matches in a row
(timeout, crash, disconnect, protocol error or illegal action) is paused with
the last reason; it plays again once a newer version is registered.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import arena_server.store.ratings as ls
from arena_client import Termination, TimeControl
from arena_games import Game
from arena_server.ladder.fit import PRIOR_SD_ELO, Z95
from arena_server.matches.hub import Hub, HubError
from arena_server.referee.loop import MatchRecord, new_seed

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

DICE_GAMES = frozenset({"liars_dice"})
"""Games played as duplicate matches (same seed, seats rotated)."""

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
        min_games: Rated games before a bot counts as settled.
        settle_ci: A bot is settled once its 95% half-width is at most this (Elo).
        closeness: Rating difference (Elo) scale of the pairing weight.
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
    min_games: int = 10
    settle_ci: float = 150.0
    closeness: float = 200.0
    pause_after: int = 3
    refit_interval: float = 2.0
    seed: int | None = None
    bots: Sequence[str] = ()
    min_interval: float = 0.0


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
        self.strikes: dict[str, int] = {}
        self.paused: dict[str, tuple[int, str]] = {}
        self.units: set[asyncio.Task[None]] = set()
        self.matches_played = 0
        self._wake = asyncio.Event()
        self._halted = asyncio.Event()
        self._stopping = False
        self._turn = 0
        self._task: asyncio.Task[None] | None = None
        self._refitter: asyncio.Task[None] | None = None
        self._loaded_pairs = False

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.ensure_future(self.run())

    async def run(self) -> None:
        await self.refresh()
        self._refitter = asyncio.ensure_future(self._refit_loop())
        try:
            while not self._stopping:
                launched = False
                while len(self.units) < self.config.concurrency and not self._stopping:
                    try:
                        unit = self.pick()
                    except Exception as exc:  # keep scheduling; say what went wrong
                        print(f"arena: ladder matchmaking failed: {exc!r}", file=sys.stderr, flush=True)
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
            if self._refitter is not None:
                self._refitter.cancel()

    def halt(self) -> None:
        """Stop scheduling new matches (running ones go on)."""
        self._stopping = True
        self._halted.set()
        self._wake.set()

    async def stop(self) -> None:
        """Stop scheduling; running matches are left to the hub's shutdown, then waited for."""
        self.halt()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        if self.units:
            await asyncio.wait(list(self.units), timeout=15)

    async def _refit_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.refit_interval)
            try:
                await ls.refit_dirty(self.store)
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed refit is retried next time; the ladder keeps going
                continue

    async def refresh(self) -> None:
        """Reload ratings, pair counts and paused bots from the store."""
        conn = self.store.conn
        self.paused = await ls.paused_bots(conn)
        for pool in self.pools:
            rows = await ls.leaderboard(conn, pool.key, limit=1_000_000)
            for row in rows:
                info = pool.bots.setdefault(row.bot, _BotInfo())
                info.rating, info.ci = row.rating, row.ci
                info.games = max(info.games, row.games)
            if not self._loaded_pairs:  # afterwards the ladder counts its own matches
                for pair in await ls.load_pairs(conn, pool.key):
                    pool.pair_games[(pair.a, pair.b)] = pair.games
        self._loaded_pairs = True

    # -- matchmaking ------------------------------------------------------------------------------

    def eligible(self, pool: _Pool) -> list[str]:
        """Bots that may start a match in ``pool`` now."""
        hub = self.hub
        wanted = set(self.config.bots)
        out = []
        for name in hub.bot_names():
            if wanted and name not in wanted:
                continue
            games = hub.games_of(name)
            if games is None or (games and pool.game.name not in games):
                continue
            if name in self.paused:
                continue
            limit = self.config.per_bot
            session = hub.sessions.get(name)
            if session is not None:
                if getattr(session, "guest", True) or session.busy.locked():
                    continue  # guests never play rated games; a remote bot plays one match at a time
                limit = 1
            if self.active.get(name, 0) >= limit:
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
        names = self.eligible(pool)
        if len(names) < n:
            return None
        names.sort()
        infos = [pool.bots.get(b) or _BotInfo() for b in names]
        ratings = np.array([i.rating for i in infos])
        cis = np.array([i.ci for i in infos])
        games = np.array([i.games for i in infos])
        unsettled = (games < self.config.min_games) | (cis > self.config.settle_ci)
        if unsettled.any():
            fewest = games[unsettled].min()
            candidates = [i for i in range(len(names)) if unsettled[i] and games[i] == fewest]
            first = self.rng.choice(candidates)
        else:
            first = self._draw(cis + 1.0)
        chosen = [first]
        spread = self.config.closeness
        for _ in range(n - 1):
            diff = (ratings - ratings[first]) / spread
            weight = np.exp(-0.5 * diff * diff) * (cis + cis[first]) + 0.02 * (cis.max() + 1.0)
            weight[chosen] = 0.0
            chosen.append(self._draw(weight))
        group = [names[i] for i in chosen]
        return self._seat(pool, group)

    def _draw(self, weight: np.ndarray[Any, Any]) -> int:
        total = float(weight.sum())
        x = self.rng.random() * total
        index = int(np.searchsorted(np.cumsum(weight), x, side="right"))
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
            print(f"arena: ladder match between {', '.join(names)} failed: {exc!r}", file=sys.stderr, flush=True)
            await asyncio.sleep(1.0)

    async def _play_unit(self, pool: _Pool, names: list[str]) -> None:
        game = pool.game
        if game.name in DICE_GAMES:
            seed = new_seed()
            seatings = [names[i:] + names[:i] for i in range(len(names))]
            async with self.hub.sealed_seed(seed):  # revealed after the set, not to the next match's bots
                await self._play_seatings(pool, game, seatings, seed)
        else:
            await self._play_seatings(pool, game, [names], None)

    async def _play_seatings(self, pool: _Pool, game: Game, seatings: list[list[str]], seed: str | None) -> None:
        for seating in seatings:
            if self._stopping or self.hub.stopping:
                return
            try:
                running = await self.hub.start_match(game, seating, self.config.time_control, seed, rated=True)
            except HubError:
                return  # a remote bot left, or the server is stopping
            if running.task is None:
                return
            record = await asyncio.shield(running.task)
            await self._after(pool, record)

    async def _after(self, pool: _Pool, record: MatchRecord) -> None:
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
        for seat in record.seats:
            if offender is not None and seat.seat == offender and record.termination in FAILURES:
                strikes = self.strikes.get(seat.bot_name, 0) + 1
                self.strikes[seat.bot_name] = strikes
                if strikes >= self.config.pause_after:
                    reason = (
                        f"paused after {strikes} failed matches in a row "
                        f"(last: {record.termination.label} in match {record.match_id}: {record.reason}); "
                        "it plays again when a new version is registered"
                    )
                    await ls.pause_bot(self.store, seat.bot_name, seat.bot_version, reason)
                    self.paused[seat.bot_name] = (seat.bot_version, reason)
                    self.strikes[seat.bot_name] = 0
            else:
                self.strikes[seat.bot_name] = 0


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
