"""A Harbor task's task.toml limits and environments, applied (issue 39, item 1's limits and the oracle's environment).

`[agent].timeout_sec` is an episode's wall-clock limit when none is given; `[verifier].timeout_sec` stops
test.sh (Harbor's rule: the whole run, no grace; no reward past it); `[environment]` cpus and memory are
the limits of the task's containers (the episode's, the `task_tests` verifier's), carried in a pivot's
`context.task.limits`; storage is carried, not enforced. The oracle's `solve.sh` runs with
`[solution].env` and uv's registry access (`UV_NATIVE_TLS=1`), and on an Ubuntu task built on Debian
with its apt pins rewritten as the image's build had its own. The engine's tests reuse the CI tasks'
images (tests/data/harbor_tasks; `test_harbor_tasks.py` builds them) with their task.toml and tests
changed in a copy.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401 - registers the env ids
from pivot_sandbox.contract.spec import LABEL, SandboxSpec
from pivot_sandbox.errors import SandboxError
from pivot_sandbox.tasks.harbor import container_limits, read_task_toml
from pivot_sandbox.tasks.harbor_verify import oracle_command, oracle_env
from pivot_sandbox.tasks.terminal_bench import load_task
from pivot_sandbox.tasks.verification import task_context, task_limits

TASKS = Path(__file__).resolve().parents[1] / "data" / "harbor_tasks"
SLOW_TEST = "#!/bin/bash\nsleep 25\necho 1 > /logs/verifier/reward.txt\n"


def copy_task(tmp_path: Path, task_id: str, toml: dict[str, str] | None = None) -> Path:
    """A copy of a CI task under its own name (its image's tag stays the same), task.toml's lines replaced."""
    folder = tmp_path / task_id
    shutil.copytree(TASKS / task_id, folder)
    text = (folder / "task.toml").read_text()
    for old, new in (toml or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    (folder / "task.toml").write_text(text)
    return folder


def terminus(*commands: str, complete: bool = False) -> str:
    turn = {"analysis": "", "plan": "", "commands": [{"keystrokes": c + "\n", "duration": 1.0} for c in commands]}
    return json.dumps({**turn, "task_complete": complete})


# -- no engine needed -------------------------------------------------------------------------------


def test_container_limits_are_read_from_each_schema(tmp_path):
    # 1.0 (TB2's `memory = "1G"`, `storage = "2G"`) and 1.3 (`memory_mb`, `storage_mb`) alike
    assert container_limits(read_task_toml(TASKS / "py-greeting" / "task.toml")) == {
        "memory": "1024m",
        "cpus": 1.0,
        "storage_mb": 2048,
    }
    assert container_limits(read_task_toml(TASKS / "ubuntu-done-count" / "task.toml"))["memory"] == "1024m"
    bare = tmp_path / "task.toml"
    bare.write_text('version = "1.0"\n[environment]\ncpus = 0.5\n')
    assert container_limits(read_task_toml(bare)) == {"cpus": 0.5}  # unset: the sandbox's own defaults


def test_a_pivot_carries_its_tasks_limits_and_the_readers_take_them(tmp_path):
    task = load_task(TASKS / "py-greeting")
    context = {"task": task_context(task)}
    assert context["task"]["limits"] == {"memory": "1024m", "cpus": 1.0, "storage_mb": 2048}
    assert task_limits(context) == {"memory": "1024m", "cpus": 1.0}  # storage: carried, not enforced
    # a pivot written before the key: its task folder's task.toml
    assert task_limits({"task": {"dir": str(TASKS / "py-greeting")}}) == {"memory": "1024m", "cpus": 1.0}
    assert task_limits({"task": {"dir": str(TASKS / "py-greeting"), "limits": {}}}) == {}
    assert task_limits({}) == {}
    with pytest.raises(SandboxError, match=r"context.task.limits.cpus"):
        task_limits({"task": {"dir": "x", "limits": {"cpus": "lots"}}})


def test_the_oracle_runs_with_solution_env_and_uvs_registry_access(tmp_path):
    folder = copy_task(tmp_path, "py-greeting", {"[agent]": '[solution.env]\nGREETING = "hello, harbor"\n\n[agent]'})
    task = load_task(folder)
    assert oracle_env(task)["GREETING"] == "hello, harbor" and oracle_env(task)["UV_NATIVE_TLS"] == "1"
    assert "GREETING='hello, harbor'" in oracle_command(task) and "UV_NATIVE_TLS=1" in oracle_command(task)
    # the test-run layer's build, which runs uv with registry access, has it too; a test run never needs it
    from pivot_sandbox.tasks.harbor_layer import _steps, offline_env
    from pivot_sandbox.tasks.harbor_plan import verifier_plan

    plan = verifier_plan(TASKS / "py-greeting" / "tests", frozenset({"pypi.org", "files.pythonhosted.org"}))
    assert all(env.get("UV_NATIVE_TLS") == "1" for _, _, env in _steps(plan, "/root", "root"))
    assert "UV_NATIVE_TLS" not in offline_env()
    # a test may pip-install from an index the task serves on the loopback (TB2's pypi-server): no --no-index
    assert "PIP_NO_INDEX" not in offline_env() and offline_env()["PIP_RETRIES"] == "0"


def test_synthesized_oracle_session_exports_solution_env_and_gives_uv_native_tls(tmp_path):
    from pivot_tasks import harbor_record

    folder = copy_task(tmp_path, "py-greeting", {"[agent]": '[solution.env]\nNAME = "a b"\n\n[agent]'})
    (folder / "solution" / "solve.sh").write_text(
        "#!/bin/bash\ncd /app && uv run --with six python -c 'print(1)'\ncat > a.txt <<'EOF'\nuv run no\nEOF\n"
    )
    record, why = harbor_record(folder)
    assert why == "" and record["solution_commands"] == [
        "export NAME='a b'",
        "cd /app && UV_NATIVE_TLS=1 uv run --with six python -c 'print(1)'",
        "cat > a.txt <<'EOF'\nuv run no\nEOF",  # a heredoc's body is a file's text
    ]


# -- on the engine ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def images(docker_client):
    """The CI tasks' images (built, or cached by `test_harbor_tasks.py`), by task id."""
    from pivot_sandbox.tasks.terminal_bench import task_image

    out = {}
    for task_id in ("py-greeting", "staged-words", "ubuntu-done-count"):
        report = task_image(docker_client, load_task(TASKS / task_id))
        assert report.status in ("built", "cached"), report
        out[task_id] = report
    return out


@pytest.mark.docker
def test_a_slow_test_sh_past_the_verifier_timeout_gives_no_reward_and_says_why(images, tmp_path):
    from pivot_sandbox import docker_backend
    from pivot_sandbox.tasks.harbor import harbor_limits
    from pivot_sandbox.tasks.harbor_layer import verifier_layer
    from pivot_sandbox.tasks.harbor_verify import harbor_tests_at
    from pivot_sandbox.tasks.verification import run_tests

    folder = copy_task(tmp_path, "py-greeting", {"[verifier]\ntimeout_sec = 300.0": "[verifier]\ntimeout_sec = 3.0"})
    (folder / "tests" / "test.sh").write_text(SLOW_TEST)
    task, report = load_task(folder), images["py-greeting"]
    backend = docker_backend(**harbor_limits(task.harbor))
    layer = verifier_layer(backend.client, task, report.image)
    spec = SandboxSpec(image=report.image, workdir=report.workdir, user="root", shell="/bin/bash")
    started = time.monotonic()
    outcome = harbor_tests_at(backend, spec, [], task, layer)
    assert outcome.verifiable and outcome.reward is None, outcome
    assert "ran past its 3 s ([verifier].timeout_sec of" in outcome.reason and str(folder) in outcome.reason
    # the `task_tests` verifier's entry point: a rejection, with the reason
    tested = run_tests(backend, folder, spec, [], [], 60.0)
    assert not tested.passed and tested.reward is None and "[verifier].timeout_sec" in tested.reason, tested
    assert time.monotonic() - started < 25  # test.sh's 25 s sleep never ran out


@pytest.mark.docker
def test_an_episode_takes_the_agent_timeout_and_the_container_limits_of_task_toml(images, tmp_path, docker_client):
    from pivot_sandbox import verification_backend
    from pivot_tasks import synthesize_harbor

    folder = copy_task(
        tmp_path,
        "py-greeting",
        {
            "[verifier]\ntimeout_sec = 300.0": "[verifier]\ntimeout_sec = 3.0",
            "[agent]\ntimeout_sec = 300.0": "[agent]\ntimeout_sec = 123.0",
            'cpus = 1\nmemory = "1G"': 'cpus = 0.5\nmemory = "700M"',
        },
    )
    (folder / "tests" / "test.sh").write_text(SLOW_TEST)
    out = tmp_path / "pivots.jsonl"
    report = synthesize_harbor(folder, out)
    assert report["succeeded"] == 1, report
    limits = {"memory": "700m", "cpus": 0.5}
    env = gym.make("pivot/terminal-episode-v0", dataset=str(out)).unwrapped
    try:
        _, info = env.reset(options={"pivot_id": "synth/harbor/py-greeting#1"})
        assert env.current.context["task"]["limits"] == {**limits, "storage_mb": 2048}
        assert info["time_limit"] == 123.0 and info["restore"]["limits"] == limits, info
        found = docker_client.containers.list(filters={"label": f"{LABEL}.backend={env.backend.token}"})
        hosts = [c.attrs["HostConfig"] for c in found]
        assert hosts and all((h["Memory"], h["NanoCpus"]) == (700 << 20, 500_000_000) for h in hosts), hosts
        # the `task_tests` verifier's containers: the same limits
        assert verification_backend(10.0, task_limits(env.current.context)).limits.memory == "700m"
        _, reward, terminated, _, info = env.step(terminus('echo "hello, harbor" > /app/greeting.txt', complete=True))
        outcome = info["outcome"]
        assert terminated and reward == 0.0 and "[verifier].timeout_sec" in (outcome["error"] or ""), outcome
    finally:
        env.close()


@pytest.mark.docker
def test_the_oracle_runs_uv_with_registry_access(images, tmp_path):
    from pivot_sandbox import docker_backend
    from pivot_sandbox.tasks.harbor import harbor_limits
    from pivot_sandbox.tasks.harbor_layer import verifier_layer
    from pivot_sandbox.tasks.harbor_verify import harbor_tests_at, oracle_image

    # staged-words's image has uv 0.8.14 (astral's image, served from PyPI); its oracle now also fetches a wheel
    folder = copy_task(tmp_path, "staged-words")
    (folder / "solution" / "solve.sh").write_text(
        "#!/bin/bash\ngrep -cx gamma /app/words.txt > /app/gamma.txt\n"
        "uv run --no-project --with six==1.17.0 python -c 'import six; print(\"six\", six.__version__)'\n"
    )
    task, report = load_task(folder), images["staged-words"]
    backend = docker_backend(**harbor_limits(task.harbor))
    layer = verifier_layer(backend.client, task, report.image)
    image = oracle_image(backend.client, task, report.image)
    spec = SandboxSpec(image=image, workdir=report.workdir, user="root", shell="/bin/bash", replay_access=True)
    outcome = harbor_tests_at(backend, spec, [oracle_command(task)], task, layer)
    assert "six 1.17.0" in outcome.details["agent_log"], outcome.details["agent_log"]
    assert outcome.reward == 1.0, outcome


@pytest.mark.docker
def test_an_ubuntu_tasks_oracle_has_its_apt_pins_rewritten_for_debian(images, tmp_path, docker_client):
    from pivot_sandbox.tasks.harbor_verify import oracle_image

    folder = copy_task(tmp_path, "ubuntu-done-count")
    (folder / "solution" / "solve.sh").write_text("#!/bin/bash\napt-get install -y jq=1.7.1-3build1 bc\n")
    image = oracle_image(docker_client, load_task(folder), images["ubuntu-done-count"].image)
    out = docker_client.containers.run(image, ["cat", "/solution/solve.sh"], remove=True, network_mode="none")
    assert out.decode() == "#!/bin/bash\napt-get install -y jq bc\n"
    # python:3.13-slim-bookworm is built on trixie too: bookworm's pins are dropped and its names mapped
    folder = copy_task(tmp_path / "py", "py-greeting")
    (folder / "solution" / "solve.sh").write_text("#!/bin/bash\napt-get install -y jq=1.6-2.1 libgl1-mesa-glx\n")
    image = oracle_image(docker_client, load_task(folder), images["py-greeting"].image)
    out = docker_client.containers.run(image, ["cat", "/solution/solve.sh"], remove=True, network_mode="none")
    assert out.decode() == "#!/bin/bash\napt-get install -y jq libgl1\n"


@pytest.mark.docker
def test_a_task_asking_more_cpus_than_the_machine_has_gets_them_all(images, docker_client):
    # TB2's rstan-to-pystan and mcmc-sampling-stan ask `cpus = 4`: Docker refused the container on 2 cores
    from pivot_sandbox import docker_backend

    most = docker_client.info()["NCPU"]
    backend = docker_backend(cpus=float(most + 2))
    try:
        spec = SandboxSpec(image=images["py-greeting"].image, user="root", shell="/bin/bash")
        effect = backend.run(spec, [], ["nproc"])
        assert effect.exit_code == 0 and effect.stdout.strip() == str(most), effect
    finally:
        backend.close()


def test_the_test_run_layers_are_kept_least_recently_used_first_out(tmp_path, monkeypatch):
    # the TB2 bench over every folder left 18 GB of layers (torch's tests: 5 GB each) and filled the disk
    import os
    import time

    from pivot_sandbox.tasks.harbor_layer import sweep_layers

    monkeypatch.setenv("PIVOT_CACHE_DIR", str(tmp_path))
    folder = tmp_path / "harbor-layers"
    folder.mkdir()
    now = time.time()
    for i, age in enumerate((3600, 3000, 2400, 500, 300, 100)):  # seconds since each layer was last used
        for suffix in (".json", ".tar"):
            (folder / f"t{i}{suffix}").write_text("x")
            os.utime(folder / f"t{i}{suffix}", (now - age, now - age))
    assert sweep_layers(keep=2) == 3  # t0..t2 go; t3 is past keep but used within the last 10 minutes
    assert sorted(p.name for p in folder.iterdir()) == [f"t{i}{s}" for i in (3, 4, 5) for s in (".json", ".tar")]
