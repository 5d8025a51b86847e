"""Runner for Kaggle agents: plays a Kaggle rock-paper-scissors agent file, unchanged, as an Arena bot.

Started by the subprocess seat as ``python -c <source> AGENT_FILE`` (see
:func:`arena_server.bots.formats.runner_source`); standard library only.

The agent is chosen as kaggle-environments chooses it: the file is executed once into a
fresh namespace (with its folder on ``sys.path``) and the agent is the last value in that
namespace, in definition order, that is callable. That may be an instance with
``__call__``; a name bound earlier and re-bound later keeps its first place, as in a dict.

Every Turn calls ``agent(observation, configuration)``. Both are dicts that also allow
attribute access (``observation.step``, ``observation["step"]``):

* observation: ``step`` (the round, from 0), ``lastOpponentAction`` (absent at step 0;
  with 5 signs in Kaggle's numbering, see :func:`kaggle_sign`),
  ``reward`` (own wins minus the opponent's so far), ``remainingOverageTime`` (seconds
  left in the overage bank).
* configuration: ``signs``, ``episodeSteps`` (rounds + 1: Kaggle plays ``episodeSteps - 1``
  rounds), ``actTimeout`` (the per-move time
  minus a small margin for this runner, so an agent that uses all of it still answers in
  time), ``runTimeout`` (all rounds' time plus the overage), ``tieRewardThreshold``
  (the game's draw band + 1: Kaggle calls a reward below it a tie), ``agentTimeout`` (60, as Kaggle).

The module's globals persist across the match (one process per match). The agent's prints
go to its log. A module the agent needs and this Python lacks is named in one line; an
exception in the agent ends the match as a crash, with its traceback in the log.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any, NoReturn

from arena_server.bots.runners.stdio import Protocol, param, private_workdir, seconds, serve

TAG = "[kaggle]"
MARGIN = 0.05
"""Seconds of the per-move time kept back from ``actTimeout`` for the runner and the pipes."""


class Struct(dict):  # type: ignore[type-arg]
    """A dict whose keys are also attributes, as kaggle-environments' ``structify`` makes them."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def fail(protocol: Protocol, text: str) -> NoReturn:
    """Say why the agent cannot go on (the last line of the log, which the match record quotes) and exit."""
    protocol.say(text)
    sys.stderr.flush()
    os._exit(1)


def agent_line(exc: BaseException, path: str) -> str:
    """`` line N`` of the innermost frame of ``exc``'s traceback inside the agent file, or ""."""
    line = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == path:
            line = f" line {frame.lineno}"
    return line


def load_agent(protocol: Protocol, path: str) -> Any:
    """The agent of the file at ``path``: the last callable its code defines."""
    name = os.path.basename(path)
    try:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        fail(protocol, f"cannot read {name}: {exc}")
    folder = os.path.dirname(path)
    sys.path.append(folder)
    env: dict[str, Any] = {}
    try:
        exec(compile(source, path, "exec"), env)
    except ModuleNotFoundError as exc:
        traceback.print_exc()
        fail(
            protocol,
            f"{name}{agent_line(exc, path)} imports {exc.name!r}, which is not installed for the Python that runs "
            f"bots on this server ({sys.executable}); ask its operator to install it, or remove the import",
        )
    except SyntaxError as exc:
        fail(protocol, f"{name} line {exc.lineno}: {exc.msg}")
    except BaseException as exc:
        traceback.print_exc()
        fail(protocol, f"{name}{agent_line(exc, path)} raised while loading: {exc!r}")
    callables = [value for value in env.values() if callable(value)]
    if not callables:
        fail(protocol, f"{name} defines no function; a Kaggle agent file defines agent(observation, configuration)")
    return callables[-1]


def kaggle_sign(action: int, signs: int) -> int:
    """An Arena sign as Kaggle numbers it, and back (the same swap both ways).

    With 5 signs Kaggle numbers Spock 3 and Lizard 4 (and its rule follows that order);
    Arena's RPSLS numbers Lizard 3 and Spock 4. Every other sign, and every other count of
    signs, is the same number on both.
    """
    return 7 - action if signs == 5 and action in (3, 4) else action


def configuration(signs: int, rounds: int, draw_band: int, per_move: float, overage: float) -> Struct:
    """Kaggle's ``configuration`` for an Arena rps match (shared with the in-process ``arena.evaluate``)."""
    return Struct(
        signs=signs,
        episodeSteps=rounds + 1,  # Kaggle plays episodeSteps - 1 rounds
        actTimeout=max(0.0, per_move - min(MARGIN, per_move / 10)),
        runTimeout=per_move * rounds + overage,
        tieRewardThreshold=draw_band + 1,  # Kaggle: |reward| below it is a tie
        agentTimeout=60.0,
    )


class KagglePlayer:
    """One match: builds the observation and configuration, calls the agent, checks its answer."""

    def __init__(self, protocol: Protocol, agent: Any, path: str, started: dict[str, Any]) -> None:
        self.protocol = protocol
        self.agent = agent
        self.name = os.path.basename(path)
        self.path = path
        self.seat = int(started.get("seat", 0))
        params = started.get("params", {})
        clock = started.get("timeControl", {})
        per_move = seconds(clock.get("perMove"), 1.0)
        overage = seconds(clock.get("overage"))
        self.signs = int(param(params, "signs", 3))
        rounds = int(param(params, "rounds", 1000))
        self.configuration = configuration(self.signs, rounds, int(param(params, "draw_band", 0)), per_move, overage)

    def act(self, turn: dict[str, Any]) -> int:
        rps = turn.get("observation", {}).get("rps", {})
        step = int(rps.get("round", 0))
        wins = [int(w) for w in rps.get("wins", [])] or [0, 0]
        observation = Struct(
            step=step,
            reward=wins[self.seat] - wins[1 - self.seat] if len(wins) == 2 else 0,
            remainingOverageTime=seconds(turn.get("overageLeft")),
        )
        last = rps.get("lastRound", [])
        if step > 0 and len(last) == 2:
            observation.lastOpponentAction = kaggle_sign(int(last[1 - self.seat]), self.signs)
        started = time.perf_counter()
        try:
            answer = self.agent(observation, self.configuration)
        except ModuleNotFoundError as exc:
            traceback.print_exc()
            fail(
                self.protocol,
                f"{self.name}{agent_line(exc, self.path)} imports {exc.name!r} at step {step}, which is not installed "
                f"for the Python that runs bots on this server ({sys.executable})",
            )
        except BaseException as exc:
            traceback.print_exc()
            fail(self.protocol, f"the agent raised {exc!r} at step {step}{agent_line(exc, self.path)}")
        elapsed = time.perf_counter() - started
        if elapsed > self.configuration.actTimeout:
            limit = self.configuration.actTimeout
            self.protocol.say(f"step {step}: the agent took {elapsed:.3f}s (actTimeout {limit:g}s)")
        try:
            action = int(answer)
        except (TypeError, ValueError):
            fail(self.protocol, f"the agent returned {answer!r} at step {step}, not a sign 0..{self.signs - 1}")
        return kaggle_sign(action, self.signs)


def main() -> int:
    if len(sys.argv) != 2:
        sys.stderr.write(f"{TAG} usage: kaggle_runner AGENT_FILE\n")
        return 2
    path = os.path.abspath(sys.argv[1])
    protocol = Protocol(TAG)
    private_workdir(os.path.dirname(path), "kaggle-agent-")
    agent = load_agent(protocol, path)
    name = os.path.splitext(os.path.basename(path))[0]
    return serve(protocol, name, ["rps"], lambda started: KagglePlayer(protocol, agent, path, started))


if __name__ == "__main__":
    sys.exit(main())
