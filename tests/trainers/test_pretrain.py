"""Synthetic airline conversations: every call runs in the world, and its ids are copyable from the context."""

import json

from trainers.pretrain import PretrainConfig, last_turns, synthetic_pivots
from verifiers_plugins.worlds import tau_airline


def test_synthetic_calls_copy_their_ids_from_the_history_and_run_in_the_world():
    world = tau_airline()  # the full database when ../shared/data is present, else the bundled subset
    pivots = synthetic_pivots(world, 40, seed=3)
    calls = [p for p in pivots if p.expert.tool_calls]
    assert len(calls) >= 60 and {c.expert.tool_calls[0].name for c in calls} >= {
        "get_user_details",
        "get_reservation_details",
        "cancel_reservation",
    }
    for p in calls:
        call = p.expert.tool_calls[0]
        args = json.loads(call.arguments)
        seen = " ".join(m.text or "" for m in p.history)
        for key in ("user_id", "reservation_id"):
            if key in args:
                # the value the agent writes is in the conversation: a policy can copy it, not recall it
                assert args[key] in seen, (p.id, key)
        outcome, _ = world.step(world.initial_state(), call.name, args)
        if call.name != "cancel_reservation":  # cancelling needs no earlier state; every call must run
            assert not outcome.error, (p.id, outcome.output)
    # the previous call's output is the next tool message, produced by the world (not made up)
    tool_msgs = [m for p in pivots for m in p.history if m.role == "tool"]
    assert tool_msgs and all(m.content for m in tool_msgs if m.name != "think")
    # seeded: the same conversations again
    assert [p.id for p in synthetic_pivots(world, 40, seed=3)] == [p.id for p in pivots]
    assert len(last_turns(pivots)) == 40


def test_quick_config_is_smaller_and_saves_its_settings_shape():
    full, quick = PretrainConfig(), PretrainConfig().quick()
    assert quick.steps < full.steps and quick.conversations < full.conversations
    assert quick.model.split_spaces and full.model.split_spaces
