"""``arena games``: list the games, their parameters and rules."""

from __future__ import annotations

import argparse
import json
import textwrap

from arena_games import registered_games


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("games", help="list games and their parameters", description="List the games Arena referees.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    games = registered_games()
    if args.json:
        out = [
            {
                "name": name,
                "title": cls.title,
                "rules": cls.rules,
                "params": [
                    {
                        "name": s.name,
                        "type": s.type.__name__,
                        "default": s.default,
                        "range": s.range_text(),
                        "description": s.description,
                    }
                    for s in cls.param_specs
                ],
            }
            for name, cls in games.items()
        ]
        print(json.dumps(out, indent=2))
        return 0
    for name, cls in games.items():
        print(f"{name}: {cls.title}")
        for spec in cls.param_specs:
            print(f"    {spec.name:<10} default {spec.default!s:<10} {spec.range_text():<22} {spec.description}")
        print(textwrap.indent(textwrap.fill(cls.rules, 96), "    "))
        print()
    return 0
