"""Arena's reference bots: the algorithms of the source documents, each a Bot.

Importing this package registers every hosted bot; see :func:`hosted_bots`.
"""

import arena_bots.rps.mind_reader as _mind_reader  # noqa: F401  (RPS: Shannon's mind reader)
import arena_bots.rps.sicilian as _sicilian  # noqa: F401  (RPS: the ensemble meta bot)
import arena_bots.rps.thesis_agents as _thesis_agents  # noqa: F401  (RPS: the RPSLS thesis agents)
import arena_bots.tic_tac_toe as _tic_tac_toe  # noqa: F401  (tic-tac-toe: lab, corrected and MCTS bots)
from arena_bots import simple as _simple  # noqa: F401  (registers the simple bots)
from arena_bots.registry import HostedBot, hosted, hosted_bots

__all__ = ["HostedBot", "hosted", "hosted_bots"]
