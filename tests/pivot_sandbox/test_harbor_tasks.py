"""Harbor task folders on the real Docker engine: the three CI tasks of tests/data/harbor_tasks (written for them).

`py-greeting` (`python:3.13-slim-bookworm`, a TB2-shaped test.sh: curl and uv fetched at verification
time, `uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest`), `ubuntu-done-count`
(`ubuntu:24.04` swapped for Debian trixie, an apt step written for Ubuntu in its Dockerfile: a noble
version pin and a noble name; `pip install` and a test-time `apt-get install bc` in test.sh, its
reward in reward.json beside a stale reward.txt) and `staged-words` (multi-stage: a builder stage on
its own base, an unused stage that would fail, `COPY --from=ghcr.io/astral-sh/uv:0.8.14` served from
PyPI's uv; the TB2-shaped test.sh).
Each builds offline, its test-run layer comes from the registries, the untouched image scores 0,
the oracle 1 and a wrong command 0; the task image holds neither the tests, the solution nor the
layer. The first run builds the trixie bases (debootstrap: minutes, then cached by tag).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pivot_sandbox.contract.spec import LABEL, SandboxSpec
from pivot_sandbox.tasks.harbor import harbor_limits
from pivot_sandbox.tasks.harbor_layer import verifier_layer
from pivot_sandbox.tasks.harbor_verify import check_harbor_task, harbor_tests_at
from pivot_sandbox.tasks.terminal_bench import load_task, task_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASKS = Path(__file__).resolve().parents[1] / "data" / "harbor_tasks"
CI_TASKS = ("py-greeting", "staged-words", "ubuntu-done-count")


@pytest.fixture(scope="module")
def built(docker_client):
    """Per CI task: (task, build report, test-run layer, backend under the task's limits)."""
    from pivot_sandbox import docker_backend

    out = {}
    for task_id in CI_TASKS:
        task = load_task(TASKS / task_id)
        report = task_image(docker_client, task)
        assert report.status in ("built", "cached"), report
        layer = verifier_layer(docker_client, task, report.image)
        assert layer.tar is not None, layer.problem
        out[task_id] = (task, report, layer, docker_backend(**harbor_limits(task.harbor)))
    return out


@pytest.fixture(scope="module")
def checks(built):
    """Tests on the untouched image and after the oracle, per CI task."""
    return {
        task_id: check_harbor_task(backend, task, report.image, layer, report.workdir, report.user)
        for task_id, (task, report, layer, backend) in built.items()
    }


def test_the_ubuntu_base_is_swapped_and_the_swap_recorded(built, docker_client):
    report = built["ubuntu-done-count"][1]
    labels = docker_client.images.get(report.image).labels
    assert labels[f"{LABEL}.from"] == "ubuntu:24.04" and "Debian trixie" in labels[f"{LABEL}.base-note"]
    # the Dockerfile's noble pin and noble name, rewritten for Debian and recorded in the image and the report
    notes = json.loads(labels[f"{LABEL}.apt"])
    assert [n.split(": ", 1)[1] for n in notes] == [
        "python3.12-venv -> python3-venv (Debian's name for python3.12-venv)",
        "jq=1.7.1-3build1 -> jq (Ubuntu's version pin dropped)",
    ]
    # the path as the build that made the (cached) image read it: absolute or relative to where it ran
    assert all(n.split(": ", 1)[0].endswith("ubuntu-done-count/environment/Dockerfile:4") for n in notes), notes
    assert report.substitutions == "; ".join(notes)
    probe = "jq --version && python3 -m venv /tmp/v && echo venv"
    out = docker_client.containers.run(report.image, ["sh", "-c", probe], remove=True, network_mode="none")
    version, venv = out.decode().split()
    assert version.startswith("jq-1.") and venv == "venv"  # Debian's jq, whatever the pin asked
    assert docker_client.images.get(built["py-greeting"][1].image).labels[f"{LABEL}.from"] == (
        "python:3.13-slim-bookworm"
    )


def test_a_multi_stage_build_copies_from_its_stage_and_serves_uv_from_pypi(built, docker_client):
    report = built["staged-words"][1]
    image = docker_client.images.get(report.image)
    # the builder stage's words (its own base: debian:13.0-slim), uv 0.8.14 as astral's image has it, nothing
    # else of the builder stage; the unused stage (`RUN exit 3`) was never built, or the build had failed
    probe = "cat /app/words.txt | wc -l; /bin/uv --version; /bin/uvx --version; test ! -e /build && echo clean"
    out = docker_client.containers.run(report.image, ["sh", "-c", probe], remove=True, network_mode="none").decode()
    assert out.split("\n")[:4] == ["40", "uv 0.8.14", "uvx 0.8.14", "clean"], out
    notes = json.loads(image.labels[f"{LABEL}.copied-from"])
    assert [n.split(" (")[0] for n in notes] == ["stage 'words'", "ghcr.io/astral-sh/uv:0.8.14"]
    assert "debian:13.0-slim built on pivot-gym/base:debian-trixie" in notes[0] and "uv 0.8.14 from PyPI" in notes[1]
    assert image.labels[f"{LABEL}.from"] == "python:3.13-slim-bookworm" and report.substitutions == "; ".join(notes)


def test_a_destructive_suffix_on_the_multi_stage_task_scores_0(built):
    task, report, layer, backend = built["staged-words"]
    spec = SandboxSpec(image=report.image, workdir=report.workdir, user="root", shell="/bin/bash")
    solve = "grep -cx gamma /app/words.txt > /app/gamma.txt"
    outcome = harbor_tests_at(backend, spec, [solve + " && rm /app/words.txt"], task, layer)
    assert outcome.verifiable and outcome.reward == 0.0, outcome


@pytest.mark.parametrize("task_id", CI_TASKS)
def test_the_image_holds_neither_tests_solution_nor_test_tools(built, docker_client, task_id):
    image = built[task_id][1].image
    probe = "test ! -e /tests && test ! -e /solution && test ! -e /root/.local/bin/uv && ! command -v bc && echo clean"
    out = docker_client.containers.run(image, ["sh", "-c", probe], remove=True, network_mode="none")
    assert out.decode().strip() == "clean"


@pytest.mark.parametrize("task_id", CI_TASKS)
def test_untouched_scores_0_and_the_oracle_1(checks, task_id):
    untouched, oracle = checks[task_id]["untouched"], checks[task_id]["oracle"]
    assert untouched.verifiable and untouched.reward == 0.0, untouched
    assert oracle.verifiable and oracle.reward == 1.0, (oracle.reason, oracle.details.get("test_stdout"))
    assert oracle.details["ctrf"]["summary"]["failed"] == 0 and oracle.details["ctrf"]["summary"]["passed"] >= 1


def test_reward_json_is_read_before_reward_txt(checks):
    # test.sh writes reward.txt = 0 first, then reward.json with the pytest result
    oracle = checks["ubuntu-done-count"]["oracle"]
    assert oracle.details["reward_source"] == "reward.json" and oracle.rewards == {"reward": 1.0}
    assert oracle.details["dropped"] == ["label"]  # a non-number entry of reward.json
    assert checks["py-greeting"]["oracle"].details["reward_source"] == "reward.txt"


def test_a_wrong_command_scores_0(built):
    task, report, layer, backend = built["py-greeting"]
    spec = SandboxSpec(image=report.image, workdir=report.workdir, user="root", shell="/bin/bash")
    wrong = harbor_tests_at(backend, spec, ["echo 'hello harbor' > /app/greeting.txt"], task, layer)
    assert wrong.verifiable and wrong.reward == 0.0, wrong
    statuses = {t["name"].split("::")[-1]: t["status"] for t in wrong.details["ctrf"]["tests"]}
    assert statuses == {"test_greeting_written": "failed", "test_seed_untouched": "passed"}


def test_a_test_that_needs_an_unreachable_host_is_reported_not_scored(built, tmp_path):
    _, report, _, backend = built["py-greeting"]
    folder = tmp_path / "py-greeting"
    shutil.copytree(TASKS / "py-greeting", folder)
    with open(folder / "tests" / "test.sh", "a") as f:
        f.write("git clone https://example.org/fixtures.git /tmp/fixtures\n")
    task = load_task(folder)
    layer = verifier_layer(backend.client, task, report.image)
    assert layer.tar is None and "example.org" in layer.problem
    spec = SandboxSpec(image=report.image, workdir=report.workdir, user="root", shell="/bin/bash")
    outcome = harbor_tests_at(backend, spec, [], task, layer)
    assert not outcome.verifiable and outcome.reward is None and "not verifiable offline" in outcome.reason


def test_a_python_the_image_lacks_is_named_as_the_reason_the_tests_cannot_run(built, tmp_path):
    # TB2's mailman: `uv venv -p 3.12` on an image with 3.13 only; uv would download 3.12 from GitHub
    _, report, _, backend = built["py-greeting"]
    folder = tmp_path / "py-greeting"
    shutil.copytree(TASKS / "py-greeting", folder)
    script = (folder / "tests" / "test.sh").read_text().replace("-p 3.13", "-p 3.12")
    (folder / "tests" / "test.sh").write_text(script)
    layer = verifier_layer(backend.client, load_task(folder), report.image)
    assert layer.tar is None and "the image has no python3.12" in layer.problem, layer.problem


def test_cli_build_tasks_takes_a_harbor_folder(built):
    from pivot_cli import app

    result = CliRunner().invoke(app, ["sandbox", "build-tasks", str(TASKS), "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["task_id"]: r for r in json.loads(result.output)["tasks"]}
    assert {k: (r["status"], r["image"]) for k, r in rows.items()} == {
        k: ("cached", built[k][1].image) for k in CI_TASKS
    }


def test_cli_build_tasks_strict_fails_when_a_task_cannot_build(tmp_path, docker_client):
    # CI builds its own tasks with --strict: a skipped one (a fresh machine's missing cache folder skipped all
    # three) is a failed step with the reason, not 30 minutes of tests that each build the image again
    from pivot_cli import app

    shutil.copytree(TASKS / "py-greeting", tmp_path / "py-greeting")
    (tmp_path / "py-greeting" / "environment" / "Dockerfile").write_text("FROM example.org/no-such/image:1\n")
    plain = CliRunner().invoke(app, ["sandbox", "build-tasks", str(tmp_path), "--json"])
    assert plain.exit_code == 0 and json.loads(plain.output)["ready"] == 0, plain.output
    strict = CliRunner().invoke(app, ["sandbox", "build-tasks", str(tmp_path), "--strict"])
    assert strict.exit_code == 1 and "1 of 1 task images could not be built" in strict.output, strict.output


def test_run_tests_runs_test_sh_for_a_harbor_task(built):
    # the entry point of the `task_tests` verifier and the terminal episode env: a candidate, then the tests
    from pivot_sandbox.tasks.verification import run_tests

    _, report, _, backend = built["py-greeting"]
    spec = SandboxSpec(image=report.image, workdir=report.workdir, user="root", shell="/bin/bash")
    expert = "echo 'hello, harbor' > /app/greeting.txt"
    good = run_tests(backend, TASKS / "py-greeting", spec, [], [expert], 300.0)
    assert good.passed and good.counts == {"PASSED": 2, "FAILED": 0, "SKIPPED": 0}, good
    destructive = run_tests(backend, TASKS / "py-greeting", spec, [], [expert + " && rm -rf /app/seed.txt"], 300.0)
    assert destructive.ran and not destructive.passed, destructive
