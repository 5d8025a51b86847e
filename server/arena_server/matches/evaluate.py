"""``arena.evaluate``: play matches here, in this process, with Arena's referee and clocks, and summarise them.

For bot authors in a notebook or a script: ``evaluate("rps", [my_agent, "sicilian"], episodes=20)``
plays 20 matches and returns an :class:`Evaluation` whose ``str()`` and ``_repr_html_()``
show each agent's mean score with a 95% interval and its wins, draws and losses. An agent
(:data:`AgentSpec`) may be:

* an SDK :class:`arena_client.Bot` (an instance, or a class made with no arguments), called in-process;
* the name of a hosted bot (``"sicilian"``), as ``arena serve`` would seat it;
* a Kaggle-style function ``agent(observation, configuration)`` (any callable), called
  in-process with the observation and configuration a Kaggle agent file gets from
  :mod:`arena_server.bots.runners.kaggle_runner`;
* a file in a foreign format, ``"kaggle:agent.py"`` (any format of :mod:`arena_server.bots.formats`),
  run by its runner in the sandboxed subprocess seat;
* a command line speaking Arena's protocol with JSON lines (``"python3 bot.py"``), or a
  :class:`~arena_server.seats.process.BotProgram`, also sandboxed.

Nothing is stored; every match is a fresh set of seats (the same Bot object or function
again, so state a function keeps in its globals carries over, as in kaggle-environments).
Inside a running event loop (Jupyter) the matches run on a worker thread with their own loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
import math
import os
import shlex
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from arena_bots import hosted_bots
from arena_client import Bot, MatchInfo, SeatInfo, Termination, TimeControl, Turn
from arena_games import Game, load_game
from arena_server.bots.formats import FORMATS, FormatError, local_program
from arena_server.bots.runners.kaggle_runner import Struct, configuration, kaggle_sign
from arena_server.referee.loop import play_match
from arena_server.referee.records import MatchRecord
from arena_server.referee.seat import Seat
from arena_server.referee.seeds import bot_seed, new_seed
from arena_server.seats.framing import Framing
from arena_server.seats.in_process import InProcessSeat
from arena_server.seats.process import BotProgram
from arena_server.seats.sandbox import Limits
from arena_server.seats.subprocess_seat import SubprocessSeat

AgentSpec = Bot | type[Bot] | str | BotProgram | Callable[..., Any]
"""What :func:`evaluate` accepts as an agent (see the module's documentation)."""

T = TypeVar("T")


class EvaluateError(ValueError):
    """A bad argument to :func:`evaluate`; the message says what to give instead."""


class KaggleFunctionBot(Bot):
    """A Kaggle-style ``agent(observation, configuration)`` callable as an in-process rock-paper-scissors bot."""

    games = ("rps",)

    def __init__(self, agent: Callable[..., Any], name: str) -> None:
        self.agent = agent
        self.name = name
        self.configuration = Struct()
        self.seat = 0

    def on_match_start(self, match: MatchInfo) -> None:
        if match.game != "rps":
            raise EvaluateError(f"{self.name} is a Kaggle-style function; it plays rps, not {match.game}")
        self.seat = match.seat
        self.configuration = configuration(
            int(match.params.get("signs", 3)),
            int(match.params.get("rounds", 1000)),
            int(match.params.get("draw_band", 0)),
            match.time_control.per_move.total_seconds(),
            match.time_control.overage.total_seconds(),
        )

    def act(self, turn: Turn) -> int:
        obs = turn.observation
        wins = tuple(obs.wins) or (0, 0)
        observation = Struct(
            step=obs.round,
            reward=wins[self.seat] - wins[1 - self.seat],
            remainingOverageTime=turn.overage_left.total_seconds(),
        )
        signs = int(obs.signs)
        if obs.round > 0 and len(obs.last_round) == 2:
            observation.lastOpponentAction = kaggle_sign(int(obs.last_round[1 - self.seat]), signs)
        return kaggle_sign(int(self.agent(observation, self.configuration)), signs)


@dataclass
class _Entrant:
    """One agent of the evaluation: its shown name and how to make its seat for a match."""

    name: str
    kind: str
    make: Callable[[int, str], Seat]
    games: tuple[str, ...] | None = None
    """The games it can play, when it says (None: it will tell, or fail, in the match)."""


def _entrant(agent: AgentSpec, limits: Limits) -> _Entrant:
    if isinstance(agent, type) and issubclass(agent, Bot):
        agent = agent()
    if isinstance(agent, Bot):
        bot = agent
        return _Entrant(bot.name, "bot", lambda i, seed: InProcessSeat(bot, SeatInfo(i, bot.name, 1, "in_process")))
    if isinstance(agent, BotProgram):
        program = agent
        return _Entrant(
            program.label or "program",
            "subprocess",
            lambda i, seed: SubprocessSeat(program, SeatInfo(i, program.label or "program", 1, "subprocess")),
        )
    if isinstance(agent, str):
        return _named_entrant(agent, limits)
    if callable(agent):
        name = getattr(agent, "__name__", type(agent).__name__)
        function = agent
        return _Entrant(
            name,
            "kaggle function",
            lambda i, seed: InProcessSeat(KaggleFunctionBot(function, name), SeatInfo(i, name, 1, "in_process")),
            KaggleFunctionBot.games,
        )
    raise EvaluateError(
        f"cannot play {agent!r}: give a Bot, a hosted bot's name, a Kaggle-style function, "
        '"kaggle:FILE" or a command line'
    )


def _named_entrant(text: str, limits: Limits) -> _Entrant:
    hosted = hosted_bots()
    if text in hosted:
        entry = hosted[text]
        return _Entrant(
            text,
            "hosted",
            lambda i, seed: InProcessSeat(entry.factory(bot_seed(seed, i)), SeatInfo(i, text, 1, "hosted")),
            tuple(entry.games) or None,
        )
    prefix, sep, rest = text.partition(":")
    if sep and prefix in FORMATS and FORMATS[prefix].runner is not None:
        try:
            program = local_program(prefix, Path(rest), limits)
        except FormatError as exc:
            raise EvaluateError(str(exc)) from None
        name = f"{prefix}:{Path(rest).name}"
        return _Entrant(
            name,
            prefix,
            lambda i, seed: SubprocessSeat(program, SeatInfo(i, name, 1, "subprocess")),
            FORMATS[prefix].games,
        )
    if " " in text or os.path.isfile(text.split()[0] if text.split() else text):
        program = BotProgram(text, Framing.JSON, workdir=os.getcwd(), limits=limits)
        name = _command_name(text)
        return _Entrant(name, "command", lambda i, seed: SubprocessSeat(program, SeatInfo(i, name, 1, "subprocess")))
    close = [n for n in hosted if n.startswith(text[:3])][:5]
    hint = (
        f" (hosted bots like it: {', '.join(close)})" if close else " (`arena bot list` and the hub list hosted bots)"
    )
    raise EvaluateError(
        f"{text!r} is not a hosted bot, a format file (kaggle:FILE) or a command line{hint}; "
        "give one of those, a Bot or a function"
    )


def _command_name(command: str) -> str:
    """A short name for a command line: its script's file name (``bot.py``), else its program's."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    scripts = [w for w in words[1:] if not w.startswith("-") and "." in Path(w).name]
    return Path(scripts[0] if scripts else words[0]).name


@dataclass
class Evaluation:
    """The matches of one :func:`evaluate` call, with a summary per agent.

    Attributes:
        game: The game, with its parameters.
        names: The agents' names by seat (made unique).
        records: Every match, in order.
    """

    game: Game
    names: list[str]
    records: list[MatchRecord] = field(default_factory=list)

    @property
    def returns(self) -> list[tuple[float, ...]]:
        """The returns of every match, by seat (what kaggle-environments' ``evaluate`` returns)."""
        return [tuple(r.returns) for r in self.records]

    @property
    def terminations(self) -> list[Termination | None]:
        return [r.termination for r in self.records]

    def mean(self, seat: int) -> float:
        values = [r[seat] for r in self.returns]
        return sum(values) / len(values) if values else math.nan

    def interval(self, seat: int) -> tuple[float, float]:
        """The 95% confidence interval of seat ``seat``'s mean score (Student t; NaN with one match)."""
        values = [r[seat] for r in self.returns]
        n = len(values)
        if n < 2:
            return (math.nan, math.nan)
        mean = sum(values) / n
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
        half = t_quantile_975(n - 1) * sd / math.sqrt(n)
        return (mean - half, mean + half)

    def outcomes(self, seat: int) -> tuple[int, int, int]:
        """Wins, draws and losses of seat ``seat`` (a win: the highest return, alone)."""
        wins = draws = losses = 0
        for returns in self.returns:
            best = max(returns)
            if returns[seat] < best:
                losses += 1
            elif list(returns).count(best) > 1:
                draws += 1
            else:
                wins += 1
        return wins, draws, losses

    def failures(self) -> list[str]:
        """One line per match that did not end normally."""
        return [
            f"match {i + 1}: {r.termination.label if r.termination else 'unfinished'}: {r.reason}"
            for i, r in enumerate(self.records)
            if r.termination != Termination.NORMAL
        ]

    def _rows(self) -> list[tuple[str, str, str, str]]:
        rows = []
        for seat, name in enumerate(self.names):
            low, high = self.interval(seat)
            shown = "n/a" if math.isnan(low) else f"[{low:+.2f}, {high:+.2f}]"
            w, d, lo = self.outcomes(seat)
            rows.append((name, f"{self.mean(seat):+.2f}", shown, f"{w}/{d}/{lo}"))
        return rows

    def __str__(self) -> str:
        head = f"{self.game!r}, {len(self.records)} match(es)"
        table = [("agent", "mean score", "95% interval", "W/D/L"), *self._rows()]
        widths = [max(len(row[c]) for row in table) for c in range(4)]
        lines = [head] + ["  ".join(cell.ljust(widths[c]) for c, cell in enumerate(row)).rstrip() for row in table]
        return "\n".join(lines + [f"  {line}" for line in self.failures()])

    def _repr_html_(self) -> str:
        cells = "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in self._rows()
        )
        failures = "".join(f"<li>{html.escape(line)}</li>" for line in self.failures())
        return (
            f"<p>{html.escape(repr(self.game))}, {len(self.records)} match(es)</p>"
            "<table><tr><th>agent</th><th>mean score</th><th>95% interval</th><th>W/D/L</th></tr>"
            f"{cells}</table>" + (f"<ul>{failures}</ul>" if failures else "")
        )


_T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
          11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
          20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048,
          29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}  # fmt: skip


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (the nearest tabled df at or below)."""
    if df > 120:
        return 1.960
    return _T_975[max(d for d in _T_975 if d <= df)]


def evaluate(
    game: str | Game,
    agents: Sequence[AgentSpec],
    episodes: int = 1,
    params: dict[str, Any] | None = None,
    time_control: TimeControl | None = None,
    seed: str | None = None,
    limits: Limits | None = None,
) -> Evaluation:
    """Play ``episodes`` matches of ``game`` between ``agents`` (one per seat) and return them.

    Args:
        game: A game name (``"rps"``) or a loaded game.
        agents: One agent per seat (see :data:`AgentSpec`).
        episodes: How many matches.
        params: Game parameters, e.g. ``{"rounds": 100}`` (only with a game name).
        time_control: The clock (default: 1 s a move, a 10 s bank).
        seed: Seed of the first match (later ones derive from it); random when None.
        limits: Sandbox limits of subprocess agents.

    Raises:
        EvaluateError: an agent that cannot be played, a bad number of episodes or parameters.
    """
    if episodes < 1:
        raise EvaluateError(f"episodes={episodes}: play at least one match")
    if isinstance(game, str):
        try:
            loaded = load_game(game, **(params or {}))
        except Exception as exc:
            raise EvaluateError(f"cannot load {game!r} with {params or {}}: {exc}") from None
    else:
        if params:
            raise EvaluateError("give params with a game name, not with a loaded game")
        loaded = game
    entrants = [_entrant(agent, limits or Limits()) for agent in agents]
    for entrant in entrants:
        if entrant.games is not None and loaded.name not in entrant.games:
            raise EvaluateError(f"{entrant.name} ({entrant.kind}) plays {', '.join(entrant.games)}, not {loaded.name}")
    names = _unique([e.name for e in entrants])
    base = seed or new_seed()
    result = Evaluation(loaded, names)

    async def play_all() -> None:
        for episode in range(episodes):
            match_seed = base if episode == 0 else f"{base}/{episode}"
            seats = [e.make(i, match_seed) for i, e in enumerate(entrants)]
            for seat, name in zip(seats, names, strict=True):
                seat.info = dataclasses.replace(seat.info, bot_name=name)
            try:
                record = await play_match(loaded, seats, time_control, match_seed, match_id=f"evaluate-{episode + 1}")
            finally:
                for seat in seats:
                    close = getattr(seat, "close", None)
                    if close is not None:
                        await close()
            result.records.append(record)

    _run(play_all)
    return result


def _unique(names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        shown, n = name, 2
        while shown in out:
            shown, n = f"{name}#{n}", n + 1
        out.append(shown)
    return out


def _run(work: Callable[[], Any]) -> None:
    """Run the coroutine function ``work`` to its end, on a worker thread when a loop already runs here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(work())
        return
    failure: list[BaseException] = []

    def worker() -> None:
        try:
            asyncio.run(work())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=worker, name="arena-evaluate")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


__all__ = ["AgentSpec", "EvaluateError", "Evaluation", "KaggleFunctionBot", "evaluate"]
