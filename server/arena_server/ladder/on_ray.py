"""Tournament matches on a Ray cluster (the optional extra ``arena[ray]``): ``arena tournament --ray [ADDRESS]``.

The driver (the ``arena tournament`` process) keeps everything that needs
the database: it computes the schedule, skips the slots already stored
(resumability is the tournament's own: a killed run resumes without
replaying them), seals duplicate seeds, and is the single store writer. Each
match is one Ray task: a hub without a store, in whichever Ray worker process
the cluster picks, plays the slot with its seat order and seed and returns the
finished :class:`~arena_server.referee.records.MatchRecord`. Results stream
back as they finish (:meth:`RayMatches.play` awaits the task's object
reference), and the driver stores each one (with its tournament link) before
it counts it on the one progress bar.

Ray runs on a local cluster when no address is given (one worker per CPU), or
joins an existing cluster (``ray://host:10001`` or ``auto``); every node needs
Arena installed, as the workers import it to play.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from arena_client import TimeControl
from arena_games import Game
from arena_server.referee.records import MatchRecord


class RayUnavailable(Exception):
    """Ray is not installed or the cluster cannot be reached; the message says what to do."""


def _play_slot(game: Game, seating: tuple[str, ...], tc: TimeControl, seed: str, sealed: bool) -> MatchRecord:
    """One tournament match in this (Ray worker) process, with a hub of hosted bots and no store."""
    from arena_bots import hosted_bots
    from arena_server.matches.hub import Hub

    async def play() -> MatchRecord:
        hub = Hub(None, hosted_bots())
        try:
            if sealed:  # a duplicate set's seed: the bots of this match must not learn it at its end
                async with hub.sealed_seed(seed, lambda: False):
                    running = await hub.start_match(game, list(seating), tc, seed, rated=False)
                    assert running.task is not None
                    return await running.task
            running = await hub.start_match(game, list(seating), tc, seed, rated=False)
            assert running.task is not None
            return await running.task
        finally:
            await hub.shutdown()

    return asyncio.run(play())


def _warm(game: Game, bots: tuple[str, ...]) -> int:
    """Import the bots and compile their kernels in this Ray worker: one short match per bot against itself."""
    from arena_bots import hosted_bots
    from arena_server.matches.hub import Hub

    async def play() -> None:
        hub = Hub(None, hosted_bots())
        try:
            for bot in bots:
                running = await hub.start_match(game, [bot] * game.num_players, rated=False)
                assert running.task is not None
                await running.task
        finally:
            await hub.shutdown()

    asyncio.run(play())
    return os.getpid()


REACH_TIMEOUT = 5.0
"""Seconds for each step of the address check (``ray.init`` alone retries for minutes)."""


def check_reachable(address: str, timeout: float = REACH_TIMEOUT) -> None:
    """Check that ``address`` (``host:port`` or ``ray://host:port``) accepts a TCP connection and answers HTTP/2 (gRPC).

    Each step (connecting, the answer) has ``timeout`` seconds; ``ray.init`` alone would retry for minutes.

    ``auto`` (a cluster found on this machine) and addresses without a port are left to Ray.

    Raises:
        RayUnavailable: nothing answers at the address within the timeout.
    """
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if address == "auto" or not sep or not port.isdigit():
        return
    host = host.strip("[]") or "127.0.0.1"
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as conn:
            # Ray's head (GCS) and client server speak gRPC, that is HTTP/2: send the client preface and an
            # empty SETTINGS frame, and wait for the server's SETTINGS frame (9-byte header, type 4)
            conn.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            header = b""
            while len(header) < 9:
                chunk = conn.recv(9 - len(header))
                if not chunk:
                    break
                header += chunk
        reason = "" if len(header) == 9 and header[3] == 4 else "something answers there, but not with gRPC"
    except TimeoutError:
        reason = f"no gRPC answer within {timeout:g} s"
    except OSError as exc:
        reason = exc.strerror or str(exc)
    if reason:
        raise RayUnavailable(
            f"cannot reach the Ray cluster at {address} ({reason}); "
            "check the address and that the cluster is running, or leave out ADDRESS for a local cluster"
        )


def connect(address: str | None) -> Any:
    """Import Ray and join the cluster at ``address``, or start a local one (one worker per usable CPU) when None.

    Raises:
        RayUnavailable: Ray is missing or the address cannot be reached.
    """
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--ray needs Ray: install the optional extra with pip install 'arena[ray]'") from None
    if address:
        check_reachable(address)
    try:
        if not ray.is_initialized():
            ray.init(
                address=address,
                num_cpus=None if address else len(os.sched_getaffinity(0)),  # local: the CPUs we may use
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise RayUnavailable(f"cannot reach the Ray cluster at {address}: {exc}; check the address") from None
    return ray


class RayPool:
    """Runs independent calls (training repetitions, experiment games) as Ray tasks, one CPU each.

    The caller keeps whatever writes files or the database; this only ships
    the calls out and hands their results back as they finish.
    """

    def __init__(self, address: str | None = None) -> None:
        """Connect to the cluster at ``address``, or start a local one when None.

        Raises:
            RayUnavailable: Ray is missing or the address cannot be reached.
        """
        self.ray: Any = connect(address)

    @property
    def cpus(self) -> int:
        """The cluster's CPUs (how many calls run at once)."""
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def map_unordered(self, fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> Iterator[Any]:
        """Run ``fn(*args)`` for every ``args`` in ``calls`` on the cluster; yield the results as they finish."""
        remote = self.ray.remote(num_cpus=1, max_retries=2)(fn)
        pending = [remote.remote(*args) for args in calls]
        while pending:
            done, pending = self.ray.wait(pending, num_returns=1)
            yield self.ray.get(done[0])

    def close(self) -> None:
        """Disconnect (a local cluster started here stops)."""
        self.ray.shutdown()


class RayMatches:
    """Plays tournament slots as Ray tasks; ``slots_at_once`` is how many the cluster runs together."""

    def __init__(self, address: str | None = None) -> None:
        """Connect to the cluster at ``address``, or start a local one when None.

        Raises:
            RayUnavailable: Ray is missing or the address cannot be reached.
        """
        self.ray: Any = connect(address)
        self._remote = self.ray.remote(num_cpus=1, max_retries=2)(_play_slot)

    def warm_up(self, game: Game, bots: tuple[str, ...]) -> None:
        """Before the clock starts: every worker imports the bots and compiles their kernels (numba)."""
        warm = self.ray.remote(num_cpus=1)(_warm)
        self.ray.get([warm.remote(game, bots) for _ in range(self.slots_at_once)])

    @property
    def slots_at_once(self) -> int:
        """The cluster's CPUs (one match per CPU)."""
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    async def play(self, game: Game, seating: tuple[str, ...], tc: TimeControl, seed: str, sealed: bool) -> MatchRecord:
        """Play one slot on the cluster and return its finished record (the driver stores it)."""
        record: MatchRecord = await self._remote.remote(game, seating, tc, seed, sealed)
        return record

    def close(self) -> None:
        """Disconnect (a local cluster started here stops)."""
        self.ray.shutdown()
