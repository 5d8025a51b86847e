"""Shared fixtures: a real gRPC server on port 0 backed by a real SQLite file."""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest

import arena_bots
from arena_server.api.server import running_server
from arena_server.matches.hub import Hub
from arena_server.store.database import Store
from tests.ray_support import RayHead, running_head

T = TypeVar("T")


def files_named(root: Path | str, pattern: str) -> list[Path]:
    """Every file or folder under ``root`` whose name matches ``pattern`` (``fnmatch``).

    Unlike ``Path.rglob``, a folder that another process removes during the
    walk (``/tmp`` is shared) is skipped instead of raising.
    """
    found = []
    for folder, dirs, files in os.walk(root):
        found.extend(Path(folder, name) for name in (*dirs, *files) if fnmatch.fnmatch(name, pattern))
    return found


@dataclass
class LoopWork:
    """What an event loop was asked to do inside :func:`counting_loop_work`."""

    tasks: int = 0
    timers: int = 0
    """``call_at`` calls (``call_later`` goes through it)."""
    callbacks: int = 0
    """``call_soon`` calls."""


@contextlib.contextmanager
def counting_loop_work(loop: asyncio.AbstractEventLoop) -> Iterator[LoopWork]:
    """Count the tasks created, timers set and callbacks scheduled on ``loop`` inside the block."""
    work = LoopWork()
    previous_factory = loop.get_task_factory()
    call_at, call_soon = loop.call_at, loop.call_soon

    def counting_factory(lp: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        work.tasks += 1
        return asyncio.Task(coro, loop=lp, **kwargs)

    def counting_call_at(when: float, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        work.timers += 1
        return call_at(when, callback, *args, **kwargs)

    def counting_call_soon(callback: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Handle:
        work.callbacks += 1
        return call_soon(callback, *args, **kwargs)

    loop.set_task_factory(counting_factory)
    loop.call_at = counting_call_at  # type: ignore[method-assign,assignment]
    loop.call_soon = counting_call_soon  # type: ignore[method-assign,assignment]
    try:
        yield work
    finally:
        loop.set_task_factory(previous_factory)
        del loop.call_at, loop.call_soon


def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Call ``fn(*args)`` in a fresh thread and return its result (exceptions propagate).

    For synchronous tests that call code using ``asyncio.run`` (the CLI): run on the
    main thread, it would close and unset the main thread's event loop, which the
    async tests of this session share.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn, *args).result()


@dataclass
class LiveServer:
    hub: Hub
    store: Store
    port: int
    db_path: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def channel(self) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(self.address)


@pytest.fixture
async def live_server(tmp_path: Path) -> AsyncIterator[LiveServer]:
    db = tmp_path / "arena.db"
    store = await Store.open(db)
    hub = Hub(store, arena_bots.hosted_bots())
    try:
        async with running_server(hub, port=0) as (_server, port):
            yield LiveServer(hub, store, port, db)
    finally:
        await store.close()


# Every local Ray cluster the run starts (the tests' `--ray` runs, in this process or in a child) keeps its
# session directory, sockets and logs under RAY_TMPDIR, which Ray never cleans up: by default /tmp/ray,
# which grew by a few sessions each run. The run gives them a directory of its own (short: Ray's sockets
# live under it), removed when the run ends; a RAY_TMPDIR set by whoever runs the tests is left alone.
_ray_tmp: str | None = None
if "RAY_TMPDIR" not in os.environ:
    _ray_tmp = os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="arena-ray-")


# One Ray head for the whole run (tests/ray_support.py), started by the first test that asks for it and
# told to stop right after the last one that needs it, so that its idle processes do not share the CPUs
# with the rest of the run (the end of the session waits for it); a test needs it when it takes the
# `ray_head` fixture or carries the `ray_head` mark.
_ray_heads = contextlib.ExitStack()
_ray_head: RayHead | None = None
_last_ray_head_test: str | None = None


@pytest.fixture
def ray_head() -> RayHead:
    """The run's shared Ray head; ``ray_head.environment()`` is the environment of a process that joins it."""
    global _ray_head
    pytest.importorskip("ray", reason="the ray extra is not installed (make installs it)")
    if _ray_head is None:
        _ray_head = _ray_heads.enter_context(running_head(cpus=len(os.sched_getaffinity(0))))
    return _ray_head


def _stop_ray_head() -> None:
    global _ray_head
    _ray_head = None
    _ray_heads.close()


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    global _last_ray_head_test
    for item in items:
        if "ray_head" in getattr(item, "fixturenames", ()) or item.get_closest_marker("ray_head"):
            _last_ray_head_test = item.nodeid


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    global _ray_head
    if item.nodeid == _last_ray_head_test and _ray_head is not None:
        _ray_head.stop_soon()
        _ray_head = None


def pytest_sessionfinish(session: pytest.Session) -> None:
    _stop_ray_head()  # also after a failure or an interrupt that ended the run early
    if _ray_tmp is not None:
        shutil.rmtree(_ray_tmp, ignore_errors=True)
