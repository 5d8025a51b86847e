"""A Kaggle rock-paper-scissors agent that plays an Arena hosted bot (the template of ``arena export kaggle``).

``arena export kaggle BOT`` writes this file with ``BOT_NAME`` set and ``BUNDLE`` holding
Arena's rules, SDK and reference bots (a base64 zip), so the file runs alone wherever
kaggle-environments runs it, with numpy and numba installed (as on Kaggle). On the first
call it unpacks the bundle into a private temporary folder, puts it first on ``sys.path``
and builds the hosted bot; every call turns Kaggle's ``observation`` into the Arena Turn
the bot would get on an Arena server (it keeps the match's state with Arena's own rules
engine) and returns the bot's action. The agent is ``agent``, the last callable the file
defines, as kaggle-environments picks it.
"""

import base64
import io
import sys
import tempfile
import zipfile
from typing import Any

BOT_NAME = "random"
BUNDLE = ""
SEED = 0

_MATCH: dict[str, Any] = {}


def _unpack() -> None:
    """Unpack the bundle once and make its packages win over any installed Arena (first on ``sys.meta_path``)."""
    import importlib.machinery

    folder = tempfile.mkdtemp(prefix="arena-export-")
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(BUNDLE))) as archive:
        archive.extractall(folder)
    packages = {"arena_bots", "arena_client", "arena_games"}

    class BundleFinder:
        @staticmethod
        def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
            if name.split(".")[0] not in packages:
                return None
            return importlib.machinery.PathFinder.find_spec(name, [folder] if path is None else path)

    sys.meta_path.insert(0, BundleFinder)  # type: ignore[arg-type]
    _MATCH["unpacked"] = folder


def _start(configuration: Any) -> None:
    from datetime import timedelta

    if BUNDLE and "unpacked" not in _MATCH:
        _unpack()
    from arena_bots import hosted_bots
    from arena_client import MatchInfo, SeatInfo, TimeControl
    from arena_games import load_game

    signs = int(configuration.get("signs", 3))
    rounds = max(1, int(configuration.get("episodeSteps", 1000)) - 1)  # Kaggle plays episodeSteps - 1 rounds
    game = load_game("rps", signs=signs, rounds=rounds)
    bot = hosted_bots()[BOT_NAME].factory(SEED)
    per_move = float(configuration.get("actTimeout", 1.0)) or 1.0
    clock = TimeControl(timedelta(seconds=per_move), timedelta(seconds=60), timedelta(0))
    seats = (SeatInfo(0, BOT_NAME, 1, "hosted"), SeatInfo(1, "kaggle-opponent", 1, "kaggle"))
    bot.on_match_start(MatchInfo("kaggle", "rps", dict(game.params), 0, seats, clock, ""))
    _MATCH.update(game=game, state=game.new_initial_state(), bot=bot, last=None, clock=clock)


def _swap(action: int) -> int:
    """Kaggle's sign number for Arena's, and back: with 5 signs Kaggle has Spock 3, Lizard 4; Arena the reverse."""
    return 7 - action if _MATCH["game"].signs == 5 and action in (3, 4) else action


def _act(observation: Any, configuration: Any) -> int:
    from datetime import timedelta

    step = int(observation.get("step", 0))
    if step == 0 or "bot" not in _MATCH:
        _start(configuration)  # first: it unpacks the bundle that the imports below come from
    from arena_client import PublicMove, Turn, Update

    game, state, bot = _MATCH["game"], _MATCH["state"], _MATCH["bot"]
    opponent = observation.get("lastOpponentAction")
    if step > 0 and opponent is not None and _MATCH["last"] is not None:
        moves = (_MATCH["last"], _swap(int(opponent)))
        state.apply_actions(moves)
        if bot.wants_updates():
            public = tuple(PublicMove(s, a, game.action_to_string(s, a)) for s, a in enumerate(moves))
            bot.on_update(Update("kaggle", public, state.observation(0)))
    overage = timedelta(seconds=float(observation.get("remainingOverageTime", 60)))
    legal = tuple(state.legal_actions(0))
    turn = Turn("kaggle", step + 1, 0, state.observation(0), legal, _MATCH["clock"].per_move, overage)
    action = int(bot.act(turn))
    _MATCH["last"] = action
    return _swap(action)


def agent(observation: Any, configuration: Any) -> int:
    """Kaggle's entry point: the hosted bot's action for this step."""
    return _act(observation, configuration)
