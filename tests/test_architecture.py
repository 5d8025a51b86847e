"""The folder tree is the architecture: import contracts hold and no module imports itself round a cycle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripts_support import load_script

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_hold() -> None:
    """`lint-imports` checks the layer contracts in pyproject.toml (see docs/architecture.md)."""
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.fail(f"{lint} is missing: install the dev extra (pip install -e '.[dev]')")
    out = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


@pytest.mark.parametrize(
    "package, folder", [("arena_server", "server/arena_server"), ("arena_bots", "reference_bots/arena_bots")]
)
def test_no_import_cycles(package: str, folder: str) -> None:
    stats = load_script("arch_stats").analyse(package, ROOT / folder)
    assert stats["cycles"] == [], f"import cycles in {package}: {stats['cycles']}"
