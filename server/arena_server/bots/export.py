"""``arena export kaggle BOT``: a Kaggle agent file that plays a hosted Arena rock-paper-scissors bot.

The file is :mod:`arena_server.bots.runners.kaggle_export` with the bot's name filled in and
Arena's rules engines, SDK and reference bots packed into it (a base64 zip of the
``arena_games``, ``arena_client`` and ``arena_bots`` packages, sources and data files), so it
needs nothing of Arena where it runs: only numpy and numba, which the reference bots use.
"""

from __future__ import annotations

import base64
import io
import re
import zipfile
from pathlib import Path

import arena_bots
import arena_client
import arena_games
from arena_bots import hosted_bots
from arena_server.bots.formats import RUNNERS_DIR

TEMPLATE = RUNNERS_DIR / "kaggle_export.py"
BUNDLED_SUFFIXES = (".py", ".json", ".npz")


class ExportError(ValueError):
    """A bot that cannot be exported; the message says which bots can."""


def bundle() -> bytes:
    """The zip of Arena's packages a standalone agent needs (no caches, no tests)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for package in (arena_games, arena_client, arena_bots):
            root = Path(package.__file__ or "").parent
            for path in sorted(root.rglob("*")):
                if path.suffix in BUNDLED_SUFFIXES and "__pycache__" not in path.parts:
                    archive.write(path, str(Path(root.name) / path.relative_to(root)))
    return buffer.getvalue()


def export_kaggle(name: str, seed: int = 0) -> str:
    """The text of a Kaggle agent file that plays the hosted bot ``name``.

    Raises:
        ExportError: ``name`` is not a hosted bot that plays rock-paper-scissors.
    """
    hosted = hosted_bots()
    playable = sorted(n for n, b in hosted.items() if not b.games or "rps" in b.games)
    if name not in playable:
        what = "does not play rps" if name in hosted else "is not a hosted bot"
        raise ExportError(f"{name!r} {what}; bots that can be exported: {', '.join(playable)}")
    text = TEMPLATE.read_text()
    packed = base64.b64encode(bundle()).decode("ascii")
    lines = [packed[i : i + 100] for i in range(0, len(packed), 100)]
    replacements = {
        "BOT_NAME": f"BOT_NAME = {name!r}",
        "BUNDLE": "BUNDLE = (\n" + "\n".join(f'    "{line}"' for line in lines) + "\n)",
        "SEED": f"SEED = {int(seed)}",
    }
    for key, value in replacements.items():
        pattern = re.compile(rf"^{key} = .*$", re.MULTILINE)
        match = pattern.search(text)
        assert match is not None, key
        text = text[: match.start()] + value + text[match.end() :]
    header = f"# Exported by `arena export kaggle {name}`: Arena's hosted bot {name!r} as a Kaggle agent.\n"
    return header + text
