"""``arena.evaluate``: real matches with Arena's referee and clocks between every kind of agent."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import arena
from arena_client import Bot, Termination, TimeControl, Turn
from arena_server.matches.evaluate import EvaluateError, Evaluation, t_quantile_975
from tests.server._stdio_helpers import PLAIN_PYTHON_BOT, PYTHON, TEST_LIMITS


class Paper(Bot):
    name = "paper-bot"

    def act(self, turn: Turn) -> int:
        return 1


def beat_last(observation, configuration):  # type: ignore[no-untyped-def]  # a Kaggle agent as people write them
    if observation.step == 0:
        return 0
    return (observation.lastOpponentAction + 1) % configuration.signs


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="arena-evaluate-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_kaggle_function_against_a_hosted_bot() -> None:
    result = arena.evaluate("rps", [beat_last, "rock"], episodes=3, params={"rounds": 30}, seed="s")
    assert isinstance(result, Evaluation)
    assert result.names == ["beat_last", "rock"]
    assert result.returns == [(29.0, -29.0)] * 3
    assert result.outcomes(0) == (3, 0, 0) and result.outcomes(1) == (0, 0, 3)
    assert result.interval(0) == (29.0, 29.0)
    text = str(result)
    assert "rps(signs=3, rounds=30, draw_band=0), 3 match(es)" in text
    assert "beat_last" in text and "+29.00" in text and "[+29.00, +29.00]" in text and "3/0/0" in text
    page = result._repr_html_()
    assert page.count("<tr>") == 3 and "<td>beat_last</td>" in page


def test_kaggle_functions_number_five_signs_as_kaggle_does() -> None:
    def spock(observation, configuration):  # type: ignore[no-untyped-def]
        return 3  # Kaggle's Spock beats rock

    result = arena.evaluate("rps", [spock, "rock"], params={"signs": 5, "rounds": 4})
    assert result.returns == [(4.0, -4.0)]


def test_sdk_bots_and_intervals_from_varying_scores() -> None:
    result = arena.evaluate("rps", [Paper(), "random"], episodes=12, params={"rounds": 20})
    scores = [r[0] for r in result.returns]
    assert len(scores) == 12 and len(set(scores)) > 1  # random varies
    low, high = result.interval(0)
    mean = sum(scores) / 12
    sd = math.sqrt(sum((x - mean) ** 2 for x in scores) / 11)
    assert low == pytest.approx(mean - 2.201 * sd / math.sqrt(12))
    assert high == pytest.approx(mean + 2.201 * sd / math.sqrt(12))
    assert result.names == ["paper-bot", "random"]


def test_a_command_line_and_a_kaggle_file_play_in_the_sandbox(folder: Path) -> None:
    agent = folder / "agent.py"
    agent.write_text("def agent(observation, configuration):\n    return 1\n")
    command = f"{PYTHON} {PLAIN_PYTHON_BOT} 3"
    result = arena.evaluate(
        "rps", [f"kaggle:{agent}", command], params={"rounds": 10}, limits=TEST_LIMITS, seed="fixed"
    )
    record = result.records[0]
    assert record.termination == Termination.NORMAL, record.reason
    assert result.names == ["kaggle:agent.py", "bot.py"]
    assert record.seats[0].kind == "subprocess" and record.seats[1].kind == "subprocess"
    # plain_python answers what beats the opponent's last sign: scissors after round 0
    assert [action for _player, action, _elapsed, _legal in record.moves][3::2] == [2] * 9


def test_same_names_are_told_apart_and_failures_are_listed() -> None:
    def raises(observation, configuration):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    result = arena.evaluate("rps", [raises, raises], params={"rounds": 3})
    assert result.names == ["raises", "raises#2"]
    assert result.terminations == [Termination.CRASH]
    assert "match 1: crash: " in str(result) and "boom" in str(result)


async def test_inside_a_running_event_loop_as_in_a_notebook() -> None:
    clock = TimeControl(timedelta(seconds=1), timedelta(seconds=5), timedelta(seconds=0.1))
    result = arena.evaluate("rps", [beat_last, "rotate"], params={"rounds": 5}, time_control=clock)
    assert result.records[0].time_control == clock
    assert len(result.records[0].moves) == 10


def test_bad_arguments_say_what_to_give() -> None:
    with pytest.raises(EvaluateError, match=r"'sicillian' is not a hosted bot, a format file .* or a command line"):
        arena.evaluate("rps", [beat_last, "sicillian"])
    with pytest.raises(EvaluateError, match="beat_last \\(kaggle function\\) plays rps, not tic_tac_toe"):
        arena.evaluate("tic_tac_toe", [beat_last, "random"])
    with pytest.raises(EvaluateError, match="sicilian \\(hosted\\) plays rps, not liars_dice"):
        arena.evaluate("liars_dice", ["random", "sicilian"])
    with pytest.raises(EvaluateError, match="episodes=0: play at least one match"):
        arena.evaluate("rps", [beat_last, "rock"], episodes=0)
    with pytest.raises(EvaluateError, match=re.escape("cannot load 'rps' with {'rounds': -1}")):
        arena.evaluate("rps", [beat_last, "rock"], params={"rounds": -1})
    with pytest.raises(EvaluateError, match=r"not a file; give the kaggle bot's \.py file"):
        arena.evaluate("rps", ["kaggle:/no/such/agent.py", "rock"])


def test_t_quantiles() -> None:
    assert (
        t_quantile_975(1) == 12.706
        and t_quantile_975(11) == 2.201
        and t_quantile_975(45) == 2.021
        and t_quantile_975(500) == 1.96
    )


def test_import_arena_v1_stays_light() -> None:
    code = "import sys, arena.v1.common_pb2, arena; assert 'arena_server' not in sys.modules; arena.evaluate; "
    code += "assert 'arena_server.matches.evaluate' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
