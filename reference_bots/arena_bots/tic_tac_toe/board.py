"""What every tic-tac-toe reference bot shares: reading the board, and refusing boards beyond it.

A :class:`TicTacToeBot` reads the game's parameters when a match starts and
calls :meth:`TicTacToeBot.check_board`, which raises :class:`UnsupportedBoard`
(a one-line reason and what to play instead) for a board the algorithm cannot
play; the server records that as the match's crash reason. ``act`` hands the
subclass the board as a flat int8 array in Arena's encoding (-1 empty,
otherwise the seat) and the seat to move.

The lab bots want the lab's board: :func:`lab_board` turns the flat board into
the lab's ``n`` x ``n`` int64 array (0 empty, -1 for seat 0, the first mover,
"O" in the lab; +1 for seat 1), and :func:`lab_player` maps a seat to -1/+1.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Sequence

import numpy as np

from arena_client import Bot, MatchInfo, Turn


class UnsupportedBoard(ValueError):
    """This bot cannot play this board (the message says why and what to use instead)."""


def lab_board(cells: Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    """The lab's board from Arena's flat board (n*n cells, -1 empty, else the seat)."""
    flat = np.asarray(cells, dtype=np.int64)
    out = np.zeros(n * n, dtype=np.int64)
    out[flat == 0] = -1
    out[flat == 1] = 1
    return out.reshape(n, n)


def lab_player(seat: int) -> int:
    """The lab's mark for a seat: -1 for seat 0 (moves first), +1 for seat 1."""
    return -1 if seat == 0 else 1


WARM_BOARD = (0, -1, -1, -1, 1, -1, -1, -1, -1)
"""The 3x3 position a bot first searches outside the clock: one mark each, seat 0 to move, no threat."""

_WARMED: set[tuple[type, str]] = set()
_WARM_LOCK = threading.Lock()


def warm_once(bot: TicTacToeBot) -> None:
    """Run ``bot``'s kernels once per process, on a copy of it, before its first match's clock starts.

    numba compiles (or loads from its cache) a kernel the first time it is
    called: up to a second for the recursive searches, which cannot be cached.
    Done in the first move, that second was charged to the bot's clock and
    stalled the server for as long. ``on_match_start`` is not timed, so the
    copy searches :data:`WARM_BOARD` there instead (a time-budgeted search for
    10 ms at most). ``arena serve`` runs it on a worker thread before the
    first match (:meth:`TicTacToeBot.warm_up`), so the loop is not stalled
    either. A failure here is left to the match itself to meet.
    """
    key = (type(bot), getattr(bot, "name", ""))
    if key in _WARMED:
        return
    with _WARM_LOCK:
        if key in _WARMED:
            return
        with contextlib.suppress(Exception):
            scratch = copy.deepcopy(bot)
            scratch.rows = scratch.cols = scratch.k = 3
            if hasattr(scratch, "seconds"):
                scratch.seconds = min(scratch.seconds, 0.01)
            scratch.choose(np.array(WARM_BOARD, dtype=np.int8), 0)
        _WARMED.add(key)  # after the search: another thread starting a match meanwhile waited for it


class TicTacToeBot(Bot):
    """Base of the tic-tac-toe bots: board parameters, the refusal check and the board conversion.

    Subclasses implement :meth:`choose` and may override :meth:`check_board`.
    """

    games = ("tic_tac_toe",)

    def __init__(self) -> None:
        self.rows = 3
        self.cols = 3
        self.k = 3

    def on_match_start(self, match: MatchInfo) -> None:
        self.rows = int(match.params.get("rows", 3))
        self.cols = int(match.params.get("cols", 3))
        self.k = int(match.params.get("k", 3))
        self.check_board(self.rows, self.cols, self.k)
        warm_once(self)

    def warm_up(self) -> None:
        """Compile this bot's kernels (once per process; any thread): see :func:`warm_once`."""
        warm_once(self)

    def check_board(self, rows: int, cols: int, k: int) -> None:
        """Raise :class:`UnsupportedBoard` if this bot cannot play ``rows`` x ``cols``, ``k`` in a row."""

    def act(self, turn: Turn) -> int:
        obs = turn.observation
        if (obs.rows, obs.cols, obs.k) != (self.rows, self.cols, self.k):
            self.rows, self.cols, self.k = obs.rows, obs.cols, obs.k
            self.check_board(obs.rows, obs.cols, obs.k)
        board = np.asarray(obs.board, dtype=np.int8)
        return int(self.choose(board, turn.seat))

    def choose(self, board: np.ndarray, seat: int) -> int:
        """The cell to mark (row * cols + col) on ``board`` (-1 empty, else the seat) for ``seat``."""
        raise NotImplementedError


class LabBot(TicTacToeBot):
    """A bot ported from the lab: plays only n x n boards with k = n (the lab's whole-line win test)."""

    bot_name = "lab"
    max_cells = 26 * 26
    cost = "plays without search"

    def check_board(self, rows: int, cols: int, k: int) -> None:
        if not rows == cols == k:
            raise UnsupportedBoard(
                f"{self.bot_name} is the lab's code, whose win test only works on n x n boards with k = n; "
                f"this board is {rows}x{cols} with k={k}; play mcts or alphabeta-d2 on it"
            )
        if rows * cols > self.max_cells:
            raise UnsupportedBoard(
                f"{self.bot_name} is too slow for the ladder's clock beyond {self.max_cells} cells (it "
                f"{self.cost}); this board is {rows}x{cols}; play mcts on it"
            )

    def choose(self, board: np.ndarray, seat: int) -> int:
        return int(self.lab_move(lab_board(board, self.rows), lab_player(seat)))

    def lab_move(self, board: np.ndarray, p: int) -> int:
        """The lab player's cell on the lab's board for mark ``p`` (-1 or +1)."""
        raise NotImplementedError
