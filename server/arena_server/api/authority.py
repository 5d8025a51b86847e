"""What a remote request may ask for, and who may seat whom.

Server caps on clocks, rounds and matches for remote requests (challenges and
CreateMatch), the rule that a chosen seed is only for one's own bots, and the
token check that keeps anyone from seating someone else's bot.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from datetime import timedelta

from arena_client import TimeControl
from arena_games import Game
from arena_server.matches.hub import Hub, HubError
from arena_server.store.database import hash_token

MAX_PER_MOVE = timedelta(seconds=300)
MAX_OVERAGE = timedelta(seconds=600)
MAX_GRACE = timedelta(seconds=5)
MAX_ROUNDS = 100_000
"""Server caps on what a remote request (Challenge, CreateMatch) may ask for; the ladder, tournaments
and the CLI are configured by the operator and not capped."""
MAX_CHALLENGE_MATCHES = 1000
MAX_MATCHES_PER_CALLER = 8
"""CreateMatch matches in flight per caller address."""
RATED_REFUSAL = (
    "challenges are always unrated: rated matches come only from the ladder's own pairings "
    "(register your bot and keep it connected, or submit it, to be paired); send the challenge without rated"
)


def check_request_limits(game: Game, tc: TimeControl | None) -> None:
    """Refuse clocks and sizes beyond the server's caps for remote requests.

    Raises:
        HubError: ``bad_params``, saying which limit and what to use.
    """
    if tc is not None:
        for what, value, cap in (
            ("per-move time", tc.per_move, MAX_PER_MOVE),
            ("overage", tc.overage, MAX_OVERAGE),
            ("grace", tc.grace, MAX_GRACE),
        ):
            if value > cap:
                raise HubError(
                    "bad_params",
                    f"a {what} of {value.total_seconds():g} s is over this server's limit of "
                    f"{cap.total_seconds():g} s; ask for at most that",
                )
    rounds = game.params.get("rounds")
    if isinstance(rounds, int) and not isinstance(rounds, bool) and rounds > MAX_ROUNDS:
        raise HubError(
            "bad_params", f"rounds={rounds} is over this server's limit of {MAX_ROUNDS}; ask for at most that"
        )


def check_chosen_seed(hub: Hub, bot_names: Sequence[str]) -> None:
    """Refuse a caller-chosen seed for a match with a hosted bot (it could replay the bot's randomness).

    Raises:
        HubError: ``bad_params``, naming the hosted bot.
    """
    hosted = [n for n in bot_names if n in hub.hosted]
    if hosted:
        raise HubError(
            "bad_params",
            f"a chosen seed is not allowed against the hosted bot {hosted[0]!r}: its randomness derives from the "
            "seed; leave the seed empty (chosen seeds are only for matches between your own bots)",
        )


def peer_host(peer: str) -> str:
    """The caller's address without its port ("ipv4:127.0.0.1:5123" -> "ipv4:127.0.0.1")."""
    head, sep, tail = peer.rpartition(":")
    return head if sep and tail.isdigit() and head.count(":") >= 1 else peer


async def owns_bot(hub: Hub, name: str, token: str) -> bool:
    """Whether ``token`` proves the right to seat bot ``name``.

    Accepted: the registered bot's token, or the ``Welcome.session_token`` of
    the session connected under ``name`` (the only proof a guest has). Hosted
    bots belong to nobody, so no token proves them.
    """
    if not token or name in hub.hosted:
        return False
    offered = hash_token(token)
    if hub.session_keys.get(name) == offered and name in hub.sessions:
        return True
    elsewhere = hub.elsewhere(name)  # connected to another worker: the directory holds its session's key
    if elsewhere is not None and secrets.compare_digest(elsewhere.key, offered):
        return True
    stored = await hub.store.bot_token_hash(name) if hub.store is not None else None
    return stored is not None and secrets.compare_digest(stored, offered)


async def authorize_bots(hub: Hub, names: Sequence[str], tokens: Mapping[str, str]) -> None:
    """Refuse to seat a bot that is not hosted unless its token is presented.

    Raises:
        HubError: ``forbidden``, naming the bot and the token to send.
    """
    for name in dict.fromkeys(names):
        if name in hub.hosted:
            continue
        connected = name in hub.sessions or hub.elsewhere(name) is not None
        submitted = hub.registry is not None and name in hub.registry.programs
        if not (connected or submitted) and hub.registry is not None:
            # Not loaded here yet (submitted through another worker a moment ago, or `arena bot add`):
            # start_match would load and seat it, so it is judged as loaded.
            await hub.registry.refresh()
            submitted = name in hub.registry.programs
        if not (connected or submitted):
            continue  # unknown: start_match says so
        if not await owns_bot(hub, name, tokens.get(name, "")):
            what = "a connected remote bot" if connected else "a registered bot"
            raise HubError(
                "forbidden",
                f"{name!r} is {what}; seating it needs its token in bot_tokens[{name!r}] (its registered token, "
                "or a guest's Welcome.session_token); without tokens only hosted bots can be matched",
            )
