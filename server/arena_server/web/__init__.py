"""The web interface (issue 19): leaderboards, crosstables, bot pages, replays and live matches in a browser.

A small Starlette application (:mod:`.app`) served by uvicorn inside ``arena serve``
on its own port (:mod:`.server`), with Jinja2 templates and plain SVG charts
(:mod:`.charts`); replays and live matches share one frame format (:mod:`.frames`).
It only reads: through the same store functions as the gRPC services, with the
same limits (paged lists, the hub's bounded spectator queues).
"""
