"""Progress bars with an ETA on the experiments: drawn on a real pseudo-terminal, silent in a pipe.

The experiments run through the real ``arena experiment`` CLI with stderr on a pty and on a pipe
(``--quick``; the full three are slow-marked); the bar counts every unit of work, ending at N/N.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest


def _drain(primary: int) -> bytes:
    """Everything written to the pty until its other end closes."""
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the terminal closed: the writer ended
            return seen
        if not chunk:
            return seen
        seen += chunk


def run_experiment(argv: list[str], cwd: Path, on_a_terminal: bool) -> tuple[str, str]:
    """``arena experiment ARGV``; returns (stdout, stderr), stderr from a real pty when ``on_a_terminal``."""
    command = [sys.executable, "-m", "arena_server.cli", "experiment", *argv]
    if not on_a_terminal:
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout, proc.stderr
    primary, replica = pty.openpty()
    stdout = cwd / "stdout.txt"  # a file, as with `> results.txt`
    try:
        with (
            stdout.open("wb") as out,
            subprocess.Popen(command, stdout=out, stderr=replica, stdin=subprocess.DEVNULL, cwd=cwd) as proc,
        ):
            os.close(replica)
            drawn = _drain(primary)
            assert proc.wait(600) == 0, drawn
    finally:
        os.close(primary)
    return stdout.read_text(errors="replace"), drawn.decode(errors="replace")


def test_rpsls_round_robin_draws_its_bar_only_on_a_terminal(tmp_path: Path) -> None:
    argv = ["rpsls-thesis", "--quick", "--only", "round-robin", "--out", str(tmp_path / "rr.md")]
    _, piped = run_experiment(argv, tmp_path, on_a_terminal=False)
    assert "ETA" not in piped and "\r" not in piped, piped
    assert "round robin with 5 signs done" in piped  # the log lines themselves stay
    stdout, drawn = run_experiment(argv, tmp_path, on_a_terminal=True)
    assert "rpsls-thesis" in drawn and "ETA" in drawn and finished(drawn), drawn
    assert "round robin with 5 signs done" in drawn
    # the 3-sign table is printed to stdout while the bar is drawn (1/2): it stays in the file, not the terminal
    assert "Round robin, 3 signs" in stdout and "Round robin, 3 signs" not in drawn, stdout


def finished(drawn: str) -> bool:
    """Whether the bar reached its end: the experiment's units counted up to their total (``N/N``)."""
    return any(a == b for a, b in re.findall(r"(\d+)/(\d+)", drawn))


SLOW = {
    # name: argv after the output option
    "rpsls-thesis": ["--quick", "--out"],
    "tictactoe-lab": ["--quick", "--output"],
    "liars-dice-thesis": ["--quick", "--output"],
}


@pytest.mark.slow  # 15-25 s each on a quiet machine
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", sorted(SLOW))
def test_quick_experiments_count_every_stage_on_a_terminal(name: str, tmp_path: Path) -> None:
    options = SLOW[name]
    out = tmp_path / "report.md"
    stdout, drawn = run_experiment([name, *options, str(out)], tmp_path, on_a_terminal=True)
    assert name in drawn and "ETA" in drawn, drawn
    assert finished(drawn), f"the bar never reached its total: the unit count is off\n{drawn}"
    assert out.exists()
    assert "ETA" not in stdout  # the bar is on stderr only; a redirected stdout keeps only the results
