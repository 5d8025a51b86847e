"""The lab's MinimaxPlayer (Task 3, ``specs/tictactoe-lab.md`` §2.5), bugs included.

Full-depth minimax with win = +1, loss = -1, and a search that stops only at a
win. Bug B1: a full board without a winner returns the loop's starting value,
-inf at a max node and +inf at a min node, so as the second mover it scores a
draw below a loss and throws games rather than draw. Bug B1b: where every reply
of a max node is such a draw the lab code crashes (``row, col = None``); this
port raises :class:`LabCrash` there. Quirk Q1: no preference for a quick win.
Hosted as ``lab-minimax-buggy``; it plays n x n boards with k = n up to 3x3.
"""

from __future__ import annotations

import numpy as np

from arena_bots.registry import hosted
from arena_bots.tic_tac_toe.board import LabBot
from arena_bots.tic_tac_toe.lab_kernels import lab_minimax_move
from arena_client import Bot


class LabCrash(RuntimeError):
    """The lab's code would have crashed here (bug B1b: no move better than -inf)."""


def lab_minimax(board: np.ndarray, p: int) -> tuple[float, int, int]:
    """(root value, cell, nodes visited) of the lab's minimax for mark ``p`` on the lab's board."""
    nodes = np.zeros(1, dtype=np.int64)
    value, cell = lab_minimax_move(board.copy(), p, nodes)
    return float(value), int(cell), int(nodes[0])


class LabMinimax(LabBot):
    """MinimaxPlayer exactly as the lab coded it (B1, B1b, Q1)."""

    name = bot_name = "lab-minimax-buggy"
    cost = "searches the whole game tree"
    max_cells = 9
    label = "lab minimax"
    thinks_off_loop = True
    """Its whole-tree search takes up to 50 ms a move: the server runs it on a thread (it releases the GIL)."""

    def __init__(self) -> None:
        super().__init__()
        self.memo: dict[tuple[bytes, int], tuple[float, int]] = {}

    def search(self, board: np.ndarray, p: int) -> tuple[float, int, int]:
        """(root value, cell, nodes visited) of this player's search."""
        return lab_minimax(board, p)

    def lab_move(self, board: np.ndarray, p: int) -> int:
        # The lab's search is a pure function of the position; remembering its answers changes no move.
        key = (board.tobytes(), p)
        if key not in self.memo:
            self.memo[key] = self.search(board, p)[:2]
        value, cell = self.memo[key]
        if cell < 0:
            raise LabCrash(f"{self.label}: every move scores {value} (bug B1b); the lab code crashes here")
        return cell


@hosted("lab-minimax-buggy", ("tic_tac_toe",), "the tic-tac-toe lab's minimax, bug B1 included (3x3)")
def _lab_minimax(seed: int) -> Bot:
    return LabMinimax()
