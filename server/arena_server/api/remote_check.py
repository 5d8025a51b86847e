"""``arena check-bot --listen``: the conformance check for remote (gRPC) bots.

:func:`check_remote_bot` starts a temporary Arena gRPC server whose only bot
is the uniformly random one (no store), waits for a bot to dial
``BotSessionService.Play`` and say hello, then plays the same scripted
scenarios as the subprocess checker (:func:`arena_server.bots.conformance.run_scenarios`)
over the bot's :class:`~arena_server.seats.remote.RemoteSeat`. Every message the
server writes to the stream and every message it reads from it is recorded,
so a failure names the message the bot got and the one it sent.

Only the first bot to connect is checked; later connections are told so and
closed. When the check is over the bot gets a fatal Error saying so, so an
SDK bot stops instead of trying to reconnect to a server that is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import games_pb2_grpc as gp_grpc
from arena_bots import hosted_bots
from arena_client import SeatInfo, Termination, TimeControl
from arena_server.api.bot_session import BotSessionServicer
from arena_server.api.bot_session import add_to_server as add_bot_session_service
from arena_server.api.games import GameServicer
from arena_server.api.server import bind_port
from arena_server.bots.conformance import (
    DEFAULT_CHECK_CLOCK,
    CheckReport,
    Finding,
    expected_answer,
    finding_adder,
    hello_finding,
    render_message,
    run_scenarios,
)
from arena_server.matches.hub import Hub
from arena_server.referee.seat import Seat
from arena_server.seats.action_wire import WireAction, bot_message
from arena_server.seats.remote import Outgoing, RemoteSeat, RemoteSession, as_message


class Conversation:
    """The last messages of one Play stream, in both directions."""

    def __init__(self) -> None:
        self.last_sent: bs.ServerMessage | None = None
        self.last_turn: bs.ServerMessage | None = None
        self.last_error: bs.Error | None = None
        self.last_received: bs.BotMessage | None = None
        self.received = 0


class _RecordingContext:
    """A servicer context that notes every message written and read, and delegates the rest."""

    def __init__(self, context: grpc.aio.ServicerContext, conversation: Conversation) -> None:
        self._context = context
        self._conversation = conversation

    async def write(self, out: Outgoing) -> None:
        conversation = self._conversation
        message = as_message(out)
        conversation.last_sent = message
        kind = message.WhichOneof("kind")
        if kind == "turn":
            conversation.last_turn = message
        elif kind == "error":
            conversation.last_error = message.error
        await self._context.write(out)

    async def read(self) -> Any:
        message = await self._context.read()
        if type(message) is WireAction:  # (an Action, read without protobuf: recorded as its message)
            self._conversation.last_received = bot_message(message)
            self._conversation.received += 1
        elif isinstance(message, bs.BotMessage):
            self._conversation.last_received = message
            self._conversation.received += 1
        return message

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


class ObservedRemoteSeat(RemoteSeat):
    """A remote seat that can report its conversation (frozen at its first failure)."""

    def __init__(self, session: RemoteSession, info: SeatInfo, conversation: Conversation, hello: bs.Hello) -> None:
        super().__init__(session, info)
        self.conversation = conversation
        self.hello: bs.Hello | None = hello
        self._frozen: tuple[bs.ServerMessage | None, bs.BotMessage | None, bs.ServerMessage | None] | None = None

    @property
    def last_sent(self) -> bs.ServerMessage | None:
        return self._frozen[0] if self._frozen else self.conversation.last_sent

    @property
    def last_received(self) -> bs.BotMessage | None:
        return self._frozen[1] if self._frozen else self.conversation.last_received

    @property
    def last_turn(self) -> bs.ServerMessage | None:
        return self._frozen[2] if self._frozen else self.conversation.last_turn

    def fail(self, termination: Termination, reason: str) -> None:
        if self._frozen is None:
            c = self.conversation
            self._frozen = (c.last_sent, c.last_received, c.last_turn)
        super().fail(termination, reason)


class _RemoteBot:
    """The connected session as a :class:`~arena_server.bots.conformance.BotUnderCheck`."""

    def __init__(self, session: RemoteSession, conversation: Conversation, hello: bs.Hello) -> None:
        self.session = session
        self.conversation = conversation
        self.hello = hello

    def seat(self, seat_index: int) -> Seat:
        self.conversation.last_turn = None
        return ObservedRemoteSeat(
            self.session, SeatInfo(seat_index, self.session.name, 1, "remote"), self.conversation, self.hello
        )

    async def release(self, seat: Seat) -> None:
        if self.session.seat is seat:
            self.session.seat = None


class _CheckServicer(BotSessionServicer):
    """``Play`` for one bot under check: the hub's own session handling, recorded."""

    def __init__(self, hub: Hub) -> None:
        super().__init__(hub)
        loop = asyncio.get_running_loop()
        self.arrived: asyncio.Future[str] = loop.create_future()
        """Set with the peer's address when the bot's stream opens."""
        self.welcomed: asyncio.Future[_RemoteBot | Finding] = loop.create_future()
        """Set when the bot is welcomed, or with the start-up failure when it is not."""
        self.conversation = Conversation()

    async def Play(self, request_iterator: Any, context: grpc.aio.ServicerContext) -> None:  # type: ignore[override]
        if self.arrived.done():
            await context.write(
                bs.ServerMessage(
                    error=bs.Error(
                        code=bs.ERROR_CODE_BAD_MESSAGE,
                        message="this is arena check-bot and it is already checking another bot; "
                        "start another check-bot for this one",
                        fatal=True,
                    )
                )
            )
            return
        self.arrived.set_result(context.peer())
        try:
            await super().Play(request_iterator, _RecordingContext(context, self.conversation))  # type: ignore[arg-type]
        finally:
            if not self.welcomed.done():
                self.welcomed.set_result(self._startup_failure())

    async def _welcome(self, session: RemoteSession, hello: bs.Hello) -> bool:
        ok = await super()._welcome(session, hello)
        if ok and not self.welcomed.done():
            self.welcomed.set_result(_RemoteBot(session, self.conversation, hello))
        return ok

    def _startup_failure(self) -> Finding:
        c = self.conversation
        if c.last_error is not None:
            detail = c.last_error.message
        elif c.received == 0:
            detail = "closed the stream without sending anything; the first message must be a Hello"
        else:
            detail = "the stream ended before the bot was welcomed"
        return Finding(
            "start-up",
            False,
            detail,
            render_message(c.last_sent),
            render_message(c.last_received),
            'a Hello first, e.g. BotMessage{hello: {protocol_version: "arena.v1", name: "my-bot", games: ["rps"]}}',
        )


async def check_remote_bot(
    host: str = "127.0.0.1",
    port: int = 0,
    games: Sequence[str] = (),
    clock: TimeControl = DEFAULT_CHECK_CLOCK,
    seed: str = "check-bot",
    wait: float = 600.0,
    startup_timeout: float = 10.0,
    progress: Callable[[Finding], None] | None = None,
    on_listening: Callable[[str], None] | None = None,
) -> CheckReport:
    """Serve until a bot connects, then check it; never raises for anything the bot does.

    Args:
        host: Address to listen on.
        port: Port to listen on (0: any free port; ``on_listening`` hears which).
        games: Restrict to these games (default: what the Hello claims).
        clock: Time control of the scripted matches.
        seed: Seed of the matches and the random opponents.
        wait: Seconds to wait for a bot to connect.
        startup_timeout: Seconds from connecting to the Hello.
        progress: Called with each finding as soon as it is known.
        on_listening: Called with ``host:port`` once the server accepts connections.

    Raises:
        OSError: the address cannot be bound.
    """
    hub = Hub(None, {"random": hosted_bots()["random"]})
    servicer = _CheckServicer(hub)
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    add_bot_session_service(servicer, server)
    gp_grpc.add_GameServiceServicer_to_server(GameServicer(), server)
    bound = bind_port(server, host, port)
    target = f"remote bot at {host}:{bound}"
    report = CheckReport(target)
    add = finding_adder(report, progress)
    await server.start()
    failure: BaseException | None = None
    try:
        await _converse(servicer, report, add, host, bound, games, clock, seed, wait, startup_timeout, on_listening)
    except BaseException as exc:  # (raised again below, once the server is stopped)
        failure = exc
    # The clean-up runs after the try, not in a finally: compiled with mypyc, an await that suspends in a
    # finally block dropped the exception in flight when it came from an awaited future
    # (see tests/test_native.py).
    welcomed_bot = servicer.welcomed.result() if servicer.welcomed.done() else None
    if isinstance(welcomed_bot, _RemoteBot):
        # Tell the bot the check is over, so that an SDK bot stops instead of reconnecting to nobody.
        with contextlib.suppress(Exception):
            await welcomed_bot.session.error(
                bs.ERROR_CODE_UNSPECIFIED,
                "arena check-bot has finished its check and is stopping; see its report",
                fatal=True,
            )
    await hub.shutdown("the check is over")
    with contextlib.suppress(Exception):
        await server.stop(grace=0.5)
    if failure is not None:
        raise failure
    return report


async def _converse(
    servicer: _CheckServicer,
    report: CheckReport,
    add: Callable[[Finding], None],
    host: str,
    bound: int,
    games: Sequence[str],
    clock: TimeControl,
    seed: str,
    wait: float,
    startup_timeout: float,
    on_listening: Callable[[str], None] | None,
) -> None:
    """Wait for the bot, its Hello, then run the scenarios, adding to ``report``."""
    if on_listening is not None:
        on_listening(f"{host}:{bound}")
    try:
        peer = await asyncio.wait_for(asyncio.shield(servicer.arrived), wait)
    except TimeoutError:
        add(
            Finding(
                "start-up",
                False,
                f"no bot connected to {host}:{bound} within {wait:g}s; start your bot with {host}:{bound} as "
                f'its server address (SDK: run(bot, "{host}:{bound}")) while check-bot waits, '
                "or wait longer with --wait SECONDS",
            )
        )
        return
    report.target = f"remote bot from {peer}"
    try:
        welcomed = await asyncio.wait_for(asyncio.shield(servicer.welcomed), startup_timeout)
    except TimeoutError:
        c = servicer.conversation
        add(
            Finding(
                "start-up",
                False,
                f"sent no Hello within {startup_timeout:g}s of connecting; the first message must be a Hello",
                render_message(c.last_sent),
                render_message(c.last_received),
                expected_answer(_NoHello(), None),
            )
        )
        return
    if isinstance(welcomed, Finding):
        add(welcomed)
        return
    report.hello = welcomed.hello
    report.target = f"remote bot {welcomed.session.name!r} from {peer}"
    add(hello_finding(welcomed.hello))
    await run_scenarios(welcomed, welcomed.hello, games, clock, seed, add)


class _NoHello:
    """An observed seat that never got a Hello (for :func:`_expected`)."""

    hello: bs.Hello | None = None
    last_sent: bs.ServerMessage | None = None
    last_received: bs.BotMessage | None = None
    last_turn: bs.ServerMessage | None = None
