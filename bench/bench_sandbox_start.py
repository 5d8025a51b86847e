"""Start-up cost of the bot sandbox: N starts of a trivial bot (``true``), old isolation vs new.

"old" is the isolation before issue 12 (user+PID+network namespaces through ``unshare``,
limits through ``prlimit``); "new" is what :func:`probe_isolation` picks on this machine
(the private root, nested user namespace, Landlock and seccomp of ``sandbox_launcher``).

Usage: python bench/bench_sandbox_start.py [N]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time

from arena_server.seats.sandbox import (
    DEFAULT_PATH,
    Isolation,
    Limits,
    bot_environment,
    build_launch,
    probe_isolation,
    resolve_user,
)


def old_isolation(limits: Limits) -> Isolation:
    user = resolve_user(limits.run_as)
    unshare = shutil.which("unshare", path=DEFAULT_PATH)
    assert unshare is not None
    uid, gid = (os.geteuid(), os.getegid()) if user is None else (user[1], user[2])
    prefix = (
        unshare,
        "--user",
        f"--map-user={uid}",
        f"--map-group={gid}",
        "--net",
        "--pid",
        "--fork",
        "--kill-child",
        "--",
    )
    return Isolation(prefix, user, True, True, "old", None if user is None else (user[1], user[2]))


async def starts(isolation: Isolation, limits: Limits, n: int) -> list[float]:
    scratch = tempfile.mkdtemp()
    os.chmod(scratch, 0o777)
    times = []
    try:
        for _ in range(n):
            spec = build_launch(["true"], None, bot_environment(scratch), limits, isolation, scratch=scratch)
            started = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                *spec.argv,
                cwd=spec.cwd,
                env=spec.env,
                preexec_fn=spec.preexec,
                **spec.popen_kwargs,  # type: ignore[arg-type]
            )
            assert await proc.wait() == 0
            times.append(time.perf_counter() - started)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return times


async def main(n: int) -> None:
    limits = Limits()
    new = await probe_isolation(limits)
    for name, isolation in (("old", old_isolation(limits)), ("new", new), ("old", old_isolation(limits)), ("new", new)):
        t = await starts(isolation, limits, n)
        print(
            f"{name}: {n} starts, mean {statistics.mean(t) * 1000:.1f} ms, "
            f"median {statistics.median(t) * 1000:.1f} ms, "
            f"p95 {sorted(t)[int(n * 0.95) - 1] * 1000:.1f} ms ({isolation.filesystem})",
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
