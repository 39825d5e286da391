import pytest

from trainers.backends import Generation, SamplingParams
from trainers.backends._base import template_messages, truncate_history


def test_truncate_history_keeps_system_and_never_starts_on_a_tool_result():
    msgs = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "r"},
        {"role": "user", "content": "u2"},
    ]
    assert truncate_history(msgs, None) == msgs
    assert [m["role"] for m in truncate_history(msgs, 2)] == ["system", "user"]  # the tool result is dropped
    assert [m["role"] for m in truncate_history(msgs, 3)] == ["system", "assistant", "tool", "user"]
    assert truncate_history(msgs, 0) == [msgs[0]]


def test_template_messages_decode_arguments_and_fill_content():
    [m] = template_messages(
        [
            {
                "role": "assistant",
                "content": None,
                "extra": {"x": 1},
                "tool_calls": [
                    {"id": "1", "function": {"name": "f", "arguments": '{"a": 1}'}},
                    {"function": {"name": "g", "arguments": "not json"}},
                ],
            }
        ]
    )
    assert m["content"] == "" and "extra" not in m
    assert [c["function"]["arguments"] for c in m["tool_calls"]] == [{"a": 1}, "not json"]


def test_generation_and_sampling_params_validate():
    with pytest.raises(ValueError, match="one per token"):
        Generation("x", (1, 2), (-0.1,))
    g = Generation("x", (), (-0.5, -0.25))  # a server may report log-probs without ids
    assert g.logprob == -0.75
    for bad in ({"max_new_tokens": 0}, {"temperature": -1}, {"top_p": 0}):
        with pytest.raises(ValueError):
            SamplingParams(**bad)
