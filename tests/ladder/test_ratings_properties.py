"""Property tests of the Bradley-Terry fit and the stored rating tables (hypothesis).

1. Cold fit == warm fit (from the optimum, from wild ratings) within 0.01 Elo.
2. Adding one match moves no rating by more than the bound that match can justify.
   Derivation (log-odds units, r the MAP ratings; at the optimum the mean of each
   component is 0, so the reported ratings are ``1500 + ELO_PER_UNIT * r``):
   the new game adds ``(s - p_ab(r)) (e_a - e_b)`` to the gradient at the old
   optimum ``r``; by the mean-value theorem the new optimum is
   ``r' = r + Hbar^-1 g`` with ``Hbar`` the negative Hessian averaged over the
   segment ``r..r'``. ``Hbar = prior * I + L`` (``L`` a weighted graph
   Laplacian) and ``g`` sums to zero over the component, so
   ``|r' - r|_inf <= |r' - r|_2 <= sqrt(2) |s - p_ab(r)| / (prior + lambda_2(L_min))``
   where ``L_min`` weights each pair (the new game included) by
   ``n_ij * min(p(1-p) at r, p(1-p) at r')``: ``p(1-p)`` is unimodal in the
   rating difference, which moves linearly along the segment, so its minimum
   is at an end. The bound is about ``1/games`` in a well-played pool.
3. The stored tables after applying matches one by one (with refits at random
   moments, warm-started from the stored ratings) equal a rebuild from the
   matches (real SQLite files, the production code paths).
"""

from __future__ import annotations

import asyncio
import math
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arena_server.ladder.fit as rt
import arena_server.store.ratings as ls
from arena_client import SeatInfo, Termination, TimeControl
from arena_games import load_game
from arena_server.referee.loop import MatchRecord, new_seed, seed_hash
from arena_server.store.database import Store
from tests.conftest import in_thread

NAMES = ("a", "b", "c", "d", "e")

Match = tuple[int, int, float]
"""(bot i, bot j, score of i): 1, 0.5 or 0."""

matches_strategy = st.lists(
    st.tuples(st.integers(0, len(NAMES) - 1), st.integers(0, len(NAMES) - 1), st.sampled_from((0.0, 0.5, 1.0))).filter(
        lambda m: m[0] != m[1]
    ),
    min_size=1,
    max_size=60,
)


def totals(matches: list[Match]) -> list[rt.PairTotal]:
    acc: dict[tuple[str, str], list[float]] = {}
    for i, j, s in matches:
        a, b, sa = NAMES[i], NAMES[j], s
        if a > b:
            a, b, sa = b, a, 1.0 - s
        row = acc.setdefault((a, b), [0, 0.0, 0, 0, 0])
        row[0] += 1
        row[1] += sa
        row[2 if sa == 1.0 else 3 if sa == 0.5 else 4] += 1
    return [rt.PairTotal(a, b, int(v[0]), v[1], int(v[2]), int(v[3]), int(v[4])) for (a, b), v in sorted(acc.items())]


def max_diff(x: tuple[float, ...], y: tuple[float, ...]) -> float:
    return max(abs(p - q) for p, q in zip(x, y, strict=True))


@settings(max_examples=150, deadline=None)
@given(matches_strategy, st.lists(st.floats(-5000, 5000), min_size=len(NAMES), max_size=len(NAMES)))
def test_cold_fit_equals_warm_fit(matches: list[Match], wild: list[float]) -> None:
    pairs = totals(matches)
    cold = rt.fit_bradley_terry(NAMES, pairs)
    for start in (dict(zip(cold.names, cold.ratings, strict=True)), dict(zip(NAMES, wild, strict=True))):
        warm = rt.fit_bradley_terry(NAMES, pairs, start=start)
        assert warm.component == cold.component
        assert max_diff(warm.ratings, cold.ratings) < 0.01
        assert max_diff(warm.ci, cold.ci) < 0.01


def one_match_bound(pairs: list[rt.PairTotal], before: rt.Fit, after: rt.Fit, new: Match) -> float:
    """The bound of the module docstring, in Elo."""
    k = len(NAMES)
    r0 = {n: (x - rt.BASE_RATING) / rt.ELO_PER_UNIT for n, x in zip(before.names, before.ratings, strict=True)}
    r1 = {n: (x - rt.BASE_RATING) / rt.ELO_PER_UNIT for n, x in zip(after.names, after.ratings, strict=True)}

    def curvature(d: float) -> float:
        p = 1 / (1 + math.exp(-d))
        return p * (1 - p)

    lap = np.zeros((k, k))
    edges = [(p.a, p.b, p.games) for p in pairs] + [(NAMES[new[0]], NAMES[new[1]], 1)]
    for a, b, n in edges:
        w = n * min(curvature(r0[a] - r0[b]), curvature(r1[a] - r1[b]))
        i, j = NAMES.index(a), NAMES.index(b)
        lap[i, i] += w
        lap[j, j] += w
        lap[i, j] -= w
        lap[j, i] -= w
    # The component of the new game's two bots after adding it (the change lives there, summing to 0).
    a, b = NAMES[new[0]], NAMES[new[1]]
    comp = after.component[after.names.index(a)]
    members = [NAMES.index(n) for n, c in zip(after.names, after.component, strict=True) if c == comp]
    sub = lap[np.ix_(members, members)]
    lambda2 = float(np.sort(np.linalg.eigvalsh(sub))[1])  # the smallest is 0 (the constant vector)
    p_ab = 1 / (1 + math.exp(-(r0[a] - r0[b])))
    return rt.ELO_PER_UNIT * math.sqrt(2) * abs(new[2] - p_ab) / (rt.PRIOR_PRECISION + lambda2)


@settings(max_examples=150, deadline=None)
@given(matches_strategy, st.tuples(st.integers(0, 4), st.integers(0, 4), st.sampled_from((0.0, 0.5, 1.0))))
def test_one_more_match_moves_ratings_at_most_by_its_bound(matches: list[Match], new: Match) -> None:
    if new[0] == new[1]:
        new = (new[0], (new[0] + 1) % len(NAMES), new[2])
    pairs = totals(matches)
    before = rt.fit_bradley_terry(NAMES, pairs)
    after = rt.fit_bradley_terry(NAMES, totals([*matches, new]))
    bound = one_match_bound(pairs, before, after, new)
    moved = max_diff(before.ratings, after.ratings)
    assert moved <= bound + 1e-3, (moved, bound)


def test_the_bound_is_tight_enough_to_mean_something() -> None:
    """With 1000 even games among 5 bots one more game may move a rating by only a few Elo."""
    matches = [(i, j, 1.0 if (n % 2) else 0.0) for n in range(50) for i in range(5) for j in range(i + 1, 5)]
    pairs = totals(matches)
    before = rt.fit_bradley_terry(NAMES, pairs)
    after = rt.fit_bradley_terry(NAMES, totals([*matches, (0, 1, 1.0)]))
    bound = one_match_bound(pairs, before, after, (0, 1, 1.0))
    assert 0 < max_diff(before.ratings, after.ratings) <= bound < 5


async def _store_rated(store: Store, a: str, b: str, score_a: float) -> None:
    """Store one finished rated RPS match through the production path (rating change in its transaction)."""
    seed = new_seed()
    record = MatchRecord(
        "",
        load_game("rps", rounds=10),
        (SeatInfo(0, a), SeatInfo(1, b)),
        TimeControl(),
        seed,
        seed_hash(seed),
        datetime.now(UTC),
        rated=True,
    )
    await store.start_match(record)
    diff = {1.0: 3.0, 0.5: 0.0, 0.0: -3.0}[score_a]
    record.returns = (diff, -diff)
    record.termination = Termination.NORMAL
    record.ended_at = datetime.now(UTC)
    await store.finish_match(record, ls.rating_change(record))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(matches_strategy, st.sets(st.integers(0, 59), max_size=6))
def test_stored_table_after_incremental_refits_equals_a_rebuild(matches: list[Match], refit_after: set[int]) -> None:
    async def run(db: Path) -> tuple[list[str], ls.Snapshot, list[str]]:
        store = await Store.open(db)
        try:
            for n, (i, j, s) in enumerate(matches):
                await _store_rated(store, NAMES[i], NAMES[j], s)
                if n in refit_after:  # warm refits at random moments, as the ladder's loop does
                    await ls.refit_dirty(store)
            await ls.refit_dirty(store)
            _snap, diffs = await ls.recompute(store, write=False)
            stored = await ls.stored_snapshot(store.conn)
        finally:
            await store.close()
        check = await ls.check_database(str(db))
        return diffs, stored, check.differences

    with tempfile.TemporaryDirectory() as tmp:
        diffs, stored, check_diffs = in_thread(asyncio.run, run(Path(tmp) / "arena.db"))
    assert diffs == [] and check_diffs == []
    cold = rt.fit_bradley_terry([], totals(matches)).as_dict()
    for name, (rating, ci) in cold.items():
        row = stored.ratings[(ls.pool_key(load_game("rps", rounds=10)), name)]
        assert abs(row[0] - rating) <= ls.RATING_TOLERANCE and abs(row[1] - ci) <= ls.RATING_TOLERANCE
