"""The lab's MonteCarloPlayer, "Pure MCTS" (Task 5, ``specs/tictactoe-lab.md`` §2.7).

Flat Monte Carlo: 1000 uniformly random playouts per empty cell, the score is
the number of playouts the mover wins (a draw counts as a loss, quirk Q2), ties
go to the first cell in row-major order. No tree, nothing kept between moves.
Hosted as ``lab-pure-mc`` (n x n, k = n, up to 4x4: 1000 x empty cells playouts a move
with the lab's whole-board win test take over a second on 5x5).
"""

from __future__ import annotations

import numpy as np

from arena_bots.numba_helpers import seed_state
from arena_bots.registry import hosted
from arena_bots.tic_tac_toe.board import LabBot
from arena_bots.tic_tac_toe.lab_kernels import lab_pure_mc_move
from arena_client import Bot

SIMULATIONS = 1000


class LabPureMC(LabBot):
    """MonteCarloPlayer: the most playout wins among the candidates."""

    name = bot_name = "lab-pure-mc"
    cost = "runs 1000 playouts per empty cell"
    max_cells = 16
    thinks_off_loop = True
    """1000 playouts per empty cell take milliseconds a move: the server runs it on a thread (its kernel releases
    the GIL)."""

    def __init__(self, seed: int = 0, simulations: int = SIMULATIONS) -> None:
        super().__init__()
        self.simulations = simulations
        self.rng = np.array([seed_state(seed, 7)], dtype=np.uint64)
        self.wins = np.zeros(0, dtype=np.int64)

    def lab_move(self, board: np.ndarray, p: int) -> int:
        if self.wins.size != board.size:
            self.wins = np.zeros(board.size, dtype=np.int64)
        return int(lab_pure_mc_move(board, p, self.simulations, self.rng, self.wins))


@hosted("lab-pure-mc", ("tic_tac_toe",), "the tic-tac-toe lab's pure Monte Carlo, 1000 playouts per move, wins only")
def _lab_pure_mc(seed: int) -> Bot:
    return LabPureMC(seed)
