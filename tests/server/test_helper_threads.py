"""A serving process runs gRPC's helper threads under SCHED_BATCH, and nothing else.

``batch_helper_threads`` is checked in a child interpreter (it changes the
scheduling policy of the process's threads, which the test process should
keep); ``arena serve`` and its ``--workers`` processes are checked from the
outside, through ``/proc``, as real server processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.ladder.test_crash import ROOT, close, serve

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="scheduling policies are Linux only")

SCHED_OTHER, SCHED_BATCH = 0, 3


def policies(pid: int) -> dict[int, tuple[str, int]]:
    """Thread id -> (name, scheduling policy) of every thread of process ``pid``."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except FileNotFoundError:
            continue  # ended meanwhile
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()  # fields[0] is field 3 (state); the policy is field 41
        out[int(tid)] = (name, int(fields[38]))
    return out


def test_batch_helper_threads_leaves_the_calling_thread_and_what_it_starts_normal() -> None:
    code = """
import asyncio, os, subprocess, sys, threading
import grpc
from arena_server.cli.common import batch_helper_threads

def policy(tid):
    return int(open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()[38])

async def main():
    server = grpc.aio.server()
    server.add_insecure_port("127.0.0.1:0")
    await server.start()  # gRPC's helper threads exist now
    print("done", batch_helper_threads())
    me = threading.get_native_id()
    others = sorted({policy(t) for t in map(int, os.listdir("/proc/self/task")) if t != me})
    print("main", policy(me), "others", *others)
    child = subprocess.run([sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"],
                           capture_output=True, text=True, check=True).stdout.split()[0]
    later = []
    thread = threading.Thread(target=lambda: later.append(os.sched_getscheduler(0)))
    thread.start(); thread.join()
    print("child", child, "new-thread", later[0])
    await server.stop(0)

asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "done None", out
    assert lines[1] == f"main {SCHED_OTHER} others {SCHED_BATCH}", out  # every helper thread, and only they
    assert lines[2] == f"child {SCHED_OTHER} new-thread {SCHED_OTHER}", out  # bots and later threads: normal


@pytest.mark.parametrize("policy", ["batch", "normal"])
def test_arena_serve_runs_its_helper_threads_under_the_chosen_policy(tmp_path: Path, policy: str) -> None:
    args = ["--no-ladder"] if policy == "batch" else ["--no-ladder", "--helper-threads", "normal"]
    proc = serve(tmp_path / "arena.db", *args)
    try:
        threads = policies(proc.pid)
    finally:
        proc.terminate()
        err = close(proc)
    assert "--helper-threads" not in err, err  # applied without a warning
    main = threads.pop(proc.pid)
    assert main[1] == SCHED_OTHER, main  # the event loop's thread, whose children are the bots
    names = {name for name, _ in threads.values()}
    assert "event_engine" in names, names  # gRPC core's I/O threads are among them
    want = SCHED_BATCH if policy == "batch" else SCHED_OTHER
    assert {p for _, p in threads.values()} == {want}, threads


def test_each_worker_runs_its_helper_threads_batch(tmp_path: Path) -> None:
    proc = serve(tmp_path / "arena.db", "--workers", "2", "--no-ladder")
    try:
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(proc.pid)], capture_output=True, text=True)
        children = [int(pid) for pid in out.stdout.split()]
        # (multiprocessing's resource tracker is a child too)
        workers = [pid for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        seen = {pid: policies(pid) for pid in workers}
    finally:
        proc.terminate()
        close(proc)
    assert len(workers) == 2, out
    for pid, threads in seen.items():
        assert threads.pop(pid)[1] == SCHED_OTHER, (pid, threads)
        assert threads and {p for _, p in threads.values()} == {SCHED_BATCH}, (pid, threads)


def test_where_the_policy_cannot_be_set_the_server_says_so_in_one_line_and_serves_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from arena_server.cli import common

    def refuse(tid: int, policy: int, param: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    started = threading.Event()
    helper = threading.Thread(target=started.wait)  # a thread other than this one, so there is one to set
    helper.start()
    try:
        monkeypatch.setattr(common.os, "sched_setscheduler", refuse)
        assert "the kernel refused SCHED_BATCH" in (common.batch_helper_threads() or "")
        common.apply_helper_threads("batch")
        common.apply_helper_threads("normal")  # asks for nothing, says nothing
    finally:
        started.set()
        helper.join()
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("arena: --helper-threads batch: the kernel refused SCHED_BATCH for thread "), err
    assert err.rstrip().endswith("; serving with the normal policy"), err
    monkeypatch.setattr(common.sys, "platform", "darwin")
    assert common.batch_helper_threads() == "scheduling policies are Linux only (this is darwin)"


BUSY_SERVER = """
import asyncio, json, os, sys, time
import arena_bots
from arena_server.api.server import running_server
from arena_server.cli.common import batch_helper_threads
from arena_server.matches.hub import Hub
from arena_server.store.database import Store
from tests.server.test_fair_clock import REMOTE_BOT

async def main(think, rounds, db):
    store = await Store.open(db)
    hub = Hub(store, arena_bots.hosted_bots())
    async with running_server(hub, port=0) as (_server, port):
        assert batch_helper_threads() is None
        bot = await asyncio.create_subprocess_exec(
            sys.executable, "-c", REMOTE_BOT, f"127.0.0.1:{port}", think, rounds,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        done = asyncio.Event()
        stalls = 0

        async def hog():  # the loop's thread keeps the core busy for 0.3 s every 20 ms
            nonlocal stalls
            while not done.is_set():
                await asyncio.sleep(0.02)
                end = time.perf_counter() + 0.3
                while time.perf_counter() < end:
                    pass
                stalls += 1

        task = asyncio.ensure_future(hog())
        out, err = await asyncio.wait_for(bot.communicate(), 120)
        done.set()
        await task
        assert bot.returncode == 0, err.decode()
        match_id, termination, _ = out.decode().split(" ", 2)
        record = await store.get_match(match_id)
        charged = [e for p, _, e, _ in record.moves if p == 0]
        print(json.dumps({"termination": termination, "charged": charged, "stalls": stalls}))
    await store.close()

os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the helpers and the loop share one core
asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.parametrize(("think", "rounds", "termination"), [("0.05", "8", "NORMAL"), ("0.5", "3", "TIMEOUT")])
def test_the_fair_clock_holds_with_batch_helper_threads_and_a_busy_event_loop(
    tmp_path: Path, think: str, rounds: str, termination: str
) -> None:
    """test_fair_clock's remote matches, with the helper threads batched and the loop stalled by CPU work.

    A stall that sleeps leaves the core to the helper threads; a stall that computes does not, and a
    batched helper waits for the scheduler's tick to hand over what arrived. The bot (0.2 s a move,
    no overage, no grace) must still be charged its own time only, and a slow one still time out.
    """
    out = subprocess.run(
        [sys.executable, "-c", BUSY_SERVER, think, rounds, str(tmp_path / "arena.db")],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["termination"] == termination, result
    assert result["stalls"] >= 3, result
    if termination == "NORMAL":
        assert len(result["charged"]) == 8 and max(result["charged"]) < 0.2, result
