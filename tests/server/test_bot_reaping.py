"""A bot the server kills is reaped once, by asyncio, and its end is reported as the kill it was.

``BotProcess.stop`` kills a bot's process group. It used to call
``Process.kill()`` as well, and ``Popen.kill`` first polls the child: when the
child had already died of the group kill, that poll reaped it behind asyncio's
back, asyncio's child watcher logged "Unknown child process pid ..., will
report returncode 255" (a stray line on a command's stderr) and the run's exit
status became 255 instead of death by SIGKILL. The race is nearly certain when
the bot dies on one CPU while the server's threads share another (the main
thread polls before the watcher thread runs), so the check runs the kill
sequence that way, in a child interpreter, several times.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import asyncio, logging, signal, sys
    sys.path.insert(0, sys.argv[1])
    from arena_client import MatchInfo, SeatInfo, TimeControl
    from arena_server.seats.process import BotProgram, Limits
    from arena_server.seats.framing import Framing
    from arena_server.seats.subprocess_seat import SubprocessSeat

    records = []
    logging.getLogger("asyncio").addHandler(type("H", (logging.Handler,), {"emit": lambda s, r: records.append(r)})())

    async def main():
        on_cpu = "import os, sys; os.sched_setaffinity(0, {%s}); exec(open(sys.argv[1]).read())" % sys.argv[3]
        program = BotProgram(
            ["python3", "-c", on_cpu, sys.argv[2]],
            Framing.JSON,
            limits=Limits(cpu_seconds=60, memory_bytes=256 << 20, run_as=None),
        )
        codes = []
        for i in range(8):
            seat = SubprocessSeat(program, SeatInfo(0, "sleeper", 1, "subprocess"))
            info = MatchInfo(f"m{i}", "rps", {"rounds": 1}, 0, (seat.info,), TimeControl(), "")
            assert await seat.start(info) is None
            await seat.close()  # still running (it never answers): killed by the server
            codes.append(seat._process.returncode)
        print(codes)
        print([r.getMessage() for r in records])

    asyncio.run(main())
    """
)

SLEEPER = """\
import json, sys, time
print(json.dumps({"hello": {"name": "sleeper", "games": ["rps"]}}), flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs: the bot on one, the server on another")
def test_a_killed_bot_is_reaped_by_asyncio_alone(tmp_path: Path) -> None:
    bot = tmp_path / "sleeper.py"
    bot.write_text(SLEEPER)
    cpu, bot_cpu = sorted(os.sched_getaffinity(0))[:2]
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ROOT / "tests"), str(bot), str(bot_cpu)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),  # the server's threads on one CPU, the bot on the other
    )
    assert out.returncode == 0, out.stderr
    codes_line, warnings_line = out.stdout.strip().splitlines()[-2:]
    assert "Unknown child process" not in out.stderr + warnings_line, warnings_line
    assert "255" not in codes_line, f"a killed bot was reported as exit status 255: {codes_line}"
