"""Ratings in the database: the change a rated match causes, refits, recompute, and queries.

Tables (migration 2 in :mod:`arena_server.store.database`):

* ``rated_matches``: one row per rated match whose rating change was applied,
  in application order (``seq``). ``match_id`` is UNIQUE, so a match can never
  be rated twice, and the row is written in the transaction that finishes the
  match (:func:`rating_change` is passed to ``Store.finish_match``).
* ``rating_pools``: one per game and rating-relevant parameters (see
  :func:`pool_key`), with a ``dirty`` flag set by every new result.
* ``rating_pairs``: games, score and W/D/L for every pair of bots in a pool:
  the crosstable, and everything the Bradley-Terry fit needs.
* ``ratings``: per bot and pool: rating ± 95% half-width, games, W/D/L,
  last active; ``mu``/``sigma`` for Plackett-Luce pools.
* ``bot_status``: bots the ladder paused, and why.

A rated match's effect on the totals is computed by one pure function
(:func:`match_effects`) used both when the match finishes and by
:func:`recompute`, so a recompute from the matches reproduces the stored
tables exactly. Bradley-Terry ratings are refitted from the pair totals when a
pool is dirty (:func:`refit_pool`), by the ladder's background loop only:
reading (:func:`leaderboard`, :func:`crosstable`, :func:`check_database`)
never writes. The fit converges to the same optimum from any start, so a
rebuild agrees with the stored table within :data:`RATING_TOLERANCE`.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import urllib.parse
import weakref
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiosqlite
import numpy as np

import arena_server.ratings.fit as rt
from arena_client import Termination
from arena_games import Game, load_game
from arena_server.referee.records import MatchRecord

RATING_TOLERANCE = 0.01
"""Elo points by which a stored rating or interval may differ from a rebuild (the fit is exact to ~1e-5)."""
PL_TOLERANCE = 1e-9
"""Plackett-Luce mu/sigma are replayed in the same order, so they agree to floating-point noise."""

BT = "bradley-terry"
PL = "plackett-luce"
_POOL_IGNORED_PARAMS = frozenset({"draw_band"})


def pool_key(game: Game) -> str:
    """The rating pool of a game: its name plus every parameter that differs from the default.

    ``draw_band`` is left out: it changes how an RPS match is classified, not
    the game, so ladder matches with a band rate in the same pool as the rest.
    """
    defaults = {spec.name: spec.default for spec in type(game).param_specs}
    extra = [
        f"{k}={v}" for k, v in sorted(game.params.items()) if k not in _POOL_IGNORED_PARAMS and defaults.get(k) != v
    ]
    return game.name + (f"({','.join(extra)})" if extra else "")


def pool_method(game: Game) -> str:
    return BT if game.num_players == 2 else PL


@dataclass(frozen=True)
class SeatEffect:
    bot: str
    score: float
    win: int
    draw: int
    loss: int
    rank: int


@dataclass(frozen=True)
class MatchEffects:
    """What one rated match adds to its pool's totals."""

    pool: str
    game: str
    method: str
    seats: tuple[SeatEffect, ...]
    pairs: tuple[tuple[str, str, float, int, int, int], ...]
    """(a, b, score of a, win a, draw, loss a) with a < b."""
    ended_at: str


def is_ratable(record: MatchRecord) -> bool:
    return record.rated and record.termination is not None and record.termination != Termination.ABORTED


def match_effects(game: Game, names: tuple[str, ...], returns: tuple[float, ...], ended_at: str) -> MatchEffects:
    """The pure rating effect of one finished rated match.

    Two seats: the game's ``outcome_scores`` (RPS applies its ``draw_band``).
    More seats: places by return (ties share a place); each pair of seats
    scores 1 / 0.5 / 0 by who placed ahead, and a seat wins when it alone is
    first.
    """
    n = len(names)
    if n == 2:
        s0, s1 = game.outcome_scores(returns)
        scores = [float(s0), float(s1)]
        ranks = [1 if s >= 0.75 else 2 if s <= 0.25 else 1 for s in scores]
        seats = tuple(
            SeatEffect(
                names[i], scores[i], int(scores[i] == 1.0), int(scores[i] == 0.5), int(scores[i] == 0.0), ranks[i]
            )
            for i in range(2)
        )
    else:
        ranks = rt.ranks_from_returns(returns)
        firsts = ranks.count(1)
        seat_list = []
        for i in range(n):
            pair_total = sum(rt.pair_score(ranks[i], ranks[j]) for j in range(n) if j != i)
            win = int(ranks[i] == 1 and firsts == 1)
            draw = int(ranks[i] == 1 and firsts > 1)
            seat_list.append(SeatEffect(names[i], pair_total / (n - 1), win, draw, int(not (win or draw)), ranks[i]))
        seats = tuple(seat_list)
    pairs = []
    for i in range(n):
        for j in range(i + 1, n):
            a, b = names[i], names[j]
            if a == b:
                continue
            sa = seats[i].score if n == 2 else rt.pair_score(ranks[i], ranks[j])
            if a > b:
                a, b, sa = b, a, 1.0 - sa
            pairs.append((a, b, sa, int(sa == 1.0), int(sa == 0.5), int(sa == 0.0)))
    return MatchEffects(pool_key(game), game.name, pool_method(game), seats, tuple(pairs), ended_at)


def rating_change(record: MatchRecord) -> Callable[[aiosqlite.Connection], Awaitable[None]] | None:
    """The hook for ``Store.finish_match``: applies a rated match's effect in the same transaction."""
    if not is_ratable(record):
        return None

    async def apply(conn: aiosqlite.Connection) -> None:
        ended = (record.ended_at or datetime.now(UTC)).isoformat()
        effects = match_effects(record.game, tuple(s.bot_name for s in record.seats), tuple(record.returns), ended)
        await apply_effects(conn, int(record.match_id), effects)

    return apply


async def apply_effects(conn: aiosqlite.Connection, match_id: int, fx: MatchEffects) -> None:
    """Write one match's effect (inside the caller's transaction)."""
    await conn.execute("INSERT INTO rated_matches (match_id, pool) VALUES (?, ?)", (match_id, fx.pool))
    await conn.execute(
        "INSERT INTO rating_pools (pool, game, method, matches, dirty) VALUES (?, ?, ?, 1, 1) "
        "ON CONFLICT (pool) DO UPDATE SET matches = matches + 1, dirty = 1",
        (fx.pool, fx.game, fx.method),
    )
    await conn.executemany(
        "INSERT INTO ratings (pool, bot_name, games, wins, draws, losses, score, last_active) "
        "VALUES (?, ?, 1, ?, ?, ?, ?, ?) ON CONFLICT (pool, bot_name) DO UPDATE SET games = games + 1, "
        "wins = wins + excluded.wins, draws = draws + excluded.draws, losses = losses + excluded.losses, "
        "score = score + excluded.score, last_active = excluded.last_active",
        [(fx.pool, s.bot, s.win, s.draw, s.loss, s.score, fx.ended_at) for s in fx.seats],
    )
    await conn.executemany(
        "INSERT INTO rating_pairs (pool, bot_a, bot_b, games, score_a, wins_a, draws, losses_a) "
        "VALUES (?, ?, ?, 1, ?, ?, ?, ?) ON CONFLICT (pool, bot_a, bot_b) DO UPDATE SET games = games + 1, "
        "score_a = score_a + excluded.score_a, wins_a = wins_a + excluded.wins_a, "
        "draws = draws + excluded.draws, losses_a = losses_a + excluded.losses_a",
        [(fx.pool, *p) for p in fx.pairs],
    )
    if fx.method == PL:
        current = []
        for s in fx.seats:
            async with conn.execute(
                "SELECT mu, sigma FROM ratings WHERE pool = ? AND bot_name = ?", (fx.pool, s.bot)
            ) as cur:
                row = await cur.fetchone()
            current.append((row[0], row[1]) if row and row[0] is not None else rt.pl_default())
        updated = rt.pl_update(current, [s.rank for s in fx.seats])
        for s, (mu, sigma) in zip(fx.seats, updated, strict=True):
            rating, ci = rt.pl_display(mu, sigma)
            await conn.execute(
                "UPDATE ratings SET mu = ?, sigma = ?, rating = ?, ci = ? WHERE pool = ? AND bot_name = ?",
                (mu, sigma, rating, ci, fx.pool, s.bot),
            )


# -- refits ---------------------------------------------------------------------------------------


async def _rows(conn: aiosqlite.Connection, sql: str, args: Iterable[Any] = ()) -> list[Any]:
    async with conn.execute(sql, tuple(args)) as cur:
        return list(await cur.fetchall())


async def dirty_pools(conn: aiosqlite.Connection) -> list[str]:
    return [r[0] for r in await _rows(conn, "SELECT pool FROM rating_pools WHERE dirty = 1 AND method = ?", (BT,))]


async def load_pairs(conn: aiosqlite.Connection, pool: str) -> list[rt.PairTotal]:
    rows = await _rows(
        conn,
        "SELECT bot_a, bot_b, games, score_a, wins_a, draws, losses_a FROM rating_pairs WHERE pool = ? "
        "ORDER BY bot_a, bot_b",
        (pool,),
    )
    return [rt.PairTotal(*r) for r in rows]


async def refit_pool(store: Any, pool: str) -> rt.Fit | None:
    """Refit one Bradley-Terry pool from its pair totals and store the ratings.

    The fit runs in a worker thread; if results arrived meanwhile the pool
    stays dirty and the next refit picks them up.
    """
    conn = store.conn
    head = await _rows(conn, "SELECT method, matches FROM rating_pools WHERE pool = ?", (pool,))
    if not head or head[0][0] != BT:
        return None
    matches = head[0][1]
    rows = await _rows(
        conn, "SELECT bot_a, bot_b, games, score_a FROM rating_pairs WHERE pool = ? ORDER BY bot_a, bot_b", (pool,)
    )
    current = {r[0]: r[1] for r in await _rows(conn, "SELECT bot_name, rating FROM ratings WHERE pool = ?", (pool,))}
    fit = await asyncio.to_thread(rt.fit_rows, list(current), rows, 1e-10, current)

    async def write(conn: Any) -> None:
        await conn.executemany(
            "UPDATE ratings SET rating = ?, ci = ? WHERE pool = ? AND bot_name = ?",
            [(r, c, pool, n) for n, r, c in zip(fit.names, fit.ratings, fit.ci, strict=True)],
        )
        await conn.execute(
            "UPDATE rating_pools SET dirty = CASE WHEN matches = ? THEN 0 ELSE 1 END, fitted_at = ? WHERE pool = ?",
            (matches, datetime.now(UTC).isoformat(), pool),
        )

    await store.local_transaction(write)
    return fit


async def refit_dirty(store: Any) -> list[str]:
    """Refit every dirty Bradley-Terry pool; returns their names."""
    pools = await dirty_pools(store.conn)
    for pool in pools:
        await refit_pool(store, pool)
    return pools


# -- recompute ------------------------------------------------------------------------------------


@dataclass
class Snapshot:
    """Every derived rating table, as plain values (for recompute and comparison)."""

    pools: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    """pool -> (game, method, matches)"""
    ratings: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    """(pool, bot) -> [rating, ci, mu, sigma, games, wins, draws, losses, score, last_active]"""
    pairs: dict[tuple[str, str, str], list[Any]] = field(default_factory=dict)
    """(pool, a, b) -> [games, score_a, wins_a, draws, losses_a]"""
    order: list[tuple[int, str]] = field(default_factory=list)
    """(match_id, pool) in rating order."""


async def stored_snapshot(conn: aiosqlite.Connection) -> Snapshot:
    snap = Snapshot()
    for pool, game, method, matches in await _rows(conn, "SELECT pool, game, method, matches FROM rating_pools"):
        snap.pools[pool] = (game, method, matches)
    for row in await _rows(
        conn,
        "SELECT pool, bot_name, rating, ci, mu, sigma, games, wins, draws, losses, score, last_active FROM ratings",
    ):
        snap.ratings[(row[0], row[1])] = list(row[2:])
    for row in await _rows(
        conn, "SELECT pool, bot_a, bot_b, games, score_a, wins_a, draws, losses_a FROM rating_pairs"
    ):
        snap.pairs[(row[0], row[1], row[2])] = list(row[3:])
    snap.order = [(r[0], r[1]) for r in await _rows(conn, "SELECT match_id, pool FROM rated_matches ORDER BY seq")]
    return snap


async def compute_snapshot(conn: aiosqlite.Connection) -> Snapshot:
    """Rebuild every derived table in memory from the matches alone.

    Rated finished matches are taken in the order their ratings were applied
    (``rated_matches.seq``; order matters for Plackett-Luce), any without that
    record after them by id.
    """
    rows = await _rows(
        conn,
        "SELECT m.id, m.game, m.params, m.returns, m.ended_at, rm.seq FROM matches m "
        "LEFT JOIN rated_matches rm ON rm.match_id = m.id "
        "WHERE m.rated = 1 AND m.status = 'finished' AND m.termination != ? "
        "ORDER BY rm.seq IS NULL, rm.seq, m.id",
        (int(Termination.ABORTED),),
    )
    seat_rows = await _rows(
        conn,
        "SELECT s.match_id, s.bot_name FROM match_seats s JOIN matches m ON m.id = s.match_id "
        "WHERE m.rated = 1 AND m.status = 'finished' ORDER BY s.match_id, s.seat",
    )
    seats: dict[int, list[str]] = {}
    for mid, name in seat_rows:
        seats.setdefault(mid, []).append(name)
    games: dict[tuple[str, str], Game] = {}
    snap = Snapshot()
    pl_state: dict[tuple[str, str], tuple[float, float]] = {}
    for mid, game_name, params, returns, ended, _seq in rows:
        game = games.get((game_name, params))
        if game is None:
            game = games[(game_name, params)] = load_game(game_name, **json.loads(params))
        fx = match_effects(game, tuple(seats[mid]), tuple(json.loads(returns)), ended)
        _accumulate(snap, pl_state, mid, fx)
    for pool, (_game, method, _n) in snap.pools.items():
        if method != BT:
            continue
        names = [b for (p, b) in snap.ratings if p == pool]
        pairs = [rt.PairTotal(a, b, *v) for (p, a, b), v in sorted(snap.pairs.items()) if p == pool]
        fit = rt.fit_bradley_terry(names, pairs)
        for n, r, c in zip(fit.names, fit.ratings, fit.ci, strict=True):
            snap.ratings[(pool, n)][0:2] = [r, c]
    return snap


def _accumulate(
    snap: Snapshot, pl_state: dict[tuple[str, str], tuple[float, float]], mid: int, fx: MatchEffects
) -> None:
    snap.order.append((mid, fx.pool))
    game, method, count = snap.pools.get(fx.pool, (fx.game, fx.method, 0))
    snap.pools[fx.pool] = (game, method, count + 1)
    for s in fx.seats:
        row = snap.ratings.setdefault((fx.pool, s.bot), [1500.0, 0.0, None, None, 0, 0, 0, 0, 0.0, None])
        row[4] += 1
        row[5] += s.win
        row[6] += s.draw
        row[7] += s.loss
        row[8] += s.score
        row[9] = fx.ended_at
    for a, b, sa, w, d, lo in fx.pairs:
        prow = snap.pairs.setdefault((fx.pool, a, b), [0, 0.0, 0, 0, 0])
        prow[0] += 1
        prow[1] += sa
        prow[2] += w
        prow[3] += d
        prow[4] += lo
    if fx.method == PL:
        current = [pl_state.get((fx.pool, s.bot), rt.pl_default()) for s in fx.seats]
        updated = rt.pl_update(current, [s.rank for s in fx.seats])
        for s, (mu, sigma) in zip(fx.seats, updated, strict=True):
            pl_state[(fx.pool, s.bot)] = (mu, sigma)
            rating, ci = rt.pl_display(mu, sigma)
            snap.ratings[(fx.pool, s.bot)][0:4] = [rating, ci, mu, sigma]


def _rating_row_equal(stored: list[Any], computed: list[Any], fitted: bool) -> bool:
    """One ``ratings`` row: counts, score and dates exactly; rating and ci within the tolerances.

    ``fitted`` is False for a Bradley-Terry pool with results the background
    refit has not reached yet: its rating and ci are those of the previous fit,
    so only the counts are compared.
    """
    if stored[4:] != computed[4:]:
        return False
    if not fitted:
        return True
    if (stored[2] is None) != (computed[2] is None) or (stored[3] is None) != (computed[3] is None):
        return False
    if stored[2] is not None and (
        abs(stored[2] - computed[2]) > PL_TOLERANCE or abs(stored[3] - computed[3]) > PL_TOLERANCE
    ):
        return False
    return bool(abs(stored[0] - computed[0]) <= RATING_TOLERANCE and abs(stored[1] - computed[1]) <= RATING_TOLERANCE)


def compare(stored: Snapshot, computed: Snapshot, unfitted: Iterable[str] = ()) -> list[str]:
    """Every difference between two snapshots, as readable lines (empty: they agree).

    Counts, scores, dates and the rating order must be identical; ratings and
    intervals agree within :data:`RATING_TOLERANCE` Elo. Ratings of the pools
    in ``unfitted`` (results stored but not yet refitted) are not compared.
    """
    out: list[str] = []
    skip = set(unfitted)
    for key in sorted(set(stored.pools) | set(computed.pools)):
        if stored.pools.get(key) != computed.pools.get(key):
            out.append(f"pool {key}: stored {stored.pools.get(key)} != recomputed {computed.pools.get(key)}")
    for rkey in sorted(set(stored.ratings) | set(computed.ratings)):
        a, b = stored.ratings.get(rkey), computed.ratings.get(rkey)
        if a is None or b is None or not _rating_row_equal(a, b, rkey[0] not in skip):
            out.append(f"rating {rkey}: stored {a} != recomputed {b}")
    for pkey in sorted(set(stored.pairs) | set(computed.pairs)):
        if stored.pairs.get(pkey) != computed.pairs.get(pkey):
            out.append(f"pair {pkey}: stored {stored.pairs.get(pkey)} != recomputed {computed.pairs.get(pkey)}")
    if stored.order != computed.order:
        out.append(f"rating order differs: {len(stored.order)} stored vs {len(computed.order)} recomputed matches")
    return out


async def write_snapshot(store: Any, snap: Snapshot) -> None:
    """Replace every derived table with ``snap`` (one transaction)."""

    async def write(conn: Any) -> None:
        for table in ("ratings", "rating_pairs", "rating_pools"):
            await conn.execute(f"DELETE FROM {table}")
        have = {r[0] for r in await _rows(conn, "SELECT match_id FROM rated_matches")}
        await conn.executemany(
            "INSERT INTO rated_matches (match_id, pool) VALUES (?, ?)",
            [(mid, pool) for mid, pool in snap.order if mid not in have],
        )
        now = datetime.now(UTC).isoformat()
        await conn.executemany(
            "INSERT INTO rating_pools (pool, game, method, matches, dirty, fitted_at) VALUES (?, ?, ?, ?, 0, ?)",
            [(p, g, m, n, now) for p, (g, m, n) in snap.pools.items()],
        )
        await conn.executemany(
            "INSERT INTO ratings (pool, bot_name, rating, ci, mu, sigma, games, wins, draws, losses, score, "
            "last_active) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(p, b, *v) for (p, b), v in snap.ratings.items()],
        )
        await conn.executemany(
            "INSERT INTO rating_pairs (pool, bot_a, bot_b, games, score_a, wins_a, draws, losses_a) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(p, a, b, *v) for (p, a, b), v in snap.pairs.items()],
        )

    await store.local_transaction(write)  # (it reads rated_matches inside the transaction)


async def recompute(store: Any, write: bool = True) -> tuple[Snapshot, list[str]]:
    """Rebuild ratings from the matches; returns the result and its differences from what was stored.

    With ``write`` (``arena ratings recompute``), dirty pools are refitted first
    so the comparison is against the latest fit, and the rebuilt tables are
    stored. Without it nothing is written: pools with unfitted results have
    only their counts compared (see :func:`compare`).
    """
    if write:
        await refit_dirty(store)
    stored = await stored_snapshot(store.conn)
    computed = await compute_snapshot(store.conn)
    diffs = compare(stored, computed, await dirty_pools(store.conn))
    if write:
        await write_snapshot(store, computed)
    return computed, diffs


@dataclass
class CheckResult:
    """What :func:`check_database` found."""

    snapshot: Snapshot
    differences: list[str]
    unfitted: list[PoolInfo]
    """Pools whose newest results the server has not refitted yet (their ratings were not compared)."""


def read_only_uri(path: str) -> str:
    """A SQLite URI that opens ``path`` read-only: SQLite writes neither the file nor its WAL.

    When no -wal file exists and no server holds the database (see
    :func:`check_database`), ``immutable=1`` is added too, so that opening it does
    not even create an empty -wal file.
    """
    quoted = urllib.parse.quote(os.path.abspath(path))
    return f"file:{quoted}?mode=ro"


async def check_database(path: str) -> CheckResult:
    """Rebuild ratings from the matches in memory and compare: the database is opened read-only.

    Works with or without a server using the file (its lock file is only
    probed with a shared ``flock``, never written). Nothing is written to the
    database or its WAL.

    Raises:
        sqlite3.Error: the file cannot be read as a database.
        FileNotFoundError: there is no such file.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no database file {path}")
    lock_fd = None
    lock_path = path + ".lock"
    uri = read_only_uri(path)
    try:
        if os.path.exists(lock_path):
            lock_fd = os.open(lock_path, os.O_RDONLY)
            try:  # a shared lock while we read: no server can start on the file meanwhile
                fcntl.flock(lock_fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                held_by_server = False
            except OSError:
                held_by_server = True
        else:
            held_by_server = False
        if not held_by_server and not os.path.exists(path + "-wal"):
            uri += "&immutable=1"  # nobody writes it, and there is no WAL to read
        conn = await aiosqlite.connect(uri, uri=True, isolation_level=None)
        try:
            await conn.execute("BEGIN")  # one read transaction: a consistent view while a server writes
            stored = await stored_snapshot(conn)
            computed = await compute_snapshot(conn)
            unfitted_names = await dirty_pools(conn)
            unfitted = [p for p in await list_pools(conn) if p.pool in unfitted_names]
            await conn.execute("COMMIT")
        finally:
            await conn.close()
    finally:
        if lock_fd is not None:
            os.close(lock_fd)  # releases the shared lock
    return CheckResult(computed, compare(stored, computed, unfitted_names), unfitted)


# -- queries --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderRow:
    rank: int
    bot: str
    rating: float
    ci: float
    games: int
    wins: int
    draws: int
    losses: int
    last_active: str | None
    paused_reason: str
    component: int = 0
    """Connected component of the pool's "played" graph; ratings compare only within one."""
    score: float = 0.0
    """Sum of the bot's match scores (1 / 0.5 / 0 per game; pairwise averages in multi-seat pools)."""


@dataclass(frozen=True)
class PoolInfo:
    pool: str
    game: str
    method: str
    matches: int
    fitted_at: str | None
    dirty: bool


async def pool_info(conn: aiosqlite.Connection, pool: str) -> PoolInfo | None:
    rows = await _rows(
        conn, "SELECT pool, game, method, matches, fitted_at, dirty FROM rating_pools WHERE pool = ?", (pool,)
    )
    return PoolInfo(rows[0][0], rows[0][1], rows[0][2], rows[0][3], rows[0][4], bool(rows[0][5])) if rows else None


async def list_pools(conn: aiosqlite.Connection) -> list[PoolInfo]:
    rows = await _rows(conn, "SELECT pool, game, method, matches, fitted_at, dirty FROM rating_pools ORDER BY pool")
    return [PoolInfo(r[0], r[1], r[2], r[3], r[4], bool(r[5])) for r in rows]


async def leaderboard(conn: aiosqlite.Connection, pool: str, limit: int = 1000) -> list[LeaderRow]:
    """Bots of a pool, best rating first, with the reason a paused bot is paused."""
    rows = await _rows(
        conn,
        "SELECT r.bot_name, r.rating, r.ci, r.games, r.wins, r.draws, r.losses, r.last_active, "
        "s.paused_reason, s.paused_version, r.score FROM ratings r LEFT JOIN bot_status s ON s.bot_name = r.bot_name "
        "WHERE r.pool = ? ORDER BY r.rating DESC, r.bot_name LIMIT ?",
        (pool, limit),
    )
    paused_names = [r[0] for r in rows if r[8] is not None]
    versions = await current_versions(conn, paused_names) if paused_names else {}
    component = await pool_components(conn, pool)
    out = []
    for rank, r in enumerate(rows, 1):
        reason = ""
        if r[8] is not None and r[9] >= versions.get(r[0], 1):
            reason = r[8]
        out.append(
            LeaderRow(rank, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], reason, component.get(r[0], 0), r[10])
        )
    return out


_COMPONENTS: weakref.WeakKeyDictionary[aiosqlite.Connection, dict[str, tuple[int, dict[str, int]]]] = (
    weakref.WeakKeyDictionary()
)
"""connection -> pool -> (matches, components): reads repeat far more often than results arrive."""


async def pool_components(conn: aiosqlite.Connection, pool: str) -> dict[str, int]:
    """Bot -> connected component of the pool's "played" graph (0, 1, ... in order of the first bot name).

    Bots with the same number met, directly or through others; ratings of
    different components are fitted separately and are not comparable.
    """
    head = await _rows(conn, "SELECT matches FROM rating_pools WHERE pool = ?", (pool,))
    matches = int(head[0][0]) if head else 0
    cache = _COMPONENTS.setdefault(conn, {})
    cached = cache.get(pool)
    if cached is not None and cached[0] == matches:
        return cached[1]
    names = sorted(r[0] for r in await _rows(conn, "SELECT bot_name FROM ratings WHERE pool = ?", (pool,)))
    pairs = await _rows(conn, "SELECT bot_a, bot_b FROM rating_pairs WHERE pool = ? AND games > 0", (pool,))
    index = {n: i for i, n in enumerate(names)}
    for a, b in pairs:
        for n in (a, b):
            if n not in index:
                index[n] = len(index)
    ordered = sorted(index)
    index = {n: i for i, n in enumerate(ordered)}
    ia = np.array([index[a] for a, _ in pairs], dtype=np.intp)
    ib = np.array([index[b] for _, b in pairs], dtype=np.intp)
    labels = rt.components(len(ordered), ia, ib)
    result = {n: int(c) for n, c in zip(ordered, labels, strict=True)}
    cache[pool] = (matches, result)
    return result


async def crosstable(conn: aiosqlite.Connection, pool: str) -> list[rt.PairTotal]:
    return await load_pairs(conn, pool)


# -- pausing --------------------------------------------------------------------------------------


async def current_versions(conn: aiosqlite.Connection, names: Iterable[str] | None = None) -> dict[str, int]:
    """The newest accepted version of each bot (bots absent from ``bot_versions`` are version 1).

    Rejected and still-checking submissions do not count: they never play, so
    they must not lift a pause either.
    """
    rows = await _rows(
        conn,
        "SELECT b.name, MAX(v.version) FROM bots b JOIN bot_versions v ON v.bot_id = b.id "
        "WHERE v.status = 'accepted' GROUP BY b.name",
    )
    wanted = set(names) if names is not None else None
    return {n: int(v) for n, v in rows if wanted is None or n in wanted}


async def paused_bots(conn: aiosqlite.Connection) -> dict[str, tuple[int, str]]:
    """Bots paused at their current version: name -> (version, reason)."""
    rows = await _rows(conn, "SELECT bot_name, paused_version, paused_reason FROM bot_status")
    versions = await current_versions(conn)
    return {n: (v, reason) for n, v, reason in rows if v >= versions.get(n, 1)}


async def failures_in_a_row(
    conn: aiosqlite.Connection, name: str, version: int, failures: Iterable[int], limit: int
) -> int:
    """How many of ``name``'s last rated matches at ``version`` (at most ``limit``) it lost through its own fault.

    Counted back from its last finished rated match, in the order they ended, up to the first that was
    not such a failure: ``failures`` are the terminations that count (as ints), and only when the bot's
    seat is the offender. The store holds every worker's matches, and those before a restart, so the
    count is the whole server's. Matches that ended before the bot was last paused or unpaused
    (:func:`unpause_bot`) do not count: a bot let back in starts a new run.
    """
    # A bot's matches end in about the order they start (the seats_by_bot index gives them newest first);
    # matches it plays at the same time can end out of order, so a few more than needed are read.
    rows = await _rows(
        conn,
        "SELECT m.ended_at, m.id, m.termination, m.offender, s.seat FROM match_seats s "
        "JOIN matches m ON m.id = s.match_id WHERE s.bot_name = ? AND s.bot_version = ? "
        "AND m.rated = 1 AND m.status = 'finished' ORDER BY s.match_id DESC LIMIT ?",
        (name, version, limit + 64),
    )
    status = await _rows(conn, "SELECT paused_at FROM bot_status WHERE bot_name = ?", (name,))
    since = status[0][0] if status else ""
    counted = set(failures)
    streak = 0
    for ended, _id, termination, offender, seat in sorted(rows, key=lambda r: (r[0] or "", r[1]), reverse=True):
        if streak >= limit or (ended or "") <= since or termination not in counted or offender != seat:
            break
        streak += 1
    return streak


async def pause_bot(store: Any, name: str, version: int, reason: str) -> None:
    """Pause ``name`` at ``version`` (in one transaction, so a worker's store sends it to the writer)."""
    at = datetime.now(UTC).isoformat()

    async def work(conn: Any) -> None:
        await conn.execute(
            "INSERT INTO bot_status (bot_name, paused_version, paused_reason, paused_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (bot_name) DO UPDATE SET paused_version = excluded.paused_version, "
            "paused_reason = excluded.paused_reason, paused_at = excluded.paused_at",
            (name, version, reason, at),
        )

    await store.run_in_transaction(work)


async def unpause_bot(store: Any, name: str) -> None:
    """Let ``name`` play again: its status row stays, at version 0 (never paused), dated now.

    The date starts a new run of failures (:func:`failures_in_a_row`): the failures that paused it do
    not count again.
    """
    at = datetime.now(UTC).isoformat()

    async def work(conn: Any) -> None:
        await conn.execute(
            "UPDATE bot_status SET paused_version = 0, paused_reason = '', paused_at = ? WHERE bot_name = ?",
            (at, name),
        )

    await store.run_in_transaction(work)


# -- per-bot queries (the web interface's bot page, issue 19) ---------------------------------------


@dataclass(frozen=True)
class BotStanding:
    """A bot's row in one pool, with the pool's size."""

    pool: str
    game: str
    method: str
    rating: float
    ci: float
    games: int
    wins: int
    draws: int
    losses: int
    score: float
    last_active: str | None
    bots: int
    """Bots rated in the pool."""


async def bot_standings(conn: aiosqlite.Connection, bot: str) -> list[BotStanding]:
    """Every pool the bot is rated in (most games first)."""
    rows = await _rows(
        conn,
        "SELECT r.pool, p.game, p.method, r.rating, r.ci, r.games, r.wins, r.draws, r.losses, r.score, "
        "r.last_active, (SELECT COUNT(*) FROM ratings o WHERE o.pool = r.pool) FROM ratings r "
        "JOIN rating_pools p ON p.pool = r.pool WHERE r.bot_name = ? ORDER BY r.games DESC, r.pool",
        (bot,),
    )
    return [BotStanding(*r) for r in rows]


async def head_to_head(conn: aiosqlite.Connection, pool: str, bot: str) -> list[rt.PairTotal]:
    """The bot's pair totals in a pool, each seen from the bot (``a`` is the bot), most games first."""
    rows = await _rows(
        conn,
        "SELECT bot_a, bot_b, games, score_a, wins_a, draws, losses_a FROM rating_pairs "
        "WHERE pool = ? AND (bot_a = ? OR bot_b = ?)",
        (pool, bot, bot),
    )
    out = []
    for a, b, games, score_a, wins_a, draws, losses_a in rows:
        if a == bot:
            out.append(rt.PairTotal(a, b, games, score_a, wins_a, draws, losses_a))
        else:
            out.append(rt.PairTotal(b, a, games, games - score_a, losses_a, draws, wins_a))
    out.sort(key=lambda p: (-p.games, p.b))
    return out


@dataclass(frozen=True)
class RatedResult:
    """One rated match of a bot, for its rating history: who it met and what it scored against each."""

    match_id: int
    ended_at: str
    scores: tuple[tuple[str, float], ...]
    """(opponent, the bot's pair score against it: 1 / 0.5 / 0)."""


async def rated_results(conn: aiosqlite.Connection, pool: str, bot: str, limit: int = 500) -> list[RatedResult]:
    """The bot's most recent ``limit`` rated matches in a pool, oldest first (by match id).

    One indexed query (the bot's seats, newest first, with each opponent's seat);
    the scores are those :func:`match_effects` gives: the game's outcome scores
    for two seats, pairwise places for more.
    """
    rows = await _rows(
        conn,
        "SELECT s.match_id, s.seat, o.seat, o.bot_name, m.game, m.params, m.returns, m.ended_at "
        "FROM (SELECT match_id, seat FROM match_seats ms WHERE bot_name = ? AND EXISTS (SELECT 1 FROM "
        "rated_matches rm WHERE rm.match_id = ms.match_id AND rm.pool = ?) ORDER BY match_id DESC LIMIT ?) s "
        "JOIN matches m ON m.id = s.match_id JOIN match_seats o ON o.match_id = s.match_id AND o.seat != s.seat "
        "ORDER BY s.match_id, o.seat",
        (bot, pool, limit),
    )
    games: dict[tuple[str, str], Game] = {}
    out: list[RatedResult] = []
    index = 0
    while index < len(rows):
        mid, me, _o, _n, game_name, params, returns, ended = rows[index]
        opponents = []
        while index < len(rows) and rows[index][0] == mid:
            opponents.append((rows[index][2], rows[index][3]))
            index += 1
        game = games.get((game_name, params))
        if game is None:
            game = games[(game_name, params)] = load_game(game_name, **json.loads(params))
        values = json.loads(returns)
        if len(values) == 2:
            mine = float(game.outcome_scores(values)[me])
            scores = tuple((name, mine) for _seat, name in opponents if name != bot)
        else:
            ranks = rt.ranks_from_returns(values)
            scores = tuple((name, rt.pair_score(ranks[me], ranks[seat])) for seat, name in opponents if name != bot)
        out.append(RatedResult(mid, ended or "", scores))
    return out


async def pool_ratings(conn: aiosqlite.Connection, pool: str) -> dict[str, float]:
    """Every bot's current rating in a pool."""
    return {
        r[0]: float(r[1]) for r in await _rows(conn, "SELECT bot_name, rating FROM ratings WHERE pool = ?", (pool,))
    }
