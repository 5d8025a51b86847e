"""Runner programs: foreign bot formats played through Arena's stdio protocol inside the sandbox.

Each runner is one standard-library-only script, copied next to the bot's file and run
with the server's Python as an ordinary subprocess bot.
"""
