"""Play a :class:`~arena_client.Bot` against an Arena server over gRPC.

:func:`run` is all most bots need::

    run(MyBot(), "localhost:50051", opponent="random", game="rps")

It opens a ``BotSessionService.Play`` stream, says hello, optionally
challenges a hosted bot, and answers turns until the requested matches are
played (or forever, when waiting to be scheduled by the server). ``act`` runs
in a worker thread, so a slow, CPU-heavy bot never stalls the stream: pings
are still answered and the end of a match is still heard. If the server goes
away the client reconnects with exponential back-off and carries on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import traceback
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import bot_session_pb2_grpc as bs_grpc
from arena_client.bot import Bot, Resign
from arena_client.convert import (
    match_info_from_proto,
    moves_from_proto,
    params_to_proto,
    result_from_proto,
    time_control_to_proto,
    turn_from_proto,
    update_from_proto,
)
from arena_client.types import MatchResult, TimeControl, Update
from arena_games import ParamValue

log = logging.getLogger("arena_client")

PROTOCOL_VERSION = "arena.v1"
CLIENT = "arena_client/0.1"
QUICK_ACT_SECONDS = 0.001
"""How long the client waits synchronously for ``act`` before yielding to the event loop."""


class ArenaError(Exception):
    """The server refused something; the message is the server's explanation."""


class _Retry(Exception):
    """The connection dropped; reconnect and carry on."""


def run(
    bot: Bot,
    target: str = "localhost:50051",
    *,
    opponent: str | None = None,
    game: str | None = None,
    params: Mapping[str, ParamValue] | None = None,
    matches: int = 1,
    name: str | None = None,
    token: str = "",
    seat: int | None = None,
    time_control: TimeControl | None = None,
    reconnect: bool = True,
    max_backoff: float = 30.0,
    threaded: bool = True,
) -> list[MatchResult]:
    """Connect ``bot`` to the server at ``target`` and play.

    Args:
        bot: The bot.
        target: ``host:port`` of the Arena server.
        opponent: Challenge this bot (e.g. ``"random"``). Without it, the
            session waits to be seated by the server (ladder, CreateMatch)
            and runs until interrupted.
        game: The game to challenge in (default: the bot's first game, or rps).
        params: Game parameters, e.g. ``{"signs": 5}``.
        matches: How many matches to play against ``opponent``.
        name: Name to play under (default ``bot.name``; "" for a guest name).
        token: Secret token of a registered bot name.
        seat: Seat to take in challenge matches (default: alternate).
        time_control: Ask for this clock in challenge matches (default: the server's).
        reconnect: Reconnect with exponential back-off when the server goes away.
        max_backoff: Longest wait between reconnection attempts, in seconds.
        threaded: Run ``act`` in a worker thread (keeps the stream responsive).

    Returns:
        The results of the matches played, in order.

    Raises:
        ArenaError: the server refused the bot or the challenge.
    """
    client = Client(bot, target, name=bot.name if name is None else name, token=token, threaded=threaded)
    return asyncio.run(
        client.play(
            opponent=opponent,
            game=game,
            params=params or {},
            matches=matches,
            seat=seat,
            time_control=time_control,
            reconnect=reconnect,
            max_backoff=max_backoff,
        )
    )


class Client:
    """One bot's connection to a server (reusable across reconnects)."""

    def __init__(self, bot: Bot, target: str, name: str, token: str = "", threaded: bool = True) -> None:
        self.bot = bot
        self.target = target
        self.name = name
        self.token = token
        self.threaded = threaded
        self.results: list[MatchResult] = []
        self.assigned_name = ""
        self.session_token = ""
        """This session's Welcome.session_token: put it in CreateMatchRequest.bot_tokens to seat this bot."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arena-act") if threaded else None

    async def play(
        self,
        opponent: str | None = None,
        game: str | None = None,
        params: Mapping[str, ParamValue] | None = None,
        matches: int = 1,
        seat: int | None = None,
        time_control: TimeControl | None = None,
        reconnect: bool = True,
        max_backoff: float = 30.0,
    ) -> list[MatchResult]:
        """Play until ``matches`` challenge matches are done (forever without an opponent)."""
        attempt = 0
        try:
            while True:
                try:
                    await self._session(opponent, game, params or {}, matches, seat, time_control)
                    return self.results
                except _Retry as exc:
                    if not reconnect:
                        raise ArenaError(f"lost the connection to {self.target}: {exc}") from None
                    attempt += 1
                    delay = min(max_backoff, 0.5 * 2 ** min(attempt - 1, 10)) * (0.5 + random.random() / 2)
                    log.warning("arena: %s; reconnecting in %.1fs", exc, delay)
                    await asyncio.sleep(delay)
                else:
                    attempt = 0
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=False)

    async def _session(
        self,
        opponent: str | None,
        game: str | None,
        params: Mapping[str, ParamValue],
        matches: int,
        seat: int | None,
        time_control: TimeControl | None = None,
    ) -> None:
        bot = self.bot
        remaining = matches - len(self.results)
        async with grpc.aio.insecure_channel(self.target) as channel:
            stub = bs_grpc.BotSessionServiceStub(channel)
            call = stub.Play()
            try:
                await call.write(
                    bs.BotMessage(
                        hello=bs.Hello(
                            protocol_version=PROTOCOL_VERSION,
                            name=self.name,
                            token=self.token,
                            games=list(bot.games),
                            client=CLIENT,
                        )
                    )
                )
                welcome = await call.read()
                if welcome is grpc.aio.EOF:
                    raise _Retry("the server closed the stream before welcoming us")
                if welcome.WhichOneof("kind") == "error":
                    raise ArenaError(welcome.error.message)
                self.assigned_name = welcome.welcome.bot_name
                self.session_token = welcome.welcome.session_token
                log.info("arena: connected to %s as %s", self.target, self.assigned_name)
                if opponent:
                    challenge = bs.Challenge(
                        opponent=opponent,
                        game=game or (bot.games[0] if bot.games else "rps"),
                        matches=remaining,
                    )
                    params_to_proto(params, challenge.params)
                    if seat is not None:
                        challenge.seat = seat
                    if time_control is not None:
                        challenge.time_control.CopyFrom(time_control_to_proto(time_control))
                    await call.write(bs.BotMessage(challenge=challenge))
                await self._serve(call, opponent is not None, matches)
            except grpc.aio.AioRpcError as exc:
                if exc.code() in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.CANCELLED,
                    grpc.StatusCode.INTERNAL,
                ):
                    raise _Retry(f"{exc.code().name}: {exc.details()}") from None
                raise ArenaError(f"{exc.code().name}: {exc.details()}") from None
            finally:
                call.cancel()

    async def _serve(self, call: Any, challenging: bool, matches: int) -> None:
        bot = self.bot
        seat = 0
        while True:
            msg = await call.read()
            if msg is grpc.aio.EOF:
                raise _Retry("the server closed the stream")
            kind = msg.WhichOneof("kind")
            if kind == "turn":
                turn = turn_from_proto(msg.turn, seat)
                if msg.turn.moves and bot.wants_updates():
                    bot.on_update(Update(turn.match_id, moves_from_proto(msg.turn.moves), turn.observation))
                try:
                    if self._executor is not None:
                        pending = self._executor.submit(bot.act, turn)
                        try:
                            # A quick bot answers within the spin window: no event-loop round trip.
                            action = pending.result(timeout=QUICK_ACT_SECONDS)
                        except concurrent.futures.TimeoutError:
                            # A slow bot: the loop stays free (pings, match end) until act returns.
                            action = await asyncio.wrap_future(pending)
                    else:
                        action = bot.act(turn)
                except Resign as exc:
                    await call.write(bs.BotMessage(resign=bs.Resign(match_id=turn.match_id, reason=str(exc))))
                    continue
                except Exception as exc:
                    log.error("arena: act raised:\n%s", traceback.format_exc())
                    await call.write(
                        bs.BotMessage(resign=bs.Resign(match_id=turn.match_id, reason=f"act raised {exc!r}"))
                    )
                    continue
                await call.write(
                    bs.BotMessage(action=bs.Action(match_id=turn.match_id, turn_id=turn.turn_id, action=int(action)))
                )
            elif kind == "update":
                bot.on_update(update_from_proto(msg.update))
            elif kind == "match_started":
                info = match_info_from_proto(msg.match_started)
                seat = info.seat
                bot.on_match_start(info)
            elif kind == "match_ended":
                result = result_from_proto(msg.match_ended)
                if result.moves and bot.wants_updates():
                    bot.on_update(Update(result.match_id, result.moves, result.observation))
                bot.on_match_end(result)
                self.results.append(result)
                log.info("arena: match %s ended: %s (%s)", result.match_id, result.returns, result.reason)
                if challenging and len(self.results) >= matches:
                    return
            elif kind == "ping":
                await call.write(bs.BotMessage(pong=bs.Pong(nonce=msg.ping.nonce)))
            elif kind == "error":
                if msg.error.fatal:
                    raise ArenaError(msg.error.message)
                log.warning("arena: server says: %s", msg.error.message)
            elif kind == "challenge_status":
                status = msg.challenge_status
                if status.state == bs.ChallengeStatus.STATE_REFUSED:
                    raise ArenaError(f"challenge refused: {status.reason}")
                if status.state == bs.ChallengeStatus.STATE_DONE and challenging and len(self.results) >= matches:
                    return
