"""The hosted Liar's Dice bots in real games: every variant, persistence between matches, reset, decision time."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

import arena_bots  # noqa: F401  (registers the hosted bots)
from arena_bots.liars_dice import bots as ld_bots
from arena_bots.liars_dice.learners import ThesisLearner
from arena_bots.liars_dice.play import THESIS_PARAMS, play_game
from arena_bots.registry import BotState, hosted_bots

NAMES = ("sarsa", "sarsa-profiling", "q-learning", "statistician", "cfr")
VARIANTS = [
    THESIS_PARAMS,
    {"dice": 1, "bidding": "standard", "wild": "highest", "rounds": "single"},
    {"dice": 3, "bidding": "standard", "wild": "ones", "spot_on": True},
    {"dice": 2, "faces": 4, "bidding": "thesis", "wild": "highest", "rounds": "single"},
]


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ARENA_BOT_STATE_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("params", VARIANTS)
@pytest.mark.parametrize("players", [2, 3, 6])
def test_every_bot_plays_every_variant(params: dict[str, object], players: int) -> None:
    hosted = hosted_bots()
    rng = np.random.default_rng(players)
    for offset in range(len(NAMES)):
        names = [NAMES[(offset + i) % len(NAMES)] for i in range(players)]
        returns, _ = play_game([hosted[n].factory(i) for i, n in enumerate(names)], params, rng)
        assert sum(returns) == pytest.approx(0.0)


def test_tables_persist_between_matches_and_reset(state_dir: Path) -> None:
    hosted = hosted_bots()
    rng = np.random.default_rng(3)
    play_game([hosted["sarsa-profiling"].factory(1), hosted["q-learning"].factory(2)], THESIS_PARAMS, rng)
    path = state_dir / "sarsa-profiling-p2d5f6.json"
    first = json.loads(path.read_text())
    assert first["profile"]["rounds"] >= 5  # every round of the game was profiled
    initial = ThesisLearner(10, 6, True, True, rng)
    assert not np.allclose(first["q_call"], initial.q_call)  # it learned
    hosted = hosted_bots()  # a new host (a restarted server): the next match starts from the file
    play_game([hosted["sarsa-profiling"].factory(3), hosted["q-learning"].factory(4)], THESIS_PARAMS, rng)
    second = json.loads(path.read_text())
    assert second["profile"]["rounds"] > first["profile"]["rounds"] or second["profile"]["rounds"] < 5
    assert second["q_call"] != first["q_call"]
    removed = ld_bots.LearnerTables(state_dir).reset()
    assert path in removed and not path.exists()


def test_each_host_owns_its_tables(tmp_path: Path) -> None:
    # Two hosts with their own state directories: matches under one host share one table in memory and save
    # it to that host's directory only; the other host neither sees nor writes it.
    one, two = BotState(tmp_path / "one"), BotState(tmp_path / "two")
    host1, host2 = hosted_bots(one), hosted_bots(two)
    rng = np.random.default_rng(8)
    a, b = host1["q-learning"].factory(1), host1["q-learning"].factory(2)
    play_game([a, host1["random"].factory(3)], THESIS_PARAMS, rng)
    play_game([b, host1["random"].factory(4)], THESIS_PARAMS, rng)
    assert isinstance(a, ld_bots.LearnerBot) and isinstance(b, ld_bots.LearnerBot)
    assert a.learner is not None and b.learner is not None and a.learner.q_call is b.learner.q_call
    saved = tmp_path / "one" / "q-learning-p2d5f6.json"
    assert json.loads(saved.read_text())["q_call"] == a.learner.q_call.tolist()
    c = host2["q-learning"].factory(5)
    play_game([c, host2["random"].factory(6)], THESIS_PARAMS, rng)
    assert isinstance(c, ld_bots.LearnerBot) and c.learner is not None and c.learner.q_call is not a.learner.q_call
    assert (tmp_path / "two" / "q-learning-p2d5f6.json").exists()
    assert json.loads(saved.read_text())["q_call"] == a.learner.q_call.tolist()  # host 2 left host 1's file alone


def test_statistician_calls_impossible_bids_and_raises_certain_ones() -> None:
    from arena_client import MatchInfo, SeatInfo, TimeControl, Turn
    from arena_games.liars_dice import LiarsDiceGame

    game = LiarsDiceGame(**THESIS_PARAMS)
    bot = ld_bots.StatisticianBot(0)
    bot.on_match_start(
        MatchInfo("m", "liars_dice", dict(game.params), 1, (SeatInfo(0, "a"), SeatInfo(1, "b")), TimeControl(), "")
    )
    state = game.new_initial_state()
    for face in (1, 1, 2, 2, 3, 6, 6, 6, 6, 6):  # seat 0: 1 1 2 2 3; seat 1: five sixes
        state.apply_action(face - 1)
    state.apply_action(game.bid_action(9, 6))
    from datetime import timedelta

    turn = Turn("m", 1, 1, state.observation(1), tuple(state.legal_actions()), timedelta(1), timedelta(1))
    assert bot.act(turn) == game.liar_action  # 9 sixes need 4 of 5 unseen dice: 0.3%
    state2 = game.new_initial_state()
    for face in (1, 1, 2, 2, 3, 6, 6, 6, 6, 6):
        state2.apply_action(face - 1)
    state2.apply_action(game.bid_action(3, 6))
    turn2 = Turn("m", 1, 1, state2.observation(1), tuple(state2.legal_actions()), timedelta(1), timedelta(1))
    assert bot.act(turn2) == game.bid_action(5, 6)  # it holds five sixes: the highest certain raise


def test_decision_times() -> None:
    hosted = hosted_bots()
    rng = np.random.default_rng(5)
    small = {"dice": 1, "bidding": "standard", "wild": "highest", "rounds": "single"}
    for name, limit, params in (
        ("sarsa-profiling", 0.001, THESIS_PARAMS),
        ("q-learning", 0.001, THESIS_PARAMS),
        ("cfr", 0.010, small),
        ("statistician", 0.010, THESIS_PARAMS),
    ):
        bot = hosted[name].factory(0)
        times: list[float] = []
        original = bot.act

        def timed(turn, original=original, times=times):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            action = original(turn)
            times.append(time.perf_counter() - t)
            return action

        bot.act = timed  # type: ignore[method-assign]
        for seed in range(20):
            play_game([bot, hosted["random"].factory(seed)], params, rng)
        assert float(np.median(times)) < limit, f"{name}: median {np.median(times) * 1e3:.3f} ms"
