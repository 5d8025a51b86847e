"""Arena's reference bots: the algorithms of the source documents, each a Bot.

Importing this package registers every hosted bot; see :func:`hosted_bots`.
"""

from arena_bots import mind_reader as _mind_reader  # noqa: F401  (RPS: Shannon's mind reader)
from arena_bots import sicilian as _sicilian  # noqa: F401  (RPS: the ensemble meta bot)
from arena_bots import simple as _simple  # noqa: F401  (registers the simple bots)
from arena_bots import thesis_agents as _thesis_agents  # noqa: F401  (RPS: the RPSLS thesis agents)
from arena_bots.registry import HostedBot, hosted, hosted_bots

__all__ = ["HostedBot", "hosted", "hosted_bots"]
