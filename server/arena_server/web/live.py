"""Live matches for many browsers: one subscription to the hub's spectator feed per match, shared.

Every web viewer of a match reads the same :class:`MatchFeed`: it subscribes
once to :meth:`arena_server.matches.hub.Hub.watch` (one listener on the match,
one bounded :class:`~arena_server.matches.hub.SpectatorQueue`, however many
people watch), gathers the moves that arrive within :data:`BATCH_SECONDS` into
one frame, serialises it once and hands the same text to every viewer. So a
hundred viewers cost the match one listener and a few writes every tenth of a
second, not a hundred listeners and a hundred writes per move. Each viewer has
its own bounded backlog (:data:`VIEWER_BACKLOG` events); a viewer that falls
that far behind is dropped with a message saying why. Viewers that join late
get the header, then one catch-up frame with the moves so far (at most
:data:`CATCH_UP_MOVES`) and the current view.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from arena_server.matches.hub import Hub, HubError
from arena_server.web import frames

BATCH_SECONDS = 0.1
"""Moves arriving within this long go out as one frame (the page shows them within a second)."""
VIEWER_BACKLOG = 600
"""Events that may wait for one viewer (a minute of frames); a viewer further behind is dropped."""
CATCH_UP_MOVES = 100_000
"""Most moves a late joiner's catch-up frame carries (the most recent ones)."""
HEARTBEAT = 15.0
"""Seconds between keep-alive comments on a quiet stream."""


class Viewer:
    """One browser's stream of a match: pre-serialised Server-Sent Events, bounded."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.dropped = False

    def send(self, text: str | None) -> None:
        if self.dropped:
            return
        if text is not None and self.queue.qsize() >= VIEWER_BACKLOG:
            self.dropped = True
            while not self.queue.empty():  # free what it did not read; tell it why
                self.queue.get_nowait()
            reason = (
                f"too slow, dropped: this viewer fell {VIEWER_BACKLOG} updates behind; reload the page to "
                "continue from the current position"
            )
            self.queue.put_nowait(event("dropped", {"reason": reason}))
            self.queue.put_nowait(None)
            return
        self.queue.put_nowait(text)


class MatchFeed:
    """The shared live feed of one match (see the module docstring)."""

    def __init__(self, hub: Hub, match_id: str, on_close: Any) -> None:
        self.hub = hub
        self.match_id = match_id
        self.viewers: set[Viewer] = set()
        self.header = ""
        """The latest header event (sent first to every joiner)."""
        self.sent: collections.deque[list[Any]] = collections.deque(maxlen=CATCH_UP_MOVES)
        """Moves already sent in frames, for late joiners."""
        self.sent_obs: Any = None
        self.pending: list[list[Any]] = []
        self.pending_obs: Any = None
        self._flush: asyncio.TimerHandle | None = None
        self._on_close = on_close
        self.closed = False
        self.task = asyncio.ensure_future(self._run())

    def join(self) -> Viewer:
        viewer = Viewer()
        if self.header:
            viewer.send(self.header)
        if self.sent:
            viewer.send(event("frame", {"moves": list(self.sent), "obs": self.sent_obs}))
        self.viewers.add(viewer)
        return viewer

    def leave(self, viewer: Viewer) -> None:
        self.viewers.discard(viewer)
        if not self.viewers and not self.closed:
            self.task.cancel()  # nobody watches: unsubscribe from the match

    def _broadcast(self, text: str | None) -> None:
        for viewer in list(self.viewers):
            viewer.send(text)

    def _flush_now(self) -> None:
        self._flush = None
        if not self.pending:
            return
        obs = frames.observation_json(self.pending_obs)
        text = event("frame", {"moves": self.pending, "obs": obs})
        self.sent.extend(self.pending)
        self.sent_obs = obs
        self.pending = []
        self._broadcast(text)

    async def _run(self) -> None:
        try:
            async for kind, payload in self.hub.watch(self.match_id):
                if kind == "started":
                    live = self.hub.running.get(self.match_id)
                    # (a match another worker runs is not in this hub: it runs until its end is stored)
                    running = not live.committed if live is not None else payload.termination is None
                    self.header = event("header", frames.match_header(payload, running))
                    self._broadcast(self.header)
                elif kind == "moves":
                    moves, observation = payload
                    self.pending.extend([m.seat, m.label] for m in moves)
                    self.pending_obs = observation
                    if self._flush is None:
                        self._flush = asyncio.get_running_loop().call_later(BATCH_SECONDS, self._flush_now)
                elif kind == "ended":
                    self._flush_now()
                    self._broadcast(event("end", frames.match_header(payload, False)))
                elif kind == "dropped":
                    self._flush_now()
                    self._broadcast(event("dropped", {"reason": payload}))
        except HubError as exc:
            self._broadcast(event("dropped", {"reason": str(exc)}))
        finally:
            self.closed = True
            if self._flush is not None:
                self._flush.cancel()
            self._broadcast(None)
            self._on_close(self)


class LiveFeeds:
    """The feeds of the matches being watched, by match id."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.feeds: dict[str, MatchFeed] = {}

    def _closed(self, feed: MatchFeed) -> None:
        if self.feeds.get(feed.match_id) is feed:
            del self.feeds[feed.match_id]

    async def stream(self, match_id: str) -> AsyncIterator[str]:
        """The Server-Sent Events of one viewer of ``match_id``, until the match ends or the viewer leaves."""
        feed = self.feeds.get(match_id)
        if feed is None or feed.closed:
            feed = self.feeds[match_id] = MatchFeed(self.hub, match_id, self._closed)
        viewer = feed.join()
        try:
            while True:
                try:
                    text = await asyncio.wait_for(viewer.queue.get(), HEARTBEAT)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if text is None:
                    return
                yield text
        finally:
            feed.leave(viewer)

    async def close(self) -> None:
        for feed in list(self.feeds.values()):
            feed.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feed.task


def event(kind: str, data: Any) -> str:
    """One Server-Sent Event with a JSON payload."""
    return f"event: {kind}\ndata: {frames.dumps(data)}\n\n"
