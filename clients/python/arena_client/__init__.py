"""Arena's Python SDK: subclass :class:`Bot`, implement ``act``, call :func:`run`.

Example::

    from arena_client import Bot, run

    class Rock(Bot):
        name = "my-rock"
        def act(self, turn):
            return 0

    run(Rock(), "localhost:50051", opponent="random", game="rps")
"""

from arena_client import _native

_native.guard()  # before any compiled module can be imported: a stale build must not run (see _native)

from arena_client.bot import Bot, Resign  # noqa: E402
from arena_client.types import (  # noqa: E402
    MatchInfo,
    MatchResult,
    PublicMove,
    SeatInfo,
    Termination,
    TimeControl,
    Turn,
    Update,
)

__all__ = [
    "Bot",
    "MatchInfo",
    "MatchResult",
    "PublicMove",
    "Resign",
    "SeatInfo",
    "Termination",
    "TimeControl",
    "Turn",
    "Update",
    "run",
]


def __getattr__(name: str) -> object:
    # `run` pulls in grpc; import it lazily so in-process bots stay light.
    if name == "run":
        from arena_client.remote import run

        return run
    raise AttributeError(name)
