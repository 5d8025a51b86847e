"""The ``arena`` command line: every help page renders; user errors are one line."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from arena_server.cli import COMMANDS as COMMAND_MODULES
from arena_server.cli import build_parser


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, (*prefix, name))
    return found


COMMANDS = _commands(build_parser())


def test_the_expected_commands_exist() -> None:
    top = {c[0] for c in COMMANDS if len(c) == 1}
    expected = {"serve", "games", "match", "play", "watch", "profile", "experiment", "check-bot"}
    expected |= {"bot", "tournament", "ladder", "ratings", "replay"}
    assert expected <= top


def test_each_command_is_built_from_its_own_module_alone() -> None:
    """``main`` builds only the parser of the command it runs: the map of commands to modules must be whole."""
    assert set(COMMAND_MODULES) == {c[0] for c in COMMANDS if len(c) == 1}
    for name, module in COMMAND_MODULES.items():
        alone = _commands(build_parser(name))
        assert (name,) in alone, f"{module} does not register {name!r}"
        assert {c[0] for c in alone if c} == {n for n, m in COMMAND_MODULES.items() if m == module}


def _probe(*lines: str) -> list[str]:
    """Run ``lines`` as a Python program in a fresh interpreter; its stdout lines."""
    out = subprocess.run([sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_a_light_command_does_not_load_the_server_or_the_bots() -> None:
    """``arena games`` starts in a fraction of a second: no bots, numba or gRPC server are imported."""
    out = _probe(
        "import sys",
        "from arena_server.cli import main",
        "assert main(['games']) == 0",
        "heavy = ('numba', 'arena_bots', 'arena_server.api.server', 'arena_server.cli.serve')",
        "print('loaded:', [m for m in heavy if m in sys.modules])",
    )
    assert any("rps" in line for line in out)
    assert out[-1] == "loaded: []"


def test_the_bots_load_when_first_asked_for() -> None:
    """Importing ``arena_bots`` (as the hub and every server command do) loads no bot; ``hosted_bots()`` loads all."""
    before, names, after = _probe(
        "import sys",
        "import arena_bots, arena_server.matches.hub, arena_server.cli.ladder",
        "print('numba' in sys.modules)",
        "print(sorted(arena_bots.hosted_bots()))",
        "print('numba' in sys.modules)",
    )
    assert (before, after) == ("False", "True")
    for name in ("rock", "random", "mind-reader-3", "alphabeta", "mcts", "cfr", "neuro", "sicilian"):
        assert repr(name) in names


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "arena")
def test_help_renders(command: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([*command, "--help"])
    assert done.value.code == 0
    assert "usage: arena" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["match", "random"], "rps needs 2 bots, got 1"),
        (["match", "random", "rock", "-p", "signs"], "must look like NAME=VALUE"),
        (["match", "random", "rock", "--per-move", "0"], "per_move must be positive"),
        (["games", "--colour"], "unrecognized arguments: --colour"),
        (["serve", "--port", "99999"], "--port 99999 is out of range"),
        (["serve", "--switch-interval", "0"], "--switch-interval 0 is out of range; use 0.0001..0.1 seconds"),
        (["serve", "--switch-interval", "0.5"], "--switch-interval 0.5 is out of range; use 0.0001..0.1 seconds"),
        (["nonsense"], "invalid choice: 'nonsense'"),
    ],
)
def test_user_errors_are_one_line(argv: list[str], message: str) -> None:
    out = subprocess.run([sys.executable, "-m", "arena_server.cli", *argv], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arena: ") and message in lines[0], out.stderr
