"""Compile the move path with mypyc: ``make native`` (``make run`` and ``make test`` run it when a source changed).

Builds the modules of ``arena_client._native.MODULES`` as one mypyc group,
puts each extension beside its source and the group's shared library in
``arena_client/``, then writes the manifest (the sources' SHA-256) that lets
them be imported. The manifest is removed first and written last, so an
interrupted or failed build leaves the pure-Python modules in use, never a
half-built set. Needs mypy (a dev dependency), a C compiler and the Python
headers; without them it says what is missing and exits 1, and Arena runs as
pure Python.

``--list`` prints the sources (for the Makefile's dependencies); ``--clean``
removes the extensions and the manifest. Both a build and ``--clean`` also
remove a stale extension: one beside a source of ours whose module is no
longer in ``MODULES`` (Python would import it instead of the source).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "server"), str(ROOT / "clients" / "python")]  # this checkout's packages, not another's


def _load_native():  # type: ignore[no-untyped-def]
    """``arena_client._native`` loaded by path: stdlib only, so ``--list`` and ``--clean`` need no installed Arena."""
    spec = importlib.util.spec_from_file_location("_arena_native", ROOT / "clients/python/arena_client/_native.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_native = _load_native()


def shared_library(root: Path) -> Path:
    """The group's shared library under ``root`` (``arena_client/_native__mypyc`` plus this interpreter's suffix)."""
    *package, name = _native.GROUP.split(".")
    return root.joinpath(*package, name + "__mypyc").with_suffix(importlib.machinery.EXTENSION_SUFFIXES[0])


SOURCE_TREES = ("server", "clients/python", "reference_bots")
"""Where this checkout's packages live (each a directory on the import path)."""


def stale_extensions(root: Path = ROOT) -> list[Path]:
    """Extensions for this interpreter beside a source of ours whose module is not in ``MODULES``.

    An older build leaves one when a module is taken out of ``MODULES``. Python
    imports an extension before the source beside it, and the manifest vouches
    only for ``MODULES``, so it would run old compiled code in the source's place.
    """
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    found = []
    for tree in SOURCE_TREES:
        base = root / tree
        if not base.is_dir():
            continue
        for extension in sorted(base.rglob("*" + suffix)):
            source = extension.with_name(extension.name[: -len(suffix)] + ".py")
            module = ".".join(source.relative_to(base).with_suffix("").parts)
            if source.exists() and module not in _native.MODULES:
                found.append(extension)
    return found


def remove_stale(root: Path = ROOT) -> list[Path]:
    """Delete :func:`stale_extensions`, saying so; what was deleted."""
    stale = stale_extensions(root)
    for extension in stale:
        extension.unlink()
        print(f"build_native: removed {extension.relative_to(root)} (its module is no longer compiled)")
    return stale


def clean() -> None:
    remove_stale()
    _native.MANIFEST.unlink(missing_ok=True)
    for module in _native.MODULES:
        extension = _native.extension_path(module)
        if extension is not None:
            extension.unlink(missing_ok=True)
    shared_library(ROOT / "clients" / "python").unlink(missing_ok=True)


def build() -> int:
    try:
        from mypyc.build import mypycify
        from setuptools import Distribution
    except ImportError as exc:
        print(f"build_native: {exc}; install the dev dependencies (make) to compile the move path", file=sys.stderr)
        return 1
    clean()
    located = {m: _native.source_path(m) for m in _native.MODULES}
    sources: dict[str, Path] = {m: p for m, p in located.items() if p is not None}
    missing = [m for m in located if m not in sources]
    if missing:
        print(f"build_native: cannot find {', '.join(missing)} (run from an Arena checkout)", file=sys.stderr)
        return 1
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="arena-native-") as tmp:
        try:
            extensions = mypycify(
                [str(p.relative_to(ROOT)) for p in sources.values()],
                opt_level="3",
                group_name=_native.GROUP,
                target_dir=str(Path(tmp) / "c"),
            )
            dist = Distribution({"name": "arena-native", "ext_modules": extensions})
            command = dist.get_command_obj("build_ext")
            command.build_lib = str(Path(tmp) / "lib")  # type: ignore[attr-defined]
            command.build_temp = str(Path(tmp) / "obj")  # type: ignore[attr-defined]
            command.parallel = 2  # type: ignore[attr-defined]
            dist.run_command("build_ext")
        except (Exception, SystemExit) as exc:  # mypy's type errors arrive as SystemExit
            print(f"build_native: the build failed ({exc!r}); the move path stays pure Python", file=sys.stderr)
            return 1
        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
        lib = Path(tmp) / "lib"
        for module, source in sources.items():
            shutil.copyfile(lib.joinpath(*module.split(".")).with_suffix(suffix), source.with_suffix(suffix))
        shutil.copyfile(shared_library(lib), shared_library(ROOT / "clients" / "python"))
    manifest = {"suffix": suffix, "sources": {m: _native.digest(p) for m, p in sources.items()}}
    partial = _native.MANIFEST.with_suffix(".tmp")
    partial.write_text(json.dumps(manifest, indent=1) + "\n")
    partial.replace(_native.MANIFEST)
    print(f"build_native: compiled {len(sources)} modules in {time.perf_counter() - started:.0f}s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the compiled sources, relative to the checkout")
    parser.add_argument("--clean", action="store_true", help="remove the extensions and the manifest")
    args = parser.parse_args()
    if args.list:
        print(" ".join(str(Path(_native.source_path(m)).relative_to(ROOT)) for m in _native.MODULES))
        return 0
    if args.clean:
        clean()
        return 0
    return build()


if __name__ == "__main__":
    sys.exit(main())
