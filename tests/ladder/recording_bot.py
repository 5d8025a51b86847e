"""A JSON-lines stdio bot that appends every line it receives to a file and plays deterministically.

Usage: recording_bot.py LOG_FILE [MODE]. MODE ``mix`` (default) picks
``legal[(turnId * 7 + round) % len(legal)]``; ``first`` always the first legal action.
Standard library only.
"""

import json
import sys


def main() -> None:
    log_path = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "mix"
    sys.stdout.write(
        json.dumps({"hello": {"protocolVersion": "arena.v1", "name": "recorder", "client": "test"}}) + "\n"
    )
    sys.stdout.flush()
    with open(log_path, "a") as log:
        for line in sys.stdin:
            if not line.strip():
                continue
            log.write(line if line.endswith("\n") else line + "\n")
            log.flush()
            message = json.loads(line)
            if "turn" in message:
                turn = message["turn"]
                legal = turn["legalActions"]
                if mode == "first":
                    choice = legal[0]
                else:
                    choice = legal[(int(turn["turnId"]) * 7 + len(turn.get("moves", []))) % len(legal)]
                reply = {"action": {"matchId": turn["matchId"], "turnId": turn["turnId"], "action": choice}}
                sys.stdout.write(json.dumps(reply) + "\n")
                sys.stdout.flush()
            elif "matchEnded" in message:
                return


if __name__ == "__main__":
    main()
