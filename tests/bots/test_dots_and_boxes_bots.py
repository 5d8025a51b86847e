"""The dots and boxes bots: geometry, greedy's captures, chains' double deal, genome files, strength targets."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from arena_bots import hosted_bots
from arena_bots.dots_and_boxes.board import Position, geometry
from arena_bots.dots_and_boxes.bots import (
    ChainsPolicy,
    GreedyPolicy,
    MctsPolicy,
    NeuroPolicy,
    RandomPolicy,
    SolverPolicy,
    shipped_genome,
)
from arena_bots.dots_and_boxes.neuro import Genome, GenomeError, load_genome, save_genome
from arena_bots.experiments.dots_and_boxes_thesis import duel, play
from arena_client import Turn
from arena_games import load_game

DAB_BOTS = ("greedy", "neuro", "neuro-features", "chains", "solver", "boxes-mcts")


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (2, 3), (3, 3), (5, 4)])
def test_geometry_is_the_engines(rows: int, cols: int) -> None:
    game = load_game("dots_and_boxes", rows=rows, cols=cols)
    geo = geometry(rows, cols)
    assert geo.num_edges == game.num_edges
    assert [tuple(int(e) for e in b) for b in geo.box_edges] == list(game.box_edges)
    assert [tuple(int(b) for b in row if b >= 0) for row in geo.edge_boxes] == list(game.edge_boxes)


def _position(rows: int, cols: int, edges: list[int]) -> Position:
    geo = geometry(rows, cols)
    return Position.from_edges(geo, [e in edges for e in range(geo.num_edges)])


def test_greedy_takes_a_three_sided_box_and_then_the_whole_chain() -> None:
    # 1x4 strip: top edges 0-3, verticals 4-8, bottom 9-12. All but the inner verticals 5, 6, 7 drawn:
    # boxes 0 and 3 have three sides, 1 and 2 have two; a chain of 4 open at both ends.
    pos = _position(1, 4, [0, 1, 2, 3, 8, 9, 10, 11, 12, 4])
    for seed in range(20):
        greedy = GreedyPolicy(seed)
        p = pos.copy()
        taken = 0
        while not p.over:
            taken += p.play(greedy.choose(p))
        assert taken == 4 and p.score[0] == 4, "greedy must take every box of the chain in one turn"


def test_greedy_plays_uniformly_when_nothing_can_be_taken() -> None:
    pos = Position(geometry(3, 3))
    greedy = GreedyPolicy(5)
    counts = Counter(greedy.choose(pos) for _ in range(4800))
    assert set(counts) == set(range(24))
    assert min(counts.values()) > 140 and max(counts.values()) < 260  # 200 expected each


def test_greedy_takes_the_box_not_a_random_edge_whenever_it_can() -> None:
    rng = random.Random(1)
    geo = geometry(3, 3)
    for trial in range(200):
        pos = Position(geo)
        while not pos.over:
            capturable = [int(b) for b in np.flatnonzero(pos.sides == 3)]
            edge = GreedyPolicy(trial).choose(pos) if capturable else rng.choice(pos.legal())
            if capturable:
                assert any(pos.sides[b] == 3 for b in geo.edge_boxes[edge] if b >= 0)
            pos.play(edge)


def test_chains_declines_the_last_two_boxes_to_keep_control() -> None:
    # 2x4 board (W = 9): every horizontal edge is drawn and only the left side of box 0, so row 0 is
    # a chain of 4 opened at box 0 and row 1 an unopened chain of 4 along the border; no safe move.
    geo = geometry(2, 4)
    w = 9
    top = [0, 1, 2, 3]
    mid = [w + j for j in range(4)]
    bottom = [2 * w + j for j in range(4)]
    v0 = [4 + j for j in range(5)]  # verticals of row 0: 4..8
    drawn = top + mid + bottom + [v0[0]]
    pos = Position.from_edges(geo, [e in drawn for e in range(geo.num_edges)])
    assert int(pos.sides[0]) == 3 and int(pos.sides[1]) == 2
    chains = ChainsPolicy(0)
    taken = 0
    while int((pos.sides == 3).sum()) > 0 and pos.to_move == 0:
        taken += pos.play(chains.choose(pos))
    # chains took two boxes and handed the last two back with the double-dealing move
    assert taken == 2 and pos.to_move == 1
    assert sorted(int(b) for b in np.flatnonzero(pos.sides == 3)) == [2, 3]


def test_bots_answer_real_turns_with_legal_edges() -> None:
    bots = hosted_bots()
    game = load_game("dots_and_boxes")
    for name in DAB_BOTS:
        assert "dots_and_boxes" in bots[name].games
        bot = bots[name].factory(7)
        state = game.new_initial_state()
        rng = random.Random(2)
        for _ in range(6):
            state.apply_action(rng.choice(list(state.legal_actions())))
        seat = state.current_player()
        turn = Turn("m", 0, seat, state.observation(seat), tuple(state.legal_actions()), timedelta(1), timedelta(10))
        assert bot.act(turn) in state.legal_actions()


def test_neuro_refuses_a_board_its_genome_was_not_trained_for() -> None:
    with pytest.raises(GenomeError, match=r"trained on 3x3 boxes and cannot play 4x4; train one"):
        NeuroPolicy(shipped_genome("thesis")).choose(Position(geometry(4, 4)))
    assert NeuroPolicy(shipped_genome("features")).choose(Position(geometry(4, 4))) in range(40)


def test_genome_round_trip_and_bad_files(tmp_path: Path) -> None:
    genome = shipped_genome("thesis")
    assert genome.provenance["seed"] == 2023
    assert genome.provenance["command"].startswith("arena train dots-and-boxes")
    path = tmp_path / "g.json"
    save_genome(genome, path)
    back = load_genome(path)
    assert np.array_equal(back.weights, genome.weights)  # weights are stored rounded; shipped ones already are
    assert (back.representation, back.rows, back.cols, back.hidden) == ("thesis", 3, 3, (10,))
    a, b = NeuroPolicy(genome, 3), NeuroPolicy(back, 3)
    assert duel(lambda s: a, lambda s: RandomPolicy(s), 10, 3, 3, 1) == duel(
        lambda s: b, lambda s: RandomPolicy(s), 10, 3, 3, 1
    )
    fresh = Genome("features", 3, 3, (4,), np.random.default_rng(0).normal(size=49), {"seed": 1})
    save_genome(fresh, path)
    assert np.allclose(load_genome(path).weights, fresh.weights, atol=1e-6)

    with pytest.raises(GenomeError, match=r"does not exist; train one with `arena train dots-and-boxes`"):
        load_genome(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(GenomeError, match=r"is not readable JSON"):
        load_genome(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(GenomeError, match=r"is not a dots and boxes genome"):
        load_genome(tmp_path / "other.json")
    data = fresh.to_json()
    data["weights"] = data["weights"][:-1]
    (tmp_path / "short.json").write_text(json.dumps(data))
    with pytest.raises(GenomeError, match=r"needs 49 weights, got 48"):
        load_genome(tmp_path / "short.json")


def test_chains_beats_greedy_on_5x5_at_least_95_percent() -> None:
    w, d, lo = duel(ChainsPolicy, GreedyPolicy, 100, 5, 5, 123)
    assert w >= 95, (w, d, lo)


@pytest.mark.slow
def test_solver_beats_greedy_on_5x5_at_least_95_percent() -> None:
    w, d, lo = duel(SolverPolicy, GreedyPolicy, 60, 5, 5, 321)
    assert w >= 57, (w, d, lo)


def test_mcts_and_the_feature_network_beat_random_on_3x3() -> None:
    w, _, _ = duel(lambda s: MctsPolicy(s, iterations=300, seconds=10), RandomPolicy, 10, 3, 3, 9)
    assert w >= 8
    w, _, _ = duel(lambda s: NeuroPolicy(shipped_genome("features"), s), GreedyPolicy, 40, 3, 3, 9)
    assert w >= 28  # trained to about 0.8 against greedy


def test_games_are_reproducible_from_the_seed() -> None:
    a = [play((ChainsPolicy(s), GreedyPolicy(s + 1)), 4, 4) for s in range(5)]
    b = [play((ChainsPolicy(s), GreedyPolicy(s + 1)), 4, 4) for s in range(5)]
    assert a == b
