"""How many rated matches until every bot's 95% interval is below 50 Elo: old pairing vs new.

A real ladder (scheduler, hub, SQLite store in a temp file) with hosted RPS
bots, ``--concurrency 2 --per-bot 1`` as ``arena serve`` runs it, RPS with a
reduced round count (``ROUNDS``; the draw band scales with it). The pairing
is seeded and so are the match seeds (the hub's seed source is replaced by a
seeded generator in this bench), but two matches run at once, so the order
results arrive in (and with it the exact count) can vary a little between
runs.

* ``new``: :class:`arena_server.ladder.scheduler.Ladder` as it is.
* ``old``: the same ladder with the pre-issue-11 picker (kept here only, as
  :class:`OldPairingLadder`): unsettled bots first with the fewest games
  first, then one bot by uncertainty and its opponent by closeness.

Both use the same (new) rating fit, so the difference is the pairing alone.
The count is exact to ``STEP``: after the run the rated matches are replayed in
rating order and refitted every ``STEP`` matches to find the first prefix where
every interval is below 50 Elo AND all bots form one connected component (bots
that never met, even through others, have ratings that cannot be compared,
however narrow their intervals).

Run: ``.venv/bin/python bench/bench_ladder_settle.py [--bots a,b,c] [--max N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import arena_server.ladder.fit as rt
import arena_server.matches.hub as hub_module
import arena_server.store.ratings as ls
from arena_bots import hosted_bots
from arena_games import load_game
from arena_server.ladder.scheduler import Ladder, LadderConfig, _BotInfo, _Pool
from arena_server.matches.hub import Hub
from arena_server.store.database import Store

ROUNDS = 100
TARGET = 50.0
STEP = 5
DEFAULT_BOTS = ("rock", "rotate", "beat-last", "random", "markov-1", "mupn-1")


class OldPairingLadder(Ladder):
    """The ladder with the pairing it had before issue 11 (for this comparison only)."""

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
        unsettled = (games < 10) | (cis > 150.0)  # the old LadderConfig.min_games and settle_ci
        if unsettled.any():
            fewest = games[unsettled].min()
            candidates = [i for i in range(len(names)) if unsettled[i] and games[i] == fewest]
            first = self.rng.choice(candidates)
        else:
            first = self._draw(cis + 1.0)
        chosen = [first]
        for _ in range(n - 1):
            diff = (ratings - ratings[first]) / 200.0  # the old LadderConfig.closeness
            weight = np.exp(-0.5 * diff * diff) * (cis + cis[first]) + 0.02 * (cis.max() + 1.0)
            weight[chosen] = 0.0
            chosen.append(self._draw(weight))
        return self._seat(pool, [names[i] for i in chosen])


async def settle_count(store: Store, pool: str, bots: tuple[str, ...]) -> tuple[int | None, int, float, int]:
    """Replay the rated matches: (first count with every interval < TARGET, matches, widest ci at the end, pairs)."""
    async with store.conn.execute(
        "SELECT m.returns, s0.bot_name, s1.bot_name FROM rated_matches rm JOIN matches m ON m.id = rm.match_id "
        "JOIN match_seats s0 ON s0.match_id = m.id AND s0.seat = 0 "
        "JOIN match_seats s1 ON s1.match_id = m.id AND s1.seat = 1 WHERE rm.pool = ? ORDER BY rm.seq",
        (pool,),
    ) as cur:
        rows = list(await cur.fetchall())
    game = load_game("rps", rounds=ROUNDS)
    game = type(game)(**{**game.params, "draw_band": max(1, round(0.02 * ROUNDS))})
    totals: dict[tuple[str, str], list[Any]] = {}
    first: int | None = None
    widest = float("inf")
    for count, (returns, a, b) in enumerate(rows, 1):
        fx = ls.match_effects(game, (a, b), tuple(json.loads(returns)), "")
        for x, y, sa, *_ in fx.pairs:
            row = totals.setdefault((x, y), [0, 0.0])
            row[0] += 1
            row[1] += sa
        if count % STEP == 0 or count == len(rows):
            fit = rt.fit_rows([], [(x, y, int(v[0]), float(v[1])) for (x, y), v in totals.items()])
            widest = max(fit.ci)
            # Ratings of bots that never met (even through others) are not comparable: one component is required.
            connected = len(fit.names) == len(bots) and set(fit.component) == {0}
            if first is None and connected and widest < TARGET:
                first = count
    return first, len(rows), widest, len(totals)


async def run(strategy: str, bots: tuple[str, ...], max_matches: int, seed: int) -> None:
    seeds = random.Random(seed)
    # Match seeds from a seeded generator instead of secrets (this bench only), for repeatable runs.
    setattr(hub_module, "new_seed", lambda: f"{seeds.getrandbits(128):032x}")  # noqa: B010
    with tempfile.TemporaryDirectory() as tmp:
        store = await Store.open(Path(tmp) / "settle.db")
        try:
            hub = Hub(store, hosted_bots())
            cls = OldPairingLadder if strategy == "old" else Ladder
            config = LadderConfig(
                [load_game("rps", rounds=ROUNDS)], concurrency=2, per_bot=1, seed=seed, bots=bots, refit_interval=0.5
            )
            ladder = cls(hub, config)
            pool = ladder.pools[0]
            ladder.start()
            started = time.perf_counter()
            while ladder.matches_played < max_matches:
                await asyncio.sleep(0.5)
                rows = await ls.leaderboard(store.conn, pool.key, 1000)
                info = await ls.pool_info(store.conn, pool.key)
                fitted = info is not None and info.fitted_at is not None and all(r.ci > 0 for r in rows)
                connected = {r.component for r in rows} == {0}
                if len(rows) == len(bots) and fitted and connected and max(r.ci for r in rows) < TARGET:
                    break
            ladder.halt()
            await hub.shutdown()
            await ladder.stop()
            elapsed = time.perf_counter() - started
            first, total, widest, pairs = await settle_count(store, pool.key, bots)
            verdict = f"{first} rated matches" if first is not None else f"not reached in {total} matches"
            print(
                f"{strategy:>3} pairing: every interval < {TARGET:g} Elo after {verdict} "
                f"(widest at the end {widest:.1f}; {pairs} of {len(bots) * (len(bots) - 1) // 2} pairs played; "
                f"{elapsed:.0f} s)",
                flush=True,
            )
        finally:
            await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", default=",".join(DEFAULT_BOTS), help="hosted RPS bots to rate")
    parser.add_argument("--max", type=int, default=3000, help="give up after this many rated matches")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--strategy", choices=("old", "new", "both"), default="both")
    args = parser.parse_args()
    bots = tuple(b.strip() for b in args.bots.split(",") if b.strip())
    print(f"-- hosted RPS bots {', '.join(bots)}; RPS {ROUNDS} rounds; concurrency 2, per bot 1; seed {args.seed} --")
    for strategy in ("old", "new") if args.strategy == "both" else (args.strategy,):
        await run(strategy, bots, args.max, args.seed)


if __name__ == "__main__":
    asyncio.run(main())
