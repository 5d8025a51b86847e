"""The agents of the RPSLS thesis (Bizjak 2020, ``specs/rpsls-thesis.md``) as Arena bots.

Algorithms (all use only the opponent's last ``r`` moves as state, and all
work for any odd number of signs; the thesis studies 5):

* **MV**, Markov chains (``markov-1``..``markov-6``): integer counts per key,
  predict the most frequent next move (ties uniformly random), play a random
  one of its counters (``GetCounterTo``). Random play for the first r+1
  rounds. ``markov-pre-*`` variants are the thesis's "preprocessing" (noise)
  experiment.
* **MUPN**, history string matching (``mupn-1``..``mupn-6``): one stored
  successor per key, the most recent one (overwritten), countered at random.
* **SUPP**, move-based Q-learning (``supp``): Q[key][own move], alpha 0.2,
  gamma 0.9, reward +1/0/-1, no clipping, plays the argmax itself. **epsilon
  is the thesis's reversed one: the probability of exploiting** (a uniform u
  is drawn and the agent explores when u > epsilon; epsilon 0.9 = 10% random).
* **MKSU** (``mksu``) and **MKIA** (``mkia``): the same Q-learning, but over
  *which sub-agent to follow*; every sub-agent plays and learns every round,
  the meta plays the chosen one's move, and exploration picks a random
  sub-agent.
* Helpers: VK always rock (the hosted ``rock``), VO always loop
  (``always-loop``), VP always counter (``always-counter``), VPS always
  counter self (``always-counter-self``), random (the hosted ``random``).
* The optimal meta-classifier (oracle) of the upper-bound experiment. It reads
  the opponent's move first, so it is an experiment device and is not hosted.

Choices where the thesis is ambiguous (each is also in docs/bots.md, "Rock-paper-scissors bots"):

1. MV learns every transition for which a full key exists (the (r+1)-th
   opponent move onwards), also while it still plays randomly.
2. VO starts at *paper* and then loops r, p, s, L, S in enum order: Figure 3.1
   (99 transitions after 100 games, 19 for r->p and 20 for S->r) is only
   possible with a first move of paper; the text says rock.
3. MUPN predicts rock for a key never seen (C#'s default enum value).
4. SUPP's Q table starts uniform in [-1, 1]; it learns on exploration rounds
   and does not learn while no full key exists (its first r rounds).
5. The default SUPP order (unstated) is 3; sub-agents use the thesis's test
   defaults: MUPN r=2, MV r=3, SUPP order 3, alpha 0.2, gamma 0.9, epsilon 0.9.
6. MKSU's "nine" sub-agents are never listed: we use the eight non-meta
   agents MUPN, MV, SUPP, VK, VO, VP, VPS, random (configurable). MKIA uses
   MUPN, MV, SUPP. During the meta's first r rounds it follows a random
   sub-agent. VPS as a sub-agent counters its own previous *proposal*; SUPP
   as a sub-agent learns from its own proposal (as the thesis says).
7. MV preprocessing mixes 0.9 * (counts / sum) + 0.1 * onehot(scissors); an
   all-zero row is treated as uniform (so it predicts scissors). For signs
   other than 5 the boosted sign is still sign 2.
8. The oracle plays a sub-agent move that beats the opponent's move if any
   does, else one that draws, else a losing one (ties uniformly random).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

import arena_bots.rps.thesis_kernels as K
from arena_bots.numba_helpers import seed_state
from arena_bots.registry import hosted
from arena_client import Bot, MatchInfo, Turn
from arena_games.rps import counters, payoff_table

KINDS = {
    "random": K.KIND_RANDOM,
    "const": K.KIND_CONST,
    "loop": K.KIND_LOOP,
    "counter": K.KIND_COUNTER,
    "counter_self": K.KIND_COUNTER_SELF,
    "markov": K.KIND_MARKOV,
    "mupn": K.KIND_MUPN,
    "supp": K.KIND_SUPP,
    "meta": K.KIND_META,
    "oracle": K.KIND_ORACLE,
}
LEAF_KINDS = frozenset(k for k in KINDS if k not in ("meta", "oracle"))

DEFAULT_ALPHA = 0.2
DEFAULT_GAMMA = 0.9
DEFAULT_EPSILON = 0.9
DEFAULT_SUPP_ORDER = 3
DEFAULT_MUPN_ORDER = 2
DEFAULT_MV_ORDER = 3


@dataclass(frozen=True)
class AgentSpec:
    """What to build: an algorithm and its parameters.

    Attributes:
        kind: One of :data:`KINDS`.
        order: r, the number of the opponent's last moves forming the key.
        alpha: Learning rate (SUPP and metas).
        gamma: Discount (SUPP and metas).
        epsilon: The thesis's threshold: the probability of *exploiting*.
        preprocess: MV only: the +10% scissors noise of the extra experiment.
        move: ``const`` only: the sign always played.
        start: ``loop`` only: the first sign played.
        children: ``meta``/``oracle`` only: the sub-agents (leaf kinds).
        label: A short name for tables.
    """

    kind: str
    order: int = 0
    alpha: float = DEFAULT_ALPHA
    gamma: float = DEFAULT_GAMMA
    epsilon: float = DEFAULT_EPSILON
    preprocess: bool = False
    move: int = 0
    start: int = 1
    children: tuple[AgentSpec, ...] = field(default=())
    label: str = ""


def vk() -> AgentSpec:
    return AgentSpec("const", move=0, label="VK")


def vo() -> AgentSpec:
    return AgentSpec("loop", start=1, label="VO")


def vp() -> AgentSpec:
    return AgentSpec("counter", label="VP")


def vps() -> AgentSpec:
    return AgentSpec("counter_self", label="VPS")


def random_agent() -> AgentSpec:
    return AgentSpec("random", label="Random")


def mv(order: int = DEFAULT_MV_ORDER, preprocess: bool = False) -> AgentSpec:
    return AgentSpec("markov", order=order, preprocess=preprocess, label="MV+pre" if preprocess else "MV")


def mupn(order: int = DEFAULT_MUPN_ORDER) -> AgentSpec:
    return AgentSpec("mupn", order=order, label="MUPN")


def supp(order: int = DEFAULT_SUPP_ORDER, epsilon: float = DEFAULT_EPSILON) -> AgentSpec:
    return AgentSpec("supp", order=order, epsilon=epsilon, label="SUPP")


def mksu_children() -> tuple[AgentSpec, ...]:
    """The eight non-meta agents at their default parameters (choice 6)."""
    return (mupn(), mv(), supp(), vk(), vo(), vp(), vps(), random_agent())


def mkia_children() -> tuple[AgentSpec, ...]:
    return (mupn(), mv(), supp())


def mksu(order: int = DEFAULT_SUPP_ORDER, epsilon: float = DEFAULT_EPSILON) -> AgentSpec:
    return AgentSpec("meta", order=order, epsilon=epsilon, children=mksu_children(), label="MKSU")


def mkia(order: int = DEFAULT_SUPP_ORDER, epsilon: float = DEFAULT_EPSILON) -> AgentSpec:
    return AgentSpec("meta", order=order, epsilon=epsilon, children=mkia_children(), label="MKIA")


def oracle(children: tuple[AgentSpec, ...] | None = None) -> AgentSpec:
    return AgentSpec("oracle", children=mksu_children() if children is None else children, label="Oracle")


Agent = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""The arrays (H, FP, IS, FS, R) of :mod:`arena_bots.rps.thesis_kernels`."""


def build_agent(spec: AgentSpec, signs: int, seed: int) -> Agent:
    """Allocate a fresh agent (all state zero or freshly randomised) for one match."""
    if signs < 3 or signs % 2 == 0:
        raise ValueError(f"signs={signs} must be odd and at least 3")
    if spec.kind not in KINDS:
        raise ValueError(f"unknown agent kind {spec.kind!r}; expected one of {sorted(KINDS)}")
    units = [spec]
    if spec.kind in ("meta", "oracle"):
        if not spec.children:
            raise ValueError(f"{spec.kind} needs at least one sub-agent")
        for child in spec.children:
            if child.kind not in LEAF_KINDS:
                raise ValueError(f"sub-agent kind {child.kind!r} must be a leaf agent")
        units.extend(spec.children)
    elif spec.children:
        raise ValueError(f"{spec.kind} takes no sub-agents")
    n = len(units)
    H = np.zeros((n, K.H_COLS), dtype=np.int64)
    FP = np.zeros((n, K.FP_COLS), dtype=np.float64)
    table = payoff_table(signs)
    half = (signs - 1) // 2
    header = [table[a][b] for a in range(signs) for b in range(signs)]
    header += [c for m in range(signs) for c in counters(signs, m)]
    ioff = len(header)
    foff = 0
    init_rng = np.random.default_rng([seed, 0x7E515])
    q_blocks: list[np.ndarray] = []
    int_sizes: list[int] = []
    for u, unit in enumerate(units):
        if unit.order < 0 or unit.order > 12:
            raise ValueError(f"order {unit.order} out of range 0..12")
        nkeys = signs**unit.order
        H[u] = 0
        H[u, K.C_KIND] = KINDS[unit.kind]
        H[u, K.C_SIGNS] = signs
        H[u, K.C_ORDER] = unit.order
        H[u, K.C_NKEYS] = nkeys
        H[u, K.C_LAST] = -1
        FP[u] = (unit.alpha, unit.gamma, unit.epsilon)
        if unit.kind == "const":
            H[u, K.C_FLAG] = unit.move % signs
        elif unit.kind == "loop":
            H[u, K.C_LAST] = unit.start % signs
        elif unit.kind == "markov":
            H[u, K.C_FLAG] = int(unit.preprocess)
        size_i = nkeys * signs if unit.kind == "markov" else nkeys if unit.kind == "mupn" else 0
        H[u, K.C_IOFF] = ioff
        ioff += size_i
        int_sizes.append(size_i)
        width = signs if unit.kind == "supp" else len(spec.children) if unit.kind == "meta" else 0
        H[u, K.C_FOFF] = foff
        if width:
            q_blocks.append(init_rng.uniform(-1.0, 1.0, nkeys * width))
            foff += nkeys * width
    H[0, K.C_CHILD0] = 1 if n > 1 else 0
    H[0, K.C_NCHILD] = n - 1
    IS = np.zeros(ioff, dtype=np.int64)
    IS[: len(header)] = header
    FS = np.concatenate(q_blocks) if q_blocks else np.zeros(1, dtype=np.float64)
    R = np.array([seed_state(seed, u) for u in range(n)], dtype=np.uint64)
    assert half >= 1
    return H, FP, IS, FS, R


class ThesisAgentBot(Bot):
    """A thesis agent playing through the SDK: one kernel call per round.

    The opponent's previous move comes from ``turn.observation.last_round``,
    so no update messages are needed; the state is rebuilt at round 0.
    """

    games = ("rps",)

    def __init__(self, spec: AgentSpec, seed: int = 0, name: str = "") -> None:
        if spec.kind == "oracle":
            raise ValueError("the oracle reads the opponent's move first; it cannot play fair matches")
        self.spec = spec
        self.seed = seed
        self.name = name or spec.label.lower() or spec.kind
        self.matches = 0
        self.agent: Agent | None = None

    def on_match_start(self, match: MatchInfo) -> None:
        self.agent = None

    def warm_up(self) -> None:
        """Load the kernels on a scratch agent (numba's cache: some 0.4 s the first time in a process)."""
        H, FP, IS, FS, R = build_agent(self.spec, 3, 0)
        for opp in (0, 1, 2):
            K.agent_propose(H, FP, IS, FS, R)
            K.agent_observe(H, FP, IS, FS, R, opp)

    def act(self, turn: Turn) -> int:
        obs = turn.observation
        if self.agent is None or obs.round == 0:
            self.matches += 1
            self.agent = build_agent(self.spec, int(obs.signs), self.seed * 1_000_003 + self.matches)
        H, FP, IS, FS, R = self.agent
        if obs.last_round:
            K.agent_observe(H, FP, IS, FS, R, int(obs.last_round[1 - turn.seat]))
        return int(K.agent_propose(H, FP, IS, FS, R))


def _host(name: str, spec: AgentSpec, description: str) -> None:
    def factory(seed: int) -> Bot:
        return ThesisAgentBot(spec, seed, name)

    hosted(name, ("rps",), description)(factory)


for _r in range(1, 7):
    _host(f"markov-{_r}", replace(mv(_r)), f"RPSLS thesis Markov chain (MV) of order {_r}")
    _host(f"mupn-{_r}", mupn(_r), f"RPSLS thesis history string matching (MUPN), key length {_r}")
_host("markov-pre-3", mv(3, preprocess=True), "MV order 3 with the thesis's +10% scissors preprocessing")
_host("supp", supp(), "RPSLS thesis move-based Q-learning (order 3, alpha .2, gamma .9, epsilon .9)")
_host("mksu", mksu(), "RPSLS thesis meta-classifier with Q-learning over 8 sub-agents")
_host("mkia", mkia(), "RPSLS thesis meta-classifier over MUPN, MV and SUPP")
_host("always-loop", vo(), "thesis VO: paper, scissors, ..., rock, paper, ... in sign order")
_host("always-counter", vp(), "thesis VP: a random counter of the opponent's previous move")
_host("always-counter-self", vps(), "thesis VPS: a random counter of its own previous move")
