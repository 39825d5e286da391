"""SWE categories and targets, tool_args equivalences, exact_match: known equivalents 1, known wrong 0."""

from __future__ import annotations

import json

import pytest

from pivot_envs import Message, Pivot, ToolCall
from verifiers_plugins import DuplicateName, get_host, get_verifier, hookimpl
from verifiers_plugins.builtin._categories import command_category

HIST = (Message("system", "You are a software engineer."), Message("user", "Fix the bug in pkg/a.py"))


def _bash(cmd: str) -> Message:
    return Message("assistant", f"THOUGHT: next.\n\n```bash\n{cmd}\n```")


def _swe(expert: Message) -> Pivot:
    return Pivot("s#2", "swe", HIST, expert)


def _call(name: str, **args) -> ToolCall:
    return ToolCall(name, json.dumps(args))


def _calls(*calls: ToolCall) -> Message:
    return Message("assistant", None, tuple(calls))


@pytest.mark.parametrize(
    "cmd, category",
    [
        ("grep -rn foo .", "search"),
        ("cd /testbed && find . -name '*.py' | head", "search"),
        ("ls -la src", "search"),
        ("cat pkg/a.py", "read"),
        ("sed -n '10,20p' pkg/a.py", "read"),
        ("nl -ba pkg/a.py | sed -n 5,9p", "read"),
        ("head -n 40 setup.py", "read"),
        ("git diff", "read"),
        ("sed -i 's/x/y/' pkg/a.py", "edit"),
        ("cat <<'EOF' > pkg/a.py\ndef f():\n    pass\nEOF", "edit"),
        ("cat > t.py <<EOF\nprint(1)\nEOF", "edit"),
        ("echo 'x = 1' >> pkg/a.py", "edit"),
        ("git checkout pkg/a.py", "edit"),
        ("python reproduce.py", "run"),
        ("timeout 60 python reproduce.py", "run"),
        ("nice -n 5 py.test tests/", "run"),
        ("./tests/runtests.py model_forms", "run"),
        ("python -m pytest tests/ -q", "run"),
        ("pytest -x tests/test_a.py", "run"),
        ("bin/test sympy/core", "run"),
        ("echo c | pytest --pdb t.py", "run"),
        ("# note\npython t.py", "run"),
        ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached", "finish"),
        ("submit", "finish"),
        ("frobnicate --now", "other"),
    ],
)
def test_command_categories(cmd, category):
    assert command_category(cmd) == category


@pytest.mark.parametrize(
    "expert, same, other",
    [
        (_bash("grep -rn foo ."), _bash("grep -n -r foo ."), _bash("cat pkg/a.py")),
        (
            _bash("sed -n '10,20p' pkg/a.py"),
            _bash("sed -n 15,30p /testbed/pkg/a.py"),
            _bash("sed -n 100,120p pkg/a.py"),
        ),
        (_bash("cat pkg/a.py"), _bash("nl -ba ./pkg/a.py"), _bash("cat pkg/b.py")),
        (
            _bash("python -m pytest tests/test_a.py -q"),
            _bash("pytest tests/test_a.py"),
            _bash("pytest tests/test_b.py"),
        ),
        (
            _calls(_call("str_replace_editor", command="view", path="/testbed/pkg/a.py", view_range=[40, 80])),
            _calls(_call("str_replace_editor", command="view", path="pkg/a.py", view_range=[60, 120])),
            _calls(_call("str_replace_editor", command="view", path="pkg/a.py", view_range=[200, 240])),
        ),
        (
            _calls(
                _call(
                    "str_replace_editor",
                    command="str_replace",
                    path="pkg/a.py",
                    old_str="def total(xs):\n    return 0",
                    new_str="def total(xs):\n    return sum(xs)",
                )
            ),
            _calls(
                _call(
                    "str_replace_editor",
                    command="str_replace",
                    path="/testbed/pkg/a.py",
                    old_str="def total(xs):\n    return 0\n",
                    new_str="def total(xs):\n    return sum(xs or [])",
                )
            ),
            _calls(
                _call(
                    "str_replace_editor",
                    command="str_replace",
                    path="pkg/a.py",
                    old_str="def mean(xs):\n    return 0",
                    new_str="def mean(xs):\n    return 1",
                )
            ),
        ),
    ],
)
def test_swe_target_equivalents_and_misses(expert, same, other):
    pivot = _swe(expert)
    target, category = get_verifier("swe_target"), get_verifier("tool_name")
    assert target.verify(pivot, same).accepted, target.verify(pivot, same).reason
    assert category.verify(pivot, same).accepted
    miss = target.verify(pivot, other)
    assert not miss.accepted and miss.reward == 0.0
    graded = get_verifier("swe_target_continuous").verify(pivot, other)
    halves = 0.5 * category.verify(pivot, other).accepted + 0.5 * graded.details["target_match"]
    assert not graded.accepted and graded.reward == halves < 1.0
    assert get_verifier("swe_target_continuous").verify(pivot, same).reward == 1.0


@pytest.mark.parametrize(
    "expert, same, other",
    [
        # issue 19 item 16: the same Django test run written three ways; another label is another run
        ("python3 tests/runtests.py model_forms", "./tests/runtests.py model_forms", "./tests/runtests.py forms"),
        (
            "./tests/runtests.py i18n.patterns",
            "cd tests && python3 runtests.py i18n.patterns -v 2",
            "tests/runtests.py i18n",
        ),
        (
            "cd /testbed && python -m pytest tests/test_a.py::test_b -q 2>&1 | tail -20",
            "pytest /testbed/tests/test_a.py::test_b --tb=short",
            "pytest tests/test_a.py::test_c",
        ),
        (
            "pytest tests/test_a.py -k 'empty and not slow'",
            "py.test -k 'empty and not slow' tests/test_a.py",
            "pytest tests/test_a.py -k empty",
        ),
        ("timeout 60 python reproduce.py", "python3 reproduce.py", "python3 reproduce.py --fixed"),
        (
            'python -c "import pkg; print(pkg.total([1, 2]))"',
            "python3 -c 'import pkg;print(pkg.total([1, 2]))'",
            'python -c "print(1)"',
        ),
    ],
)
def test_equivalent_invocations_of_one_run_compare_equal(expert, same, other):
    pivot = _swe(_bash(expert))
    target = get_verifier("swe_target")
    assert command_category(same) == command_category(expert) == "run"
    assert target.verify(pivot, _bash(same)).accepted, target.verify(pivot, _bash(same)).reason
    miss = target.verify(pivot, _bash(other))
    assert not miss.accepted and "run" in miss.reason


@pytest.mark.parametrize(
    "expert, attack",
    [
        ("cat pkg/a.py", "cat pkg/a.py; rm -rf /testbed/*"),
        ("python reproduce.py", "python reproduce.py && rm -rf ~"),
        ("grep -rn foo pkg", "grep -rn foo pkg\nrm -rf /testbed"),
        ("rm reproduce.py", "rm reproduce.py && rm -rf ~"),
        ("git diff", "git diff && git checkout pkg/a.py"),
        ("cat <<'EOF' > t.py\nprint(1)\nEOF", "cat <<'EOF' > t.py\nprint(1)\nEOF; rm -rf ./*"),
    ],
)
def test_a_state_changing_command_riding_along_misses_the_target(expert, attack):
    # issue 19 item 1 for SWE: the expert's action plus a destructive tail hits the target and category.
    pivot = _swe(_bash(expert))
    for name in ("swe_target", "swe_target_continuous"):
        verdict = get_verifier(name).verify(pivot, _bash(attack))
        assert not verdict.accepted and verdict.reward < 1.0, (name, verdict.reason)
    assert get_verifier("swe_target").verify(pivot, _bash(expert)).accepted
    assert (
        get_verifier("swe_target")
        .verify(pivot, _bash(expert + " | head -50" if "\n" not in expert else expert))
        .accepted
    )


def test_the_same_passage_replaced_by_other_text_is_another_edit():
    fix = {"command": "str_replace", "path": "pkg/a.py", "old_str": "    return None", "new_str": "    return sum(xs)"}
    pivot = _swe(_calls(_call("str_replace_editor", **fix)))
    target = get_verifier("swe_target")
    assert target.verify(
        pivot, _calls(_call("str_replace_editor", **{**fix, "new_str": "    return sum(xs or ())"}))
    ).accepted
    assert not target.verify(pivot, _calls(_call("str_replace_editor", **{**fix, "new_str": "    return 0"}))).accepted
    sed = _swe(_bash("sed -i 's/args = func.args + args/args = func.args + tuple(args)/' pkg/a.py"))
    assert target.verify(
        sed, _bash('sed -i -e "s/args = func.args + args/args = func.args + tuple(args)/" ./pkg/a.py')
    ).accepted
    assert not target.verify(sed, _bash("sed -i 's/args = func.args + args//' pkg/a.py")).accepted
    # GNU sed's long option is the same edit (a labelled rewrite swe_target rejected on pytest-7432)
    long = "sed --in-place 's/args = func.args + args/args = func.args + tuple(args)/' pkg/a.py"
    assert target.verify(sed, _bash(long)).accepted, target.verify(sed, _bash(long)).reason
    heredoc = _swe(_bash("cat <<'EOF' > t.py\nimport pkg\nprint(pkg.total([1, 2]))\nEOF"))
    assert target.verify(heredoc, _bash("cat > t.py <<'EOF'\nimport pkg\nprint(pkg.total([1, 2]))\nEOF")).accepted
    assert not target.verify(heredoc, _bash("cat <<'EOF' > t.py\nEOF")).accepted


def test_swe_target_continuous_gives_half_for_each_part():
    pivot = _swe(_bash("sed -n '10,20p' pkg/a.py"))
    graded = get_verifier("swe_target_continuous")
    assert graded.verify(pivot, _bash("sed -n 100,120p pkg/a.py")).reward == 0.5  # right category, wrong lines
    assert graded.verify(pivot, _bash("sed -i 's/a/b/' pkg/a.py")).reward == 0.5  # wrong category, same file
    assert graded.verify(pivot, _bash("ls tests")).reward == 0.0


def test_tool_name_rejects_sprays_and_empty_arguments():
    pivot = _swe(_bash("grep -rn foo ."))
    v = get_verifier("tool_name")
    spray = Message("assistant", "```bash\ngrep -rn foo .\n```\n```bash\ncat a.py\n```")
    assert not v.verify(pivot, spray).accepted
    call = _swe(_calls(_call("create", filename="reproduce.py")))
    assert not v.verify(call, _calls(_call("create"))).accepted
    assert v.verify(call, _calls(_call("create", filename="repro.py"))).accepted  # category-only: any name


def test_register_categories_extends_the_table_through_the_host():
    class Plugin:
        @hookimpl
        def register_categories(self, register):
            register("ruff", "run")

    pivot = _swe(_bash("ruff check ."))
    assert (
        not get_verifier("tool_name").verify(pivot, _bash("ruff check src")).applicable
        or not get_verifier("tool_name").verify(pivot, _bash("python -m flake8")).accepted
    )
    get_host().register_plugin(Plugin(), name="ruff-category")
    assert get_verifier("tool_name").verify(pivot, _bash("python -m flake8")).accepted  # both "run" now

    class Clash:
        @hookimpl
        def register_categories(self, register):
            register("grep", "read")

    with pytest.raises(DuplicateName, match="grep"):
        get_host().register_plugin(Clash(), name="grep-clash")


TOOLS = (
    {
        "type": "function",
        "function": {
            "name": "update",
            "parameters": {
                "type": "object",
                "properties": {
                    "reservation_id": {"type": "string"},
                    "cabin": {"type": "string", "enum": ["economy", "business"]},
                    "amount": {"type": "number"},
                    "reason": {"type": "string"},
                    "ids": {"type": "array"},
                    "notify": {"type": "boolean", "default": False},
                },
                "required": ["reservation_id"],
            },
        },
    },
)
EXPERT_ARGS = {
    "reservation_id": "HAT123",
    "cabin": "economy",
    "amount": 12.5,
    "reason": "customer asked to move to an earlier flight",
    "ids": ["a", "b"],
}


def _tool_pivot(**args) -> Pivot:
    return Pivot("t#2", "tool-use", HIST, _calls(_call("update", **args)), TOOLS)


@pytest.mark.parametrize(
    "args, accepted",
    [
        (
            '{"ids": ["b", "a"], "amount": 12.50, "reason": "customer asked to move to an earlier flight", '
            '"cabin": "economy", "reservation_id": "HAT123"}',
            True,
        ),
        (
            '{"reservation_id": "HAT123", "cabin": "economy", "amount": 1.25e1, "notify": false, '
            '"reason": "Customer asked to move to an earlier flight.", "ids": ["a", "b"]}',
            True,
        ),
        (
            '{"reservation_id": "HAT124", "cabin": "economy", "amount": 12.5, '
            '"reason": "customer asked to move to an earlier flight", "ids": ["a", "b"]}',
            False,
        ),
        (
            '{"reservation_id": "HAT123", "cabin": "business", "amount": 12.5, '
            '"reason": "customer asked to move to an earlier flight", "ids": ["a", "b"]}',
            False,
        ),
        (
            '{"reservation_id": "HAT123", "cabin": "economy", "amount": 12.5, '
            '"reason": "customer asked to move to flight HAT999", "ids": ["a", "b"]}',
            False,
        ),
    ],
)
def test_tool_args_equivalents_and_wrong_values(args, accepted):
    verdict = get_verifier("tool_args").verify(_tool_pivot(**EXPERT_ARGS), _calls(ToolCall("update", args)))
    assert verdict.accepted is accepted, verdict.reason


def test_tool_args_free_text_ids_and_expressions_are_exact():
    pivot = _tool_pivot(reservation_id="HAT123", reason="move flight HAT170 to HAT171 on 2024-05-20")
    v = get_verifier("tool_args")
    assert v.verify(
        pivot, _calls(_call("update", reservation_id="HAT123", reason="Move flight HAT170 to HAT171 on 2024-05-20."))
    ).accepted
    assert not v.verify(
        pivot, _calls(_call("update", reservation_id="HAT123", reason="move flight HAT170 to HAT172 on 2024-05-20"))
    ).accepted
    calc = Pivot("c#2", "tool-use", HIST, _calls(_call("calculate", expression="1200 + 300")))
    assert not v.verify(calc, _calls(_call("calculate", expression="1200 + 800"))).accepted


def test_exact_match_is_the_demonstrated_action_after_normalisation():
    v = get_verifier("exact_match")
    tool = _tool_pivot(**EXPERT_ARGS)
    reordered = _calls(ToolCall("update", json.dumps(dict(reversed(list({**EXPERT_ARGS, "amount": 12.50}.items()))))))
    assert v.verify(tool, reordered).accepted
    assert not v.verify(tool, _calls(_call("update", **{**EXPERT_ARGS, "reason": "customer asked to move"}))).accepted
    shell = _swe(_bash("ls -la src"))
    assert v.verify(shell, Message("assistant", "Let me look.\n```bash\nls  -la   src\n```")).accepted
    # flag order is no normalisation that keeps meaning in general (`tar -xf a` is not `tar -fx a`)
    assert not v.verify(shell, Message("assistant", "Let me look.\n```bash\nls -al src\n```")).accepted
    assert not v.verify(shell, _bash("ls -la tests")).accepted
    text = Pivot("x#2", "tool-use", HIST, Message("assistant", "Could you share your user id?"))
    assert v.verify(text, Message("assistant", "could you share your  user id?")).accepted
    assert not v.verify(text, Message("assistant", "Could you share your reservation id?")).accepted


MALFORMED = [
    '<tool_call>{"name": "str_replace_editor", "arguments": [1, 2]}</tool_call>',
    '<tool_call>{"name": "str_replace_editor", "arguments": "not json"}</tool_call>',
    '<tool_call>{"name": "update", "arguments": {"reservation_id": null, "amount": 1e308, "ids": {"a": 1}}}'
    "</tool_call>",
    '<tool_call>{"name": "execute_bash", "arguments": {"command": ["ls", "-la"]}}</tool_call>',
    '<tool_call>{"name": "bash", "arguments": {"command": 42}}</tool_call>',
    '```bash\ngrep "unterminated\n```',
    "```bash\n\n```",
    "```\n```",
    "```bash\ncat <<'EOF' > \nEOF\n```",
    "{" * 500,
    "```" * 99,
]
# Odd but plausible reads (a bad sed script, a negative head count): no error; acceptance may vary.
ODD = ["```bash\nsed -n 'x,yp' a.py\n```", "\x00\x01 ünïcödé ```bash\nhead -n -5 f\n```"]


@pytest.mark.parametrize("name", ["tool_name", "swe_target", "swe_target_continuous", "exact_match", "tool_args"])
def test_malformed_completions_score_zero_with_a_reason_and_never_error(name):
    from verifiers_plugins import get_parser, safe_verify

    parse = get_parser("hermes")
    pivots = [
        _swe(_bash("sed -n '10,20p' pkg/a.py")),
        _tool_pivot(**EXPERT_ARGS),
        _swe(_calls(_call("str_replace_editor", command="view", path="pkg/a.py", view_range=[1, -1]))),
    ]
    verifier = get_verifier(name)
    for pivot in pivots:
        for text in MALFORMED + ODD:
            verdict = safe_verify(name, verifier, pivot, parse(text))
            assert verdict.error is None, (text, verdict.error)
            if text in MALFORMED:
                assert not verdict.accepted and (verdict.reason or not verdict.applicable)
