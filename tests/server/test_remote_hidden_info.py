"""Hidden information over gRPC: a remote seat receives exactly its own redacted view.

The engine tests prove ``state.observation(seat)`` never depends on other seats'
unrevealed dice. Here a remote bot plays Liar's Dice through the real server,
and every observation it receives is compared with the engine's observation for
its seat at that moment, rebuilt from the stored match; so nothing more than
that view crossed the wire.
"""

from __future__ import annotations

from arena.v1 import matches_pb2 as mp
from arena.v1 import matches_pb2_grpc as mp_grpc
from arena_client.convert import observation_from_proto
from arena_games import CHANCE, load_game
from tests.conftest import LiveServer
from tests.fakes.grpc_bots import RawBot


async def test_remote_liars_dice_seat_receives_only_its_own_view(live_server: LiveServer) -> None:
    raw = RawBot(live_server.channel())
    await raw.hello("dice-player", games=("liars_dice",))
    challenge_params = {"dice": 3, "players": 2}
    from arena.v1 import bot_session_pb2 as bs

    ch = bs.Challenge(opponent="random", game="liars_dice")
    for key, value in challenge_params.items():
        ch.params[key].int_value = value
    await raw.send(bs.BotMessage(challenge=ch))
    started = (await raw.recv_kind("match_started")).match_started
    received = []
    while True:
        msg = await raw.recv()
        kind = msg.WhichOneof("kind")
        if kind == "turn":
            received.append(observation_from_proto(msg.turn.observation))
            legal = list(msg.turn.legal_actions)
            await raw.answer(msg.turn, legal[-1] if len(legal) > 1 else legal[0])  # "liar" when possible
        elif kind == "update":
            received.append(observation_from_proto(msg.update.observation))
        elif kind == "match_ended":
            break
    record = await mp_grpc.MatchServiceStub(live_server.channel()).GetMatch(
        mp.GetMatchRequest(match_id=started.match_id)
    )
    game = load_game("liars_dice", **challenge_params)
    state = game.new_initial_state()
    seat = started.seat
    expected_views = []
    for move in record.moves:
        if state.current_player() == seat:
            expected_views.append(state.observation(seat))
        state.apply_action(move.action)
        if move.seat != CHANCE and move.seat != seat and state.current_player() != seat:
            expected_views.append(state.observation(seat))
    turn_views = [v for v in received if v.to_move == seat]
    assert turn_views == [v for v in expected_views if v.to_move == seat]
    opponent = 1 - seat
    for view in received:
        assert len(view.my_dice) == view.dice_counts[seat] or view.to_move == -1
        # the opponent's dice appear only inside finished rounds, once revealed
        assert all(len(r.hands[opponent].dice) for r in view.past_rounds)
    assert any(m.seat == CHANCE for m in record.moves)  # the record itself reveals everything at the end
    assert len(turn_views) >= 2
