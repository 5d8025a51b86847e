"""The lab's tic-tac-toe players, bug for bug: every bug and analytic signature of the spec (§2, §3.5, §4.3)."""

from __future__ import annotations

import math
from collections import Counter
from functools import cache

import numpy as np
import pytest

from arena_bots.numba_helpers import seed_state
from arena_bots.tic_tac_toe.board import UnsupportedBoard, lab_board
from arena_bots.tic_tac_toe.lab_alpha_beta import LabAlphaBeta, lab_alphabeta
from arena_bots.tic_tac_toe.lab_blocking import LabBlocking
from arena_bots.tic_tac_toe.lab_kernels import lab_pure_mc_move, lab_won
from arena_bots.tic_tac_toe.lab_minimax import LabCrash, LabMinimax, lab_minimax
from arena_bots.tic_tac_toe.lab_pure_mc import LabPureMC
from arena_bots.tic_tac_toe.lab_random import LabRandom
from arena_bots.tic_tac_toe.lab_win_if_can import LabWinIfCan
from arena_bots.tic_tac_toe.play import play
from arena_client import MatchInfo, SeatInfo, TimeControl

# The lab's notation: O = -1 moves first, X = +1.
LAB_MINIMAX_GAME = (0, 1, 2, 3, 4, 5, 6)  # O(0,0) X(0,1) O(0,2) X(1,0) O(1,1) X(1,2) O(2,0)


def parse(rows: str) -> np.ndarray:
    """'OXO/X.O/.OX' -> the lab's board."""
    marks = {"O": -1, "X": 1, ".": 0}
    return np.array([[marks[ch] for ch in row] for row in rows.split("/")], dtype=np.int64)


def to_move(board: np.ndarray) -> int:
    return -1 if np.count_nonzero(board == -1) == np.count_nonzero(board == 1) else 1


@cache
def reachable() -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(every reachable position, the non-terminal ones), P1 = -1 first."""
    seen: set[bytes] = set()
    everything: list[np.ndarray] = []
    live: list[np.ndarray] = []
    stack = [np.zeros((3, 3), dtype=np.int64)]
    while stack:
        b = stack.pop()
        key = b.tobytes()
        if key in seen:
            continue
        seen.add(key)
        everything.append(b)
        if lab_won(b, 1) or lab_won(b, -1) or not (b == 0).any():
            continue
        live.append(b)
        p = to_move(b)
        for cell in np.flatnonzero(b.reshape(-1) == 0):
            c = b.copy()
            c.reshape(-1)[cell] = p
            stack.append(c)
    return everything, live


def test_reachable_position_counts() -> None:
    everything, live = reachable()
    assert (len(everything), len(live)) == (5478, 4520)


def test_lab_minimax_and_alphabeta_root_on_the_empty_board() -> None:
    empty = np.zeros((3, 3), dtype=np.int64)
    assert lab_minimax(empty, -1) == (1.0, 0, 549_946)
    assert lab_alphabeta(empty, -1) == (1.0, 0, 3_034)


@pytest.mark.parametrize("opening", range(9))
def test_lab_search_as_second_mover_believes_it_loses(opening: int) -> None:
    board = np.zeros((3, 3), dtype=np.int64)
    board.reshape(-1)[opening] = -1
    reply = 1 if opening == 0 else 0
    for search in (lab_minimax, lab_alphabeta):
        value, cell, _ = search(board, 1)
        assert (value, cell) == (-1.0, reply)


def test_lab_minimax_root_values_over_every_reachable_position_and_alphabeta_agrees() -> None:
    _, live = reachable()
    values: dict[int, Counter[float]] = {-1: Counter(), 1: Counter()}
    differ = 0
    for b in live:
        p = to_move(b)
        v, cell, _ = lab_minimax(b, p)
        values[p][v] += 1
        _, ab_cell, _ = lab_alphabeta(b, p)
        differ += ab_cell != cell
    assert values[-1] == {1.0: 2079, -1.0: 152, math.inf: 192}
    assert values[1] == {1.0: 1006, -1.0: 1059, -math.inf: 32}
    assert differ == 0  # AlphaBeta == Minimax in all 4,520 positions (§2.6)


def test_bug_b1b_crash_positions() -> None:
    _, live = reachable()
    crashes = [b for b in live if lab_minimax(b, to_move(b))[1] < 0]
    assert len(crashes) == 32
    assert all(to_move(b) == 1 and np.count_nonzero(b == 0) == 2 for b in crashes)
    bot = LabMinimax()
    arena = np.where(parse("OXO/X.O/.OX") == 0, -1, np.where(parse("OXO/X.O/.OX") == -1, 0, 1)).reshape(-1)
    with pytest.raises(LabCrash, match="B1b"):
        bot.choose(arena.astype(np.int8), 1)
    with pytest.raises(LabCrash, match="B1b"):
        LabAlphaBeta().choose(arena.astype(np.int8), 1)


def test_quirk_q1_no_preference_for_a_quick_win() -> None:
    assert lab_minimax(parse("OXO/XO./X.."), -1)[1] == 5  # (1,2), not the winning (2,2)
    _, live = reachable()
    missed = {-1: [0, 0], 1: [0, 0]}
    for b in live:
        p = to_move(b)
        wins = []
        for cell in np.flatnonzero(b.reshape(-1) == 0):
            c = b.copy()
            c.reshape(-1)[cell] = p
            if lab_won(c, p):
                wins.append(int(cell))
        if wins:
            missed[p][1] += 1
            missed[p][0] += lab_minimax(b, p)[1] not in wins
    assert missed == {-1: [455, 1498], 1: [101, 860]}


def _sweep(search: object, as_first: bool) -> Counter[str]:
    """Results of the lab search against every opponent move sequence, from the search's side."""
    out: Counter[str] = Counter()
    me = -1 if as_first else 1

    def walk(b: np.ndarray) -> None:
        for q in (me, -me):
            if lab_won(b, q):
                out["win" if q == me else "loss"] += 1
                return
        if not (b == 0).any():
            out["draw"] += 1
            return
        p = to_move(b)
        if p == me:
            _, cell, _ = search(b, p)  # type: ignore[operator]
            if cell < 0:
                out["crash"] += 1
                return
            c = b.copy()
            c.reshape(-1)[cell] = p
            walk(c)
        else:
            for cell in np.flatnonzero(b.reshape(-1) == 0):
                c = b.copy()
                c.reshape(-1)[cell] = p
                walk(c)

    walk(np.zeros((3, 3), dtype=np.int64))
    return out


@pytest.mark.parametrize("search", [lab_minimax, lab_alphabeta])
def test_lab_search_signatures_against_every_opponent_sequence(search: object) -> None:
    first = _sweep(search, True)
    assert first["loss"] == 0 and first["crash"] == 0 and first["win"] > 0  # P1 never loses
    second = _sweep(search, False)
    assert second["draw"] == 0 and second["crash"] == 0 and second["loss"] > 0  # P2 never draws (B1)


def test_lab_search_pairings_are_the_deterministic_first_mover_win() -> None:
    for a in (LabMinimax(), LabAlphaBeta()):
        for b in (LabMinimax(), LabAlphaBeta()):
            assert play(a, b) == play(a, b)
            game = play(a, b)
            assert (game.result, game.moves) == ("win", LAB_MINIMAX_GAME)
    same = LabMinimax()
    assert play(same, same).moves == LAB_MINIMAX_GAME  # self-play with one instance, as the lab does


def test_lab_pure_mc_opens_in_the_centre_and_never_misses_a_win() -> None:
    wins = np.zeros(9, dtype=np.int64)
    for seed in range(3):
        rng = np.array([seed_state(seed)], dtype=np.uint64)
        assert lab_pure_mc_move(np.zeros((3, 3), dtype=np.int64), -1, 1000, rng, wins) == 4
        # the centre's win share is near the exact 0.6929 of a random playout
        assert abs(wins[4] / 1000 - 0.6929) < 0.05
    _, live = reachable()
    rng = np.array([seed_state(9)], dtype=np.uint64)
    checked = 0
    for b in live[::20]:
        p = to_move(b)
        winning = [c for c in np.flatnonzero(b.reshape(-1) == 0) if lab_won(_with(b, int(c), p), p)]
        if winning:
            move = lab_pure_mc_move(b, p, 200, rng, wins)
            assert wins[move] == 200  # a winning candidate scores every playout; nothing beats it
            checked += 1
    assert checked > 20


def _with(b: np.ndarray, cell: int, p: int) -> np.ndarray:
    c = b.copy()
    c.reshape(-1)[cell] = p
    return c


def test_pure_mc_counts_only_wins_so_it_does_not_defend() -> None:
    # X (+1) threatens (0,2); O to move can only draw by blocking, but Pure MC scores a draw as 0 and
    # prefers a cell with more random wins. Its scores show draws are worth nothing.
    b = parse("XX./.O./O..")
    rng = np.array([seed_state(3)], dtype=np.uint64)
    wins = np.zeros(9, dtype=np.int64)
    lab_pure_mc_move(b, -1, 1000, rng, wins)
    assert wins[2] > 0  # the block is scored by wins only
    assert max(wins) > wins[2] or lab_pure_mc_move(b, -1, 1000, rng, wins) == 2


def test_win_if_can_takes_the_first_win_and_never_blocks() -> None:
    bot = LabWinIfCan(1)
    assert bot.lab_move(parse("OO./XX./..."), -1) == 2  # first of its two wins, row-major: (0,2)
    assert bot.lab_move(parse("OO./.../O.."), -1) == 2  # (0,2) before (1,0)
    blocked = Counter(LabWinIfCan(s).lab_move(parse("XX./.O./..O"), -1) for s in range(40))
    assert len(blocked) > 1  # no win available: random, the threat at (0,2) is not always blocked


def test_blocking_blocks_only_the_first_threat() -> None:
    bot = LabBlocking(1)
    assert bot.lab_move(parse("XX./X.O/..O"), -1) == 2  # X threatens (0,2) and (2,0): blocks (0,2)
    assert bot.lab_move(parse("OO./XX./..."), -1) == 2  # its own win first
    assert bot.lab_move(parse("XX./.O./..."), -1) == 2


def test_random_is_uniform_over_empty_cells() -> None:
    counts = Counter(LabRandom(s).lab_move(parse("OX./.../..."), -1) for s in range(700))
    assert set(counts) == {2, 3, 4, 5, 6, 7, 8}
    assert min(counts.values()) > 60


def test_lab_board_maps_arena_seats_to_the_lab_marks() -> None:
    # Arena: -1 empty, seat 0 moves first. Lab: 0 empty, -1 moves first.
    assert lab_board([0, 1, -1, -1, 0, -1, -1, -1, -1], 3).tolist() == [[-1, 1, 0], [0, -1, 0], [0, 0, 0]]


@pytest.mark.parametrize(
    ("bot", "rows", "cols", "k", "words"),
    [
        (LabMinimax(), 4, 4, 4, "16 cells"),
        (LabAlphaBeta(), 5, 5, 5, "9 cells"),
        (LabRandom(), 4, 4, 3, "k = n"),
        (LabBlocking(), 3, 4, 3, "3x4 with k=3"),
        (LabPureMC(), 5, 5, 5, "16 cells"),
    ],
)
def test_lab_bots_refuse_boards_beyond_them(bot: LabMinimax, rows: int, cols: int, k: int, words: str) -> None:
    info = MatchInfo(
        "m", "tic_tac_toe", {"rows": rows, "cols": cols, "k": k}, 0, (SeatInfo(0, "a"),), TimeControl(), ""
    )
    with pytest.raises(UnsupportedBoard, match="play mcts") as exc:
        bot.on_match_start(info)
    assert words in str(exc.value) or f"{rows}x{cols}" in str(exc.value)


def test_lab_bots_play_4x4_with_k_4() -> None:
    for bot in (LabRandom(1), LabWinIfCan(2), LabBlocking(3), LabPureMC(4, simulations=50)):
        game = play(bot, LabRandom(5), rows=4, cols=4, k=4)
        assert game.result in ("win", "loss", "draw")
