"""Shared derived forms on the reward path: computed once per object, equal to a fresh derivation, never mutated."""

import copy
import json
import pickle

import gymnasium as gym
import pytest

import pivot_envs
from pivot_core import Message, Pivot, ToolCall, parse_terminus
from verifiers_plugins import Verdict, VerifierChain, get_parser, get_verifier, verifier_meta
from verifiers_plugins._memo import call_arguments
from verifiers_plugins.builtin._targets import shell_segments
from verifiers_plugins.builtin.json_schema import terminus_of

ENV_IDS = ("pivot/tool-use-v0", "pivot/swe-v0", "pivot/terminal-v0", "pivot/browse-v0")


def _candidates(expert: str) -> list[str]:
    k = len(expert) // 2
    return [
        expert,
        expert[:k] + "x" + expert[k + 1 :],
        expert[:k],
        expert + "; rm -rf /app/*",
        expert.replace("}", ', "extra": [1, {"a": 2}]}', 1),
        "ls -la",
        '{"analysis": "a", "plan": "p", "commands": [{"keystrokes": "ls -la\\n", "duration": 0.1}]}',
    ]


def _canonical(value):
    """JSON text of a value, which tells 1 from 1.0 and a list from a tuple (`==` tells neither)."""
    return json.dumps(value, sort_keys=True)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_the_chain_leaves_every_shared_candidate_form_as_a_fresh_decode_gives_it(env_id):
    # The verifiers of a chain share one decoded value per tool call and one Terminus JSON per
    # message: a verifier that changed one would change what the next verifier (or candidate) reads.
    env = gym.make(env_id).unwrapped
    cheap = [n for n in env.chain.names if verifier_meta(get_verifier(n))["cost"] == "cheap"]
    scored = []
    for chain_env in (env, gym.make(env_id, verifiers=cheap).unwrapped):
        for pivot in chain_env.pivots:
            if pivot.context.get("sandbox"):
                continue
            expert = pivot_envs.render_completion(pivot.expert, pivot.domain)
            messages = [chain_env.parse(c) for c in _candidates(expert)]
            chain_env.chain_for(pivot).verify_batch(pivot, messages)
            scored.extend([pivot.expert, *messages])
    calls = [c for m in scored for c in m.tool_calls]
    assert calls, "the bundled rows hold tool calls"
    for call in calls:
        assert _canonical(call_arguments(call)) == _canonical(call.parsed_arguments()), call
    for message in scored:
        assert _canonical(terminus_of(message)) == _canonical(parse_terminus(message.content))


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "Scott Derrickson", "k": 5},
        {"amount": 1e5, "rate": -0.0, "ids": [1, 2.5, {"deep": [True, None]}]},
        {"text": "caf\u00e9 \u2603 \U0001f600", "empty": {}, "nothing": None},
        {},
        [1, 2, 3],
        7,
        None,
    ],
)
def test_the_arguments_the_parser_hands_on_are_what_decoding_the_call_gives(arguments):
    # The Hermes parser records the value it decoded a call from, so no verifier decodes it again:
    # that value must be exactly `parsed_arguments()` of the call it built (types included).
    completion = "<tool_call>" + json.dumps({"name": "f", "arguments": arguments}) + "</tool_call>"
    for parser in ("hermes", "auto"):
        (call,) = get_parser(parser)(completion).tool_calls
        assert _canonical(call_arguments(call)) == _canonical(call.parsed_arguments()) == _canonical(arguments)


def test_decoded_arguments_are_cached_by_content_and_equal_to_a_fresh_decode():
    call_arguments.cache_clear()
    a, b = ToolCall("f", '{"x": 1}'), ToolCall("f", '{"x": 1}')
    assert a == b and a is not b and hash(a) == hash(b)
    assert call_arguments(a) == {"x": 1} and call_arguments(b) is call_arguments(a)  # decoded once for both
    assert call_arguments(ToolCall("f", '{"x": 2}')) == {"x": 2}  # other content, decoded anew
    assert call_arguments.cache_info().misses == 2


class _Constant:
    verdict = Verdict.reject("always the same")

    def verify(self, pivot, action):
        return self.verdict


def test_a_module_level_verdict_is_named_after_each_step_that_returns_it_and_stays_unnamed():
    pivot = Pivot("p#1", "tool-use", (Message("user", "hi"),), Message("assistant", "hello"))
    chain = VerifierChain([("first", _Constant()), ("second", _Constant())])
    for _ in range(2):
        (result,) = chain.verify_batch(pivot, [Message("assistant", "x")])
        assert [v.verifier for v in result.verdicts.values()] == ["first", "second"]
        assert result.verdicts["first"] == _Constant.verdict
    assert _Constant.verdict.verifier == ""


def test_results_holding_constant_verdicts_cross_process_boundaries():
    # Ray executors and vector envs pickle results
    env = gym.make("pivot/browse-v0").unwrapped
    pivot = next(p for p in env.pivots if p.expert.tool_calls)
    results = env.score(pivot, ["plain text where a tool call belongs", "ls"])
    assert results[0].verdicts["turn_kind"].reason == "expected a tool_call turn, got a text turn"
    assert pickle.loads(pickle.dumps(results)) == results
    assert copy.deepcopy(results) == results


@pytest.mark.parametrize(
    ("line", "segments"),
    [
        ("a && b || c; d | e\nf", ["a", "b", "c", "d", "e", "f"]),
        ('echo "a;b" && c', ['echo "a;b"', "c"]),
        ("grep 'x|y' f | wc -l", ["grep 'x|y' f", "wc -l"]),
        ("a\\;b; c", ["a\\;b", "c"]),
        ("cmd 2>&1 | tee log", ["cmd 2>&1", "tee log"]),
        ("a |& b", ["a", "b"]),  # `|&` pipes stderr too: one pipe
        ('echo "a; b', ['echo "a; b']),  # a quote that never closes runs to the end
        ('echo "a\\"; b" ; c', ['echo "a\\"; b"', "c"]),
        (";; a ;; b", ["a", "b"]),
        ("a &&& b", ["a", "b"]),  # a lone `&` after `&&` ends a (background) command as well
        ("a ||| b", ["a", "b"]),
        ("x \\\n y; z", ["x \\\n y", "z"]),
        ("  \n ", []),
    ],
)
def test_shell_segments_split_at_operators_outside_quotes_and_escapes(line, segments):
    assert shell_segments(line) == segments
