"""Text pictures of observations, for people: ``arena play``, ``arena watch`` and replays.

Each renderer takes the game, an observation dataclass and (optionally) the
viewer's seat, and returns plain text (no terminal control codes, so it works
in pipes and tests).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from arena_games import Game

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_MARKS = "XO"


def render(game: Game, observation: Any, seat: int | None = None, names: tuple[str, ...] = ()) -> str:
    """The picture of ``observation`` for ``game`` as seen by ``seat`` (None: a spectator)."""
    if observation is None:
        return ""
    renderer = _RENDERERS.get(game.name)
    if renderer is None:
        return repr(observation)
    return renderer(game, observation, seat, names)


class RepeatedLines:
    """Collapse runs of identical output: the first is written, the rest become one ``… ×12`` line.

    ``emit(text, key)`` writes ``text`` unless ``key`` (default: the text itself) equals the previous one; the
    count of a run is written when a different key arrives, or at :meth:`flush` (call it at the end).

    Args:
        write: where lines go (one call per line or block, without a trailing newline).
    """

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.last: str | None = None
        self.count = 0

    def emit(self, text: str, key: str | None = None) -> None:
        """Write ``text``, or count it when its key repeats the previous one."""
        key = text if key is None else key
        if key == self.last:
            self.count += 1
            return
        self.flush()
        self.last, self.count = key, 1
        self.write(text)

    def flush(self) -> None:
        """Write the count of the current run if it repeated (and start afresh)."""
        if self.count > 1:
            self.write(f"… ×{self.count}")
        self.last, self.count = None, 0


def move_label(game_name: str, action: int, label: str) -> str:
    """A move as people read it, in the notation they type in ``arena play``.

    Dots and boxes edges are shown by the number the board picture prints on them (``7``), not the engine's
    ``h1,2`` label, so the move lines and the board use one notation. Other games keep their label.
    """
    if game_name == "dots_and_boxes":
        return str(action)
    return label or str(action)


def _name(names: tuple[str, ...], seat: int, viewer: int | None) -> str:
    label = names[seat] if seat < len(names) else f"seat {seat}"
    return f"{label} (you)" if seat == viewer else label


def _rps(game: Game, obs: Any, seat: int | None, names: tuple[str, ...]) -> str:
    lines = [f"round {obs.round + 1 if obs.round < obs.rounds else obs.rounds} of {obs.rounds}"]
    wins = obs.wins
    draws = obs.round - sum(wins)
    score = ", ".join(f"{_name(names, s, seat)} {w}" for s, w in enumerate(wins))
    lines.append(f"rounds won: {score}; draws {draws}")
    if obs.last_round:
        moves = ", ".join(
            f"{_name(names, s, seat)} {game.action_to_string(s, a)}" for s, a in enumerate(obs.last_round)
        )
        lines.append(f"last round: {moves}")
    return "\n".join(lines)


def _tic_tac_toe(game: Game, obs: Any, seat: int | None, names: tuple[str, ...]) -> str:
    header = "    " + " ".join(_LETTERS[c] for c in range(obs.cols))
    lines = [header]
    for r in range(obs.rows):
        cells = []
        for c in range(obs.cols):
            owner = obs.board[r * obs.cols + c]
            cells.append("." if owner < 0 else _MARKS[owner])
        lines.append(f"{r + 1:>3} " + " ".join(cells))
    legend = ", ".join(f"{_MARKS[s]} = {_name(names, s, seat)}" for s in range(2))
    lines.append(f"({legend}; {obs.k} in a row wins)")
    return "\n".join(lines)


def _dots_and_boxes(game: Game, obs: Any, seat: int | None, names: tuple[str, ...]) -> str:
    rows, cols = obs.rows, obs.cols
    width = 2 * cols + 1
    num = len(str(len(obs.edges) - 1))
    lines = []
    for r in range(rows + 1):
        parts = []
        for c in range(cols):
            edge = r * width + c
            mark = "-" * (num + 2) if obs.edges[edge] else f" {edge:>{num}} "
            parts.append("*" + mark)
        lines.append("".join(parts) + "*")
        if r == rows:
            break
        parts = []
        for c in range(cols + 1):
            edge = r * width + cols + c
            side = "|".ljust(num) if obs.edges[edge] else str(edge).ljust(num)
            parts.append(side)
            if c < cols:
                owner = obs.box_owners[r * cols + c]
                parts.append(f" {'.' if owner < 0 else 'AB'[owner]} ")
        lines.append("".join(parts).rstrip())
    score = ", ".join(f"{'AB'[s]} {_name(names, s, seat)}: {n}" for s, n in enumerate(obs.scores))
    lines.append(f"boxes: {score}   (numbers are undrawn edges; type one to draw it)")
    return "\n".join(lines)


def _liars_dice(game: Game, obs: Any, seat: int | None, names: tuple[str, ...]) -> str:
    lines = [f"round {obs.round + 1}"]
    counts = ", ".join(f"{_name(names, s, seat)}: {n}" for s, n in enumerate(obs.dice_counts))
    lines.append(f"dice left: {counts} ({sum(obs.dice_counts)} on the table)")
    if obs.my_dice:
        lines.append("your dice: " + " ".join(str(d) for d in obs.my_dice))
    if obs.bids:
        bids = ", ".join(f"{_name(names, b.seat, seat)} {b.quantity}x{b.face}" for b in obs.bids)
        lines.append(f"bids this round: {bids}")
    else:
        lines.append("no bid yet this round")
    if obs.past_rounds:
        last = obs.past_rounds[-1]
        hands = "; ".join(
            f"{_name(names, s, seat)} {' '.join(map(str, h.dice)) or '-'}" for s, h in enumerate(last.hands)
        )
        call = "spot on" if last.spot_on else "liar"
        lost = ", ".join(_name(names, s, seat) for s, n in enumerate(last.dice_lost) if n)
        lines.append(
            f"last round: {_name(names, last.challenger, seat)} called {call} on "
            f"{last.bid.quantity}x{last.bid.face}; there were {last.actual}; dice were {hands}; lost a die: {lost}"
        )
    return "\n".join(lines)


_RENDERERS = {
    "rps": _rps,
    "tic_tac_toe": _tic_tac_toe,
    "dots_and_boxes": _dots_and_boxes,
    "liars_dice": _liars_dice,
}
