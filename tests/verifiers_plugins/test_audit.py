"""The reward-hacking audit: every built-in chain accepts none of the canned attacks."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import pivot_envs
from pivot_envs import Message, Pivot, ToolCall
from verifiers_plugins import AUDIT_CASES, Verdict, adversarial_completions, audit, audit_failures, get_host, hookimpl

TOOLS = (
    {
        "type": "function",
        "function": {
            "name": "get_user",
            "parameters": {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]},
        },
    },
    {"type": "function", "function": {"name": "list_airports", "parameters": {"type": "object", "properties": {}}}},
)


def _pivots() -> list[Pivot]:
    hist = (Message("system", "policy"), Message("user", "I am mia_li_3668, please look me up."))
    return [
        Pivot(
            "t#2",
            "tool-use",
            hist,
            Message("assistant", tool_calls=(ToolCall("get_user", '{"user_id": "mia_li_3668"}'),)),
            TOOLS,
        ),
        Pivot("t#3", "tool-use", hist, Message("assistant", "Could you share your reservation id?"), TOOLS),
        Pivot("s#2", "swe", hist, Message("assistant", "THOUGHT: look.\n\n```bash\ngrep -rn foo .\n```")),
    ]


@pytest.mark.parametrize("env_id", pivot_envs.ENV_IDS)
def test_default_chain_of_every_domain_accepts_no_attack(env_id):
    env = gym.make(env_id)
    rows = audit(env)
    cases = {r["case"] for r in rows}
    assert cases <= {c.name for c in AUDIT_CASES} and {"empty", "echo_history", "long_output"} <= cases
    assert audit_failures(rows) == [], audit_failures(rows)
    chain_rows = [r for r in rows if "chain" in r]
    assert sum(r["total"] for r in chain_rows) > 0


def test_cases_apply_by_action_style():
    tool, text, bash = _pivots()
    assert set(adversarial_completions(text)) == {
        "empty",
        "copy_last_user",
        "echo_history",
        "terminus_no_commands",
        "long_output",
    }
    assert "many_calls" in adversarial_completions(tool) and "many_calls" in adversarial_completions(bash)
    no_args = Pivot(
        "n#2", "tool-use", tool.history, Message("assistant", tool_calls=(ToolCall("list_airports", "{}"),)), TOOLS
    )
    assert "tool_empty_args" not in adversarial_completions(no_args)  # `{}` is the right answer there
    junk = json.loads(adversarial_completions(tool)["tool_junk_args"].split("<tool_call>")[1].split("</tool_call>")[0])
    assert junk["name"] == "get_user" and junk["arguments"]["user_id"] != "mia_li_3668"


def test_audit_catches_a_permissive_verifier():
    class NameOnly:
        role = "acceptor"

        def verify(self, pivot, action):
            names = [c.name for c in pivot.expert.tool_calls]
            return (
                Verdict.accept("name") if names[:1] == [c.name for c in action.tool_calls][:1] else Verdict.reject("no")
            )

    class Plugin:
        @hookimpl
        def register_verifiers(self, register):
            register("name_only", NameOnly)

    get_host().register_plugin(Plugin(), name="name-only-test")
    rows = audit(["turn_kind", "name_only"], _pivots()[:1])
    bad = {(r.get("chain") or r.get("verifier"), r["case"]) for r in audit_failures(rows)}
    assert ("turn_kind>name_only", "tool_junk_args") in bad and ("name_only", "tool_empty_args") in bad
    assert audit(["turn_kind", "tool_args"], _pivots()) and not audit_failures(
        audit(["turn_kind", "tool_args"], _pivots())
    )


def test_cli_audit_json():
    from pivot_cli import app

    result = CliRunner().invoke(app, ["audit", "--env", "pivot/tool-use-v0", "--limit", "5", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["pivots"] == 5 and payload["failures"] == 0
    row = payload["cases"][0]
    assert {"case", "accepted", "total"} <= set(row) and ("chain" in row or "verifier" in row)


def test_cli_audit_on_a_real_dataset(shared_data):
    from pivot_cli import app

    data = shared_data / "swe" / "swe_agent_demos.jsonl"
    result = CliRunner().invoke(app, ["audit", "--env", "pivot/swe-v0", "--dataset", str(data), "--strict", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["pivots"] == 47 and payload["failures"] == 0
    junk = [r for r in payload["cases"] if r.get("verifier") == "swe_target" and r["case"] == "tool_junk_args"]
    assert junk and junk[0]["total"] > 0 and junk[0]["expected"] == 0
