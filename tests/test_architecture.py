"""The folder tree is the architecture: import contracts hold and no module imports itself round a cycle."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _arch_stats():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("arch_stats", ROOT / "scripts" / "arch_stats.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_import_contracts_hold() -> None:
    """`lint-imports` checks the layer contracts in pyproject.toml (see docs/architecture.md)."""
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.fail(f"{lint} is missing: install the dev extra (pip install -e '.[dev]')")
    out = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


@pytest.mark.parametrize("package, folder", [("arena_server", "server/arena_server"), ("arena_bots", "reference_bots/arena_bots")])
def test_no_import_cycles(package: str, folder: str) -> None:
    stats = _arch_stats().analyse(package, ROOT / folder)
    assert stats["cycles"] == [], f"import cycles in {package}: {stats['cycles']}"
