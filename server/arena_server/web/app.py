"""The web application: read-only pages over the store and the hub, and two live feeds (Server-Sent Events).

Pages (HTML, usable without JavaScript except the replay stepper and the live viewer):

* ``/``: rating pools, running matches, recent matches.
* ``/leaderboard/{pool}``: rating with its interval bar, games, score, last active,
  paused bots marked; sortable (``?sort=&order=``, links) and paged; live updates
  through ``/leaderboard/{pool}/events`` and the ``/leaderboard/{pool}/rows`` fragment.
* ``/crosstable/{pool}``: the pairs' mean scores as a heatmap; a cell opens the pair's matches.
* ``/bot/{name}``: language, versions with their self-check reports, failures with
  reasons, standings, rating history chart, recent matches, head-to-head.
* ``/matches``: matches by bot, opponent and game, paged by id.
* ``/match/{id}``: header, seed commitment (the seed after the end), replay viewer fed by
  ``/match/{id}/frames.json`` (stored) or ``/match/{id}/events`` (live, the hub's spectator feed).

Every route is a GET: nothing here changes state (other methods get 405). Lists are
paged with the gRPC services' caps; the viewers of a live match share one
subscription to the hub's bounded spectator feed (:mod:`.live`); at most
:data:`MAX_LIVE_STREAMS` streams are open at once.
"""

from __future__ import annotations

import asyncio
import shlex
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import arena_server.ratings.fit as rt
import arena_server.store.ratings as ls
from arena_client import Termination
from arena_server.bots.failures import list_failures
from arena_server.bots.registry import bot_details
from arena_server.matches.hub import Hub
from arena_server.referee.records import MatchRecord
from arena_server.store.database import Store
from arena_server.web import charts, frames
from arena_server.web.live import HEARTBEAT, LiveFeeds, event

HERE = Path(__file__).parent
PAGE_SIZE = 100
"""Leaderboard rows per page (``?per=`` up to :data:`MAX_PAGE_SIZE`)."""
MAX_PAGE_SIZE = 1000
MATCHES_PER_PAGE = 50
CROSSTABLE_BOTS = 30
"""Bots (the best rated) shown in the heatmap by default; ``?top=`` up to :data:`MAX_CROSSTABLE_BOTS`."""
MAX_CROSSTABLE_BOTS = 100
HISTORY_MATCHES = 500
"""Rated matches drawn in a bot's rating history."""
MAX_LIVE_STREAMS = 1000
"""Server-Sent Event streams open at once (live matches and leaderboards together)."""
LEADERBOARD_POLL = 0.5
"""Seconds between two looks at a pool's match count by a live leaderboard stream."""

SORT_KEYS: dict[str, Callable[[ls.LeaderRow], Any]] = {
    "rank": lambda r: r.rank,
    "bot": lambda r: r.bot.lower(),
    "rating": lambda r: r.rating,
    "ci": lambda r: r.ci,
    "games": lambda r: r.games,
    "score": lambda r: r.score / r.games if r.games else 0.0,
    "last_active": lambda r: r.last_active or "",
}
"""Leaderboard columns one may sort by; ``rank`` (the rating order) ascending is the default."""


class PageError(Exception):
    """A request the pages refuse: the status and a one-line message saying what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def build_app(hub: Hub) -> Starlette:
    """The Starlette application serving ``hub`` and its store."""
    site = Site(hub)
    routes = [
        Route("/", site.page(site.index)),
        Route("/leaderboard/{pool}", site.page(site.leaderboard)),
        Route("/leaderboard/{pool}/rows", site.page(site.leaderboard_rows)),
        Route("/leaderboard/{pool}/events", site.leaderboard_events),
        Route("/crosstable/{pool}", site.page(site.crosstable)),
        Route("/bot/{name}", site.page(site.bot)),
        Route("/matches", site.page(site.matches)),
        Route("/match/{match_id}", site.page(site.match)),
        Route("/match/{match_id}/frames.json", site.frames_json),
        Route("/match/{match_id}/events", site.match_events),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(ServerTiming)])
    app.state.site = site  # benchmarks and tests read its counters (live_streams)
    return app


class ServerTiming:
    """Adds ``Server-Timing: app;dur=<ms>`` to every response: the time from the request to the response's start.

    For a page that is the whole of the server's work (queries and template); browsers
    show it in their developer tools, and bench/bench_web.py reads it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()

        async def timed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                took = (time.perf_counter() - began) * 1000
                message["headers"] = [*message.get("headers", []), (b"server-timing", f"app;dur={took:.2f}".encode())]
            await send(message)

        await self.app(scope, receive, timed_send)


def _returns(values: Sequence[float] | None) -> str:
    """A match's returns as "20 : -20": no trailing ".0" and never "-0" (issue 18: numbers as people write them)."""
    return " : ".join(f"{v + 0.0:g}" for v in values or ())


def _quote(value: str) -> str:
    return urllib.parse.quote(str(value), safe="")


class Site:
    """The handlers, sharing the hub, the templates and the count of open live streams."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))
        self.env.filters["q"] = _quote
        self.env.filters["pct"] = lambda v: f"{100 * v:.1f}%"
        self.env.filters["returns"] = _returns
        self.env.globals["interval_bar"] = charts.interval_bar
        self.env.globals["heat_colour"] = charts.heat_colour
        self.live_streams = 0
        self.live = LiveFeeds(hub)

    # -- plumbing -----------------------------------------------------------------------------------

    def page(self, handler: Callable[[Request], Coroutine[Any, Any, str]]) -> Callable[[Request], Any]:
        """Wrap a handler that returns HTML: a :class:`PageError` becomes an error page with its status."""

        async def endpoint(request: Request) -> Response:
            try:
                return HTMLResponse(await handler(request))
            except PageError as exc:
                body = self.render("error.html", status=exc.status, message=str(exc))
                return HTMLResponse(body, status_code=exc.status)

        return endpoint

    def render(self, template: str, **values: Any) -> str:
        return self.env.get_template(template).render(**values)

    def store(self) -> Store:
        if self.hub.store is None:
            raise PageError(503, "this server keeps no database, so there is nothing to show; start it with --db")
        return self.hub.store

    async def pool(self, request: Request) -> ls.PoolInfo:
        key = request.path_params["pool"]
        info = await ls.pool_info(self.store().conn, key)
        if info is None:
            known = ", ".join(p.pool for p in await ls.list_pools(self.store().conn)) or "none yet"
            raise PageError(404, f"no rated matches in pool {key!r}; pools: {known}")
        return info

    # -- pages --------------------------------------------------------------------------------------

    async def index(self, request: Request) -> str:
        store = self.store()
        pools = await ls.list_pools(store.conn)
        playing = [r for r in self.hub.running.values() if not r.committed][:MATCHES_PER_PAGE]
        live = [frames.match_header(r.record, True) for r in playing]
        if self.hub.peers is not None:  # a multi-worker server: the workers' matches, from the database
            elsewhere = await store.list_matches(ids=self.hub.peers.running_ids(), limit=MATCHES_PER_PAGE - len(live))
            live += [frames.match_header(r, True) for r in elsewhere if r.termination is None]
        recent = await store.list_matches(limit=20)
        return self.render(
            "index.html",
            pools=pools,
            live=live,
            recent=[self._match_row(r) for r in recent],
            bots=self.hub.all_bot_names(),
        )

    async def _leader_table(self, request: Request, info: ls.PoolInfo) -> dict[str, Any]:
        sort = request.query_params.get("sort", "rank")
        if sort not in SORT_KEYS:
            raise PageError(400, f"sort={sort!r} is not a column; use one of {', '.join(SORT_KEYS)}")
        order = request.query_params.get("order", "asc" if sort in ("rank", "bot") else "desc")
        if order not in ("asc", "desc"):
            raise PageError(400, f"order={order!r}: use asc or desc")
        page = _int_param(request, "page", 1, 1, 1_000_000)
        per = _int_param(request, "per", PAGE_SIZE, 1, MAX_PAGE_SIZE)
        rows = await ls.leaderboard(self.store().conn, info.pool, 1_000_000)
        low = min((r.rating - r.ci for r in rows), default=1400.0)
        high = max((r.rating + r.ci for r in rows), default=1600.0)
        rows.sort(key=SORT_KEYS[sort], reverse=order == "desc")
        pages = max(1, -(-len(rows) // per))
        shown = rows[(page - 1) * per : page * per]
        return {
            "pool": info,
            "rows": shown,
            "low": low,
            "high": high,
            "sort": sort,
            "order": order,
            "page": page,
            "pages": pages,
            "per": per,
            "total": len(rows),
            "components": len({r.component for r in rows}),
        }

    async def leaderboard(self, request: Request) -> str:
        info = await self.pool(request)
        return self.render("leaderboard.html", **await self._leader_table(request, info))

    async def leaderboard_rows(self, request: Request) -> str:
        info = await self.pool(request)
        return self.render("leader_rows.html", **await self._leader_table(request, info))

    async def crosstable(self, request: Request) -> str:
        info = await self.pool(request)
        conn = self.store().conn
        top = _int_param(request, "top", CROSSTABLE_BOTS, 2, MAX_CROSSTABLE_BOTS)
        rows = await ls.leaderboard(conn, info.pool, top)
        names = [r.bot for r in rows]
        rating = {r.bot: r.rating for r in rows}
        wanted = set(names)
        cells: dict[tuple[str, str], dict[str, Any]] = {}
        for p in await ls.crosstable(conn, info.pool):
            if p.a not in wanted or p.b not in wanted:
                continue
            for me, other, flip in ((p.a, p.b, False), (p.b, p.a, True)):
                wins, losses = (p.losses_a, p.wins_a) if flip else (p.wins_a, p.losses_a)
                mean, lo, hi = rt.score_interval(p.games, wins, p.draws, losses)
                cells[(me, other)] = {
                    "games": p.games,
                    "mean": mean,
                    "low": lo,
                    "high": hi,
                    "wins": wins,
                    "draws": p.draws,
                    "losses": losses,
                    "expected": rt.expected_score(rating[me], rating[other]),
                }
        return self.render("crosstable.html", pool=info, names=names, cells=cells, top=top)

    async def bot(self, request: Request) -> str:
        name = request.path_params["name"]
        store = self.store()
        conn = store.conn
        hosted = self.hub.hosted.get(name)
        details = await bot_details(store, name)
        standings = await ls.bot_standings(conn, name)
        recent = await store.list_matches(bot=name, limit=20)
        if hosted is None and details is None and not standings and not recent and not self._connected(name):
            raise PageError(404, f"no bot named {name!r} has played here or is registered; see the leaderboards")
        failures = await list_failures(conn, name, 20)
        pool = request.query_params.get("pool") or (standings[0].pool if standings else "")
        standing = next((s for s in standings if s.pool == pool), None)
        if pool and standing is None and standings:
            raise PageError(
                404, f"{name} has no rating in pool {pool!r}; it is rated in {', '.join(s.pool for s in standings)}"
            )
        chart, h2h = Markup(""), []
        if standing is not None:
            ratings = await ls.pool_ratings(conn, standing.pool)
            results = await ls.rated_results(conn, standing.pool, name, HISTORY_MATCHES)
            points = charts.running_ratings(
                [(r.match_id, r.ended_at, r.scores) for r in results], ratings, start=1500.0
            )
            chart = charts.history_chart(points, standing.rating)
            for p in await ls.head_to_head(conn, standing.pool, name):
                mean, lo, hi = rt.score_interval(p.games, p.wins_a, p.draws, p.losses_a)
                expected = rt.expected_score(standing.rating, ratings.get(p.b, 1500.0))
                h2h.append({"opponent": p.b, "pair": p, "mean": mean, "low": lo, "high": hi, "expected": expected})
        paused = (await ls.paused_bots(conn)).get(name)
        return self.render(
            "bot.html",
            name=name,
            facts=self._bot_facts(name, details),
            details=details,
            standings=standings,
            standing=standing,
            chart=chart,
            h2h=h2h,
            failures=failures,
            recent=[self._match_row(r, name) for r in recent],
            paused=paused,
            connected=self._connected(name),
        )

    def _connected(self, name: str) -> bool:
        """Whether a remote bot is connected under ``name`` (to any worker of a multi-worker server)."""
        peers = self.hub.peers
        return name in self.hub.sessions or (peers is not None and peers.connected(name))

    def _bot_facts(self, name: str, details: Any) -> dict[str, str]:
        hosted = self.hub.hosted.get(name)
        if hosted is not None:
            return {
                "kind": "hosted reference bot",
                "language": "Python (runs inside the server)",
                "games": ", ".join(hosted.games) or "every game",
                "description": hosted.description,
            }
        if details is None:
            return {"kind": "guest" if name.startswith("guest-") else "remote", "language": "unknown (plays over gRPC)"}
        accepted = next((v for v in details.versions if v.status == "accepted"), None)
        language = (
            _language(accepted.command) if accepted is not None and accepted.command else "unknown (plays over gRPC)"
        )
        return {
            "kind": details.kind,
            "language": language,
            "games": ", ".join(accepted.games) if accepted is not None and accepted.games else "every game",
            "description": details.description,
            "registered": details.created_at.strftime("%Y-%m-%d %H:%M UTC"),
        }

    async def matches(self, request: Request) -> str:
        bot = request.query_params.get("bot", "")
        opponent = request.query_params.get("opponent", "")
        game = request.query_params.get("game", "")
        if opponent and not bot:
            raise PageError(400, "opponent= needs bot= too (the pair's matches)")
        before = _int_param(request, "before", 0, 0, 2**62)
        records = await self.store().list_matches(game, bot, MATCHES_PER_PAGE, opponent=opponent, before=before)
        older = records[-1].match_id if len(records) == MATCHES_PER_PAGE else ""
        return self.render(
            "matches.html",
            bot=bot,
            opponent=opponent,
            game=game,
            rows=[self._match_row(r, bot) for r in records],
            older=older,
        )

    def _match_row(self, record: MatchRecord, bot: str = "") -> dict[str, Any]:
        running = self._is_running(record.match_id)
        header = frames.match_header(record, running)
        result = ""
        if bot and not running and record.termination not in (None, Termination.ABORTED) and record.returns:
            seat = next((s.seat for s in record.seats if s.bot_name == bot), None)
            if seat is not None:
                fx = ls.match_effects(record.game, tuple(s.bot_name for s in record.seats), tuple(record.returns), "")
                mine = fx.seats[seat]
                result = "win" if mine.win else "draw" if mine.draw else "loss"
        return {**header, "result": result}

    def _is_running(self, match_id: str) -> bool:
        """True while the match plays and until its end is committed to the store (then its seed is public)."""
        live = self.hub.running.get(match_id)
        return live is not None and not live.committed

    async def match(self, request: Request) -> str:
        match_id = request.path_params["match_id"]
        record, running = await self._record(match_id, with_moves=False)
        header = frames.match_header(record, running)
        data = frames.dumps({"header": header, "initial": frames.initial_frame(record)}).replace("</", "<\\/")
        return self.render("match.html", header=header, data=Markup(data))

    async def _record(self, match_id: str, with_moves: bool) -> tuple[MatchRecord, bool]:
        live = self.hub.running.get(match_id)
        if live is not None:  # its end is public once committed (the hub keeps it a moment longer)
            return live.record, not live.committed
        record = await self.store().get_match(match_id, with_moves=with_moves)
        if record is None:
            raise PageError(404, f"no match with id {match_id!r}; see /matches for the stored ones")
        return record, record.termination is None

    # -- JSON and live feeds ------------------------------------------------------------------------

    async def frames_json(self, request: Request) -> Response:
        match_id = request.path_params["match_id"]
        try:
            offset = _int_param(request, "offset", 0, 0, 2**62)
            limit = _int_param(request, "limit", frames.MAX_FRAMES_PER_PAGE, 1, frames.MAX_FRAMES_PER_PAGE)
            record, running = await self._record(match_id, with_moves=True)
        except PageError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        if running:
            return JSONResponse(
                {"error": f"match {match_id} is still running; follow /match/{match_id}/events for its moves"},
                status_code=409,
            )
        page = await asyncio.to_thread(lambda: list(frames.replay_frames(record, offset, limit + 1)))
        return JSONResponse(
            {
                "header": frames.match_header(record, False),
                "offset": offset,
                "frames": page[:limit],
                "more": len(page) > limit,
            }
        )

    def _too_many_streams(self) -> Response | None:
        if self.live_streams >= MAX_LIVE_STREAMS:
            return Response(
                f"{MAX_LIVE_STREAMS} live streams are open on this server; try again later\n",
                status_code=503,
                media_type="text/plain",
            )
        return None

    async def match_events(self, request: Request) -> Response:
        match_id = request.path_params["match_id"]
        refused = self._too_many_streams()
        if refused is not None:
            return refused
        if match_id not in self.hub.running:
            try:
                await self._record(match_id, with_moves=False)
            except PageError as exc:
                return Response(f"{exc}\n", status_code=exc.status, media_type="text/plain")
        return StreamingResponse(self._match_stream(match_id), media_type="text/event-stream", headers=_SSE_HEADERS)

    async def _match_stream(self, match_id: str) -> AsyncIterator[str]:
        self.live_streams += 1
        try:
            async for text in self.live.stream(match_id):
                yield text
        finally:
            self.live_streams -= 1

    async def leaderboard_events(self, request: Request) -> Response:
        refused = self._too_many_streams()
        if refused is not None:
            return refused
        try:
            info = await self.pool(request)
        except PageError as exc:
            return Response(f"{exc}\n", status_code=exc.status, media_type="text/plain")
        return StreamingResponse(self._pool_stream(info), media_type="text/event-stream", headers=_SSE_HEADERS)

    async def _pool_stream(self, info: ls.PoolInfo) -> AsyncIterator[str]:
        """A ``changed`` event whenever the pool's results or its fit change (checked every half second)."""
        self.live_streams += 1
        try:
            seen = (info.matches, info.fitted_at)
            yield event("hello", {"matches": info.matches, "fitted_at": info.fitted_at})
            quiet = 0.0
            while True:
                await asyncio.sleep(LEADERBOARD_POLL)
                now = await ls.pool_info(self.store().conn, info.pool)
                if now is None:
                    return
                if (now.matches, now.fitted_at) != seen:
                    seen = (now.matches, now.fitted_at)
                    quiet = 0.0
                    yield event("changed", {"matches": now.matches, "fitted_at": now.fitted_at})
                else:
                    quiet += LEADERBOARD_POLL
                    if quiet >= HEARTBEAT:
                        quiet = 0.0
                        yield ": keep-alive\n\n"
        finally:
            self.live_streams -= 1


_SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise PageError(400, f"{name}={text!r} is not a whole number; use {low}..{high}") from None
    if not low <= value <= high:
        raise PageError(400, f"{name}={value} is out of range; use {low}..{high}")
    return value


_LANGUAGES = {
    "python": "Python",
    "python3": "Python",
    "pypy3": "Python (PyPy)",
    "node": "JavaScript (Node.js)",
    "deno": "JavaScript (Deno)",
    "java": "Java",
    "ruby": "Ruby",
    "perl": "Perl",
    "Rscript": "R",
    "julia": "Julia",
    "dotnet": ".NET",
    "bash": "shell",
    "sh": "shell",
}


def _language(command: str) -> str:
    """The language of a bot's command, from its interpreter (or "native program" for a binary)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    if not words:
        return "unknown"
    program = Path(words[0]).name
    for prefix, language in _LANGUAGES.items():
        if program == prefix or (program.startswith(prefix) and program[len(prefix) :].replace(".", "").isdigit()):
            return language
    return f"native program ({program})"
