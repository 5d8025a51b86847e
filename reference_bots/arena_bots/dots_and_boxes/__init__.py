"""Dots and boxes reference bots (issue 15): greedy, neuro, chains, solver and MCTS, plus the thesis training."""
