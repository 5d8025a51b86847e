"""``arena.v1.MatchService``: create matches, read them (paged), list them, watch them live.

:func:`record_to_proto` and :func:`record_page` turn a :class:`MatchRecord`
into its wire form; the seed shows only once the match has ended.
:func:`record_page_bytes` writes a page as bytes, and ``CreateMatch(wait)`` and
``GetMatch`` send those bytes as they are (:func:`add_to_server` registers the
service with a serializer that passes bytes through), so a page of moves is
never parsed into protobuf objects only to be serialized again.
"""

from __future__ import annotations

import asyncio

import grpc

from arena.v1 import common_pb2 as common
from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client.convert import (
    observation_to_proto,
    params_from_proto,
    params_to_proto,
    seat_to_proto,
    time_control_from_proto,
    time_control_to_proto,
)
from arena_client.wire import serialize, varint
from arena_games import registered_games
from arena_server.api.authority import (
    MAX_MATCHES_PER_CALLER,
    authorize_bots,
    check_chosen_seed,
    check_request_limits,
    peer_host,
)
from arena_server.api.peers import peer_address
from arena_server.api.record_wire import moves_bytes
from arena_server.matches.hub import STOPPING, Hub, HubError
from arena_server.referee.records import MatchRecord
from arena_server.seats.remote import WRITE_TIMEOUT

MAX_MOVES_PER_PAGE = 10_000
"""Most moves one GetMatch reply (or a WatchMatch end event) carries; ask for the rest by move_offset."""


_GRPC_CODES = {
    "unknown_bot": grpc.StatusCode.NOT_FOUND,
    "unknown_match": grpc.StatusCode.NOT_FOUND,
    "unsupported_game": grpc.StatusCode.INVALID_ARGUMENT,
    "bad_params": grpc.StatusCode.INVALID_ARGUMENT,
    "stopping": grpc.StatusCode.UNAVAILABLE,
    "store": grpc.StatusCode.UNAVAILABLE,
    "busy": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "forbidden": grpc.StatusCode.PERMISSION_DENIED,
}


def record_to_proto(record: MatchRecord, running: bool = False) -> mp.MatchRecord:
    """A stored or live match as ``arena.v1.MatchRecord``.

    For a running match the seed stays secret (only its commitment
    ``seed_sha256`` is shown); the seed is revealed once the match has ended,
    finished or aborted. No moves: :func:`record_page` adds a page of them.
    """
    game = record.game
    msg = mp.MatchRecord(
        match_id=record.match_id,
        game=game.name,
        seats=[seat_to_proto(s) for s in record.seats],
        time_control=time_control_to_proto(record.time_control),
        seed_sha256=record.seed_sha256,
        rated=record.rated,
        returns=list(record.returns),
        reason=record.reason,
        move_count=len(record.moves),
        seed_chosen=record.seed_chosen,
    )
    params_to_proto(game.params, msg.params)
    msg.started_at.FromDatetime(record.started_at)
    if running or record.termination is None:
        msg.status = mp.MATCH_STATUS_RUNNING
    else:
        msg.status = mp.MATCH_STATUS_ABORTED if record.termination.name == "ABORTED" else mp.MATCH_STATUS_FINISHED
        msg.termination = int(record.termination)  # type: ignore[assignment]
        if not record.seed_sealed:  # a duplicate set's seed waits for the set's last match
            msg.seed = record.seed
        if record.ended_at is not None:
            msg.ended_at.FromDatetime(record.ended_at)
        if record.offender is not None:
            msg.offender = record.offender
    return msg


FORWARDED_FOR = "arena-forwarded-for"
"""The metadata key of a ``CreateMatch`` another worker of this server passes on, with its caller's address."""


def _forwarded_for(context: grpc.aio.ServicerContext) -> str | None:
    """The caller of a ``CreateMatch`` that another worker passed on: its address, "" when the key comes from
    anywhere but a worker, or None when there is no key (a caller's own request).

    Only the workers' private Unix sockets are trusted with the address (in a directory only the server's
    user can enter): a caller on the network that sends the key is counted as itself. A request with the
    key is never passed on again.
    """
    for key, value in context.invocation_metadata() or ():
        if key == FORWARDED_FOR:
            return str(value) if context.peer().startswith("unix:") else ""
    return None


class MatchServicer(mp_grpc.MatchServiceServicer):
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._recent: dict[str, MatchRecord] = {}
        self.in_flight: dict[str, int] = {}
        """Matches created and not yet ended, per caller address."""

    async def CreateMatch(
        self, request: mp.CreateMatchRequest, context: grpc.aio.ServicerContext
    ) -> mp.CreateMatchResponse:  # type: ignore[override]
        hub = self.hub
        forwarded_for = _forwarded_for(context)
        caller = forwarded_for or peer_host(context.peer())
        try:
            game = hub.resolve_game(request.game, params_from_proto(request.params))
            tc = time_control_from_proto(request.time_control) if request.HasField("time_control") else None
            check_request_limits(game, tc)
            if request.seed:
                check_chosen_seed(hub, list(request.bots))
            await hub.arrivals(request.bots)  # (a bot on its way to another worker is waited for)
            await authorize_bots(hub, list(request.bots), request.bot_tokens)
            worker = hub.match_worker(request.bots) if forwarded_for is None else None
            if worker is not None:
                if hub.stopping:
                    raise HubError("stopping", STOPPING)
                # Its remote bots are all connected to that worker: it referees the match, with no seat relayed
                # and no bot moved. (It counts the match against the caller's limit, as its own.)
                return await self._forward(worker, request, caller, context)  # type: ignore[return-value]
            if self.in_flight.get(caller, 0) >= MAX_MATCHES_PER_CALLER:
                raise HubError(
                    "busy",
                    f"you already have {MAX_MATCHES_PER_CALLER} matches running (the limit per caller); "
                    "wait for one to end",
                )
            self.in_flight[caller] = self.in_flight.get(caller, 0) + 1
            try:
                running = await hub.start_match(
                    game, list(request.bots), tc, request.seed or None, seed_chosen=bool(request.seed)
                )
            except BaseException:
                self._done(caller)
                raise
        except HubError as exc:
            await context.abort(_GRPC_CODES.get(exc.code, grpc.StatusCode.INVALID_ARGUMENT), str(exc))
            raise AssertionError("unreachable") from None
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            raise AssertionError("unreachable") from None
        if running.task is None:
            self._done(caller)
        else:
            running.task.add_done_callback(lambda _task: self._done(caller))
        response = mp.CreateMatchResponse(match_id=running.record.match_id)
        if request.wait and running.task is not None:
            record = await asyncio.shield(running.task)
            # The first page of moves, as GetMatch gives it: a long match's reply stays bounded. The
            # reply is written as bytes: its fields, then the record (field 2) as record_page_bytes wrote it.
            page = await record_page_bytes(record, 0, 0)
            return response.SerializeToString() + b"\x12" + varint(len(page)) + page  # type: ignore[return-value]
        return response

    async def _forward(
        self, worker: int, request: mp.CreateMatchRequest, caller: str, context: grpc.aio.ServicerContext
    ) -> bytes:
        """``request``, made by ``caller``, as worker ``worker`` answers it on its private socket (its reply's
        bytes, or its refusal's status and details)."""
        peers = self.hub.peers
        assert peers is not None
        try:
            with self.hub.pending():  # (a stopping server waits for the other worker's answer)
                async with grpc.aio.insecure_channel(peer_address(peers.socket_dir, worker)) as channel:
                    create = channel.unary_unary(
                        "/arena.v1.MatchService/CreateMatch",
                        request_serializer=mp.CreateMatchRequest.SerializeToString,
                        response_deserializer=None,  # (its bytes, passed on as they are)
                    )
                    reply: bytes = await create(
                        request, metadata=((FORWARDED_FOR, caller),), timeout=context.time_remaining()
                    )
                    return reply
        except grpc.aio.AioRpcError as exc:
            details = exc.details() or exc.code().name
            if exc.code() == grpc.StatusCode.UNAVAILABLE and "the server" not in details:
                details = (
                    f"worker {worker} of this server, to which {', '.join(request.bots)} are connected, did not "
                    f"answer ({details}); try again in a moment"
                )
            await context.abort(exc.code(), details)
            raise AssertionError("unreachable") from None

    def _done(self, caller: str) -> None:
        left = self.in_flight.get(caller, 0) - 1
        if left > 0:
            self.in_flight[caller] = left
        else:
            self.in_flight.pop(caller, None)

    async def GetMatch(self, request: mp.GetMatchRequest, context: grpc.aio.ServicerContext) -> mp.MatchRecord:  # type: ignore[override]
        if request.move_offset < 0 or request.move_limit < 0:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"move_offset={request.move_offset} and move_limit={request.move_limit} must not be negative; "
                "start at move_offset=0 and follow next_move_offset",
            )
        running = self.hub.running.get(request.match_id)
        if running is not None:
            live = running.record.termination is None
            # Bytes, sent as they are (add_to_server), as below.
            page = await record_page_bytes(running.record, request.move_offset, request.move_limit, running=live)
            return page  # type: ignore[return-value]
        record = await self._stored(request.match_id)
        if record is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"no match with id {request.match_id!r}")
            raise AssertionError("unreachable")
        return await record_page_bytes(record, request.move_offset, request.move_limit)  # type: ignore[return-value]

    async def _stored(self, match_id: str) -> MatchRecord | None:
        """A finished match from the store, remembered for the next page.

        Only records whose seed is out are remembered: a duplicate set's match is
        stored with its seed sealed and changes once when the set ends.
        """
        cached = self._recent.get(match_id)
        if cached is not None:
            return cached
        record = await self.hub.store.get_match(match_id) if self.hub.store is not None else None
        if record is not None and record.termination is not None and record.seed:
            self._recent[match_id] = record
            while len(self._recent) > _RECENT_RECORDS:
                del self._recent[next(iter(self._recent))]
        return record

    async def ListMatches(
        self, request: mp.ListMatchesRequest, context: grpc.aio.ServicerContext
    ) -> mp.ListMatchesResponse:  # type: ignore[override]
        limit = request.limit or 20
        if not 1 <= limit <= 1000:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"limit={limit} is out of range; use 1..1000")
        out = mp.ListMatchesResponse()
        if self.hub.store is not None:
            records = await self.hub.store.list_matches(request.game, request.bot, limit)
            counts = await self.hub.store.move_counts([r.match_id for r in records])
            for record in records:
                msg = record_to_proto(record)
                live = self.hub.running.get(record.match_id)
                msg.move_count = len(live.record.moves) if live is not None else counts.get(record.match_id, 0)
                out.matches.append(msg)
        return out

    async def WatchMatch(self, request: mp.WatchMatchRequest, context: grpc.aio.ServicerContext) -> None:  # type: ignore[override]
        match_id = request.match_id
        if not match_id:
            if not request.game:
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, "give a match_id, or a game to follow its next match"
                )
            if request.game not in registered_games():
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"unknown game {request.game!r}; games are: {', '.join(registered_games())}",
                )
            match_id = await self.hub.next_match(request.game)

        async def send(event: mp.MatchEvent) -> None:
            # Every write has a deadline: a spectator that stops reading cannot hold the server's memory.
            try:
                await asyncio.wait_for(context.write(event), WRITE_TIMEOUT)
            except TimeoutError:
                raise _SlowSpectator(
                    f"too slow, dropped: an event could not be written to this spectator within {WRITE_TIMEOUT:g}s; "
                    "read the stream as fast as it comes, or get the record with GetMatch once the match is over"
                ) from None

        try:
            async for kind, payload in self.hub.watch(match_id):
                if kind == "started":
                    await send(mp.MatchEvent(started=record_to_proto(payload, running=True)))
                elif kind == "moves":
                    moves, seen = payload
                    await send(
                        mp.MatchEvent(
                            update=mp.SpectatorUpdate(
                                moves=[common.PublicMove(seat=m.seat, action=m.action, label=m.label) for m in moves],
                                observation=observation_to_proto(seen),
                            )
                        )
                    )
                elif kind == "ended":
                    await send(mp.MatchEvent(ended=await record_page(payload, 0, 0)))
                elif kind == "dropped":
                    raise _SlowSpectator(payload)
        except HubError as exc:
            await context.abort(_GRPC_CODES.get(exc.code, grpc.StatusCode.NOT_FOUND), str(exc))
        except _SlowSpectator as exc:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))


class _SlowSpectator(Exception):
    """A spectator that does not keep up; the message is its final status."""


_RECENT_RECORDS = 4
"""Finished records GetMatch keeps decoded, so paging through a huge match decodes it once."""


_CHUNK_MOVES = 500
"""Moves converted between two yields to the event loop (about 0.3 ms of work; a 10,000-move page takes 6 ms)."""


async def record_page(record: MatchRecord, offset: int, limit: int, running: bool = False) -> mp.MatchRecord:
    """``record`` as ``arena.v1.MatchRecord`` with the moves ``[offset, offset + limit)`` only
    (:func:`record_page_bytes`, parsed)."""
    return mp.MatchRecord.FromString(await record_page_bytes(record, offset, limit, running))


async def record_page_bytes(record: MatchRecord, offset: int, limit: int, running: bool = False) -> bytes:
    """The wire bytes of ``record`` as ``arena.v1.MatchRecord`` with the moves ``[offset, offset + limit)`` only.

    ``limit`` 0 or above :data:`MAX_MOVES_PER_PAGE` means that maximum. The page
    is copied at once (the referee may be appending to a live match's log) and
    written in chunks of :data:`_CHUNK_MOVES` by the compiled encoder
    (:mod:`arena_server.api.record_wire`), yielding to the event loop between
    them, so a huge match never stalls the other matches. (A worker thread
    would hold the GIL against the loop: measured, it slowed a concurrent
    match tenfold.) The record's other fields come first and its moves
    (field 16, repeated) after them: a parser reads the same message as
    protobuf's own serialization of it.
    """
    limit = MAX_MOVES_PER_PAGE if limit <= 0 else min(limit, MAX_MOVES_PER_PAGE)
    log = record.moves
    total = len(log)
    start = min(offset, total)
    stop = min(total, start + limit)
    players, actions = log.players[start:stop], log.actions[start:stop]
    elapsed, legal = log.elapsed_us[start:stop], log.legal[start:stop]
    msg = record_to_proto(record, running=running)
    msg.move_count = total
    msg.next_move_offset = stop if stop < total else 0
    reveal = not running and record.termination is not None
    show_chance = reveal or record.game.chance_is_public
    label = record.game.action_to_string
    parts = [msg.SerializeToString()]
    for chunk in range(0, stop - start, _CHUNK_MOVES):
        if chunk:
            await asyncio.sleep(0)
        end = min(chunk + _CHUNK_MOVES, stop - start)
        parts.append(
            moves_bytes(
                players[chunk:end],
                actions[chunk:end],
                elapsed[chunk:end],
                legal[chunk:end],
                start + chunk,
                show_chance,
                label,
            )
        )
    return b"".join(parts)


def add_to_server(servicer: MatchServicer, server: grpc.aio.Server) -> None:
    """Serve ``arena.v1.MatchService`` with ``servicer``: the generated registration, bytes-aware.

    The same handlers as ``add_MatchServiceServicer_to_server``, except that a
    reply already serialized (a page of moves, :func:`record_page_bytes`) is
    written as it is.
    """
    handlers = {
        "CreateMatch": grpc.unary_unary_rpc_method_handler(
            servicer.CreateMatch, request_deserializer=mp.CreateMatchRequest.FromString, response_serializer=serialize
        ),
        "GetMatch": grpc.unary_unary_rpc_method_handler(
            servicer.GetMatch, request_deserializer=mp.GetMatchRequest.FromString, response_serializer=serialize
        ),
        "ListMatches": grpc.unary_unary_rpc_method_handler(
            servicer.ListMatches, request_deserializer=mp.ListMatchesRequest.FromString, response_serializer=serialize
        ),
        "WatchMatch": grpc.unary_stream_rpc_method_handler(
            servicer.WatchMatch, request_deserializer=mp.WatchMatchRequest.FromString, response_serializer=serialize
        ),
    }
    name = mp.DESCRIPTOR.services_by_name["MatchService"].full_name
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))
    server.add_registered_method_handlers(name, handlers)  # type: ignore[attr-defined]
