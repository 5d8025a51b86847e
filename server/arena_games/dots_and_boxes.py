"""Dots and boxes (game ``dots_and_boxes``) on ``rows`` x ``cols`` boxes.

The board has ``(rows+1) x (cols+1)`` dots and ``2*rows*cols + rows + cols``
edges. Players take turns drawing one undrawn edge. Drawing the fourth side of
a box (or of two boxes at once) claims it for the mover, who must then move
again; otherwise the turn passes. The game ends when every edge is drawn.
Returns are the box margin: seat 0 gets (its boxes - seat 1's boxes), seat 1
the negative. The defaults (3x3 boxes) are the board of
``specs/dots-and-boxes-thesis.md``.

Edge numbering (fixed forever; bots depend on it). The ``2*rows + 1`` lines
of the dot grid are numbered top to bottom; each line of ``cols`` horizontal
edges is followed by the line of ``cols + 1`` vertical edges below it. With
``W = 2*cols + 1``:

* horizontal edge on dot row r (0..rows), between dot columns c and c+1
  (c in 0..cols-1): ``r*W + c``
* vertical edge below dot row r (0..rows-1), on dot column c (0..cols):
  ``r*W + cols + c``

Box (i, j) has top ``i*W + j``, bottom ``(i+1)*W + j``, left
``i*W + cols + j`` and right ``i*W + cols + j + 1``. For 2x2 boxes::

    *  0  *  1  *
    2     3     4
    *  5  *  6  *
    7     8     9
    * 10  * 11  *

and for the default 3x3 boxes::

    *  0  *  1  *  2  *
    3     4     5     6
    *  7  *  8  *  9  *
    10   11    12    13
    * 14  * 15  * 16  *
    17   18    19    20
    * 21  * 22  * 23  *

Human notation: ``action_to_string`` names an edge by its direction and the
dot it starts from, ``h<r>,<c>`` (from dot (r, c) rightwards) or ``v<r>,<c>``
(from dot (r, c) downwards); ``string_to_action`` accepts that form or the
plain edge number.

Choices where the thesis is silent (its section 11):

* Figure 4.1 (the thesis's edge numbering) is lost; the numbering above is
  ours. OpenSpiel numbers all horizontal edges first, then all vertical ones;
  :func:`openspiel_edge` converts.
* An edge that completes two boxes claims both and gives exactly one extra
  move. If the last edge completes a box the game simply ends.
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
    ParamSpec,
    State,
    register_game,
)

_EDGE_RE = re.compile(r"^\s*([hHvV])\s*\(?\s*(\d+)\s*[, ]\s*(\d+)\s*\)?\s*$")


def edge_index(rows: int, cols: int, horizontal: bool, r: int, c: int) -> int:
    """Our number of the edge starting at dot (r, c): rightwards if ``horizontal``, else downwards."""
    width = 2 * cols + 1
    return r * width + c if horizontal else r * width + cols + c


def edge_coords(rows: int, cols: int, edge: int) -> tuple[bool, int, int]:
    """``(horizontal, r, c)`` of an edge number: direction and the dot it starts from."""
    r, offset = divmod(edge, 2 * cols + 1)
    if offset < cols:
        return True, r, offset
    return False, r, offset - cols


def openspiel_edge(rows: int, cols: int, openspiel_action: int) -> int:
    """Map an OpenSpiel ``dots_and_boxes`` action (all horizontal edges first) to our edge number."""
    horizontal_count = (rows + 1) * cols
    if openspiel_action < horizontal_count:
        r, c = divmod(openspiel_action, cols)
        return edge_index(rows, cols, True, r, c)
    r, c = divmod(openspiel_action - horizontal_count, cols + 1)
    return edge_index(rows, cols, False, r, c)


@dataclass(frozen=True, slots=True)
class DotsAndBoxesObservation:
    """The whole (public) position; the same for both seats and spectators.

    Attributes:
        rows: Rows of boxes.
        cols: Columns of boxes.
        edges: ``2*rows*cols + rows + cols`` flags (True = drawn) in the fixed numbering.
        box_owners: ``rows*cols`` boxes, row-major: -1 unclaimed, otherwise the owning seat.
        scores: Boxes owned, by seat.
        to_move: The seat to move; -1 when the game is over.
    """

    rows: int
    cols: int
    edges: tuple[bool, ...]
    box_owners: tuple[int, ...]
    scores: tuple[int, ...]
    to_move: int


@register_game
class DotsAndBoxesGame(Game):
    """Dots and boxes on ``rows`` x ``cols`` boxes, scored by box margin."""

    name = "dots_and_boxes"
    title = "Dots and boxes"
    rules = (
        "Players take turns drawing one undrawn edge between two neighbouring dots; seat 0 starts. "
        "Drawing the fourth side of a box (or two boxes) claims it, and the same player must move again. "
        "When every edge is drawn, the return of each seat is its boxes minus the opponent's. Edges are "
        "numbered line by line from the top: each row of horizontal edges, then the row of vertical edges"
        " below it."
    )
    param_specs = (
        ParamSpec("rows", int, 3, "rows of boxes", min=1, max=10),
        ParamSpec("cols", int, 3, "columns of boxes", min=1, max=10),
    )

    def _check_params(self) -> None:
        rows = self.rows = int(self.params["rows"])
        cols = self.cols = int(self.params["cols"])
        width = 2 * cols + 1
        self.num_edges = rows * width + cols
        self.num_boxes = rows * cols
        boxes_of: list[list[int]] = [[] for _ in range(self.num_edges)]
        box_edges: list[tuple[int, int, int, int]] = []
        for i in range(rows):
            for j in range(cols):
                box = i * cols + j
                sides = (i * width + j, (i + 1) * width + j, i * width + cols + j, i * width + cols + j + 1)
                box_edges.append(sides)
                for edge in sides:
                    boxes_of[edge].append(box)
        self.box_edges: tuple[tuple[int, int, int, int], ...] = tuple(box_edges)
        """The four edges of each box: top, bottom, left, right."""
        self.edge_boxes: tuple[tuple[int, ...], ...] = tuple(tuple(b) for b in boxes_of)
        """The one or two boxes each edge borders."""
        self.edge_names = tuple(self._edge_name(e) for e in range(self.num_edges))

    def _edge_name(self, edge: int) -> str:
        horizontal, r, c = edge_coords(self.rows, self.cols, edge)
        return f"{'h' if horizontal else 'v'}{r},{c}"

    @property
    def num_players(self) -> int:
        return 2

    @property
    def num_distinct_actions(self) -> int:
        return self.num_edges

    @property
    def max_game_length(self) -> int:
        return self.num_edges

    @property
    def min_utility(self) -> float:
        return -float(self.num_boxes)

    @property
    def max_utility(self) -> float:
        return float(self.num_boxes)

    def new_initial_state(self) -> DotsAndBoxesState:
        return DotsAndBoxesState(self)

    def action_to_string(self, player: int, action: int) -> str:
        if not 0 <= action < self.num_edges:
            return f"invalid({action})"
        return self.edge_names[action]

    def string_to_action(self, state: State, text: str) -> int:
        word = text.strip()
        accepted = (
            f"type an edge number 0..{self.num_edges - 1}, or h<row>,<col> (the edge rightwards from dot "
            f"(row, col)) or v<row>,<col> (downwards)"
        )
        match = _EDGE_RE.match(word)
        if match:
            horizontal = match.group(1).lower() == "h"
            r, c = int(match.group(2)), int(match.group(3))
            max_r = self.rows if horizontal else self.rows - 1
            max_c = self.cols - 1 if horizontal else self.cols
            if not (0 <= r <= max_r and 0 <= c <= max_c):
                kind = "horizontal" if horizontal else "vertical"
                raise IllegalActionError(
                    f"{text!r}: there is no {kind} edge from dot ({r}, {c}); {kind} edges start at rows "
                    f"0..{max_r} and columns 0..{max_c}"
                )
            action = edge_index(self.rows, self.cols, horizontal, r, c)
        elif word.isdigit():
            action = int(word)
            if action >= self.num_edges:
                raise IllegalActionError(f"{text!r} is not an edge; {accepted}")
        else:
            raise IllegalActionError(f"{text!r} is not an edge; {accepted}")
        player = state.current_player()
        if not state.is_legal(player, action):
            raise IllegalActionError(state.illegal_reason(player, action))
        return action


class DotsAndBoxesState(State):
    """A position: drawn edges, sides drawn per box, box owners, scores, the mover."""

    __slots__ = ("_edges", "_free", "_owners", "_scores", "_sides", "_to_move")

    game: DotsAndBoxesGame

    def __init__(self, game: DotsAndBoxesGame) -> None:
        super().__init__(game)
        self._edges = [False] * game.num_edges
        self._free = list(range(game.num_edges))
        self._sides = [0] * game.num_boxes
        self._owners = [-1] * game.num_boxes
        self._scores = [0, 0]
        self._to_move = 0

    def current_player(self) -> int:
        return self._to_move

    def legal_actions(self, player: int | None = None) -> Sequence[int]:
        if self._to_move < 0 or (player is not None and player != self._to_move):
            return ()
        return tuple(self._free)

    def is_legal(self, player: int, action: int) -> bool:
        return player == self._to_move >= 0 and 0 <= action < self.game.num_edges and not self._edges[action]

    def illegal_reason(self, player: int, action: int) -> str:
        game = self.game
        if self._to_move < 0:
            return "the game is over; no move is legal"
        if player != self._to_move:
            return f"it is seat {self._to_move}'s turn, not seat {player}'s"
        if not 0 <= action < game.num_edges:
            return f"{action} is not an edge; edges are 0..{game.num_edges - 1}"
        return f"edge {action} ({game.edge_names[action]}) is already drawn"

    def _apply(self, player: int, action: int) -> None:
        self._edges[action] = True
        free = self._free
        del free[bisect.bisect_left(free, action)]
        sides = self._sides
        closed = 0
        for box in self.game.edge_boxes[action]:
            sides[box] += 1
            if sides[box] == 4:
                self._owners[box] = player
                closed += 1
        if closed:
            self._scores[player] += closed
        if not free:
            self._to_move = TERMINAL
        elif not closed:
            self._to_move = 1 - player

    def returns(self) -> tuple[float, ...]:
        if self._to_move >= 0:
            return (0.0, 0.0)
        margin = float(self._scores[0] - self._scores[1])
        return (margin, -margin)

    @property
    def scores(self) -> tuple[int, int]:
        """Boxes owned by seat 0 and seat 1."""
        return self._scores[0], self._scores[1]

    def edges_mask(self) -> int:
        """The drawn edges as a bitmask (bit e set when edge e is drawn)."""
        mask = 0
        for edge, drawn in enumerate(self._edges):
            if drawn:
                mask |= 1 << edge
        return mask

    def observation(self, seat: int | None) -> DotsAndBoxesObservation:
        game = self.game
        return DotsAndBoxesObservation(
            game.rows,
            game.cols,
            tuple(self._edges),
            tuple(self._owners),
            tuple(self._scores),
            max(self._to_move, -1),
        )

    def board_string(self) -> str:
        """The board drawn with ``*`` dots, ``---`` and ``|`` edges, and box owners' marks."""
        game = self.game
        rows, cols = game.rows, game.cols
        lines = []
        for r in range(rows + 1):
            top = "*"
            for c in range(cols):
                top += ("---" if self._edges[edge_index(rows, cols, True, r, c)] else "   ") + "*"
            lines.append(top)
            if r == rows:
                break
            middle = ""
            for c in range(cols + 1):
                middle += "|" if self._edges[edge_index(rows, cols, False, r, c)] else " "
                if c < cols:
                    owner = self._owners[r * cols + c]
                    middle += f" {'AB'[owner] if owner >= 0 else ' '} "
            lines.append(middle)
        return "\n".join(lines)

    def _copy_from(self, other: State) -> None:
        assert isinstance(other, DotsAndBoxesState)
        self._edges = list(other._edges)
        self._free = list(other._free)
        self._sides = list(other._sides)
        self._owners = list(other._owners)
        self._scores = list(other._scores)
        self._to_move = other._to_move
        self.history = other.history.copy()
