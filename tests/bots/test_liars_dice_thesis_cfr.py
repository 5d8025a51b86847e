"""The thesis-game CFR by dynamic programming over dice counts: values, the DP recursion, the bot playing it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import arena_bots  # noqa: F401  (registers the hosted bots)
from arena_bots.liars_dice import thesis_cfr
from arena_bots.liars_dice.cfr_bot import SHIPPED_THESIS, CfrBot, ThesisStrategy, load_policy, thesis_path
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
    assert train_main(["--game", "thesis", "--dice", "2", "--scale", "3000"]) == 0
    value, policies = thesis_cfr.load(thesis_path())
    assert ThesisStrategy(tmp_path).source() == thesis_path(tmp_path)  # the host's own training, not the shipped
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


def test_shipped_thesis_strategy_is_small_and_measured() -> None:
    # Shipped in the package (uint8 probabilities), so `cfr` never needs a 3-minute training before playing.
    assert SHIPPED_THESIS.stat().st_size < 1_000_000
    value, policies = thesis_cfr.load(SHIPPED_THESIS)
    assert set(policies) == {(a, b) for a in range(1, 6) for b in range(1, 6)}
    assert value[5, 5] == pytest.approx(0.0193, abs=0.002)
    # Exact best responses (perfect recall) in the rounds small enough to walk, later rounds' values fixed.
    assert thesis_cfr.round_exploitability(value, policies, 1) < 0.02  # 0.0139 when shipped
    assert thesis_cfr.round_exploitability(value, policies, 2) < 0.09  # 0.0841 when shipped


def test_cfr_plays_the_shipped_thesis_strategy_on_a_fresh_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ARENA_BOT_STATE_DIR", str(tmp_path))  # nothing trained here
    caplog.set_level("INFO", logger="arena_bots.liars_dice.cfr_bot")
    hosted = hosted_bots()
    rng = np.random.default_rng(9)
    for k in range(2):
        cfr = hosted["cfr"].factory(k)
        play_game([cfr, hosted["statistician"].factory(k)], THESIS_PARAMS, rng)
        assert isinstance(cfr, CfrBot) and cfr.thesis is not None
    loaded = [r.getMessage() for r in caplog.records if "thesis-game strategy loaded" in r.getMessage()]
    assert loaded == [f"cfr: thesis-game strategy loaded from {SHIPPED_THESIS}"]  # once per host, saying which


def test_cfr_says_so_when_no_thesis_strategy_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import arena_bots.liars_dice.cfr_bot as cfr_bot

    monkeypatch.setattr(cfr_bot, "SHIPPED_THESIS", tmp_path / "missing.npz")
    strategy = ThesisStrategy(tmp_path)
    assert strategy.get() is None and strategy.get() is None
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "arena train liars-dice-cfr --game thesis" in warnings[0]
