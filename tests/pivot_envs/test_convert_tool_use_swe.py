"""Every tool-use and SWE trajectory file in ../shared/data converts; counts and expert scores hold."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pivot_core._formats import _records
from pivot_core.convert import mini_swe_agent, swe_agent, tau2, tau_bench
from pivot_envs import InvalidTrajectory, load_pivots, render_completion
from pivot_envs.domains.swe import SweEnv
from pivot_envs.domains.tool_use import ToolUseEnv
from verifiers_plugins import VerifierChain, audit, audit_failures, get_parser

# Trajectory files (companions such as tool schemas, the airline DB and SWE-bench reports are not).
FILES = {
    "tool_use/tau_bench_airline_gpt4o.jsonl": "tau-bench",
    "tool_use/tau_bench_retail_fewshot_text.jsonl": "tau-bench",
    "tool_use/raw/MockRetailDomainEnv-few_shot.jsonl": "tau-bench",
    "tool_use/raw/gpt-4o-airline.sample8.json": "tau-bench",
    "tool_use/tau2_telecom_gpt4o.jsonl": "tau2",
    "tool_use/raw/tau2_telecom_gpt-4o_simulation.json": "tau2",
    "swe/mini_swe_agent_gemini3pro_swebench_verified.jsonl": "mini-swe-agent",
    "swe/raw/astropy__astropy-13579.traj.json": "mini-swe-agent",
    "swe/raw/astropy__astropy-14096.traj.json": "mini-swe-agent",
    "swe/raw/astropy__astropy-14598.traj.json": "mini-swe-agent",
    "swe/swe_agent_demos.jsonl": "swe-agent",
    "swe/raw/swe_agent_function_calling_simple.traj": "swe-agent",
    "swe/raw/swe_agent_str_replace_anthropic_demo.yaml": "swe-agent",
}
COMPANIONS = {"tau_bench_airline_tools.json", "SOURCES.md"}


def _raw_chats(path: Path) -> list[list[dict]]:
    """The source's chats, read with plain json/yaml (independent of the converters)."""
    if path.suffix == ".jsonl":
        recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    elif path.suffix == ".yaml":
        recs = [yaml.safe_load(path.read_text())]
    else:
        data = json.loads(path.read_text())
        recs = data if isinstance(data, list) else data.get("simulations", [data])
    chats = []
    for r in recs:
        if "messages_display" in r:
            lines = [ln for ln in r["messages_display"].splitlines() if ln.startswith("assistant: ")]
            chats.append([{"role": "assistant", "content": None if ln == "assistant: None" else ln} for ln in lines])
        else:
            chats.append(r.get("messages") or r.get("traj") or r.get("history"))
    return chats


def _assistant_turns(path: Path) -> int:
    """Assistant turns that act or speak (redacted tool-call turns and empty turns demonstrate nothing;
    neither do turns mini-swe-agent's harness answered with its format error)."""
    n = 0
    for chat in _raw_chats(path):
        for i, m in enumerate(chat):
            rejected = (
                i + 1 < len(chat)
                and chat[i + 1]["role"] == "user"
                and str(chat[i + 1].get("content")).startswith("Please always provide EXACTLY ONE action")
            )
            acts = (
                (m.get("content") or "").strip()
                or m.get("tool_calls")
                or m.get("tool_calls_raw")
                or (m.get("action") or "").strip()
            )
            n += m["role"] == "assistant" and bool(acts) and not rejected
    return n


@pytest.fixture(scope="module")
def converted(shared_data) -> dict[str, list]:
    return {rel: load_pivots(shared_data / rel) for rel in FILES}


# SWE-bench Verified's execution data (repository bundles, the instances, their feasibility notes): no
# trajectories; its mini-swe-agent runs are trajectories, each checked below
VERIFIED = "swe/verified"
VERIFIED_RUNS = f"{VERIFIED}/trajectories/"


def test_every_trajectory_file_is_listed(shared_data):
    found = {
        str(p.relative_to(shared_data))
        for d in ("tool_use", "swe")
        for p in (shared_data / d).rglob("*")
        if p.is_file()
        and p.name not in COMPANIONS
        and "tau_bench_airline_db" not in p.parts
        and not p.name.endswith(".report.json")
        and not (str(p.relative_to(shared_data)).startswith(VERIFIED) and p.suffix in (".bundle", ".md", ".jsonl"))
    }
    runs = {r for r in found if r.startswith(VERIFIED_RUNS)}
    assert found - runs == set(FILES)
    assert all(r.endswith(".traj.json") for r in runs), sorted(runs)[:3]


def test_every_swe_bench_verified_run_converts_as_mini_swe_agent(shared_data):
    from pivot_envs import detect_format, load_pivots

    runs = sorted((shared_data / VERIFIED_RUNS).glob("*.traj.json"))
    assert runs, "no SWE-bench Verified runs in the shared data"
    for path in runs:
        assert detect_format(path).name == "mini-swe-agent", path
        pivots = load_pivots(path)
        assert len(pivots) == _assistant_turns(path) > 0, path
        assert {p.domain for p in pivots} == {"swe"}, path


@pytest.mark.parametrize("rel", sorted(FILES))
def test_file_converts_with_one_pivot_per_assistant_turn(shared_data, converted, rel):
    from pivot_envs import detect_format

    path = shared_data / rel
    assert detect_format(path).name == FILES[rel]
    pivots = converted[rel]
    assert len(pivots) == _assistant_turns(path) > 0
    assert len({p.id for p in pivots}) == len(pivots)
    assert {p.domain for p in pivots} == {"tool-use" if rel.startswith("tool_use") else "swe"}
    assert all(p.expert.tool_calls or p.expert.text.strip() for p in pivots)


@pytest.mark.parametrize("rel", sorted(FILES))
def test_expert_action_scores_one_under_the_default_chain(converted, rel):
    env_cls = ToolUseEnv if rel.startswith("tool_use") else SweEnv
    chain = VerifierChain.from_names(list(env_cls.default_verifiers))
    parse = get_parser("hermes")
    failed = [p.id for p in converted[rel] if not chain(p, parse(render_completion(p.expert, p.domain))).accepted]
    assert failed == []


def test_mini_swe_agent_turns_rejected_by_the_harness_are_history_not_pivots(converted):
    pivots = converted["swe/mini_swe_agent_gemini3pro_swebench_verified.jsonl"]
    from pivot_core import message_commands

    assert all(len(message_commands(p.expert)) == 1 for p in pivots)
    rejected = [m for p in pivots for m in p.history if m.role == "assistant" and len(message_commands(m)) != 1]
    assert rejected  # still in the history: the agent saw its own malformed turn and the error


def test_tau2_user_side_tool_calls_stay_out_of_the_agent_history(shared_data, converted):
    raw = [m for chat in _raw_chats(shared_data / "tool_use/tau2_telecom_gpt4o.jsonl") for m in chat]
    user_calls = sum(len(m.get("tool_calls") or ()) for m in raw if m["role"] == "user")
    pivots = converted["tool_use/tau2_telecom_gpt4o.jsonl"]
    assert user_calls > 0
    assert all(m.extra.get("requestor") != "user" for p in pivots for m in p.history if m.role == "tool")
    traj = tau2.from_tau2(json.loads((shared_data / "tool_use/tau2_telecom_gpt4o.jsonl").read_text().splitlines()[0]))
    back = tau2.to_tau2(traj)
    assert len(back["messages"]) == len(_raw_chats(shared_data / "tool_use/tau2_telecom_gpt4o.jsonl")[0])
    assert traj.messages[0].role == "system" and traj.messages[0].extra["reconstructed"]
    agent_calls = {c["name"] for m in raw if m["role"] == "assistant" for c in m.get("tool_calls") or ()}
    user_only = {c["name"] for m in raw if m["role"] == "user" for c in m.get("tool_calls") or ()} - agent_calls
    assert set(pivots[0].tool_names) == agent_calls and not user_only & set(pivots[0].tool_names)
    assert all(t["x-inferred"] for t in pivots[0].tools)


def test_retail_redacted_turns_stay_in_history_but_are_never_pivots(converted):
    pivots = converted["tool_use/tau_bench_retail_fewshot_text.jsonl"]
    assert all(not p.expert.extra.get("tool_call_redacted") and p.expert.text for p in pivots)
    redacted = [m for p in pivots for m in p.history if m.extra.get("tool_call_redacted")]
    assert redacted and all(m.content is None and not m.tool_calls for m in redacted)
    raw_ids = [p.id.split("#")[1] for p in converted["tool_use/raw/MockRetailDomainEnv-few_shot.jsonl"]]
    assert raw_ids == [p.id.split("#")[1] for p in pivots]


def test_tau_bench_original_release_keeps_reward_task_policy_and_tools(converted):
    pivots = converted["tool_use/raw/gpt-4o-airline.sample8.json"]
    p = pivots[0]
    assert p.context["trajectory_reward"] in (0.0, 1.0) and p.context["task"]["user_id"]
    assert p.history[0].role == "system" and "Airline Agent Policy" in p.history[0].text
    assert "book_reservation" in p.tool_names and len(p.tools) == 14


@pytest.mark.parametrize(
    "rel, fr, to",
    [
        ("tool_use/tau_bench_airline_gpt4o.jsonl", tau_bench.from_tau_bench, tau_bench.to_tau_bench),
        ("tool_use/raw/MockRetailDomainEnv-few_shot.jsonl", tau_bench.from_tau_bench, tau_bench.to_tau_bench),
        ("tool_use/raw/tau2_telecom_gpt-4o_simulation.json", tau2.from_tau2, tau2.to_tau2),
        (
            "swe/raw/astropy__astropy-14598.traj.json",
            mini_swe_agent.from_mini_swe_agent,
            mini_swe_agent.to_mini_swe_agent,
        ),
        ("swe/swe_agent_demos.jsonl", swe_agent.from_swe_agent, swe_agent.to_swe_agent),
        ("swe/raw/swe_agent_str_replace_anthropic_demo.yaml", swe_agent.from_swe_agent, swe_agent.to_swe_agent),
    ],
)
def test_converters_round_trip(shared_data, rel, fr, to):
    for _, rec in list(_records(shared_data / rel))[:3]:
        kwargs = {"default_id": "x"}
        a = fr(rec, **kwargs)
        b = fr(json.loads(json.dumps(to(a))), **kwargs)
        assert a.to_json() == b.to_json()
        assert [m.extra for m in a.messages] == [m.extra for m in b.messages]


def test_swe_agent_python_repr_is_read_without_eval():
    rec = {
        "id": "swe-agent/x",
        "trajectory_steps": [],
        "messages": [
            {"role": "assistant", "content": "go", "tool_calls_raw": "__import__('os').system('touch /tmp/pwned')"}
        ],
    }
    with pytest.raises(InvalidTrajectory, match="not a Python literal"):
        swe_agent.from_swe_agent(rec)
    ok = dict(
        rec,
        messages=[
            {
                "role": "assistant",
                "content": "go",
                "tool_calls_raw": "[{'function': {'arguments': '{\"path\": \"a.py\"}', 'name': 'open'}, 'id': 'c1'}]",
            }
        ],
    )
    assert swe_agent.from_swe_agent(ok).messages[0].tool_calls[0].parsed_arguments() == {"path": "a.py"}


def test_corrupt_line_names_file_and_line(tmp_path, shared_data):
    from pivot_envs import DataFileError

    lines = (shared_data / "tool_use/tau2_telecom_gpt4o.jsonl").read_text().splitlines()[:2]
    bad = tmp_path / "tau2.jsonl"
    bad.write_text(lines[0] + "\n" + lines[1][:100] + "\n")
    with pytest.raises(DataFileError, match=r"tau2\.jsonl.*2"):
        load_pivots(bad, format="tau2")


@pytest.mark.parametrize(
    "fmt, rel",
    [
        ("tau-bench", "tool_use/raw/gpt-4o-airline.sample8.json"),
        ("tau2", "tool_use/tau2_telecom_gpt4o.jsonl"),
        ("nemo-gym", "nemo_gym_pivot_rows/swe_pivot.example.jsonl"),
        ("mini-swe-agent", "swe/raw/astropy__astropy-13579.traj.json"),
        ("swe-agent", "swe/swe_agent_demos.jsonl"),
    ],
)
def test_cli_convert_from_each_format(shared_data, tmp_path, fmt, rel):
    from pivot_cli import app

    out = tmp_path / "pivots.jsonl"
    result = CliRunner().invoke(app, ["convert", "--from", fmt, str(shared_data / rel), str(out), "--json"])
    assert result.exit_code == 0, result.output
    n = json.loads(result.output)["pivots"]
    assert n == len(load_pivots(out)) > 0


def test_audit_accepts_no_attack_on_real_pivots(converted):
    tool = [p for rel, ps in converted.items() if rel.startswith("tool_use") for p in ps][::61]
    swe = [p for rel, ps in converted.items() if rel.startswith("swe") for p in ps][::29]
    counts = Counter()
    for pivots, chains in (
        (tool, [list(ToolUseEnv.default_verifiers), ["exact_match"]]),
        (
            swe,
            [
                list(SweEnv.default_verifiers),
                ["turn_kind", "json_schema", "tool_name"],
                ["turn_kind", "swe_target_continuous"],
                ["exact_match"],
            ],
        ),
    ):
        for names in chains:
            rows = audit(names, pivots)
            assert audit_failures(rows) == [], (names, audit_failures(rows))
            counts.update({r["case"]: r["total"] for r in rows if "chain" in r})
    assert all(counts[c] > 0 for c in ("empty", "text_for_tool", "tool_junk_args", "many_calls", "echo_history"))


def _perturb(value, spoil: bool):
    """Same meaning (reordered keys, `3` -> `3.0`), or with the first id-like string spoiled."""
    if isinstance(value, dict):
        return {k: _perturb(value[k], spoil) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_perturb(v, spoil) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _spoil_id(args: dict) -> dict | None:
    for k, v in args.items():
        if isinstance(v, str) and any(c.isdigit() for c in v) and " " not in v:
            return {**args, k: v[:-1] + ("0" if v[-1] != "0" else "1")}
    return None


def test_real_tool_calls_reformatted_score_one_and_spoiled_ids_score_zero(converted):
    from pivot_envs import Message, ToolCall

    chain = VerifierChain.from_names(list(ToolUseEnv.default_verifiers))
    pivots = [p for p in converted["tool_use/tau_bench_airline_gpt4o.jsonl"] if p.expert.tool_calls]
    same_fail, spoiled_pass, spoiled = [], [], 0
    for p in pivots:
        calls = [(c, c.parsed_arguments()) for c in p.expert.tool_calls]
        same = Message("assistant", None, tuple(ToolCall(c.name, json.dumps(_perturb(a, False))) for c, a in calls))
        if not chain(p, same).accepted:
            same_fail.append(p.id)
        bad_args = _spoil_id(calls[0][1])
        if bad_args is not None and len(calls) == 1:
            spoiled += 1
            if chain(p, Message("assistant", None, (ToolCall(calls[0][0].name, json.dumps(bad_args)),))).accepted:
                spoiled_pass.append(p.id)
    assert same_fail == [] and spoiled_pass == [] and spoiled > 500


def test_real_bash_commands_with_split_flags_keep_category_and_target(converted):
    import re

    from pivot_envs import Message

    chain = VerifierChain.from_names(list(SweEnv.default_verifiers))
    flag = re.compile(r"```bash\n(grep|ls|nl|sed) -([a-zA-Z]{2,4}) ")
    checked, failed = 0, []
    for p in converted["swe/mini_swe_agent_gemini3pro_swebench_verified.jsonl"]:
        m = flag.search(p.expert.text)
        if not m:
            continue
        split = " ".join("-" + c for c in reversed(m.group(2)))
        text = (
            p.expert.text[: m.start()]
            + f"Same command, flags spelled apart.\n```bash\n{m.group(1)} {split} "
            + p.expert.text[m.end() :]
        )
        checked += 1
        if not chain(p, Message("assistant", text)).accepted:
            failed.append(p.id)
    assert checked > 50 and failed == []


@pytest.mark.parametrize("fmt", ["tau-bench", "tau2", "mini-swe-agent"])
def test_a_wrong_from_format_is_a_clear_error(shared_data, fmt):
    from pivot_envs import DataFileError

    with pytest.raises(DataFileError, match=r"swe_agent_demos\.jsonl.*1.*expected a .*got keys"):
        load_pivots(shared_data / "swe/swe_agent_demos.jsonl", format=fmt)
    with pytest.raises(DataFileError, match="expected a SWE-agent record"):
        load_pivots(shared_data / "tool_use/tau2_telecom_gpt4o.jsonl", format="swe-agent")


def test_swe_env_on_real_demo_selects_verifiers_by_name(shared_data):
    import gymnasium as gym

    data = str(shared_data / "swe/raw/swe_agent_str_replace_anthropic_demo.yaml")
    view = "swe-agent/swe_agent_str_replace_anthropic_demo#3"  # str_replace_editor view .../missing_colon.py

    def reward(env, completion):
        env.reset(options={"pivot_id": view})
        return env.step(completion)[1]

    same = '<tool_call>{"name": "bash", "arguments": {"command": "cat src/testpkg/missing_colon.py"}}</tool_call>'
    other = (
        '<tool_call>{"name": "str_replace_editor", "arguments": {"command": "view", '
        '"path": "/swe-agent-test-repo/pyproject.toml"}}</tool_call>'
    )
    default = gym.make("pivot/swe-v0", dataset=data)
    # swe_target decides on pivots without a sandbox; docker_shell and swe_tests stand aside there
    assert default.unwrapped.chain.names[-3:] == ["swe_target", "docker_shell", "swe_tests"]
    assert reward(default, same) == 1.0 and reward(default, other) == 0.0
    paper = gym.make("pivot/swe-v0", dataset=data, verifiers=["turn_kind", "json_schema", "tool_name"])
    assert reward(paper, other) == 1.0  # same category: the paper's verifier does not look at the target
    graded = gym.make("pivot/swe-v0", dataset=data, verifiers=["turn_kind", "swe_target_continuous"])
    assert reward(graded, other) == 0.5 and reward(graded, same) == 1.0
