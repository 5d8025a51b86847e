"""Tic-tac-toe (m,n,k): known values of 3x3, win detection on every board, notation and errors."""

from __future__ import annotations

import random

import pytest

from arena_games import TERMINAL, IllegalActionError, ParameterError, load_game
from arena_games.tic_tac_toe import TicTacToeGame, TicTacToeState


def _play(game: TicTacToeGame, cells: list[int]) -> TicTacToeState:
    state = game.new_initial_state()
    for cell in cells:
        state.apply_action(cell)
    return state


def test_3x3_has_5478_reachable_positions() -> None:
    game = load_game("tic_tac_toe")
    seen: dict[tuple[int, ...], bool] = {}
    stack = [game.new_initial_state()]
    while stack:
        state = stack.pop()
        board = state.observation(None).board
        if board in seen:
            continue
        seen[board] = state.is_terminal()
        for action in state.legal_actions():
            child = state.clone()
            child.apply_action(action)
            stack.append(child)
    assert len(seen) == 5478
    assert sum(1 for terminal in seen.values() if not terminal) == 4520


def test_3x3_is_a_draw_under_perfect_play() -> None:
    game = load_game("tic_tac_toe")

    # Memoised on the position (the board decides whose turn it is).
    positions: dict[tuple[int, ...], float] = {}

    def solve(state: TicTacToeState) -> float:
        key = state.observation(None).board
        if key in positions:
            return positions[key]
        if state.is_terminal():
            result = state.returns()[0]
        else:
            results = []
            for action in state.legal_actions():
                child = state.clone()
                child.apply_action(action)
                results.append(solve(child))
            result = max(results) if state.current_player() == 0 else min(results)
        positions[key] = result
        return result

    assert solve(game.new_initial_state()) == 0.0
    # Every opening is at best a draw for X, and O can lose only by blundering.
    for opening in range(9):
        assert solve(_play(game, [opening])) == 0.0
    # A position where X has a fork is a forced win for X.
    assert solve(_play(game, [0, 1, 4, 8, 6])) == 1.0


def _brute_force_winner(board: tuple[int, ...], rows: int, cols: int, k: int) -> set[int]:
    """Every seat with k in a row anywhere, by scanning every line segment of length k."""
    winners = set()
    for r in range(rows):
        for c in range(cols):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                end_r, end_c = r + dr * (k - 1), c + dc * (k - 1)
                if not (0 <= end_r < rows and 0 <= end_c < cols):
                    continue
                marks = {board[(r + dr * i) * cols + c + dc * i] for i in range(k)}
                if len(marks) == 1 and -1 not in marks:
                    winners |= marks
    return winners


@pytest.mark.parametrize(
    ("rows", "cols", "k"),
    [(3, 3, 3), (4, 4, 3), (4, 4, 4), (3, 6, 4), (6, 3, 4), (5, 5, 2), (7, 7, 5), (15, 15, 5), (2, 9, 3)],
)
def test_win_detection_matches_a_brute_force_scan(rows: int, cols: int, k: int) -> None:
    game = load_game("tic_tac_toe", rows=rows, cols=cols, k=k)
    assert isinstance(game, TicTacToeGame)
    decisive = 0
    for seed in range(40 if rows * cols <= 64 else 6):
        rng = random.Random(seed)
        state = game.new_initial_state()
        while not state.is_terminal():
            mover = state.current_player()
            state.apply_action(rng.choice(list(state.legal_actions())))
            board = state.observation(None).board
            winners = _brute_force_winner(board, rows, cols, k)
            if winners:
                assert winners == {mover}, "only the player who just moved can have a line"
                assert state.is_terminal() and state.winner == mover
                assert state.returns() == ((1.0, -1.0) if mover == 0 else (-1.0, 1.0))
                decisive += 1
            elif -1 in board:
                assert not state.is_terminal()
            else:
                assert state.is_terminal() and state.winner == -1 and state.returns() == (0.0, 0.0)
    assert decisive > 0


def test_lines_through_every_edge_and_direction_on_15x15() -> None:
    game = load_game("tic_tac_toe", rows=15, cols=15, k=5)
    assert isinstance(game, TicTacToeGame)

    def x_line(cells: list[int]) -> TicTacToeState:
        """X plays ``cells`` (the last completes the line); O answers with four cells off the line."""
        o_cells = [c for c in (100, 102, 104, 106, 130, 132) if c not in cells]
        moves: list[int] = []
        for i, cell in enumerate(cells):
            moves.append(cell)
            if i < len(cells) - 1:
                moves.append(o_cells[i])
        return _play(game, moves)

    lines = {
        "row at the right edge": [10 * 15 + c for c in (14, 13, 12, 11, 10)],
        "column at the bottom edge": [r * 15 + 0 for r in (10, 11, 12, 14, 13)],
        "diagonal ending in the corner": [r * 15 + r for r in (10, 11, 12, 13, 14)],
        "anti-diagonal from the top-right": [r * 15 + (14 - r) for r in (0, 1, 3, 4, 2)],
    }
    for name, cells in lines.items():
        state = x_line(cells)
        assert state.is_terminal() and state.winner == 0, name
    # Four in a row is not five; a broken line is not a line (the lab code's whole-row sum would say so).
    state = _play(game, [0, 200, 1, 201, 2, 203, 4, 204, 5])
    assert not state.is_terminal()


def test_broken_rows_do_not_win_on_4x4_k3() -> None:
    """The lab's whole-row sums count X.XX as three in a row; a real m,n,k check does not."""
    game = load_game("tic_tac_toe", rows=4, cols=4, k=3)
    assert isinstance(game, TicTacToeGame)
    state = _play(game, [0, 4, 2, 5, 3])  # X: a1, c1, d1 (row 0 = X . X X); O: a2, b2
    assert not state.is_terminal()
    state.apply_action(7)  # O: d2 (row 1 = O O . O)
    assert not state.is_terminal()
    state.apply_action(1)  # X fills b1: four in a row
    assert state.is_terminal() and state.winner == 0


def test_full_board_without_a_line_is_a_draw() -> None:
    game = load_game("tic_tac_toe")
    assert isinstance(game, TicTacToeGame)
    # X O X / X O O / O X X
    state = _play(game, [0, 1, 2, 4, 3, 5, 7, 6, 8])
    assert state.is_terminal() and state.current_player() == TERMINAL
    assert state.returns() == (0.0, 0.0) and state.winner == -1
    assert state.board_string() == "XOX\nXOO\nOXX"
    assert state.observation(0).to_move == -1


def test_observation_is_the_board_with_seats() -> None:
    game = load_game("tic_tac_toe", rows=2, cols=3, k=2)
    assert isinstance(game, TicTacToeGame)
    state = _play(game, [4, 0])
    obs = state.observation(1)
    assert obs == state.observation(0) == state.observation(None)
    assert (obs.rows, obs.cols, obs.k, obs.board, obs.to_move) == (2, 3, 2, (1, -1, -1, -1, 0, -1), 0)


def test_cell_notation() -> None:
    game = load_game("tic_tac_toe")
    assert isinstance(game, TicTacToeGame)
    state = game.new_initial_state()
    assert [game.action_to_string(0, a) for a in (0, 1, 2, 3, 4, 8)] == ["a1", "b1", "c1", "a2", "b2", "c3"]
    assert game.string_to_action(state, "b2") == 4
    assert game.string_to_action(state, " C3 ") == 8
    assert game.string_to_action(state, "7") == 7
    state.apply_action(4)
    with pytest.raises(IllegalActionError, match=r"b2 \(4\) is already taken by X"):
        game.string_to_action(state, "b2")
    with pytest.raises(IllegalActionError, match="off the 3x3 board"):
        game.string_to_action(state, "d1")
    with pytest.raises(IllegalActionError, match="off the 3x3 board"):
        game.string_to_action(state, "a4")
    with pytest.raises(IllegalActionError, match="not a cell"):
        game.string_to_action(state, "centre")
    wide = load_game("tic_tac_toe", rows=15, cols=15, k=5)
    assert wide.action_to_string(0, 224) == "o15"
    assert wide.string_to_action(wide.new_initial_state(), "h8") == 7 * 15 + 7


def test_illegal_moves_say_why() -> None:
    game = load_game("tic_tac_toe")
    state = game.new_initial_state()
    state.apply_action(0)
    with pytest.raises(IllegalActionError, match="already taken"):
        state.apply_action(0)
    with pytest.raises(IllegalActionError, match="not a cell"):
        state.apply_action(9)
    assert state.illegal_reason(0, 1) == "it is seat 1's turn, not seat 0's"


def test_parameters_are_validated() -> None:
    with pytest.raises(ParameterError, match=r"k=4 is longer than the board \(3x3\).*between 1 and 3"):
        load_game("tic_tac_toe", k=4)
    with pytest.raises(ParameterError, match=r"rows=27 is out of range; choose 1\.\.26"):
        load_game("tic_tac_toe", rows=27)
    game = load_game("tic_tac_toe", rows="15", cols="15", k="5")
    assert game.num_distinct_actions == 225 and game.max_game_length == 225
    assert load_game("tic_tac_toe", rows=1, cols=4, k=4).max_game_length == 4
