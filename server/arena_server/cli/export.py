"""``arena export kaggle BOT``: write a hosted bot as a Kaggle agent file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from arena_server.bots.export import ExportError, export_kaggle
from arena_server.cli import CliError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "export",
        help="write a hosted bot in another platform's format (kaggle)",
        description="Write a hosted Arena bot as a file another platform runs. `arena export kaggle BOT` writes "
        "a Kaggle rock-paper-scissors agent (it carries Arena's bots inside; needs numpy and numba).",
    )
    p.add_argument("format", choices=["kaggle"], help="the target format")
    p.add_argument("bot", help="a hosted bot that plays rps, e.g. sicilian")
    p.add_argument("--output", "-o", type=Path, default=None, help="the file to write (default: BOT.py)")
    p.add_argument("--seed", type=int, default=0, help="the bot's seed (default 0)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    output: Path = args.output or Path(f"{args.bot}.py")
    if output.is_dir():
        raise CliError(f"--output {output} is a folder; give a file name such as {output / (args.bot + '.py')}")
    if not output.parent.resolve().is_dir():
        raise CliError(f"cannot write {output}: the folder {output.parent} does not exist")
    try:
        text = export_kaggle(args.bot, args.seed)
    except ExportError as exc:
        raise CliError(str(exc)) from None
    try:
        output.write_text(text)
    except OSError as exc:
        raise CliError(f"cannot write {output}: {exc.strerror or exc}") from None
    print(f"wrote {output} ({len(text) >> 10} KiB): a Kaggle agent playing {args.bot!r}", file=sys.stderr)
    return 0
