"""Arena's rules engines: pure game logic with no I/O, no asyncio and no RNG.

Import this package to register every game, then use :func:`load_game`.
"""

from arena_games import dots_and_boxes as _dots_and_boxes  # noqa: F401  (registers the game)
from arena_games import liars_dice as _liars_dice  # noqa: F401  (registers the game)
from arena_games import rps as _rps  # noqa: F401  (registers the game)
from arena_games import tic_tac_toe as _tic_tac_toe  # noqa: F401  (registers the game)
from arena_games.core import (
    CHANCE,
    SIMULTANEOUS,
    TERMINAL,
    Game,
    GameError,
    History,
    IllegalActionError,
    ParameterError,
    ParamSpec,
    ParamValue,
    State,
    describe_actions,
    load_game,
    register_game,
    registered_games,
)

__all__ = [
    "CHANCE",
    "SIMULTANEOUS",
    "TERMINAL",
    "Game",
    "GameError",
    "History",
    "IllegalActionError",
    "ParamSpec",
    "ParamValue",
    "ParameterError",
    "State",
    "describe_actions",
    "load_game",
    "register_game",
    "registered_games",
]
