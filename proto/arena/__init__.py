"""Arena for bot authors: ``import arena`` and call :func:`arena.evaluate`.

The package also holds the wire contract (``arena.v1``, generated code). The evaluation API
is loaded on first use, so importing ``arena.v1`` stays as light as the generated code:

    import arena
    print(arena.evaluate("rps", [my_agent, "sicilian"], episodes=10, params={"rounds": 100}))

See ``docs/evaluate.md``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EvaluateError", "Evaluation", "evaluate"]


def __getattr__(name: str) -> Any:
    # Lazy (PEP 562): arena_server imports arena.v1, so importing it here eagerly would be a cycle.
    if name in __all__:
        from arena_server.matches import evaluate as module

        return getattr(module, name)
    raise AttributeError(f"module 'arena' has no attribute {name!r}")
