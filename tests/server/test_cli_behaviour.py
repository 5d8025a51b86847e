"""Issue 18, "Commands that behave": each friction of the first hour, run for real and checked by its message.

Real ``arena`` processes (``python -m arena_server.cli``), a real ``arena serve`` on a free port, real
signals, real pipes and a real pseudo-terminal; every check is on what the user reads.
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_bots.experiments import REPOSITORY, OutputError, output_path
from arena_client import Bot, SeatInfo, Termination, Turn
from arena_games import load_game
from arena_server.cli import build_parser
from arena_server.matches.terminal import RepeatedLines
from arena_server.referee.loop import play_match
from arena_server.seats.in_process import InProcessSeat
from tests.soak_support import ScriptProcess, ServerProcess, closed_port, write_sdk_bot

ROOT = Path(__file__).resolve().parents[2]
QUIET_EXIT = 15.0  # seconds a Ctrl-C'd command may take to end on a busy 2-core machine


def arena(*argv: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 90):
    """Run ``arena ARGV`` to the end; return the completed process and how long it took."""
    began = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "arena_server.cli", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    return out, time.monotonic() - began


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("behave") / "arena.db") as server:
        server.start()
        yield server
        server.stop()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield int(s.getsockname()[1])


def assert_quiet(stderr: str) -> None:
    for noise in ("Traceback", "CancelledError", "AioRpcError", "sqlite3", "Exception ignored"):
        assert noise not in stderr, stderr


# -- ARENA_SERVER and "cannot reach" ----------------------------------------------------------------------


def _server_options(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _server_options(sub, (*prefix, name))
        elif "--server" in action.option_strings:
            yield " ".join(prefix), action.help or ""


def test_every_server_option_names_the_environment_default() -> None:
    found = dict(_server_options(build_parser()))
    assert {"watch", "play", "match", "ladder leaderboard", "bot list", "bot submit", "replay"} <= set(found)
    for command, text in found.items():
        assert "$ARENA_SERVER" in text, (command, text)


SERVER_COMMANDS = {
    "ladder leaderboard": ["ladder", "leaderboard"],
    "ladder pools": ["ladder", "pools"],
    "bot list": ["bot", "list"],
    "replay": ["replay", "1", "--no-step"],
    "watch": ["watch", "--game", "rps"],
    "match": ["match", "random", "rock"],
}


@pytest.mark.parametrize("command", sorted(SERVER_COMMANDS))
def test_arena_server_is_the_default_and_a_closed_port_is_one_line(command: str) -> None:
    """No --server: the command goes to $ARENA_SERVER, and says "cannot reach" it in one line at once."""
    port = closed_port()
    out, elapsed = arena(*SERVER_COMMANDS[command], env={"ARENA_SERVER": f"127.0.0.1:{port}"})
    assert out.returncode == 2, out
    [line] = out.stderr.splitlines()
    assert line.startswith(f"arena: cannot reach 127.0.0.1:{port} (connection"), line
    assert line.endswith("is an Arena server running there? Start one with `arena serve`"), line
    assert elapsed < 30


@pytest.mark.parametrize("command", ["ladder leaderboard", "bot list", "replay"])
def test_a_silent_server_stops_after_the_connect_timeout(command: str, silent_port: int) -> None:
    out, elapsed = arena(*SERVER_COMMANDS[command], "--server", f"127.0.0.1:{silent_port}", "--connect-timeout", "1")
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"arena: cannot reach 127.0.0.1:{silent_port} (no answer within 1 s); is an Arena server running there? "
        "Start one with `arena serve`"
    ], out.stderr
    assert elapsed < 1 + 10  # the timeout plus the interpreter's start-up on a busy machine


def test_arena_server_reaches_a_live_server(server: ServerProcess) -> None:
    out, _ = arena("bot", "list", env={"ARENA_SERVER": server.address})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "no registered bots"


# -- make run, arena serve on a busy port ------------------------------------------------------------------


def test_make_run_takes_port_and_db(tmp_path: Path) -> None:
    port, db = closed_port(), tmp_path / "made.db"
    proc = subprocess.Popen(
        ["make", "--no-print-directory", "run", f"PORT={port}", f"DB={db}", "ARGS=--no-ladder --no-http"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "serving on" in line:
                break
        assert f"serving on 0.0.0.0:{port} (database {db})" in "".join(lines), lines
        assert db.exists()
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in the terminal: make and arena serve both get it
        proc.wait(30)
        assert proc.stdout is not None
        rest = proc.stdout.read()
        proc.stdout.close()
    assert_quiet(rest)
    assert rest.splitlines()[-1] == "arena: stopped", rest


def test_serve_on_a_busy_port_is_one_line_without_grpc_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out, _ = arena("serve", "--port", str(port), "--db", str(tmp_path / "a.db"), "--no-ladder")
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"arena: port {port} is already in use on 0.0.0.0 (another `arena serve`?); stop that program or pick "
        "another --port (0 picks a free one)"
    ], out.stderr
    assert out.stdout == ""
    assert not (tmp_path / "a.db").exists()  # refused before anything was created


# -- check-bot --cmd runs where you are ----------------------------------------------------------------------

BOT = """\
import json, sys
print(json.dumps({"hello": {"name": "mine", "games": ["rps"]}}), flush=True)
for line in sys.stdin:
    msg = json.loads(line)
    if "turn" in msg:
        turn = msg["turn"]
        print(json.dumps({"action": {"matchId": turn["matchId"], "turnId": turn["turnId"], "action": 0}}), flush=True)
"""


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder every user may search (pytest's own temporary folders are private to their owner)."""
    folder = Path(tempfile.mkdtemp(prefix="arena-check-bot-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def test_check_bot_cmd_runs_in_the_current_directory(open_folder: Path, tmp_path: Path) -> None:
    (open_folder / "bot.py").write_text(BOT)
    out, _ = arena("check-bot", "--cmd", "python3 bot.py", "--game", "rps", "-q", cwd=open_folder, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASSED" in out.stdout
    if os.geteuid() == 0:  # as root bots run as nobody, who cannot enter a private folder: checked as you, said once
        (tmp_path / "bot.py").write_text(BOT)
        out, _ = arena("check-bot", "--cmd", "python3 bot.py", "--game", "rps", "-q", cwd=tmp_path, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        [line] = out.stderr.splitlines()
        assert "is not searchable by other users, so bots running as nobody cannot reach" in line
        assert "check-bot runs it as root instead" in line, line
    help_text = subprocess.run(
        [sys.executable, "-m", "arena_server.cli", "check-bot", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "default: the current directory" in " ".join(help_text.split())


# -- Ctrl-C ---------------------------------------------------------------------------------------------------


def interrupt(process: ScriptProcess) -> str:
    """SIGINT; assert a quiet exit with status 130 (or 0 for a server); return stderr."""
    process.interrupt()
    code = process.wait(QUIET_EXIT + 10)
    stderr = process.err.text()
    assert code == 130, (code, stderr, process.out.text())
    assert_quiet(stderr)
    return stderr


def test_ctrl_c_during_a_local_match(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    argv = ["match", "random", "random", "--game", "rps", "-p", "rounds=10000000", "--db", str(db), "--local"]
    with ScriptProcess(None, argv) as match:
        deadline = time.monotonic() + 60
        while not db.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # the match is running now
        stderr = interrupt(match)
    assert stderr.splitlines() == ["arena: interrupted"]
    assert match.out.text() == ""  # no half-finished result


def test_ctrl_c_during_a_match_on_the_server_and_while_watching(server: ServerProcess, tmp_path: Path) -> None:
    """A remote bot that thinks for a minute keeps the match running while both commands are interrupted."""
    registered, _ = arena("bot", "register", "slowpoke", "--games", "rps", "--server", server.address)
    assert registered.returncode == 0, registered.stderr
    token = registered.stdout.split()[-1]
    script = write_sdk_bot(tmp_path / "slow.py", server.address, name="slowpoke", act_sleep=60, token=token)
    with (
        ScriptProcess(script) as bot,
        ScriptProcess(None, ["watch", "--game", "rps", "--server", server.address]) as watch,
    ):
        assert bot.wait_events("connected", 1, 60), bot.err.text()
        assert watch.out.wait(lambda lines: any("waiting for the next one" in x for x in lines), 60), watch.err.text()
        argv = ["match", "slowpoke", "random", "--game", "rps", "--per-move", "120", "--token", f"slowpoke={token}"]
        argv += ["--server", server.address]
        with ScriptProcess(None, argv) as match:
            assert bot.wait_events("started", 1, 60), (bot.err.text(), match.err.text())
            assert watch.out.wait(lambda lines: any(x.startswith("match ") for x in lines), 30), watch.err.text()
            assert interrupt(watch).splitlines() == ["arena: interrupted"]
            [line] = interrupt(match).splitlines()
            assert match.out.text() == ""
            # the one line says the match goes on at the server, under its id, and how to follow it ...
            said = re.fullmatch(
                r"arena: interrupted; the match goes on at (\S+) as (\S+) \(a match cannot be stopped from here\): "
                r"`arena watch (\S+) --server (\S+)` follows it to its result",
                line,
            )
            assert said is not None, line
            assert said[1] == said[4] == server.address and said[2] == said[3]
            assert f"match {said[2]}:" in watch.out.text()  # the very match the spectator saw start
            # ... and it does: the server still runs it
            with grpc.insecure_channel(server.address) as channel:
                record = mp_grpc.MatchServiceStub(channel).GetMatch(mp.GetMatchRequest(match_id=said[2], move_limit=1))
            assert record.status == mp.MATCH_STATUS_RUNNING
            assert [s.bot_name for s in record.seats] == ["slowpoke", "random"]


def test_ctrl_c_stops_a_tournament_which_then_resumes(tmp_path: Path) -> None:
    argv = ["tournament", "--game", "rps", "-p", "rounds=20000", "--bots", "random", "rock", "rotate"]
    argv += ["--games-per-pair", "20", "--db", str(tmp_path / "t.db"), "--output", str(tmp_path / "t")]
    with ScriptProcess(None, argv) as first:
        assert first.err.wait(lambda lines: any("arena: tournament" in x for x in lines), 60), first.err.text()
        time.sleep(2.0)
        stderr = interrupt(first)
    last = stderr.splitlines()[-1]
    assert re.fullmatch(
        r"arena: interrupted; \d+ of 60 matches are saved in .*t\.db; run the same command again to resume", last
    ), stderr
    with ScriptProcess(None, argv) as second:
        assert second.err.wait(lambda lines: any("resuming" in x for x in lines), 60), second.err.text()
        interrupt(second)
    assert re.search(
        r"arena: resuming tournament \w+: \d+ of 60 matches were played by an earlier run", second.err.text()
    )


def test_ctrl_c_during_an_experiment(tmp_path: Path) -> None:
    argv = ["experiment", "rpsls-thesis", "--quick", "--out", str(tmp_path / "x.md")]
    with ScriptProcess(None, argv) as experiment:
        assert experiment.err.wait(lambda lines: any("experiment 1" in x for x in lines), 120), experiment.err.text()
        stderr = interrupt(experiment)
    assert stderr.splitlines()[-1] == "arena: interrupted"
    assert not (tmp_path / "x.md").exists()


def test_ctrl_c_stops_a_server_quietly(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "s.db") as server:
        server.start()
        assert server.stop(signal.SIGINT) == 0
    text = "\n".join(server.log)
    assert_quiet(text)
    assert text.splitlines()[-1] == "arena: stopped"


# -- pipes and --output ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["games"], ["ladder", "pools"]], ids=" ".join)
def test_a_reader_that_goes_away_is_not_an_error(command: list[str], server: ServerProcess) -> None:
    """``arena games | head -1`` with the reader gone before the first write: exit 141 (SIGPIPE), no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena_server.cli", *command],
        env={**os.environ, "ARENA_SERVER": server.address},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    code = proc.wait(60)
    stderr = proc.stderr.read()
    proc.stderr.close()
    assert_quiet(stderr)
    assert stderr == ""
    assert code in (0, 141)  # 0 only when nothing was written (ladder pools of an empty server)
    if command == ["games"]:
        assert code == 141


def test_a_shell_pipe_into_head(server: ServerProcess) -> None:
    out = subprocess.run(
        f"set -o pipefail; {sys.executable} -m arena_server.cli games | head -1",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.stdout == "dots_and_boxes: Dots and boxes\n"
    assert out.stderr == ""


def test_an_unwritable_tournament_output_is_refused_before_any_match(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    argv = ["tournament", "--game", "rps", "--bots", "random", "rock", "--db", str(db)]
    out, _ = arena(*argv, "--output", str(tmp_path / "missing" / "run"))
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        f"arena: --output {tmp_path / 'missing' / 'run'}.json: the folder {tmp_path / 'missing'} does not exist; "
        "create it or pick another path"
    ]
    (tmp_path / "run.json").mkdir()
    out, _ = arena(*argv, "--output", str(tmp_path / "run"))
    assert out.stderr.splitlines() == [f"arena: --output {tmp_path / 'run'}.json is a folder; give a file path"]
    assert not db.exists()  # checked before the work started


# -- experiments --quick ---------------------------------------------------------------------------------------

EXPERIMENTS = {
    "rpsls-thesis": "docs/experiments/rpsls-thesis.md",
    "dots-and-boxes-thesis": "docs/experiments/dots-and-boxes-thesis.md",
    "liars-dice-thesis": "docs/experiments/liars-dice-thesis.md",
    "tictactoe-lab": "docs/experiments/tictactoe-lab.md",
}


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_quick_experiments_refuse_the_committed_document(name: str) -> None:
    document = ROOT / EXPERIMENTS[name]
    before = document.read_bytes() if document.exists() else None
    for path in (EXPERIMENTS[name], str(document)):
        out, _ = arena("experiment", name, "--quick", "--output", path, cwd=ROOT)
        assert out.returncode == 2, out
        [line] = out.stderr.splitlines()
        assert "is the committed document; a --quick run would overwrite it" in line, line
    assert (document.read_bytes() if document.exists() else None) == before


def test_a_quick_run_without_output_writes_a_temporary_file(capsys: pytest.CaptureFixture[str]) -> None:
    path = output_path(None, "docs/experiments/rpsls-thesis.md", quick=True)
    assert path.name == "rpsls-thesis.md" and path.parent.is_dir()
    assert REPOSITORY not in path.parents
    assert f"arena: --quick writes to {path}" in capsys.readouterr().err
    assert output_path(None, "docs/experiments/rpsls-thesis.md", quick=False) == Path(
        "docs/experiments/rpsls-thesis.md"
    )
    with pytest.raises(OutputError, match="does not exist"):
        output_path("/no/such/folder/x.md", "docs/experiments/rpsls-thesis.md", quick=True)


# -- watch, words, repeats, notation -----------------------------------------------------------------------


def test_watch_says_when_no_match_of_the_game_is_running(server: ServerProcess) -> None:
    with ScriptProcess(None, ["watch", "--game", "liars_dice", "--server", server.address]) as watch:
        assert watch.out.wait(lambda lines: bool(lines), 60), watch.err.text()
        interrupt(watch)
    assert watch.out.text().splitlines()[0] == (
        f"no liars_dice match is running on {server.address}; waiting for the next one to start (Ctrl-C stops; "
        f"start one with `arena match random random --game liars_dice --server {server.address}`) ..."
    )
    out, _ = arena("watch", "--game", "chess", "--server", server.address)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        "arena: unknown game 'chess'; games are: dots_and_boxes, liars_dice, rps, tic_tac_toe"
    ]


def _watched(server: ServerProcess, game: str, match: list[str]) -> str:
    with ScriptProcess(None, ["watch", "--game", game, "--server", server.address]) as watch:
        assert watch.out.wait(lambda lines: any("waiting for the next" in x for x in lines), 60), watch.err.text()
        played, _ = arena("match", *match, "--game", game, "--server", server.address)
        assert played.returncode == 0, played.stderr
        assert watch.wait(60) == 0, watch.err.text()
    return played.stdout + watch.out.text()


def test_repeated_moves_collapse_and_words_not_numbers(server: ServerProcess) -> None:
    text = _watched(server, "rps", ["rock", "rock", "-p", "rounds=12"])
    assert text.count("-- rock rock, rock rock") == 1
    assert "… ×12" in text
    assert re.search(r"match \d+ rps: rock vs rock  0 : 0  \(finished: the game ended normally\)", text), text
    assert "MATCH_STATUS" not in text and "TERMINATION_" not in text and "-0" not in text
    assert "result: rock 0, rock 0 (normal: the game ended normally)" in text


def test_dots_and_boxes_moves_use_the_board_numbers(server: ServerProcess) -> None:
    text = _watched(server, "dots_and_boxes", ["random", "greedy", "-p", "rows=2", "-p", "cols=2"])
    moves = [line for line in text.splitlines() if line.startswith("-- ")]
    assert moves and all(re.fullmatch(r"-- (random|greedy) \d+", line) for line in moves), moves
    assert not re.search(r"\b[hv]\d+,\d+\b", text)


def test_repeated_lines_counts_runs() -> None:
    written: list[str] = []
    lines = RepeatedLines(written.append)
    for text in ["a", "a", "a", "b", "a", "a"]:
        lines.emit(text)
    lines.flush()
    assert written == ["a", "… ×3", "b", "a", "… ×2"]


# -- Liar's Dice: a refused bid says which rule it breaks ---------------------------------------------------


class LowBidder(Bot):
    """Always bids 1x1 (action 0): legal to open a round, never a raise."""

    name = "low"

    def act(self, turn: Turn) -> int:
        return 0


async def test_a_refused_liars_dice_bid_names_the_rule() -> None:
    game = load_game("liars_dice")
    seats = [InProcessSeat(LowBidder(), SeatInfo(i, f"low{i}")) for i in range(2)]
    record = await play_match(game, seats, seed="s")
    assert record.termination == Termination.ILLEGAL_ACTION and record.offender == 1
    assert "answered 0 (1x1), which is not a legal action" in record.reason, record.reason
    assert record.reason.endswith(": 1x1 repeats the current bid; raise it or call liar"), record.reason


def test_arena_play_explains_a_refused_bid_from_the_observation() -> None:
    game = load_game("liars_dice", bidding="standard")
    state = game.new_initial_state()
    while state.current_player() < 0:  # the dice
        state.apply_action(state.chance_outcomes()[0][0])
    state.apply_action(game.bid_action(2, 4))
    player = state.current_player()
    observation = state.observation(player)
    assert game.explain_illegal(observation, player, game.bid_action(2, 3)) == (
        "2x3 does not raise the current bid 2x4: under standard bidding bid more dice, or 2 dice of a face above 4"
    )
    assert game.explain_illegal(observation, player, game.bid_action(2, 3)) == state.illegal_reason(
        player, game.bid_action(2, 3)
    )


# -- progress bars: on a terminal, not in a pipe ---------------------------------------------------------


def on_a_terminal(argv: list[str], cwd: Path) -> str:
    """Run ``arena ARGV`` with stderr on a real pseudo-terminal; return what it drew there."""
    primary, replica = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "arena_server.cli", *argv],
            stdout=subprocess.DEVNULL,
            stderr=replica,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
        )
        os.close(replica)
        seen = b""
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the terminal closed: the program ended
                break
            if not chunk:
                break
            seen += chunk
        assert proc.wait(120) == 0, seen
    finally:
        os.close(primary)
    return seen.decode(errors="replace")


PROGRESS = {
    "tournament": (
        ["tournament", "--game", "rps", "-p", "rounds=200", "--bots", "random", "rock", "--games-per-pair", "4"],
        "4/4",
    ),
    "train dots-and-boxes": (
        ["train", "dots-and-boxes", "--evaluations", "50", "--repetitions", "2", "--out", "dab", "--no-plots"],
        "10/10",
    ),
    "train liars-dice-cfr": (
        ["train", "liars-dice-cfr", "--bidding", "standard", "--wild", "none", "--target", "0.01", "--out", "cfr"],
        "exploitability",
    ),
}


@pytest.mark.parametrize("name", sorted(PROGRESS))
def test_progress_bars_only_on_a_terminal(name: str, tmp_path: Path) -> None:
    argv, done = PROGRESS[name]
    (tmp_path / "pipe").mkdir()
    (tmp_path / "tty").mkdir()
    piped, _ = arena(*argv, cwd=tmp_path / "pipe", timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert "ETA" not in piped.stderr and "\r" not in piped.stderr + piped.stdout, piped.stderr
    drawn = on_a_terminal(argv, tmp_path / "tty")
    assert "ETA" in drawn and done in drawn, drawn
