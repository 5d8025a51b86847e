"""Arena's reference bots: the algorithms of the source documents, each a Bot.

Importing this package is light: :func:`hosted_bots` imports the bots' modules (numba, numpy) when it is
first called, and every hosted bot registers then.
"""

from arena_bots.registry import BotState, HostedBot, hosted, hosted_bots

__all__ = ["BotState", "HostedBot", "hosted", "hosted_bots"]
