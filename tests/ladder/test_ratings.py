"""Rating mathematics: the Bradley-Terry fit, its intervals, match effects, Plackett-Luce."""

from __future__ import annotations

import math
import random

import pytest

import arena_server.ladder.fit as rt
import arena_server.store.ratings as ls
from arena_games import load_game


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
