"""Run the web application with uvicorn on the server's event loop, beside the gRPC server.

:class:`WebServer` binds its own socket (port 0 picks a free one), so the port is
known before the first request, and drives uvicorn's startup, main loop and
shutdown directly: uvicorn never installs signal handlers, ``arena serve`` keeps
its own (SIGTERM and Ctrl-C stop the whole server).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

import uvicorn
from starlette.applications import Starlette

from arena_server.matches.hub import Hub
from arena_server.web.app import build_app


class WebServer:
    """The HTTP side of ``arena serve``. Create, :meth:`start`, later :meth:`stop`."""

    def __init__(self, hub: Hub, host: str = "127.0.0.1", port: int = 8080) -> None:
        self.hub = hub
        self.host = host
        self.requested_port = port
        self.port = 0
        """The bound port, once started."""
        self.app: Starlette | None = None
        """The application, once started."""
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> int:
        """Listen and serve in the background; returns the bound port.

        Raises:
            OSError: the address cannot be bound, with a message saying which.
        """
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.requested_port))
        except OSError as exc:
            sock.close()
            raise OSError(f"cannot listen for HTTP on {self.host}:{self.requested_port}: {exc.strerror}") from None
        sock.listen(512)
        sock.setblocking(False)
        self._socket = sock
        self.port = int(sock.getsockname()[1])
        self.app = build_app(self.hub)
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        config.load()
        server = uvicorn.Server(config)
        self._server = server
        server.lifespan = config.lifespan_class(config)  # what uvicorn's own serve() sets up before startup()
        await server.startup(sockets=[sock])
        self._task = asyncio.ensure_future(server.main_loop())
        return self.port

    @property
    def url(self) -> str:
        """Where a browser on this machine reaches the pages (a wildcard host is shown as 127.0.0.1), once started."""
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{shown}:{self.port}/"

    async def stop(self) -> None:
        """Close the listening socket and the open connections (live streams end)."""
        server, task = self._server, self._task
        if server is None or task is None:
            return
        if self.app is not None:
            await self.app.state.site.live.close()  # every live viewer's stream ends
        server.should_exit = True
        server.force_exit = True  # live streams never end by themselves; do not wait for them
        with contextlib.suppress(asyncio.CancelledError):
            await task
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.shutdown(sockets=[self._socket] if self._socket else None), 3)
        if self._socket is not None:
            self._socket.close()
        self._server = self._task = self._socket = None
