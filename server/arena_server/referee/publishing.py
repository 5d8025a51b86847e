"""What the seats and spectators learn: public moves, per-seat Updates, never more than a seat may see.

Each seat gets only its own observation (``state.observation(seat)``); public
moves it has not seen wait in its pending list and ride in its next Turn, or
in an Update when it is not about to act. Listeners (spectators) get the same
public moves as they happen.
"""

from __future__ import annotations

from collections.abc import Sequence

from arena_client.types import (
    PublicMove,
    Update,
)
from arena_server.referee.state import RefereeState


class Publishing(RefereeState):
    """The part of the referee that tells seats and spectators what became public."""

    __slots__ = ()

    @property
    def pending_any(self) -> bool:
        return any(self.pending)

    def _public_move(self, seat: int, action: int) -> PublicMove:
        """The move as everyone sees it, labelled by the game (labels depend on the game, not the state)."""
        key = (seat, action)
        move = self.public_moves.get(key)
        if move is None:
            move = self.public_moves[key] = PublicMove(seat, action, self.game.action_to_string(seat, action))
        return move

    def _publish(self, moves: Sequence[PublicMove]) -> None:
        """Queue ``moves`` for the seats that track moves and tell the spectators (who must not change them)."""
        for seat_index, tracked in enumerate(self.track):
            if tracked:
                self.pending[seat_index].extend(moves)
        for listener in self.listeners:
            listener("moves", (moves, self.state))

    def _flush_updates(self, acting: tuple[int, ...]) -> None:
        """Send Update to seats with unseen moves that are not about to get a Turn."""
        for seat_index, pending in enumerate(self.pending):
            if pending and seat_index not in acting:
                update = Update(self.record.match_id, tuple(pending), self.state.observation(seat_index))
                pending.clear()
                self.seats[seat_index].update(update)
