"""The compiled move path (arena_client._native, scripts/build_native.py): used only when it is what the sources say.

Each check imports the move-path modules in a fresh interpreter, as a server or
a bot process would. The ones about a stale build run on a copy of the
packages (with their extensions) whose source is then changed; they need a
build (``make native``), which ``make test`` does first. ``.ci/run`` sets
``ARENA_REQUIRE_NATIVE=1``: in CI a missing build fails instead of skipping.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from arena_client import _native
from arena_server.referee.clock import LoopLag
from tests.scripts_support import load_script

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


INTERPRETED_METHODS = (
    "import enum, json, types\n"
    "from arena_client import _native\n"
    "found = {}\n"
    "for name in _native.MODULES:\n"
    "    module = __import__(name, fromlist=['_'])\n"
    "    for cls in vars(module).values():\n"
    "        if isinstance(cls, type) and cls.__module__ == name and not issubclass(cls, enum.Enum):\n"
    "            own = sorted(k for k, v in vars(cls).items() if isinstance(v, types.FunctionType))\n"
    "            if own: found[f'{name}.{cls.__name__}'] = own\n"
    "print(json.dumps({'compiled': _native.status() == 'compiled (mypyc)', 'found': found}))\n"
)


@needs_build
def test_no_class_of_the_compiled_move_path_runs_interpreted_methods() -> None:
    # A decorator that writes methods at run time (``@dataclass`` writes __init__, __repr__, __eq__) leaves
    # them interpreted in a compiled class: Answer's __init__ was, at 1,800 instructions a construction.
    out = subprocess.run(
        [sys.executable, "-c", INTERPRETED_METHODS], capture_output=True, text=True, timeout=120, check=True
    )
    seen = json.loads(out.stdout)
    assert seen["compiled"], out.stderr
    assert seen["found"] == {}, "these classes' methods run as Python in the compiled build: " + str(seen["found"])


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
def test_a_count_stops_when_the_build_changes_under_it(tmp_path: Path) -> None:
    # bench/count_remote.py and count_loaded.py start their counted processes one after another: a source edited
    # mid-run would have the later ones run pure Python, and the rows compare the two (it happened once).
    server, client = copy_packages(tmp_path)
    turn_wire = server / "arena_server/seats/turn_wire.py"
    script = (
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
        "from count_remote import same_build\n"
        "with same_build('count_remote'):\n"
        "    pass\n"
        "print('unchanged: no error', flush=True)\n"
        "with same_build('count_remote'):\n"
        f"    open({str(turn_wire)!r}, 'a').write('\\nEDITED = True\\n')\n"
        "print('not reached')\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != _native.PURE_ENV}
    environ["PYTHONPATH"] = os.pathsep.join(str(p) for p in [server, client, ROOT / "proto", ROOT / "reference_bots"])
    out = subprocess.run([sys.executable, "-c", script], env=environ, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and out.stdout == "unchanged: no error\n", (out.stdout, out.stderr)
    assert (
        "count_remote: the move path's build changed during the run (at the start compiled, at the end pure Python "
        "(turn_wire.py of arena_server.seats.turn_wire changed since it was compiled))"
    ) in out.stderr


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
    "tests/server/test_action_wire.py",
    "tests/server/test_check_remote.py",
    "tests/server/test_move_path.py",
    "tests/server/test_play_remote.py",
    "tests/server/test_record_wire.py",
    "tests/server/test_referee.py",
    "tests/server/test_referee_inline.py",
    "tests/server/test_referee_legality.py",
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


def _walk_here(nodes: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node under ``nodes``, not entering nested functions, lambdas or classes (they run elsewhere)."""
    stack: list[ast.AST] = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _suspends(node: ast.AST) -> bool:
    return isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith))


def mypyc_exception_hazards(source: str, filename: str) -> list[str]:
    """The two exception-handling shapes that mypyc compiled wrongly here, as ``file:line: what`` lines.

    With the mypyc this project builds with (checked with mypy 2.4.1), when the
    exception came out of an awaited future (``Future.set_exception``, as an
    engine error reaches the referee's task from a seat's callback):

    * a bare ``raise`` in an ``except`` block after an ``await`` in it re-raised
      a freed exception: a segfault, or an "invalid exception object" in a
      later callback;
    * an ``await`` that suspends in a ``finally`` block dropped the exception in
      flight: the coroutine returned None.

    Raising the caught exception by name (``raise exc``), or doing the awaits
    after the ``try`` and raising the kept exception then, behaves as in Python.
    """
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, (ast.Try, ast.TryStar)):
            continue
        for stmt in _walk_here(node.finalbody):
            if _suspends(stmt):
                found.append((stmt.lineno, f"an await in the finally block of the try at line {node.lineno}"))
        for handler in node.handlers:
            inside = list(_walk_here(handler.body))
            if any(_suspends(n) for n in inside):
                for bare in (n for n in inside if isinstance(n, ast.Raise) and n.exc is None):
                    found.append((bare.lineno, "a bare raise in an except block that awaits"))
    return [f"{filename}:{line}: {what}" for line, what in sorted(found)]


def test_the_compiled_modules_avoid_the_exception_shapes_mypyc_gets_wrong() -> None:
    found = []
    for module in _native.MODULES:
        path = _native.source_path(module)
        assert path is not None, module
        found += mypyc_exception_hazards(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, "\n".join(found)


def test_the_exception_shapes_check_finds_both_shapes() -> None:
    hazards = mypyc_exception_hazards(
        "async def f():\n"
        "    try:\n"
        "        await g()\n"
        "    except Exception:\n"
        "        await h()\n"
        "        raise\n"
        "    finally:\n"
        "        await h()\n"
        "async def fine():\n"
        "    try:\n"
        "        await g()\n"
        "    except Exception as exc:\n"
        "        await h()\n"
        "        raise exc\n"
        "    finally:\n"
        "        async def later():\n"
        "            await h()\n"
        "        close()\n",
        "x.py",
    )
    assert hazards == [
        "x.py:6: a bare raise in an except block that awaits",
        "x.py:8: an await in the finally block of the try at line 2",
    ]


@needs_build
def test_an_engine_error_in_a_remote_match_does_not_crash_a_fresh_server_process() -> None:
    """The referee's task re-raises an engine error that reached it from a remote seat's callback.

    Run alone, in a fresh interpreter with the compiled move path, this test
    crashed the process (a segfault) before the referee stopped re-raising with a
    bare ``raise`` after an ``await`` (see :func:`mypyc_exception_hazards`); in the
    whole suite it passed or failed by chance.
    """
    out = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            "tests/server/test_referee_inline.py::test_an_engine_error_in_an_inline_move_aborts_the_match_and_spares_the_session",
        ],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != _native.PURE_ENV},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 passed" in out.stdout.splitlines()[-1]


def test_an_extension_left_by_a_module_no_longer_compiled_is_removed(tmp_path: Path) -> None:
    build_native = load_script("build_native")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    referee = tmp_path / "server/arena_server/referee"
    referee.mkdir(parents=True)
    (referee / "records.py").write_text("")
    stale = referee / f"records{suffix}"  # a module once compiled, now out of MODULES: shadows records.py
    stale.write_bytes(b"old")
    (referee / "loop.py").write_text("")
    (referee / f"loop{suffix}").write_bytes(b"current")  # in MODULES: the build's own
    client = tmp_path / "clients/python/arena_client"
    client.mkdir(parents=True)
    (client / f"_native__mypyc{suffix}").write_bytes(b"shared")  # the group's library: no source beside it
    assert "arena_server.referee.loop" in _native.MODULES and "arena_server.referee.records" not in _native.MODULES
    assert build_native.stale_extensions(tmp_path) == [stale]
    assert build_native.remove_stale(tmp_path) == [stale]
    assert not stale.exists()
    assert (referee / f"loop{suffix}").exists() and (client / f"_native__mypyc{suffix}").exists()
    assert build_native.stale_extensions(tmp_path) == []
