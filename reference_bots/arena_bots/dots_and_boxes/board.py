"""Board geometry and a lean position for the dots and boxes kernels.

Edges are numbered as in :mod:`arena_games.dots_and_boxes` (line by line from
the top, each row of horizontal edges followed by the row of vertical edges
below it), so a kernel position converts to and from the engine's observation
without a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from arena_bots.dots_and_boxes import kernels as K


@dataclass(frozen=True)
class Geometry:
    """The arrays the kernels need for a ``rows`` x ``cols`` board of boxes.

    Attributes:
        rows: Rows of boxes.
        cols: Columns of boxes.
        num_edges: ``2*rows*cols + rows + cols``.
        num_boxes: ``rows*cols``.
        edge_boxes: int64 [E, 2]: the one or two boxes of each edge, -1 padded.
        box_edges: int64 [B, 4]: top, bottom, left, right edge of each box.
    """

    rows: int
    cols: int
    num_edges: int
    num_boxes: int
    edge_boxes: np.ndarray
    box_edges: np.ndarray


@lru_cache(maxsize=64)
def geometry(rows: int, cols: int) -> Geometry:
    """The (cached) geometry of a ``rows`` x ``cols`` board."""
    if rows < 1 or cols < 1:
        raise ValueError(f"a board needs at least 1x1 boxes, not {rows}x{cols}")
    width = 2 * cols + 1
    num_edges = rows * width + cols
    box_edges = np.zeros((rows * cols, 4), np.int64)
    edge_boxes = np.full((num_edges, 2), -1, np.int64)
    for i in range(rows):
        for j in range(cols):
            b = i * cols + j
            sides = (i * width + j, (i + 1) * width + j, i * width + cols + j, i * width + cols + j + 1)
            box_edges[b] = sides
            for e in sides:
                slot = 0 if edge_boxes[e, 0] < 0 else 1
                edge_boxes[e, slot] = b
    box_edges.setflags(write=False)
    edge_boxes.setflags(write=False)
    return Geometry(rows, cols, num_edges, rows * cols, edge_boxes, box_edges)


class Position:
    """A position as kernel arrays plus the score and the player to move (0 or 1)."""

    def __init__(self, geo: Geometry) -> None:
        self.geo = geo
        self.edges = np.zeros(geo.num_edges, np.uint8)
        self.sides = np.zeros(geo.num_boxes, np.int8)
        self.score = [0, 0]
        self.to_move = 0

    @classmethod
    def from_edges(cls, geo: Geometry, drawn: object, scores: tuple[int, int] = (0, 0), to_move: int = 0) -> Position:
        """A position with the given drawn-edge flags (any sequence of bools/ints of length E)."""
        pos = cls(geo)
        flags = np.asarray(drawn, dtype=np.uint8)
        if flags.shape != (geo.num_edges,):
            raise ValueError(f"expected {geo.num_edges} edge flags for {geo.rows}x{geo.cols}, got {flags.shape}")
        pos.edges[:] = flags
        for b in range(geo.num_boxes):
            pos.sides[b] = int(flags[geo.box_edges[b]].sum())
        pos.score = [int(scores[0]), int(scores[1])]
        pos.to_move = to_move
        return pos

    def copy(self) -> Position:
        other = Position(self.geo)
        other.edges[:] = self.edges
        other.sides[:] = self.sides
        other.score = list(self.score)
        other.to_move = self.to_move
        return other

    @property
    def over(self) -> bool:
        return bool(self.edges.all())

    def legal(self) -> list[int]:
        return [int(e) for e in np.flatnonzero(self.edges == 0)]

    def margin(self) -> int:
        """Boxes of the player to move minus the opponent's."""
        return self.score[self.to_move] - self.score[1 - self.to_move]

    def play(self, edge: int) -> int:
        """Draw ``edge`` for the player to move; returns the boxes closed."""
        if not 0 <= edge < self.geo.num_edges or self.edges[edge]:
            raise ValueError(f"edge {edge} is not a legal move here")
        closed = int(K.apply_edge(self.edges, self.sides, self.geo.edge_boxes, edge))
        if closed:
            self.score[self.to_move] += closed
        else:
            self.to_move = 1 - self.to_move
        return closed

    def mask(self) -> int:
        """The drawn edges as an integer bit mask (bit e = edge e)."""
        return sum(1 << int(e) for e in np.flatnonzero(self.edges))
