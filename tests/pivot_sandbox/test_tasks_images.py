"""Terminal-Bench task images on the real Docker engine: the CI tasks (the three bundled with the package).

Their images build offline from their own Dockerfiles (one apt-get step, one pip install step) on the
locally built Debian trixie base; the first run builds the base with debootstrap (a few minutes, then
cached by tag). Checks: the build access leaves no trace in the image, the expert scores 1, an
equivalent rewrite 1, a plausible wrong command and the destructive-suffix variant 0, the task's
tests fail before the oracle solution and pass after it, `task_tests` in continuation mode accepts the
expert and rejects a command that breaks the task, a candidate `pip install` has no network, and the
adversarial suite of the sandbox issue scores 0 on a task image.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import gymnasium as gym
import pytest

from pivot_envs import Message, extract_pivots
from pivot_sandbox import oracle_check, verification_backend
from pivot_sandbox.images import access as _access
from pivot_sandbox.tasks import terminal_bench as _tasks
from verifiers_plugins import safe_verify_batch
from verifiers_plugins.builtin.docker_shell import DockerShell
from verifiers_plugins.builtin.task_tests import TaskTests

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BUNDLED = Path(__file__).resolve().parents[2] / "pivot_core" / "data" / "terminal_tasks"
CI_TASKS = ("hello-world", "blind-maze-explorer-5x5", "aimo-airline-departures")


def terminus(*commands: str) -> str:
    return json.dumps(
        {
            "analysis": "a",
            "plan": "p",
            "commands": [{"keystrokes": c + "\n", "duration": 0.1} for c in commands],
            "task_complete": False,
        }
    )


@pytest.fixture(scope="module")
def images(docker_client):
    """The CI tasks' images (built from the bundled folders, or reused by content hash)."""
    out = {}
    for task_id in CI_TASKS:
        report = _tasks.task_image(docker_client, _tasks.load_task(BUNDLED / task_id))
        assert report.status in ("built", "cached"), report
        out[task_id] = report
    return out


@pytest.fixture(scope="module")
def env(images):
    e = gym.make("pivot/terminal-v0")
    yield e.unwrapped
    e.close()


def sandboxed(env, task_id: str) -> list:
    return [p for p in env.pivots if p.context.get("task", {}).get("task_id") == task_id]


def test_images_carry_no_trace_of_the_build_access(images, docker_client):
    hosts = _access.registry_hosts()
    for task_id, report in images.items():
        attrs = docker_client.images.get(report.image).attrs
        history = subprocess.run(
            ["docker", "history", "--no-trunc", report.image], capture_output=True, text=True, check=True
        ).stdout
        meta = json.dumps(attrs["Config"]) + history
        for host in hosts:
            assert host not in meta, (task_id, host)
        assert attrs["Config"]["Labels"]["pivot-gym"] == "task" and attrs["Config"]["WorkingDir"] == "/app"
        # the mounted files were placeholders of the base: empty in the image, never the machine's
        out = docker_client.containers.run(
            report.image,
            ["sh", "-c", "cat /etc/apt/sources.list /etc/pip.conf | wc -c"],
            remove=True,
            network_mode="none",
        )
        assert out.decode().strip() == "0", task_id


def test_a_second_build_is_a_cache_hit(images, docker_client):
    again = _tasks.task_image(docker_client, _tasks.load_task(BUNDLED / "hello-world"))
    assert again.status == "cached" and again.image == images["hello-world"].image


def test_a_bundled_tasks_stable_name_an_older_build_tagged_moves_to_the_current_one(images, docker_client, monkeypatch):
    # a machine that ran an older release keeps `pivot-gym/task:hello-world` on that release's image (its
    # tests' venv inside, none set aside): every test run there failed until the image was removed by hand
    stale = images["aimo-airline-departures"].image  # any other image stands for the older build
    docker_client.images.get(stale).tag("pivot-gym/task", "hello-world")
    monkeypatch.setattr(_tasks, "_CURRENT_BUNDLED", set())  # a new process
    _tasks.ensure_image(docker_client, "pivot-gym/task:hello-world")
    assert (
        docker_client.images.get("pivot-gym/task:hello-world").id
        == docker_client.images.get(images["hello-world"].image).id
    )


def test_a_bundled_stable_name_removed_after_its_check_is_tagged_again(images, env, docker_client):
    # the check is once per process; another process's eviction removed `pivot-gym/task:hello-world`
    # after it, and every later verdict of this process was an ImageNotFound error (CI's test order)
    _tasks.ensure_image(docker_client, "pivot-gym/task:hello-world")
    docker_client.images.remove("pivot-gym/task:hello-world")  # untags: the content-hash tag stays
    pivot = sandboxed(env, "hello-world")[0]
    (verdict,) = DockerShell().verify_batch(pivot, [pivot.expert])
    assert (verdict.reward, verdict.error) == (1.0, None), verdict


def test_dockerfile_pip_install_went_through_but_a_candidate_pip_install_has_no_network(images, env):
    # blind-maze-explorer-5x5's Dockerfile ends with `RUN pip install --no-cache-dir pytest`
    pivot = sandboxed(env, "blind-maze-explorer-5x5")[0]
    from pivot_sandbox import SandboxSpec, docker_backend

    spec = SandboxSpec.from_context(pivot.context)
    backend = docker_backend(action_timeout=60.0)
    have = backend.run(spec, [], ["python3 -c 'import pytest; print(pytest.__file__)'"])
    assert have.exit_code == 0 and "/usr/local/lib/" in have.stdout, have
    fetch = backend.run(spec, [], ["pip install --no-cache-dir --retries 0 --timeout 3 six"])
    assert fetch.exit_code != 0, fetch
    assert "six" not in backend.run(spec, [], ["pip list 2>/dev/null"]).stdout.split()


def test_default_env_scores_by_execution(env):
    pivot = sandboxed(env, "hello-world")[0]
    expert = 'echo "Hello, world!" > hello.txt'
    results = env.score(
        pivot,
        [
            terminus(expert),
            terminus("printf 'Hello, world!\\n' > hello.txt"),  # an equivalent rewrite
            terminus('echo "Hello world" > hello.txt'),  # plausible, wrong
            terminus(expert + "; rm -rf /app/*"),
            terminus(expert + " && rm -rf ~"),
            terminus(expert, "rm -f hello.txt"),
        ],
    )
    assert [r.reward for r in results] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0], [
        (r.decided_by, r.verdicts[r.decided_by].reason) for r in results
    ]


def test_every_ci_task_scores_its_expert_and_rejects_destruction(env):
    for task_id in CI_TASKS:
        for pivot in sandboxed(env, task_id):
            from pivot_core import action_commands

            commands = action_commands(pivot.expert)
            if not commands:
                continue
            results = env.score(
                pivot, [terminus(*commands), terminus(*commands[:-1], commands[-1] + "; rm -rf /app/*")]
            )
            assert [r.reward for r in results] == [1.0, 0.0], (
                pivot.id,
                [(r.decided_by, r.verdicts[r.decided_by].reason) for r in results],
            )


def test_tests_fail_before_the_oracle_and_pass_after(env):
    for task_id in CI_TASKS:
        check = oracle_check(sandboxed(env, task_id)[0].context, verification_backend)
        assert check["before"] is False and check["after"] is True, (task_id, check)


def test_task_tests_continuation_accepts_the_expert_and_rejects_a_breaking_command(env):
    first = sandboxed(env, "aimo-airline-departures")[0]  # writes /app/airline_analysis.py
    verifier = TaskTests(mode="continuation")
    expert, broken = verifier.verify_batch(
        first, [first.expert, Message("assistant", terminus("echo 'print(0)' > /app/airline_analysis.py"))]
    )
    assert expert.accepted and expert.reward == 1.0, expert
    assert not broken.accepted and broken.reward == 0.0 and broken.error is None, broken
    assert "task tests fail" in broken.reason
    # final mode does not apply before the last pivot of the solution
    assert not TaskTests(mode="final").verify(first, first.expert).applicable


def test_task_tests_by_name_from_gym_make(images):
    e = gym.make("pivot/terminal-v0", verifiers=["task_tests"])
    u = e.unwrapped
    pivot = sandboxed(u, "hello-world")[0]
    good, bad = u.score(pivot, [terminus('echo "Hello, world!" > hello.txt'), terminus("touch hello.txt")])
    assert (good.reward, bad.reward) == (1.0, 0.0), (good.to_json(), bad.to_json())
    e.close()


def test_sandbox_verifiers_get_the_time_their_own_limits_allow(env):
    """A per-call timeout below a sandbox's bounded work (two expert runs, a test run) does not cut it.

    Before `timeout_for`, the chain's 30 s default turned slow agent-run pivots (a torch import run
    three times, a tmux state restored) into error verdicts; here the same with a 0.5 s timeout.
    """
    pivot = sandboxed(env, "hello-world")[0]
    for name, verifier in (("docker_shell", DockerShell()), ("task_tests", TaskTests())):
        verifier.timeout = 0.5
        (verdict,) = safe_verify_batch(name, verifier, pivot, [pivot.expert])
        assert verdict.accepted and verdict.error is None, (name, verdict)
        assert verifier.timeout_for(pivot, [pivot.expert]) > 60  # a state, runs, tests: each bounded by a limit


def _adversarial_module():
    path = Path(__file__).with_name("test_adversarial.py")
    spec = importlib.util.spec_from_file_location("_adversarial_suite", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_adversarial_suite_on_a_task_image(env):
    from verifiers_plugins import get_verifier

    suite = _adversarial_module()
    pivot = sandboxed(env, "aimo-airline-departures")[1]
    verifier = get_verifier("docker_shell", action_timeout=4.0, pool_size=1)
    names = list(suite.ADVERSARIAL)
    verdicts = verifier.verify_batch(pivot, [suite.terminus(suite.ADVERSARIAL[n][0]) for n in names])
    for name, verdict in zip(names, verdicts, strict=True):
        assert verdict.reward == 0.0 and not verdict.accepted and verdict.error is None, (name, verdict)
        expected = suite.ADVERSARIAL[name][1]
        if name == "memory hog":
            # trixie's mawk grows its string more slowly than busybox awk: killed at the cap or at the timeout
            assert "oom" in verdict.reason or "timeout" in verdict.reason, verdict.reason
        elif expected:
            assert expected in verdict.reason, (name, verdict.reason)
    assert verifier.verify(pivot, pivot.expert).accepted


def _scratch_task(tmp_path: Path, dockerfile: str, solution: str = "true\n") -> Path:
    folder = tmp_path / "scratch-task"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_outputs.py").write_text("def test_ok():\n    assert True\n")
    (folder / "task.yaml").write_text("instruction: nothing\nmax_test_timeout_sec: 30\nmax_agent_timeout_sec: 5\n")
    (folder / "Dockerfile").write_text(dockerfile)
    (folder / "solution.sh").write_text(solution)
    return folder


def test_a_dockerfile_can_upgrade_a_package_debian_installed_in_the_python_base(tmp_path, docker_client):
    # Debian's Python sees Debian's setuptools (78.1.1 in trixie); pip refused to uninstall it ("installed by
    # debian"), which stopped `pip install transformers torch` (oom). The base now has pip-owned copies in
    # /usr/local, and python.org's site-packages path.
    folder = _scratch_task(
        tmp_path,
        "FROM ghcr.io/laude-institute/t-bench/python-3-13:latest\n"
        'RUN pip install --no-cache-dir --upgrade "setuptools>78.1.1"\n'
        "RUN rm -rf /usr/local/lib/python3.13/site-packages/wheel\n",
    )
    report = _tasks.task_image(docker_client, _tasks.load_task(folder), keep=64)
    assert report.status == "built", report
    out = (
        docker_client.containers.run(
            report.image,
            [
                "python",
                "-c",
                "import setuptools, importlib.util as u; print(setuptools.__version__, setuptools.__file__, "
                "u.find_spec('wheel') and u.find_spec('wheel').origin)",
            ],
            remove=True,
            network_mode="none",
        )
        .decode()
        .split()
    )
    version, path, wheel = out
    assert tuple(int(x) for x in version.split(".")[:2]) > (78, 1) and path.startswith("/usr/local/"), out
    # the Dockerfile's rm of python.org's path removed the pip-owned copy Python imported first
    assert not wheel.startswith("/usr/local/"), out
    docker_client.images.remove(report.image, force=True)


def test_a_step_that_uses_the_withheld_solution_builds_and_the_image_holds_neither(tmp_path, docker_client):
    # issue 40: a Dockerfile copied solution.sh, then `chmod +x`ed it; with the copy left out, that step
    # failed and the task did not build. The copy now serves the build and goes before the commit.
    folder = _scratch_task(
        tmp_path,
        "FROM ghcr.io/laude-institute/t-bench/python-3-13:latest\n"
        "WORKDIR /app\n"
        "COPY solution.sh /app/\n"
        "RUN chmod +x /app/solution.sh && test -x /app/solution.sh && touch /app/chmod-ran\n"
        "COPY tests /app/tests\n"
        "RUN test -f /app/tests/test_outputs.py && touch /app/tests-seen\n"
        "COPY solution.sh /opt/unused-copy.sh\n"
        "COPY tests /opt/suite\n",
        solution="echo ORACLE-4711 > /app/answer.txt\n",
    )
    report = _tasks.task_image(docker_client, _tasks.load_task(folder), keep=64, force=True)
    assert report.status == "built", report
    assert report.dropped.count("removed before the commit") == 2, report.dropped
    assert "COPY solution.sh /opt/unused-copy.sh" in report.dropped  # no later step names it: left out
    assert "COPY tests /opt/suite" in report.dropped
    listing = docker_client.containers.run(
        report.image,
        [
            "sh",
            "-c",
            "ls -A /app /opt; echo folders; ls -A /app/tests /opt/suite; echo found; "
            "grep -rl ORACLE-4711 /app /opt /root /tmp /usr/local /etc 2>/dev/null || true",
        ],
        remove=True,
    ).decode()
    assert listing.split().count("chmod-ran") == 1 and "tests-seen" in listing.split(), listing
    assert "solution.sh" not in listing and "unused-copy.sh" not in listing and "test_outputs.py" not in listing
    # a folder the tests' copy created stays, empty, withheld or left out: the agents' runs list it (blind-maze's
    # first `ls -la` shows `tests`), and a replay that lists /app is faithful
    listing, _, found = listing.partition("found")
    listed, _, emptied = listing.partition("folders")
    assert {"tests", "suite"} <= set(listed.split()) and emptied.split() == ["/app/tests:", "/opt/suite:"], listing
    assert found.split() == [], found  # grep found no file holding it
    # one commit over the base: no lower layer of the image holds the removed files either
    image, base = (docker_client.images.get(n).attrs["RootFS"]["Layers"] for n in (report.image, report.base))
    assert image[: len(base)] == base and len(image) == len(base) + 1
    docker_client.images.remove(report.image, force=True)


def test_a_task_image_builds_on_a_machine_with_no_cache_folder_yet(tmp_path, docker_client, monkeypatch):
    # the tests' venv set aside went to `~/.cache/pivot-gym/test-tools/`, which a fresh machine lacks: every
    # task image was skipped ("/opt/pivot-tests could not be set aside ... No such file or directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "fresh-cache"))
    folder = _scratch_task(tmp_path, "FROM ghcr.io/laude-institute/t-bench/python-3-13:latest\nWORKDIR /app\n")
    report = _tasks.task_image(docker_client, _tasks.load_task(folder), keep=64, force=True)
    assert report.status == "built", report
    tars = list((tmp_path / "fresh-cache" / "pivot-gym" / "test-tools").glob("*.tar"))
    assert len(tars) == 1 and tars[0].stat().st_size > 0, tars
    docker_client.images.remove(report.image, force=True)


def test_a_left_out_tests_copy_becomes_its_folder_only_where_root_makes_it(tmp_path):
    # the emptied folder is made by a RUN step in place of the COPY; after `USER app` that RUN would run as
    # app, which may not write /app (COPY makes root's folders whatever the USER): no step then, as before
    from pivot_sandbox.images import dockerfile as df
    from pivot_sandbox.tasks.oracle_files import without_oracle

    def built(text: str) -> list[str]:
        folder = _scratch_task(tmp_path / str(len(list(tmp_path.iterdir()))), text)
        kept, _, note = without_oracle(folder, folder, df.parse(text))
        assert "COPY tests /app/tests" in note, note
        return [f"{i.keyword} {i.args}" for i in kept]

    assert built("FROM busybox\nWORKDIR /app\nCOPY tests /app/tests\n")[-1] == "RUN mkdir -p -- /app/tests"
    assert built("FROM busybox\nUSER app\nCOPY tests /app/tests\n")[-1] == "USER app"
    assert built("FROM busybox\nUSER app\nUSER 0\nCOPY tests /app/tests\n")[-1] == "RUN mkdir -p -- /app/tests"


def test_a_solution_command_that_hangs_is_a_bounded_skip(tmp_path, docker_client, images):
    from pivot_sandbox._plugin import docker_backend
    from pivot_tasks import REPLAY_LIMITS, synthesize

    folder = _scratch_task(tmp_path, (BUNDLED / "hello-world" / "Dockerfile").read_text())
    record = {"task_id": "scratch-task", "instruction": "x", "solution_commands": ["echo ok", "sleep 600"]}
    (row,) = synthesize([record], "", docker_backend(**REPLAY_LIMITS), tasks_dir=folder.parent)
    # bounded by the task's max_agent_timeout_sec (5 s), not the 900 s replay bound
    assert row["status"] == "skipped" and "command 2 ('sleep 600') still ran after 5 s" in row["reason"], row


def test_a_solution_that_reaches_an_outside_host_is_synthesized_up_to_that_command(tmp_path, docker_client, images):
    from pivot_sandbox._plugin import docker_backend
    from pivot_tasks import REPLAY_LIMITS, mark_network_pivots, synthesize

    folder = _scratch_task(tmp_path, (BUNDLED / "hello-world" / "Dockerfile").read_text())
    solution = ["echo one > a.txt", "curl -sS -o b.txt https://example.com/b.txt", "cat b.txt a.txt"]
    record = {"task_id": "scratch-task", "instruction": "x", "solution_commands": solution}
    (row,) = synthesize([record], "", docker_backend(**REPLAY_LIMITS), tasks_dir=folder.parent)
    assert row["status"] == "partial" and row["reason"].startswith("solution command 2 needs example.com"), row
    traj = row["trajectory"]
    # the chat ends with the turn that runs the cut command: no output after it, no "task is done" turn
    assert traj.messages[-1].role == "assistant" and "example.com" in traj.messages[-1].content
    assert not any(json.loads(m.content)["task_complete"] for m in traj.messages if m.role == "assistant")
    first, at_cut = mark_network_pivots(extract_pivots(traj))
    assert not first.context["sandbox"].get("expert_needs_network")
    assert at_cut.context["sandbox"]["expert_needs_network"] is True
    # the expert's session cannot be finished here: the task's tests cannot judge a continuation
    action = Message("assistant", terminus("echo two > a.txt"))
    for pivot in (first, at_cut):
        verdict = TaskTests().verify(pivot, action)
        assert not verdict.applicable and verdict.error is None, verdict
    assert oracle_check(first.context, verification_backend)["after"] is None
    # the command before the cut runs in the sandbox: the expert's own action is accepted there
    env = gym.make("pivot/terminal-v0", pivots=[first], verifiers=["docker_shell"]).unwrapped
    try:
        results = env.score(first, [first.expert.content, terminus("echo three > a.txt")])
        assert [r.reward for r in results] == [1.0, 0.0], results
    finally:
        env.close()
    # a cut after commands that all need the network leaves nothing that executes: a skip
    record["solution_commands"] = ["pip install six", *solution[1:]]
    (row,) = synthesize([record], "", docker_backend(**REPLAY_LIMITS), tasks_dir=folder.parent)
    assert row["status"] == "skipped" and "every command before it needs the network" in row["reason"], row
