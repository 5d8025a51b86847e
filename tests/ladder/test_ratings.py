"""Rating mathematics: the Bradley-Terry fit, its intervals, match effects, Plackett-Luce."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

import arena_server.ratings.fit as rt
import arena_server.store.ratings as ls
from arena_client import Termination
from arena_games import load_game
from arena_server.store.database import Store


def simulate(true_elo: dict[str, float], games: int, seed: int) -> list[rt.PairTotal]:
    rng = random.Random(seed)
    names = sorted(true_elo)
    totals: dict[tuple[str, str], list[float]] = {}
    for _ in range(games):
        a, b = sorted(rng.sample(names, 2))
        p = rt.expected_score(true_elo[a], true_elo[b])
        win = rng.random() < p
        row = totals.setdefault((a, b), [0, 0.0, 0, 0, 0])
        row[0] += 1
        row[1] += 1.0 if win else 0.0
        row[2 if win else 4] += 1
    return [
        rt.PairTotal(a, b, int(v[0]), v[1], int(v[2]), int(v[3]), int(v[4])) for (a, b), v in sorted(totals.items())
    ]


def test_fit_recovers_known_ratings_within_their_intervals() -> None:
    true = {"a": 1800.0, "b": 1650.0, "c": 1500.0, "d": 1350.0, "e": 1200.0}
    fit = rt.fit_bradley_terry(list(true), simulate(true, 20_000, seed=7)).as_dict()
    mean_true = sum(true.values()) / len(true)
    inside = 0
    for name, elo in true.items():
        rating, ci = fit[name]
        assert 5 < ci < 40, (name, ci)
        inside += abs(rating - (elo - mean_true + 1500)) <= ci
    assert inside >= 4  # 95% intervals: at most one miss out of five is plausible
    assert [n for n, _ in sorted(fit.items(), key=lambda kv: -kv[1][0])] == list("abcde")


def test_intervals_shrink_with_more_games_and_unplayed_bots_keep_the_prior() -> None:
    true = {"a": 1600.0, "b": 1500.0, "c": 1400.0}
    few = rt.fit_bradley_terry(list(true), simulate(true, 100, seed=1)).as_dict()
    many = rt.fit_bradley_terry(list(true), simulate(true, 10_000, seed=1)).as_dict()
    assert all(many[n][1] < few[n][1] / 5 for n in true)
    lonely = rt.fit_bradley_terry([*true, "newcomer"], simulate(true, 1000, seed=2)).as_dict()
    assert lonely["newcomer"][1] > 1000  # nothing known: the prior's width, not a fake certainty


def test_unbeaten_bot_gets_a_finite_rating_and_the_fit_is_deterministic() -> None:
    pairs = [rt.PairTotal("a", "b", 10, 10.0, 10, 0, 0)]
    first = rt.fit_bradley_terry(["a", "b"], pairs)
    assert math.isfinite(first.ratings[0]) and first.ratings[0] > first.ratings[1]
    assert rt.fit_bradley_terry(["b", "a"], list(pairs)) == first


def test_score_interval_covers_the_mean_and_stays_in_bounds() -> None:
    mean, low, high = rt.score_interval(10, 10, 0, 0)
    assert mean == 1.0 and 0.0 <= low < 1.0 and high == 1.0
    mean, low, high = rt.score_interval(100, 40, 20, 40)
    assert low < 0.5 < high and mean == 0.5


def test_pool_key_ignores_draw_band_and_defaults() -> None:
    assert ls.pool_key(load_game("rps")) == "rps"
    assert ls.pool_key(load_game("rps", draw_band=20)) == "rps"
    assert ls.pool_key(load_game("rps", signs=5)) == "rps(signs=5)"
    assert ls.pool_key(load_game("liars_dice", players=3)) == "liars_dice(players=3)"


@pytest.mark.parametrize(("diff", "scores"), [(20, (0.5, 0.5)), (-20, (0.5, 0.5)), (21, (1.0, 0.0)), (-21, (0.0, 1.0))])
def test_rps_draw_band_in_match_effects(diff: int, scores: tuple[float, float]) -> None:
    game = load_game("rps", draw_band=20)
    fx = ls.match_effects(game, ("x", "y"), (float(diff), float(-diff)), "t")
    assert (fx.seats[0].score, fx.seats[1].score) == scores
    a, b, score_a, *_ = fx.pairs[0]
    assert (a, b, score_a) == ("x", "y", scores[0])


def test_multiplayer_effects_use_finishing_order() -> None:
    game = load_game("liars_dice", players=3)
    fx = ls.match_effects(game, ("p", "q", "r"), (1.0, -1.0, 0.0), "t")
    assert fx.method == ls.PL
    assert [s.rank for s in fx.seats] == [1, 3, 2]
    assert [(s.win, s.loss) for s in fx.seats] == [(1, 0), (0, 1), (0, 1)]
    assert sorted(fx.pairs) == [("p", "q", 1.0, 1, 0, 0), ("p", "r", 1.0, 1, 0, 0), ("q", "r", 0.0, 0, 0, 1)]
    before = rt.pl_default()
    after = rt.pl_update([before] * 3, [1, 3, 2])
    assert after[0][0] > before[0] > after[1][0] and all(s < before[1] for _, s in after)


# -- convergence (issue 11) ---------------------------------------------------------------------------


def test_three_wins_of_five_converges_to_the_same_ratings_from_any_start() -> None:
    """The case that diverged: warm start 1811/1189 gave 13013 with undamped Newton steps."""
    pairs = [rt.PairTotal("a", "b", 5, 3.0, 3, 0, 2)]
    cold = rt.fit_bradley_terry(["a", "b"], pairs)
    # The MAP optimum: the log-odds difference d solves 3 - 5 p(d) = prior_precision * d / 2.
    d = (cold.ratings[0] - cold.ratings[1]) / rt.ELO_PER_UNIT
    assert abs(3 - 5 / (1 + math.exp(-d)) - rt.PRIOR_PRECISION * d / 2) < 1e-6
    assert 1530 < cold.ratings[0] < 1540 and cold.ratings[0] + cold.ratings[1] == pytest.approx(3000)
    for start in ({"a": 1811.0, "b": 1189.0}, {"a": 13013.0, "b": -10013.0}, {"a": -1e6, "b": 1e6}):
        warm = rt.fit_bradley_terry(["a", "b"], pairs, start=start)
        assert max(abs(x - y) for x, y in zip(warm.ratings, cold.ratings, strict=True)) < 0.01, start
        assert max(abs(x - y) for x, y in zip(warm.ci, cold.ci, strict=True)) < 0.01, start


@pytest.mark.parametrize("seed", range(8))
def test_random_pools_warm_equals_cold(seed: int) -> None:
    rng = random.Random(seed)
    true = {f"bot{i}": rng.gauss(1500, 300) for i in range(rng.randint(2, 12))}
    pairs = simulate(true, rng.randint(1, 400), seed)
    cold = rt.fit_bradley_terry(list(true), pairs)
    wild = {n: rng.uniform(-20000, 20000) for n in true}
    for start in (wild, dict(zip(cold.names, cold.ratings, strict=True))):
        warm = rt.fit_bradley_terry(list(true), pairs, start=start)
        assert warm.names == cold.names and warm.component == cold.component
        assert max(abs(x - y) for x, y in zip(warm.ratings, cold.ratings, strict=True)) < 0.01
        assert max(abs(x - y) for x, y in zip(warm.ci, cold.ci, strict=True)) < 0.01


def test_draws_count_half_a_win() -> None:
    drawn = rt.fit_bradley_terry(["a", "b"], [rt.PairTotal("a", "b", 10, 5.0, 0, 10, 0)])
    split = rt.fit_bradley_terry(["a", "b"], [rt.PairTotal("a", "b", 10, 5.0, 5, 0, 5)])
    assert drawn.ratings == split.ratings == (1500.0, 1500.0)
    mostly = rt.fit_bradley_terry(["a", "b"], [rt.PairTotal("a", "b", 10, 7.0, 4, 6, 0)])
    same = rt.fit_bradley_terry(["a", "b"], [rt.PairTotal("a", "b", 10, 7.0, 7, 0, 3)])
    assert mostly.ratings == same.ratings and mostly.ratings[0] > 1500


@pytest.mark.parametrize("games", [1, 10, 100, 1000])
def test_unbeaten_bot_is_bounded_by_the_prior(games: int) -> None:
    """A bot that won every game has an infinite MLE; the prior keeps it at the stated bound.

    For n straight wins the gap d (log-odds) solves n (1 - p(d)) = prior_precision * d / 2,
    so it grows only like log n: the README's table of gaps is checked here.
    """
    fit = rt.fit_bradley_terry(["w", "l"], [rt.PairTotal("l", "w", games, 0.0, 0, 0, games)]).as_dict()
    gap = fit["w"][0] - fit["l"][0]
    expected = {1: 527, 10: 851, 100: 1194, 1000: 1548}[games]
    assert abs(gap - expected) < 1, gap
    d = gap / rt.ELO_PER_UNIT
    assert abs(games / (1 + math.exp(d)) - rt.PRIOR_PRECISION * d / 2) < 1e-6
    assert math.isfinite(fit["w"][1]) and 400 < fit["w"][1] < 750


def test_disconnected_pools_are_fitted_per_component_and_centred_on_1500() -> None:
    pairs = [
        rt.PairTotal("a", "b", 20, 15.0, 15, 0, 5),
        rt.PairTotal("b", "c", 20, 10.0, 10, 0, 10),
        rt.PairTotal("x", "y", 20, 2.0, 2, 0, 18),
    ]
    fit = rt.fit_bradley_terry(["a", "b", "c", "x", "y", "z"], pairs)
    by = dict(zip(fit.names, zip(fit.ratings, fit.ci, fit.component, strict=True), strict=True))
    assert [by[n][2] for n in "abcxyz"] == [0, 0, 0, 1, 1, 2]
    assert sum(by[n][0] for n in "abc") / 3 == pytest.approx(1500, abs=1e-4)
    assert sum(by[n][0] for n in "xy") / 2 == pytest.approx(1500, abs=1e-4)
    assert by["z"] == (1500.0, round(rt.Z95 * rt.PRIOR_SD_ELO, 6), 2)
    # Each component's fit is exactly what it would be alone.
    alone = rt.fit_bradley_terry(["x", "y"], pairs[2:])
    assert (by["x"][0], by["y"][0]) == alone.ratings


def test_intervals_shrink_strictly_with_games_and_fall_below_50() -> None:
    true = {"a": 1600.0, "b": 1500.0, "c": 1450.0, "d": 1400.0}
    widths = []
    for games in (10, 100, 1000, 10_000):
        fit = rt.fit_bradley_terry(list(true), simulate(true, games, seed=5))
        widths.append(max(fit.ci))
    assert widths[0] > widths[1] > widths[2] > widths[3], widths
    assert widths[2] < 50 and widths[3] < 20, widths


def test_intervals_are_the_inverse_information_of_two_bots() -> None:
    """Two bots, n even games: var(d) = 1 / (n/4 + prior/2), each rating is d/2 from the mean."""
    n = 400
    fit = rt.fit_bradley_terry(["a", "b"], [rt.PairTotal("a", "b", n, n / 2, n // 2, 0, n // 2)])
    sd_d = 1 / math.sqrt(n / 4 + rt.PRIOR_PRECISION / 2)
    assert fit.ci[0] == pytest.approx(rt.Z95 * rt.ELO_PER_UNIT * sd_d / 2, abs=1e-5)


def test_a_large_sparse_pool_converges() -> None:
    rng = random.Random(3)
    true = {f"b{i:03d}": rng.gauss(1500, 250) for i in range(400)}
    names = sorted(true)
    totals: dict[tuple[str, str], list[float]] = {}
    for i, a in enumerate(names):  # a ring plus random pairs: one component
        for b in {names[(i + 1) % len(names)], rng.choice(names)} - {a}:
            x, y = sorted((a, b))
            games = rng.randint(1, 50)
            wins = sum(rng.random() < rt.expected_score(true[x], true[y]) for _ in range(games))
            row = totals.setdefault((x, y), [0, 0.0])
            row[0] += games
            row[1] += wins
    rows = [(a, b, int(v[0]), v[1]) for (a, b), v in sorted(totals.items())]
    cold = rt.fit_rows(names, rows)
    warm = rt.fit_rows(names, rows, start={n: true[n] for n in names})
    assert set(cold.component) == {0}
    assert max(abs(x - y) for x, y in zip(warm.ratings, cold.ratings, strict=True)) < 0.01


async def test_failures_in_a_row_are_counted_back_from_the_last_match_to_end(tmp_path: Path) -> None:
    """Only rated, finished matches of that version count; a match that ended well, or a failure that was the
    opponent's, ends the run; the order is the order the matches ended, not their ids."""
    store = await Store.open(tmp_path / "arena.db")
    crash, timeout, normal = int(Termination.CRASH), int(Termination.TIMEOUT), int(Termination.NORMAL)
    rows = [  # (ended, status, termination, offender, rated, my seat, version)
        ("2026-01-01T00:00:01", "finished", crash, 0, 1, 0, 1),
        ("2026-01-01T00:00:02", "finished", normal, None, 1, 0, 1),  # ends the run before it
        ("2026-01-01T00:00:03", "finished", crash, 1, 1, 0, 1),  # the opponent crashed: ends the run too
        ("2026-01-01T00:00:04", "finished", timeout, 1, 1, 1, 1),
        ("2026-01-01T00:00:09", "finished", crash, 0, 1, 0, 1),  # (started first, ended last)
        ("2026-01-01T00:00:05", "finished", crash, 0, 0, 0, 1),  # unrated: not counted
        ("2026-01-01T00:00:06", "aborted", None, None, 1, 0, 1),  # aborted: not counted
        ("2026-01-01T00:00:07", "finished", normal, None, 1, 0, 2),  # another version
        ("2026-01-01T00:00:08", "finished", crash, 1, 1, 1, 1),
    ]
    order = [4, 0, 1, 2, 3, 5, 6, 7, 8]  # the ids follow the starts
    try:
        async with store.write_lock:
            for match_id, k in enumerate(order, start=1):
                ended, status, termination, offender, rated, seat, version = rows[k]
                await store.conn.execute(
                    "INSERT INTO matches (id, game, params, seed, seed_sha256, time_control, status, termination, "
                    "offender, rated, started_at, ended_at) VALUES (?, 'rps', '{}', 's', 'h', '{}', ?, ?, ?, ?, ?, ?)",
                    (match_id, status, termination, offender, rated, ended, ended),
                )
                for s in (0, 1):
                    name = "me" if s == seat else "them"
                    await store.conn.execute(
                        "INSERT INTO match_seats (match_id, seat, bot_name, bot_version, kind) "
                        "VALUES (?, ?, ?, ?, 'remote')",
                        (match_id, s, name, version if name == "me" else 1),
                    )
            await store.conn.commit()
        counted = [crash, timeout]
        assert await ls.failures_in_a_row(store.conn, "me", 1, counted, 10) == 3  # 9, 8 and 4 (seconds)
        assert await ls.failures_in_a_row(store.conn, "me", 1, counted, 2) == 2  # (at most the limit)
        assert await ls.failures_in_a_row(store.conn, "me", 1, [crash], 10) == 2  # the timeout (4) ends the run then
        assert await ls.failures_in_a_row(store.conn, "me", 2, counted, 10) == 0
        assert await ls.failures_in_a_row(store.conn, "nobody", 1, counted, 10) == 0
    finally:
        await store.close()


async def test_an_unpaused_bot_starts_a_new_run_of_failures(tmp_path: Path) -> None:
    """``arena ratings unpause``: the failures that paused the bot do not pause it again at its next one."""
    store = await Store.open(tmp_path / "arena.db")
    crash = int(Termination.CRASH)

    async def failed(match_id: int, ended: str) -> None:
        async with store.write_lock:
            await store.conn.execute(
                "INSERT INTO matches (id, game, params, seed, seed_sha256, time_control, status, termination, "
                "offender, rated, started_at, ended_at) VALUES (?, 'rps', '{}', 's', 'h', '{}', 'finished', ?, 0, 1, "
                "?, ?)",
                (match_id, crash, ended, ended),
            )
            await store.conn.execute(
                "INSERT INTO match_seats (match_id, seat, bot_name, bot_version, kind) "
                "VALUES (?, 0, 'me', 1, 'hosted')",
                (match_id,),
            )
            await store.conn.commit()

    try:
        for n in range(3):
            await failed(n + 1, f"2026-01-01T00:00:0{n}+00:00")
        assert await ls.failures_in_a_row(store.conn, "me", 1, [crash], 3) == 3
        await ls.pause_bot(store, "me", 1, "paused after 3 failed matches in a row")
        assert "me" in await ls.paused_bots(store.conn)
        await ls.unpause_bot(store, "me")
        assert await ls.paused_bots(store.conn) == {}
        assert await ls.failures_in_a_row(store.conn, "me", 1, [crash], 3) == 0
        await failed(4, "2999-01-01T00:00:00+00:00")  # (after the unpause, whenever the test runs)
        assert await ls.failures_in_a_row(store.conn, "me", 1, [crash], 3) == 1
        board = await ls.leaderboard(store.conn, "rps")
        assert all(row.paused_reason == "" for row in board)
    finally:
        await store.close()
