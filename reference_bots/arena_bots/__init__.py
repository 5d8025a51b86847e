"""Arena's reference bots: the algorithms of the source documents, each a Bot.

Importing this package registers every hosted bot; see :func:`hosted_bots`.
"""

from arena_bots import simple as _simple  # noqa: F401  (registers the simple bots)
from arena_bots.registry import HostedBot, hosted, hosted_bots

__all__ = ["HostedBot", "hosted", "hosted_bots"]
