"""Disk full, for real: the server's SQLite file lives on a 1 MiB tmpfs that the test fills up.

The tmpfs is mounted in a private user + mount namespace (``unshare --user --map-root-user
--mount``, no root needed); the server, its database and a raw gRPC bot run in
``_disk_full_server.py`` inside it. The match whose end cannot be committed must be reported to
its bot as aborted with the reason, the server must log one line and keep serving, and after
the fault clears and the database is reopened nothing may be left running or half-written.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from arena_client import Termination

ROOT = Path(__file__).resolve().parents[2]
UNSHARE = ["unshare", "--user", "--map-root-user", "--mount"]


def namespaces_work(mount_point: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        [*UNSHARE, "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {mount_point}"],
        capture_output=True,
        timeout=30,
    )
    return probe.returncode == 0


def test_disk_full_voids_the_match_tells_the_bot_and_the_server_serves_on(tmp_path: Path) -> None:
    fs = tmp_path / "tiny"
    fs.mkdir()
    if not namespaces_work(fs):
        pytest.skip("this machine does not allow unprivileged user+mount namespaces (unshare)")
    server = f'"{sys.executable}" -m tests.server._disk_full_server "{fs}"'
    done = subprocess.run(
        [*UNSHARE, "sh", "-c", f'mount -t tmpfs -o size=1m tmpfs "{fs}" && exec {server}'],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    full, while_full, after = out["full"], out["while_full"], out["after"]
    assert out["filled"] > 0
    # The bot was told the truth: aborted, nobody's fault, with the reason.
    assert full["termination"] == int(Termination.ABORTED), full
    assert full["reason"] == "the server could not record the match: database or disk is full", full
    assert full["returns"] == [0.0, 0.0]
    # While the disk is full a new match cannot start: the challenge is refused with the reason.
    assert while_full["refused"].startswith("the server could not record a new match: database or disk is full")
    # The fault cleared: the next match is recorded as it was reported.
    assert after["termination"] == int(Termination.NORMAL), after
    rows = {str(r[0]): r[1:] for r in out["rows"]}
    assert rows[after["match_id"]][:3] == ["finished", int(Termination.NORMAL), after["reason"]]
    # The voided match is stored as the abort its bot heard (marked then, or at the restart at the latest).
    assert rows[full["match_id"]][:3] == ["aborted", int(Termination.ABORTED), full["reason"]] or (
        out["recovered_at_restart"] == 1 and rows[full["match_id"]][0] == "aborted"
    )
    assert out["running"] == 0 and out["rated_unfinished"] == 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("arena:")]
    assert sum(f"match {full['match_id']} " in line for line in lines) == 1, lines
    assert sum("could not record a new match" in line for line in lines) == 1, lines
