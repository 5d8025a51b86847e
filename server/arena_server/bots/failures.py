"""What a bot's author needs after a match: its stderr log, and the details of a failure.

When a match ends, :func:`seat_outcomes` collects, for every subprocess seat, its capped
stderr log, and for the offending seat (a subprocess or remote bot that timed out,
crashed, broke the protocol, played an illegal action or disconnected) the turn it was
answering, the message it had received, the last message it wrote and the tail of its
stderr. The result is written in the same transaction as the end of the match
(``Store.finish_match``'s hook). :func:`list_failures` reads them back for
``arena bot failures`` and the ``GetFailures`` RPC.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import aiosqlite
from google.protobuf.message import Message

from arena.v1 import bot_session_pb2 as bs
from arena_client import Termination
from arena_client.convert import turn_to_proto
from arena_server.referee.records import MatchRecord
from arena_server.referee.seat import Seat
from arena_server.seats.framing import json_text
from arena_server.seats.peer import PeerSeat
from arena_server.seats.remote import RemoteSeat
from arena_server.seats.subprocess_seat import SubprocessSeat

AUTHOR_FAULTS = frozenset(
    {
        Termination.TIMEOUT,
        Termination.ILLEGAL_ACTION,
        Termination.CRASH,
        Termination.DISCONNECT,
        Termination.PROTOCOL_ERROR,
    }
)
"""Terminations listed as failures (a resignation is a choice, an abort is the server's)."""

STDERR_TAIL_BYTES = 4000

Hook = Callable[[aiosqlite.Connection], Awaitable[None]]


@dataclass
class FailureRow:
    """One stored failure."""

    match_id: str
    game: str
    seat: int
    bot_name: str
    version: int
    kind: str
    termination: Termination
    reason: str
    turn_id: int
    received: str
    sent: str
    stderr_tail: str
    at: datetime


def message_json(message: Message | None) -> str:
    """The message as the bot got it on a JSON-lines pipe ("" for none)."""
    return "" if message is None else json_text(message)


def _offender_details(seat: Seat) -> tuple[int, str, str, str]:
    """(turn id, received JSON, sent JSON, stderr tail) of a failing seat."""
    if isinstance(seat, SubprocessSeat):
        received = seat.last_turn or seat.last_sent
        turn_id = seat.last_turn.turn.turn_id if seat.last_turn is not None else 0
        return turn_id, message_json(received), message_json(seat.last_received), seat.stderr_tail(STDERR_TAIL_BYTES)
    if isinstance(seat, (RemoteSeat, PeerSeat)) and seat.last_turn_args is not None:
        turn, moves = seat.last_turn_args
        return turn.turn_id, message_json(bs.ServerMessage(turn=turn_to_proto(turn, moves))), "", ""
    return 0, "", "", ""


def seat_outcomes(record: MatchRecord, seats: Sequence[Seat], logs: bool = True, failure: bool = True) -> Hook | None:
    """The ``finish_match`` hook writing stderr logs and the offender's failure, or None if nothing to write.

    ``logs=False`` or ``failure=False`` leaves that part out (the hub writes the failure with the
    match and the logs once the seats have stopped).
    """
    if not record.match_id.isdigit():
        return None
    return _seat_outcomes(record, seats, logs, failure)


def _seat_outcomes(record: MatchRecord, seats: Sequence[Seat], with_logs: bool, with_failure: bool) -> Hook | None:
    match_id = int(record.match_id)
    logs = [
        (match_id, s.info.seat, s.info.bot_name, s.info.bot_version, s.stderr_log())
        for s in seats
        if with_logs and isinstance(s, SubprocessSeat)
    ]
    failure: tuple[object, ...] | None = None
    offender = record.offender
    if (
        with_failure
        and record.termination in AUTHOR_FAULTS
        and offender is not None
        and 0 <= offender < len(seats)
        and seats[offender].info.kind in ("subprocess", "remote")
    ):
        seat = seats[offender]
        turn_id, received, sent, tail = _offender_details(seat)
        assert record.termination is not None
        failure = (
            match_id,
            offender,
            seat.info.bot_name,
            seat.info.bot_version,
            seat.info.kind,
            int(record.termination),
            record.reason,
            turn_id,
            received,
            sent,
            tail,
            (record.ended_at or datetime.now(UTC)).isoformat(),
        )
    if not logs and failure is None:
        return None

    async def write(conn: aiosqlite.Connection) -> None:
        if logs:
            await conn.executemany(
                "INSERT OR REPLACE INTO match_logs (match_id, seat, bot_name, bot_version, log) VALUES (?, ?, ?, ?, ?)",
                logs,
            )
        if failure is not None:
            await conn.execute(
                "INSERT INTO bot_failures (match_id, seat, bot_name, bot_version, kind, termination, reason, turn_id, "
                "received, sent, stderr_tail, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                failure,
            )

    return write


def chain_hooks(*hooks: Hook | None) -> Hook | None:
    """One ``finish_match`` hook running the given ones in order (None ones skipped)."""
    present = [h for h in hooks if h is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    async def run(conn: aiosqlite.Connection) -> None:
        for hook in present:
            await hook(conn)

    return run


async def list_failures(conn: aiosqlite.Connection, bot_name: str, limit: int = 10) -> list[FailureRow]:
    """The bot's most recent failures, newest first."""
    sql = (
        "SELECT f.match_id, m.game, f.seat, f.bot_name, f.bot_version, f.kind, f.termination, f.reason, f.turn_id, "
        "f.received, f.sent, f.stderr_tail, f.created_at FROM bot_failures f JOIN matches m ON m.id = f.match_id "
        "WHERE f.bot_name = ? ORDER BY f.id DESC LIMIT ?"
    )
    async with conn.execute(sql, (bot_name, limit)) as cur:
        rows = await cur.fetchall()
    return [
        FailureRow(
            str(r[0]),
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            Termination(r[6]),
            r[7],
            r[8],
            r[9],
            r[10],
            r[11],
            datetime.fromisoformat(r[12]),
        )
        for r in rows
    ]


async def match_log(conn: aiosqlite.Connection, match_id: str, seat: int) -> str | None:
    """The stored stderr log of a subprocess seat in a match."""
    async with conn.execute("SELECT log FROM match_logs WHERE match_id = ? AND seat = ?", (int(match_id), seat)) as cur:
        row = await cur.fetchone()
    return str(row[0]) if row else None


def format_failure(row: FailureRow) -> str:
    """A failure as text for people."""
    lines = [
        f"match {row.match_id} ({row.game}), seat {row.seat}, version {row.version}, {row.at:%Y-%m-%d %H:%M:%S} UTC: "
        f"{row.termination.label}",
        f"    {row.reason}",
    ]
    if row.turn_id:
        lines.append(f"    at turn {row.turn_id}")
    lines.append(f"    last message it received: {row.received or 'nothing'}")
    if row.sent:
        lines.append(f"    last message it sent: {row.sent}")
    if row.stderr_tail.strip():
        lines.append("    the end of its stderr:")
        lines.extend("        " + line for line in row.stderr_tail.strip().splitlines()[-20:])
    return "\n".join(lines)
