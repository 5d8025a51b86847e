"""The compiled move path (arena_client._native, scripts/build_native.py): used only when it is what the sources say.

Each check imports the move-path modules in a fresh interpreter, as a server or
a bot process would. The ones about a stale build run on a copy of the
packages (with their extensions) whose source is then changed; they need a
build (``make native``), which ``make test`` does first. ``.ci/run`` sets
``ARENA_REQUIRE_NATIVE=1``: in CI a missing build fails instead of skipping.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from arena_client import _native
from arena_server.referee.clock import LoopLag

ROOT = Path(__file__).resolve().parent.parent
PROBE = (
    "import json, sys\n"
    "from arena_client import _native\n"
    "for name in _native.MODULES: __import__(name)\n"
    "print(json.dumps({'status': _native.status(), 'loaded': _native.loaded()}))\n"
)


def built() -> bool:
    return _native.MANIFEST.exists() and all(_native.extension_path(m).exists() for m in _native.MODULES)


needs_build = pytest.mark.skipif(
    not built() and os.environ.get("ARENA_REQUIRE_NATIVE") != "1",
    reason="the move path is not compiled here (run `make native`; needs mypy and a C compiler)",
)


def probe(env: dict[str, str] | None = None, path: list[Path] | None = None) -> tuple[dict[str, object], str]:
    """What a fresh interpreter imports: (status and which modules are compiled, stderr)."""
    environ = {k: v for k, v in os.environ.items() if k != _native.PURE_ENV} | (env or {})
    if path is not None:  # a copy of the packages first on the path (before the editable install's finder)
        environ["PYTHONPATH"] = os.pathsep.join(str(p) for p in [*path, ROOT / "proto", ROOT / "reference_bots"])
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=environ, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout), out.stderr


def copy_packages(tmp_path: Path) -> tuple[Path, Path]:
    """This checkout's server and SDK packages, extensions and manifest included, under ``tmp_path``."""
    server, client = tmp_path / "server", tmp_path / "client"
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("arena_server", "arena_games"):
        shutil.copytree(ROOT / "server" / name, server / name, ignore=ignore)
    shutil.copytree(ROOT / "clients/python/arena_client", client / "arena_client", ignore=ignore)
    return server, client


@needs_build
def test_a_fresh_build_is_what_runs() -> None:
    assert built(), "make native did not leave a complete build (see its output)"
    seen, stderr = probe()
    assert seen["status"] == "compiled (mypyc)", stderr
    assert seen["loaded"] == dict.fromkeys(_native.MODULES, True)


@needs_build
def test_a_changed_source_runs_as_python_for_every_module(tmp_path: Path) -> None:
    server, client = copy_packages(tmp_path)
    turn_wire = server / "arena_server/seats/turn_wire.py"
    turn_wire.write_text(turn_wire.read_text() + "\nEDITED = True\n")
    seen, stderr = probe(path=[server, client])
    assert seen["status"] == "pure Python (turn_wire.py of arena_server.seats.turn_wire changed since it was compiled)"
    assert seen["loaded"] == dict.fromkeys(_native.MODULES, False)  # all or nothing, unchanged ones too
    assert "run `make native`" in stderr


@needs_build
def test_an_interrupted_build_is_not_used(tmp_path: Path) -> None:
    server, client = copy_packages(tmp_path)
    (client / "arena_client/_native.json").unlink()  # the build writes the manifest last
    seen, _ = probe(path=[server, client])
    assert str(seen["status"]).startswith("pure Python (arena_client.remote has an extension but there is no")
    assert not any(seen["loaded"].values())  # type: ignore[attr-defined]


@needs_build
def test_the_environment_variable_asks_for_python() -> None:
    seen, stderr = probe(env={_native.PURE_ENV: "1"})
    assert seen["status"] == f"pure Python ({_native.PURE_ENV} is set)"
    assert not any(seen["loaded"].values())  # type: ignore[attr-defined]
    assert "make native" not in stderr  # asked for: nothing to warn about
    again, _ = probe(env={_native.PURE_ENV: "0"})
    assert again["status"] == "compiled (mypyc)"


def test_a_build_for_another_interpreter_or_a_broken_manifest_is_refused(tmp_path: Path) -> None:
    manifest = tmp_path / "_native.json"
    manifest.write_text(json.dumps({"suffix": ".cpython-39-x86_64-linux-gnu.so", "sources": {}}))
    assert "not for this interpreter" in str(_native.check(manifest=manifest))
    manifest.write_text("{not json")
    assert "is unreadable" in str(_native.check(manifest=manifest))
    assert _native.check(modules=(), manifest=tmp_path / "missing.json") == "not compiled"


async def test_the_stall_thresholds_written_as_numbers_match_their_definitions() -> None:
    # mypyc takes only literals as class attribute defaults; these are PERIOD + SLACK and 4 * PERIOD + SLACK.
    # (Compiled, such defaults are per-instance fields: read them on an instance.)
    lag = LoopLag.of()
    assert pytest.approx(lag.PERIOD + lag.SLACK) == lag.LATE
    assert pytest.approx(4 * lag.PERIOD + lag.SLACK) == lag.RECENT


PURE_SUITE = (
    "tests/client/test_wire_turn.py",
    "tests/security/test_information.py",
    "tests/server/test_check_remote.py",
    "tests/server/test_move_path.py",
    "tests/server/test_play_remote.py",
    "tests/server/test_referee.py",
    "tests/server/test_referee_inline.py",
    "tests/server/test_remote.py",
    "tests/server/test_remote_write.py",
    "tests/server/test_turn_wire.py",
)
"""The move path's own tests, run again as pure Python: the sources stay the reference, and must pass too."""


@needs_build
def test_the_move_path_tests_pass_as_pure_python() -> None:
    environ = os.environ | {_native.PURE_ENV: "1"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *PURE_SUITE],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout.splitlines()[-1]
