"""Liar's Dice reference bots: the thesis's learners, a statistician and a CFR equilibrium player."""
