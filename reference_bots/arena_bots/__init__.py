"""Arena's reference bots: the algorithms of the source documents, each a Bot.

Importing this package registers every hosted bot; see :func:`hosted_bots`.
"""

import arena_bots.dots_and_boxes.bots as _dots_and_boxes  # noqa: F401  (dots and boxes: greedy ... solver, mcts)
import arena_bots.liars_dice.bots as _ld_bots  # noqa: F401  (Liar's Dice: thesis learners, statistician)
import arena_bots.liars_dice.cfr_bot as _ld_cfr  # noqa: F401  (Liar's Dice: CFR)
import arena_bots.rps.mind_reader as _mind_reader  # noqa: F401  (RPS: Shannon's mind reader)
import arena_bots.rps.sicilian as _sicilian  # noqa: F401  (RPS: the ensemble meta bot)
import arena_bots.rps.thesis_agents as _thesis_agents  # noqa: F401  (RPS: the RPSLS thesis agents)
import arena_bots.tic_tac_toe as _tic_tac_toe  # noqa: F401  (tic-tac-toe: lab, corrected and MCTS bots)
from arena_bots import simple as _simple  # noqa: F401  (registers the simple bots)
from arena_bots.registry import BotState, HostedBot, hosted, hosted_bots

__all__ = ["BotState", "HostedBot", "hosted", "hosted_bots"]
