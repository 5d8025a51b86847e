"""``arena.v1.GameService``: the games this server runs and their parameters."""

from __future__ import annotations

from typing import Any

from arena.v1 import games_pb2 as gp
from arena.v1 import games_pb2_grpc as gp_grpc
from arena_client.convert import (
    param_value,
)
from arena_games import registered_games


class GameServicer(gp_grpc.GameServiceServicer):
    async def ListGames(self, request: gp.ListGamesRequest, context: Any) -> gp.ListGamesResponse:  # type: ignore[override]
        return list_games_proto()


def list_games_proto() -> gp.ListGamesResponse:
    out = gp.ListGamesResponse()
    for name, cls in registered_games().items():
        info = out.games.add(
            name=name,
            title=cls.title,
            rules=cls.rules,
            min_players=cls.min_players,
            max_players=cls.max_players,
        )
        for spec in cls.param_specs:
            p = info.params.add(name=spec.name, type=spec.type.__name__, description=spec.description)
            p.choices.extend(spec.choices)
            if spec.min is not None:
                p.min = spec.min
            if spec.max is not None:
                p.max = spec.max
            param_value(spec.default, p.default)
    return out
