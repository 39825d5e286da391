"""The installed plugin: listed with its distribution, used by gym.make, right on real pivots."""

import json
import shlex
import subprocess
import sys
from importlib import metadata

import gymnasium as gym
import pytest
from pivot_verifier_ast import pieces

import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_envs import Message, ToolCall, render_completion
from verifiers_plugins import audit, audit_failures, get_verifiers

NAME = "python_ast_equivalent"


def pivot_cli(*args):
    return subprocess.run([sys.executable, "-m", "pivot_cli", *args], capture_output=True, text=True, timeout=120)


def make(env_id, verifiers=(NAME,)):
    return gym.make(env_id, verifiers=list(verifiers))


def step(env, pivot, completion):
    env.reset(options={"pivot_id": pivot.id})
    _, reward, _, _, info = env.step(completion)
    return reward, info


def terminus(*keystrokes):
    return json.dumps(
        {
            "analysis": "Check the module.",
            "plan": "Run Python.",
            "commands": [{"keystrokes": k, "duration": 1.0} for k in keystrokes],
            "task_complete": False,
        }
    )


def python_pivots(env):
    """The bundled terminal rows that run Python, without a sandbox (the synthesized Terminal-Bench pivots
    beside them are judged by the sandbox, which this plugin's static comparison is not)."""
    return [
        p
        for p in env.unwrapped.pivots
        if not p.context.get("sandbox") and any(x.kind != "other" for x in pieces(p.expert))
    ]


def test_pivot_plugins_lists_it_with_distribution_name_and_version():
    out = pivot_cli("plugins", "--json")
    assert out.returncode == 0, out.stderr
    [row] = [r for r in json.loads(out.stdout)["plugins"] if r["name"] == NAME]
    assert row["distribution"] == "pivot-verifier-ast"
    assert row["version"] == metadata.version("pivot-verifier-ast") == "0.2.0"
    assert (row["plugin"], row["cost"], row["role"]) == (NAME, "cheap", "acceptor")
    assert get_verifiers()[NAME].distribution == "pivot-verifier-ast"


def test_pivot_plugins_check_passes():
    out = pivot_cli("plugins", "--check", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["problems"] == []


def test_gym_make_uses_it_on_python_c_pivots():
    env = make("pivot/terminal-v0")
    pivots = python_pivots(env)
    assert len(pivots) == 4  # the bundled terminal rows that run `python -c`
    for pivot in pivots:
        reward, info = step(env, pivot, render_completion(pivot.expert, pivot.domain))
        assert (reward, info["decided_by"], list(info["verdicts"])) == (1.0, NAME, [NAME])
    redbot = next(p for p in pivots if "redbot" in p.expert.content)
    reformatted = terminus("python -c 'import redbot\nprint( redbot.__file__ )  # where is it'\n")
    assert step(env, redbot, reformatted)[0] == 1.0
    reward, info = step(env, redbot, terminus("python -c 'import redbot; print(redbot.__version__)'\n"))
    assert reward == 0.0 and "AST differs" in info["verdicts"][NAME]["reason"]
    reward, info = step(env, redbot, terminus("cd /tmp && python -c 'import redbot; print(redbot.__file__)'\n"))
    assert reward == 0.0 and "around the Python differ" in info["verdicts"][NAME]["reason"]


def test_reformatted_script_passes_where_string_similarity_fails():
    env = make("pivot/terminal-v0", verifiers=("string_similarity", NAME))
    pivot = next(p for p in python_pivots(env) if "oauthlib.oauth1" in p.expert.content)
    script = "import oauthlib.oauth1  # the OAuth 1 client\n\n# it imported: say so\n"
    script += 'print(\n    "oauthlib is installed",\n)'

    reward, info = step(env, pivot, terminus(f"python3 -c {shlex.quote(script)}\n"))
    assert info["verdicts"]["string_similarity"]["accepted"] is False
    assert (reward, info["decided_by"]) == (1.0, NAME)


def test_editor_edits_and_file_writes():
    env = make("pivot/swe-v0")
    by_id = {p.id: p for p in env.unwrapped.pivots}
    edit = by_id["example_1#2"]  # str_replace_editor str_replace on foo.py
    args = edit.expert.tool_calls[0].parsed_arguments()

    def call(**changes):
        new = {**args, **changes}
        return render_completion(
            Message(
                role="assistant", tool_calls=(ToolCall(name="str_replace_editor", arguments=json.dumps(new), id="c1"),)
            ),
            "swe",
        )

    assert step(env, edit, call())[0] == 1.0
    assert (
        step(
            env,
            edit,
            call(
                new_str="    result = 0\n    for v in values:   # accumulate\n        result += (v)\n    return result"
            ),
        )[0]
        == 1.0
    )
    assert (
        step(env, edit, call(new_str="    result = 0\n    for v in values:\n        result -= v\n    return result"))[0]
        == 0.0
    )
    assert step(env, edit, call(old_str="    return None"))[0] == 0.0  # another anchor: the edit may not apply
    assert step(env, edit, call(path="/workspace/proj/bar.py"))[0] == 0.0

    write = next(p for p in env.unwrapped.pivots if "cat <<'EOF' > reproduce_issue.py" in (p.expert.content or ""))
    expert_text = write.expert.content
    [piece] = [x for x in pieces(write.expert) if x.kind == "file"]
    import ast

    reformatted = expert_text.replace(piece.code, ast.unparse(ast.parse(piece.code)))
    assert reformatted != expert_text
    assert step(env, write, reformatted)[0] == 1.0
    changed = expert_text.replace("import django", "import flask", 1)
    reward, info = step(env, write, changed)
    assert reward == 0.0 and info["verdicts"][NAME]["accepted"] is False


def test_not_applicable_without_python_and_malformed_input_never_raises():
    env = make("pivot/swe-v0")
    plain = next(p for p in env.unwrapped.pivots if not python_pivots_of(p))
    _, info = step(env, plain, render_completion(plain.expert, plain.domain))
    assert info["verdicts"][NAME]["applicable"] is False
    pivot = python_pivots(env)[0]
    for junk in ("", "```bash\npython -c 'def broken(:'\n```", "<tool_call>{not json</tool_call>", "\x00" * 10):
        reward, info = step(env, pivot, junk)
        assert reward == 0.0 and info["verdicts"][NAME]["error"] is None


def python_pivots_of(pivot):
    return [x for x in pieces(pivot.expert) if x.kind != "other"]


@pytest.mark.parametrize("env_id", ["pivot/swe-v0", "pivot/terminal-v0"])
def test_audit_kit_accepts_no_adversarial_case(env_id):
    rows = audit(make(env_id).unwrapped)
    assert rows and not audit_failures(rows), audit_failures(rows)
    assert all(r["accepted"] == 0 for r in rows if r.get("verifier") == NAME)
