import json

import pytest

from pivot_core._actions import loose_shell, normalize_shell
from pivot_envs import Message, Pivot, ToolCall
from verifiers_plugins import get_parser, get_verifier

SCHEMA = {
    "type": "object",
    "properties": {
        "reservation_id": {"type": "string"},
        "amount": {"type": "number"},
        "note": {"type": "string"},
        "ids": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["reservation_id"],
    "additionalProperties": False,
}
TOOLS = (
    {"type": "function", "function": {"name": "refund", "parameters": SCHEMA}},
    {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}},
)


def _call(name, **args):
    return ToolCall(name, json.dumps(args))


def _tool_pivot(*calls):
    return Pivot("p#2", "tool-use", (Message("user", "refund please"),), Message("assistant", None, calls), TOOLS)


EXPERT = _tool_pivot(
    _call("refund", reservation_id="ABC123", amount=12.5, note="customer was double charged", ids=["a", "b"])
)


@pytest.mark.parametrize(
    "args, accepted",
    [
        ({"ids": ["b", "a"], "note": "customer was double charged", "amount": 12.50, "reservation_id": "ABC123"}, True),
        (
            {"reservation_id": "ABC123", "amount": 1.25e1, "note": "Customer was double-charged", "ids": ["a", "b"]},
            True,
        ),
        (
            {"reservation_id": "ABC123", "amount": "12.5", "note": "customer was double charged", "ids": ["a", "b"]},
            False,
        ),
        ({"reservation_id": "ABC124", "amount": 12.5, "note": "customer was double charged", "ids": ["a", "b"]}, False),
        ({"reservation_id": "ABC123", "amount": 13, "note": "customer was double charged", "ids": ["a", "b"]}, False),
        ({"reservation_id": "ABC123", "amount": 12.5, "note": "upgrade to business class", "ids": ["a", "b"]}, False),
        ({"reservation_id": "ABC123", "amount": 12.5, "note": "customer was double charged", "ids": ["a"]}, False),
        ({"reservation_id": "ABC123", "amount": 12.5, "note": "x", "ids": ["a", "b"], "extra": 1}, False),
    ],
)
def test_tool_args_is_type_and_value_aware(args, accepted):
    verdict = get_verifier("tool_args").verify(
        EXPERT, Message("assistant", None, (ToolCall("refund", json.dumps(args)),))
    )
    assert verdict.accepted is accepted, verdict.reason


NUMBERS = {
    "type": "object",
    "properties": {
        "amount": {"type": "number"},
        "count": {"type": "integer"},
        "flag": {"type": "boolean"},
        "either": {"type": ["string", "number"]},
    },
}
BARE = ({"type": "function", "function": {"name": "pay", "parameters": {"type": "object"}}},)


@pytest.mark.parametrize(
    "tools, expert, got, accepted",
    [
        # issue 19 item 16: numbers by value
        (NUMBERS, {"amount": 50, "count": 3}, {"amount": 50.0, "count": 3.0}, True),
        (NUMBERS, {"amount": 50.0}, {"amount": 5e1}, True),
        (NUMBERS, {"amount": 0.3}, {"amount": 0.1 + 0.2}, True),
        # near-misses stay misses: another amount, even a relatively close one
        (NUMBERS, {"amount": 1000000}, {"amount": 1000001}, False),
        (NUMBERS, {"amount": 1234567.5}, {"amount": 1234567.9}, False),
        (NUMBERS, {"count": 3}, {"count": 3.5}, False),
        # a string for a number only where the schema takes both types
        (NUMBERS, {"amount": 50}, {"amount": "50"}, False),
        (BARE, {"amount": 50}, {"amount": "50"}, False),
        (BARE, {"amount": "50"}, {"amount": 50}, False),
        (NUMBERS, {"either": 50}, {"either": "50"}, True),
        (NUMBERS, {"either": 50}, {"either": "5_0"}, False),
        (BARE, {"flag": True}, {"flag": "true"}, False),
        (BARE, {"flag": True}, {"flag": 1}, False),
        (BARE, {"n": 10**400}, {"n": 10**400 + 1}, False),
    ],
)
def test_tool_args_compares_numbers_by_value_and_types_strictly(tools, expert, got, accepted):
    if isinstance(tools, dict):
        tools = ({"type": "function", "function": {"name": "pay", "parameters": tools}},)
    pivot = Pivot(
        "n#2", "tool-use", (Message("user", "pay"),), Message("assistant", None, (_call("pay", **expert),)), tools
    )
    verdict = get_verifier("tool_args").verify(pivot, Message("assistant", None, (_call("pay", **got),)))
    assert verdict.accepted is accepted, verdict.reason


def test_tool_args_matches_parallel_calls_as_multiset():
    expert = _tool_pivot(_call("lookup", city="Paris"), _call("lookup", city="Tokyo"))
    v = get_verifier("tool_args")
    swapped = Message("assistant", None, (_call("lookup", city="Tokyo"), _call("lookup", city="Paris")))
    doubled = Message("assistant", None, (_call("lookup", city="Paris"), _call("lookup", city="Paris")))
    assert v.verify(expert, swapped).accepted
    assert not v.verify(expert, doubled).accepted
    assert not v.verify(expert, Message("assistant", None, (_call("lookup", city="Paris"),))).accepted


def test_json_schema_gate_rejects_invalid_arguments_with_reason():
    gate = get_verifier("json_schema")
    bad = Message("assistant", None, (ToolCall("refund", '{"amount": 3}'),))
    verdict = gate.verify(EXPERT, bad)
    assert not verdict.accepted and "reservation_id" in verdict.reason
    assert not gate.verify(EXPERT, Message("assistant", None, (ToolCall("refund", "not json"),))).accepted
    assert not gate.verify(EXPERT, Message("assistant", None, (ToolCall("delete_everything", "{}"),))).accepted


def test_turn_kind_gate():
    gate = get_verifier("turn_kind")
    assert not gate.verify(EXPERT, Message("assistant", "I will refund you")).accepted
    assert gate.verify(EXPERT, Message("assistant", None, (_call("lookup"),))).accepted


@pytest.mark.parametrize("a, b", [("ls  -la", "ls -la"), ("grep  'x' f\n", 'grep "x" f')])
def test_shell_normalisation_equates_spacing_and_literal_quoting(a, b):
    assert normalize_shell(a) == normalize_shell(b)


@pytest.mark.parametrize("a, b", [("ls -la", "ls -al"), ("ls -l -a", "ls -al"), ("grep  'x' f\n", 'grep "x" f')])
def test_loose_shell_also_equates_flag_order(a, b):
    # flag order is not meaning (`tar -xf a` is not `tar -fx a`): only the loose form used by lenient acceptors
    assert loose_shell(a) == loose_shell(b)
    assert normalize_shell("tar -xf a") != normalize_shell("tar -fx a")


def test_string_similarity_on_terminus_keystrokes():
    def turn(keys):
        return json.dumps({"analysis": "a", "plan": "p", "commands": [{"keystrokes": keys, "duration": 0.1}]})

    pivot = Pivot(
        "t#1",
        "terminal",
        (Message("user", "go"),),
        Message("assistant", turn("ls -la /app\n")),
        context={"format": "terminus"},
    )
    sim = get_verifier("string_similarity")
    assert sim.verify(pivot, Message("assistant", turn("ls -al /app\n"))).accepted
    assert not sim.verify(pivot, Message("assistant", turn("rm -rf /app\n"))).accepted
    gate = get_verifier("json_schema")
    assert not gate.verify(pivot, Message("assistant", '{"commands": "ls"}')).accepted
    assert not gate.verify(pivot, Message("assistant", "ls -la /app")).accepted


def test_tool_name_compares_categories_of_commands():
    def bash(cmd):
        return Message("assistant", f"THOUGHT: look\n\n```bash\n{cmd}\n```")

    pivot = Pivot("s#3", "swe", (Message("user", "fix it"),), bash("grep -rn foo ."))
    v = get_verifier("tool_name")
    assert v.verify(pivot, bash("grep -n -r foo .")).accepted
    assert v.verify(pivot, bash("find . -name '*.py'")).accepted
    assert not v.verify(pivot, bash("sed -i 's/a/b/' x.py")).accepted
    assert not v.verify(pivot, Message("assistant", "I think we should grep")).accepted


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "<tool_call>{bad json}</tool_call>",
        "<tool_call>[]</tool_call>",
        '{"tool_calls": [{"function": {"arguments": 1}}]}',
        "\x00\ud7ff" * 10,
        "🙂" * 500,
    ],
)
@pytest.mark.parametrize("parser", ["hermes", "openai", "auto", "text", "terminus"])
def test_parsers_never_raise(parser, text):
    msg = get_parser(parser)(text)
    assert msg.role == "assistant"


def test_hermes_parser_reads_calls_and_content():
    msg = get_parser("hermes")(
        'Let me check.\n<tool_call>\n{"name": "lookup", "arguments": {"city": "Paris"}}\n'
        '</tool_call>\n<tool_call>{"name": "lookup", "arguments": {"city": "Oslo"}}</tool_call>'
    )
    assert msg.content == "Let me check."
    assert [(c.name, c.parsed_arguments()) for c in msg.tool_calls] == [
        ("lookup", {"city": "Paris"}),
        ("lookup", {"city": "Oslo"}),
    ]


def test_exact_match_compares_huge_integers_exactly_without_overflow():
    # A float of a 400-digit int overflows: canonical numbers keep ints exact.
    pivot = Pivot("h#2", "tool-use", (Message("user", "go"),), Message("assistant", None, (_call("pay", n=10**400),)))
    v = get_verifier("exact_match")
    assert v.verify(pivot, Message("assistant", None, (_call("pay", n=10**400),))).accepted
    assert not v.verify(pivot, Message("assistant", None, (_call("pay", n=10**400 + 1),))).accepted
    assert v.verify(pivot, Message("assistant", None, (_call("pay", n=10**400),))).error is None


def test_tool_args_compares_shell_commands_after_normalisation_not_by_similarity():
    long = "python -m pytest /workspace/proj/tests/test_utils.py -q --tb=short"
    pivot = Pivot(
        "sh#2",
        "terminal",
        (Message("user", "run the tests"),),
        Message("assistant", None, (_call("exec_command", cmd=long),)),
    )
    v = get_verifier("tool_args")
    assert v.verify(pivot, Message("assistant", None, (_call("exec_command", cmd=long.replace("  ", " ")),))).accepted
    tail = Message("assistant", None, (_call("exec_command", cmd=long + " && rm -rf ~"),))
    assert not v.verify(pivot, tail).accepted
    flags = Pivot(
        "ls#2",
        "terminal",
        (Message("user", "list"),),
        Message("assistant", None, (_call("exec_command", cmd="ls -la /workspace"),)),
    )
    assert v.verify(flags, Message("assistant", None, (_call("exec_command", cmd="ls  -al /workspace"),))).accepted


def test_string_similarity_compares_the_files_a_command_names_exactly():
    pivot = Pivot("f#2", "terminal", (Message("user", "look"),), Message("assistant", "```bash\nopen chall.py\n```"))
    v = get_verifier("string_similarity")
    assert v.verify(pivot, Message("assistant", "Opening it.\n```bash\nopen ./chall.py\n```")).accepted
    assert not v.verify(pivot, Message("assistant", "```bash\nopen zz_chall.py\n```")).accepted
    assert not v.verify(pivot, Message("assistant", "```bash\nopen chall.pyc\n```")).accepted
