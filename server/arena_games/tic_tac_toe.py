"""Tic-tac-toe generalised to the m,n,k-game (game ``tic_tac_toe``).

Two players take turns placing a mark on an empty cell of a ``rows`` x ``cols``
board; the first to get ``k`` marks in an unbroken horizontal, vertical or
diagonal line wins. A full board without such a line is a draw. The defaults
(3, 3, 3) are the lab game of ``specs/tictactoe-lab.md``; unlike the lab code,
win detection works for every board size and ``k`` (it counts the run through
the last move in the four directions, so checking a move costs O(k), not
O(board)).

Encoding:

* Action = cell index ``row * cols + col`` (row-major, row 0 at the top).
* Seat 0 plays X and moves first; seat 1 plays O.
* Human notation: column letter then row number counted from 1 at the top,
  so on 3x3 ``a1`` is cell 0, ``b2`` the centre (4) and ``c3`` cell 8.
* Returns: +1 win, -1 loss, 0 draw.

Choices where the lab spec is silent or ambiguous (see the spec's section 4.2):

* A1: the lab's first mover is player -1 shown as "O". Here seat 0 moves first
  and is shown as X (the proto contract and OpenSpiel's convention); this only
  changes the display letter.
* A3: the lab handles only ``rows == cols == k``; any m,n,k is supported here,
  with ``k <= max(rows, cols)`` so a win remains possible.
* The lab engine trusts players to edit the board; this engine validates
  every move (the same games result with legal players).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass

from arena_games.core import (
    TERMINAL,
    Game,
    IllegalActionError,
    ParameterError,
    ParamSpec,
    State,
    register_game,
)

MAX_SIDE = 26
"""Largest number of rows or columns (one letter per column in cell names)."""

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_MARKS = ("X", "O")
_CELL_RE = re.compile(r"^\s*([a-zA-Z])\s*(\d+)\s*$")


@dataclass(frozen=True, slots=True)
class TicTacToeObservation:
    """The whole (public) position; the same for both seats and spectators.

    Attributes:
        rows: Board rows.
        cols: Board columns.
        k: Marks in a row needed to win.
        board: ``rows*cols`` cells, row-major: -1 empty, otherwise the owning seat.
        to_move: The seat to move; -1 when the game is over.
    """

    rows: int
    cols: int
    k: int
    board: tuple[int, ...]
    to_move: int


@register_game
class TicTacToeGame(Game):
    """The m,n,k-game: ``k`` in a row on a ``rows`` x ``cols`` board."""

    name = "tic_tac_toe"
    title = "Tic-tac-toe (m,n,k)"
    rules = (
        "Players take turns marking an empty cell; seat 0 (X) moves first. The first player with `k` "
        "marks in an unbroken row, column or diagonal wins (+1, the other -1). A full board without such "
        "a line is a draw (0 each). Action = cell index row*cols + col, row 0 at the top; in notation, "
        "column letter then row number from 1 (b2 is row 1, column 1)."
    )
    param_specs = (
        ParamSpec("rows", int, 3, "board rows", min=1, max=MAX_SIDE),
        ParamSpec("cols", int, 3, "board columns", min=1, max=MAX_SIDE),
        ParamSpec("k", int, 3, "marks in a row needed to win (at most max(rows, cols))", min=1, max=MAX_SIDE),
    )

    def _check_params(self) -> None:
        self.rows = int(self.params["rows"])
        self.cols = int(self.params["cols"])
        self.k = int(self.params["k"])
        if self.k > max(self.rows, self.cols):
            raise ParameterError(
                f"tic_tac_toe: parameter k={self.k} is longer than the board ({self.rows}x{self.cols}), so "
                f"nobody could win; choose k between 1 and {max(self.rows, self.cols)}"
            )
        self.cells = self.rows * self.cols

    @property
    def num_players(self) -> int:
        return 2

    @property
    def num_distinct_actions(self) -> int:
        return self.cells

    @property
    def max_game_length(self) -> int:
        return self.cells

    @property
    def min_utility(self) -> float:
        return -1.0

    @property
    def max_utility(self) -> float:
        return 1.0

    def new_initial_state(self) -> TicTacToeState:
        return TicTacToeState(self)

    def cell_name(self, action: int) -> str:
        """``b2``-style name of a cell: column letter, then row number from 1."""
        row, col = divmod(action, self.cols)
        return f"{_LETTERS[col]}{row + 1}"

    def action_to_string(self, player: int, action: int) -> str:
        if not 0 <= action < self.cells:
            return f"invalid({action})"
        return self.cell_name(action)

    def string_to_action(self, state: State, text: str) -> int:
        word = text.strip()
        accepted = (
            f"type a cell name such as a1 or {self.cell_name(self.cells - 1)} (column letter, row number), "
            f"or a cell index 0..{self.cells - 1}"
        )
        match = _CELL_RE.match(word)
        if match:
            col = _LETTERS.index(match.group(1).lower())
            row = int(match.group(2)) - 1
            if col >= self.cols or not 0 <= row < self.rows:
                raise IllegalActionError(f"{text!r} is off the {self.rows}x{self.cols} board; {accepted}")
            action = row * self.cols + col
        elif word.isdigit():
            action = int(word)
            if action >= self.cells:
                raise IllegalActionError(f"{text!r} is off the {self.rows}x{self.cols} board; {accepted}")
        else:
            raise IllegalActionError(f"{text!r} is not a cell; {accepted}")
        player = state.current_player()
        if not state.is_legal(player, action):
            raise IllegalActionError(state.illegal_reason(player, action))
        return action


class TicTacToeState(State):
    """A position: the board, the empty cells, whose turn it is and the winner."""

    __slots__ = ("_board", "_empty", "_to_move", "_winner")

    game: TicTacToeGame

    def __init__(self, game: TicTacToeGame) -> None:
        super().__init__(game)
        self._board = [-1] * game.cells
        self._empty = list(range(game.cells))
        self._to_move = 0
        self._winner = -1

    def current_player(self) -> int:
        return self._to_move

    def legal_actions(self, player: int | None = None) -> Sequence[int]:
        if self._to_move < 0 or (player is not None and player != self._to_move):
            return ()
        return tuple(self._empty)

    def is_legal(self, player: int, action: int) -> bool:
        return player == self._to_move >= 0 and 0 <= action < self.game.cells and self._board[action] < 0

    def illegal_reason(self, player: int, action: int) -> str:
        game = self.game
        if self._to_move < 0:
            return "the game is over; no move is legal"
        if player != self._to_move:
            return f"it is seat {self._to_move}'s turn, not seat {player}'s"
        if not 0 <= action < game.cells:
            return f"{action} is not a cell; cells are 0..{game.cells - 1} (row * {game.cols} + col)"
        owner = self._board[action]
        return f"cell {game.cell_name(action)} ({action}) is already taken by {_MARKS[owner]} (seat {owner})"

    def _apply(self, player: int, action: int) -> None:
        self._board[action] = player
        empty = self._empty
        del empty[bisect.bisect_left(empty, action)]
        if self._wins_through(action, player):
            self._winner = player
            self._to_move = TERMINAL
        elif not empty:
            self._to_move = TERMINAL
        else:
            self._to_move = 1 - player

    def _wins_through(self, cell: int, player: int) -> bool:
        """Whether ``player`` has ``k`` in a row through ``cell`` (which it just marked)."""
        game = self.game
        k = game.k
        rows, cols = game.rows, game.cols
        board = self._board
        r0, c0 = divmod(cell, cols)
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            run = 1
            r, c = r0 + dr, c0 + dc
            while 0 <= r < rows and 0 <= c < cols and board[r * cols + c] == player:
                run += 1
                r += dr
                c += dc
            r, c = r0 - dr, c0 - dc
            while 0 <= r < rows and 0 <= c < cols and board[r * cols + c] == player:
                run += 1
                r -= dr
                c -= dc
            if run >= k:
                return True
        return False

    @property
    def winner(self) -> int:
        """The winning seat, or -1 (no winner yet, or a draw)."""
        return self._winner

    def returns(self) -> tuple[float, ...]:
        if self._winner < 0:
            return (0.0, 0.0)
        return (1.0, -1.0) if self._winner == 0 else (-1.0, 1.0)

    def observation(self, seat: int | None) -> TicTacToeObservation:
        game = self.game
        return TicTacToeObservation(game.rows, game.cols, game.k, tuple(self._board), max(self._to_move, -1))

    def board_string(self) -> str:
        """The board as text rows of X, O and '.'."""
        cols = self.game.cols
        marks = ["." if v < 0 else _MARKS[v] for v in self._board]
        return "\n".join("".join(marks[i : i + cols]) for i in range(0, len(marks), cols))

    def _copy_from(self, other: State) -> None:
        assert isinstance(other, TicTacToeState)
        self._board = list(other._board)
        self._empty = list(other._empty)
        self._to_move = other._to_move
        self._winner = other._winner
        self.history = other.history.copy()
