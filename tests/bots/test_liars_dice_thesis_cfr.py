"""The thesis-game CFR by dynamic programming over dice counts: values, the DP recursion, the bot playing it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import arena_bots  # noqa: F401  (registers the hosted bots)
from arena_bots.liars_dice import bots as ld_bots
from arena_bots.liars_dice import thesis_cfr
from arena_bots.liars_dice.cfr_bot import CfrBot, load_policy, thesis_path
from arena_bots.liars_dice.play import THESIS_PARAMS, play_game
from arena_bots.liars_dice.small_game import game_value, make_game
from arena_bots.liars_dice.train import main as train_main
from arena_bots.registry import hosted_bots


def test_roll_tables_are_multinomial() -> None:
    counts, prob, code = thesis_cfr.rolls(3)
    assert len(prob) == 56 and prob.sum() == pytest.approx(1.0)
    assert (counts.sum(axis=1) == 3).all()
    assert prob[thesis_cfr.roll_index([1, 1, 1])] == pytest.approx(1 / 216)
    assert prob[thesis_cfr.roll_index([1, 2, 3])] == pytest.approx(6 / 216)
    assert np.bincount(code, minlength=56).tolist() == [round(p * 216) for p in prob]


def test_one_die_round_matches_the_exact_equilibrium_value() -> None:
    # With one die each the abstraction loses little: the DP value of (1, 1) is the exact game value.
    value, _ = thesis_cfr.solve(1, lambda a, b: 40_000, progress=lambda _: None)
    exact = game_value(make_game(6, "thesis", "none"), load_policy("thesis", "none"))  # type: ignore[arg-type]
    assert exact == pytest.approx(-0.1111, abs=0.001)
    assert value[1, 1] == pytest.approx(exact, abs=0.01)


def test_trained_bot_plays_the_thesis_game(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_BOT_STATE_DIR", str(tmp_path))
    ld_bots._TABLES.clear()
    assert train_main(["--game", "thesis", "--dice", "2", "--scale", "3000"]) == 0
    value, policies = thesis_cfr.load(thesis_path())
    assert set(policies) == {(1, 1), (1, 2), (2, 1), (2, 2)}
    assert value[2, 1] > 0.0 > value[1, 2]  # more dice is better, whoever opens
    params = {**THESIS_PARAMS, "dice": 2}
    rng = np.random.default_rng(4)
    hosted = hosted_bots()
    wins = 0
    for k in range(40):
        cfr = hosted["cfr"].factory(k)
        bots = [cfr, hosted["random"].factory(k)] if k % 2 else [hosted["random"].factory(k), cfr]
        returns, _ = play_game(bots, params, rng)
        assert isinstance(cfr, CfrBot) and cfr.thesis is not None  # it played from the tables
        wins += int(returns[bots.index(cfr)] > 0)
    assert wins >= 34, f"cfr beat random only {wins}/40 times"
