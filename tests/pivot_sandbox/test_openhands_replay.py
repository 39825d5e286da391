"""OpenHands runs replayed with what its runtime left in /app, and its IPython cells in a kernel-equivalent process.

OpenHands' local runtime (Terminal-Bench's agent) makes /app group-writable, writes its
`.git_config` there and exports `GIT_CONFIG`; Terminal-Bench installs OpenHands into `/app/.venv`.
An agent's first `ls -la /app` shows them, and the replay makes them before the history
(`pivot_core._openhands_runtime`). Its IPython cells run in one kernel that keeps their names; the
replay runs each as a process whose names live in the sandbox's state folder (`pivot_core._ipython`).

The runs here are OpenHands event streams (`agent-logs/<id>.json` beside `results.json`) on the
bundled CI task hello-world, written in the format OpenHands records; each is converted with
`--tasks-dir --check-replay` and replayed on every backend this machine can run.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import pytest

from pivot_core import Message, Pivot, ToolCall, convert_runs, ipython_refusal, recorded_cell, runtime_files
from pivot_sandbox import usable_backends
from pivot_tasks import check_replay, sandbox_pivots
from verifiers_plugins import get_verifier, sandbox_backend

BACKENDS = [name for name, why in usable_backends().items() if why is None]
TASKS = Path(str(resources.files("pivot_core") / "data" / "terminal_tasks"))
TRAILER = "\n[Jupyter current working directory: /app]\n[Jupyter Python interpreter: /app/.venv/bin/python3]"
# what OpenHands' first `ls -la /app` showed on this image: the runtime's chmod, .git_config and .venv
LISTING = """total 16
drwxrwxr-x 1 root root 4096 Jul 11 22:55 .
drwxr-xr-x 1 root root 4096 Jul 11 22:55 ..
-rw-r--r-- 1 root root   58 Jul 11 22:55 .git_config
drwxr-xr-x 7 root root 4096 Jul 11 22:55 .venv"""
GIT_CONFIG = "[user]\n\tname = openhands\n\temail = openhands@all-hands.dev\n"
CELL = "with open('/app/hello.txt', 'w') as f:\n    f.write('Hello, world!\\n')\nnote = 'written by a cell'"
LIST_RUN = [
    ("execute_bash", {"command": "ls -la /app"}, LISTING, 0),
    # read off OpenHands' tmux pane: the file's tabs are spaces to the next 8-column stop
    (
        "execute_bash",
        {"command": "cat .git_config && printenv GIT_CONFIG"},
        GIT_CONFIG.expandtabs(8) + "/app/.git_config",
        0,
    ),
    ("execute_bash", {"command": "echo 'Hello, world!' > /app/hello.txt"}, "", 0),
    ("finish", {"message": "done", "task_completed": "true"}, None, None),
]
CELL_RUN = [
    ("execute_ipython_cell", {"code": CELL}, "[Code executed successfully with no output]" + TRAILER, None),
    ("execute_ipython_cell", {"code": "print(note)"}, "written by a cell" + TRAILER, None),
    ("execute_bash", {"command": "cat /app/hello.txt"}, "Hello, world!", 0),
    ("finish", {"message": "done", "task_completed": "true"}, None, None),
]
ACTIONS = {
    "execute_bash": "run",
    "execute_ipython_cell": "run_ipython",
    "finish": "finish",
    "str_replace_editor": "read",
}
# the editor's view of / lists the runtime's entries of /app, not their modes
VIEW_ROOT = "Here's the files and directories up to 2 levels deep in /, excluding hidden items:\n/app/\n"
VIEW_ROOT += "/app/.git_config\n/app/.venv/\n/bin/"


def events(steps) -> list[dict]:
    """An OpenHands event stream: the system prompt, the task, then each call and what came back."""
    out = [
        {"id": 0, "source": "agent", "action": "system", "args": {"content": "You are OpenHands."}, "timestamp": "t"},
        {"id": 1, "source": "user", "action": "message", "args": {"content": "Create hello.txt"}, "timestamp": "t"},
    ]
    for k, (tool, args, output, code) in enumerate(steps):
        call = {"id": f"call_{k}", "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
        response = {"id": f"r{k}", "choices": [{"message": {"role": "assistant", "content": "", "tool_calls": [call]}}]}
        meta = {"tool_call_id": f"call_{k}", "model_response": response}
        action = {"id": 2 * k + 2, "source": "agent", "action": ACTIONS[tool], "args": args, "timestamp": "t"}
        out.append({**action, "tool_call_metadata": meta})
        if output is None:
            continue
        extras = {"command": args.get("command"), "metadata": {"exit_code": code, "working_dir": "/app"}}
        observation = {"id": 2 * k + 3, "source": "agent", "observation": ACTIONS[tool], "cause": 2 * k + 2}
        out.append({**observation, "content": output, "extras": extras if code is not None else {}, "timestamp": "t"})
    return out


def write_run(root: Path, name: str, steps) -> Path:
    """A Terminal-Bench trial folder of hello-world: `results.json` and `agent-logs/<id>.json`; the folder."""
    trial = root / "hello-world" / name
    (trial / "agent-logs").mkdir(parents=True)
    results = {"task_id": "hello-world", "trial_name": name, "is_resolved": True, "instruction": "Create hello.txt"}
    (trial / "results.json").write_text(json.dumps(results))
    (trial / "agent-logs" / "run.json").write_text(json.dumps(events(steps)))
    return trial


def replayed(trial: Path, backend: str, **context):
    """The run's pivots converted, sandboxed and replay-checked on `backend` (`context` overrides its keys)."""
    pivots, _ = convert_runs(trial)
    pivots = [dataclasses.replace(p, context={**p.context, **context}) for p in pivots]
    sandboxed, report = sandbox_pivots(pivots, TASKS)
    assert report["sandboxed"] == len(pivots) == 4, report
    return check_replay(sandboxed, backend=sandbox_backend(backend, memory="2g", pids=1024, replay_timeout=900.0))


def _after(pivots, tool: str, text: str) -> Pivot:
    """The pivot whose expert calls `tool` with `text` in its arguments."""
    return next(p for p in pivots if any(c.name == tool and text in c.arguments for c in p.expert.tool_calls))


def _call(tool: str, **args) -> Message:
    return Message("assistant", tool_calls=(ToolCall(tool, json.dumps(args), "c1"),))


def test_the_first_listing_tells_what_the_runtime_left_and_a_cell_magic_is_refused():
    files = runtime_files(events(LIST_RUN), "/app")
    assert files == [
        {"path": "/app", "mode": "775"},
        {"path": "/app/.git_config", "mode": "644", "kind": "file"},
        {"path": "/app/.venv", "mode": "755", "kind": "dir"},
    ]
    # an agent that made its own .venv before listing: that one is the agent's, not the runtime's
    own = [("execute_bash", {"command": "python3 -m venv .venv"}, "", 0), *LIST_RUN]
    assert [f["path"] for f in runtime_files(events(own), "/app")] == ["/app", "/app/.git_config"]
    # the first look is the editor's view of /: the directory's mode comes from the first `ls -la` after it
    view = [("str_replace_editor", {"command": "view", "path": "/"}, VIEW_ROOT, None), *LIST_RUN]
    assert runtime_files(events(view), "/app") == files
    assert ipython_refusal("%timeit sum(range(9))") == "the magic %timeit is not replayed"
    assert ipython_refusal("%pip install numpy\n!ls") is None
    failed = "---------------------------------------------------------------------------\nModuleNotFoundError"
    failed += "                       Traceback (most recent call last)\nCell In[1], line 1\n----> 1 import torch\n\n"
    assert recorded_cell(failed + "ModuleNotFoundError: No module named 'torch'" + TRAILER) == (
        1,
        "ModuleNotFoundError: No module named 'torch'",
    )


def test_the_directorys_mode_shows_as_the_parent_of_a_folder_listed_under_it():
    # new-encrypt-command: the run never listed /app itself; `ls -la data/` from /app showed its mode as `..`
    data = "total 24\ndrwxr-xr-x 1 root root 4096 Jul 11 22:03 .\ndrwxrwxr-x 1 root root 4096 Jul 11 22:05 ..\n"
    data += "-rw-r--r-- 1 root root   31 Jul  6 17:27 sample1.txt"
    run = [("execute_bash", {"command": "echo 'Original files:' && ls -la data/"}, data, 0), *LIST_RUN[2:]]
    assert runtime_files(events(run), "/app") == [{"path": "/app", "mode": "775"}]
    # a folder deeper down, or beside /app: its `..` is another directory
    for where in ("data/sub", "/opt/data"):
        other = [("execute_bash", {"command": f"ls -la {where}"}, data, 0), *LIST_RUN[2:]]
        assert runtime_files(events(other), "/app") == []


def openhands_divergence(command: str, recorded: str, stdout: bytes) -> int | None:
    """The turn where an OpenHands `execute_bash` call that recorded `recorded` diverges from a replay printing
    `stdout` (None: the same output)."""
    from pivot_tasks._replay_check import first_divergence, recorded_steps

    call = Message("assistant", tool_calls=(ToolCall("execute_bash", json.dumps({"command": command}), "c1"),))
    answer = Message("tool", recorded, tool_call_id="c1", extra={"recorded": {"output": recorded, "exit_code": 0}})
    (step,) = recorded_steps([call, answer], {"harness": "openhands"})
    raw = SimpleNamespace(killed=None, exit_code=0, stdout=stdout)
    found = first_divergence([step], [[(raw, "/app")], [(raw, "/app")]])
    return found[0] if found else None


def test_a_tab_read_off_openhands_tmux_pane_as_spaces_is_the_same_output():
    # git-workflow-hack: `git init` prints `hint:\tgit config ...`; OpenHands read it off its tmux pane as two
    # spaces (no tab in any of the public runs' command outputs), and the replay diverged there
    recorded = "hint:   git branch -m <name>\nInitialized empty Git repository in /app/site/.git/"
    found = functools.partial(openhands_divergence, "git init", recorded)
    assert found(b"hint: \tgit branch -m <name>\nInitialized empty Git repository in /app/site/.git/\n") is None
    # spaces are not tabs the other way round, and the rest of the line still counts
    assert found(b"hint: git branch -m <name>\nInitialized empty Git repository in /app/site/.git/\n") == 0
    assert found(b"hint: \tgit branch -m <name>\nReinitialized existing Git repository in /app/site/.git/\n") == 0


def test_the_echo_of_a_multi_line_command_in_openhands_output_is_not_what_it_printed():
    # git-workflow-hack: `git commit -m "title<newline>- body"`: the tmux pane held the command's lines before
    # git's own output, and OpenHands kept them (13 of the 24 multi-line commands of the public runs)
    command = 'git commit -m "Initial commit\n\n- Add the site"'
    printed = "Author identity unknown\n\nfatal: unable to auto-detect email address"

    def found(recorded: str, stdout: str) -> int | None:
        return openhands_divergence(command, recorded, stdout.encode())

    echo = 'git commit -m "Initial commit\n- Add the site"\n'  # the pane left the blank line out
    assert found(echo + printed, printed) is None
    assert found(printed, printed) is None  # the other 11 kept none
    # what follows the echo is still compared, and an output that only starts like the command is not an echo
    assert found(echo + printed, "Author identity unknown\n\nfatal: other") == 0
    assert found('git commit -m "Initial commit\n' + printed, printed) == 0


def test_a_divergence_whose_recorded_output_lists_the_runtime_venv_says_so():
    # unseen split, fix-pandas-version: `find /app -name setup.py ...` listed files of OpenHands' own
    # /app/.venv in the run; the reason named only the command, not why it cannot be faithful
    from pivot_tasks._replay_check import Step, _explained

    listed = "/app/.venv/lib/python3.13/site-packages/openhands/pyproject.toml\n/app/src/setup.py"
    found = (10, "output differs from the recorded one: 'find /app -name setup.py'")
    turn, reason = _explained(found, [Step(10, ("find /app -name setup.py",), 0, listed)])
    assert turn == 10 and reason.startswith(found[1]) and "lists files of /app/.venv" in reason, reason
    # an output that shows nothing of it keeps the reason as it was
    assert _explained(found, [Step(10, ("find /app -name setup.py",), 0, "/app/src/setup.py")]) == found


@pytest.mark.docker
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_first_listing_of_app_replays_faithful_with_the_runtime_files(tmp_path, backend, monkeypatch):
    from typer.testing import CliRunner

    from pivot_cli import app

    monkeypatch.setenv("PIVOT_SANDBOX", backend)  # what `--check-replay` replays on
    trial = write_run(tmp_path / "runs", "hello-world.1-of-1.listing", LIST_RUN)
    out = tmp_path / "listing.jsonl"
    args = ["convert", "--from", "openhands", str(trial / "agent-logs" / "run.json"), str(out)]
    result = CliRunner().invoke(app, [*args, "--tasks-dir", str(TASKS), "--check-replay", "--json"])
    assert result.exit_code == 0, result.stdout
    report = json.loads(result.stdout)
    assert (report["pivots"], report["sandboxed"], report["faithful"], report["diverged"]) == (4, 4, 4, {}), report
    pivots = [Pivot.from_json(json.loads(line)) for line in out.read_text().splitlines()]
    # the runtime's files are part of the restored state, the expert's and a candidate's alike
    pivot = _after(pivots, "execute_bash", "Hello")
    expert, other = get_verifier("docker_shell", backend=backend).verify_batch(
        pivot, [pivot.expert, _call("execute_bash", command="echo 'Hello world' > /app/hello.txt")]
    )
    assert expert.accepted, expert.reason
    assert other.applicable and not other.accepted, other


@pytest.mark.docker
@pytest.mark.parametrize("backend", BACKENDS)
def test_without_the_runtime_files_the_first_listing_diverges(tmp_path, backend):
    checked, report = replayed(write_run(tmp_path, "hello-world.1-of-1.bare", LIST_RUN), backend, runtime_files=[])
    (where,) = report["divergences"]
    assert where["reason"] == "output differs from the recorded one: 'ls -la /app'", where


@pytest.mark.docker
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_ipython_cell_replays_and_its_file_is_seen_by_the_next_command(tmp_path, backend):
    checked, report = replayed(write_run(tmp_path, "hello-world.1-of-1.cell", CELL_RUN), backend)
    assert (report["faithful"], report["unfaithful"], report["diverged"]) == (4, 0, {}), report
    assert all(p.context["replay"] == {"faithful": True} and p.context["sandbox"] for p in checked)
    verifier = get_verifier("docker_shell", backend=backend)
    # after the cells: the file the first wrote is there for the expert's `cat`
    pivot = _after(checked, "execute_bash", "cat /app/hello.txt")
    (expert,) = verifier.verify_batch(pivot, [pivot.expert])
    assert expert.accepted, expert.reason
    # at the first cell: the same file written with other names is the same effect (the kernel's
    # names are no file change); other content is not
    pivot = _after(checked, "execute_ipython_cell", "note =")
    same = "open('/app/hello.txt', 'w').write('Hello, world!\\n');"
    other = "open('/app/hello.txt', 'w').write('Hello world\\n');"
    expert, renamed, wrong = verifier.verify_batch(
        pivot, [pivot.expert, _call("execute_ipython_cell", code=same), _call("execute_ipython_cell", code=other)]
    )
    assert expert.accepted and renamed.accepted, (expert.reason, renamed.reason)
    assert wrong.applicable and not wrong.accepted, wrong


@pytest.mark.docker
def test_an_episode_runs_the_cells_and_answers_as_the_kernel_did(tmp_path, docker_client):
    import gymnasium as gym

    import pivot_envs  # noqa: F401  (registers the env ids)
    from pivot_core import write_pivots
    from pivot_envs import render_completion

    pivots, _ = convert_runs(write_run(tmp_path, "hello-world.1-of-1.episode", CELL_RUN))
    sandboxed, _ = sandbox_pivots(pivots, TASKS)
    path = tmp_path / "cells.jsonl"
    write_pivots(sandboxed, path)
    env = gym.make("pivot/terminal-episode-v0", dataset=str(path)).unwrapped
    try:
        first = min(env.pivots, key=lambda p: p.context["turn_index"])
        env.reset(options={"pivot_id": first.id})
        recorded = [m for m in env.recorded_messages(first)[len(first.history) :] if m.role == "tool"]
        shown = []
        turns = [p.expert for p in sorted(env.pivots, key=lambda p: p.context["turn_index"])]
        for message in turns:
            _, _, terminated, truncated, info = env.step(render_completion(message, "terminal"))
            shown.extend(m["content"] for m in info["new_messages"])
            if terminated or truncated:
                break
        # the second cell reads the name the first made; the command sees the file it wrote
        assert shown[1].startswith("written by a cell\n[Jupyter current working directory: /app]"), shown[1]
        assert shown[2].startswith("Hello, world!"), shown[2]
        assert [s.split("\n")[0] for s in shown[:2]] == [m.text.split("\n")[0] for m in recorded[:2]]
        assert info["outcome"]["reward"] == 1.0, info["outcome"]
    finally:
        env.close()
