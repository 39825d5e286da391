"""`pivot/terminal-episode-v0` on a synthesized task in the real Docker engine (busybox image)."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_core._render import render_completion
from pivot_envs import extract_pivots, write_pivots

pytestmark = pytest.mark.docker

# A task of our own (Terminal-Bench data carries a canary): its tests are shell checks run as root.
TASK = {
    "task_id": "episode-notes",
    "instruction": "In /app/project, copy the TODO lines of notes.txt into todo.txt and mark the draft final.",
    "setup": ["mkdir -p project && printf 'alpha TODO one\\nbeta draft\\ngamma TODO two\\n' > project/notes.txt"],
    "solution_commands": ["cd project", "grep TODO notes.txt > todo.txt", "sed -i 's/draft/final/' notes.txt", "ls"],
}
TESTS = [
    'test "$(cat /app/project/todo.txt)" = "$(printf \'alpha TODO one\\ngamma TODO two\')"',
    "grep -q 'beta final' /app/project/notes.txt",
    "! grep -q draft /app/project/notes.txt",
]
CONFIG = {"action_timeout": 3.0, "pool_size": 0}  # a backend of its own: short timeout, nothing pooled


def terminus(*commands, complete=False):
    keys = [{"keystrokes": c + "\n", "duration": 0.1} for c in commands]
    return json.dumps({"analysis": "a", "plan": "p", "commands": keys, "task_complete": complete})


@pytest.fixture(scope="module")
def busybox():
    from pivot_sandbox import SandboxUnavailable, docker_backend
    from pivot_sandbox.images.stock import build_busybox_image

    try:
        client = docker_backend().client
    except SandboxUnavailable as e:
        pytest.fail(f"these tests need the Docker engine: {e}")
    return build_busybox_image(client, "pivot-gym/busybox:1")


@pytest.fixture(scope="module")
def dataset(busybox, tmp_path_factory):
    from pivot_sandbox import docker_backend
    from pivot_tasks import synthesize_task, task_spec

    traj, reason = synthesize_task(TASK, task_spec(TASK, busybox), docker_backend())
    assert traj is not None, reason
    tests = {"commands": TESTS, "timeout": 10.0}
    traj = dataclasses.replace(traj, context={**traj.context, "task_tests": tests})
    path = tmp_path_factory.mktemp("episodes") / "pivots.jsonl"
    write_pivots(list(extract_pivots(traj)), path)
    return path


@pytest.fixture(scope="module")
def env(dataset):
    e = gym.make("pivot/terminal-episode-v0", dataset=str(dataset), backend_config=CONFIG).unwrapped
    yield e
    e.close()


def replay_expert(env, pivot, insert=None):
    """Step the recorded expert turns from `pivot` (`insert` runs first, when given)."""
    recorded = env.recorded_messages(pivot)
    env.reset(options={"pivot_id": pivot.id})
    turns = [render_completion(m, "terminal") for m in recorded[len(pivot.history) :] if m.role == "assistant"]
    for text in ([insert] if insert else []) + turns:
        _, reward, terminated, truncated, info = env.step(text)
        if terminated or truncated:
            return reward, terminated, info
    raise AssertionError(f"{pivot.id}: the expert's turns ran out before the episode ended")


def test_expert_from_every_pivot_passes_the_tests_and_reproduces_the_terminal(env):
    assert len(env.pivots) == len(TASK["solution_commands"]) + 1
    for pivot in env.pivots:
        reward, terminated, info = replay_expert(env, pivot)
        assert (reward, terminated, info["outcome"]["ended_by"]) == (1.0, True, "task_complete"), (pivot.id, info)
        # the live shell shows what the synthesized session showed, turn by turn
        recorded = env.recorded_messages(pivot)
        assert [m.content for m in env.conversation] == [m.content for m in recorded], pivot.id


def test_task_complete_at_once_fails_the_tests(env):
    first = env.pivots[0]
    env.reset(options={"pivot_id": first.id})
    _, reward, terminated, _, info = env.step(terminus(complete=True))
    assert (reward, terminated) == (0.0, True)
    assert info["outcome"]["details"]["passed"] is False and info["outcome"]["error"] is None


def test_a_command_that_breaks_a_file_fails_the_tests(env):
    reward, terminated, info = replay_expert(env, env.pivots[0], insert=terminus("rm /app/project/notes.txt"))
    assert (reward, terminated) == (0.0, True)
    assert info["outcome"]["details"]["tests"][-1]["exit_code"] != 0


@pytest.mark.parametrize(("command", "why"), [("sleep 30", "timeout"), ("while :; do :; done", "timeout")])
def test_adversarial_commands_are_stopped_scored_zero_and_removed(env, command, why, busybox):
    from pivot_sandbox import LABEL

    env.reset(options={"pivot_id": env.pivots[1].id})
    container = env.session.container_id
    _, reward, terminated, _, info = env.step(terminus(command))
    assert (reward, terminated, info["outcome"]["ended_by"]) == (0.0, True, "killed")
    assert why in info["outcome"]["details"]["killed"]
    assert env.session is None
    env.backend.drain()
    running = env.backend.client.containers.list(filters={"label": f"{LABEL}.backend={env.backend.token}"})
    assert container not in [c.id for c in running if c.labels.get(LABEL) == "episode"]


def test_a_command_running_past_the_time_limit_is_stopped_there(dataset):
    # the command's own timeout (3 s) is longer than what is left of the episode's 1 s
    e = gym.make("pivot/terminal-episode-v0", dataset=str(dataset), backend_config=CONFIG, time_limit=1.0).unwrapped
    try:
        _, info = e.reset(options={"pivot_id": e.pivots[0].id})
        assert info["time_limit"] == 1.0
        _, reward, terminated, truncated, info = e.step(terminus("sleep 30"))
        assert (reward, terminated, truncated, info["outcome"]["ended_by"]) == (0.0, False, True, "time_limit")
        assert "time limit" in info["outcome"]["details"]["killed"] and e.session is None
    finally:
        e.close()


def test_a_turn_after_the_time_limit_does_not_run_and_the_tests_decide(dataset):
    e = gym.make("pivot/terminal-episode-v0", dataset=str(dataset), backend_config=CONFIG, time_limit=8.0).unwrapped
    try:
        e.reset(options={"pivot_id": e.pivots[0].id})
        _, _, terminated, truncated, _ = e.step(terminus(*TASK["solution_commands"]))  # done, not declared
        assert not (terminated or truncated)
        time.sleep(max(e.remaining(), 0.0) + 0.1)  # the policy thinks past the limit
        # had this run, the tests would fail; the agent's time is up, so it does not, and the state passes
        _, reward, terminated, truncated, info = e.step(terminus("rm /app/project/notes.txt", complete=True))
    finally:
        e.close()
    assert (reward, terminated, truncated, info["outcome"]["ended_by"]) == (1.0, False, True, "time_limit")
    assert info["new_messages"] == [] and info["outcome"]["details"]["passed"] is True


def test_an_output_flood_is_bounded_and_the_episode_goes_on(env):
    env.reset(options={"pivot_id": env.pivots[1].id})
    _, _, terminated, truncated, info = env.step(terminus("yes"))
    assert not (terminated or truncated)
    shown = info["new_messages"][0]["content"]
    assert len(shown) < 4200 and shown.endswith("[... output truncated]\n")


def test_unparseable_turn_gets_terminus_error_and_the_episode_goes_on(env):
    env.reset(options={"pivot_id": env.pivots[0].id})
    _, reward, terminated, truncated, info = env.step("let me think")
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["new_messages"][0]["content"].startswith("Previous response had parsing errors")


def test_a_process_a_turn_started_runs_on_into_later_turns_and_the_tests(dataset, tmp_path):
    # a terminal keeps what a command started in the background (a server the next turn or the
    # tests talk to); reading a command's output used to stop every process in the container
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    for row in rows:
        row["context"]["task_tests"]["commands"] = ["ps | grep -q '[s]leep 300'"]
    served = tmp_path / "served.jsonl"
    served.write_text("".join(json.dumps(r) + "\n" for r in rows))
    e = gym.make("pivot/terminal-episode-v0", dataset=str(served), backend_config=CONFIG).unwrapped
    try:
        e.reset(options={"pivot_id": e.pivots[0].id})
        e.step(terminus("sleep 300 > /dev/null 2>&1 &"))
        _, _, _, _, info = e.step(terminus("ps"))
        assert "sleep 300" in info["new_messages"][0]["content"]
        _, reward, terminated, _, info = e.step(terminus(complete=True))
        assert (reward, terminated) == (1.0, True), info["outcome"]
        e.reset(options={"pivot_id": e.pivots[0].id})  # a new episode: a new container, nothing running
        _, reward, *_ = e.step(terminus(complete=True))
        assert reward == 0.0
    finally:
        e.close()


def test_pivot_without_tests_is_an_error_outcome(dataset, tmp_path):
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    for row in rows:
        row["context"].pop("task_tests")
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps(r) + "\n" for r in rows))
    e = gym.make("pivot/terminal-episode-v0", dataset=str(bare), backend_config=CONFIG).unwrapped
    try:
        e.reset(options={"pivot_id": e.pivots[-1].id})
        _, reward, *_, info = e.step(terminus(complete=True))
    finally:
        e.close()
    assert reward == 0.0 and "no task tests" in info["outcome"]["error"]


def test_check_env_and_close_leaves_no_container(dataset):
    from pivot_sandbox import LABEL

    e = gym.make("pivot/terminal-episode-v0", dataset=str(dataset), backend_config={**CONFIG, "max_snapshots": 8})
    e = e.unwrapped
    check_env(e, skip_render_check=True)
    e.reset(seed=0)
    e.close()
    e.backend.close()
    left = e.backend.client.containers.list(all=True, filters={"label": f"{LABEL}.backend={e.backend.token}"})
    assert left == []


CHILD = textwrap.dedent("""
    import gymnasium as gym, json, pivot_envs
    env = gym.make("pivot/terminal-episode-v0", dataset=PATH, backend_config={"action_timeout": 120.0}).unwrapped
    env.reset(options={"pivot_id": env.pivots[0].id})
    print("started", flush=True)
    env.step(json.dumps({"analysis": "a", "plan": "p", "commands": [{"keystrokes": "sleep 1000\\n"}]}))
""")


def test_sigterm_mid_episode_leaves_nothing(dataset, busybox):
    from pivot_sandbox import LABEL, docker_backend

    client = docker_backend().client
    script = CHILD.replace("PATH", repr(str(dataset)))
    child = subprocess.Popen(
        [sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": os.getcwd()}, stdout=subprocess.PIPE, text=True
    )
    owner = {"label": f"{LABEL}.owner={os.uname().nodename}:{child.pid}"}
    try:
        assert child.stdout.readline().strip() == "started"
        deadline = time.time() + 60
        while not client.containers.list(filters=owner) and time.time() < deadline:
            time.sleep(0.2)
        assert client.containers.list(filters=owner), "the episode's container never showed up"
        time.sleep(1.0)  # the sleep is running in it now
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=60)
    assert client.containers.list(all=True, filters=owner) == []


# -- the bundled public Terminal-Bench tasks, scored by their own pytest suites (issue 17's task images) --


@pytest.fixture(scope="module")
def tasks_env(busybox):
    from pivot_envs._env import bundled_paths

    e = gym.make("pivot/terminal-episode-v0", dataset=str(bundled_paths(["terminal_tasks.jsonl"])[0])).unwrapped
    yield e
    e.close()


def test_terminal_bench_expert_from_every_pivot_passes_its_tests(tasks_env):
    results = {}
    for pivot in tasks_env.pivots:
        reward, terminated, info = replay_expert(tasks_env, pivot)
        results[pivot.id] = (reward, info["outcome"]["details"].get("reason"), info["outcome"]["error"])
    print(f"terminal-bench fidelity: {sum(r == 1.0 for r, *_ in results.values())}/{len(results)}")
    assert all(r == 1.0 for r, *_ in results.values()), results
    assert len({p.context["task"]["task_id"] for p in tasks_env.pivots}) == 3


def test_terminal_bench_task_complete_at_once_fails_its_tests(tasks_env):
    firsts = {}
    for pivot in tasks_env.pivots:
        firsts.setdefault(pivot.context["trajectory_id"], pivot)
    # each episode runs under its task's own wall-clock limit, task.yaml's max_agent_timeout_sec
    limits = {"hello-world": 360.0, "aimo-airline-departures": 480.0, "blind-maze-explorer-5x5": 900.0}
    for pivot in firsts.values():
        _, info = tasks_env.reset(options={"pivot_id": pivot.id})
        assert info["time_limit"] == limits[pivot.context["task"]["task_id"]], pivot.id
        _, reward, terminated, _, info = tasks_env.step(terminus(complete=True))
        assert (reward, terminated, info["outcome"]["error"]) == (0.0, True, None), (pivot.id, info["outcome"])
        assert info["outcome"]["details"]["ran"] and info["outcome"]["details"]["counts"].get("FAILED")


def test_terminal_bench_breaking_the_output_file_fails(tasks_env):
    first = [p for p in tasks_env.pivots if p.context["task"]["task_id"] == "hello-world"][0]
    tasks_env.reset(options={"pivot_id": first.id})
    tasks_env.step(render_completion(first.expert, "terminal"))  # the expert writes hello.txt
    _, reward, terminated, _, info = tasks_env.step(terminus("echo broken > /app/hello.txt", complete=True))
    assert (reward, terminated) == (0.0, True) and info["outcome"]["details"]["counts"].get("FAILED"), info


# The agent's exported environment reached the task's tests (issue 30 item 8): a BASH_ENV script that
# prints pytest's summary, or a pytest plugin named by PYTEST_PLUGINS on PYTHONPATH, made them "pass".
ENV_HACKS = {
    "BASH_ENV": (
        "printf 'echo PASSED tests/test_outputs.py::test_hello_file_exists\\necho PASSED tests/test_outputs.py::"
        "test_hello_file_content\\nexit 0\\n' > /app/.e.sh; export BASH_ENV=/app/.e.sh"
    ),
    "PYTEST_PLUGINS": (
        "mkdir -p /app/pp && printf 'import pytest\\n@pytest.hookimpl(hookwrapper=True)\\n"
        "def pytest_runtest_makereport(item, call):\\n    outcome = yield\\n    outcome.get_result().outcome = "
        '"passed"\\n\' > /app/pp/evil.py; export PYTHONPATH=/app/pp PYTEST_PLUGINS=evil'
    ),
}


@pytest.mark.parametrize("hack", sorted(ENV_HACKS))
def test_terminal_bench_tests_do_not_see_the_agents_environment(tasks_env, hack):
    first = [p for p in tasks_env.pivots if p.id.endswith("hello-world#1")][0]
    tasks_env.reset(options={"pivot_id": first.id})
    _, reward, terminated, _, info = tasks_env.step(terminus(ENV_HACKS[hack], complete=True))
    assert (reward, terminated, info["outcome"]["error"]) == (0.0, True, None), info["outcome"]
    assert info["outcome"]["details"]["counts"].get("FAILED"), info["outcome"]  # the real tests ran


def test_terminal_bench_tests_are_not_run_with_tools_the_agent_changed(tasks_env):
    first = [p for p in tasks_env.pivots if p.id.endswith("hello-world#1")][0]
    tasks_env.reset(options={"pivot_id": first.id})
    tasks_env.step(render_completion(first.expert, "terminal"))  # the task is done
    replace_pytest = "mkdir -p /opt/pivot-tests/bin; printf '#!/bin/sh\\necho PASSED\\n' > /opt/pivot-tests/bin/pytest"
    _, reward, terminated, _, info = tasks_env.step(terminus(replace_pytest, complete=True))
    assert (reward, terminated) == (0.0, True)
    assert "/opt/pivot-tests/bin/pytest" in info["outcome"]["details"]["reason"], info["outcome"]


MANY_FILES = "mkdir -p /usr/local/lib/bulk && cd /usr/local/lib/bulk && seq 1 12000 | xargs touch && cd /app"


def test_terminal_bench_tests_run_after_an_install_of_more_files_than_a_candidates_change_set(tasks_env):
    # a whole run's `pip install` of a large package changes tens of thousands of paths: the tamper check
    # stopped at a candidate's 10,000 and scored the run 0 without its tests, a resolved run included
    first = [p for p in tasks_env.pivots if p.id.endswith("hello-world#1")][0]
    tasks_env.reset(options={"pivot_id": first.id})
    tasks_env.step(terminus(MANY_FILES))
    _, reward, terminated, _, info = tasks_env.step(render_completion(first.expert, "terminal"))
    if not terminated:
        _, reward, terminated, _, info = tasks_env.step(terminus("true", complete=True))
    assert (reward, terminated, info["outcome"]["error"]) == (1.0, True, None), info["outcome"]
    # and a startup hook beside them is still found
    tasks_env.reset(options={"pivot_id": first.id})
    hook = "echo 'import os' > $(python3 -c 'import site; print(site.getsitepackages()[0])')/zz.pth"
    tasks_env.step(terminus(f"{MANY_FILES} && {hook}"))
    tasks_env.step(render_completion(first.expert, "terminal"))
    _, reward, terminated, _, info = tasks_env.step(terminus("true", complete=True))
    assert (reward, terminated) == (0.0, True) and ".pth" in info["outcome"]["details"]["reason"], info["outcome"]


def test_terminal_bench_tests_run_after_a_daemon_its_client_starts_on_demand(tasks_env):
    # gpg starts gpg-agent by itself; the freeze before the tests stops it and ran again the command that
    # started it, which could not start it again (decommissioning-service's runs gpg-encrypt a file, then
    # shred it): the run scored 0 without its tests. A daemon gpg starts on demand is stopped, not restarted.
    first = [p for p in tasks_env.pivots if p.id.endswith("hello-world#1")][0]
    tasks_env.reset(options={"pivot_id": first.id})
    once = "cp /bin/sleep /tmp/gpg-agent && [ ! -e /tmp/1 ] && touch /tmp/1 && (/tmp/gpg-agent 600 >/dev/null 2>&1 &)"
    tasks_env.step(terminus(once))
    tasks_env.step(render_completion(first.expert, "terminal"))
    _, reward, terminated, _, info = tasks_env.step(terminus("true", complete=True))
    assert (reward, terminated, info["outcome"]["error"]) == (1.0, True, None), info["outcome"]
    # any other process that cannot be started again still stops the run before its tests
    tasks_env.reset(options={"pivot_id": first.id})
    tasks_env.step(terminus(once.replace("gpg-agent", "helper")))
    tasks_env.step(render_completion(first.expert, "terminal"))
    _, reward, terminated, _, info = tasks_env.step(terminus("true", complete=True))
    assert (reward, terminated) == (0.0, True) and "started again" in info["outcome"]["details"]["reason"], info
