"""Liar's Dice: legal action counts under each bidding rule, challenges, rounds, notation, parameters."""

from __future__ import annotations

import pytest

from arena_games import CHANCE, TERMINAL, IllegalActionError, ParameterError, load_game
from arena_games.liars_dice import (
    LiarsDiceBid,
    LiarsDiceGame,
    LiarsDiceHand,
    LiarsDiceRoundResult,
    LiarsDiceState,
)


def _game(**params: object) -> LiarsDiceGame:
    game = load_game("liars_dice", **params)  # type: ignore[arg-type]
    assert isinstance(game, LiarsDiceGame)
    return game


def _deal(state: LiarsDiceState, *hands: list[int]) -> LiarsDiceState:
    """Roll the given faces, seat by seat (seats that are out are given empty hands)."""
    for hand in hands:
        for face in hand:
            assert state.current_player() == CHANCE
            state.apply_action(face - 1)
    assert state.current_player() >= 0
    return state


def _bids(state: LiarsDiceState, *moves: str) -> LiarsDiceState:
    for move in moves:
        state.apply_action(state.game.string_to_action(state, move))
    return state


def _fresh(game: LiarsDiceGame) -> LiarsDiceState:
    return game.new_initial_state()


# -- legal action counts (hand-computed in specs/liars-dice-thesis.md section 1.1 and below) ----------


def _count_after(game: LiarsDiceGame, *bids: str) -> int:
    hands = [[1] * game.dice for _ in range(game.players)]
    state = _bids(_deal(_fresh(game), *hands), *bids)
    return len(state.legal_actions())


def test_thesis_bidding_counts() -> None:
    game = _game()  # 2 players x 5 dice: N = 10
    assert _count_after(game) == 60  # opening: 6N bids, no liar
    assert _count_after(game, "1x1") == 60  # 59 raises + liar
    assert _count_after(game, "3x2") == 40  # (N-q+1)(7-f) = 8 * 5
    assert _count_after(game, "5x3") == 24  # 6 * 4
    assert _count_after(game, "7x4") == 12  # 4 * 3
    assert _count_after(game, "8x6") == 3  # 9x6, 10x6, liar
    assert _count_after(game, "10x5") == 2  # 10x6 and liar
    assert _count_after(game, "10x6") == 1  # only liar
    assert _count_after(game, "1x6") == 10  # the face can never go down: 2x6..10x6 and liar
    assert _count_after(_game(spot_on=True), "3x2") == 41  # plus the exact call


def test_standard_bidding_counts() -> None:
    game = _game(bidding="standard")
    assert _count_after(game) == 60
    assert _count_after(game, "1x1") == 60  # every other bid is higher: 59 + liar
    assert _count_after(game, "3x2") == 47  # 3x3..3x6 (4) + 4x1..10x6 (42) + liar
    assert _count_after(game, "1x6") == 55  # 2x1..10x6 (54) + liar
    assert _count_after(game, "10x5") == 2
    assert _count_after(game, "10x6") == 1
    assert _count_after(_game(bidding="standard", spot_on=True), "3x2") == 48


def test_small_games_list_exact_actions() -> None:
    # 2 players x 1 die x 3 faces: bids 1x1=0 1x2=1 1x3=2 2x1=3 2x2=4 2x3=5, liar=6, spot on=7.
    thesis = _bids(_deal(_fresh(_game(dice=1, faces=3)), [2], [3]), "1x2")
    assert list(thesis.legal_actions()) == [2, 4, 5, 6]
    standard = _bids(_deal(_fresh(_game(dice=1, faces=3, bidding="standard")), [2], [3]), "1x2")
    assert list(standard.legal_actions()) == [2, 3, 4, 5, 6]
    spot = _bids(_deal(_fresh(_game(dice=1, faces=3, spot_on=True)), [2], [3]), "2x1")
    assert list(spot.legal_actions()) == [4, 5, 6, 7]
    opening = _deal(_fresh(_game(dice=1, faces=3, spot_on=True)), [2], [3])
    assert list(opening.legal_actions()) == [0, 1, 2, 3, 4, 5]


def test_quantity_is_limited_by_the_dice_left() -> None:
    game = _game(dice=2)  # N = 4, faces 6
    state = _bids(_deal(_fresh(game), [2, 2], [3, 3]), "1x4", "liar")  # no fours: seat 0 loses a die
    assert state.dice_counts == (1, 2)
    state = _deal(state, [5], [5, 6])
    assert state.current_player() == 0  # the loser opens
    assert len(state.legal_actions()) == 18  # 3 dice left: 3 * 6
    with pytest.raises(IllegalActionError, match="more dice than the 3 left on the table"):
        state.apply_action(game.bid_action(4, 1))


# -- challenges ------------------------------------------------------------------------------------


def test_liar_without_wilds_counts_exact_faces() -> None:
    game = _game(dice=2)
    state = _bids(_deal(_fresh(game), [3, 5], [5, 1]), "3x5", "liar")
    result = state.observation(None).past_rounds[0]
    assert result == LiarsDiceRoundResult(
        hands=(LiarsDiceHand((3, 5)), LiarsDiceHand((1, 5))),
        bid=LiarsDiceBid(0, 3, 5),
        challenger=1,
        spot_on=False,
        actual=2,
        dice_lost=(1, 0),
    )
    assert state.dice_counts == (1, 2)


def test_wild_ones_count_for_other_faces() -> None:
    game = _game(dice=2, wild="ones")
    state = _bids(_deal(_fresh(game), [3, 5], [5, 1]), "3x5", "liar")
    result = state.observation(None).past_rounds[0]
    assert result.actual == 3 and result.dice_lost == (0, 1)  # the bid held: the challenger loses
    # A bid on ones counts only ones.
    state = _bids(_deal(_fresh(game), [1, 5], [5, 1]), "3x1", "liar")
    assert state.observation(None).past_rounds[0].actual == 2


def test_wild_highest_face() -> None:
    game = _game(dice=2, wild="highest", faces=6)
    state = _bids(_deal(_fresh(game), [6, 2], [2, 6]), "4x2", "liar")
    assert state.observation(None).past_rounds[0].actual == 4
    state = _bids(_deal(_fresh(game), [6, 2], [2, 6]), "3x6", "liar")
    assert state.observation(None).past_rounds[0].actual == 2  # sixes count once


def test_a_tie_goes_to_the_bidder() -> None:
    game = _game(dice=2)
    state = _bids(_deal(_fresh(game), [4, 4], [2, 3]), "2x4", "liar")
    assert state.observation(None).past_rounds[0].dice_lost == (0, 1)


def test_spot_on() -> None:
    game = _game(dice=2, spot_on=True, wild="ones")
    exact = _bids(_deal(_fresh(game), [1, 5], [5, 2]), "3x5", "spot on")
    result = exact.observation(None).past_rounds[0]
    assert result.spot_on and result.actual == 3 and result.challenger == 1 and result.dice_lost == (1, 0)
    wrong = _bids(_deal(_fresh(game), [1, 5], [5, 2]), "2x5", "spot on")
    assert wrong.observation(None).past_rounds[0].dice_lost == (0, 1)
    with pytest.raises(IllegalActionError, match="not enabled"):
        _game().string_to_action(_deal(_fresh(_game()), [1] * 5, [1] * 5), "spot on")


def test_liar_needs_a_bid() -> None:
    game = _game()
    state = _deal(_fresh(game), [1] * 5, [2] * 5)
    assert not state.is_legal(0, game.liar_action)
    with pytest.raises(IllegalActionError, match="needs a bid to call"):
        state.apply_action(game.liar_action)


# -- rounds and returns ----------------------------------------------------------------------------


def test_elimination_order_turns_and_placement_returns() -> None:
    game = _game(players=3, dice=1)
    state = _fresh(game)
    _deal(state, [2], [3], [4])
    assert state.current_player() == 0  # seat 0 opens the first round
    _bids(state, "1x2", "1x3", "liar")  # seat 2 challenges 1x3 from seat 1: one 3, the bid holds
    assert state.dice_counts == (1, 1, 0)
    # Seat 2 is out: the next seat after it with dice (seat 0) opens, and only seats 0 and 1 roll.
    assert state.current_player() == CHANCE
    _deal(state, [5], [6])
    assert state.current_player() == 0
    obs = state.observation(1)
    assert obs.round == 1 and obs.my_dice == (6,) and obs.bids == () and obs.dice_counts == (1, 1, 0)
    assert state.observation(2).my_dice == ()
    _bids(state, "1x5")
    assert state.current_player() == 1  # seat 2 is skipped
    _bids(state, "1x6")
    assert state.current_player() == 0
    _bids(state, "liar")  # one six: seat 0 loses its last die
    assert state.is_terminal() and state.current_player() == TERMINAL
    assert state.returns() == (0.0, 1.0, -1.0)  # winner +1, second 0, first out -1
    final = state.observation(0)
    assert final.to_move == -1 and final.my_dice == () and len(final.past_rounds) == 2
    assert final.past_rounds[1].hands == (LiarsDiceHand((5,)), LiarsDiceHand((6,)), LiarsDiceHand(()))


def test_the_loser_opens_the_next_round() -> None:
    game = _game(players=3, dice=2)
    state = _bids(_deal(_fresh(game), [1, 1], [2, 2], [3, 3]), "1x6", "liar")  # seat 0 bluffed
    _deal(state, [4], [5, 5], [6, 6])
    assert state.current_player() == 0
    state = _bids(state, "5x5", "liar")  # seat 1 calls seat 0's bid: seat 0 loses again and is out
    _deal(state, [1, 1], [2, 2])
    assert state.current_player() == 1  # the next seat after the eliminated loser


def test_single_round_returns() -> None:
    game = _game(players=3, dice=1, rounds="single")
    state = _bids(_deal(_fresh(game), [2], [3], [4]), "1x5", "liar")
    assert state.is_terminal()
    assert state.returns() == (-1.0, 0.5, 0.5)
    assert game.outcome_scores(state.returns()) == (0.0, 0.5, 0.5)


def test_openspiel_configuration_matches_its_encoding() -> None:
    game = _game(players=2, dice=1, wild="highest", bidding="standard", rounds="single")
    assert game.num_distinct_actions == 13 and game.liar_action == 12
    assert game.max_game_length == 2 + 12 + 1
    assert [game.action_to_string(0, a) for a in (0, 5, 6, 11, 12)] == ["1x1", "1x6", "2x1", "2x6", "liar"]
    assert game.action_to_string(CHANCE, 3) == "roll 4"


def test_max_game_length_of_elimination() -> None:
    # 2 players x 2 dice x 2 faces: rounds with 4, 3 and 2 dice; each round = rolls + bids + call.
    game = _game(dice=2, faces=2)
    assert game.max_game_length == (4 + 8 + 1) + (3 + 6 + 1) + (2 + 4 + 1)


# -- notation and errors ---------------------------------------------------------------------------


def test_notation() -> None:
    game = _game(spot_on=True)
    state = _deal(_fresh(game), [1] * 5, [2] * 5)
    for text in ("3x5", "3 x 5", "3×5", "3*5", "3 5", " 3X5 "):
        assert game.string_to_action(state, text) == game.bid_action(3, 5) == 16
    _bids(state, "3x5")
    for text in ("liar", "LIAR", "challenge", "dudo"):
        assert game.string_to_action(state, text) == 60
    for text in ("spot on", "Spot On", "spot-on", "exact", "calza"):
        assert game.string_to_action(state, text) == 61
    with pytest.raises(IllegalActionError, match=r"3x4 does not raise the current bid 3x5: under thesis"):
        game.string_to_action(state, "3x4")
    with pytest.raises(IllegalActionError, match=r"2x6 does not raise"):
        game.string_to_action(state, "2x6")
    with pytest.raises(IllegalActionError, match="repeats the current bid"):
        game.string_to_action(state, "3x5")
    with pytest.raises(IllegalActionError, match=r"face 7 does not exist; faces are 1\.\.6"):
        game.string_to_action(state, "4x7")
    with pytest.raises(IllegalActionError, match=r"quantity 11 is impossible"):
        game.string_to_action(state, "11x6")
    with pytest.raises(IllegalActionError, match="not a bid or a call"):
        game.string_to_action(state, "raise")
    standard = _game(bidding="standard")
    state = _bids(_deal(_fresh(standard), [1] * 5, [2] * 5), "3x5")
    with pytest.raises(IllegalActionError, match=r"under standard bidding bid more dice, or 3 dice of a face above 5"):
        standard.string_to_action(state, "3x4")
    assert standard.string_to_action(state, "4x1") == standard.bid_action(4, 1)


def test_nobody_acts_while_dice_roll() -> None:
    game = _game()
    state = _fresh(game)
    assert state.current_player() == CHANCE
    assert list(state.chance_outcomes()) == [(i, 1 / 6) for i in range(6)]
    assert state.illegal_reason(0, 0) == "the dice are being rolled; no player may act"
    assert state.observation(0).to_move == -1 and state.observation(0).my_dice == ()


def test_parameters_are_validated() -> None:
    with pytest.raises(ParameterError, match=r"liars_dice: parameter players=9 is out of range; choose 2\.\.6"):
        load_game("liars_dice", players=9)
    with pytest.raises(ParameterError, match=r"bidding='lexicographic' is not one of thesis, standard"):
        load_game("liars_dice", bidding="lexicographic")
    with pytest.raises(ParameterError, match=r"wild='twos' is not one of none, ones, highest"):
        load_game("liars_dice", wild="twos")
    with pytest.raises(ParameterError, match=r"dice=0 is out of range; choose 1\.\.10"):
        load_game("liars_dice", dice=0)
    game = load_game("liars_dice", players="3", spot_on="true", rounds="single")
    assert game.num_players == 3 and game.num_distinct_actions == 3 * 5 * 6 + 2
