"""``python -m arena_server.cli``: the same as the ``arena`` command."""

from arena_server.cli import main

raise SystemExit(main())
