"""``arena replay``: step through a stored match, export what one seat received, feed it to a local bot."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

import grpc

from arena.v1 import ladder_pb2 as lp
from arena.v1 import ladder_pb2_grpc as lp_grpc
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client import SeatInfo, Termination
from arena_client.convert import params_from_proto, seat_from_proto, time_control_from_proto
from arena_games import GameError, load_game
from arena_server.cli import CliError, run_async
from arena_server.cli.common import add_connect_timeout_argument, add_server_argument, connect
from arena_server.matches.replay import describe_step, feed, read_messages, replay_steps, write_messages
from arena_server.referee.records import MatchRecord, MoveLog
from arena_server.seats.framing import FrameError, Framing


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "replay",
        help="replay a stored match, or export / feed what one seat received",
        description="Step through a finished match in the terminal, showing the board or the dice as each "
        "player saw them and as they were. With --seat N --export FILE, write the exact messages seat N "
        "received (one JSON object per line). With --feed FILE --cmd CMD, play such a file into a local bot "
        "and compare its answers with what it played on the server.",
    )
    p.add_argument("match_id", nargs="?", help="the match id (see `arena ladder matches BOT`)")
    add_server_argument(p)
    add_connect_timeout_argument(p)
    p.add_argument("--seat", type=int, default=None, help="the seat to export (0-based)")
    p.add_argument("--export", default=None, metavar="FILE", help="write seat N's messages to FILE")
    p.add_argument("--framing", choices=["json", "proto"], default="json", help="file/bot framing (default json)")
    p.add_argument("--feed", default=None, metavar="FILE", help="an exported file to play into --cmd")
    p.add_argument("--cmd", default=None, metavar="COMMAND", help="the local bot command for --feed")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for each answer in --feed")
    p.add_argument("--step", action="store_true", help="wait for Enter after each move (default on a terminal)")
    p.add_argument("--no-step", action="store_true", help="print the whole replay at once")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.feed:
        if not args.cmd:
            raise CliError("--feed needs --cmd, the command that starts your bot, e.g. --cmd 'python my_bot.py'")
        return _feed(args)
    if not args.match_id:
        raise CliError("name a match: arena replay MATCH_ID (or --feed FILE --cmd ...)")
    if args.export or args.seat is not None:
        if args.export is None or args.seat is None:
            raise CliError("--export FILE and --seat N go together")
        return _export(args)
    return _replay(args)


async def _rpc(args: argparse.Namespace, make: object) -> object:
    async with grpc.aio.insecure_channel(args.server) as channel:
        await connect(channel, args.server, args.connect_timeout)
        return await make(channel)  # type: ignore[operator]


def _call(args: argparse.Namespace, make: object) -> object:
    try:
        return run_async(_rpc(args, make))
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.UNAVAILABLE:
            raise CliError(f"lost the connection to {args.server} ({exc.details()})") from None
        raise CliError(exc.details() or str(exc.code())) from None


def record_from_proto(msg: mp.MatchRecord) -> MatchRecord:
    """A finished ``arena.v1.MatchRecord`` (with moves) back into the server's record."""
    try:
        game = load_game(msg.game, **params_from_proto(msg.params))
    except GameError as exc:
        raise CliError(f"match {msg.match_id}: {exc}") from None
    moves = MoveLog()
    for m in msg.moves:
        moves.add(m.seat, m.action, m.elapsed.ToTimedelta().total_seconds(), m.legal)
    seats: tuple[SeatInfo, ...] = tuple(seat_from_proto(s) for s in msg.seats)
    return MatchRecord(
        match_id=msg.match_id,
        game=game,
        seats=seats,
        time_control=time_control_from_proto(msg.time_control),
        seed=msg.seed,
        seed_sha256=msg.seed_sha256,
        started_at=msg.started_at.ToDatetime(tzinfo=UTC) if msg.HasField("started_at") else datetime.now(UTC),
        ended_at=msg.ended_at.ToDatetime(tzinfo=UTC) if msg.HasField("ended_at") else None,
        termination=Termination(msg.termination) if msg.termination else None,
        offender=msg.offender if msg.HasField("offender") else None,
        reason=msg.reason,
        returns=tuple(msg.returns),
        moves=moves,
        rated=msg.rated,
        seed_chosen=msg.seed_chosen,
    )


async def get_all_moves(channel: grpc.aio.Channel, match_id: str) -> mp.MatchRecord:
    """GetMatch page after page (the server sends at most 10,000 moves per reply): the record with every move."""
    stub = mp_grpc.MatchServiceStub(channel)
    msg: mp.MatchRecord = await stub.GetMatch(mp.GetMatchRequest(match_id=match_id))
    while msg.next_move_offset:
        page = await stub.GetMatch(mp.GetMatchRequest(match_id=match_id, move_offset=msg.next_move_offset))
        msg.moves.extend(page.moves)
        msg.next_move_offset = page.next_move_offset
    return msg


def _replay(args: argparse.Namespace) -> int:
    msg = _call(args, lambda ch: get_all_moves(ch, args.match_id))
    assert isinstance(msg, mp.MatchRecord)
    if msg.status == mp.MATCH_STATUS_RUNNING:
        raise CliError(f"match {args.match_id} is still running; watch it with `arena watch {args.match_id}`")
    record = record_from_proto(msg)
    step_mode = (args.step or sys.stdin.isatty()) and not args.no_step
    names = ", ".join(f"seat {s.seat}: {s.bot_name}" for s in record.seats)
    chosen = " (chosen by the match's creator)" if record.seed_chosen else ""
    print(f"match {record.match_id}  {record.game!r}  {names}  seed {record.seed or '(never revealed)'}{chosen}")
    for step in replay_steps(record):
        print(describe_step(record, step))
        if step_mode:
            try:
                if input("(Enter: next, q: quit) ").strip().lower() == "q":
                    return 0
            except EOFError:
                step_mode = False
    print(record.summary())
    return 0


def _export(args: argparse.Namespace) -> int:
    resp = _call(
        args,
        lambda ch: lp_grpc.LadderServiceStub(ch).GetSeatMessages(
            lp.GetSeatMessagesRequest(match_id=args.match_id, seat=args.seat)
        ),
    )
    assert isinstance(resp, lp.GetSeatMessagesResponse)
    try:
        write_messages(list(resp.messages), args.export, Framing(args.framing))
    except OSError as exc:
        raise CliError(f"cannot write {args.export}: {exc.strerror}") from None
    turns = sum(1 for m in resp.messages if m.WhichOneof("kind") == "turn")
    print(f"arena: wrote {len(resp.messages)} messages ({turns} turns) seat {args.seat} received to {args.export}")
    return 0


def _feed(args: argparse.Namespace) -> int:
    path = Path(args.feed)
    try:
        messages = read_messages(path)
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    except FrameError as exc:
        raise CliError(f"{path} is not an exported message file: {exc.message}") from None
    try:
        report = run_async(feed(messages, args.cmd, Framing(args.framing), args.timeout))
    except FrameError as exc:
        raise CliError(f"the bot's output could not be read: {exc.message}") from None
    except TimeoutError:
        raise CliError(f"the bot did not answer within {args.timeout:g}s") from None
    except OSError as exc:
        raise CliError(f"cannot run {args.cmd!r}: {exc.strerror}") from None
    for line in report.different[:20]:
        print(line)
    print(f"arena: {report.turns} turns: {report.same} the same as on the server, {len(report.different)} different")
    return 0 if not report.different else 1
