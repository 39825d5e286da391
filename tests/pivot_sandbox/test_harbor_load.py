"""Harbor task folders read and checked, without Docker: task.toml versions and errors, test.sh's plan, rewards.

The task folders under tests/data/harbor_tasks are written for these tests (not Terminal-Bench data).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pivot_sandbox.errors import TaskError
from pivot_sandbox.images.bases import map_base
from pivot_sandbox.tasks.harbor import harbor_limits, load_harbor_task, read_task_toml
from pivot_sandbox.tasks.harbor_plan import read_ctrf, read_rewards, verifier_plan
from pivot_sandbox.tasks.terminal_bench import load_task, task_dirs

TASKS = Path(__file__).resolve().parents[1] / "data" / "harbor_tasks"
REGISTRIES = frozenset({"pypi.org", "files.pythonhosted.org", "deb.debian.org"})


def test_load_task_reads_either_layout_and_task_dirs_lists_harbor_folders():
    task = load_task(TASKS / "py-greeting")
    assert task.harbor is not None and task.task_id == "py-greeting"
    assert task.instruction.startswith("Write a file `/app/greeting.txt`")
    assert task.context == TASKS / "py-greeting" / "environment"
    assert task.dockerfile.startswith("FROM python:3.13-slim-bookworm")
    assert task.tests.timeout == 300.0 and task.agent_timeout == 300.0 and not task.tests.problem
    assert [p.name for p in task_dirs(TASKS)] == ["py-greeting", "staged-words", "ubuntu-done-count"]


def test_schema_1_0_and_1_3_read_alike():
    old = read_task_toml(TASKS / "py-greeting" / "task.toml")  # version = "1.0", memory = "1G"
    new = read_task_toml(TASKS / "ubuntu-done-count" / "task.toml")  # schema_version = "1.3", memory_mb
    assert (old.schema_version, old.memory_mb, old.storage_mb, old.cpus) == ("1.0", 1024, 2048, 1.0)
    assert (new.schema_version, new.memory_mb, new.storage_mb, new.network_mode) == ("1.3", 1024, 2048, "public")
    assert old.docker_image == "example/py-greeting:1" and old.metadata["difficulty"] == "easy"
    assert new.raw["task"]["name"] == "pivot-gym/ubuntu-done-count"  # keys not read here are kept
    limits = harbor_limits(old)
    assert limits["memory"] == "1024m" and limits["replay_timeout"] == 300.0 and limits["action_timeout"] == 300.0


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('version = "1.0"\n[verifier]\ntimeout_sec = "soon"\n', "[verifier].timeout_sec"),
        ("[agent]\ntimeout_sec = -5\n", "[agent].timeout_sec"),
        ('[environment]\nmemory = "lots"\n', "[environment].memory"),
        ('[environment]\nmemory = "2G"\nmemory_mb = 1024\n', "[environment].memory"),
        ("[environment]\ncpus = true\n", "[environment].cpus"),
        ('[environment]\nnetwork_mode = "sometimes"\n', "[environment].network_mode"),
        ('[environment]\nallow_internet = "yes"\n', "[environment].allow_internet"),
        ("[verifier]\nenv = 3\n", "[verifier].env"),
        ('verifier = "fast"\n', "[verifier]"),
        ("schema_version = 1.3\n", "schema_version"),
        ("[verifier\ntimeout_sec = 1\n", "not valid TOML"),
    ],
)
def test_a_malformed_task_toml_is_refused_naming_file_and_key(tmp_path, text, named):
    folder = tmp_path / "t"
    shutil.copytree(TASKS / "py-greeting", folder)
    (folder / "task.toml").write_text(text)
    with pytest.raises(TaskError) as err:
        load_task(folder)
    assert str(folder / "task.toml") in str(err.value) and named in str(err.value), err.value


def test_a_folder_without_instruction_or_tests_says_so(tmp_path):
    folder = tmp_path / "t"
    shutil.copytree(TASKS / "py-greeting", folder)
    (folder / "tests" / "test.sh").unlink()
    assert "no tests/test.sh" in load_harbor_task(folder).tests.problem
    (folder / "instruction.md").unlink()
    with pytest.raises(TaskError, match="no instruction.md"):
        load_harbor_task(folder)


def test_allow_internet_maps_to_a_network_mode(tmp_path):
    path = tmp_path / "task.toml"
    path.write_text("[environment]\nallow_internet = false\n")
    assert read_task_toml(path).network_mode == "no-network"


def test_the_verifier_plan_of_both_test_scripts():
    uvx = verifier_plan(TASKS / "py-greeting" / "tests", REGISTRIES)
    assert uvx.apt == ("curl",) and uvx.uv == "0.9.5" and not uvx.problem
    assert uvx.uv_steps == ("uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --version",)
    pip = verifier_plan(TASKS / "ubuntu-done-count" / "tests", REGISTRIES)
    assert pip.apt == ("bc",) and pip.uv is None and not pip.uv_steps
    assert pip.pip == ("pip install --break-system-packages pytest==8.4.1 pytest-json-ctrf==0.3.5",)


def test_packages_a_test_file_installs_at_test_time_are_in_the_plan(tmp_path):
    # TB2's git-multibranch: its test writes a verify.sh that runs apt-get install in the offline test run
    tests = tmp_path / "tests"
    shutil.copytree(TASKS / "py-greeting" / "tests", tests)
    (tests / "test_deploy.py").write_text(
        'def test_x():\n    open("v.sh", "w").write("""\napt-get update\n'
        'DEBIAN_FRONTEND=noninteractive apt-get install -y curl expect $EXTRA openssh-client\n""")\n'
    )
    (tests / "helper.sh").write_text("sudo apt install --no-install-recommends -y jq\n")
    assert verifier_plan(tests, REGISTRIES).apt == ("curl", "jq", "expect", "openssh-client")  # files in order


def test_a_test_that_needs_an_unreachable_host_is_not_verifiable_offline(tmp_path):
    tests = tmp_path / "tests"
    shutil.copytree(TASKS / "py-greeting" / "tests", tests)
    with open(tests / "test.sh", "a") as f:
        f.write("git clone https://example.org/fixtures.git /tmp/fixtures\n")
    assert "example.org" in verifier_plan(tests, REGISTRIES).problem
    (tests / "test.sh").write_text((TASKS / "py-greeting" / "tests" / "test.sh").read_text())
    (tests / "test_fetch.py").write_text('URL = "https://example.org/data.zip"\n\ndef test_x():\n    download(URL)\n')
    assert "example.org" in verifier_plan(tests, REGISTRIES).problem


def test_reward_json_is_read_before_reward_txt():
    assert read_rewards('{"reward": 1.0, "label": "x"}', "0").reward == 1.0
    got = read_rewards('{"reward": 0.25, "style": 0.75}', None)
    assert (got.reward, dict(got.rewards), got.source, got.dropped) == (
        0.25,
        {"reward": 0.25, "style": 0.75},
        "reward.json",
        (),
    )
    assert read_rewards('{"a": 0.5, "b": 1.0}', None).reward == 0.75  # no "reward" key: their mean
    assert read_rewards('{"style": 1.0}', "0.5").rewards == {"style": 1.0, "reward": 0.5}  # Harbor's fork merges
    assert read_rewards(None, " 1\n").reward == 1.0 and read_rewards(None, "0.5").source == "reward.txt"


@pytest.mark.parametrize(
    ("json_text", "txt", "error"),
    [
        ("not json", "1", "not JSON"),  # a broken reward.json is an error even beside a reward.txt
        ("{}", None, "non-empty object"),
        ('{"label": "x"}', None, "no number"),
        (None, "", "empty"),
        (None, "yes", "expected a float"),
        (None, "nan", "finite"),
        (None, None, "neither"),
    ],
)
def test_unreadable_rewards_are_errors_not_zeros(json_text, txt, error):
    got = read_rewards(json_text, txt)
    assert got.reward is None and error in got.error


def test_ctrf_results_go_into_the_details():
    tests = '[{"name": "a", "status": "passed", "duration": 1}, {"name": "b", "status": "failed"}]'
    text = '{"results": {"summary": {"tests": 2, "passed": 1, "failed": 1}, "tests": ' + tests + "}}"
    assert read_ctrf(text) == {
        "summary": {"tests": 2, "passed": 1, "failed": 1},
        "tests": [{"name": "a", "status": "passed"}, {"name": "b", "status": "failed"}],
    }
    assert read_ctrf(None) == {} and "error" in read_ctrf("[")


def test_the_bases_tb2_names_have_stand_ins():
    assert map_base("debian:13.0-slim").tag == "pivot-gym/base:debian-trixie"
    assert map_base("python:3.11").packages and map_base("python:3.11").root == "pivot-gym/root:bookworm"
    assert map_base("python:3.13-slim-bookworm").root == "pivot-gym/root:trixie"  # the tests' `uvx -p 3.13`
    assert map_base("python:3.11-slim").tag == "pivot-gym/base:python-3-slim-bookworm"
    assert "Debian trixie" in map_base("ubuntu:24.04").note
