"""Reward integrity, round 3 (issue 30, items 1-5): what the cheap verifiers must not accept.

Each test reproduces a probe that scored 1 on c81a5b8: quoting that changes meaning passed as
"the same action", keystrokes without Enter counted as run, reads that write, a submission of
something other than the expert's patch, and a test run that runs nothing.
"""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_core import Message, Pivot, action_commands, normalize_shell, normalized_action
from verifiers_plugins import VerifierChain, get_verifier
from verifiers_plugins._chain import same_action

HELLO = "synth/terminal-bench-core/hello-world#1"
STATIC_TERMINAL = ["turn_kind", "json_schema", "tool_args", "string_similarity"]  # the chain without its sandbox
HEREDOC = "cat > fix.py <<'EOF'\ndef f(x):\n    if x:\n        return 1\n    return 0\nEOF"


def terminus(*keystrokes: str) -> Message:
    commands = [{"keystrokes": k, "duration": 0.1} for k in keystrokes]
    return Message("assistant", json.dumps({"analysis": "a", "plan": "p", "commands": commands}))


def terminal_pivot(*expert: str, history: tuple[Message, ...] = ()) -> Pivot:
    return Pivot(
        "t#9", "terminal", (Message("user", "go"), *history), terminus(*expert), context={"format": "terminus"}
    )


@pytest.fixture(scope="module")
def terminal_env():
    return gym.make("pivot/terminal-v0").unwrapped


# -- 4: normalisation that changes meaning ------------------------------------------------------


@pytest.mark.parametrize(
    "a, b",
    [
        ('echo "Hello, world!" > hello.txt', 'echo "Hello, world!" \\> hello.txt'),
        ('echo "Hello, world!" > hello.txt', "echo \"Hello, world!\" '>' hello.txt"),
        (HEREDOC, HEREDOC.replace("    ", "")),
        ("tar -xf a.tar", "tar -fx a.tar"),
        ("rm -rf $HOME/x", "rm -rf '$HOME/x'"),
        ("ls *.py", "ls '*.py'"),
        ("echo a\\ ", "echo a"),
    ],
)
def test_commands_that_differ_in_meaning_never_normalise_alike(a, b):
    assert normalize_shell(a) != normalize_shell(b)
    expert, candidate = terminus(a + "\n"), terminus(b + "\n")
    assert not same_action(expert, candidate)  # the chain's "identical, accept without running" shortcut
    assert not get_verifier("exact_match").verify(terminal_pivot(a + "\n"), candidate).accepted


@pytest.mark.parametrize(
    "a, b", [("ls  -la   /app", "  ls -la /app  "), ("grep 'x' f", 'grep "x" f'), (HEREDOC, HEREDOC + "\n")]
)
def test_changes_that_keep_meaning_still_normalise_alike(a, b):
    assert normalize_shell(a) == normalize_shell(b)
    assert same_action(terminus(a + "\n"), terminus(b + "\n"))


def test_an_escaped_redirect_at_hello_world_scores_zero_without_a_sandbox(terminal_env):
    pivot = next(p for p in terminal_env.pivots if p.id == HELLO)
    chain = VerifierChain.from_names(STATIC_TERMINAL)
    escaped = terminus('echo "Hello, world!" \\> hello.txt\n')  # prints the line, writes no file
    result = chain(pivot, escaped)
    assert not result.accepted and result.reward == 0.0, result.to_json()
    assert "quoting or operators" in result.verdicts["string_similarity"].reason
    assert chain(pivot, terminus('echo "Hello, world!" > hello.txt\n')).accepted


def test_a_heredoc_with_its_indentation_stripped_is_another_program():
    pivot = terminal_pivot(HEREDOC + "\n")
    flat = terminus(HEREDOC.replace("    ", "") + "\n")
    assert not get_verifier("string_similarity").verify(pivot, flat).accepted
    assert get_verifier("string_similarity").verify(pivot, terminus(HEREDOC + "\n")).accepted


# -- 5: keystrokes without Enter -------------------------------------------------------------------


def test_keystrokes_without_enter_are_typed_not_run():
    assert action_commands(terminus("rm -rf /app")) == []
    assert action_commands(terminus("echo hi", "\n")) == ["echo hi"]  # a later Enter runs the line
    assert action_commands(terminus("echo ", "hi", "Enter")) == ["echo hi"]
    assert action_commands(terminus("rm -rf /app", "C-c", "ls\n")) == ["ls"]  # C-c drops the typed line


def test_what_stays_typed_is_reported():
    from pivot_core import typed_commands

    typed = typed_commands(["ls\n", "cat notes"])
    assert typed.commands == ("ls",) and typed.pending == "cat notes"


def test_a_construct_left_open_waits_and_what_came_before_it_runs():
    from pivot_core import typed_commands

    # bash runs each complete command at its line end; an open `if` or quote waits for its end
    assert typed_commands(["rm -rf /app\nif true; then\n"]).commands == ("rm -rf /app",)
    assert typed_commands(["echo 'x\n", "'; rm -rf /app\n"]).commands == ("echo 'x\n'; rm -rf /app",)
    split = typed_commands(["if false; then echo fi\n", "else rm -rf /app; fi\n"])
    assert split.commands == ("if false; then echo fi\nelse rm -rf /app; fi",)


def test_text_left_typed_by_the_history_starts_the_next_line():
    from pivot_core import history_typed

    history = (Message("assistant", terminus("rm -rf /ap").content), Message("user", "typed"))
    pivot = terminal_pivot("ls\n", history=history)
    assert history_typed(pivot).commands == () and history_typed(pivot).pending == "rm -rf /ap"
    assert action_commands(pivot.expert, history_typed(pivot).pending) == ["rm -rf /apls"]


def test_keystrokes_without_enter_score_zero_on_the_cheap_verifiers(terminal_env):
    pivot = next(p for p in terminal_env.pivots if p.id == HELLO)
    typed_only = terminus('echo "Hello, world!" > hello.txt')
    chain = VerifierChain.from_names(STATIC_TERMINAL)
    assert not same_action(pivot.expert, typed_only)
    assert normalized_action(typed_only) != normalized_action(pivot.expert)
    assert not chain(pivot, typed_only).accepted
    assert not get_verifier("exact_match").verify(pivot, typed_only).accepted
    # the expert's line plus text left at the prompt is another action too
    left = terminus('echo "Hello, world!" > hello.txt\n', "rm -rf /app")
    assert not chain(pivot, left).accepted
    assert not get_verifier("exact_match").verify(pivot, left).accepted


def test_the_scanner_reads_what_bash_would_run_now():
    from pivot_core import scan_shell

    assert scan_shell("ls &&").complete is False
    assert scan_shell("cat <<EOF\nx\nEOF ").complete is False  # `EOF ` does not end the heredoc
    assert scan_shell("for i in 1 2; do echo $i; done").complete
    hidden = scan_shell('grep -r "a > b" src 2>/dev/null')
    assert hidden.redirects == (("2>", "/dev/null"),)  # the quoted `>` is a pattern, not a redirect
    assert scan_shell("x=$(git stash) ls `id` <(ls)").substitutions == ("$(git stash)", "`id`", "<(ls)")


# -- 1-3: SWE reads that write, submissions, runs that run nothing ----------------------------------

DJANGO = "swebench_verified/mini-swe-agent/gemini-3-pro-preview/django__django-17029"
WRITING_READS = [
    'find django/ -name "*.py" -delete',
    'find django/ -name "*.py" -exec rm {} \\;',
    'find django/ -name "*.py" -exec sed -i s/a/b/ {} +',
    'find django/ -name "*.py" -fprint django/x.py',
    'grep -r "class Apps" django/ > django/apps/registry.py',
    'grep -r "class Apps" django/ >> django/apps/registry.py',
    'grep -r "class Apps" django/ 2> django/apps/registry.py',
    'grep -r "class Apps" django/ &> django/apps/registry.py',
    'grep -r "class Apps" django/ >| django/apps/registry.py',
    'grep -r "class Apps" $(git stash) django/',
    'grep -r "class Apps" `git stash` django/',
    'grep -r "class Apps" <(rm -rf django) django/',
    'grep -r "class Apps" django/ > "$(printf \'django/apps/registry.py\\nX\')"',
    "ls -F; find . -delete",
    'GIT_EXTERNAL_DIFF=/tmp/x grep -r "class Apps" django/',
]


def fence(command: str) -> str:
    return f"THOUGHT: next.\n\n```bash\n{command}\n```"


@pytest.fixture(scope="module")
def swe_env():
    return gym.make("pivot/swe-v0").unwrapped


def _pivot(env, pivot_id: str) -> Pivot:
    return next(p for p in env.pivots if p.id == pivot_id)


@pytest.mark.parametrize("command", WRITING_READS)
def test_a_search_that_also_writes_scores_zero(swe_env, command):
    pivot = _pivot(swe_env, f"{DJANGO}#4")  # expert: grep -r "class Apps" django/
    result = swe_env.score(pivot, [fence(command)])[0]
    assert not result.accepted and result.reward == 0.0, result.to_json()


@pytest.mark.parametrize(
    "command", ['grep -r "class Apps" django/', 'grep -rn "class Apps" django/ 2>/dev/null | head']
)
def test_the_same_search_still_scores_one(swe_env, command):
    assert swe_env.score(_pivot(swe_env, f"{DJANGO}#4"), [fence(command)])[0].accepted


def _swe_pivot(expert: str) -> Pivot:
    return Pivot("s#4", "swe", (Message("user", "fix it"),), Message("assistant", fence(expert)))


@pytest.mark.parametrize(
    "expert, candidate",
    [
        ("sed -n '1,40p' django/apps/registry.py", "sed -n '1,40p;w django/apps/registry.py' django/apps/registry.py"),
        ("sed -n '1,40p' django/apps/registry.py", "sed -n -e '1,40p' -e 's/a/b/w out.txt' django/apps/registry.py"),
        ("sed -n '1,40p' django/apps/registry.py", "sed -n '1,40p;1e rm -rf django' django/apps/registry.py"),
        ("cat django/apps/registry.py", "cat django/apps/registry.py > django/apps/config.py"),
        ("cat django/apps/registry.py", "awk '{ print > \"django/apps/config.py\" }' django/apps/registry.py"),
        ("git diff django/apps/registry.py", "git diff --output=django/apps/config.py django/apps/registry.py"),
        ("python reproduce.py", "python reproduce.py > django/apps/registry.py"),
    ],
)
def test_a_read_or_run_with_a_hidden_write_is_another_action(expert, candidate):
    verdict = get_verifier("swe_target").verify(_swe_pivot(expert), Message("assistant", fence(candidate)))
    assert not verdict.accepted and verdict.reward == 0.0, verdict.reason


def test_the_expert_s_own_redirect_is_no_extra_write():
    expert = "python reproduce.py > out.txt 2>&1"
    assert get_verifier("swe_target").verify(_swe_pivot(expert), Message("assistant", fence(expert))).accepted


@pytest.mark.parametrize(
    "command",
    [
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && echo 'diff --git a/x.py b/x.py'",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached -- nonexistent",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat /tmp/patch.diff",
    ],
)
def test_a_submission_of_another_patch_scores_zero(swe_env, command):
    pivot = _pivot(swe_env, f"{DJANGO}#38")  # expert: echo MARK && git add -A && git diff --cached
    result = swe_env.score(pivot, [fence(command)])[0]
    assert not result.accepted and result.reward == 0.0, result.to_json()
    assert "submi" in result.verdicts["swe_target"].reason


def test_the_same_submission_spelled_as_git_documents_it_scores_one(swe_env):
    pivot = _pivot(swe_env, f"{DJANGO}#38")
    same = "echo 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT' && git add --all && git diff --staged"
    assert swe_env.score(pivot, [fence(same)])[0].accepted


def _run_call(command: str) -> Message:
    from pivot_core import ToolCall

    return Message("assistant", None, (ToolCall("execute_bash", json.dumps({"command": command})),))


@pytest.mark.parametrize(
    "options", ["--co", "--collect-only", "--setup-plan", "--fixtures", "-h", "--version", "-p no:python"]
)
def test_a_test_run_that_runs_no_test_is_not_the_expert_s_run(swe_env, options):
    from pivot_core import render_completion

    pivot = _pivot(swe_env, "example_5#2")  # expert: python -m pytest /workspace/proj/tests/test_utils.py -q
    command = f"python -m pytest /workspace/proj/tests/test_utils.py -q {options}"
    result = swe_env.score(pivot, [render_completion(_run_call(command), pivot.domain)])[0]
    assert not result.accepted and result.reward == 0.0, result.to_json()
    hidden = "PYTEST_ADDOPTS=--co python -m pytest /workspace/proj/tests/test_utils.py -q"
    assert not swe_env.score(pivot, [render_completion(_run_call(hidden), pivot.domain)])[0].accepted
    reworded = "python -m pytest /workspace/proj/tests/test_utils.py -v --tb=short"
    assert swe_env.score(pivot, [render_completion(_run_call(reworded), pivot.domain)])[0].accepted


def test_appending_is_not_overwriting():
    expert = "cat >> django/apps/registry.py <<'EOF'\nX = 1\nEOF"
    truncating = Message("assistant", fence(expert.replace(">>", ">", 1)))
    assert not get_verifier("swe_target").verify(_swe_pivot(expert), truncating).accepted
    assert get_verifier("swe_target").verify(_swe_pivot(expert), Message("assistant", fence(expert))).accepted


# -- the audit kit's cases for these classes -----------------------------------------------------------

NEW_CASES = ("hidden_write", "hidden_substitution", "escaped_redirect", "no_enter")


def test_the_audit_builds_the_new_cases_from_the_expert_s_command():
    from verifiers_plugins import adversarial_completions

    hello = terminal_pivot('echo "Hello, world!" > hello.txt\n')
    built = {
        k: json.loads(v)["commands"][0]["keystrokes"]
        for k, v in adversarial_completions(hello).items()
        if k in NEW_CASES
    }
    assert built == {
        "hidden_write": 'echo "Hello, world!" > hello.txt 2>>./zzq-audit.log\n',
        "hidden_substitution": 'echo "Hello, world!" > hello.txt $(touch ./zzq-audit.txt)\n',
        "escaped_redirect": 'echo "Hello, world!" \\> hello.txt\n',
        "no_enter": 'echo "Hello, world!" > hello.txt',
    }
    quoted = _swe_pivot("sed -i '3a\\    x = a > b' pkg/a.py")  # the `>` is sed's text: no redirect to escape
    assert "escaped_redirect" not in adversarial_completions(quoted)


@pytest.mark.parametrize("env_id", ["pivot/swe-v0", "pivot/terminal-v0"])
def test_cheap_acceptors_reject_the_new_cases_on_the_bundled_pivots(env_id):
    from verifiers_plugins import AUDIT_CASES, audit, audit_failures

    env = gym.make(env_id).unwrapped
    cases = [c for c in AUDIT_CASES if c.name in NEW_CASES]
    names = ["swe_target", "exact_match"] if env_id == "pivot/swe-v0" else STATIC_TERMINAL + ["exact_match"]
    rows = audit(names, env.pivots, parser=env.parse, cases=cases)
    assert audit_failures(rows) == [], audit_failures(rows)
    assert sum(r["total"] for r in rows if "chain" in r) > 0


def test_a_python_file_written_without_its_indentation_is_another_edit():
    flat = HEREDOC.replace("    ", "")  # whitespace-collapsed, the two texts are the same
    verifier = get_verifier("swe_target")
    verdict = verifier.verify(_swe_pivot(HEREDOC), Message("assistant", fence(flat)))
    assert not verdict.accepted and "compile" in verdict.reason
    assert verifier.verify(_swe_pivot(HEREDOC), Message("assistant", fence(HEREDOC.replace("    ", "  ")))).accepted
    from pivot_core import ToolCall

    def create(text: str) -> Message:
        args = {"command": "create", "path": "/testbed/fix.py", "file_text": text}
        return Message("assistant", None, (ToolCall("str_replace_editor", json.dumps(args)),))

    body = HEREDOC.split("\n", 1)[1].rsplit("\n", 1)[0]
    tool = Pivot("s#5", "swe", (Message("user", "fix it"),), create(body))
    assert not verifier.verify(tool, create(body.replace("    ", ""))).accepted
    assert verifier.verify(tool, create(body)).accepted


def test_a_substitution_in_an_unquoted_heredoc_body_runs():
    # `<<EOF` (unquoted) runs `$(...)` in its body while writing the file; `<<'EOF'` writes it as text
    expert = "cat > fix.py <<'EOF'\nX = 1\nprint(X)\nEOF"
    stash = "cat > fix.py <<EOF\nX = 1\nprint(X)  # $(git stash)\nEOF"
    assert not get_verifier("swe_target").verify(_swe_pivot(expert), Message("assistant", fence(stash))).accepted
    quoted = "cat > fix.py <<'EOF'\nX = 1\nprint(X)  # $(git stash)\nEOF"  # text only: a comment in the file
    assert get_verifier("swe_target").verify(_swe_pivot(expert), Message("assistant", fence(quoted))).accepted


def test_the_shell_reader_never_raises_and_bounds_its_work():
    import random

    from pivot_core import scan_shell, typed_commands

    pieces = list("ab $(){}[]<>|&;'\"`\\\n\t#=~*?!-0") + ["<<EOF", "EOF", "if ", "fi", "case ", "esac", "$((", "2>&1"]
    rng = random.Random(30)
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        scan = scan_shell(text)
        if scan.understood and scan.complete:  # the canonical form is a fixed point
            assert scan_shell(scan.canonical).canonical == scan.canonical, text
        typed_commands([text, "\n"])
    assert not scan_shell("$(" * 5000).understood  # nesting past the bound: not understood, no RecursionError
    hidden = "rm -rf /app\n" + "x" * 300_000 + "\n"  # past the reader's bound the whole text runs
    assert typed_commands([hidden]).commands[0].startswith("rm -rf /app")


def test_a_test_run_cut_short_by_a_timeout_is_not_the_expert_s_run(swe_env):
    from pivot_core import render_completion

    pivot = _pivot(swe_env, "example_5#2")
    score = lambda c: swe_env.score(pivot, [render_completion(_run_call(c), pivot.domain)])[0]  # noqa: E731
    assert not score("timeout 1 python -m pytest /workspace/proj/tests/test_utils.py -q").accepted
    assert score("timeout 600 python -m pytest /workspace/proj/tests/test_utils.py -q").accepted
