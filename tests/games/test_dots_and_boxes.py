"""Dots and boxes: the fixed edge numbering, scoring and extra moves, and perfect-play values."""

from __future__ import annotations

import random

import pytest

from arena_games import TERMINAL, IllegalActionError, ParameterError, load_game
from arena_games.dots_and_boxes import (
    DotsAndBoxesGame,
    DotsAndBoxesState,
    edge_coords,
    edge_index,
    openspiel_edge,
)


def _game(rows: int, cols: int) -> DotsAndBoxesGame:
    game = load_game("dots_and_boxes", rows=rows, cols=cols)
    assert isinstance(game, DotsAndBoxesGame)
    return game


def _play(game: DotsAndBoxesGame, edges: list[int]) -> DotsAndBoxesState:
    state = game.new_initial_state()
    for edge in edges:
        state.apply_action(edge)
    return state


def test_edge_numbering_matches_the_documented_pictures() -> None:
    # The 2x2 picture in observations.proto, read off by hand: (top, bottom, left, right) per box.
    assert _game(2, 2).box_edges == ((0, 5, 2, 3), (1, 6, 3, 4), (5, 10, 7, 8), (6, 11, 8, 9))
    # The 3x3 picture in the module docstring.
    three = _game(3, 3)
    assert three.num_edges == 24
    assert three.box_edges[0] == (0, 7, 3, 4)
    assert three.box_edges[4] == (8, 15, 11, 12)
    assert three.box_edges[8] == (16, 23, 19, 20)
    assert [three.action_to_string(0, e) for e in (0, 3, 6, 7, 20, 23)] == [
        "h0,0",
        "v0,0",
        "v0,3",
        "h1,0",
        "v2,3",
        "h3,2",
    ]


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (2, 2), (3, 3), (2, 5), (5, 2), (5, 5)])
def test_every_edge_is_counted_once(rows: int, cols: int) -> None:
    game = _game(rows, cols)
    assert game.num_edges == 2 * rows * cols + rows + cols
    sides = sorted(e for box in game.box_edges for e in box)
    # Inner edges border two boxes, edges on the rim one.
    inner = (rows - 1) * cols + rows * (cols - 1)
    assert len(sides) == 4 * rows * cols == game.num_edges + inner
    assert set(sides) == set(range(game.num_edges))
    names = {game.action_to_string(0, e) for e in range(game.num_edges)}
    assert len(names) == game.num_edges
    for edge in range(game.num_edges):
        horizontal, r, c = edge_coords(rows, cols, edge)
        assert edge_index(rows, cols, horizontal, r, c) == edge
    mapped = [openspiel_edge(rows, cols, a) for a in range(game.num_edges)]
    assert sorted(mapped) == list(range(game.num_edges))
    # OpenSpiel lists every horizontal edge first, row by row.
    assert [edge_coords(rows, cols, e)[0] for e in mapped] == [True] * ((rows + 1) * cols) + [False] * (
        rows * (cols + 1)
    )


def test_closing_a_box_scores_and_moves_again() -> None:
    game = _game(1, 1)
    state = _play(game, [0, 1, 2])
    assert state.current_player() == 1
    state.apply_action(3)
    assert state.is_terminal() and state.current_player() == TERMINAL
    assert state.scores == (0, 1) and state.returns() == (-1.0, 1.0)
    assert state.observation(None).box_owners == (1,)


def test_an_edge_closing_two_boxes_gives_one_extra_move() -> None:
    game = _game(1, 3)  # edges: 0 1 2 / 3 4 5 6 / 7 8 9
    state = _play(game, [0, 1, 7, 8, 3, 5])
    assert state.current_player() == 0 and state.scores == (0, 0)
    state.apply_action(4)  # the middle of boxes 0 and 1
    assert state.scores == (2, 0) and state.current_player() == 0
    obs = state.observation(1)
    assert obs.box_owners == (0, 0, -1) and obs.scores == (2, 0) and obs.to_move == 0
    state.apply_action(2)  # no box: the turn passes
    assert state.current_player() == 1
    state.apply_action(9)
    assert state.current_player() == 0
    state.apply_action(6)  # closes box 2, the last edge: the game ends
    assert state.is_terminal() and state.scores == (3, 0) and state.returns() == (3.0, -3.0)
    assert state.board_string() == "*---*---*---*\n| A | A | A |\n*---*---*---*"


def test_observation_is_public_and_complete() -> None:
    game = _game(2, 2)
    state = _play(game, [0, 2, 3])
    obs = state.observation(0)
    assert obs == state.observation(1) == state.observation(None)
    assert obs.edges == tuple(i in (0, 2, 3) for i in range(12))
    assert (obs.rows, obs.cols, obs.box_owners, obs.scores, obs.to_move) == (2, 2, (-1,) * 4, (0, 0), 1)
    assert state.edges_mask() == 0b1101


def test_notation_and_errors() -> None:
    game = _game(2, 2)
    state = game.new_initial_state()
    assert game.string_to_action(state, "4") == 4
    assert game.string_to_action(state, "h0,1") == 1
    assert game.string_to_action(state, "V1,2") == 9
    assert game.string_to_action(state, "v (1, 0)") == 7
    state.apply_action(4)
    with pytest.raises(IllegalActionError, match=r"edge 4 \(v0,2\) is already drawn"):
        game.string_to_action(state, "4")
    with pytest.raises(IllegalActionError, match="no vertical edge from dot"):
        game.string_to_action(state, "v2,0")
    with pytest.raises(IllegalActionError, match="not an edge"):
        game.string_to_action(state, "12")
    with pytest.raises(IllegalActionError, match="not an edge"):
        state.apply_action(12)
    with pytest.raises(ParameterError, match=r"rows=11 is out of range; choose 1\.\.10"):
        load_game("dots_and_boxes", rows=11)


def _solve_with_engine(state: DotsAndBoxesState, memo: dict[int, int]) -> int:
    """Best future box margin for the player to move, searching with the engine itself."""
    key = state.edges_mask()
    if key in memo:
        return memo[key]
    if state.is_terminal():
        return 0
    me = state.current_player()
    best = -1000
    for edge in state.legal_actions():
        child = state.clone()
        child.apply_action(edge)
        gained = child.scores[me] - state.scores[me]
        future = _solve_with_engine(child, memo)
        best = max(best, gained + future if child.current_player() == me else gained - future)
    memo[key] = best
    return best


def test_1x1_and_2x2_perfect_play_values() -> None:
    assert _solve_with_engine(_game(1, 1).new_initial_state(), {}) == -1
    memo: dict[int, int] = {}
    assert _solve_with_engine(_game(2, 2).new_initial_state(), memo) == 2  # first player wins by 2
    assert len(memo) == 2**12 - 1  # every position but the full board is reachable


def test_3x3_is_a_first_player_loss_by_3() -> None:
    """All 2**24 positions by a numba bitmask sweep (about 2 s with the JIT compile)."""
    np = pytest.importorskip("numpy")
    numba = pytest.importorskip("numba")
    game = _game(3, 3)

    @numba.njit(cache=False)
    def solve_all(num_edges, edge_boxes, box_masks):  # type: ignore[no-untyped-def]
        """value[mask] = best future margin of the mover when the edges in ``mask`` are drawn."""
        full = (1 << num_edges) - 1
        value = np.zeros(full + 1, np.int8)
        for mask in range(full - 1, -1, -1):
            best = -127
            for e in range(num_edges):
                bit = 1 << e
                if mask & bit:
                    continue
                new = mask | bit
                closed = 0
                for j in range(2):
                    b = edge_boxes[e, j]
                    if b >= 0 and (new & box_masks[b]) == box_masks[b]:
                        closed += 1
                v = closed + value[new] if closed else -value[new]
                if v > best:
                    best = v
            value[mask] = best
        return value

    edge_boxes = np.full((game.num_edges, 2), -1, np.int64)
    for edge, boxes in enumerate(game.edge_boxes):
        edge_boxes[edge, : len(boxes)] = boxes
    box_masks = np.array([sum(1 << e for e in box) for box in game.box_edges], np.int64)
    value = solve_all(game.num_edges, edge_boxes, box_masks)
    assert value[0] == -3

    # The table must agree with the engine: from random positions, both sides play the table's best
    # moves in the engine, and the engine's final margin is what the table promised.
    rng = random.Random(5)
    for _ in range(30):
        state = game.new_initial_state()
        for _ in range(rng.randrange(0, 20)):
            state.apply_action(rng.choice(list(state.legal_actions())))
        if state.is_terminal():
            continue
        mover = state.current_player()
        promised = int(value[state.edges_mask()])
        start = state.scores[mover] - state.scores[1 - mover]
        while not state.is_terminal():
            me = state.current_player()
            mask = state.edges_mask()
            best_edge, best = -1, -1000
            for edge in state.legal_actions():
                child = state.clone()
                child.apply_action(edge)
                gained = child.scores[me] - state.scores[me]
                future = int(value[mask | (1 << edge)])
                v = gained + future if child.current_player() == me else gained - future
                if v > best:
                    best_edge, best = edge, v
            assert best == value[mask]
            state.apply_action(best_edge)
        assert state.scores[mover] - state.scores[1 - mover] - start == promised
