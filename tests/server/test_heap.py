"""A serving process freezes its start-up heap and collects young garbage in larger batches.

``settle_heap`` runs in a child interpreter (it changes the whole process's
collector, which the test process should not inherit), and ``arena serve`` is
checked as a real server process: what its collector looks like once it has
served and stopped.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

from arena_server.cli.common import YOUNG_GC_THRESHOLD

REPORT = "import atexit, gc; atexit.register(lambda: print('gc', gc.get_freeze_count(), gc.get_threshold()[0]))"


def test_settle_heap_freezes_what_exists_and_still_collects_cycles() -> None:
    code = f"""
import gc, weakref
from arena_server.cli.common import settle_heap
before = gc.get_freeze_count()
settle_heap()
print(before, gc.get_freeze_count() > 1000, gc.get_threshold()[0])

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a  # a cycle: only the collector frees it
alive = weakref.ref(a)
del a, b
junk = []
for _ in range({YOUNG_GC_THRESHOLD} * 3):  # enough allocations for a young collection
    junk.append([])
print(alive() is None)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.split() == ["0", "True", str(YOUNG_GC_THRESHOLD), "True"], out


async def test_arena_serve_settles_its_heap_before_serving(tmp_path: Path) -> None:
    code = f"{REPORT}; import sys; from arena_server.cli import main; sys.exit(main(sys.argv[1:]))"
    server = await asyncio.create_subprocess_exec(
        *(sys.executable, "-c", code, "serve", "--no-http", "--host", "127.0.0.1", "--port", "0", "--no-ladder"),
        *("--db", str(tmp_path / "arena.db")),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert server.stdout is not None
    try:
        first = (await asyncio.wait_for(server.stdout.readline(), 60)).decode()
        assert "serving on 127.0.0.1:" in first, first
    finally:
        server.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(server.communicate(), 60)
    assert server.returncode == 0, err.decode()
    report = [line for line in out.decode().splitlines() if line.startswith("gc ")]
    assert report, out.decode()
    _, frozen, young = report[-1].split()
    assert int(frozen) > 10_000  # grpc, protobuf, numpy and the hosted bots, frozen
    assert int(young) == YOUNG_GC_THRESHOLD
