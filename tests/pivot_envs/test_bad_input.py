"""Bad input never raises: hostile completions score 0 with a reason, bad data files fail at load naming the line."""

from __future__ import annotations

import json
import random

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401  (registers the ids)
from pivot_envs._safejson import UnsafeJSON, decode_json
from verifiers_plugins.builtin.parsers import parse_auto, parse_hermes, parse_openai

ENV_IDS = ("pivot/tool-use-v0", "pivot/terminal-v0", "pivot/swe-v0", "pivot/browse-v0")

# JSON values that `json.loads` accepts (or chokes on with something other than JSONDecodeError)
# and that broke the code reading them: each raised out of `step` or became an error verdict.
HOSTILE_JSON = {
    "int_5000_digits": "9" * 5000,
    "deep_array": "[" * 5000 + "]" * 5000,
    "deep_object": '{"a":' * 900 + "1" + "}" * 900,
    "float_overflow": "1e999",
    "nan": "NaN",
    "infinity": "-Infinity",
    "lone_surrogate_escape": '"\\udc80x"',
    "lone_surrogate_raw": '"\udc80x"',
    "nul": '"a\\u0000b"',
}


def hermes(name: str, arguments: str) -> str:
    """A Hermes tool-call block from raw JSON text of the name and the arguments."""
    return '<tool_call>{"name": ' + name + ', "arguments": ' + arguments + "}</tool_call>"


def hostile_completions(pivot) -> dict[str, str]:
    """Completions shaped like the expert's action, with a hostile value where an argument goes."""
    out: dict[str, str] = {}
    calls = pivot.expert.tool_calls
    name = json.dumps(calls[0].name if calls else "bash")
    args = calls[0].parsed_arguments() if calls else None
    key = json.dumps(next(iter(args), "command") if isinstance(args, dict) and args else "command")
    for label, raw in HOSTILE_JSON.items():
        arguments = "{" + key + ": " + raw + "}"
        out[f"hermes/{label}"] = hermes(name, arguments)
        out[f"hermes-str/{label}"] = hermes(name, json.dumps(arguments))
        out[f"openai/{label}"] = (
            '{"tool_calls": [{"function": {"name": ' + name + ', "arguments": ' + arguments + "}}]}"
        )
        out[f"terminus/{label}"] = (
            '{"analysis": "a", "plan": "b", "commands": [{"keystrokes": ' + raw + ', "duration": ' + raw + "}]}"
        )
    out["text/lone_surrogate"] = (pivot.expert.content or "ls") + "\ud800"
    out["text/nul"] = "\x00" * 100
    return out


def shapes(env) -> list:
    """One pivot per (tool call?, tool name, format) shape: every path through the parsers and chains."""
    seen: dict[tuple, object] = {}
    for i in range(len(env.pivots)):
        p = env.pivots[i]
        key = (
            bool(p.expert.tool_calls),
            p.expert.tool_calls[0].name if p.expert.tool_calls else "",
            p.context.get("format"),
        )
        seen.setdefault(key, p)
    return list(seen.values())


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_hostile_completions_score_zero_with_a_reason(env_id):
    """Issue 19 item 9: a 5,000-digit integer in a tool call made `step` raise ValueError in all four envs."""
    env = gym.make(env_id).unwrapped
    failures = []
    for pivot in shapes(env):
        env.reset(options={"pivot_id": pivot.id})
        completions = hostile_completions(pivot)
        for label, completion in completions.items():
            try:
                _, reward, terminated, _, info = env.step(completion)
            except Exception as e:  # the contract: step never raises on a completion
                failures.append(f"{pivot.id} {label}: step raised {type(e).__name__}: {str(e)[:80]}")
                continue
            reasons = [v["reason"] for v in info["verdicts"].values() if v["reason"]]
            if label.startswith("text/"):
                continue  # plain text is scored on its merits (similarity may accept a near-copy)
            if reward != 0.0 or info["error"] or not reasons:
                failures.append(f"{pivot.id} {label}: reward {reward}, error {info['error']!r}, reasons {reasons}")
        results = env.score_pivot(pivot, list(completions.values()))
        for (label, _), result in zip(completions.items(), results, strict=True):
            if not label.startswith("text/") and (result.reward != 0.0 or result.error):
                failures.append(f"{pivot.id} {label}: score gave {result.reward}, error {result.error!r}")
    assert not failures, "\n".join(failures[:20])


def test_a_parser_notes_why_it_read_a_call_as_text():
    """The reason a hostile call is text travels in the parsed message (the env's info["action"])."""
    msg = parse_hermes(hermes('"f"', '{"n": ' + "1" * 5000 + "}"))
    assert not msg.tool_calls and "4300 digits" in msg.extra["parse_error"]
    msg = parse_openai('[{"name": "f", "arguments": "{\\"n\\": NaN}"}]')
    assert not msg.tool_calls and "NaN" in msg.extra["parse_error"]
    assert "parse_error" in parse_auto(hermes('"f"', "[[[1e999]]]")).extra


def test_a_plain_syntax_error_in_arguments_stays_a_call_for_the_verifiers():
    """Truncated arguments are the verifiers' to reject ("not valid JSON"), so the call is kept."""
    msg = parse_openai('[{"name": "f", "arguments": "{\\"n\\": 1"}]')
    assert msg.tool_calls[0].arguments == '{"n": 1' and msg.tool_calls[0].parsed_arguments() is None


@pytest.mark.parametrize("label", sorted(HOSTILE_JSON))
def test_decode_json_rejects_each_hostile_value(label):
    if label == "nul":  # a NUL character is valid text; only the sandbox has to care
        assert decode_json('{"a": ' + HOSTILE_JSON[label] + "}") == {"a": "a\x00b"}
        return
    with pytest.raises(UnsafeJSON):
        decode_json('{"a": ' + HOSTILE_JSON[label] + "}")


def test_decode_json_fuzz_raises_only_json_decode_errors():
    """Random byte soup and random nesting: `decode_json` either decodes or raises JSONDecodeError."""
    rng = random.Random(19)
    alphabet = '{}[]":,0123456789eE.-+ \\u"dc80NaIfity\x00\ud800'
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        if rng.random() < 0.1:
            text = "[" * rng.randint(60, 3000) + text
        try:
            decode_json(text)
        except json.JSONDecodeError:
            pass
