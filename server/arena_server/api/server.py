"""The gRPC server: every service of :mod:`arena_server.api` on one port, with health and reflection.

:func:`build_server` wires a :class:`~arena_server.matches.hub.Hub` to a grpc.aio
server on a port (0 picks a free one, as tests do).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from arena.v1 import bot_session_pb2 as bs
from arena.v1 import bots_pb2_grpc as bp_grpc
from arena.v1 import games_pb2 as gp
from arena.v1 import games_pb2_grpc as gp_grpc
from arena.v1 import matches_pb2 as mp
from arena_server.api.bot_session import BotSessionServicer
from arena_server.api.bot_session import add_to_server as add_bot_session_service
from arena_server.api.bots import SERVICE_NAME as BOT_SERVICE_NAME
from arena_server.api.bots import BotServicer
from arena_server.api.games import GameServicer
from arena_server.api.ladder import SERVICE_NAME as LADDER_SERVICE_NAME
from arena_server.api.ladder import add_to_server as add_ladder_service
from arena_server.api.matches import MatchServicer
from arena_server.api.matches import add_to_server as add_match_service
from arena_server.matches.hub import Hub

SERVICE_NAMES = (
    bs.DESCRIPTOR.services_by_name["BotSessionService"].full_name,
    gp.DESCRIPTOR.services_by_name["GameService"].full_name,
    mp.DESCRIPTOR.services_by_name["MatchService"].full_name,
    LADDER_SERVICE_NAME,  # issue 5
    BOT_SERVICE_NAME,  # issue 4
)


async def build_server(
    hub: Hub, host: str = "127.0.0.1", port: int = 50051, reuse_port: bool = False
) -> tuple[grpc.aio.Server, int]:
    """Create (not start) the gRPC server; returns it and the bound port.

    ``reuse_port`` lets several worker processes listen on the same port (``arena serve --workers``):
    the kernel spreads the connections over them.

    Raises:
        OSError: the port cannot be bound.
    """
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", 4 * 1024 * 1024),
            ("grpc.so_reuseport", int(reuse_port)),
        ]
    )
    add_bot_session_service(BotSessionServicer(hub), server)
    gp_grpc.add_GameServiceServicer_to_server(GameServicer(), server)
    add_match_service(MatchServicer(hub), server)  # a page of moves is sent as the bytes it was written as
    bp_grpc.add_BotServiceServicer_to_server(BotServicer(hub), server)  # issue 4: bot_service.py
    add_ladder_service(hub, server)  # issue 5: leaderboards, crosstables, replays
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    reflection.enable_server_reflection((*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    return server, bind_port(server, host, port)


def bind_port(server: grpc.aio.Server, host: str, port: int) -> int:
    """Listen on ``host:port`` (0 picks a free port) and return the port.

    Raises:
        OSError: the address cannot be bound, with a message saying so.
    """
    address = f"{host}:{port}"
    try:
        bound = int(server.add_insecure_port(address))
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {address}: {exc}") from exc
    if bound == 0:
        raise OSError(f"cannot listen on {address}: the port is in use or not allowed")
    return bound


@contextlib.asynccontextmanager
async def running_server(
    hub: Hub, host: str = "127.0.0.1", port: int = 0, grace: float = 0.25
) -> AsyncIterator[tuple[grpc.aio.Server, int]]:
    """Start a server for the duration of the block (tests, benchmarks); abort matches on exit.

    After the hub has told every bot and recorded every match, the bots' streams end as a stopping
    server ends them (:meth:`Hub.end_streams`), within ``grace`` seconds; calls still open after
    that (another service's) are cancelled.
    """
    server, bound = await build_server(hub, host, port)
    await server.start()
    try:
        yield server, bound
    finally:
        await hub.shutdown()
        await hub.end_streams(timeout=grace)
        await server.stop(grace=grace)
