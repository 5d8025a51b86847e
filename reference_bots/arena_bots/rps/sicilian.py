"""``sicilian``: Arena's own RPS/RPSLS meta bot, an ensemble of predictors that second-guesses.

Design (in the spirit of Iocaine Powder, generalised to any odd number of
signs):

1. **Predictors.** Each round some 26 predictors guess a move, either the
   opponent's next move or *our own* next move as an opponent modelling us
   would guess it: the last move (opponent's, ours), overall frequencies and
   frequencies decayed by 0.8, the thesis's Markov-chain counts (MV) and its
   last-successor tables (MUPN) of orders 1..3 on the opponent's history and
   on ours, the longest earlier match (up to 16 rounds) of the opponent's
   history, of ours and of the joint history (predicting both moves that
   followed it), and Shannon's mind reader (window 5) modelling the opponent,
   and a second one modelling us from the opponent's side.
2. **Second-guessing.** Every prediction x becomes ``signs`` experts, one per
   rotation of x along a fixed beat cycle c (a Hamiltonian cycle of the
   "beats" tournament, so c(x) beats x; for RPS it is x+1): the expert k plays
   c^k(x). For an opponent prediction, k=1 is the naive counter, k=2 assumes
   the opponent expects that counter, and so on. For a prediction of our own
   move, k=2 beats an opponent who counters what we seem about to play (the
   thesis's MV, MUPN, VP, the mind reader...). Rotations cover every sign, so
   "beat both counters of x" (the best reply to RPSLS's random GetCounterTo)
   is always among them.
3. **Selection.** Every expert is scored on every round by the payoff its move
   would have got, with four forgetting rates (0.5, 0.8, 0.95, 0.995). Each
   rate is a layer following its best expert; the move played is the layer
   with the best record (scores decayed by 0.9). Ties anywhere are broken
   uniformly at random, so early play is random.

The whole step is one numba call, O(experts + 16^2) per round, so the
decision time does not grow with the match length.
"""

from __future__ import annotations

import numpy as np

import arena_bots.rps.sicilian_kernels as K
from arena_bots.numba_helpers import seed_state
from arena_bots.registry import hosted
from arena_client import Bot, MatchInfo, Turn
from arena_games.rps import beats

DECAYS = (0.5, 0.8, 0.95, 0.995)
MAX_MATCH = 16
HASH_BITS = 16
TABLE_LIMIT = 1 << 20


def beat_cycle(signs: int) -> list[int]:
    """A cyclic order of all signs where each beats the one before it (nxt[x] beats x)."""
    order = [0]
    used = [False] * signs
    used[0] = True

    def extend() -> bool:
        if len(order) == signs:
            return beats(signs, 0, order[-1])
        for y in range(signs):
            if not used[y] and beats(signs, y, order[-1]):
                used[y] = True
                order.append(y)
                if extend():
                    return True
                order.pop()
                used[y] = False
        return False

    if not extend():  # pragma: no cover - every regular tournament is Hamiltonian
        raise ValueError(f"no beat cycle for {signs} signs")
    nxt = [0] * signs
    for i, x in enumerate(order):
        nxt[x] = order[(i + 1) % signs]
    return nxt


class SicilianState:
    """All arrays of one match's ``sicilian`` bot."""

    def __init__(self, signs: int, rounds: int, seed: int) -> None:
        s = signs
        self.signs = s
        orders = 0
        while orders < K.MAX_ORDERS and s ** (orders + 2) <= TABLE_LIMIT:
            orders += 1
        mr_n = 5
        while mr_n > 1 and s * (s + 1) ** mr_n > TABLE_LIMIT:
            mr_n -= 1
        self.IV = np.zeros(8, dtype=np.int64)
        self.IV[K.I_SIGNS] = s
        self.IV[K.I_MAXLEN] = MAX_MATCH
        self.IV[K.I_ORDERS] = orders
        self.IV[K.I_HBITS] = HASH_BITS
        self.IV[K.I_NPRED] = K.N_PRED
        cap = rounds + 2
        self.hs = np.zeros(cap, dtype=np.int16)
        self.ho = np.zeros(cap, dtype=np.int16)
        self.offs = np.zeros((K.MAX_ORDERS + 1, 4), dtype=np.int64)
        size_c = 0
        size_s = 0
        for k in range(1, orders + 1):
            self.offs[k, 0] = size_c
            self.offs[k, 1] = size_c + s ** (k + 1)
            size_c += 2 * s ** (k + 1)
            self.offs[k, 2] = size_s
            self.offs[k, 3] = size_s + s**k
            size_s += 2 * s**k
        self.counts = np.zeros(max(size_c, 1), dtype=np.int64)
        self.succ = np.full(max(size_s, 1), -1, dtype=np.int64)
        self.freq = np.zeros((2, s), dtype=np.float64)
        self.dfreq = np.zeros((2, s), dtype=np.float64)
        self.mtab = np.full((3, 1 << HASH_BITS), -1, dtype=np.int64)
        self.hashes = np.zeros(MAX_MATCH + 1, dtype=np.int64)
        size_mr = s * (s + 1) ** mr_n
        self.mr = (
            np.zeros(size_mr, dtype=np.int64),
            np.zeros(mr_n, dtype=np.int64),
            np.array([mr_n, s, 0, 0], dtype=np.int64),
            np.zeros(1 << mr_n, dtype=np.int64),
        )
        self.ms = (
            np.zeros(size_mr, dtype=np.int64),
            np.zeros(mr_n, dtype=np.int64),
            np.array([mr_n, s, 0, 0], dtype=np.int64),
            np.zeros(1 << mr_n, dtype=np.int64),
        )
        nxt = beat_cycle(s)
        self.rot = np.zeros((s, s), dtype=np.int64)
        for x in range(s):
            y = x
            for k in range(s):
                self.rot[k, x] = y
                y = nxt[y]
        from arena_games.rps import payoff_table

        self.pay = np.array(payoff_table(s), dtype=np.int64).reshape(-1)
        self.preds = np.full(K.N_PRED, -1, dtype=np.int64)
        self.emove = np.full(K.N_PRED * s, -1, dtype=np.int64)
        self.decays = np.array(DECAYS, dtype=np.float64)
        self.escore = np.zeros((len(DECAYS), K.N_PRED * s), dtype=np.float64)
        self.lmove = np.zeros(len(DECAYS), dtype=np.int64)
        self.lscore = np.zeros(len(DECAYS), dtype=np.float64)
        self.R = np.array([seed_state(seed, 7)], dtype=np.uint64)
        self.capacity = cap - 1

    def step(self, opp: int) -> int:
        """Record the opponent's last move (-1 before the first round) and return our move."""
        if int(self.IV[K.I_T]) >= self.capacity:
            self._grow()
        return int(
            K.step(
                self.IV,
                self.hs,
                self.ho,
                self.counts,
                self.succ,
                self.offs,
                self.freq,
                self.dfreq,
                self.mtab,
                self.hashes,
                *self.mr,
                *self.ms,
                self.rot,
                self.pay,
                self.preds,
                self.emove,
                self.escore,
                self.decays,
                self.lmove,
                self.lscore,
                self.R,
                opp,
            )
        )

    def _grow(self) -> None:
        cap = 2 * (self.capacity + 1)
        self.hs = np.concatenate([self.hs, np.zeros(cap - self.hs.size, dtype=np.int16)])
        self.ho = np.concatenate([self.ho, np.zeros(cap - self.ho.size, dtype=np.int16)])
        self.capacity = cap - 1


class SicilianBot(Bot):
    """The ensemble meta bot; see the module docstring."""

    name = "sicilian"
    games = ("rps",)

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.matches = 0
        self.state: SicilianState | None = None

    def on_match_start(self, match: MatchInfo) -> None:
        self.state = None

    def warm_up(self) -> None:
        """Load the kernels on a scratch ensemble (numba's cache: some 0.4 s the first time in a process)."""
        state = SicilianState(3, 10, 0)
        for opp in (-1, 0, 1, 2):
            state.step(opp)

    def act(self, turn: Turn) -> int:
        obs = turn.observation
        if self.state is None or obs.round == 0:
            self.matches += 1
            self.state = SicilianState(int(obs.signs), int(obs.rounds), self.seed * 1_000_003 + self.matches)
            return self.state.step(-1)
        opp = int(obs.last_round[1 - turn.seat]) if obs.last_round else -1
        return self.state.step(opp)


@hosted(
    "sicilian",
    ("rps",),
    "Arena's ensemble: thesis predictors, mind readers, history matches, second-guessing",
)
def _sicilian(seed: int) -> Bot:
    return SicilianBot(seed)
