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

Without an address Ray joins the cluster named by the environment variable
``RAY_ADDRESS`` when it is set (Ray's own convention), and otherwise starts a
local cluster (one worker per CPU); with one it joins that cluster
(``host:6379``, ``ray://host:10001`` or ``auto``); ``local`` always starts a
local cluster. Every node needs Arena installed, as the workers import it to
play.
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


ADDRESS_VARIABLE = "RAY_ADDRESS"
"""The environment variable that points Ray's tools, and ``--ray`` without ADDRESS, at an existing cluster."""


def cluster_address(address: str | None) -> tuple[str | None, bool]:
    """The cluster that ``--ray [ADDRESS]`` joins: ``(address, from_environment)``, address None for a local cluster.

    ADDRESS when given; without it, ``RAY_ADDRESS`` when that is set and not empty
    (``from_environment`` is then True). ``local`` from either means a local cluster.
    """
    from_environment = False
    if not address:
        address = os.environ.get(ADDRESS_VARIABLE, "").strip()
        from_environment = bool(address)
    if not address or address == "local":
        return None, False
    return address, from_environment


def _advice(from_environment: bool) -> str:
    """What to check, for a message about an address that did not work."""
    if from_environment:
        return (
            f"check {ADDRESS_VARIABLE} and that the cluster is running, or unset {ADDRESS_VARIABLE} "
            "(or give --ray local) for a local cluster"
        )
    if os.environ.get(ADDRESS_VARIABLE, "").strip():  # leaving out ADDRESS would join that cluster instead
        return "check the address and that the cluster is running, or give --ray local for a local cluster"
    return "check the address and that the cluster is running, or leave out ADDRESS for a local cluster"


def _named(address: str, from_environment: bool) -> str:
    return f"{address} from {ADDRESS_VARIABLE}" if from_environment else address


def check_reachable(address: str, timeout: float = REACH_TIMEOUT, from_environment: bool = False) -> None:
    """Check that ``address`` (``host:port`` or ``ray://host:port``) accepts a TCP connection and answers HTTP/2 (gRPC).

    Each step (connecting, the answer) has ``timeout`` seconds; ``ray.init`` alone would retry for minutes.

    ``auto`` (a cluster found on this machine) and addresses without a port are left to Ray.
    ``from_environment`` (the address came from ``RAY_ADDRESS``) makes the message name that variable.

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
            f"cannot reach the Ray cluster at {_named(address, from_environment)} ({reason}); "
            + _advice(from_environment)
        )


def _refused_token(exc: BaseException) -> bool:
    """Whether ``ray.init`` failed because the cluster wants an authentication token that this process did not give."""
    seen: BaseException | None = exc
    for _ in range(8):  # the chain of causes, bounded
        if seen is None:
            return False
        if type(seen).__name__ == "AuthenticationError" or "InvalidAuthToken" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def connect(address: str | None) -> tuple[Any, str]:
    """Import Ray and join a cluster or start a local one; return Ray and which cluster it is, for messages.

    The cluster is the one :func:`cluster_address` names: ``address``, else
    ``RAY_ADDRESS``, else a local cluster started here with one worker per
    usable CPU. An address is checked with :func:`check_reachable` first.

    Raises:
        RayUnavailable: Ray is missing, the address cannot be reached or joined, or a local cluster cannot start.
    """
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--ray needs Ray: install the optional extra with pip install 'arena[ray]'") from None
    address, from_environment = cluster_address(address)
    if address is not None:
        check_reachable(address, from_environment=from_environment)
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    try:
        if not ray.is_initialized():
            if address is None:
                # "local": a new cluster even when RAY_ADDRESS is set or `ray start` ran on this machine
                ray.init(address="local", num_cpus=len(os.sched_getaffinity(0)), **options)
            else:
                ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
        if address is None:
            raise RayUnavailable(f"cannot start a local Ray cluster: {exc}") from None
        if _refused_token(exc):
            raise RayUnavailable(
                f"the Ray cluster at {_named(address, from_environment)} uses token authentication and refused "
                "this process: set RAY_AUTH_MODE=token, and give the cluster's token in RAY_AUTH_TOKEN or "
                "~/.ray/auth_token"
            ) from None
        raise RayUnavailable(
            f"cannot join the Ray cluster at {_named(address, from_environment)}: {exc}; {_advice(from_environment)}"
        ) from None
    return ray, "a local cluster" if address is None else f"the cluster at {_named(address, from_environment)}"


class RayPool:
    """Runs independent calls (training repetitions, experiment games) as Ray tasks, one CPU each.

    The caller keeps whatever writes files or the database; this only ships
    the calls out and hands their results back as they finish.
    """

    def __init__(self, address: str | None = None) -> None:
        """Join the cluster at ``address`` (else ``RAY_ADDRESS``), or start a local one (see :func:`connect`).

        Raises:
            RayUnavailable: Ray is missing or the address cannot be reached.
        """
        self.ray: Any
        self.ray, self.where = connect(address)

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
        """Disconnect: a local cluster started here stops, a cluster joined keeps running."""
        self.ray.shutdown()


class RayMatches:
    """Plays tournament slots as Ray tasks; ``slots_at_once`` is how many the cluster runs together."""

    def __init__(self, address: str | None = None) -> None:
        """Join the cluster at ``address`` (else ``RAY_ADDRESS``), or start a local one (see :func:`connect`).

        Raises:
            RayUnavailable: Ray is missing or the address cannot be reached.
        """
        self.ray: Any
        self.ray, self.where = connect(address)
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
        """Disconnect: a local cluster started here stops, a cluster joined keeps running."""
        self.ray.shutdown()
