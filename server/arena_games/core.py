"""The rules-engine API every Arena game implements.

The shape follows OpenSpiel's state API, typed and kept small:

* ``load_game(name, **params)`` validates parameters and returns a :class:`Game`.
* ``Game.new_initial_state()`` returns a :class:`State`.
* ``State.current_player()`` is a seat (0-based), or :data:`CHANCE`,
  :data:`SIMULTANEOUS` or :data:`TERMINAL`. One referee loop covers games where
  the same player moves again (dots and boxes), simultaneous games (RPS) and
  games with dice (chance nodes).
* Actions are ints. ``Game.action_to_string`` gives the human form and
  ``Game.string_to_action`` parses it back.
* ``State.observation(seat)`` is a frozen dataclass holding what that seat may
  know and nothing else; ``observation(None)`` is the spectator's view.
* Chance is explicit: the engine lists outcomes with probabilities and the
  referee samples them with the match's seeded RNG, so an engine has no RNG of
  its own and ``State.history`` is a complete replay.

Engines are pure: no I/O, no asyncio, no randomness.
"""

from __future__ import annotations

import abc
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, overload

CHANCE: Final = -1
"""``current_player()`` value at a chance node (dice to roll)."""
SIMULTANEOUS: Final = -2
"""``current_player()`` value when every seat acts at once."""
TERMINAL: Final = -4
"""``current_player()`` value once the game is over."""

ParamValue = int | str | bool


class GameError(ValueError):
    """Base class of every error an engine raises."""


class ParameterError(GameError):
    """A game name or parameter is invalid. The message says what is allowed."""


class IllegalActionError(GameError):
    """An action is not legal in the current state. The message says why."""


@dataclass(frozen=True)
class ParamSpec:
    """A declared game parameter.

    Attributes:
        name: Parameter name, e.g. ``"signs"``.
        type: ``int``, ``str`` or ``bool``.
        default: Value used when the parameter is not given.
        description: One line for ``arena games`` and GameService.
        min: Inclusive lower bound (ints only).
        max: Inclusive upper bound (ints only).
        choices: Allowed values (strings only); empty means any.
    """

    name: str
    type: type
    default: ParamValue
    description: str
    min: int | None = None
    max: int | None = None
    choices: tuple[str, ...] = ()

    def validate(self, game: str, value: Any) -> ParamValue:
        """Return ``value`` converted to this parameter's type, or raise ParameterError.

        Strings are accepted for every type, so that command-line values
        (``signs=5``, ``spot_on=true``) need no special handling.
        """
        where = f"{game}: parameter {self.name}"
        if self.type is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in (
                "true",
                "1",
                "yes",
                "on",
                "false",
                "0",
                "no",
                "off",
            ):
                return value.lower() in ("true", "1", "yes", "on")
            raise ParameterError(f"{where}={value!r} is not a boolean; use true or false")
        if self.type is int:
            if isinstance(value, bool):
                raise ParameterError(f"{where}={value!r} is not an integer")
            if isinstance(value, str):
                try:
                    value = int(value.strip())
                except ValueError:
                    raise ParameterError(f"{where}={value!r} is not an integer") from None
            if not isinstance(value, int):
                raise ParameterError(f"{where}={value!r} is not an integer")
            if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
                raise ParameterError(f"{where}={value} is out of range; choose {self.range_text()}")
            return value
        if not isinstance(value, str):
            raise ParameterError(f"{where}={value!r} is not a string")
        if self.choices and value not in self.choices:
            raise ParameterError(f"{where}={value!r} is not one of {', '.join(self.choices)}")
        return value

    def range_text(self) -> str:
        """Human description of the allowed values, e.g. ``2..6``."""
        if self.choices:
            return " | ".join(self.choices)
        if self.type is bool:
            return "true | false"
        lo = "" if self.min is None else str(self.min)
        hi = "" if self.max is None else str(self.max)
        return f"{lo}..{hi}" if (lo or hi) else "any integer"


class Game(abc.ABC):
    """A game with fixed parameters: the factory of initial states.

    Subclasses declare ``name``, ``title``, ``rules``, ``param_specs`` and
    implement the abstract members. Parameters are validated in ``__init__``;
    cross-parameter checks go in :meth:`_check_params`.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    rules: ClassVar[str]
    param_specs: ClassVar[tuple[ParamSpec, ...]]
    min_players: ClassVar[int] = 2
    max_players: ClassVar[int] = 2
    public_observation: ClassVar[bool] = False
    """True when every seat's observation equals the spectator's (no hidden
    information at all, e.g. RPS between rounds): the referee then builds it once."""
    chance_is_public: ClassVar[bool] = False
    """Whether chance outcomes may be shown to every seat as they happen.
    False where chance deals private information (dice)."""

    def __init__(self, **params: Any) -> None:
        specs = {spec.name: spec for spec in self.param_specs}
        unknown = sorted(set(params) - set(specs))
        if unknown:
            known = ", ".join(specs) or "none"
            raise ParameterError(f"{self.name}: unknown parameter {', '.join(unknown)}; parameters are: {known}")
        values: dict[str, ParamValue] = {}
        for spec in self.param_specs:
            values[spec.name] = spec.validate(self.name, params[spec.name]) if spec.name in params else spec.default
        self.params: Mapping[str, ParamValue] = values
        self._check_params()

    def _check_params(self) -> None:  # noqa: B027 - optional hook
        """Raise ParameterError for invalid parameter combinations."""

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{self.name}({args})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Game) and self.name == other.name and dict(self.params) == dict(other.params)

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.params.items()))))

    @property
    @abc.abstractmethod
    def num_players(self) -> int:
        """Number of seats."""

    @property
    @abc.abstractmethod
    def num_distinct_actions(self) -> int:
        """Actions are ints in ``range(num_distinct_actions)``."""

    @property
    @abc.abstractmethod
    def max_game_length(self) -> int:
        """Upper bound on ``len(state.history)`` of any finished game."""

    @property
    @abc.abstractmethod
    def min_utility(self) -> float:
        """Lowest possible return of one seat (used for forfeits)."""

    @property
    @abc.abstractmethod
    def max_utility(self) -> float:
        """Highest possible return of one seat (used for forfeits)."""

    @abc.abstractmethod
    def new_initial_state(self) -> State:
        """The state before the first move."""

    @abc.abstractmethod
    def action_to_string(self, player: int, action: int) -> str:
        """A readable label for ``action`` taken by ``player`` (or CHANCE)."""

    def explain_illegal(self, observation: Any, player: int, action: int) -> str | None:
        """Which rule ``action`` breaks, judged from ``player``'s observation alone (None: no more to say).

        For clients that hold an observation but no State (``arena play``); games with rules worth
        naming (Liar's Dice's raise rule) override it.
        """
        return None

    @abc.abstractmethod
    def string_to_action(self, state: State, text: str) -> int:
        """Parse a person's notation for the current player's action in ``state``.

        Raises:
            IllegalActionError: ``text`` is not understood or not legal; the
                message says what was wrong and what is accepted.
        """

    def forfeit_returns(self, offender: int) -> tuple[float, ...]:
        """Returns when ``offender`` forfeits: the worst for it, the rest shared."""
        n = self.num_players
        lo = self.min_utility
        others = -lo / (n - 1)
        return tuple(lo if seat == offender else others for seat in range(n))

    def outcome_scores(self, returns: Sequence[float]) -> tuple[float, ...]:
        """Map returns to match scores for ratings: 1 win, 0.5 draw, 0 loss (two seats).

        With more seats: 1 for the best return, 0 for the rest, shared on ties.
        """
        best = max(returns)
        winners = [r == best for r in returns]
        count = sum(winners)
        if count == len(returns):
            return tuple(1.0 / count for _ in returns)
        return tuple(1.0 / count if w else 0.0 for w in winners)

    def state_from_history(self, history: Iterable[tuple[int, int]]) -> State:
        """Replay ``(player, action)`` pairs from the initial state.

        At a simultaneous node the next ``num_players`` entries (seats 0..n-1)
        are applied together.
        """
        state = self.new_initial_state()
        items = list(history)
        i = 0
        while i < len(items):
            if state.current_player() == SIMULTANEOUS:
                n = self.num_players
                joint = items[i : i + n]
                if [p for p, _ in joint] != list(range(n)):
                    raise GameError(f"history entry {i}: a simultaneous round needs seats 0..{n - 1} in order")
                state.apply_actions([a for _, a in joint])
                i += n
            else:
                player, action = items[i]
                if player != state.current_player():
                    raise GameError(
                        f"history entry {i}: player {player} acted but {state.current_player()} was to move"
                    )
                state.apply_action(action)
                i += 1
        return state


_SEATS: Final = tuple(array("i", range(n)) for n in range(17))
"""Seats ``0 .. n-1`` as an int32 array, by ``n``: what :meth:`History.add_joint` adds for ``n`` joint actions."""


class History:
    """The ``(player, action)`` pairs applied to a state, oldest first, in two int32 arrays.

    It reads like the list of tuples it replaces: ``len``, iteration and
    indexing give pairs, a slice gives a list of pairs, and it compares equal
    to a list or tuple of the same pairs. A list of tuples took 64 bytes an
    action: 129 MB after a million RPS rounds, 1.3 GB for the longest match
    ``rounds`` allows; this takes 8 bytes an action.
    """

    __slots__ = ("_actions", "_players")

    def __init__(self, pairs: Iterable[tuple[int, int]] = ()) -> None:
        self._players = array("i")
        self._actions = array("i")
        self.extend(pairs)

    def append(self, pair: tuple[int, int]) -> None:
        player, action = pair
        self._players.append(player)
        self._actions.append(action)

    def extend(self, pairs: Iterable[tuple[int, int]]) -> None:
        if type(pairs) is History:
            self._players.extend(pairs._players)
            self._actions.extend(pairs._actions)
            return
        players = self._players
        actions = self._actions
        for player, action in pairs:
            players.append(player)
            actions.append(action)

    def add_joint(self, actions: Sequence[int]) -> None:
        """A simultaneous decision: seat ``i`` took ``actions[i]``.

        Every RPS round of every match comes here, so the seats come from an
        array kept for each count (an array extends another of its type by a
        copy; a ``range`` converts each int) and a list of actions goes in
        through ``fromlist``, which adds all or nothing (an action that is not
        an int32 leaves the history as it was). 82 ns for two seats where two
        ``extend`` calls took 299 ns.
        """
        n = len(actions)
        self._actions.fromlist(actions if type(actions) is list else list(actions))
        self._players.extend(_SEATS[n] if n < len(_SEATS) else range(n))

    def copy(self) -> History:
        copy = History.__new__(History)  # (not History(): its two empty arrays would be thrown away)
        copy._players = self._players[:]
        copy._actions = self._actions[:]
        return copy

    def __len__(self) -> int:
        return len(self._actions)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self._players, self._actions, strict=True)

    @overload
    def __getitem__(self, index: int) -> tuple[int, int]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, int]]: ...

    def __getitem__(self, index: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(index, slice):
            return list(zip(self._players[index], self._actions[index], strict=True))
        return self._players[index], self._actions[index]

    def __eq__(self, other: object) -> bool:
        if type(other) is History:
            return self._actions == other._actions and self._players == other._players
        if isinstance(other, list | tuple):
            return len(other) == len(self) and list(self) == list(other)  # (pairs as tuples, as the list held them)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (mutable, as the list it replaces)

    def __repr__(self) -> str:
        return f"History({list(self)!r})"


class State(abc.ABC):
    """One position of a game. Mutable: ``apply_action`` changes it in place.

    ``history`` lists every ``(player, action)`` applied, chance outcomes
    included (player :data:`CHANCE`), in order; simultaneous rounds appear as
    one entry per seat, seats in order (a :class:`History`, which reads like a
    list of those pairs). Two states are equal when they belong
    to equal games and have the same history.
    """

    __slots__ = ("game", "history")

    def __init__(self, game: Game) -> None:
        self.game = game
        self.history = History()

    @abc.abstractmethod
    def current_player(self) -> int:
        """A seat, or CHANCE, SIMULTANEOUS or TERMINAL."""

    def is_terminal(self) -> bool:
        return self.current_player() == TERMINAL

    def is_chance_node(self) -> bool:
        return self.current_player() == CHANCE

    @abc.abstractmethod
    def legal_actions(self, player: int | None = None) -> Sequence[int]:
        """Sorted legal actions of ``player`` (default: the current player).

        Empty at terminal states and for seats not to act.
        """

    def is_legal(self, player: int, action: int) -> bool:
        """Whether ``player`` may take ``action`` now (engines may make this faster)."""
        return action in self.legal_actions(player)

    def chance_outcomes(self) -> Sequence[tuple[int, float]]:
        """At a chance node: ``(action, probability)`` pairs summing to 1."""
        raise GameError(f"{self.game.name}: not a chance node")

    def apply_action(self, action: int) -> None:
        """Apply the current player's (or chance's) action.

        Raises:
            IllegalActionError: the action is not legal here.
        """
        player = self.current_player()
        if player == SIMULTANEOUS:
            raise GameError(f"{self.game.name}: simultaneous node; use apply_actions")
        if player == TERMINAL:
            raise IllegalActionError(f"{self.game.name}: the game is over; no action is legal")
        if player == CHANCE:
            if action not in {a for a, _ in self.chance_outcomes()}:
                raise IllegalActionError(f"{self.game.name}: {action} is not a chance outcome here")
        elif not self.is_legal(player, action):
            raise IllegalActionError(self.illegal_reason(player, action))
        self._apply(player, action)
        self.history.append((player, action))

    def apply_actions(self, actions: Sequence[int]) -> None:
        """Apply one action per seat at a simultaneous node."""
        if self.current_player() != SIMULTANEOUS:
            raise GameError(f"{self.game.name}: not a simultaneous node; use apply_action")
        if len(actions) != self.game.num_players:
            raise GameError(f"{self.game.name}: need {self.game.num_players} actions, got {len(actions)}")
        for seat, action in enumerate(actions):
            if not self.is_legal(seat, action):
                raise IllegalActionError(self.illegal_reason(seat, action))
        self._apply_joint(actions)
        self.history.add_joint(actions)

    def apply_actions_unchecked(self, actions: Sequence[int]) -> None:
        """:meth:`apply_actions` for callers that already checked every seat's action (the referee)."""
        self._apply_joint(actions)
        self.history.add_joint(actions)

    def apply_action_unchecked(self, player: int, action: int) -> None:
        """:meth:`apply_action` for callers that already checked legality (the referee)."""
        self._apply(player, action)
        self.history.append((player, action))

    def _apply(self, player: int, action: int) -> None:
        """Change the state for a legal sequential or chance action."""
        raise GameError(f"{self.game.name}: sequential actions are not supported")

    def _apply_joint(self, actions: Sequence[int]) -> None:
        """Change the state for legal simultaneous actions."""
        raise GameError(f"{self.game.name}: simultaneous actions are not supported")

    def illegal_reason(self, player: int, action: int) -> str:
        """One sentence saying why ``action`` is illegal for ``player`` now."""
        legal = list(self.legal_actions(player))
        return f"{action} is not a legal action for seat {player} (legal: {describe_actions(legal)})"

    @abc.abstractmethod
    def returns(self) -> tuple[float, ...]:
        """Score of each seat; all zero before the end. Sums to zero."""

    @abc.abstractmethod
    def observation(self, seat: int | None) -> Any:
        """What ``seat`` may know now (``None``: a spectator). A frozen dataclass."""

    def clone(self) -> State:
        """An independent copy."""
        copy = self.game.new_initial_state()
        copy._copy_from(self)
        return copy

    @abc.abstractmethod
    def _copy_from(self, other: State) -> None:
        """Make ``self`` (a fresh initial state) equal to ``other``."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, State) and self.game == other.game and self.history == other.history

    def __hash__(self) -> int:
        return hash((self.game, tuple(self.history)))

    def __repr__(self) -> str:
        return f"<{self.game!r} after {len(self.history)} actions>"


def describe_actions(actions: Sequence[int]) -> str:
    """Compact text for a sorted action list: ``0..2`` or ``0, 3, 7`` (truncated)."""
    if not actions:
        return "none"
    if list(actions) == list(range(actions[0], actions[-1] + 1)) and len(actions) > 2:
        return f"{actions[0]}..{actions[-1]}"
    shown = ", ".join(str(a) for a in actions[:12])
    return shown + (f", ... ({len(actions)} in all)" if len(actions) > 12 else "")


@dataclass
class _Registry:
    games: dict[str, type[Game]] = field(default_factory=dict)


_REGISTRY = _Registry()


def register_game(cls: type[Game]) -> type[Game]:
    """Class decorator adding a game to the registry under ``cls.name``."""
    if cls.name in _REGISTRY.games and _REGISTRY.games[cls.name] is not cls:
        raise GameError(f"game {cls.name!r} is registered twice")
    _REGISTRY.games[cls.name] = cls
    return cls


def registered_games() -> dict[str, type[Game]]:
    """Every registered game class by name, in registration order."""
    return dict(_REGISTRY.games)


def load_game(name: str, **params: Any) -> Game:
    """Create the game ``name`` with validated parameters.

    Raises:
        ParameterError: unknown game or invalid parameter; the message lists
            what is available.
    """
    cls = _REGISTRY.games.get(name)
    if cls is None:
        raise ParameterError(f"unknown game {name!r}; games are: {', '.join(_REGISTRY.games)}")
    return cls(**params)
