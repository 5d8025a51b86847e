"""``arena tournament --ray``: a real Ray cluster (this machine's 2 CPUs), the real CLI, the real SQLite file.

The first test plays a whole tournament on a local cluster that ``--ray``
starts (no ``RAY_ADDRESS``) and checks the store against the schedule; the
slow one kills such a run (the driver and its Ray processes) halfway and
proves the second run plays only the missing matches. The ``RAY_ADDRESS``
tests join the test run's shared Ray head (``tests/ray_support.py``), or an
address where nothing answers, or the head without its token.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.ladder.test_crash import ROOT, free_port
from tests.ray_support import RayHead, without_ray_address

pytest.importorskip("ray", reason="the ray extra is not installed (make installs it)")

from arena_server.ladder.on_ray import check_reachable

BOTS = ["rotate", "beat-last", "rock", "random"]


def tournament(
    db: Path, out: Path, games: int, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """``arena tournament ... --ray EXTRA`` in its own session; ``env`` defaults to this one's without RAY_ADDRESS."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "arena_server.cli",
            "tournament",
            "--game",
            "rps",
            "--bots",
            *BOTS,
            "--games-per-pair",
            str(games),
            "--db",
            str(db),
            "--output",
            str(out),
            "--ray",
            *extra,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=without_ray_address() if env is None else env,
        start_new_session=True,  # the driver and the local Ray cluster it starts: one group to kill
    )


def finished(db: Path) -> dict[int, int]:
    """slot -> match id of the finished tournament matches."""
    if not db.exists():
        return {}
    with sqlite3.connect(db) as conn:
        try:
            rows = conn.execute(
                "SELECT t.slot, t.match_id FROM tournament_matches t JOIN matches m ON m.id = t.match_id "
                "WHERE m.status = 'finished'"
            ).fetchall()
        except sqlite3.OperationalError:  # not created yet
            return {}
    return dict(rows)


def test_tournament_on_ray_stores_every_match(tmp_path: Path, ray_head: RayHead) -> None:
    """Without ADDRESS and RAY_ADDRESS: a local cluster, also where ``ray start`` has recorded a cluster."""
    db, out = tmp_path / "t.db", tmp_path / "t"
    # Ray's record of the last `ray start` on a machine, which ray.init() without an address would join:
    # here the run's head, in a temporary directory (short: Ray's sockets live under it) named by RAY_TMPDIR
    machine_tmp = Path(tempfile.mkdtemp(prefix="arena-rt-"))
    try:
        (machine_tmp / "ray").mkdir()
        shutil.copy(ray_head.temp_dir / "ray_current_cluster", machine_tmp / "ray")
        proc = tournament(db, out, 2, env={**without_ray_address(), "RAY_TMPDIR": str(machine_tmp)})
        stdout, stderr = proc.communicate(timeout=110)
    finally:
        shutil.rmtree(machine_tmp, ignore_errors=True)
    assert proc.returncode == 0, stderr
    assert f"on Ray ({len(os.sched_getaffinity(0))} CPUs, a local cluster)" in stderr  # the CPUs we may use
    assert proc.pid not in ray_head.drivers()
    assert "ETA" not in stderr  # the progress bar is drawn on a terminal only (issue 18); stderr is a pipe here
    result = json.loads(out.with_name("t.json").read_text())
    assert result["played"] == result["total"] == 12
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status, move_count FROM matches").fetchall()
    assert len(rows) == 12 and {r[0] for r in rows} == {"finished"}
    assert sorted(finished(db)) == list(range(12))
    assert "beat-last" in stdout


def test_tournament_joins_the_cluster_in_RAY_ADDRESS(tmp_path: Path, ray_head: RayHead) -> None:
    """``--ray`` without ADDRESS joins the cluster that RAY_ADDRESS names, and leaves it running at the end."""
    db, out = tmp_path / "t.db", tmp_path / "t"
    proc = tournament(db, out, 2, env=ray_head.environment())
    stdout, stderr = proc.communicate(timeout=110)
    assert proc.returncode == 0, stderr
    assert f"on Ray ({ray_head.cpus} CPUs, the cluster at {ray_head.address} from RAY_ADDRESS)" in stderr
    assert proc.pid in ray_head.drivers()  # this process was a driver of that head, not of a cluster of its own
    assert sorted(finished(db)) == list(range(12))
    assert "beat-last" in stdout
    # closing a cluster it joined only disconnected: the head still runs and answers
    os.kill(ray_head.pid, 0)
    check_reachable(ray_head.address)


def one_line_error(env: dict[str, str], *ray: str, tmp_path: Path) -> str:
    """The one line that a failing ``arena tournament --ray [ADDRESS]`` prints after its first line."""
    proc = tournament(tmp_path / "t.db", tmp_path / "t", 2, *ray, env=env)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2, stderr
    lines = [line for line in stderr.splitlines() if "gcs_client.cc" not in line]  # Ray's own retry warnings
    assert len(lines) == 2 and lines[0].startswith("arena: tournament "), stderr
    assert not (tmp_path / "t.json").exists()
    return lines[1]


def test_RAY_ADDRESS_with_nothing_listening_fails_naming_the_variable(tmp_path: Path) -> None:
    port = free_port()
    env = {**without_ray_address(), "RAY_ADDRESS": f"127.0.0.1:{port}"}
    start = time.monotonic()
    assert one_line_error(env, tmp_path=tmp_path) == (
        f"arena: cannot reach the Ray cluster at 127.0.0.1:{port} from RAY_ADDRESS (Connection refused); check "
        "RAY_ADDRESS and that the cluster is running, or unset RAY_ADDRESS (or give --ray local) for a local cluster"
    )
    assert time.monotonic() - start < 30


def test_an_ADDRESS_given_beats_RAY_ADDRESS(tmp_path: Path) -> None:
    """With both, ``--ray ADDRESS`` is the one tried, and the advice is not to leave it out (that joins RAY_ADDRESS)."""
    port, other = free_port(), free_port()
    env = {**without_ray_address(), "RAY_ADDRESS": f"127.0.0.1:{other}"}
    assert one_line_error(env, f"127.0.0.1:{port}", tmp_path=tmp_path) == (
        f"arena: cannot reach the Ray cluster at 127.0.0.1:{port} (Connection refused); check the address and that "
        "the cluster is running, or give --ray local for a local cluster"
    )


def test_a_head_with_token_authentication_refuses_a_driver_without_the_token(tmp_path: Path, ray_head: RayHead) -> None:
    env = ray_head.environment()
    env["RAY_AUTH_MODE"] = "disabled"  # as for a user who did not turn Ray's token authentication on
    env["RAY_gcs_server_port_wait_time_s"] = "1"  # Ray's own retries: one instead of 20
    assert one_line_error(env, tmp_path=tmp_path) == (
        f"arena: the Ray cluster at {ray_head.address} from RAY_ADDRESS uses token authentication and refused this "
        "process: set RAY_AUTH_MODE=token, and give the cluster's token in RAY_AUTH_TOKEN or ~/.ray/auth_token"
    )


@pytest.mark.slow
def test_killed_ray_tournament_resumes_without_replaying(tmp_path: Path) -> None:
    db, out = tmp_path / "t.db", tmp_path / "t"
    proc = tournament(db, out, 40, "--concurrency", "1")
    try:
        deadline = time.monotonic() + 100
        while len(finished(db)) < 20 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert proc.poll() is None, "the run ended before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    before = finished(db)
    assert 20 <= len(before) < 240
    second = tournament(db, out, 40)
    _, stderr = second.communicate(timeout=110)
    assert second.returncode == 0, stderr
    assert f": {len(before)} of 240 matches were played by an earlier run" in stderr
    after = finished(db)
    assert sorted(after) == list(range(240))
    assert all(after[slot] == match for slot, match in before.items())  # nothing stored was replayed
    with sqlite3.connect(db) as conn:
        played = conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'finished'").fetchone()[0]
    assert played == 240
