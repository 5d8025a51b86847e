"""A state's history (:class:`arena_games.History`): a list of ``(player, action)`` pairs to read, 8 bytes an action.

The list of tuples it replaced took 64 bytes an action, 1.3 GB on the server
for the longest RPS match ``rounds`` allows.
"""

from __future__ import annotations

import pickle
import tracemalloc

import pytest

from arena_games import CHANCE, History, load_game


def test_it_reads_like_the_list_of_pairs() -> None:
    pairs = [(0, 4), (1, 2), (CHANCE, 5), (0, 0)]
    history = History(pairs)
    assert len(history) == 4 and bool(history) and not History()
    assert list(history) == pairs
    assert history[0] == (0, 4) and history[-1] == (0, 0) and history[2] == (CHANCE, 5)
    assert history[1:3] == [(1, 2), (CHANCE, 5)] and history[:0] == []
    assert history == pairs and history == tuple(pairs) and pairs == history
    assert history != pairs[:3] and history != [(0, 4), (1, 2), (CHANCE, 5), (0, 1)] and history != "x"
    assert history != [1, 2, 3, 4] and history != [list(pair) for pair in pairs]  # (the list of tuples did the same)
    assert history == History(pairs) and history != History(pairs[:3])
    assert repr(history) == f"History({pairs!r})"
    with pytest.raises(IndexError):
        history[4]
    with pytest.raises(TypeError):
        hash(history)


def test_appending_extending_and_copies() -> None:
    history = History()
    history.append((0, 1))
    history.add_joint([2, 0])
    history.extend([(0, 7)])
    history.extend(History([(1, 3)]))
    assert history == [(0, 1), (0, 2), (1, 0), (0, 7), (1, 3)]
    copy = history.copy()
    copy.append((1, 1))
    assert len(history) == 5 and len(copy) == 6 and copy[:5] == list(history)
    assert pickle.loads(pickle.dumps(history)) == history


def test_joint_decisions_of_any_size_and_a_bad_action_adds_nothing() -> None:
    history = History()
    history.add_joint((2, 0, 1))  # a tuple as well as a list
    history.add_joint(list(range(20)))  # more seats than the kept seat arrays cover
    assert history == [(0, 2), (1, 0), (2, 1)] + [(i, i) for i in range(20)]
    for bad in ([1, "x"], (1, 2**40)):
        with pytest.raises((TypeError, OverflowError)):
            history.add_joint(bad)
        assert len(history) == 23 and history[-1] == (19, 19)  # nothing of the bad decision went in
    history.append((0, 5))
    assert history[-1] == (0, 5) and len(history) == 24


def test_states_still_replay_compare_and_hash_by_their_history() -> None:
    game = load_game("rps", rounds=5)
    state = game.new_initial_state()
    for a, b in ((0, 1), (2, 2), (1, 0)):
        state.apply_actions([a, b])
    assert state.history == [(0, 0), (1, 1), (0, 2), (1, 2), (0, 1), (1, 0)]
    replay = game.state_from_history(state.history)
    assert replay == state and hash(replay) == hash(state)
    clone = state.clone()
    clone.apply_actions([0, 0])
    assert clone != state and len(state.history) == 6
    assert pickle.loads(pickle.dumps(state)) == state


def test_a_long_match_takes_8_bytes_an_action() -> None:
    game = load_game("rps", rounds=200_000)
    state = game.new_initial_state()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(200_000):
            state.apply_actions_unchecked((i % 3, (i + 1) % 3))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    per_action = grown / 400_000
    print(f"history of 200,000 RPS rounds: {grown} bytes, {per_action:.1f} bytes an action")
    assert len(state.history) == 400_000
    assert per_action < 12, f"{per_action:.1f} bytes an action: the history keeps an object per action"
