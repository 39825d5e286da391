"""Real agents' runs (Terminal-Bench leaderboard logs, read by path: canary, tests only) -> pivots."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from pivot_core import Message, ToolCall, detect_format, load_pivots, shell_actions, write_pivots
from pivot_core.convert import agent_runs, atif, mini_swe_agent_log, openhands
from pivot_core.convert.mini_swe_agent_log import WIDTH, cell_len, strip_ansi, unwrap

RUNS = "terminal/agent_runs"


def _one(root: Path, pattern: str) -> Path:
    found = sorted(root.glob(pattern))
    assert found, pattern
    return found[0]


@pytest.fixture
def runs(shared_data: Path) -> Path:
    return shared_data / RUNS


# -- mini-swe-agent transcripts -------------------------------------------------------------------


def test_a_wrapped_command_is_joined_back_where_rich_broke_it(runs):
    log = _one(runs, "mini-swe-agent-claude-4-sonnet/cartpole-rl-training/*2025-08-13__19-44-27/sessions/agent.log")
    text = log.read_bytes().decode("utf-8", errors="replace")
    want = (
        "sed -i 's/states = torch.FloatTensor(\\[e\\[0\\] for e in batch\\]).to(self.device)/states = "
        "torch.FloatTensor(np.array([e[0] for e in batch])).to(self.device)/' agent.py"
    )
    assert cell_len(want) > WIDTH
    raw_lines = strip_ansi(text.replace("\r\n", "\n")).split("\n")
    assert want not in raw_lines  # the recorded transcript breaks it at 160 columns...
    assert any(len(line) <= WIDTH and want.startswith(line) and line.endswith(" ") for line in raw_lines)
    traj = mini_swe_agent_log.from_log(text, run_id="r")
    blocks = [b for m in traj.messages if m.role == "assistant" for b in shell_actions(m)]
    assert want in blocks  # ...and the parsed turn has it whole


def test_unwrap_keeps_breaks_rich_did_not_make():
    short = "echo hi "  # ends in a blank, but the next word would have fitted: a real line break
    assert unwrap([short, "done"]) == "echo hi \ndone"
    long = "x " * 79 + "y "  # 160 columns ending in a blank; "next" did not fit: rich broke here
    assert unwrap([long, "next"]) == long + "next"
    folded = "z" * WIDTH  # a word longer than the width is folded at exactly 160 columns
    assert unwrap([folded, "zz"]) == folded + "zz"


def test_a_timed_out_step_is_kept_as_recorded_and_its_command_checks_the_join(runs):
    log = _one(runs, "mini-swe-agent-claude-4-sonnet/blind-maze-explorer-5x5/*/sessions/agent.log")
    traj = mini_swe_agent_log.from_log(log.read_bytes().decode("utf-8", errors="replace"), run_id="r")
    timed = [m for m in traj.messages if m.role == "user" and "timed out and has been killed" in m.text]
    assert timed and "The last command <command>" in timed[0].text
    check = traj.context["wrap_check"]
    assert check["checked"] >= 1 and check["agreed"] == check["checked"]
    assert all(
        "\x1b" not in m.text and "Waiting for the LM" not in m.text and "LiteLLM" not in m.text for m in traj.messages
    )


def test_mini_swe_agent_pivots_keep_thought_and_one_block(runs):
    log = _one(runs, "mini-swe-agent-claude-4-sonnet/hello-world/*/sessions/agent.log")
    assert detect_format(log).name == "mini-swe-agent-log"
    pivots = load_pivots(log)
    assert (
        pivots and pivots[0].history[0].role == "system" and "exactly ONE bash code block" in pivots[0].history[0].text
    )
    assert pivots[0].history[1].text.startswith("Please solve this issue: Create a file called hello.txt")
    for p in pivots:
        assert (
            p.expert.text.startswith("THOUGHT:")
            and len(re.findall(r"```bash\s*\n(.*?)\n```", p.expert.text, re.S)) == 1
        )
        assert p.context["harness"] == "mini-swe-agent" and p.context["task_id"] == "hello-world"
        assert p.context["run"].startswith("hello-world.1-of-1.") and isinstance(p.context["is_resolved"], bool)
    assert pivots[1].history[-1].text.startswith("<returncode>")  # the observation, as the agent saw it


# -- OpenHands event streams ----------------------------------------------------------------------


def test_openhands_history_is_the_harness_chat(runs):
    log = _one(runs, "openhands-claude-4-sonnet/hello-world/*/agent-logs/*.json")
    assert detect_format(log).name == "openhands"
    pivots = load_pivots(log)
    assert len(pivots) == 12  # every agent action of the run
    first = pivots[0]
    assert [m.role for m in first.history] == ["system", "user"]
    assert first.history[0].text.startswith("You are OpenHands agent")
    assert {t["function"]["name"] for t in first.tools} >= {"execute_bash", "str_replace_editor", "think", "finish"}
    edit = first.expert.tool_calls[0]
    assert edit.name == "str_replace_editor" and edit.parsed_arguments()["command"] == "create"
    run = next(p for p in pivots if p.expert.tool_calls and p.expert.tool_calls[0].name == "execute_bash")
    obs = next(p for p in pivots if p.history[-1].tool_call_id == run.expert.tool_calls[0].id).history[-1]
    assert obs.role == "tool" and obs.text.startswith("/app\n[The command completed with exit code 0.]")
    assert obs.text.endswith("[Command finished with exit code 0]")  # CmdOutputObservation.to_agent_observation
    assert pivots[-1].expert.tool_calls[0].name == "finish"
    assert first.context["harness"] == "openhands" and first.context["is_resolved"] is True


def test_openhands_start_dir_is_read_from_the_run_not_the_image(runs):
    # OpenHands' Terminal-Bench runtime starts its shell in /app; prove-plus-comm's image works in
    # /workspace, so a replay that started there answered the agent's first `find .` differently
    log = _one(runs, "openhands-claude-4-sonnet/prove-plus-comm/*/agent-logs/*.json")
    events = json.loads(log.read_text())
    assert openhands.start_dir(events) == "/app"
    assert {p.context["start_dir"] for p in load_pivots(log)} == {"/app"}
    # a first command that moves the shell shows where it went, not where it started
    moved = [{"observation": "run", "extras": {"command": "cd /app/project && ls", "metadata": {"working_dir": "/x"}}}]
    assert openhands.start_dir(moved) is None
    assert openhands.start_dir([{"observation": "run", "extras": {"command": "ls", "metadata": {}}}] + moved) is None


def test_an_expert_command_that_never_finished_in_the_run_is_marked_not_comparable(runs):
    # mini-swe-agent killed `vim text_processor.py` at its timeout; OpenHands left its `vim` running
    # (exit -1): what a stopped command did is no reference for a candidate's effect
    import dataclasses

    from pivot_tasks._agent_runs import mark_unfinished_experts

    marked = {}
    for agent in ("mini-swe-agent-claude-4-sonnet", "openhands-claude-4-sonnet"):
        folder = _one(runs, f"{agent}/vim-terminal-task/*")
        pivots, _ = agent_runs.convert_runs(folder)
        pivots = [dataclasses.replace(p, context={**p.context, "sandbox": {"image": "i"}}) for p in pivots]
        for p in mark_unfinished_experts(pivots):
            if why := p.context["sandbox"].get("expert_unfinished"):
                marked[(agent, shell_actions(p.expert)[0] if shell_actions(p.expert) else "")] = why
    mini = marked.pop(("mini-swe-agent-claude-4-sonnet", "vim text_processor.py"))
    assert mini == "the expert's command timed out in the run and was killed"
    assert marked, "the OpenHands run's vim was still running when the agent moved on"
    assert {agent for agent, _ in marked} == {"openhands-claude-4-sonnet"}  # nothing else of mini's is marked
    assert all("exit -1" in why for why in marked.values())


def _editor_calls(log: Path):
    events = json.loads(log.read_text())
    results = {e["cause"]: e for e in events if "observation" in e}
    for e in events:
        if e.get("action") == "edit":
            call = e["tool_call_metadata"]["model_response"]["choices"][0]["message"]["tool_calls"][0]
            yield json.loads(call["function"]["arguments"]), results[e["id"]]["content"]


def test_openhands_edits_replay_as_the_same_file_change(runs, tmp_path):
    # grid-pattern-transform: a create into a missing folder (the editor's error), a create, a str_replace
    log = _one(runs, "openhands-claude-4-sonnet/grid-pattern-transform/*/agent-logs/*.json")
    seen = 0
    for args, recorded in _editor_calls(log):
        args = {
            **args,
            "path": args["path"].replace("/app/", f"{tmp_path}/app/").replace("/workspace/", f"{tmp_path}/ws/"),
        }
        (tmp_path / "app").mkdir(exist_ok=True)
        (command,) = shell_actions(
            Message("assistant", tool_calls=(ToolCall("str_replace_editor", json.dumps(args), "c"),))
        )
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
        assert (done.returncode != 0) == recorded.startswith("ERROR"), (args["command"], done.stdout, recorded[:200])
        if args["command"] == "str_replace":
            lines = Path(args["path"]).read_text().split("\n")
            shown = re.findall(r"^ +(\d+)\t(.*)$", recorded, re.M)
            assert shown and all(lines[int(n) - 1] == text for n, text in shown)
        seen += 1
    assert seen == 4
    assert not (tmp_path / "ws").exists()  # the editor makes no folder


def test_editor_view_changes_nothing_and_undo_is_not_replayed():
    view = Message("assistant", tool_calls=(ToolCall("str_replace_editor", '{"command": "view", "path": "/a"}', "c"),))
    undo = Message(
        "assistant", tool_calls=(ToolCall("str_replace_editor", '{"command": "undo_edit", "path": "/a"}', "c"),)
    )
    assert shell_actions(view) == [] and shell_actions(undo) == []


# -- ATIF ------------------------------------------------------------------------------------------


def test_atif_round_trip_keeps_the_chat(runs, tmp_path):
    log = _one(runs, "openhands-claude-4-sonnet/hello-world/*/agent-logs/*.json")
    pivots = load_pivots(log)
    out = tmp_path / "trajectory.json"
    assert write_pivots(pivots, out, format="atif") == 1
    doc = json.loads(out.read_text())
    assert doc["schema_version"].startswith("ATIF-v1") and doc["agent"]["name"] == "openhands"
    assert detect_format(out).name == "atif"
    back = load_pivots(out)
    assert [(p.expert.content, p.expert.tool_calls) for p in back] == [
        (p.expert.content, p.expert.tool_calls) for p in pivots
    ]
    assert [m.role for m in back[-1].history] == [m.role for m in pivots[-1].history]
    assert [m.text for m in back[-1].history] == [m.text for m in pivots[-1].history]


def test_atif_reader_on_a_harbor_style_document():
    doc = {
        "schema_version": "ATIF-v1.2",
        "session_id": "s1",
        "agent": {"name": "terminus-2", "version": "2.0", "model_name": "m"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "Create hello.txt"},
            {
                "step_id": 2,
                "source": "agent",
                "message": "Analysis: empty dir. Plan: write it.",
                "tool_calls": [
                    {
                        "tool_call_id": "c1",
                        "function_name": "bash_command",
                        "arguments": {"keystrokes": "echo hi > hello.txt\n"},
                    }
                ],
                "observation": {"results": [{"source_call_id": "c1", "content": "$ echo hi > hello.txt\n$"}]},
            },
        ],
    }
    traj = atif.from_atif(doc)
    assert traj.context["harness"] == "terminus-2" and traj.context["actions"] == 1
    # Terminus replied in JSON and read the terminal as its next user turn
    assert [m.role for m in traj.messages] == ["user", "assistant", "user"]
    turn = json.loads(traj.messages[1].content)
    assert turn["commands"] == [{"keystrokes": "echo hi > hello.txt\n", "duration": 1.0}]
    assert traj.messages[2].content == "$ echo hi > hello.txt\n$"
    doc["agent"]["name"] = "some-tool-agent"  # a function-calling agent: calls and tool results
    assert [m.role for m in atif.from_atif(doc).messages] == ["user", "assistant", "tool"]


# -- the folder and its report --------------------------------------------------------------------


def test_report_counts_runs_pivots_and_reasons(runs):
    pivots, report = agent_runs.convert_runs(runs / "openhands-claude-4-sonnet")
    assert report["runs"] == 44 and report["pivots"] == len(pivots) == report["actions"]
    missing = [s for s in report["skipped"] if "no agent log" in s["reason"]]
    assert len(missing) == len(report["skipped"]) == 15
    assert {p.context["harness"] for p in pivots} == {"openhands"}
    assert len({p.id for p in pivots}) == len(pivots)


def test_a_run_whose_agent_never_started_is_skipped_with_its_reason(runs):
    pivots, report = agent_runs.convert_runs(runs / "mini-swe-agent-claude-4-sonnet" / "chess-best-move")
    assert any("never started" in s["reason"] for s in report["skipped"])
    assert report["skipped_turns"].get(agent_runs.REJECTED, 0) >= 0


def test_openhands_detection_does_not_take_other_json():
    assert not openhands.detect({"role": "user", "content": "x"})
    assert not atif.detect({"steps": []})


HARBOR_ATIF = Path(__file__).parent / "data" / "harbor_terminus2_hello_world_timeout.trajectory.json"


def test_a_real_harbor_atif_file_reads_as_terminus_turns():
    # written by Harbor (terminus-2, its golden test outputs); source in pivot_core/data/SOURCES.md
    assert detect_format(HARBOR_ATIF).name == "atif"
    pivots = load_pivots(HARBOR_ATIF)
    assert len(pivots) == 3 and {p.context["harness"] for p in pivots} == {"terminus-2"}
    first = json.loads(pivots[0].expert.content)
    assert first["analysis"] == "Terminal is ready. Let me start by echoing hello world."
    assert first["plan"] == "Echo hello world to stdout."
    assert first["commands"] == [{"keystrokes": "echo 'Hello, world!'\n", "duration": 0.1}]
    assert pivots[0].history[0].text.startswith("You are an AI assistant tasked with solving command-line tasks")
    assert pivots[1].history[-1].role == "user" and "Hello, world!" in pivots[1].history[-1].text
    assert shell_actions(pivots[2].expert) == ["sleep 5\n"]


def test_a_real_harbor_atif_file_goes_out_and_back(tmp_path):
    pivots = load_pivots(HARBOR_ATIF)
    out = tmp_path / "again.trajectory.json"
    write_pivots(pivots, out, format="atif")
    back = load_pivots(out)
    assert [p.expert.content for p in back] == [p.expert.content for p in pivots]
    assert [m.text for m in back[-1].history] == [m.text for m in pivots[-1].history]


def test_runs_under_a_linked_folder_are_found_once_and_a_link_loop_ends(tmp_path):
    """A job folder is often a link to where the runs were written: `Path.rglob` never entered it."""
    real = tmp_path / "written" / "2025-11-19__10-22"
    (real / "hello-world.1").mkdir(parents=True)
    (real / "hello-world.1" / "results.json").write_text("{}")
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "latest").symlink_to(real)
    (real / "back").symlink_to(jobs)  # a link back up the tree
    (jobs / "again").symlink_to(real)  # two links to one folder
    runs = agent_runs.find_runs(jobs)
    assert [r.name for r in runs] == ["hello-world.1"], runs
    assert "no agent log" in runs[0].missing
