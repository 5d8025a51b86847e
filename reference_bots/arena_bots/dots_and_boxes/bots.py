"""The hosted dots and boxes bots: ``greedy``, ``neuro``, ``neuro-features``, ``chains``, ``solver``, ``boxes-mcts``.

Each algorithm is a *policy* (``choose(position) -> edge``) used both by the
hosted :class:`PolicyBot` and by the experiments' fast game loop.

* ``greedy`` (spec 7): the fourth side of the first three-sided box in
  row-major order, else a uniformly random undrawn edge.
* ``neuro`` (spec 4): the thesis's network scores board + one-hot move for
  every legal edge and plays the best, ties uniformly random. It loads the
  shipped genome ``genomes/thesis-3x3.json`` (3x3 boxes only);
  ``neuro-features`` loads ``genomes/features-3x3.json`` (any board). Any other
  genome file: ``NeuroPolicy(load_genome(path))`` or
  ``python -m arena_bots.dots_and_boxes --genome PATH``.
* ``chains``: (1) while three-sided boxes exist it takes them, except in the
  endgame (no safe move left after taking and a chain of 3+ boxes still on
  the board), where it takes independent boxes first and then declines the
  last two boxes of a chain (four of a loop) with the double-dealing move, so
  the opponent must open the next chain; (2) otherwise a safe edge (one giving
  no box a third side); when at most 12 safe edges remain it searches the
  game of safe moves and plays one that leaves the opponent the first player
  without a safe move while a long chain exists (the long-chain rule, played
  by counting rather than by formula); (3) with no safe edge, the edge handing
  over the fewest boxes.
* ``solver``: exact play on every board with at most 24 edges (all boards up
  to 3x3) from a retrograde table cached on disk; on larger boards ``chains``
  until at most 18 edges are left, then exact play on the remaining edges.
* ``boxes-mcts``: UCT (c = 0.7) whose playouts take open boxes, else play a random
  safe edge, else a random edge; a playout scores 0.5 + margin / (2 boxes);
  while safe edges exist the tree only tries safe or box-closing edges; up to
  4000 iterations or 0.15 s a move, for any board.

``boxes-mcts`` (7 ms a move on 3x3 boxes, up to 135 ms on 6x6) and ``solver``
(up to about 20 ms for an endgame search on boards past 3x3) set
``thinks_off_loop``: a server seats them on a thread beside its event loop, and
the kernels they call release the GIL (``nogil``). The others answer in well
under a millisecond and stay on the loop. ``solver``'s ``warm_up`` loads the
3x3 table, the ladder's board (built the first time on a machine: about 1.7 s).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

import numpy as np

from arena_bots.dots_and_boxes import kernels as K
from arena_bots.dots_and_boxes.board import Position, geometry
from arena_bots.dots_and_boxes.neuro import SHIPPED, Genome, GenomeError, load_genome
from arena_bots.dots_and_boxes.solver import exact_table, solver_move
from arena_bots.numba_helpers import seed_state
from arena_bots.registry import hosted
from arena_client import Bot, MatchInfo, Turn

GAMES = ("dots_and_boxes",)


class Policy(Protocol):
    """Picks an undrawn edge for the player to move."""

    def choose(self, pos: Position) -> int: ...


class _Seeded:
    def __init__(self, seed: int) -> None:
        self.rng = np.array([seed_state(seed, 0xDAB)], dtype=np.uint64)


class RandomPolicy(_Seeded):
    def choose(self, pos: Position) -> int:
        return int(K.random_free_edge(pos.edges, self.rng, 0))


class GreedyPolicy(_Seeded):
    def choose(self, pos: Position) -> int:
        return int(K.greedy_move(pos.edges, pos.sides, pos.geo.box_edges, self.rng, 0))


class NeuroPolicy(_Seeded):
    def __init__(self, genome: Genome, seed: int = 0) -> None:
        super().__init__(seed)
        self.genome = genome

    def choose(self, pos: Position) -> int:
        g = self.genome
        if not g.plays(pos.geo.rows, pos.geo.cols):
            raise GenomeError(
                f"this thesis-representation genome was trained on {g.rows}x{g.cols} boxes and cannot play "
                f"{pos.geo.rows}x{pos.geo.cols}; train one for that board with `arena train dots-and-boxes "
                f"--rows {pos.geo.rows} --cols {pos.geo.cols}`"
            )
        geo = pos.geo
        return int(
            K.net_move(
                g.rep,
                g.sizes,
                g.weights,
                pos.edges,
                pos.sides,
                geo.edge_boxes,
                geo.box_edges,
                pos.margin(),
                self.rng,
                0,
            )
        )


class ChainsPolicy(_Seeded):
    def __init__(self, seed: int = 0, parity_limit: int = 12) -> None:
        super().__init__(seed)
        self.parity_limit = parity_limit

    def choose(self, pos: Position) -> int:
        geo = pos.geo
        limit = self.parity_limit if geo.num_edges <= 63 else 0
        return int(K.chains_move(pos.edges, pos.sides, geo.edge_boxes, geo.box_edges, self.rng, 0, limit))


class SolverPolicy(_Seeded):
    def __init__(self, seed: int = 0, endgame_edges: int = 18) -> None:
        super().__init__(seed)
        self.endgame_edges = endgame_edges

    def choose(self, pos: Position) -> int:
        return solver_move(pos.geo, pos.edges, pos.sides, self.rng, endgame_edges=self.endgame_edges)

    def warm_up(self) -> None:
        """Load the default board's (3x3) whole-game table: built the first time on a machine (seconds), then read."""
        exact_table(geometry(3, 3))


class MctsPolicy(_Seeded):
    def __init__(self, seed: int = 0, iterations: int = 4000, seconds: float = 0.15, c_uct: float = 0.7) -> None:
        super().__init__(seed)
        self.iterations = iterations
        self.seconds = seconds
        self.c_uct = c_uct

    def choose(self, pos: Position) -> int:
        geo = pos.geo
        free = int((pos.edges == 0).sum())
        if free == 1:
            return int(np.flatnonzero(pos.edges == 0)[0])
        max_nodes = self.iterations + 1
        child = np.full((max_nodes, geo.num_edges), -1, np.int64)
        visits = np.zeros(max_nodes, np.float64)
        wins = np.zeros(max_nodes, np.float64)
        mover = np.zeros(max_nodes, np.int64)
        visits[0] = 0
        mover[0] = 1
        nodes = 1
        done = 0
        deadline = time.perf_counter() + self.seconds
        step = 250
        while done < self.iterations:
            n = min(step, self.iterations - done)
            nodes = K.mcts_search(
                pos.edges,
                pos.sides,
                geo.edge_boxes,
                geo.box_edges,
                n,
                child,
                visits,
                wins,
                mover,
                nodes,
                self.c_uct,
                self.rng,
                0,
            )
            done += n
            if time.perf_counter() > deadline:
                break
        best, pick = -1.0, -1
        for e in np.flatnonzero(pos.edges == 0):
            ch = child[0, e]
            if ch >= 0 and visits[ch] > best:
                best, pick = visits[ch], int(e)
        return pick if pick >= 0 else int(K.random_free_edge(pos.edges, self.rng, 0))


def position_of(turn: Turn) -> Position:
    """The kernel position of a turn's :class:`~arena_games.dots_and_boxes.DotsAndBoxesObservation`."""
    obs: Any = turn.observation
    geo = geometry(int(obs.rows), int(obs.cols))
    scores = tuple(int(s) for s in obs.scores)
    return Position.from_edges(geo, [bool(x) for x in obs.edges], (scores[0], scores[1]), int(turn.seat))


class PolicyBot(Bot):
    """A policy playing through the SDK (any board the policy supports)."""

    games = GAMES

    def __init__(self, policy: Policy, name: str, thinks_off_loop: bool = False) -> None:
        self.policy = policy
        self.name = name
        self.thinks_off_loop = thinks_off_loop
        """True for the policies that may think tens of milliseconds a move (``boxes-mcts``, ``solver``): a
        server seats the bot on a thread (its kernels release the GIL), not on its event loop."""

    def on_match_start(self, match: MatchInfo) -> None:
        # The referee does not charge this hook to the clock: load the kernels here, once per process.
        _warm_once()

    def warm_up(self) -> None:
        """Load the kernels (once per process; any thread), and the policy's own start-up work if it has any.

        The server calls it off its event loop before the bot's first match.
        """
        _warm_once()
        own = getattr(self.policy, "warm_up", None)
        if own is not None:
            own()

    def act(self, turn: Turn) -> int:
        pos = position_of(turn)
        edge = self.policy.choose(pos)
        if edge not in turn.legal_actions:
            raise RuntimeError(f"{self.name} chose edge {edge}, which is not legal here (a bug)")
        return edge


_SHIPPED_CACHE: dict[str, Genome] = {}
_WARM = threading.Event()
_WARM_LOCK = threading.Lock()


def warm_up() -> None:
    """Load every kernel once on a small board (numba's cached machine code takes seconds to load)."""
    geo = geometry(2, 3)
    policies: list[Policy] = [GreedyPolicy(0), ChainsPolicy(0), MctsPolicy(0, iterations=50)]
    for policy in [*policies, NeuroPolicy(shipped_genome("features"))]:
        pos = Position(geo)
        while not pos.over:
            pos.play(policy.choose(pos))
    geo = geometry(4, 4)
    for drawn in (10, 23):  # chains, then the endgame retrograde
        pos = Position.from_edges(geo, [e < drawn for e in range(geo.num_edges)])
        solver_move(geo, pos.edges, pos.sides, np.array([seed_state(0)], dtype=np.uint64))


def _warm_once() -> None:
    """Run :func:`warm_up` the first time a hosted bot starts a match in this process."""
    with _WARM_LOCK:
        if not _WARM.is_set():
            warm_up()
            _WARM.set()


def shipped_genome(representation: str) -> Genome:
    """The genome packaged for ``representation`` (``thesis`` or ``features``)."""
    if representation not in _SHIPPED_CACHE:
        _SHIPPED_CACHE[representation] = load_genome(SHIPPED[representation])
    return _SHIPPED_CACHE[representation]


def make_policy(name: str, seed: int = 0) -> Policy:
    """The policy of a hosted bot name (also ``random``)."""
    if name == "random":
        return RandomPolicy(seed)
    if name == "greedy":
        return GreedyPolicy(seed)
    if name == "neuro":
        return NeuroPolicy(shipped_genome("thesis"), seed)
    if name == "neuro-features":
        return NeuroPolicy(shipped_genome("features"), seed)
    if name == "chains":
        return ChainsPolicy(seed)
    if name == "solver":
        return SolverPolicy(seed)
    if name == "boxes-mcts":
        return MctsPolicy(seed)
    raise ValueError(f"unknown dots and boxes policy {name!r}")


@hosted("greedy", GAMES, "dots and boxes thesis heuristic: takes any box it can, else a random edge")
def _greedy(seed: int) -> Bot:
    return PolicyBot(GreedyPolicy(seed), "greedy")


@hosted("neuro", GAMES, "dots and boxes thesis neuroevolved network (shipped 3x3 genome)")
def _neuro(seed: int) -> Bot:
    return PolicyBot(NeuroPolicy(shipped_genome("thesis"), seed), "neuro")


@hosted("neuro-features", GAMES, "dots and boxes network on score and chain features (any board)")
def _neuro_features(seed: int) -> Bot:
    return PolicyBot(NeuroPolicy(shipped_genome("features"), seed), "neuro-features")


@hosted("chains", GAMES, "dots and boxes chain heuristic: safe moves, long-chain rule, double-dealing")
def _chains(seed: int) -> Bot:
    return PolicyBot(ChainsPolicy(seed), "chains")


@hosted("solver", GAMES, "dots and boxes exact play up to 3x3 (cached tables), chains + endgame search beyond")
def _solver(seed: int) -> Bot:
    return PolicyBot(SolverPolicy(seed), "solver", thinks_off_loop=True)  # (an endgame search: about 20 ms)


@hosted("boxes-mcts", GAMES, "dots and boxes UCT Monte Carlo tree search (0.15 s a move)")
def _mcts(seed: int) -> Bot:
    return PolicyBot(MctsPolicy(seed), "boxes-mcts", thinks_off_loop=True)  # (up to 0.15 s a move)
