"""``bench/count_remote.py``'s own helpers: the stall monitor stretched under valgrind, and callgrind's totals read.

The counts themselves need valgrind and minutes; these check the pieces a
count's figures rest on, on the real monitor and on files written the way
callgrind writes them.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

from arena_server.referee.clock import LoopLag

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import count_remote  # noqa: E402  (bench/ is not a package)


def _ticks(scale: float, seconds: float = 0.3) -> tuple[tuple[float, ...], tuple[float, ...], int]:
    """The loop's monitor before and after :func:`count_remote.stretch_monitor`, and its ticks in ``seconds``."""

    async def main() -> tuple[tuple[float, ...], tuple[float, ...], int]:
        lag = LoopLag.of()
        before = (lag.PERIOD, lag.SLACK, lag.LATE, lag.RECENT)
        count_remote.stretch_monitor(scale)
        assert LoopLag.of() is lag  # the running loop's own monitor, the one the server's seats use
        after = (lag.PERIOD, lag.SLACK, lag.LATE, lag.RECENT)
        ticks = 0
        lag.acquire()
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            seen = lag.last_tick
            while loop.time() - started < seconds:
                await asyncio.sleep(0.001)
                if lag.last_tick != seen:
                    seen = lag.last_tick
                    ticks += 1
        finally:
            lag.release()
        return before, after, ticks

    return asyncio.run(main())


def test_the_stretched_monitor_keeps_its_proportions_and_ticks_that_much_less() -> None:
    before, after, ticks = _ticks(20.0)
    assert after == pytest.approx(tuple(20.0 * x for x in before))
    assert after[2] == pytest.approx(after[0] + after[1])  # a stall is still PERIOD + SLACK long
    # 0.3 s: 60 ticks of 5 ms, 3 of 0.1 s (the loop may run a little late, on a loaded host more).
    assert 1 <= ticks <= 4, ticks
    plain_before, plain_after, plain_ticks = _ticks(1.0)
    assert plain_after == plain_before
    assert plain_ticks >= 20, plain_ticks


def test_a_stretched_monitor_judges_gaps_in_its_own_periods() -> None:
    async def main() -> tuple[float | None, float | None]:
        count_remote.stretch_monitor(20.0)
        lag = LoopLag.of()
        now = lag.last_tick + 0.1  # 20 unstretched periods: a stall before, not now (LATE is 0.5 s)
        quiet = lag.stalled_since(now)
        late = lag.stalled_since(lag.last_tick + 0.6)
        return quiet, late

    quiet, late = asyncio.run(main())
    assert quiet is None
    assert late is not None


def test_the_events_of_a_thread_are_read_by_name(tmp_path: Path) -> None:
    plain = tmp_path / "cg.sdk.200.0-01"
    plain.write_text("version: 1\ncreator: callgrind\nevents: Ir\nfn=main\n0 5\nsummary: 1234\n")
    simulated = tmp_path / "cg.sdk.1200.0-01"
    simulated.write_text(
        "events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim\n"
        "fn=main\n"
        "summary: 3131552139 914369086 528776002 47515165 21221017 6917414 75046 226530 787070 455896772 "
        "35386008 68943091 23137663\n"
    )
    assert count_remote._events(plain) == {"Ir": 1234}
    events = count_remote._events(simulated)
    assert events["Ir"] == 3131552139 and events["I1mr"] == 47515165 and events["Bim"] == 23137663
    assert set(count_remote.MISSES) and all(e in events for names in count_remote.MISSES.values() for e in names)
    empty = tmp_path / "cg.empty-01"
    empty.write_text("events: Ir\n")
    with pytest.raises(SystemExit, match="no totals"):
        count_remote._events(empty)


@pytest.mark.skipif(shutil.which("callgrind_annotate") is None, reason="needs valgrind's callgrind_annotate")
def test_inclusive_counts_are_instructions_when_misses_were_simulated_too(tmp_path: Path) -> None:
    # With --cache-sim each line of callgrind_annotate carries every event; the tick (and the functions'
    # table) must still be read from the instructions' column, not silently dropped.
    counted = tmp_path / "cg.sdk.1200.0-01"
    counted.write_text(
        "version: 1\ncreator: test\ncmd: x\nevents: Ir I1mr D1mr\nfl=native.c\n"
        f"fn={count_remote.TICK}\n0 100 3 7\n"
        "fn=CPyDef_seats___remote___RemoteSeat___on_action\n0 50 1 2\n"
        f"calls=1 0\ncfn={count_remote.TICK}\n0 100 3 7\n"
        "summary: 150 4 9\n"
    )
    assert count_remote._inclusive(counted) == {
        count_remote.TICK: 100,
        "CPyDef_seats___remote___RemoteSeat___on_action": 150,
    }


def test_a_server_counted_apart_runs_every_loop_with_its_monitor_stretched(monkeypatch: pytest.MonkeyPatch) -> None:
    # count_loaded.py starts `arena serve` through serve_stretched: each loop asyncio.run makes (as arena serve's
    # does) must have its monitor stretched before anything runs on it. The command itself is replaced by one that
    # reads the monitor from inside its loop.
    import arena_server.cli

    seen: list[float] = []

    async def inside() -> None:
        seen.append(LoopLag.of().PERIOD)

    def command(argv: list[str]) -> int:
        assert argv == ["serve", "--port", "0"]
        asyncio.run(inside())
        asyncio.run(inside())
        return 7

    monkeypatch.setattr(arena_server.cli, "main", command)
    policy = asyncio.get_event_loop_policy()
    try:
        assert count_remote.serve_stretched(30.0, ["serve", "--port", "0"]) == 7
    finally:
        asyncio.set_event_loop_policy(policy)
    assert seen == [pytest.approx(30 * 0.005)] * 2


def test_a_runs_totals_are_each_threads_instructions(tmp_path: Path) -> None:
    (tmp_path / "cg.sdk.200.0-01").write_text("events: Ir I1mr\nfn=main\nsummary: 900 4\n")
    (tmp_path / "cg.sdk.200.0-02").write_text("events: Ir I1mr\nfn=poll\ntotals: 300 2\n")
    (tmp_path / "cg.sdk.1200.0-01").write_text("events: Ir\nsummary: 5\n")  # another run's file: not read
    assert count_remote._totals(tmp_path / "cg.sdk.200.0") == {1: 900, 2: 300}
    (tmp_path / "cg.bare.200.0-02").write_text("events: Ir\nsummary: 7\n")
    with pytest.raises(SystemExit, match="no count for the main thread"):
        count_remote._totals(tmp_path / "cg.bare.200.0")
