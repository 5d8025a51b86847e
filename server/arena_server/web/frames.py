"""Replay frames: one JSON object per step, the same for stored replays and live matches.

A frame is ``{"ply": n, "moves": [[seat, label], ...], "obs": {...}}``: the
moves made since the previous frame and the spectator's view after them
(``state.observation(None)``, the view every game gives a spectator). Chance
outcomes that the game keeps hidden (Liar's Dice rolls) never appear among the
moves; the dice show up in ``obs.past_rounds`` once a round is over, exactly as
the rules reveal them. Live frames are made from the hub's spectator feed
(:meth:`arena_server.matches.hub.Hub.watch`), stored ones from
:func:`arena_server.matches.replay.replay_steps`, so the browser draws both alike.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from arena_client import PublicMove, Termination
from arena_games import CHANCE
from arena_server.matches.replay import replay_steps
from arena_server.referee.records import MatchRecord

MAX_FRAMES_PER_PAGE = 10_000
"""Most frames one request returns (as a GetMatch page holds at most 10,000 moves); ask for the rest by offset."""


def observation_json(observation: Any) -> Any:
    """A game's observation dataclass as plain JSON values (nested dataclasses become objects)."""
    if observation is None:
        return None
    if dataclasses.is_dataclass(observation) and not isinstance(observation, type):
        return dataclasses.asdict(observation)
    return observation


def live_frame(moves: Sequence[PublicMove], observation: Any) -> dict[str, Any]:
    """A frame from one ``("moves", (moves, observation))`` event of the hub's spectator feed."""
    return {"moves": [[m.seat, m.label] for m in moves], "obs": observation_json(observation)}


def replay_frames(record: MatchRecord, offset: int = 0, limit: int = MAX_FRAMES_PER_PAGE) -> Iterator[dict[str, Any]]:
    """Frames ``offset`` .. ``offset + limit - 1`` of a stored match (steps that only roll hidden dice are folded
    into the next frame, so their outcome never shows before the rules reveal it)."""
    game = record.game
    index = 0
    pending: list[list[Any]] = []
    for step in replay_steps(record):
        for player, _action, label in step.actions:
            if player == CHANCE and not game.chance_is_public:
                continue
            pending.append([player, label])
        if not pending:
            continue
        if index >= offset + limit:
            return
        if index >= offset:
            yield {"ply": index + 1, "moves": pending, "obs": observation_json(step.state.observation(None))}
        pending = []
        index += 1


def initial_frame(record: MatchRecord) -> dict[str, Any]:
    """The position before the first move (frame 0)."""
    return {"ply": 0, "moves": [], "obs": observation_json(record.game.new_initial_state().observation(None))}


def match_header(record: MatchRecord, running: bool) -> dict[str, Any]:
    """What the match page shows above the board: seats, status, result, the seed's commitment and, after the
    end, the seed itself (never while the match runs, nor for a duplicate set's seed not yet revealed)."""
    ended = not running and record.termination is not None
    status = "running" if not ended else "aborted" if record.termination == Termination.ABORTED else "finished"
    termination = record.termination.label if ended and record.termination is not None else ""
    return {
        "match_id": record.match_id,
        "game": record.game.name,
        "title": record.game.title,
        "params": dict(record.game.params),
        "seats": [{"seat": s.seat, "bot": s.bot_name, "version": s.bot_version, "kind": s.kind} for s in record.seats],
        "status": status,
        "termination": termination,
        "reason": record.reason if ended else "",
        "offender": record.offender if ended else None,
        "returns": list(record.returns) if ended else [],
        "rated": record.rated,
        "seed_sha256": record.seed_sha256,
        "seed": record.seed if ended and not record.seed_sealed else "",
        "seed_chosen": record.seed_chosen,
        "started_at": _iso(record.started_at),
        "ended_at": _iso(record.ended_at) if ended else "",
    }


def _iso(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment is not None else ""


def dumps(value: Any) -> str:
    """Compact JSON for frames and events."""
    return json.dumps(value, separators=(",", ":"))
