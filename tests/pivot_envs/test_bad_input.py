"""Bad input never raises: hostile completions score 0 with a reason, bad data files fail at load naming the line."""

from __future__ import annotations

import json
import random
import re

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401  (registers the ids)
from pivot_core._safejson import decode_json
from pivot_core.errors import UnsafeJSON
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


@pytest.mark.parametrize("cached", [False, True], ids=["uncached", "reward-cache"])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_hostile_completions_score_zero_with_a_reason(env_id, cached, tmp_path):
    """Issue 19 item 9: a 5,000-digit integer in a tool call made `step` raise ValueError in all four envs."""
    kwargs = {"reward_cache": str(tmp_path / "rewards.sqlite")} if cached else {}
    env = gym.make(env_id, **kwargs).unwrapped
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
        results = env.score(pivot, list(completions.values()))
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


# -- item 10: bad data files fail at load time, naming the file and line ------------------------

GOOD = {
    "id": "x#1",
    "domain": "tool-use",
    "history": [{"role": "user", "content": "hi"}],
    "expert": {"role": "assistant", "content": "yo"},
    "tools": [],
    "context": {},
}


def _row(**fields) -> bytes:
    return (json.dumps({**GOOD, **fields}) + "\n").encode()


BAD_FILES = {
    "binary.jsonl": (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe" * 10, None, "binary content"),
    "latin1.jsonl": (_row() + b'{"id": "caf\xe9"}\n', 2, "not UTF-8"),
    "text.parquet": (_row(), None, "not a Parquet file"),
    "deep.jsonl": (_row() + b"[" * 100000 + b"]" * 100000 + b"\n", 2, "nesting deeper"),
    "bigint.jsonl": (b'{"id": ' + b"1" * 5000 + b"}\n", 1, "4300 digits"),
    "nan.jsonl": (_row(context={"score": float("nan")}), 1, "NaN"),
    "surrogate.jsonl": (b'{"id": "x\\ud800#1", "domain": "tool-use", "history": []}\n', 1, "lone surrogate"),
    "tools-string.jsonl": (_row(tools="x"), 1, "tools: expected a list, got str"),
    "tools-items.jsonl": (_row(tools=["x"]), 1, "Pivot.tools[0]: expected a tool schema object"),
    "tools-nameless.jsonl": (_row(tools=[{"type": "function", "function": {}}]), 1, "non-empty name"),
    "tools-params.jsonl": (_row(tools=[{"function": {"name": "f", "parameters": "x"}}]), 1, "parameters"),
    "context-pairs.jsonl": (_row(context=[["a", "b"]]), 1, "context: expected an object"),
    "history-string.jsonl": (_row(history="abc"), 1, "history: expected a list"),
    "name-list.jsonl": (_row(history=[{"role": "tool", "content": "r", "name": [1]}]), 1, "Message.name"),
    "call-id-list.jsonl": (
        _row(expert={"role": "assistant", "tool_calls": [{"id": [1], "function": {"name": "f"}}]}),
        1,
        "id: expected a string id",
    ),
    "profile-range.jsonl": (_row(profile={"k": 1, "rewards": [5.0]}), 1, "rewards in [0, 1]"),
    "deep.json": (b'{"messages": ' + b"[" * 5000 + b"]" * 5000 + b"}", None, "nesting deeper"),
    "binary.json": (b"\x00\x01\x02PK", None, "binary content"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_data_files_are_errors_naming_file_and_line(tmp_path, name):
    """Issue 19 item 10: each raised UnicodeDecodeError, RecursionError or ValueError, or loaded and broke reset."""
    from pivot_envs import DataFileError, load_pivots

    data, line, problem = BAD_FILES[name]
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DataFileError, match=re.escape(problem)) as caught:
        load_pivots(path)
    assert caught.value.path == str(path) and caught.value.line == line
    with pytest.raises(DataFileError):  # the env fails where it loads, not at its first reset
        gym.make("pivot/tool-use-v0", dataset=str(path))


def test_cli_prints_no_traceback_for_bad_files(tmp_path):
    from typer.testing import CliRunner

    from pivot_cli import app

    runner = CliRunner()
    bad = tmp_path / "tools.jsonl"
    bad.write_bytes(_row(tools="x"))
    good = tmp_path / "good.jsonl"
    good.write_bytes(_row())
    (tmp_path / "taken").mkdir()
    runs = {
        "convert bad input": ["convert", str(bad), str(tmp_path / "out.jsonl")],
        "convert onto a folder": ["convert", str(good), str(tmp_path / "taken")],
        "serve bad dataset": ["serve", "--env", "pivot/tool-use-v0", "--dataset", str(bad), "--port", "1"],
    }
    for label, args in runs.items():
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (label, result.output)
        assert "error:" in result.stderr, label
        assert "Traceback" not in result.output, label
    assert not (tmp_path / "taken.tmp").exists()


def test_cli_verify_reads_a_binary_completion_as_text_with_a_warning(tmp_path):
    from typer.testing import CliRunner

    from pivot_cli import app

    env = gym.make("pivot/tool-use-v0").unwrapped
    blob = tmp_path / "completion.bin"
    blob.write_bytes(bytes(range(256)) * 4)
    args = ["verify", "--env", "pivot/tool-use-v0", "--pivot", env.pivots[0].id, "--completion", str(blob), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["reward"] == 0.0
    assert "not UTF-8" in result.stderr


def test_whole_file_readers_name_the_file_too(tmp_path):
    """Sibling of item 10: the ReAct prompt reader raised UnicodeDecodeError on a binary file."""
    from pivot_envs import DataFileError, load_pivots

    path = tmp_path / "prompts.json"
    path.write_bytes(b"\xff\xfe\x00\x01" * 16)
    with pytest.raises(DataFileError, match="binary content") as caught:
        load_pivots(path, format="react-prompts")
    assert caught.value.path == str(path)
