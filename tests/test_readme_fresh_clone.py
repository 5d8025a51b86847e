"""Follow the README from a fresh clone: venv and server via `make run PORT=...`, the five-minute bot, a match.

The commands are taken from README.md itself (its "two commands" block and the five-minute bot's
file and console blocks), so the README cannot drift from what works. The clone is of the committed
HEAD, in a temporary directory; pip's own cache and the machine's configured wheel sources make the
install take about a minute instead of several. Slow-marked: it installs a whole virtualenv.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.docs.test_doc_blocks import console_commands, parse_page

ROOT = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT = 900.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _clean_env() -> dict[str, str]:
    """The user's environment without this test run's virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH", "ARENA_SERVER"}}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


@pytest.mark.slow
@pytest.mark.timeout(INSTALL_TIMEOUT + 300)
def test_readme_from_a_fresh_clone(tmp_path: Path) -> None:
    clone = tmp_path / "arena"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    readme = parse_page((clone / "README.md").read_text(), "README.md")

    # The two commands: `make run` is documented with PORT= and DB=.
    commands = [c for b in readme.blocks if b.language == "console" for c in console_commands(b.text)]
    assert any(c.split("#")[0].strip() == "make run" for c in commands), "the README lost `make run`"
    assert "make run PORT=" in (clone / "README.md").read_text(), "the README no longer documents PORT="
    port = _free_port()
    env = _clean_env()
    log = tmp_path / "make-run.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            ["make", "run", f"PORT={port}", f"DB={tmp_path / 'arena.db'}"],
            cwd=clone,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + INSTALL_TIMEOUT
        while not re.search(rf"serving on \S+:{port}\b", log.read_text()):
            assert server.poll() is None, f"`make run` stopped:\n{log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"`make run` did not serve in time:\n{log.read_text()[-4000:]}"
            time.sleep(0.5)
        assert (clone / ".venv" / "bin" / "arena").exists()
        while "arena: move path:" not in log.read_text():  # printed just after "serving on"
            assert time.monotonic() < deadline, f"`make run` did not say its move path:\n{log.read_text()[-4000:]}"
            time.sleep(0.2)
        if shutil.which("gcc"):  # the README: where a C compiler is found, make compiles the move path
            assert "arena: move path: compiled (mypyc)" in log.read_text(), log.read_text()[-4000:]

        # The five-minute bot, exactly as the README gives it, in a folder of its own.
        work = tmp_path / "mybot"
        work.mkdir()
        bot_env = dict(env, PATH=f"{clone / '.venv' / 'bin'}{os.pathsep}{env['PATH']}")
        section = (clone / "README.md").read_text().split("## Five minutes", 1)[1].split("\n## ", 1)[0]
        five = parse_page(section, "README.md#five-minutes")
        files = [b for b in five.blocks if b.file]
        assert [b.file for b in files] == ["mybot.py"]
        (work / "mybot.py").write_text(files[0].text)
        runs = [c for b in five.blocks if b.runs and b.language == "console" for c in console_commands(b.text)]
        assert any(c.startswith("arena check-bot") for c in runs), runs
        assert any(c.startswith("arena match") for c in runs), runs
        outputs = []
        for command in runs:
            result = subprocess.run(
                ["bash", "-c", command], cwd=work, env=bot_env, capture_output=True, text=True, timeout=300
            )
            assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"
            outputs.append(result.stdout)
        assert "PASSED" in outputs[0]
        assert re.search(r"mybot vs rock\s+\d+ : -\d+", outputs[-1]), outputs[-1]

        # And the server `make run` started plays a match.
        played = subprocess.run(
            ["arena", "match", "random", "rock", "-g", "rps", "-p", "rounds=10", "--server", f"127.0.0.1:{port}"],
            cwd=work,
            env=bot_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert played.returncode == 0 and "random vs rock" in played.stdout, played.stdout + played.stderr
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGINT)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
