"""Round-robin tournaments: every pair (or group) of bots, both seat orders, resumable.

A tournament is identified by what defines it (game, parameters, bots, games
per pair, time control); its id is a hash of that, so running the same command
again finds the matches already played in the database and plays only the
rest. Match seeds are derived from the id and a secret salt kept in the
database, so a replayed slot is the same match but nobody who only knows the
spec can predict the dice. Tournament matches are unrated: they never move
ladder ratings.

Schedule: for each pair of bots (each group, for games of more than two
seats), ``games_per_pair`` games with the seat order rotating from one game to
the next. Dice games pair consecutive games into duplicates: the same seed
with the seats swapped (rotated); their seeds stay sealed (no MatchEnded or
GetMatch shows them) until the run ends, so the first match of a pair does not
tell the second one's bots their dice.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import hashlib
import itertools
import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import arena_server.ratings.fit as rt
import arena_server.store.ratings as ls
from arena_client import TimeControl
from arena_games import Game
from arena_server.ladder.scheduler import DICE_GAMES, duplicate_seed
from arena_server.matches.hub import Hub
from arena_server.referee.records import MatchRecord
from arena_server.store.database import Store, _tc_json

if TYPE_CHECKING:
    from arena_server.ladder.on_ray import RayMatches


class TournamentError(Exception):
    """A tournament that cannot run; the message says why."""


@dataclass(frozen=True)
class Slot:
    index: int
    seating: tuple[str, ...]
    seed: str


@dataclass
class Standing:
    rank: int
    bot: str
    rating: float
    ci: float
    games: int
    score: float
    wins: int
    draws: int
    losses: int


@dataclass
class CrossCell:
    bot_a: str
    bot_b: str
    games: int
    score_a: float
    wins_a: int
    draws: int
    losses_a: int
    mean: float
    ci_low: float
    ci_high: float


@dataclass
class TournamentResult:
    tournament_id: str
    game: str
    params: dict[str, Any]
    bots: list[str]
    games_per_pair: int
    played: int
    total: int
    standings: list[Standing] = field(default_factory=list)
    crosstable: list[CrossCell] = field(default_factory=list)
    match_ids: list[str] = field(default_factory=list)


class Tournament:
    """One round robin over a store."""

    def __init__(
        self, hub: Hub, game: Game, bots: Sequence[str], games_per_pair: int, time_control: TimeControl
    ) -> None:
        if hub.store is None:
            raise TournamentError("a tournament needs a database")
        names = list(bots)
        dupes = sorted({b for b in names if names.count(b) > 1})
        if dupes:
            raise TournamentError(f"bot {', '.join(dupes)} is listed twice; name each bot once")
        if len(names) < max(2, game.num_players):
            raise TournamentError(
                f"a tournament needs at least {max(2, game.num_players)} bots for {game!r}, got {len(names)}: "
                f"{', '.join(names) or 'none'}"
            )
        if games_per_pair < 1:
            raise TournamentError(f"--games-per-pair {games_per_pair} must be at least 1")
        self.hub = hub
        self.store: Store = hub.store
        self.game = game
        self.bots = sorted(names)
        self.games_per_pair = games_per_pair
        self.time_control = time_control
        spec = {
            "game": game.name,
            "params": dict(sorted(game.params.items())),
            "bots": self.bots,
            "games_per_pair": games_per_pair,
            "time_control": json.loads(_tc_json(time_control)),
        }
        self.spec = spec
        self.id = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
        self.salt = ""
        """A secret mixed into every match seed (from the database once registered; see :meth:`slots`)."""

    def slots(self) -> list[Slot]:
        n = self.game.num_players
        out = []
        index = 0
        dice = self.game.name in DICE_GAMES
        for group in itertools.combinations(self.bots, n):
            # The salt is random per tournament and kept only in the database, so the spec (which
            # the bots may know) does not predict the dice; a resumed run reads the same salt.
            base = f"{self.salt}:{self.id}:{'|'.join(group)}" if self.salt else f"{self.id}:{'|'.join(group)}"
            for g in range(self.games_per_pair):
                r = g % n
                seating = group[r:] + group[:r]
                seed = duplicate_seed(base, g // n if dice else g)
                out.append(Slot(index, tuple(seating), seed))
                index += 1
        return out

    async def done_slots(self) -> dict[int, str]:
        """Slots already played to the end: slot -> match id."""
        async with self.store.conn.execute(
            "SELECT t.slot, t.match_id FROM tournament_matches t JOIN matches m ON m.id = t.match_id "
            "WHERE t.tournament_id = ? AND m.status = 'finished'",
            (self.id,),
        ) as cur:
            return {int(s): str(m) for s, m in await cur.fetchall()}

    async def _register(self) -> None:
        async with self.store.write_lock:
            await self.store.conn.execute(
                "INSERT OR IGNORE INTO tournaments (id, spec, created_at, salt) VALUES (?, ?, ?, ?)",
                (self.id, json.dumps(self.spec, sort_keys=True), datetime.now(UTC).isoformat(), secrets.token_hex(16)),
            )
        async with self.store.conn.execute("SELECT salt FROM tournaments WHERE id = ?", (self.id,)) as cur:
            row = await cur.fetchone()
        self.salt = str(row[0]) if row else ""

    async def _link(self, slot: int, match_id: str) -> None:
        async with self.store.write_lock:
            await self.store.conn.execute(
                "INSERT OR REPLACE INTO tournament_matches (tournament_id, slot, match_id) VALUES (?, ?, ?)",
                (self.id, slot, int(match_id)),
            )

    async def run(
        self,
        concurrency: int = 1,
        progress: Callable[[int, int, int, float], None] | None = None,
        remote: RayMatches | None = None,
    ) -> TournamentResult:
        """Play every slot not yet finished; ``progress(done, total, resumed, elapsed_s)`` after each.

        With ``remote`` (``--ray``) the matches are played on the Ray cluster and this process stores
        each result as it comes back; otherwise they run in this process's hub.
        """
        if concurrency < 1:
            raise TournamentError(f"--concurrency {concurrency} must be at least 1")
        await self._register()
        slots = self.slots()
        done = await self.done_slots()
        resumed = len(done)
        todo = [s for s in slots if s.index not in done]
        started = time.perf_counter()
        count = len(done)
        if progress is not None:
            progress(count, len(slots), resumed, 0.0)
        queue: asyncio.Queue[Slot] = asyncio.Queue()
        for slot in todo:
            queue.put_nowait(slot)

        async def worker() -> None:
            nonlocal count
            while not queue.empty():
                slot = queue.get_nowait()
                if remote is not None:
                    played = await remote.play(
                        self.game, slot.seating, self.time_control, slot.seed, self.game.name in DICE_GAMES
                    )
                    if played.termination is not None and played.termination.name != "ABORTED":
                        await self.store.start_match(played)  # the one writer: this process
                        await self.store.finish_match(played)
                        await self._link(slot.index, played.match_id)
                        count += 1
                        done[slot.index] = played.match_id
                    if progress is not None:
                        progress(count, len(slots), resumed, time.perf_counter() - started)
                    continue
                running = await self.hub.start_match(
                    self.game, list(slot.seating), self.time_control, slot.seed, rated=False
                )
                await self._link(slot.index, running.record.match_id)
                assert running.task is not None
                record = await asyncio.shield(running.task)
                if record.termination is not None and record.termination.name != "ABORTED":
                    count += 1
                    done[slot.index] = record.match_id
                if progress is not None:
                    progress(count, len(slots), resumed, time.perf_counter() - started)

        async with contextlib.AsyncExitStack() as sealed:
            if self.game.name in DICE_GAMES:  # duplicates share a seed: reveal none before the run ends
                sets: dict[str, list[int]] = {}
                for slot in slots:
                    sets.setdefault(slot.seed, []).append(slot.index)

                def set_done(indexes: list[int]) -> Callable[[], bool]:
                    return lambda: all(i in done for i in indexes)  # only a set played to its end is revealed

                for seed in dict.fromkeys(slot.seed for slot in todo):
                    await sealed.enter_async_context(self.hub.sealed_seed(seed, set_done(sets[seed])))
            workers = [asyncio.ensure_future(worker()) for _ in range(min(concurrency, max(1, len(todo))))]
            try:
                await asyncio.gather(*workers)
            finally:
                for w in workers:
                    w.cancel()
        return await self.result()

    async def result(self) -> TournamentResult:
        """Standings and crosstable from the finished matches of this tournament."""
        done = await self.done_slots()
        records: list[MatchRecord] = []
        for match_id in sorted(done.values(), key=int):
            record = await self.store.get_match(match_id, with_moves=False)
            if record is not None:
                records.append(record)
        return summarize(self, records, len(self.slots()))


def summarize(t: Tournament, records: Sequence[MatchRecord], total: int) -> TournamentResult:
    per_bot: dict[str, list[float]] = {b: [0, 0.0, 0, 0, 0] for b in t.bots}
    pairs: dict[tuple[str, str], list[float]] = {}
    for record in records:
        fx = ls.match_effects(t.game, tuple(s.bot_name for s in record.seats), tuple(record.returns), "")
        for s in fx.seats:
            row = per_bot[s.bot]
            row[0] += 1
            row[1] += s.score
            row[2] += s.win
            row[3] += s.draw
            row[4] += s.loss
        for a, b, sa, w, d, lo in fx.pairs:
            prow = pairs.setdefault((a, b), [0, 0.0, 0, 0, 0])
            prow[0] += 1
            prow[1] += sa
            prow[2] += w
            prow[3] += d
            prow[4] += lo
    totals = [
        rt.PairTotal(a, b, int(v[0]), v[1], int(v[2]), int(v[3]), int(v[4])) for (a, b), v in sorted(pairs.items())
    ]
    fit = rt.fit_bradley_terry(t.bots, totals).as_dict()
    order = sorted(t.bots, key=lambda b: (-fit[b][0], b))
    standings = []
    for rank, bot in enumerate(order, 1):
        g, sc, wn, dr, ls_ = per_bot[bot]
        standings.append(Standing(rank, bot, fit[bot][0], fit[bot][1], int(g), float(sc), int(wn), int(dr), int(ls_)))
    cells = []
    for p in totals:
        mean, low, high = rt.score_interval(p.games, p.wins_a, p.draws, p.losses_a)
        cells.append(CrossCell(p.a, p.b, p.games, p.score_a, p.wins_a, p.draws, p.losses_a, mean, low, high))
    return TournamentResult(
        t.id,
        t.game.name,
        dict(t.game.params),
        t.bots,
        t.games_per_pair,
        len(records),
        total,
        standings,
        cells,
        [r.match_id for r in records],
    )


def standings_table(result: TournamentResult) -> str:
    lines = [f"{'#':>3}  {'bot':<24} {'rating':>8} {'± 95%':>7} {'games':>6} {'score':>7}  {'W-D-L':<14}"]
    for s in result.standings:
        lines.append(
            f"{s.rank:>3}  {s.bot:<24} {s.rating:>8.0f} {s.ci:>7.0f} {s.games:>6} "
            f"{(s.score / s.games if s.games else 0):>7.1%}  {s.wins}-{s.draws}-{s.losses}"
        )
    return "\n".join(lines)


def crosstable_text(bots: Sequence[str], cells: Sequence[Any], width: int = 9) -> str:
    """A square crosstable: row bot's score against the column bot, in percent, with the games."""
    lookup: dict[tuple[str, str], tuple[float, int]] = {}
    for c in cells:
        if c.games:
            lookup[(c.bot_a, c.bot_b)] = (c.score_a / c.games, c.games)
            lookup[(c.bot_b, c.bot_a)] = (1 - c.score_a / c.games, c.games)
    short = [b[: width - 1] for b in bots]
    name_w = max((len(b) for b in bots), default=4) + 1
    lines = [" " * name_w + "".join(f"{s:>{width}}" for s in short)]
    for a in bots:
        row = f"{a:<{name_w}}"
        for b in bots:
            if a == b:
                row += f"{'-':>{width}}"
            elif (a, b) in lookup:
                mean, games = lookup[(a, b)]
                row += f"{f'{mean:.0%}/{games}':>{width}}"
            else:
                row += f"{'':>{width}}"
        lines.append(row)
    return "\n".join(lines)


def write_outputs(result: TournamentResult, prefix: str | Path) -> list[Path]:
    """``PREFIX.json`` (everything), ``PREFIX-standings.csv`` and ``PREFIX-crosstable.csv``."""
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    json_path = prefix.with_name(prefix.name + ".json")
    json_path.write_text(json.dumps(asdict(result), indent=2) + "\n")
    standings_path = prefix.with_name(prefix.name + "-standings.csv")
    with standings_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rank", "bot", "rating", "ci95", "games", "score", "wins", "draws", "losses"])
        for s in result.standings:
            w.writerow([s.rank, s.bot, f"{s.rating:.1f}", f"{s.ci:.1f}", s.games, s.score, s.wins, s.draws, s.losses])
    cross_path = prefix.with_name(prefix.name + "-crosstable.csv")
    with cross_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["bot_a", "bot_b", "games", "score_a", "wins_a", "draws", "losses_a", "mean", "ci_low", "ci_high"])
        for c in result.crosstable:
            w.writerow(
                [
                    c.bot_a,
                    c.bot_b,
                    c.games,
                    c.score_a,
                    c.wins_a,
                    c.draws,
                    c.losses_a,
                    f"{c.mean:.4f}",
                    f"{c.ci_low:.4f}",
                    f"{c.ci_high:.4f}",
                ]
            )
    return [json_path, standings_path, cross_path]
