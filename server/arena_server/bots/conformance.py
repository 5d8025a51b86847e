"""Conformance checking of bots: the engine behind ``arena check-bot``.

:func:`check_bot` starts a subprocess bot, reads its Hello, then plays short
scripted matches of every game it claims (every registered game when its Hello
lists none), once in each seat, against the uniformly random bot. Every problem
is a :class:`Finding` carrying the referee's reason, the last message the bot
was sent and the last one it wrote, so an author sees exactly what went wrong.
The same function serves as the self-check of a submitted bot.

The scenarios themselves (:func:`run_scenarios`) only need a
:class:`BotUnderCheck`, which hands out one seat per scenario: the subprocess
checker gives :class:`SubprocessSeat` objects, the remote checker
(:mod:`arena_server.api.remote_check`) seats of a connected gRPC session.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol, cast

from arena.v1 import bot_session_pb2 as bs
from arena_bots.simple import RandomBot
from arena_client import MatchInfo, SeatInfo, Termination, TimeControl
from arena_games import Game, GameError, describe_actions, load_game, registered_games
from arena_server.referee.loop import play_match
from arena_server.referee.seat import Seat
from arena_server.seats.framing import Framing, json_text
from arena_server.seats.in_process import InProcessSeat
from arena_server.seats.process import BotProgram
from arena_server.seats.subprocess_seat import SubprocessSeat

DEFAULT_CHECK_CLOCK = TimeControl(timedelta(seconds=2), timedelta(seconds=0), timedelta(seconds=0.5))

SHORT_PARAMS: dict[str, dict[str, object]] = {"rps": {"rounds": 5}}
"""Parameters that keep the scripted matches short (games not listed use their defaults)."""


@dataclass
class Finding:
    """One scenario's outcome."""

    scenario: str
    ok: bool
    detail: str
    sent: str = ""
    received: str = ""
    expected: str = ""


@dataclass
class CheckReport:
    """Everything :func:`check_bot` found."""

    target: str
    """What was checked, in words (a command and its framing, or a remote bot's name and address)."""
    hello: bs.Hello | None = None
    findings: list[Finding] = field(default_factory=list)
    log_tail: str = ""

    @property
    def passed(self) -> bool:
        return bool(self.findings) and all(f.ok for f in self.findings)

    def first_error(self) -> Finding | None:
        return next((f for f in self.findings if not f.ok), None)


def render_message(message: bs.ServerMessage | bs.BotMessage | None) -> str:
    return "nothing" if message is None else json_text(message)


def render_received(seat: object) -> str:
    """What the bot last wrote: the unreadable frame or line when that is what ended it, else its last message."""
    unreadable = getattr(seat, "unreadable", "")
    if unreadable:
        return f"an unreadable frame: {unreadable}"
    return render_message(cast(ObservedSeat, seat).last_received)


class ObservedSeat(Protocol):
    """What the report needs to know about a seat's conversation with the bot."""

    @property
    def hello(self) -> bs.Hello | None: ...
    @property
    def last_sent(self) -> bs.ServerMessage | None: ...
    @property
    def last_received(self) -> bs.BotMessage | None: ...
    @property
    def last_turn(self) -> bs.ServerMessage | None: ...


class BotUnderCheck(Protocol):
    """The transport-specific part of a check: seats for the bot, one per scenario."""

    def seat(self, seat_index: int) -> Seat:
        """A new seat for one scenario; it must also be an :class:`ObservedSeat`."""

    async def release(self, seat: Seat) -> None:
        """Called after each scenario's match (stop a process, free a session)."""


def expected_answer(seat: ObservedSeat, failure: Termination | None) -> str:
    sent = seat.last_turn or seat.last_sent
    if sent is not None and sent.WhichOneof("kind") == "turn":
        turn = sent.turn
        legal = describe_actions(list(turn.legal_actions))
        return (
            f'{{"action":{{"matchId":"{turn.match_id}","turnId":{turn.turn_id},"action":A}}}} '
            f"with A one of {legal}, within the time budget"
        )
    if seat.hello is None:
        return 'a Hello first, e.g. {"hello":{"protocolVersion":"arena.v1","games":["rps"]}}'
    return "nothing until the next Turn (Updates and MatchStarted need no answer)"


async def _probe_other_framing(program: BotProgram, game: Game) -> str:
    """When the Hello cannot be read, see whether the other framing works, to say so."""
    other = Framing.PROTO if program.framing is Framing.JSON else Framing.JSON
    seat = SubprocessSeat(dataclasses.replace(program, framing=other, startup_timeout=min(program.startup_timeout, 5)))
    info = MatchInfo("framing-probe", game.name, dict(game.params), 0, (seat.info,), DEFAULT_CHECK_CLOCK, "")
    try:
        failure = await seat.start(info)
    finally:
        await seat.close()
    if failure is None:
        return f"with {other} framing its Hello reads fine: this bot speaks {other} framing (use --framing {other})"
    return ""


def _scenario_games(hello: bs.Hello, only: Sequence[str]) -> list[str]:
    claimed = list(hello.games) or list(registered_games())
    if only:
        return [g for g in only if g in claimed] + [g for g in only if g not in claimed]
    return claimed


async def check_bot(
    program: BotProgram,
    games: Sequence[str] = (),
    clock: TimeControl = DEFAULT_CHECK_CLOCK,
    seed: str = "check-bot",
    progress: Callable[[Finding], None] | None = None,
) -> CheckReport:
    """Run the scripted scenarios; never raises for anything the bot does.

    Args:
        program: The bot to check.
        games: Restrict to these games (default: what the Hello claims).
        clock: Time control of the scripted matches.
        seed: Seed of the matches and the random opponents.
        progress: Called with each finding as soon as it is known.
    """
    report = CheckReport(program.describe())
    add = finding_adder(report, progress)

    # 1. start-up: the Hello, read on its own so its problems are reported first.
    first_game = load_game(games[0] if games else "rps", **SHORT_PARAMS.get(games[0] if games else "rps", {}))
    seat = SubprocessSeat(program, SeatInfo(0, "bot-under-check", 1, "subprocess"))
    info = MatchInfo("check-hello", first_game.name, dict(first_game.params), 0, (seat.info,), clock, "")
    try:
        failure = await seat.start(info)
    finally:
        await seat.close()
    if failure is not None and seat.hello is None:
        detail = failure.reason
        hint = ""
        if failure.failure in (Termination.PROTOCOL_ERROR, Termination.TIMEOUT):
            hint = await _probe_other_framing(program, first_game)
        add(
            Finding(
                "start-up",
                False,
                detail + (f"; {hint}" if hint else ""),
                render_message(seat.last_sent),
                render_received(seat),
                expected_answer(seat, failure.failure),
            )
        )
        report.log_tail = seat.stderr_tail()
        return report
    report.hello = hello = seat.hello
    assert hello is not None
    add(hello_finding(hello))

    await run_scenarios(_SubprocessBot(program), hello, games, clock, seed, add)
    return report


def finding_adder(report: CheckReport, progress: Callable[[Finding], None] | None) -> Callable[[Finding], None]:
    def add(finding: Finding) -> None:
        report.findings.append(finding)
        if progress is not None:
            progress(finding)

    return add


def hello_finding(hello: bs.Hello) -> Finding:
    """The passing start-up finding, describing the Hello."""
    return Finding(
        "start-up",
        True,
        f"Hello received: name={hello.name!r}, games={list(hello.games) or 'all'}, "
        f"keep_alive={hello.keep_alive}, protocol_version={hello.protocol_version!r}",
    )


class _SubprocessBot:
    """A fresh :class:`SubprocessSeat` per scenario, stopped after it."""

    def __init__(self, program: BotProgram) -> None:
        self.program = program

    def seat(self, seat_index: int) -> Seat:
        return SubprocessSeat(self.program, SeatInfo(seat_index, "bot-under-check", 1, "subprocess"))

    async def release(self, seat: Seat) -> None:
        assert isinstance(seat, SubprocessSeat)
        await seat.close()


async def run_scenarios(
    bot: BotUnderCheck,
    hello: bs.Hello,
    games: Sequence[str],
    clock: TimeControl,
    seed: str,
    add: Callable[[Finding], None],
) -> None:
    """The scripted matches: every claimed game (or ``games``), in every seat, against the random bot.

    A game stops at its first failing seat; the other games are still played.
    """
    registered = registered_games()
    for name in _scenario_games(hello, games):
        if name not in registered:
            add(Finding(name, False, f"its Hello claims the game {name!r}, which this server does not know"))
            continue
        if hello.games and name not in hello.games:
            add(Finding(name, False, f"its Hello does not list {name!r} (it lists {', '.join(hello.games)})"))
            continue
        try:
            game = load_game(name, **SHORT_PARAMS.get(name, {}))  # type: ignore[arg-type]
        except GameError as exc:  # pragma: no cover - a broken registry entry
            add(Finding(name, False, f"could not set up the game: {exc}"))
            continue
        for seat_index in range(game.num_players):
            finding = await _play_scenario(bot, game, seat_index, clock, f"{seed}:{name}:{seat_index}")
            add(finding)
            if not finding.ok:
                break


async def _play_scenario(bot: BotUnderCheck, game: Game, seat_index: int, clock: TimeControl, seed: str) -> Finding:
    scenario = f"{game.name} as seat {seat_index}"
    checked = bot.seat(seat_index)
    seats: list[Seat] = []
    for i in range(game.num_players):
        if i == seat_index:
            seats.append(checked)
        else:
            seats.append(InProcessSeat(RandomBot(i), SeatInfo(i, "random", 1, "hosted")))
    try:
        record = await play_match(game, seats, clock, seed=seed, match_id=f"check-{game.name}-{seat_index}")
    finally:
        await bot.release(checked)
    moves = sum(1 for player, *_ in record.moves if player == seat_index)
    if record.termination == Termination.NORMAL:
        return Finding(scenario, True, f"played {moves} moves to the end ({record.summary().split('  ')[1]})")
    if record.offender is not None and record.offender != seat_index:
        return Finding(scenario, False, f"the opponent failed, which should not happen: {record.reason}")
    assert record.termination is not None
    observed = cast(ObservedSeat, checked)
    return Finding(
        scenario,
        False,
        f"{record.termination.label}: {record.reason}",
        render_message(observed.last_turn or observed.last_sent),
        render_received(observed),
        expected_answer(observed, record.termination),
    )


def format_report(report: CheckReport) -> str:
    """The report as text for people."""
    lines = [f"checking {report.target}"]
    for finding in report.findings:
        lines.append(format_finding(finding))
    lines.extend(format_summary(report))
    return "\n".join(lines)


def format_summary(report: CheckReport) -> list[str]:
    """The verdict lines that close a report."""
    lines = []
    failed = [f for f in report.findings if not f.ok]
    if failed:
        lines.append(f"FAILED: {len(failed)} problem(s); fix the first one first.")
        if report.log_tail.strip():
            lines.append("the end of its stderr log:")
            lines.extend("    " + line for line in report.log_tail.strip().splitlines()[-15:])
    else:
        lines.append("PASSED: the bot follows the protocol in every scenario.")
    return lines


def format_finding(finding: Finding) -> str:
    mark = "ok  " if finding.ok else "FAIL"
    text = f"  {mark} {finding.scenario}: {finding.detail}"
    if not finding.ok:
        if finding.sent:
            text += f"\n         last message it got: {_clip(finding.sent)}"
        if finding.received:
            text += f"\n         last message it sent: {_clip(finding.received)}"
        if finding.expected:
            text += f"\n         expected: {finding.expected}"
    return text


def _clip(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
