import pytest

from pivot_envs import InvalidTrajectory, Message, Pivot, Profile, ToolCall, Trajectory


def _pivot(**kw):
    base = dict(
        id="t#1",
        domain="tool-use",
        history=(Message("user", "hi"),),
        expert=Message("assistant", None, (ToolCall("f", '{"a": 1}', "c1"),)),
        tools=({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},),
        context={"k": [1, 2]},
        profile=Profile(4, (0, 1, 1, 0), "m", "h"),
    )
    base.update(kw)
    return Pivot(**base)


def test_pivot_round_trips_through_json():
    p = _pivot()
    assert Pivot.from_json(p.to_json()) == p
    assert p.profile.mean == 0.5 and p.profile.variance == 0.25


def test_trajectory_round_trips_through_json():
    t = Trajectory("x", "swe", (Message("system", "s"), Message("assistant", "ok")), reward=1.0, source="here")
    assert Trajectory.from_json(t.to_json()) == t


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"id": "a", "domain": "nope", "history": [], "expert": {"role": "assistant"}}, "Pivot.domain"),
        ({"id": "a", "domain": "swe", "history": [], "expert": {"role": "user"}}, "Pivot.expert"),
        ({"id": "a", "domain": "swe", "history": [{"role": "robot"}], "expert": {"role": "assistant"}}, "Message.role"),
        ({"domain": "swe", "history": [], "expert": {"role": "assistant"}}, "missing field 'id'"),
        (
            {
                "id": "a",
                "domain": "swe",
                "history": [],
                "expert": {"role": "assistant", "tool_calls": [{"function": {}}]},
            },
            "ToolCall",
        ),
    ],
)
def test_bad_payloads_name_the_field(payload, field):
    with pytest.raises(InvalidTrajectory, match=field):
        Pivot.from_json(payload)


def test_profile_rejects_inconsistent_k():
    with pytest.raises(InvalidTrajectory, match="Profile.k"):
        Profile(3, (1.0, 0.0))


def test_tool_calls_only_on_assistant_messages():
    with pytest.raises(InvalidTrajectory, match="only assistant"):
        Message("user", "x", (ToolCall("f"),))


def test_content_hash_ignores_profile_but_not_history():
    p = _pivot()
    assert p.content_hash() == _pivot(profile=None).content_hash()
    assert p.content_hash() != _pivot(history=(Message("user", "bye"),)).content_hash()


@pytest.mark.parametrize(
    ("rewards", "outcome", "dropped_as"),
    [
        ((0.0, 0.0, 0.0), "all_zero", "zero_variance_all_fail"),
        ((1.0, 1.0), "all_one", "zero_variance_all_pass"),
        ((0.5, 0.5, 0.5, 0.5), "constant", "zero_variance"),
        ((0.0, 1.0, 1.0, 0.0), "mixed", None),
        ((0.25, 0.5), "mixed", None),
        ((), "unprofiled", "unprofiled"),
    ],
)
def test_profile_outcome_is_the_one_classification_report_and_selection_share(rewards, outcome, dropped_as):
    from pivot_envs import select_pivots
    from trainers.profiling import domain_rows

    profile = Profile(len(rewards), rewards)
    assert profile.outcome == outcome
    pivot = Pivot("t#1", "tool-use", (Message("user", "hi"),), Message("assistant", "x"), profile=profile)
    selection = select_pivots([pivot], lam=0.9)
    assert (dropped_as is None) == bool(selection.kept)
    if dropped_as:
        assert selection.dropped == {dropped_as: 1}
    row = domain_rows([pivot])[-1]
    if rewards:
        # a group the report calls zero-variance is one selection drops for zero variance
        assert row["zero_variance"] == (1.0 if profile.zero_variance else 0.0)
        assert profile.zero_variance == (dropped_as is not None and dropped_as.startswith("zero_variance"))


@pytest.mark.parametrize(
    "build, field",
    [
        (lambda: ToolCall(1), "ToolCall.name"),
        (lambda: ToolCall("f", {"a": 1}), "ToolCall.arguments"),
        (lambda: ToolCall("f", "{}", None), "ToolCall.id"),
        (lambda: Message("robot"), "Message.role"),
        (lambda: Message("assistant", 5), "Message.content"),
        (lambda: Message("assistant", None, ("f",)), "Message.tool_calls"),
        (lambda: Message("tool", "x", (), 7), "Message.tool_call_id"),
        (lambda: Message("tool", "x", (), "c1", 7), "Message.name"),
        (lambda: Message("assistant", "x", extra=None), "Message.extra"),
        (lambda: Message("assistant", "x", extra=[("a", 1)]), "Message.extra"),
    ],
)
def test_message_and_tool_call_check_every_field_when_built(build, field):
    # their __init__ is written out for speed: it must keep every check the generated one made
    with pytest.raises(InvalidTrajectory, match=field):
        build()


def test_message_and_tool_call_keep_their_dataclass_behaviour():
    import copy
    import dataclasses
    import pickle

    call = ToolCall("f")
    assert (call.arguments, call.id) == ("{}", "")
    msg = Message("assistant", None, [call])  # a list of calls is kept as a tuple
    assert msg.tool_calls == (call,) and msg.extra == {} and Message("user").extra is not Message("user").extra
    assert msg == Message(role="assistant", tool_calls=(ToolCall(name="f", arguments="{}"),), extra={"x": 1})
    assert hash(msg) == hash(Message("assistant", None, (call,)))
    assert dataclasses.replace(msg, content="c").content == "c"
    assert pickle.loads(pickle.dumps(msg)) == msg == copy.deepcopy(msg)
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.content = "x"
