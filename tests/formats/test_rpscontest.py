"""RPSContest programs: Python 2 conversion, and real matches through the sandboxed subprocess seat.

The programs in ``rpscontest_programs/`` are written here in Python 2, in the style of
rpscontest.com entries; each is converted, bundled with the runner and played by a
real ``python3`` subprocess in the sandbox against hosted reference bots.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from arena_bots import hosted_bots
from arena_client import SeatInfo, Termination, TimeControl
from arena_games import load_game
from arena_server.bots import formats
from arena_server.bots.runners import rpscontest_runner
from arena_server.bots.runners.py2to3 import ConversionError, convert
from arena_server.referee.loop import play_match
from arena_server.referee.records import MatchRecord
from arena_server.seats.in_process import InProcessSeat
from arena_server.seats.sandbox import Limits
from arena_server.seats.subprocess_seat import SubprocessSeat

PROGRAMS = Path(__file__).parent / "rpscontest_programs"
CLOCK = TimeControl(timedelta(seconds=1), timedelta(seconds=20), timedelta(seconds=0.2))
LIMITS = Limits(cpu_seconds=60, memory_bytes=256 << 20)


def run_py2(source: str) -> dict[str, object]:
    """Convert ``source`` and run it in the runner's namespace; the namespace after."""
    ns = rpscontest_runner.namespace()
    exec(compile(convert(source), "program.py", "exec"), ns)
    return ns


# -- conversion ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("py2", "expected"),
    [
        ("print 'a', 1", "print('a', 1)"),
        ("print 'a',", "print('a', end=\" \")"),
        ("print", "print()"),
        ("print >>sys.stderr, 'x', y", "print('x', y, file=sys.stderr)"),
        ("print >>f", "print(file=f)"),
        ("print('same')", "print('same')"),
        ("if x: print x", "if x: print(x)"),
        ("a = 1; print a; b = 2", "a = 1; print(a); b = 2"),
        ("for i in xrange(3): pass", "for i in range(3): pass"),
        ("d.has_key(k)", "d.__contains__(k)"),
        ("for k, v in d.iteritems(): pass", "for k, v in d.items(): pass"),
        ("x = d.itervalues()", "x = d.values()"),
        ("k = d.keys()[0]", "k = list(d.keys())[0]"),
        ("k = a.b[c](1).items()", "k = list(a.b[c](1).items())"),
        ("n = it.next()", "n = next(it)"),
        ("try: pass\nexcept (A, B), e: pass", "except (A, B) as e:"),
        ("raise ValueError, 'bad'", "raise ValueError('bad')"),
        ("exec code in ns", "exec(code, ns)"),
        ("x = a <> b", "x = a != b"),
        ("s = `x + 1`", "s = repr(x + 1)"),
        ("n = 10L + 0x1FL", "n = 10 + 0x1F"),
        ("n = 0777", "n = 0o777"),
        ("s = ur'\\d'", "s = r'\\d'"),
        ("s = string.letters + string.lowercase", "s = string.ascii_letters + string.ascii_lowercase"),
        ("m = sys.maxint", "m = sys.maxsize"),
        ("ok = isinstance(s, basestring) and unicode(s)", "ok = isinstance(s, str) and str(s)"),
        ("c = unichr(65); n = long(3)", "c = chr(65); n = int(3)"),
        ("f(long=1)", "f(long=1)"),
        ("q = a / b", "q = a /__py2div__/ b"),
        ("from __future__ import division\nq = a / b", "q = a / b"),
        ("from __future__ import print_function\nprint('a', end='')", "print('a', end='')"),
        ("if x:\n\ty = 1\n        z = 2", "if x:\n        y = 1\n        z = 2"),
    ],
)
def test_conversion_rule(py2: str, expected: str) -> None:
    assert expected in convert(py2 + "\n")


def test_division_floors_only_when_python_2_did() -> None:
    ns = run_py2("a = 7 / 2\nb = -7 / 2\nc = 7.0 / 2\nd = 7\nd /= 2\ne = 2 * 9 / 4 * 2\nf = 1 / 2.0 + 3 / 2\n")
    assert (ns["a"], ns["b"], ns["c"], ns["d"], ns["e"], ns["f"]) == (3, -4, 3.5, 3, 8, 1.5)


def test_a_program_binding_a_python_2_builtin_name_keeps_it() -> None:
    ns = run_py2("long = 5\nn = long + 1\ndef xrange(n):\n    return [n]\nr = xrange(3)\ns = str(7)\nu = unicode(8)\n")
    assert (ns["n"], ns["r"], ns["s"], ns["u"]) == (6, [3], "7", "8")


def test_python_2_builtins_return_lists() -> None:
    ns = run_py2("m = map(str, xrange(3))[1]\nz = zip('ab', 'cd')[0]\nr = reduce(lambda a, b: a + b, [1, 2, 3])\n")
    assert (ns["m"], ns["z"], ns["r"]) == ("1", ("a", "c"), 6)


def test_converted_lines_keep_their_numbers() -> None:
    source = (PROGRAMS / "markov.py2").read_text()
    assert len(convert(source).splitlines()) == len(source.splitlines())


@pytest.mark.parametrize(
    ("py2", "words"),
    [
        ("x = 1\ny = 'open\n", "line 2: a string is not closed"),
        ("x = 1\n\ny = (1,\n", "line 3: this '(' is never closed"),
        ("x = 1\ny = 09\n", "line 2: 09 is not a valid number"),
        ("x = 1\nwhile x y: pass\n", "line 2: invalid syntax: 'while x y: pass' (after conversion from Python 2"),
        ("a = 1\nb = 2\nprint >>, 3\n", "line 3: `print >>` names no file"),
        ("a = 1\nb = ]\n", "line 2: ']' closes a bracket that was never opened"),
    ],
)
def test_conversion_error_names_the_line(py2: str, words: str) -> None:
    with pytest.raises(ConversionError, match=None) as info:
        convert(py2, "prog.py")
    assert str(info.value).startswith("prog.py line "), info.value
    assert words in str(info.value), info.value


def test_unconvertible_program_is_refused_before_it_runs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("output = 'R'\nif input <> 'R' print 1\n")
    with pytest.raises(formats.FormatError, match=r"cannot convert this RPSContest program: bad.py line 2: "):
        formats.local_program("rpscontest", bad)


# -- real matches -------------------------------------------------------------------------------


async def play(
    program: str, opponent: str, tmp_path: Path, rounds: int = 100, signs: int = 3
) -> tuple[MatchRecord, str]:
    """One match of the bundled program (seat 0) against a hosted bot; the record and the program's log."""
    seat = SubprocessSeat(
        formats.local_program("rpscontest", PROGRAMS / program, LIMITS), SeatInfo(0, program, 1, "subprocess")
    )
    other = InProcessSeat(hosted_bots()[opponent].factory(7), SeatInfo(1, opponent))
    try:
        record = await play_match(load_game("rps", rounds=rounds, signs=signs), [seat, other], CLOCK, seed="s")
    finally:
        await seat.close()
    return record, seat.stderr_log()


@pytest.mark.parametrize(
    ("program", "opponent", "at_least"),
    [("freq_counter.py2", "rock", 95), ("markov.py2", "rotate", 60), ("beat_last.py2", "rock", 95)],
)
async def test_program_beats_a_hosted_bot(program: str, opponent: str, at_least: int, tmp_path: Path) -> None:
    record, log = await play(program, opponent, tmp_path)
    assert record.termination == Termination.NORMAL, (record.reason, log[-2000:])
    assert record.returns[0] >= at_least, record.summary()


async def test_markov_plays_the_sicilian(tmp_path: Path) -> None:
    record, log = await play("markov.py2", "sicilian", tmp_path, rounds=60)
    assert record.termination == Termination.NORMAL, (record.reason, log[-2000:])
    assert len(record.moves) == 120  # both seats, 60 rounds
    assert "markov: 50 moves" in log  # print >>sys.stderr reached the log


async def test_prints_and_stdin_never_touch_the_protocol(tmp_path: Path) -> None:
    record, log = await play("freq_counter.py2", "random", tmp_path, rounds=30)
    assert record.termination == Termination.NORMAL, (record.reason, log[-2000:])
    assert "not a protocol line" in log and '{"action": {"matchId": "x"' in log
    assert "round 29 counts" in log
    assert "[arena] isolation: no network" in log  # the real sandbox


async def test_bad_output_loses_with_the_reason(tmp_path: Path) -> None:
    record, _ = await play("bad_output.py2", "random", tmp_path, rounds=10)
    assert record.termination == Termination.RESIGN
    assert record.offender == 0
    assert "the program's output was 'rock' in round 3; it must be 'R', 'P' or 'S'" in record.reason
    assert record.returns[0] < record.returns[1]


async def test_raising_program_loses_with_the_line(tmp_path: Path) -> None:
    record, log = await play("raises.py2", "random", tmp_path, rounds=10)
    assert record.termination == Termination.RESIGN
    assert "the program raised ZeroDivisionError" in record.reason
    assert "at line 7 in round 4" in record.reason
    assert "Traceback" in log


async def test_rpsls_is_refused_clearly(tmp_path: Path) -> None:
    record, _ = await play("beat_last.py2", "random", tmp_path, rounds=10, signs=5)
    assert record.termination == Termination.RESIGN
    assert "RPSContest programs play 3 signs only; this match has signs=5" in record.reason


def test_runner_speaks_json_lines_on_the_real_stdout(tmp_path: Path) -> None:
    """The runner as a plain process: its protocol lines are the only thing on stdout."""
    turn = {"matchId": "m", "turnId": 1, "observation": {"rps": {"signs": 3, "round": 0}}, "legalActions": [0, 1, 2]}
    lines = [{"matchStarted": {"matchId": "m", "seat": 0}}, {"turn": turn}, {"matchEnded": {"matchId": "m"}}]
    done = subprocess.run(
        [sys.executable, "-B", "-c", formats.runner_source(formats.get_format("rpscontest")), "freq_counter.py2"],
        cwd=PROGRAMS,
        input="".join(json.dumps(m) + "\n" for m in lines),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    sent = [json.loads(line) for line in done.stdout.splitlines()]
    assert [next(iter(m)) for m in sent] == ["hello", "action"]
    assert sent[1]["action"]["turnId"] == 1
    assert "not a protocol line" in done.stderr


def test_tokenizer_survives_large_real_sources() -> None:
    """Every module of Arena's server converts to code that compiles, line for line (f-strings, decorators,
    nested brackets, triple-quoted strings, continuations): the tokenizer is not only good for toy programs."""
    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "server").rglob("*.py"))
    assert len(files) > 50
    for path in files:
        source = path.read_text()
        assert len(convert(source, path.name).splitlines()) == len(source.splitlines()), path
