"""Exact play for dots and boxes: retrograde tables over edge sets, cached on disk.

Following Barker and Korf (2012), a position's best *future* margin depends
only on which edges are drawn, not on the score, so one int8 value per edge
set suffices: ``value[mask]`` = the best (boxes the mover will still take) -
(boxes the opponent will still take). :func:`arena_bots.dots_and_boxes.kernels.retrograde`
fills it from the full board downwards (numba, 2^E entries).

* Boards with at most :data:`TABLE_MAX_EDGES` edges (every board up to 3x3
  boxes, also 1x7 and 2x4) get a whole-game table: 16 MiB and a few seconds
  to build for 3x3, then stored under :func:`cache_dir` and loaded on the next
  use (about 10 ms).
* Larger boards: once at most ``endgame_edges`` edges are left (default 18),
  the same retrograde runs over the remaining edges only (2^18 states, tens of
  milliseconds) and the move is exact; before that, the ``chains`` heuristic.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

from arena_bots.dots_and_boxes import kernels as K
from arena_bots.dots_and_boxes.board import Geometry

TABLE_MAX_EDGES = 24
TABLE_VERSION = 1
_TABLES: dict[tuple[int, int], np.ndarray] = {}
_LOCK = threading.Lock()


def cache_dir() -> Path:
    """Where tables are stored: ``$ARENA_CACHE_DIR`` or ``~/.cache/arena``."""
    env = os.environ.get("ARENA_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "arena"


def table_path(geo: Geometry) -> Path:
    return cache_dir() / f"dots-and-boxes-{geo.rows}x{geo.cols}-v{TABLE_VERSION}.npy"


def solve_edges(geo: Geometry, free: np.ndarray) -> np.ndarray:
    """The retrograde table over the edges in ``free`` (all other edges drawn)."""
    k = len(free)
    if k > TABLE_MAX_EDGES:
        raise ValueError(f"{k} free edges is too many for an exact table (at most {TABLE_MAX_EDGES})")
    local = {int(e): i for i, e in enumerate(free)}
    box_masks = np.zeros(geo.num_boxes, np.int64)
    for b in range(geo.num_boxes):
        for e in geo.box_edges[b]:
            if int(e) in local:
                box_masks[b] |= np.int64(1) << np.int64(local[int(e)])
    edge_local_boxes = np.ascontiguousarray(geo.edge_boxes[np.asarray(free, np.int64)])
    return K.retrograde(k, np.asarray(free, np.int64), box_masks, edge_local_boxes)  # type: ignore[no-any-return]


def exact_table(geo: Geometry, *, use_disk: bool = True) -> np.ndarray:
    """The whole-game table of a board with at most :data:`TABLE_MAX_EDGES` edges (memory, disk, or built)."""
    key = (geo.rows, geo.cols)
    with _LOCK:
        table = _TABLES.get(key)
        if table is not None:
            return table
        path = table_path(geo)
        size = 1 << geo.num_edges
        if use_disk and path.exists():
            try:
                loaded = np.load(path, allow_pickle=False)
                if loaded.dtype == np.int8 and loaded.shape == (size,):
                    table = loaded
            except (OSError, ValueError):
                table = None  # unreadable or truncated: rebuild and overwrite below
        if table is None:
            table = solve_edges(geo, np.arange(geo.num_edges, dtype=np.int64))
            if use_disk:
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                    with open(tmp, "wb") as fh:
                        np.save(fh, table, allow_pickle=False)
                    tmp.replace(path)
                except OSError:
                    pass  # a read-only cache only costs the rebuild next time
        table.setflags(write=False)
        _TABLES[key] = table
        return table


def forget_tables() -> None:
    """Drop the in-memory tables (tests measure cold starts with it)."""
    with _LOCK:
        _TABLES.clear()


def solver_move(
    geo: Geometry,
    edges: np.ndarray,
    sides: np.ndarray,
    rng: np.ndarray,
    *,
    endgame_edges: int = 18,
    parity_limit: int = 12,
) -> int:
    """The solver's move: exact by table when feasible, else ``chains`` until the endgame is small."""
    if geo.num_edges <= TABLE_MAX_EDGES:
        table = exact_table(geo)
        return int(K.table_move(table, edges, sides, np.arange(geo.num_edges, dtype=np.int64), geo.edge_boxes, rng, 0))
    free = np.flatnonzero(edges == 0).astype(np.int64)
    if len(free) <= endgame_edges:
        table = solve_edges(geo, free)
        return int(K.table_move(table, edges, sides, free, geo.edge_boxes, rng, 0))
    return int(K.chains_move(edges, sides, geo.edge_boxes, geo.box_edges, rng, 0, parity_limit))
