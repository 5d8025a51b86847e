"""Liar's Dice (game ``liars_dice``): the thesis game and the common variants in one engine.

Every player rolls their dice in secret. Players then bid in turn, seat by
seat, on how many dice on the whole table show a face ("3x5": at least three
fives, counting every player's dice). Each bid must raise the previous one,
or the player calls "liar" (a challenge). The dice are then revealed: if at
least ``quantity`` dice match, the challenger loses, otherwise the bidder
loses. The loser loses one die.

Parameters (defaults = the game of ``specs/liars-dice-thesis.md``):

* ``players`` 2..6, ``dice`` per player (5), ``faces`` (6).
* ``bidding``: ``thesis`` ("variant 3": a raise may lower neither the
  quantity nor the face and must change at least one) or ``standard`` (a
  higher quantity with any face, or the same quantity and a higher face; the
  order of the action numbers).
* ``wild``: ``none`` (the thesis), ``ones`` (a 1 counts as any face) or
  ``highest`` (the highest face counts as any face). A bid on the wild face
  itself counts only that face.
* ``rounds``: ``elimination`` (the thesis: the loser loses one die and opens
  the next round, every die is re-rolled, a player with no dice is out, the
  last player with dice wins) or ``single`` (the game ends at the first
  challenge). With players=2, dice=1, faces=6, wild=highest, bidding=standard,
  rounds=single this is exactly the small Liar's Dice of the research
  literature (OpenSpiel's ``liars_dice``), action numbers included.
* ``spot_on``: allow the exact call, off by default.

Actions, with N = players * dice (the starting number of dice), F = faces:

* bid q x f (1 <= q <= N, 1 <= f <= F): ``(q-1)*F + (f-1)``
* liar: ``N*F``
* spot on (only when enabled): ``N*F + 1``

A bid's quantity may not exceed the number of dice still on the table.
Dice rolls are chance nodes, one per die (outcome ``face - 1``, uniform),
rolling seat 0's dice first, then seat 1's, and so on (seats with no dice are
skipped); the referee samples them, the engine holds no RNG.

Returns are zero-sum in [-1, 1]. With ``rounds=elimination`` they are by
placement: the winner +1, the first player out -1, linear in between
(``(n-1-2p)/(n-1)`` for place p = 0..n-1), so two players get +1 and -1.
With ``rounds=single`` the loser of the challenge gets -1 and every other
seat ``1/(n-1)``.

Choices where the thesis is ambiguous or silent (its sections 1.1 and 5):

* Raise rule: the componentwise "variant 3" is the thesis rule (the
  conflicting sentence of its section 4.1.2 is the ``standard`` rule). Raising
  both quantity and face at once is allowed.
* The first round is opened by seat 0 (the thesis pseudocode; the prose says
  a random player; seats are assigned by the scheduler anyway). Later rounds
  are opened by the loser of the previous round, or, when the loser is out,
  by the next seat after it that still has dice.
* Play goes to the next seat (increasing seat number, wrapping) that still
  has dice.
* A challenge tie (exactly ``quantity`` dice match) goes to the bidder.
* Spot on: only the player to move may call it, only after a bid. If exactly
  ``quantity`` dice match, the bidder loses one die, otherwise the caller
  does. (The Perudo rule of winning a die back is not used, so that every
  round costs exactly one die.)
* Wild ones do not change the bidding (no halving rule when bidding on ones).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from arena_games.core import (
    CHANCE,
    TERMINAL,
    Game,
    IllegalActionError,
    ParamSpec,
    State,
    register_game,
)

BIDDING_RULES = ("thesis", "standard")
WILD_RULES = ("none", "ones", "highest")
ROUND_RULES = ("elimination", "single")

_BID_RE = re.compile(r"^\s*(\d+)\s*(?:[x×*]\s*|\s+)(\d+)\s*$", re.IGNORECASE)
_LIAR_WORDS = ("liar", "challenge", "dudo", "doubt")
_SPOT_WORDS = ("spot on", "spoton", "spot-on", "spot", "exact", "calza")


@dataclass(frozen=True, slots=True)
class LiarsDiceBid:
    """A bid: at least ``quantity`` dice across the table show ``face``.

    Attributes:
        seat: The seat that made the bid.
        quantity: How many dice.
        face: Which face (1..faces).
    """

    seat: int
    quantity: int
    face: int


@dataclass(frozen=True, slots=True)
class LiarsDiceHand:
    """A seat's dice (sorted), used where dice are revealed."""

    dice: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LiarsDiceRoundResult:
    """The public outcome of a finished round: every hand was revealed.

    Attributes:
        hands: Every seat's dice in that round, by seat (empty for seats already out).
        bid: The bid that was challenged (or called exactly).
        challenger: The seat that called "liar" (or "spot on").
        spot_on: True when the round ended with an exact call.
        actual: How many dice actually matched the bid (counting wilds).
        dice_lost: Dice lost, by seat (one seat loses one die).
    """

    hands: tuple[LiarsDiceHand, ...]
    bid: LiarsDiceBid
    challenger: int
    spot_on: bool
    actual: int
    dice_lost: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LiarsDiceObservation:
    """What one seat may know: its own dice, never the others' until they are revealed.

    Attributes:
        players: Number of seats.
        faces: Faces per die.
        dice_counts: Dice each seat still has, by seat (0 = out).
        my_dice: This seat's own dice this round, sorted. Empty for a spectator,
            for a seat that is out, and while the dice are being rolled.
        bids: Bids of the current round, oldest first.
        past_rounds: Results of every earlier round, oldest first.
        to_move: The seat to move; -1 while dice are rolled or when the game is over.
        round: 0-based round number.
    """

    players: int
    faces: int
    dice_counts: tuple[int, ...]
    my_dice: tuple[int, ...]
    bids: tuple[LiarsDiceBid, ...]
    past_rounds: tuple[LiarsDiceRoundResult, ...]
    to_move: int
    round: int


@register_game
class LiarsDiceGame(Game):
    """Liar's Dice with configurable bidding, wilds, rounds and the exact call."""

    name = "liars_dice"
    title = "Liar's Dice"
    rules = (
        "Each player rolls their dice in secret. In turn, players bid that at least q dice on the whole "
        "table show face f (q x f), each bid raising the last, or call 'liar' on the last bid. Then all "
        "dice are shown: if fewer than q dice match (wilds count as any face) the bidder loses a die, "
        "otherwise the challenger does. bidding=thesis: a raise may lower neither quantity nor face; "
        "bidding=standard: a higher quantity, or the same quantity and a higher face. rounds=elimination:"
        " the loser opens the next round and a player with no dice is out; the last player with dice "
        "wins. rounds=single: the first challenge ends the game. spot_on=true adds the exact call: if "
        "exactly q dice match the bidder loses a die, otherwise the caller does."
    )
    param_specs = (
        ParamSpec("players", int, 2, "number of players", min=2, max=6),
        ParamSpec("dice", int, 5, "dice per player at the start", min=1, max=10),
        ParamSpec("faces", int, 6, "faces per die", min=2, max=12),
        ParamSpec("bidding", str, "thesis", "raise rule", choices=BIDDING_RULES),
        ParamSpec("wild", str, "none", "which face counts as any face", choices=WILD_RULES),
        ParamSpec("rounds", str, "elimination", "play until one player has dice, or one round", choices=ROUND_RULES),
        ParamSpec("spot_on", bool, False, "allow the exact ('spot on') call"),
    )
    min_players = 2
    max_players = 6

    def _check_params(self) -> None:
        self.players = int(self.params["players"])
        self.dice = int(self.params["dice"])
        self.faces = int(self.params["faces"])
        self.bidding = str(self.params["bidding"])
        self.wild = str(self.params["wild"])
        self.single_round = self.params["rounds"] == "single"
        self.spot_on = bool(self.params["spot_on"])
        self.thesis_bidding = self.bidding == "thesis"
        self.total_dice = self.players * self.dice
        self.liar_action = self.total_dice * self.faces
        self.spot_on_action = self.liar_action + 1 if self.spot_on else -1
        self.wild_face = {"none": 0, "ones": 1, "highest": self.faces}[self.wild]
        probability = 1.0 / self.faces
        self.roll_outcomes: tuple[tuple[int, float], ...] = tuple((i, probability) for i in range(self.faces))

    @property
    def num_players(self) -> int:
        return self.players

    @property
    def num_distinct_actions(self) -> int:
        return self.liar_action + (2 if self.spot_on else 1)

    @property
    def max_game_length(self) -> int:
        # Per round: one chance entry per die, at most one bid per (quantity, face) since bids strictly
        # increase in action number, and one call. Each round removes one die.
        last_round = 1 if self.single_round else self.total_dice - 1
        return sum((dice + dice * self.faces + 1) for dice in range(self.total_dice, self.total_dice - last_round, -1))

    @property
    def min_utility(self) -> float:
        return -1.0

    @property
    def max_utility(self) -> float:
        return 1.0

    def new_initial_state(self) -> LiarsDiceState:
        return LiarsDiceState(self)

    # -- encoding ---------------------------------------------------------------------------------

    def bid_action(self, quantity: int, face: int) -> int:
        """The action number of the bid ``quantity x face``."""
        return (quantity - 1) * self.faces + (face - 1)

    def bid_refusal(self, active_dice: int, last: int, action: int) -> str:
        """Which rule ``action`` breaks with ``active_dice`` on the table and ``last`` the current bid (-1: none).

        The one text for every place a move is refused: the referee's reason, check-bot, ``arena play``.
        """
        label = self.action_to_string(0, action)
        if last < 0 and (action == self.liar_action or (self.spot_on and action == self.spot_on_action)):
            return f"'{label}' needs a bid to call; the round's opener must bid"
        if not 0 <= action < self.liar_action:
            top = self.spot_on_action if self.spot_on else self.liar_action
            return f"{action} is not an action of this game; actions are 0..{top}"
        if action // self.faces >= active_dice:
            return f"bid {label} asks for more dice than the {active_dice} left on the table"
        if last < 0:
            return f"bid {label} is legal here"
        last_q, last_f = self.decode_bid(last)
        current = f"{last_q}x{last_f}"
        if action == last:
            return f"{label} repeats the current bid; raise it or call liar"
        if self.thesis_bidding:
            return (
                f"{label} does not raise the current bid {current}: under thesis bidding neither the "
                "quantity nor the face may go down"
            )
        return (
            f"{label} does not raise the current bid {current}: under standard bidding bid more dice, or "
            f"{last_q} dice of a face above {last_f}"
        )

    def explain_illegal(self, observation: Any, player: int, action: int) -> str | None:
        """Why ``action`` is refused, from what ``player`` can see (for clients that hold no State)."""
        if not isinstance(observation, LiarsDiceObservation) or observation.to_move != player:
            return None
        last = self.bid_action(observation.bids[-1].quantity, observation.bids[-1].face) if observation.bids else -1
        return self.bid_refusal(sum(observation.dice_counts), last, action)

    def decode_bid(self, action: int) -> tuple[int, int]:
        """``(quantity, face)`` of a bid action."""
        q, f = divmod(action, self.faces)
        return q + 1, f + 1

    def matches(self, dice: Sequence[int], face: int) -> int:
        """How many of ``dice`` count for a bid on ``face`` (wilds included)."""
        wild = self.wild_face
        if wild and face != wild:
            return sum(1 for d in dice if d in (face, wild))
        return sum(1 for d in dice if d == face)

    def action_to_string(self, player: int, action: int) -> str:
        if player == CHANCE:
            return f"roll {action + 1}" if 0 <= action < self.faces else f"invalid({action})"
        if action == self.liar_action:
            return "liar"
        if self.spot_on and action == self.spot_on_action:
            return "spot on"
        if not 0 <= action < self.liar_action:
            return f"invalid({action})"
        q, f = self.decode_bid(action)
        return f"{q}x{f}"

    def string_to_action(self, state: State, text: str) -> int:
        word = " ".join(text.strip().lower().split())
        if word in _LIAR_WORDS:
            action = self.liar_action
        elif word in _SPOT_WORDS:
            if not self.spot_on:
                raise IllegalActionError(f"{text!r}: the exact call is not enabled in this game (spot_on=false)")
            action = self.spot_on_action
        else:
            match = _BID_RE.match(word)
            if match is None:
                extra = ", 'spot on'" if self.spot_on else ""
                raise IllegalActionError(
                    f"{text!r} is not a bid or a call; type a bid as quantity x face (e.g. 3x5), or 'liar'{extra}"
                )
            q, f = int(match.group(1)), int(match.group(2))
            if not 1 <= f <= self.faces:
                raise IllegalActionError(f"{text!r}: face {f} does not exist; faces are 1..{self.faces}")
            if not 1 <= q <= self.total_dice:
                raise IllegalActionError(f"{text!r}: quantity {q} is impossible; quantities are 1..{self.total_dice}")
            action = self.bid_action(q, f)
        player = state.current_player()
        if not state.is_legal(player, action):
            raise IllegalActionError(state.illegal_reason(player, action))
        return action


class LiarsDiceState(State):
    """A game in progress: dice per seat, this round's hands and bids, and past rounds."""

    __slots__ = (
        "_active_dice",
        "_bids",
        "_counts",
        "_hands",
        "_last",
        "_opener",
        "_out",
        "_past",
        "_returns",
        "_roll_seat",
        "_round",
        "_to_move",
    )

    game: LiarsDiceGame

    def __init__(self, game: LiarsDiceGame) -> None:
        super().__init__(game)
        n = game.players
        self._counts = [game.dice] * n
        self._active_dice = game.total_dice
        self._hands: list[list[int]] = [[] for _ in range(n)]
        self._bids: list[LiarsDiceBid] = []
        self._last = -1
        self._past: list[LiarsDiceRoundResult] = []
        self._out: list[int] = []
        self._round = 0
        self._opener = 0
        self._roll_seat = 0
        self._to_move = CHANCE
        self._returns: tuple[float, ...] = (0.0,) * n

    # -- queries ----------------------------------------------------------------------------------

    def current_player(self) -> int:
        return self._to_move

    def chance_outcomes(self) -> Sequence[tuple[int, float]]:
        if self._to_move != CHANCE:
            return super().chance_outcomes()
        return self.game.roll_outcomes

    @property
    def dice_counts(self) -> tuple[int, ...]:
        """Dice each seat still has."""
        return tuple(self._counts)

    def hand(self, seat: int) -> tuple[int, ...]:
        """Seat ``seat``'s dice this round as rolled so far (private: not for bots)."""
        return tuple(self._hands[seat])

    def legal_actions(self, player: int | None = None) -> Sequence[int]:
        to_move = self._to_move
        if to_move < 0 or (player is not None and player != to_move):
            return ()
        game = self.game
        faces = game.faces
        top = self._active_dice * faces
        last = self._last
        if last < 0:
            return tuple(range(top))
        if game.thesis_bidding:
            q, f = divmod(last, faces)
            actions = [a for base in range(q * faces, top, faces) for a in range(base + f, base + faces)]
            del actions[0]  # the current bid itself
        else:
            actions = list(range(last + 1, top))
        actions.append(game.liar_action)
        if game.spot_on:
            actions.append(game.spot_on_action)
        return actions

    def is_legal(self, player: int, action: int) -> bool:
        if player != self._to_move or player < 0:
            return False
        game = self.game
        last = self._last
        if action == game.liar_action or (action == game.spot_on_action and game.spot_on):
            return last >= 0
        if not 0 <= action < self._active_dice * game.faces:
            return False
        if last < 0:
            return True
        if game.thesis_bidding:
            return (
                action != last
                and action // game.faces >= last // game.faces
                and action % game.faces >= last % game.faces
            )
        return action > last

    def illegal_reason(self, player: int, action: int) -> str:
        game = self.game
        if self._to_move == TERMINAL:
            return "the game is over; no move is legal"
        if self._to_move == CHANCE:
            return "the dice are being rolled; no player may act"
        if player != self._to_move:
            return f"it is seat {self._to_move}'s turn, not seat {player}'s"
        return game.bid_refusal(self._active_dice, self._last, action)

    # -- moves ------------------------------------------------------------------------------------

    def _apply(self, player: int, action: int) -> None:
        game = self.game
        if player == CHANCE:
            self._roll(action)
        elif action == game.liar_action:
            self._resolve(player, exact=False)
        elif action == game.spot_on_action and game.spot_on:
            self._resolve(player, exact=True)
        else:
            q, f = game.decode_bid(action)
            self._bids.append(LiarsDiceBid(player, q, f))
            self._last = action
            self._to_move = self._next_seat(player)

    def _roll(self, action: int) -> None:
        seat = self._roll_seat
        hand = self._hands[seat]
        hand.append(action + 1)
        if len(hand) < self._counts[seat]:
            return
        counts = self._counts
        n = self.game.players
        seat += 1
        while seat < n and counts[seat] == 0:
            seat += 1
        if seat < n:
            self._roll_seat = seat
        else:
            self._to_move = self._opener

    def _next_seat(self, seat: int) -> int:
        counts = self._counts
        n = self.game.players
        seat = (seat + 1) % n
        while counts[seat] == 0:
            seat = (seat + 1) % n
        return seat

    def _resolve(self, caller: int, exact: bool) -> None:
        game = self.game
        bid = self._bids[-1]
        actual = sum(game.matches(hand, bid.face) for hand in self._hands)
        if exact:
            loser = bid.seat if actual == bid.quantity else caller
        else:
            loser = caller if actual >= bid.quantity else bid.seat
        n = game.players
        lost = [0] * n
        lost[loser] = 1
        self._past.append(
            LiarsDiceRoundResult(
                tuple(LiarsDiceHand(tuple(sorted(hand))) for hand in self._hands),
                bid,
                caller,
                exact,
                actual,
                tuple(lost),
            )
        )
        counts = self._counts
        counts[loser] -= 1
        self._active_dice -= 1
        if counts[loser] == 0:
            self._out.append(loser)
        self._hands = [[] for _ in range(n)]
        self._bids = []
        self._last = -1
        if game.single_round:
            share = 1.0 / (n - 1)
            self._returns = tuple(-1.0 if seat == loser else share for seat in range(n))
            self._to_move = TERMINAL
            return
        if len(self._out) == n - 1:
            winner = next(seat for seat in range(n) if counts[seat] > 0)
            places = [winner, *reversed(self._out)]
            returns = [0.0] * n
            for place, seat in enumerate(places):
                returns[seat] = (n - 1 - 2 * place) / (n - 1)
            self._returns = tuple(returns)
            self._to_move = TERMINAL
            return
        self._round += 1
        self._opener = loser if counts[loser] > 0 else self._next_seat(loser)
        self._roll_seat = next(seat for seat in range(n) if counts[seat] > 0)
        self._to_move = CHANCE

    # -- results and views ------------------------------------------------------------------------

    def returns(self) -> tuple[float, ...]:
        return self._returns

    def observation(self, seat: int | None) -> LiarsDiceObservation:
        game = self.game
        to_move = self._to_move
        my_dice: tuple[int, ...] = ()
        if seat is not None and to_move >= 0:
            my_dice = tuple(sorted(self._hands[seat]))
        return LiarsDiceObservation(
            game.players,
            game.faces,
            tuple(self._counts),
            my_dice,
            tuple(self._bids),
            tuple(self._past),
            to_move if to_move >= 0 else -1,
            self._round,
        )

    def _copy_from(self, other: State) -> None:
        assert isinstance(other, LiarsDiceState)
        self._counts = list(other._counts)
        self._active_dice = other._active_dice
        self._hands = [list(hand) for hand in other._hands]
        self._bids = list(other._bids)
        self._last = other._last
        self._past = list(other._past)
        self._out = list(other._out)
        self._round = other._round
        self._opener = other._opener
        self._roll_seat = other._roll_seat
        self._to_move = other._to_move
        self._returns = other._returns
        self.history = other.history.copy()
