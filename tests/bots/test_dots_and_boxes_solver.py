"""The dots and boxes ``solver``: exact values against exhaustive search, never a losing move, the disk cache."""

from __future__ import annotations

import functools
import random
from pathlib import Path

import numpy as np
import pytest

from arena_bots import hosted_bots
from arena_bots.dots_and_boxes import solver as S
from arena_bots.dots_and_boxes.board import Position, geometry
from arena_bots.dots_and_boxes.bots import SolverPolicy
from arena_games import load_game


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_CACHE_DIR", str(tmp_path / "cache"))
    S.forget_tables()


def _exhaustive(rows: int, cols: int) -> dict[int, int]:
    """Best future margin of the mover for every edge set, by plain recursive search on Python ints.

    Written independently of the kernels: box completion is checked against
    the engine's own box/edge lists.
    """
    game = load_game("dots_and_boxes", rows=rows, cols=cols)
    n = game.num_edges
    box_masks = [sum(1 << e for e in box) for box in game.box_edges]
    edge_boxes = [[box_masks[b] for b in boxes] for boxes in game.edge_boxes]

    @functools.cache
    def value(mask: int) -> int:
        best = None
        for e in range(n):
            bit = 1 << e
            if mask & bit:
                continue
            new = mask | bit
            closed = sum(1 for bm in edge_boxes[e] if new & bm == bm)
            v = closed + value(new) if closed else -value(new)
            best = v if best is None or v > best else best
        return 0 if best is None else best

    return {m: value(m) for m in range(1 << n)}


@pytest.mark.parametrize(
    ("rows", "cols", "root"), [(1, 1, -1), (1, 2, None), (2, 1, None), (2, 2, 2), (1, 3, None), (2, 3, -2)]
)
def test_tables_equal_exhaustive_search_for_every_position(rows: int, cols: int, root: int | None) -> None:
    """The issue's first-player margins (2x2: +2, 2x3: -2) and every other position's value."""
    exact = _exhaustive(rows, cols)
    table = S.exact_table(geometry(rows, cols))
    if root is not None:
        assert exact[0] == root
        assert int(table[0]) == root
    expected = np.array([exact[m] for m in range(len(table))], dtype=np.int64)
    mismatched = np.flatnonzero(table.astype(np.int64) != expected)
    assert mismatched.size == 0, f"{mismatched.size} positions differ, e.g. mask {mismatched[:3]}"


def test_3x3_first_player_loses_by_3_and_the_table_is_cached_on_disk(tmp_path: Path) -> None:
    geo = geometry(3, 3)
    table = S.exact_table(geo)
    assert int(table[0]) == -3
    path = S.table_path(geo)
    assert path.parent == tmp_path / "cache" and path.exists()
    # a second process-free "cold start" reads the file instead of rebuilding
    S.forget_tables()
    stamp = path.stat().st_mtime_ns
    again = S.exact_table(geo)
    assert path.stat().st_mtime_ns == stamp
    assert np.array_equal(again, table)
    # a truncated file is rebuilt and replaced, not trusted
    path.write_bytes(path.read_bytes()[:1000])
    S.forget_tables()
    rebuilt = S.exact_table(geo)
    assert np.array_equal(rebuilt, table)
    assert path.stat().st_size > 1 << 24


def test_the_hosted_solvers_warm_up_loads_the_default_boards_table() -> None:
    """The server calls ``warm_up`` on a thread before the first match: the 3x3 table is ready, not built in a move."""
    geo = geometry(3, 3)
    assert not S.table_path(geo).exists() and (3, 3) not in S._TABLES
    bot = hosted_bots()["solver"].factory(0)
    bot.warm_up()
    assert (3, 3) in S._TABLES and S.table_path(geo).exists()
    assert bot.thinks_off_loop  # (its endgame searches on bigger boards take about 20 ms: seated on a thread)


def _check_never_lowers(rows: int, cols: int, solver_seat: int, limit: int) -> int:
    """DFS over every opponent reply; at the solver's turns its move must keep the exact value."""
    exact = _exhaustive(rows, cols) if rows * cols <= 4 else None
    geo = geometry(rows, cols)
    table = S.exact_table(geo)

    def val(mask: int) -> int:
        return exact[mask] if exact is not None else int(table[mask])

    policy = SolverPolicy(seed=11)
    seen: set[tuple[int, int]] = set()
    stack = [Position(geo)]
    checked = 0
    while stack and checked < limit:
        pos = stack.pop()
        mask = pos.mask()
        if pos.over or (mask, pos.to_move) in seen:
            continue
        seen.add((mask, pos.to_move))
        if pos.to_move == solver_seat:
            edge = policy.choose(pos)
            child = pos.copy()
            closed = child.play(edge)
            future = val(child.mask())
            got = closed + future if closed else -future
            assert got == val(mask), f"solver's edge {edge} from mask {mask:#x} gets {got}, best is {val(mask)}"
            checked += 1
            stack.append(child)
        else:
            for edge in pos.legal():
                child = pos.copy()
                child.play(edge)
                stack.append(child)
    return checked


@pytest.mark.parametrize("seat", [0, 1])
def test_solver_never_lowers_the_exact_value_on_2x2_against_every_reply(seat: int) -> None:
    checked = _check_never_lowers(2, 2, seat, limit=10**9)
    assert checked > 300  # the whole tree under the solver's choices was walked


@pytest.mark.slow
@pytest.mark.parametrize("seat", [0, 1])
def test_solver_never_lowers_the_exact_value_on_3x3_against_every_reply(seat: int) -> None:
    """Every opponent reply, depth first, until 20,000 solver decisions per seat have been checked."""
    checked = _check_never_lowers(3, 3, seat, limit=20_000)
    assert checked == 20_000


@pytest.mark.slow
def test_3x3_table_agrees_with_the_bellman_equation_everywhere() -> None:
    """An independent check of all 2**24 values: each is the best over its moves (numpy, in blocks)."""
    game = load_game("dots_and_boxes", rows=3, cols=3)
    table = S.exact_table(geometry(3, 3)).astype(np.int16)
    box_masks = [sum(1 << e for e in box) for box in game.box_edges]
    block = 1 << 20
    for start in range(0, 1 << 24, block):
        masks = np.arange(start, start + block, dtype=np.int64)
        best = np.full(block, -100, np.int16)
        for e in range(24):
            free = (masks >> e) & 1 == 0
            new = masks[free] | (1 << e)
            closed = np.zeros(new.size, np.int16)
            for b in game.edge_boxes[e]:
                closed += (new & box_masks[b]) == box_masks[b]
            v = np.where(closed > 0, closed + table[new], -table[new])
            best[free] = np.maximum(best[free], v)
        if start + block == 1 << 24:
            best[-1] = 0
        assert np.array_equal(best, table[start : start + block]), f"block at {start:#x} differs"
    assert table[0] == -3


def test_larger_boards_fall_back_within_the_clock_and_finish_exactly() -> None:
    """On 4x4 (40 edges) the solver plays chains, then exact retrograde once 18 edges are left."""
    import time

    geo = geometry(4, 4)
    rng = random.Random(3)
    pos = Position(geo)
    solver = SolverPolicy(seed=1)
    solver.choose(Position(geo))  # load the compiled kernels (hosted bots do it in on_match_start)
    slowest = 0.0
    while not pos.over:
        if pos.to_move == 0:
            t = time.perf_counter()
            edge = solver.choose(pos)
            slowest = max(slowest, time.perf_counter() - t)
        else:
            edge = rng.choice(pos.legal())
        pos.play(edge)
    assert slowest < 1.0, f"slowest solver move took {slowest:.2f} s"
