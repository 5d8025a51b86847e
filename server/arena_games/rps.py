"""Rock-paper-scissors with any odd number of signs (game ``rps``).

``signs=3`` is the classic game; ``signs=5`` is rock-paper-scissors-lizard-Spock
with the beats table of the RPSLS thesis (``specs/rpsls-thesis.md`` §1.2,
actions in its order r, p, s, L, S); any other odd ``signs=n`` is the balanced
generalisation where sign i beats sign j when (i - j) mod n is odd, so every
sign beats exactly (n-1)/2 others.

A match is ``rounds`` simultaneous rounds. Returns are the score difference
(rounds won minus rounds lost). ``draw_band`` only affects how the match is
classified for ratings: a difference within the band is a draw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from arena_games.core import (
    SIMULTANEOUS,
    TERMINAL,
    Game,
    IllegalActionError,
    ParameterError,
    ParamSpec,
    State,
    register_game,
)

RPS3_NAMES = ("rock", "paper", "scissors")
RPSLS_NAMES = ("rock", "paper", "scissors", "lizard", "spock")

# Thesis table (winner -> losers), actions r=0, p=1, s=2, L=3, S=4.
_RPSLS_BEATS = {
    0: (2, 3),  # rock beats scissors, lizard
    1: (0, 4),  # paper beats rock, Spock
    2: (1, 3),  # scissors beat paper, lizard
    3: (1, 4),  # lizard beats paper, Spock
    4: (2, 0),  # Spock beats scissors, rock
}


@lru_cache(maxsize=64)
def payoff_table(signs: int) -> tuple[tuple[int, ...], ...]:
    """``table[a][b]`` is +1 if sign a beats sign b, -1 if it loses, 0 if equal."""
    table = [[0] * signs for _ in range(signs)]
    for a in range(signs):
        for b in range(signs):
            if a == b:
                continue
            wins = b in _RPSLS_BEATS[a] if signs == 5 else (a - b) % signs % 2 == 1
            table[a][b] = 1 if wins else -1
    return tuple(tuple(row) for row in table)


def beats(signs: int, a: int, b: int) -> bool:
    """Whether sign ``a`` beats sign ``b``."""
    return payoff_table(signs)[a][b] == 1


def counters(signs: int, move: int) -> tuple[int, ...]:
    """The signs that beat ``move``, ascending."""
    table = payoff_table(signs)
    return tuple(a for a in range(signs) if table[a][move] == 1)


def sign_names(signs: int) -> tuple[str, ...]:
    """Readable names of the signs: rock/paper/scissors(/lizard/spock), else s0..s{n-1}."""
    if signs == 3:
        return RPS3_NAMES
    if signs == 5:
        return RPSLS_NAMES
    return tuple(f"s{i}" for i in range(signs))


@dataclass(frozen=True, slots=True)
class RpsObservation:
    """What a seat knows before a round (the same for both seats and spectators).

    Attributes:
        signs: Number of signs.
        rounds: Rounds in the match.
        round: Rounds played so far (0-based index of the next round).
        wins: Rounds won so far, by seat.
        last_round: Moves of the previous round by seat; empty before round 0.
    """

    signs: int
    rounds: int
    round: int
    wins: tuple[int, ...]
    last_round: tuple[int, ...]


_set_signs = RpsObservation.__dict__["signs"].__set__  # (the slots' member descriptors)
_set_rounds = RpsObservation.__dict__["rounds"].__set__
_set_round = RpsObservation.__dict__["round"].__set__
_set_wins = RpsObservation.__dict__["wins"].__set__
_set_last_round = RpsObservation.__dict__["last_round"].__set__


def rps_observation(
    signs: int, rounds: int, round: int, wins: tuple[int, ...], last_round: tuple[int, ...]
) -> RpsObservation:
    """``RpsObservation(signs, rounds, round, wins, last_round)``, built without the dataclass's ``__init__``.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``;
    setting the slots directly gives the same object in 0.25 us instead of 0.41 us.
    Every move of an RPS match builds one on the server (and one in the SDK of
    a bot that reads it).
    """
    observation = object.__new__(RpsObservation)
    _set_signs(observation, signs)
    _set_rounds(observation, rounds)
    _set_round(observation, round)
    _set_wins(observation, wins)
    _set_last_round(observation, last_round)
    return observation


@register_game
class RpsGame(Game):
    """Rock-paper-scissors (and RPSLS and larger odd variants) over many rounds."""

    name = "rps"
    public_observation = True
    title = "Rock-paper-scissors"
    rules = (
        "Both players throw a sign at the same time, for `rounds` rounds. With 3 signs: 0 rock, 1 paper, "
        "2 scissors; paper beats rock, scissors beat paper, rock beats scissors. With 5 signs "
        "(rock-paper-scissors-lizard-Spock): 0 rock, 1 paper, 2 scissors, 3 lizard, 4 Spock; rock beats "
        "scissors and lizard, paper beats rock and Spock, scissors beat paper and lizard, lizard beats paper "
        "and Spock, Spock beats scissors and rock. With any other odd n signs, sign i beats sign j when "
        "(i - j) mod n is odd. A round is won, lost or drawn; the match score is rounds won minus rounds "
        "lost, and a match whose score difference is within `draw_band` counts as a draw."
    )
    param_specs = (
        ParamSpec("signs", int, 3, "number of signs (odd): 3 = RPS, 5 = RPSLS", min=3, max=99),
        ParamSpec("rounds", int, 1000, "rounds in the match", min=1, max=10_000_000),
        ParamSpec("draw_band", int, 0, "a score difference within this band is a draw", min=0),
    )

    def _check_params(self) -> None:
        signs = int(self.params["signs"])
        if signs % 2 == 0:
            raise ParameterError(
                f"rps: parameter signs={signs} must be odd so every sign beats as many as it loses to; "
                "use 3 (RPS), 5 (RPSLS) or another odd number"
            )
        self.signs = signs
        self.rounds = int(self.params["rounds"])
        self.draw_band = int(self.params["draw_band"])
        self.table = payoff_table(signs)
        self.names = sign_names(signs)
        self.all_actions = tuple(range(signs))
        self.legal_moves = frozenset((seat, sign) for seat in (0, 1) for sign in range(signs))
        """Every ``(seat, sign)`` pair: one set lookup is the referee's legality check of an answer."""

    @property
    def num_players(self) -> int:
        return 2

    @property
    def num_distinct_actions(self) -> int:
        return self.signs

    @property
    def max_game_length(self) -> int:
        return 2 * self.rounds

    @property
    def min_utility(self) -> float:
        return -float(self.rounds)

    @property
    def max_utility(self) -> float:
        return float(self.rounds)

    def new_initial_state(self) -> RpsState:
        return RpsState(self)

    def action_to_string(self, player: int, action: int) -> str:
        return self.names[action] if 0 <= action < self.signs else f"invalid({action})"

    def string_to_action(self, state: State, text: str) -> int:
        word = text.strip()
        if word.isdigit() and int(word) < self.signs:
            return int(word)
        low = word.lower()
        names = self.names
        matches = [i for i, n in enumerate(names) if n == low]
        if not matches and low:
            if self.signs == 5 and low in ("l", "li", "liz"):
                return 3
            if self.signs == 5 and low in ("k", "v", "sp", "spo"):
                return 4
            matches = [i for i, n in enumerate(names) if n.startswith(low)]
            if self.signs == 5 and low == "s":
                matches = [2]
        if len(matches) == 1:
            return matches[0]
        accepted = ", ".join(f"{n} ({i})" for i, n in enumerate(names))
        raise IllegalActionError(f"{text!r} is not a sign; type one of: {accepted}")

    def outcome_scores(self, returns: Sequence[float]) -> tuple[float, ...]:
        diff = returns[0]  # seat 0's rounds won minus rounds lost
        if abs(diff) <= self.draw_band:
            return (0.5, 0.5)
        return (1.0, 0.0) if diff > 0 else (0.0, 1.0)


class RpsState(State):
    """A match in progress: the round counter and each seat's wins."""

    __slots__ = ("_last", "_round", "_wins")

    game: RpsGame

    def __init__(self, game: RpsGame) -> None:
        super().__init__(game)
        self._round = 0
        self._wins = (0, 0)  # (a tuple: the observation of every round hands it out as it is)
        self._last: tuple[int, ...] = ()

    def current_player(self) -> int:
        return SIMULTANEOUS if self._round < self.game.rounds else TERMINAL

    def legal_actions(self, player: int | None = None) -> Sequence[int]:
        if self._round < self.game.rounds and player in (0, 1):
            return self.game.all_actions
        return ()

    def is_legal(self, player: int, action: int) -> bool:
        return self._round < self.game.rounds and (player, action) in self.game.legal_moves

    def _apply_joint(self, actions: Sequence[int]) -> None:
        a, b = actions
        result = self.game.table[a][b]
        if result > 0:
            first, second = self._wins  # (each seat's wins)
            self._wins = (first + 1, second)
        elif result < 0:
            first, second = self._wins
            self._wins = (first, second + 1)
        self._last = (a, b)
        self._round += 1

    def returns(self) -> tuple[float, ...]:
        if self._round < self.game.rounds:
            return (0.0, 0.0)
        diff = float(self._wins[0] - self._wins[1])
        return (diff, -diff)

    def observation(self, seat: int | None) -> RpsObservation:
        game = self.game
        return rps_observation(game.signs, game.rounds, self._round, self._wins, self._last)

    def _copy_from(self, other: State) -> None:
        assert isinstance(other, RpsState)
        self._round = other._round
        self._wins = other._wins
        self._last = other._last
        self.history = other.history.copy()
