"""Plays normally but first starts a child that would outlive it (argv[1] is a marker, argv[2] 'setsid')."""

import os
import sys

from _stdio import play  # type: ignore[import-not-found]

marker = sys.argv[1]
escape = len(sys.argv) > 2 and sys.argv[2] == "setsid"
if os.fork() == 0:
    if os.fork() == 0:  # the grandchild: detached from the bot, sleeping with the marker in its argv
        if escape:
            os.setsid()
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", marker])
    os._exit(0)
os.wait()
play()
