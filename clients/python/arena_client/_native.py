"""The compiled move path: which modules are built with mypyc, and whether the built ones may be used.

Every remote move runs through the same few modules on both sides of the
stream (the SDK's session and wire encoder; the server's session reader,
seats, Turn encoder, referee and clocks). ``make`` compiles them with mypyc
(``scripts/build_native.py``): each gets a C extension beside its ``.py`` and
the build writes ``_native.json`` (beside this file), the SHA-256 of every
source it compiled. The ``.py`` files stay the reference: the extension does
exactly what its source says, faster (docs/performance.md, eleventh pass).

An extension is imported in preference to its source, so a stale one would
silently run old code. :func:`guard` (called by the ``arena_client`` and
``arena_server`` packages before any of these modules can be imported)
therefore lets the extensions be used only when all of them were built, by
this interpreter, from the sources now on disk. Otherwise, or when
``ARENA_PURE_PYTHON`` is set to anything but ``0``, an import hook loads every
one of them from source, and :func:`status` says why (``arena serve`` logs it
at start-up; ``make native`` rebuilds). It is all or nothing: compiled modules
call each other natively, so one stale module could still run old code
through another.

Stdlib only: it runs in every process that imports the SDK or the server.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

MODULES = (
    "arena_client.remote",
    "arena_client.turn_fields",
    "arena_client.wire",
    "arena_server.api.bot_session",
    "arena_server.api.record_wire",
    "arena_server.api.remote_check",
    "arena_server.referee.answer",
    "arena_server.referee.asking",
    "arena_server.referee.clock",
    "arena_server.referee.loop",
    "arena_server.referee.publishing",
    "arena_server.referee.state",
    "arena_server.seats.action_wire",
    "arena_server.seats.in_process",
    "arena_server.seats.remote",
    "arena_server.seats.turn_ids",
    "arena_server.seats.turn_wire",
)
"""The compiled modules (a subclass of a compiled class must be compiled too: see docs/development.md)."""

GROUP = "arena_client._native"
"""mypyc's group name: the modules share one library, ``arena_client/_native__mypyc`` plus the platform suffix."""

MANIFEST = Path(__file__).with_name("_native.json")
PURE_ENV = "ARENA_PURE_PYTHON"

_status: str | None = None


def source_path(module: str) -> Path | None:
    """Where ``module``'s ``.py`` is, found without importing its package (whose ``__init__`` calls :func:`guard`).

    None when its package is not installed (a bot process with only the SDK, or a Kaggle agent with the SDK inlined).
    """
    top, _, rest = module.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)), *rest.split(".")).with_suffix(".py")


def extension_path(module: str) -> Path | None:
    """Where ``module``'s extension built for this interpreter goes, beside its source (None: not installed)."""
    source = source_path(module)
    return None if source is None else source.with_suffix(importlib.machinery.EXTENSION_SUFFIXES[0])


def _exists(path: Path | None) -> bool:
    return path is not None and path.exists()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def check(modules: Sequence[str] = MODULES, manifest: Path = MANIFEST) -> str | None:
    """None when the built extensions of ``modules`` may be used; else why the sources must be."""
    if os.environ.get(PURE_ENV, "0") not in ("", "0"):
        return f"{PURE_ENV} is set"
    built = [m for m in modules if _exists(extension_path(m))]
    if not manifest.exists():
        if built:
            return f"{built[0]} has an extension but there is no {manifest.name} (an interrupted build?)"
        return "not compiled"
    try:
        recorded = json.loads(manifest.read_text())
        sources = recorded["sources"]
        suffix = recorded["suffix"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{manifest} is unreadable ({exc})"
    if suffix != importlib.machinery.EXTENSION_SUFFIXES[0]:
        return f"built for {suffix}, not for this interpreter ({importlib.machinery.EXTENSION_SUFFIXES[0]})"
    for module in modules:
        source = source_path(module)
        if source is None:
            return f"{module} is not installed"
        if module not in built:
            return f"{module} was not built"
        if sources.get(module) != digest(source):
            return f"{source.name} of {module} changed since it was compiled"
    return None


class _FromSource(importlib.abc.MetaPathFinder):
    """Finds the listed modules' ``.py`` files, so that their extensions are never imported."""

    def __init__(self, sources: dict[str, Path]) -> None:
        self.sources = sources

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        source = self.sources.get(fullname)
        return None if source is None else importlib.util.spec_from_file_location(fullname, source)


def guard() -> str:
    """Decide once per process whether the compiled modules run; return :func:`status`."""
    global _status
    if _status is None:
        try:
            why = check()
        except OSError as exc:  # a source unreadable: nothing compiled can be trusted
            why = f"cannot check the build: {exc}"
        if why is None:
            _status = "compiled (mypyc)"
        else:
            _status = f"pure Python ({why})"
            sources = {m: source_path(m) for m in MODULES}
            if any(_exists(extension_path(m)) for m in MODULES):
                sys.meta_path.insert(0, _FromSource({m: p for m, p in sources.items() if p is not None}))
                if why != f"{PURE_ENV} is set":
                    print(f"arena: the compiled move path is not used: {why}; run `make native`", file=sys.stderr)
    return _status


def status() -> str:
    """Which move path this process runs: ``compiled (mypyc)`` or ``pure Python (why)``."""
    return guard()


def loaded() -> dict[str, bool]:
    """Of the modules imported so far, which run compiled (for tests and benchmarks)."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return {m: str(getattr(sys.modules[m], "__file__", "")).endswith(suffix) for m in MODULES if m in sys.modules}
