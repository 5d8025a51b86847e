"""Tic-tac-toe (m,n,k) reference bots: the lab's players bug for bug, corrected searchers, and UCT search.

``specs/tictactoe-lab.md``. One module per algorithm: ``lab_random``,
``lab_win_if_can``, ``lab_blocking``, ``lab_minimax``, ``lab_alpha_beta``,
``lab_pure_mc`` and ``lab_uct`` are the lab's players (hosted as ``lab-...``;
the search ones keep bugs B1/B2 and say so in their names), ``minimax`` and
``alpha_beta`` the corrected players, ``pure_mc`` the lab's Pure MC on the correct win
test, ``mcts`` UCT for any m,n,k board. Numba
kernels sit beside them (``*_kernels.py``); :mod:`.board` is the shared base.
"""

from arena_bots.tic_tac_toe import (  # noqa: F401  (registers the hosted bots)
    alpha_beta,
    lab_alpha_beta,
    lab_blocking,
    lab_minimax,
    lab_pure_mc,
    lab_random,
    lab_uct,
    lab_win_if_can,
    mcts,
    minimax,
    pure_mc,
)
