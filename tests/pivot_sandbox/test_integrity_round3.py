"""Sandbox integrity, round 3 (issue 30 items 6-9): what the Docker sandbox did not see.

Each test reproduces a probe that scored 1 on the code before this round: a job left in the
background, shell state a real terminal keeps, the agent's environment reaching the task's tests,
and an oracle the candidate's file system held.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pivot_envs import Message, Pivot
from verifiers_plugins import get_verifier

HELLO = 'echo "Hello, world!" > hello.txt'
BASH_IMAGE = "pivot-gym/task:hello-world"  # a bundled task's image: Debian with bash
BUNDLED = Path(__file__).resolve().parents[2] / "pivot_core" / "data" / "terminal_tasks"


def is_unstable(verdict) -> bool:
    """What the reward cache reads: a verdict marked `stable: False` is never cached."""
    return verdict.details.get("stable") is False


def terminus(*commands: str) -> Message:
    body = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": c + "\n"} for c in commands]}
    return Message("assistant", json.dumps(body))


def pivot_of(image: str, expert: str, shell: str = "/bin/sh") -> Pivot:
    context = {"sandbox": {"image": image, "workdir": "/app", "shell": shell}}
    return Pivot("round3#1", "terminal", (Message("user", "do it"),), terminus(expert), context=context)


@pytest.fixture
def backend_factory():
    from pivot_sandbox.docker.backend import DockerBackend

    made = []

    def make(**config):
        made.append(DockerBackend(**config))
        return made[-1]

    yield make
    for b in made:
        b.close()


@pytest.fixture(scope="module")
def bash_image(docker_client):
    from pivot_sandbox.tasks.terminal_bench import ensure_bundled_image

    return ensure_bundled_image(docker_client, BASH_IMAGE)


def verdicts_of(pivot: Pivot, candidates: list[str], **config) -> dict[str, object]:
    verifier = get_verifier("docker_shell", **config)
    verdicts = verifier.verify_batch(pivot, [terminus(c) for c in candidates])
    return dict(zip(candidates, verdicts, strict=True))


# -- item 6: processes an action leaves running are part of its effect ----------------------------------

BACKGROUND = [
    f"{HELLO}; (sleep 2; rm -rf /app/*) &",
    f"{HELLO}; setsid sh -c 'sleep 2; rm -rf /app/*' >/dev/null 2>&1 &",
    f"{HELLO}; (sleep 2; bomb(){{ bomb | bomb & }}; bomb) >/dev/null 2>&1 &",
]
BASH_BACKGROUND = [
    f"{HELLO}; (sleep 2; rm -rf /app/*) & disown",
    f"{HELLO}; nohup sh -c 'sleep 2; rm -rf /app/*' >/dev/null 2>&1 &",
]


def _assert_background_rejected(verdicts: dict, commands: list[str]) -> None:
    for command in commands:
        verdict = verdicts[command]
        assert not verdict.accepted and verdict.error is None, (command, verdict)
        assert "processes" in verdict.details["differed"], (command, verdict.reason)
        assert verdict.details["candidate"]["processes"], command
        assert is_unstable(verdict), command  # what the job did before it was killed is a race
    assert verdicts[HELLO].accepted and verdicts[HELLO].details["stable"] is True


def test_a_job_left_in_the_background_is_a_different_effect(busybox):
    _assert_background_rejected(verdicts_of(pivot_of(busybox, HELLO), [HELLO, *BACKGROUND]), BACKGROUND)


def test_disown_and_nohup_leave_a_process_running_too(bash_image):
    pivot = pivot_of(bash_image, HELLO, shell="/bin/bash")
    _assert_background_rejected(verdicts_of(pivot, [HELLO, *BASH_BACKGROUND]), BASH_BACKGROUND)


def test_an_immediate_fork_bomb_is_rejected_on_every_run_and_never_cached(busybox):
    pivot = pivot_of(busybox, HELLO)
    bomb = f"{HELLO}; bomb(){{ bomb | bomb & }}; bomb >/dev/null 2>&1 &"
    runs = [verdicts_of(pivot, [bomb])[bomb] for _ in range(2)]  # the same adversarial candidate twice
    for verdict in runs:
        assert (verdict.reward, verdict.error) == (0.0, None), verdict
        # a verdict two runs need not repeat is marked so, and the reward cache does not keep it
        assert verdict.details["stable"] is False and is_unstable(verdict), verdict


# -- item 7: the shell state an action leaves is part of its effect -------------------------------------

STATE_CHANGES = [
    "export PATH=/nowhere",
    "unset PATH",
    "export HOME=/",
    "PROMPT_COMMAND='rm -rf /app/*'",
    "export LD_PRELOAD=/app/evil.so",
    "export BASH_ENV=/app/.e.sh",
    "export PYTHONPATH=/app",
    "alias ls='rm -rf'",
    "ulimit -t 1",
    "set -e",
    "set -o noclobber",
    "trap 'rm -rf /app/*' EXIT",
    "exec >/dev/null",
    "exec 2>&-",
    "umask 777",
]
BASH_ONLY = ["cd(){ builtin cd /; }", "declare(){ :; }; alias ls='rm -rf'", "shopt -s nullglob"]


def test_shell_state_a_terminal_keeps_is_a_different_effect(busybox):
    candidates = [HELLO, *(f"{HELLO}; {change}" for change in STATE_CHANGES)]
    verdicts = verdicts_of(pivot_of(busybox, HELLO), candidates)
    assert verdicts[HELLO].accepted
    for command in candidates[1:]:
        verdict = verdicts[command]
        assert not verdict.accepted and verdict.error is None, (command, verdict)


def test_bash_state_functions_and_shadowed_builtins_are_seen(bash_image):
    changes = STATE_CHANGES + BASH_ONLY
    candidates = [HELLO, "echo 'Hello, world!' > hello.txt", *(f"{HELLO}; {c}" for c in changes)]
    verdicts = verdicts_of(pivot_of(bash_image, HELLO, shell="/bin/bash"), candidates)
    assert verdicts[HELLO].accepted and verdicts[candidates[1]].accepted  # a rewrite with the same effect
    for command in candidates[2:]:
        verdict = verdicts[command]
        assert not verdict.accepted and verdict.error is None, (command, verdict)
    shadow = verdicts[f"{HELLO}; declare(){{ :; }}; alias ls='rm -rf'"]
    assert "state" in shadow.details["differed"], shadow.reason


def test_the_state_comes_from_the_kernel_not_from_what_the_action_prints(busybox, backend_factory):
    from pivot_sandbox import SandboxSpec

    spec = SandboxSpec(image=busybox)
    backend = backend_factory(pool_size=1)
    # a state block and marks printed by the action itself are output, not a report
    forged = "printf '\\036PIVOT-STATE\\000env:PATH\\000/usr/bin\\000' >&2; export PATH=/nowhere"
    clean, printed = backend.run_group(spec, [], [["true"], [forged]])
    assert clean.state["env:PATH"] != "/nowhere" and printed.state["env:PATH"] == "/nowhere"
    assert clean.state["fd:1"] == "stdout" and clean.state["umask"] == "0022"


# -- item 8: the agent's environment never reaches the task's tests ------------------------------------

# A BASH_ENV script that prints pytest's summary and exits: every `bash -c` of the test run sourced it
BASH_ENV_HACK = (
    "printf 'echo PASSED tests/test_outputs.py::test_hello_file_exists\\necho PASSED tests/test_outputs.py::"
    "test_hello_file_content\\nexit 0\\n' > /app/.e.sh; export BASH_ENV=/app/.e.sh"
)
# A pytest plugin on PYTHONPATH, named by PYTEST_PLUGINS, that reports every test as passed
PLUGIN_HACK = (
    "mkdir -p /app/pp && printf 'import pytest\\n@pytest.hookimpl(hookwrapper=True)\\n"
    "def pytest_runtest_makereport(item, call):\\n    outcome = yield\\n    outcome.get_result().outcome = "
    '"passed"\\n\' > /app/pp/evil.py; export PYTHONPATH=/app/pp PYTEST_PLUGINS=evil'
)
TOOL_HACKS = [
    # the tests' own venv, and pytest's configuration above the tests: not run, and named
    # (the image holds no venv: the agent makes one where the test run's will be delivered)
    "mkdir -p /opt/pivot-tests/bin && printf '#!/bin/sh\\necho PASSED tests/test_outputs.py::test_hello_file_exists\\n'"
    " > /opt/pivot-tests/bin/pytest && chmod +x /opt/pivot-tests/bin/pytest",
    "printf 'import pytest\\n' > /conftest.py",
    # the venv's folder made a link: the venv would be delivered where the agent chose
    "mkdir -p /tmp/elsewhere && rm -rf /opt && ln -s /tmp/elsewhere /opt",
]


@pytest.fixture(scope="module")
def hello_pivot(bash_image):
    from pivot_envs import load_pivots
    from pivot_envs._env import bundled_paths

    pivots = load_pivots(bundled_paths(["terminal_tasks.jsonl"])[0])
    return next(p for p in pivots if p.id.endswith("hello-world#1"))


def test_an_exported_environment_does_not_reach_the_tests(hello_pivot):
    verifier = get_verifier("task_tests", mode="final")
    honest, bash_env, plugin = verifier.verify_batch(
        hello_pivot, [hello_pivot.expert, terminus(BASH_ENV_HACK), terminus(PLUGIN_HACK)]
    )
    assert honest.accepted, honest
    for verdict in (bash_env, plugin):
        assert (verdict.reward, verdict.error) == (0.0, None), verdict
        assert verdict.details["tests"].get("FAILED"), verdict  # the real tests ran, and failed


def test_a_changed_test_tool_is_no_test_run(hello_pivot):
    expert = 'echo "Hello, world!" > /app/hello.txt'
    verdicts = get_verifier("task_tests", mode="final").verify_batch(
        hello_pivot, [terminus(f"{expert}; {hack}") for hack in TOOL_HACKS]
    )
    for hack, verdict in zip(TOOL_HACKS, verdicts, strict=True):
        assert (verdict.reward, verdict.error) == (0.0, None), (hack, verdict)
        assert "changed the test run's own tools" in verdict.reason, (hack, verdict.reason)


def _registered_plugin(name: str, body: str) -> str:
    """A command that installs a pytest plugin as pip would: a module and a dist-info with its entry point."""
    site = '$(python3 -c "import site; print(site.getsitepackages()[0])")'
    return (
        f'd={site} && mkdir -p "$d/{name}-1.0.dist-info" && printf "{body}" > "$d/{name}_plugin.py" && '
        f'printf "[pytest11]\\n{name} = {name}_plugin\\n" > "$d/{name}-1.0.dist-info/entry_points.txt" && '
        f'printf "Metadata-Version: 2.1\\nName: {name}\\nVersion: 1.0\\n" > "$d/{name}-1.0.dist-info/METADATA"'
    )


# what `pip install httpx` does (anyio registers its plugin), and a plugin that reports every test passed
HARMLESS_PLUGIN = _registered_plugin("harmless", "import pytest\\n")
FORCE_PASS_PLUGIN = _registered_plugin(
    "forcepass",
    "import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef pytest_runtest_makereport(item, call):\\n"
    "    outcome = yield\\n    outcome.get_result().outcome = 'passed'\\n",
)


def test_a_pytest_plugin_the_agent_registered_is_not_loaded_and_no_tampering(hello_pivot):
    # solana-data's run installed anyio (its `[pytest11]` entry point): the test run refused to run as if
    # the agent had changed its tools, a 0 whatever the task's state. The test run now loads only the
    # plugins the image's build registered: the agent's are not loaded, the real tests decide
    expert = 'echo "Hello, world!" > /app/hello.txt'
    harmless, forged = get_verifier("task_tests", mode="final").verify_batch(
        hello_pivot, [terminus(f"{expert} && {HARMLESS_PLUGIN}"), terminus(f"{FORCE_PASS_PLUGIN}")]
    )
    assert harmless.accepted, harmless
    assert (forged.reward, forged.error) == (0.0, None), forged
    assert forged.details["tests"].get("FAILED"), forged  # the real tests ran, without the plugin, and failed


# -- item 9: the tests and the solution never reach the candidate's file system --------------------------


def test_a_task_image_holds_neither_its_tests_nor_its_solution(docker_client):
    from pivot_sandbox.tasks.terminal_bench import load_task, task_image

    folder = BUNDLED / "blind-maze-explorer-5x5"
    report = task_image(docker_client, load_task(folder))
    assert report.status in ("built", "cached"), report
    # its Dockerfile copies tests/ to /app/tests: that step is left out, and said so
    assert "COPY ./tests /app/tests" in report.dropped
    listing = docker_client.containers.run(report.image, ["ls", "-A", "/app", "/app/tests"], remove=True).decode()
    # the folder it created stays, empty (the runs list it): `ls -A /app/tests` prints its name alone
    assert listing.split() == ["/app:", "maze_game.sh", "tests", "/app/tests:"], listing


def test_a_task_image_holds_none_of_the_test_runs_tools(docker_client):
    # Terminal-Bench's harness installs the tests' tools after the agent is done: decommissioning-service's
    # run listed /opt and saw its own data folder only, where the image's venv at /opt/pivot-tests diverged
    import tarfile

    from pivot_sandbox.tasks.harness import TESTS_VENV, test_tools_tar
    from pivot_sandbox.tasks.terminal_bench import load_task, task_image

    report = task_image(docker_client, load_task(BUNDLED / "hello-world"))
    assert report.status in ("built", "cached"), report
    found = docker_client.containers.run(report.image, ["sh", "-c", f"ls -d {TESTS_VENV} || true"], remove=True)
    assert found.decode().strip() == "", found
    with tarfile.open(test_tools_tar(docker_client.images.get(report.image).id)) as tar:
        names = tar.getnames()
    assert "pivot-tests/bin/pytest" in names and "pivot-tests/pyvenv.cfg" in names, names[:20]


def test_synthesis_finds_an_answer_the_agent_can_read(docker_client):
    from pivot_sandbox import SandboxSpec, docker_backend
    from pivot_sandbox.tasks.terminal_bench import load_task, task_image
    from pivot_tasks import oracle_readable

    backend = docker_backend()
    found = {}
    for task_id in ("blind-maze-explorer-5x5", "hello-world"):
        task = load_task(BUNDLED / task_id)
        image = task_image(docker_client, task).image
        spec = SandboxSpec(image=image, workdir="/app", user="root", shell="/bin/bash")
        found[task_id] = oracle_readable(backend, spec, task.dir, task.instruction)
    # blind-maze's tests run /protected/maze_helper.py, which prints the ground truth: its root agent reads both
    assert "/protected/ground_truth_map.txt" in found["blind-maze-explorer-5x5"], found
    assert found["hello-world"] == []


# -- issue 38, D4 and D5: the test run sees a frozen state and its own tools ----------------------------

# the task left undone (no /app/hello.txt); each tries to pass the tests anyway
RACE = (
    "(while [ ! -f /tests/test_outputs.py ]; do sleep 0.02; done; "
    "printf 'def test_hello_file_exists():\\n    pass\\n' > /tests/test_outputs.py) >/dev/null 2>&1 &"
)
# a program that prints a passing summary and the status line, the nonce read from its own arguments
FAKE = (
    "#!/bin/sh\\necho PASSED tests/test_outputs.py::test_hello_file_exists\\n"
    'for a; do case "$a" in *pivot-tests-*) echo; echo "$a" | grep -o "pivot-tests-[0-9a-f]*" | sed "s/$/ 0/";; '
    "esac; done\\n"
)
FAKED_TOOLS = [
    f"printf '{FAKE}' > /usr/local/sbin/bash && chmod +x /usr/local/sbin/bash",
    f"printf '{FAKE}' > /usr/local/bin/env && chmod +x /usr/local/bin/env",
    "echo /nonexistent/libpass.so > /etc/ld.so.preload",
]


def test_a_job_left_running_cannot_rewrite_the_tests(hello_pivot):
    # D4: the agent's processes ran on into the test run; this one waited for the tests and rewrote them.
    # Now it is stopped before the tamper check and started again from its command (a launcher, as a
    # server the tests need would be): it rewrites the tests again, and the check after the run sees it.
    (verdict,) = get_verifier("task_tests", mode="final").verify_batch(hello_pivot, [terminus(RACE)])
    assert (verdict.reward, verdict.error) == (0.0, None), verdict
    assert verdict.details["tests"].get("FAILED") or "the tests' own files changed" in verdict.reason, verdict


def test_a_server_the_agent_left_runs_again_for_the_tests(hello_pivot):
    # what the agent's commands started is stopped before the tamper check and started again from the
    # command that started it, in the shell state it ran in: a server the tests need is there, and it is
    # a new process (a job that changed the files the check read cannot have kept running)
    from pivot_sandbox import SandboxSpec, docker_backend, open_session, resolve_task_dir, run_task_tests
    from pivot_sandbox.tasks.terminal_bench import load_task

    spec = SandboxSpec.from_context(hello_pivot.context)
    task = load_task(resolve_task_dir(hello_pivot.context["task"]["dir"]))
    session = open_session(docker_backend(), spec, [])
    try:
        session.run("cd /tmp && mkdir -p www && echo served > www/index.html")
        session.run("python3 -m http.server -d www 8080 >/dev/null 2>&1 &")
        session.run('echo "Hello, world!" > /app/hello.txt')
        outcome = run_task_tests(session, task)
        assert outcome.passed, outcome
        fetch = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8080/index.html').read().decode())"
        page = session.run(f'python3 -c "{fetch}"')
        assert page.output.strip() == "served", page
    finally:
        session.close()


def test_a_test_run_without_its_set_aside_venv_is_not_run_and_says_why(hello_pivot, tmp_path, monkeypatch):
    # the venv lies on this machine beside the image (`test_tools_tar`); a cleared cache is no test run
    # that passes or fails by chance: the outcome says it did not run, and why
    from pivot_sandbox import SandboxSpec, docker_backend, open_session, resolve_task_dir, run_task_tests
    from pivot_sandbox.tasks.terminal_bench import load_task

    spec = SandboxSpec.from_context(hello_pivot.context)
    task = load_task(resolve_task_dir(hello_pivot.context["task"]["dir"]))
    session = open_session(docker_backend(), spec, [])
    try:
        session.run('echo "Hello, world!" > /app/hello.txt')
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        outcome = run_task_tests(session, task)
        assert (outcome.passed, outcome.ran) == (False, False), outcome
        assert "is not on this machine" in outcome.reason, outcome
        monkeypatch.undo()
        assert run_task_tests(session, task).passed
    finally:
        session.close()


def test_a_faked_program_on_the_test_runs_path_is_no_test_run(hello_pivot):
    # D5: a `bash` in /usr/local/sbin or an `env` in /usr/local/bin came first on the PATH and printed
    # the passing lines with the nonce read from its arguments; only /bin and /usr/bin were guarded
    verdicts = get_verifier("task_tests", mode="final").verify_batch(hello_pivot, [terminus(f) for f in FAKED_TOOLS])
    for hack, verdict in zip(FAKED_TOOLS, verdicts, strict=True):
        assert (verdict.reward, verdict.error) == (0.0, None), (hack, verdict)
        assert "changed the test run's own tools" in verdict.reason, (hack, verdict.reason)
