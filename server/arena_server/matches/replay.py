"""Replays of stored matches: the positions step by step, and what one seat was sent.

:func:`replay_steps` rebuilds every position of a stored match from its move
list with the rules engine. :func:`seat_messages` rebuilds the exact sequence
of ``arena.v1.ServerMessage`` a seat received (MatchStarted, Turn, Update,
MatchEnded), following the referee's order: before each decision, seats that
are not about to act get an Update with the public moves they have not seen;
each acting seat gets a Turn carrying those moves instead; the clock fields
are recomputed from the recorded thinking times. Observations go through the
same converters the server uses, so the messages equal what a remote or
subprocess bot was sent (hosted bots got the same content as Python objects).

:func:`feed` plays such a file into a local bot command over the stdio codec
and compares its answers with what the bot played on the server.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from arena.v1 import bot_session_pb2 as bs
from arena_client.convert import match_info_to_proto, result_to_proto, turn_to_proto, update_to_proto
from arena_client.types import MatchInfo, MatchResult, PublicMove, Termination, Turn, Update
from arena_games import CHANCE, SIMULTANEOUS, TERMINAL, State
from arena_server.matches.terminal import move_label, render
from arena_server.referee.records import MatchRecord
from arena_server.seats.framing import FrameError, FrameReader, Framing, encode, parse_payload


@dataclass
class Step:
    """One decision of a replay: who acted, what, and the state after it."""

    ply: int
    player: int
    actions: list[tuple[int, int, str]]
    """(seat or CHANCE, action, label)"""
    state: State


def replay_steps(record: MatchRecord) -> Iterator[Step]:
    """Every decision of the match (chance outcomes included), with the state after it."""
    game = record.game
    state = game.new_initial_state()
    entries = [(p, a) for p, a, _e, legal in record.moves if legal]
    i = 0
    ply = 0
    while i < len(entries) and state.current_player() != TERMINAL:
        player = state.current_player()
        if player == SIMULTANEOUS:
            joint = entries[i : i + game.num_players]
            if len(joint) < game.num_players:
                break
            state.apply_actions([a for _, a in joint])
            acts = [(p, a, game.action_to_string(p, a)) for p, a in joint]
            i += game.num_players
        else:
            p, a = entries[i]
            state.apply_action(a)
            acts = [(p, a, game.action_to_string(p, a))]
            i += 1
        ply += 1
        yield Step(ply, player, acts, state.clone())


def seat_messages(record: MatchRecord, seat: int) -> list[bs.ServerMessage]:
    """The messages ``seat`` received in ``record``, in order (see the module docstring)."""
    game = record.game
    if not 0 <= seat < game.num_players:
        raise ValueError(
            f"seat {seat} does not exist in this {game.num_players}-seat match; use 0..{game.num_players - 1}"
        )
    tc = record.time_control
    per_move = tc.per_move.total_seconds()
    grace = tc.grace.total_seconds()
    overage = [tc.overage.total_seconds()] * game.num_players
    overage_td = [tc.overage] * game.num_players
    out: list[bs.ServerMessage] = []
    info = MatchInfo(
        record.match_id, game.name, dict(game.params), seat, tuple(record.seats), tc, record.seed_sha256, record.rated
    )
    out.append(bs.ServerMessage(match_started=match_info_to_proto(info)))
    pending: list[PublicMove] = []
    state = game.new_initial_state()
    log = list(record.moves)
    i = 0
    turn_id = 0

    def publish(moves: Sequence[PublicMove]) -> None:
        pending.extend(moves)

    while True:
        player = state.current_player()
        if player == TERMINAL:
            break
        if player == CHANCE:
            if i >= len(log):
                break
            _p, action, _e, _ok = log[i]
            i += 1
            state.apply_action(action)
            if game.chance_is_public:
                publish([PublicMove(CHANCE, action, game.action_to_string(CHANCE, action))])
            continue
        acting = list(range(game.num_players)) if player == SIMULTANEOUS else [player]
        need = len(acting)
        decision = log[i : i + need]
        complete = len(decision) == need and all(ok for _p, _a, _e, ok in decision)
        if not complete and (record.termination in (None, Termination.ABORTED, Termination.NORMAL)):
            break  # aborted between decisions: nothing more was sent
        if pending and seat not in acting:
            out.append(
                bs.ServerMessage(
                    update=update_to_proto(Update(record.match_id, tuple(pending), state.observation(seat)))
                )
            )
            pending.clear()
        for s in acting:
            turn_id += 1
            if s == seat:
                turn = Turn(
                    record.match_id,
                    turn_id,
                    s,
                    state.observation(s),
                    tuple(state.legal_actions(s)),
                    tc.per_move,
                    overage_td[s],
                )
                out.append(bs.ServerMessage(turn=turn_to_proto(turn, tuple(pending))))
                pending.clear()
        if not complete:
            break  # the decision that ended the match
        for p, _a, elapsed, _ok in decision:
            charged = elapsed - grace
            if charged > per_move:
                overage[p] -= charged - per_move
                overage_td[p] = timedelta(seconds=max(overage[p], 0.0))
        i += need
        if player == SIMULTANEOUS:
            actions = [a for _p, a, _e, _ok in decision]
            state.apply_actions(actions)
            publish([PublicMove(s, a, game.action_to_string(s, a)) for s, a in enumerate(actions)])
        else:
            _p, action, _e, _ok = decision[0]
            state.apply_action(action)
            publish([PublicMove(player, action, game.action_to_string(player, action))])
    termination = record.termination or Termination.ABORTED
    result = MatchResult(
        record.match_id,
        tuple(record.returns),
        termination,
        record.reason,
        record.seed,
        record.offender,
        state.observation(seat),
        tuple(pending),
    )
    out.append(bs.ServerMessage(match_ended=result_to_proto(result)))
    return out


def write_messages(messages: Sequence[bs.ServerMessage], path: str | Path, framing: Framing = Framing.JSON) -> None:
    """One message per line (canonical proto3 JSON), or length-delimited protobuf."""
    Path(path).write_bytes(b"".join(encode(m, framing) for m in messages))


def read_messages(path: str | Path) -> list[bs.ServerMessage]:
    """Read a file written by :func:`write_messages` (either framing, detected)."""
    data = Path(path).read_bytes()
    if data[:1] == b"{":
        return [parse_payload(line, Framing.JSON, bs.ServerMessage) for line in data.splitlines() if line.strip()]
    out = []
    pos = 0
    while pos < len(data):
        length = shift = 0
        while True:
            byte = data[pos]
            pos += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        out.append(parse_payload(data[pos : pos + length], Framing.PROTO, bs.ServerMessage))
        pos += length
    return out


# -- feeding a local bot --------------------------------------------------------------------------


@dataclass
class FeedReport:
    turns: int = 0
    same: int = 0
    different: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def recorded_answers(messages: Sequence[bs.ServerMessage]) -> dict[int, int | None]:
    """turn id -> the action the seat played (from the public moves that follow), None if none."""
    seat = next((m.match_started.seat for m in messages if m.WhichOneof("kind") == "match_started"), 0)
    out: dict[int, int | None] = {}
    waiting: list[int] = []
    for m in messages:
        kind = m.WhichOneof("kind")
        moves = list(getattr(m, kind).moves) if kind in ("turn", "update", "match_ended") else []
        for mv in moves:
            if mv.seat == seat and waiting:
                out[waiting.pop(0)] = mv.action
        if kind == "turn":
            waiting.append(m.turn.turn_id)
            out[m.turn.turn_id] = None
    return out


async def feed(
    messages: Sequence[bs.ServerMessage], command: str, framing: Framing = Framing.JSON, timeout: float = 10.0
) -> FeedReport:
    """Start ``command``, send it ``messages`` as a server would, and compare its actions with the record."""
    report = FeedReport()
    expected = recorded_answers(messages)
    proc = await asyncio.create_subprocess_exec(
        *shlex.split(command),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=None,
        limit=1 << 20,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    reader = FrameReader(proc.stdout, framing)
    try:
        hello = await asyncio.wait_for(reader.read(bs.BotMessage), timeout)
        if hello is None or hello.WhichOneof("kind") != "hello":
            raise FrameError("wrong_kind", f"the bot's first message must be a Hello, got {hello!r}")
        proc.stdin.write(
            encode(bs.ServerMessage(welcome=bs.Welcome(bot_name=hello.hello.name, message="replay feed")), framing)
        )
        for message in messages:
            proc.stdin.write(encode(message, framing))
            await proc.stdin.drain()
            if message.WhichOneof("kind") != "turn":
                continue
            turn = message.turn
            report.turns += 1
            answer = await asyncio.wait_for(reader.read(bs.BotMessage), timeout)
            while answer is not None and answer.WhichOneof("kind") == "pong":
                answer = await asyncio.wait_for(reader.read(bs.BotMessage), timeout)
            got = answer.action.action if answer is not None and answer.WhichOneof("kind") == "action" else None
            want = expected.get(turn.turn_id)
            if got == want:
                report.same += 1
                report.lines.append(f"turn {turn.turn_id}: {got} (same as on the server)")
            else:
                text = f"turn {turn.turn_id}: the bot answered {got}, on the server it played {want}"
                report.different.append(text)
                report.lines.append(text)
    finally:
        if proc.stdin is not None and not proc.stdin.is_closing():
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    return report


# -- terminal rendering ---------------------------------------------------------------------------


def describe_step(record: MatchRecord, step: Step) -> str:
    """The text shown for one step: the moves, the truth, and each seat's view when they differ."""
    game = record.game
    who = {s.seat: s.bot_name for s in record.seats}
    moves = ", ".join(
        f"{'chance' if p == CHANCE else f'seat {p} ({who.get(p, p)})'}: {move_label(game.name, a, label)}"
        for p, a, label in step.actions
    )
    names = tuple(s.bot_name for s in sorted(record.seats, key=lambda s: s.seat))
    # The same pictures as `arena play` and `arena watch`; no "(you)" label, so equal views compare equal.
    views = [render(game, step.state.observation(s), None, names) for s in range(game.num_players)]
    out = [f"ply {step.ply}  {moves}"]
    if len(set(views)) == 1:
        out.append(_indent(views[0]))
    else:
        for s, view in enumerate(views):
            out.append(f"  seat {s} ({who.get(s, s)}) saw:")
            out.append(_indent(view, 4))
    return "\n".join(out)


def _indent(text: str, n: int = 2) -> str:
    return "\n".join(" " * n + line for line in text.splitlines())
