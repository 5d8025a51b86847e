"""Monte Carlo tree search with UCT for the m,n,k-game, in numba, with threat detection.

:class:`Tree` holds the search arrays of :mod:`arena_bots.tic_tac_toe.mcts_kernels`;
:func:`mcts_move` searches a position for a number of simulations or until a
clock runs out (the kernel runs in chunks between clock readings). Before
searching, :class:`MCTSBot` plays a win in one if it has one and otherwise
blocks the opponent's win in one, so it never misses either, whatever the
budget. Hosted:

* ``mcts``: 0.25 s a move (well under the ladder's 1 s clock), random playouts;
* ``mcts-threats``: 0.25 s a move, playouts that take wins and block threats.

The tree is not kept between moves. Draws are worth 0.5 to both sides.
"""

from __future__ import annotations

import math
import time

import numpy as np

import arena_bots.tic_tac_toe.mcts_kernels as K
from arena_bots.numba_helpers import seed_state
from arena_bots.registry import hosted
from arena_bots.tic_tac_toe.board import TicTacToeBot
from arena_bots.tic_tac_toe.mnk_kernels import threat_move
from arena_client import Bot

HOSTED_SECONDS = 0.25
MAX_NODES = 1 << 19
MAX_EDGES = 1 << 22
CHUNK = 64
AUTO_NEAR_CELLS = 25


class Tree:
    """Preallocated arrays for one search tree (reused for every move of a match)."""

    def __init__(self, max_nodes: int = MAX_NODES, max_edges: int = MAX_EDGES) -> None:
        self.meta = np.zeros(10, dtype=np.int64)
        self.visits = np.zeros(max_nodes, dtype=np.int64)
        self.wins = np.zeros(max_nodes, dtype=np.float64)
        self.edge_start = np.zeros(max_nodes, dtype=np.int64)
        self.n_edges = np.zeros(max_nodes, dtype=np.int64)
        self.n_tried = np.zeros(max_nodes, dtype=np.int64)
        self.term = np.zeros(max_nodes, dtype=np.int8)
        self.movers = np.zeros(max_nodes, dtype=np.int8)
        self.edge_move = np.zeros(max_edges, dtype=np.int64)
        self.edge_child = np.zeros(max_edges, dtype=np.int64)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The arrays in the order the kernels take them."""
        return (
            self.meta, self.visits, self.wins, self.edge_start, self.n_edges, self.n_tried, self.term, self.movers,
            self.edge_move, self.edge_child,
        )  # fmt: skip


def mcts_move(
    board: np.ndarray,
    rows: int,
    cols: int,
    k: int,
    seat: int,
    tree: Tree,
    rng: np.ndarray,
    *,
    simulations: int = 0,
    seconds: float = 0.0,
    c: float = math.sqrt(2),
    draw_reward: float = 0.5,
    policy: int = 0,
    ordered: bool = False,
    near: int = 0,
    threats: bool = False,
) -> tuple[int, int]:
    """Search ``board`` for ``seat``: (the most visited root move, simulations run).

    Runs ``simulations`` iterations if given, otherwise as many as fit in ``seconds``. With
    ``near = d > 0`` the tree only considers empty cells within d cells of a mark; with
    ``threats`` a node where the player to move can win in one (or must block) has only that move.
    """
    if simulations <= 0 and seconds <= 0:
        raise ValueError("mcts needs a budget: simulations > 0 or seconds > 0")
    board = np.ascontiguousarray(board, dtype=np.int8)
    tree.meta[K.ROWS], tree.meta[K.COLS], tree.meta[K.K] = rows, cols, k
    tree.meta[K.POLICY] = policy
    tree.meta[K.ORDERED] = 1 if ordered else 0
    tree.meta[K.NEAR] = near
    tree.meta[K.THREATS] = 1 if threats else 0
    arrays = tree.arrays()
    K.reset_tree(board, seat, *arrays)
    done = 0
    if simulations > 0:
        K.search(board, simulations, c, draw_reward, rng, *arrays)
        done = simulations
    else:
        deadline = time.perf_counter() + seconds
        chunk = CHUNK
        while True:
            start = time.perf_counter()
            K.search(board, chunk, c, draw_reward, rng, *arrays)
            done += chunk
            now = time.perf_counter()
            left = deadline - now
            if left <= 0:
                break
            per = max(now - start, 1e-7) / chunk
            chunk = int(max(16, min(chunk * 2, 0.25 * left / per)))
    move = K.best_root_move(tree.visits, tree.edge_start, tree.n_edges, tree.n_tried, tree.edge_move, tree.edge_child)
    if move < 0:
        move = int(np.flatnonzero(board < 0)[0])
    return int(move), done


class MCTSBot(TicTacToeBot):
    """UCT search on any m,n,k board with a time or simulation budget, after a win/block check."""

    name = "mcts"
    thinks_off_loop = True
    """It searches for its whole budget (0.25 s hosted) on every move: the server runs it on a thread, so the
    rest of the server goes on meanwhile (the search releases the GIL)."""

    def __init__(
        self, seed: int = 0, *, seconds: float = HOSTED_SECONDS, simulations: int = 0, policy: int = 0,
        c: float = math.sqrt(2), near: int | None = None, threats: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.near = near
        self.threats = threats
        self.seconds = seconds
        self.simulations = simulations
        self.policy = policy
        self.c = c
        self.rng = np.array([seed_state(seed, 11)], dtype=np.uint64)
        self.tree: Tree | None = None
        self.last_simulations = 0

    def choose(self, board: np.ndarray, seat: int) -> int:
        forced = int(threat_move(board, self.rows, self.cols, self.k, seat))
        if forced >= 0:
            self.last_simulations = 0
            return forced
        if self.tree is None:
            self.tree = Tree()
        near = self.near if self.near is not None else (0 if board.size <= AUTO_NEAR_CELLS else 1)
        move, self.last_simulations = mcts_move(
            board, self.rows, self.cols, self.k, seat, self.tree, self.rng,
            simulations=self.simulations, seconds=self.seconds, c=self.c, policy=self.policy,
            threats=self.threats, near=near,
        )  # fmt: skip
        return move


@hosted("mcts", ("tic_tac_toe",), f"UCT search, {HOSTED_SECONDS} s a move, random playouts, wins/blocks in one")
def _mcts(seed: int) -> Bot:
    return MCTSBot(seed)


@hosted("mcts-threats", ("tic_tac_toe",), f"UCT search, {HOSTED_SECONDS} s a move, playouts that win and block")
def _mcts_threats(seed: int) -> Bot:
    bot = MCTSBot(seed, policy=1)
    bot.name = "mcts-threats"
    return bot
