"""SWE-bench instances: rows loaded and checked, repositories checked out alone, test logs graded by `swebench`.

The unit tests write their own instance rows and git bundles (a made-up `example/widget` repository) and
grade two recorded test logs of psf__requests-2931 (`tests/data/swe/`: SWE-bench Verified test output,
a benchmark's data: tests only). The Docker tests build psf__requests-2931 from the shared data
(`swe/verified/`: minutes the first time, then cached by content hash) and check it as SWE-bench validates
an instance: the base commit fails FAIL_TO_PASS, the gold patch passes it and keeps PASS_TO_PASS, the
recorded agent run's submission resolves it, a wrong edit does not, and an edit made in a live session is
graded where it was made.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pivot_sandbox.errors import TaskError
from pivot_sandbox.tasks.swe import checkout, load_instance, load_instances, split_pins
from pivot_sandbox.tasks.swe_image import find_python
from pivot_sandbox.tasks.swe_tests import eval_script, grade

RECORDED = Path(__file__).resolve().parents[1] / "data" / "swe" / "psf__requests-2931.logs.json"
TEST_PATCH = (
    "diff --git a/tests/test_widget.py b/tests/test_widget.py\n--- a/tests/test_widget.py\n"
    "+++ b/tests/test_widget.py\n@@ -1 +1,2 @@\n def test_a(): pass\n+def test_b(): pass\n"
)


def _row(**over: object) -> dict:
    row = {
        "repo": "example/widget",
        "instance_id": "example__widget-1",
        "base_commit": "0" * 40,
        "patch": "diff --git a/widget.py b/widget.py\n",
        "test_patch": TEST_PATCH,
        "problem_statement": "widgets break",
        "version": "1.0",
        "FAIL_TO_PASS": json.dumps(["tests/test_widget.py::test_b"]),
        "PASS_TO_PASS": json.dumps(["tests/test_widget.py::test_a"]),
        "python": "3.9.20",
        "pip_pins": ["pip==24.2", "pytest==7.4.4", "setuptools==75.1.0", "backports.zoneinfo==0.2.1"],
        "harness": {
            "spec": {"python": "3.9", "install": "python -m pip install -e .", "pre_install": ["true"]},
            "test_directives": ["tests/test_widget.py"],
            "test_command": "pytest -rA tests/test_widget.py",
            "log_parser": "parse_log_pytest",
        },
        "bundle": "repos/example__widget.bundle",
        "bundle_tag": "example__widget-1",
        "bundle_commit": "1" * 40,
        "base_tree": "2" * 40,
        "scm_pretend_version": None,
        "resolved": True,
    }
    return {**row, **over}


def _write(path: Path, rows: list[dict | str]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_a_row_loads_as_a_typed_instance(tmp_path):
    inst = load_instance("example__widget-1", _write(tmp_path / "instances.jsonl", [_row()]))
    assert inst.fail_to_pass == ("tests/test_widget.py::test_b",) and inst.pass_to_pass == (
        "tests/test_widget.py::test_a",
    )
    assert inst.python_minor == (3, 9) and inst.test_files == ("tests/test_widget.py",)
    assert inst.harness.pre_install == ("true",) and inst.harness.log_parser == "parse_log_pytest"
    assert inst.bundle == tmp_path / "repos" / "example__widget.bundle" and inst.scm_pretend_version == ""
    assert inst.source.endswith("instances.jsonl:1") and inst.trajectory is None and inst.default_branch == "main"


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"FAIL_TO_PASS": "not json"}, "instances.jsonl:2: not a valid SWE-bench instance"),
        ({"PASS_TO_PASS": json.dumps([1, 2])}, "PASS_TO_PASS: expected a list of strings"),
        ({"python": "three"}, "python: expected a version"),
        ({"harness": {"spec": {}}}, "install: expected a non-empty string"),
        ({"instance_id": None}, "instance_id: expected a non-empty string"),
    ],
)
def test_a_bad_row_names_the_file_the_line_and_the_field(tmp_path, bad, says):
    path = _write(tmp_path / "instances.jsonl", [_row(instance_id="example__widget-0"), _row(**bad)])
    with pytest.raises(TaskError, match="instances.jsonl:2") as err:
        load_instances(path)
    assert says in str(err.value)


def test_a_line_that_is_not_json_and_an_unknown_id_are_named(tmp_path):
    with pytest.raises(TaskError, match=r"instances.jsonl:3: not a valid SWE-bench instance"):
        load_instances(_write(tmp_path / "instances.jsonl", [_row(), "", "{oops"]))
    with pytest.raises(TaskError, match="did you mean example__widget-1"):
        load_instance("example__widget-11", _write(tmp_path / "ok.jsonl", [_row()]))


def test_pins_bootstrap_first_and_backports_only_where_the_standard_library_lacks_them(tmp_path):
    inst = load_instance("example__widget-1", _write(tmp_path / "instances.jsonl", [_row()]))
    on_310 = split_pins(inst, (3, 10))
    assert on_310.bootstrap == ("pip==24.2", "setuptools==75.1.0") and on_310.rest == ("pytest==7.4.4",)
    assert on_310.dropped == ("backports.zoneinfo==0.2.1",)
    assert split_pins(inst, (3, 8)).rest == ("pytest==7.4.4", "backports.zoneinfo==0.2.1")


def test_the_eval_script_is_swebench_s_with_the_test_exit_status_recorded(tmp_path):
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT, TEST_EXIT_CODE

    script = eval_script(load_instance("example__widget-1", _write(tmp_path / "i.jsonl", [_row()])))
    lines = script.splitlines()
    reset = f"git checkout {'1' * 40} tests/test_widget.py"
    assert lines[:2] == ["#!/bin/bash", "set -uxo pipefail"] and lines.count(reset) == 2
    start, end = lines.index(f": '{START_TEST_OUTPUT}'"), lines.index(f": '{END_TEST_OUTPUT}'")
    assert lines[start + 1] == "pytest -rA tests/test_widget.py" and lines.index(reset) < start < end
    assert any(TEST_EXIT_CODE in line for line in lines[end:]) and TEST_PATCH.strip() in script


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _bundle(tmp_path: Path, trees: dict[int, dict[str, str]]) -> dict[int, tuple[str, str]]:
    """`repos/example__widget.bundle` with one orphan commit per instance number, tagged: {n: (commit, tree)}."""
    src = tmp_path / "src"
    src.mkdir()
    _git(src, "init", "-q")
    commits = {}
    for n, files in trees.items():
        _git(src, "checkout", "-q", "--orphan", f"b{n}")
        _git(src, "rm", "-rfq", "--ignore-unmatch", ".")
        for name, text in files.items():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_text(text)
        _git(src, "add", ".")
        _git(src, "commit", "-qm", f"example__widget-{n}")
        _git(src, "tag", f"example__widget-{n}")
        commits[n] = (_git(src, "rev-parse", "HEAD"), _git(src, "rev-parse", "HEAD^{tree}"))
    (tmp_path / "repos").mkdir()
    _git(src, "bundle", "create", str(tmp_path / "repos" / "example__widget.bundle"), "--tags")
    return commits


def test_a_checkout_holds_its_own_tree_and_nothing_of_another_instance(tmp_path):
    commits = _bundle(tmp_path, {1: {"widget.py": "# old\n"}, 2: {"widget.py": "# the later fix\n"}})
    rows = [_row(bundle_commit=commits[1][0], base_tree=commits[1][1])]
    inst = load_instance("example__widget-1", _write(tmp_path / "instances.jsonl", rows))
    repo = checkout(inst, tmp_path / "repo")
    assert (repo / "widget.py").read_text() == "# old\n" and _git(repo, "rev-list", "--all") == commits[1][0]
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True)
    assert b"later fix" not in objects.stdout and b"# old" in objects.stdout
    assert _git(repo, "tag") == "" and _git(repo, "branch", "--show-current") == "main"
    wrong = load_instance("example__widget-1", _write(tmp_path / "w.jsonl", [_row(bundle_commit=commits[2][0])]))
    with pytest.raises(TaskError, match="expected"):
        checkout(wrong, tmp_path / "repo2")


def test_the_folders_a_later_tree_no_longer_has_are_found_top_most_first(tmp_path):
    """SWE-bench's reset recreates what its clone's tip lacks, 755: the newest instance's tree stands for the tip."""
    from pivot_sandbox.tasks.swe import removed_later
    from pivot_sandbox.tasks.swe_image import instance_text

    trees = {5: ("elisp/a/x.el", "pkg/m.py", "docs/old/y.txt"), 12: ("pkg/m.py", "docs/z.txt")}
    commits = _bundle(tmp_path, {n: {name: name for name in files} for n, files in trees.items()})
    rows = [
        _row(instance_id=f"example__widget-{n}", bundle_tag=f"example__widget-{n}", bundle_commit=c, base_tree=t)
        for n, (c, t) in commits.items()
    ]
    path = _write(tmp_path / "instances.jsonl", rows)
    old, newest = load_instance("example__widget-5", path), load_instance("example__widget-12", path)
    # by pull-request number, not by name: 12 is newer than 5 though "12" < "5" as text
    assert removed_later(old) == ("docs/old", "elisp") and removed_later(newest) == ()
    text = instance_text("env", old, removed_later(old))
    assert "for d in /testbed/docs/old /testbed/elisp; do" in text and "chmod 755" in text
    assert "chmod 755" not in instance_text("env", newest, removed_later(newest))


def test_the_highest_patch_release_of_the_minor_is_chosen(tmp_path):
    for version in ("3.9.1", "3.9.18", "3.10.13", "3.9.20"):
        (tmp_path / version / "bin").mkdir(parents=True)
        if version != "3.9.20":  # a folder without its interpreter is not one
            (tmp_path / version / "bin" / f"python{version.rsplit('.', 1)[0]}").write_text("")
    assert find_python((3, 9), tmp_path).name == "3.9.18"
    with pytest.raises(TaskError, match=r"no CPython 3\.7 in .*pyenv install 3\.7"):
        find_python((3, 7), tmp_path)


@pytest.fixture(scope="module")
def recorded():
    """Two real test logs of psf__requests-2931 (base commit; gold patch) and its instance row's grading fields."""
    data = json.loads(RECORDED.read_text())
    return data


def _recorded_instance(tmp_path: Path, data: dict):
    row = _row(**data["instance"], test_patch=TEST_PATCH, pip_pins=[], bundle_commit="1" * 40)
    return load_instance(data["instance"]["instance_id"], _write(tmp_path / "i.jsonl", [row]))


def test_a_recorded_log_is_graded_as_swebench_grades_it(tmp_path, recorded):
    inst = _recorded_instance(tmp_path, recorded)
    before = grade(inst, recorded["logs"]["before"], "")
    assert before.resolved is False and before.fail_to_pass["failure"] == [
        "test_requests.py::TestRequests::test_binary_put"
    ]
    gold = grade(inst, recorded["logs"]["gold"], inst.patch)
    assert gold.resolved is False and gold.passed("fail_to_pass") == "1/1" and gold.passed("pass_to_pass") == "82/84"
    tarpit = sorted(gold.pass_to_pass["failure"])
    assert tarpit == [
        "test_requests.py::TestTimeout::test_connect_timeout",
        "test_requests.py::TestTimeout::test_total_timeout_connect",
    ]
    offline = grade(inst, recorded["logs"]["gold"], inst.patch, exclude=tarpit)
    assert (
        offline.resolved is True and offline.passed("pass_to_pass") == "82/82" and set(offline.excluded) == set(tarpit)
    )


def test_a_patch_that_did_not_apply_and_a_log_without_tests_are_never_graded(tmp_path, recorded):
    from swebench.harness.constants import APPLY_PATCH_FAIL

    inst = _recorded_instance(tmp_path, recorded)
    failed = grade(inst, f"error: patch failed\n{APPLY_PATCH_FAIL}\n", "diff")
    assert failed.resolved is None and failed.applied is False and "did not apply" in failed.reason
    empty = grade(inst, "bash: pytest: command not found\n", "")
    assert empty.resolved is None and empty.applied and "no gradable test output" in empty.reason
    # the end of the log cut off (the run was stopped): the markers are missing, so nothing is graded
    cut = recorded["logs"]["gold"].split(">>>>> End Test Output")[0]
    assert grade(inst, cut, inst.patch).resolved is None


# --- on the real Docker engine, from the shared data ---------------------------------------------------------

INSTANCE = "psf__requests-2931"
TARPIT = (
    "test_requests.py::TestTimeout::test_connect_timeout",
    "test_requests.py::TestTimeout::test_total_timeout_connect",
)
WRONG_EDIT = (  # a change to the right function that leaves the bug in place
    "diff --git a/requests/models.py b/requests/models.py\n--- a/requests/models.py\n+++ b/requests/models.py\n"
    '@@ -81,6 +81,7 @@ class RequestEncodingMixin(object):\n         """\n \n'
    "         if isinstance(data, (str, bytes)):\n+            data = data\n"
    "             return to_native_string(data)\n"
    "         elif hasattr(data, 'read'):\n             return data\n"
)


@pytest.fixture(scope="module")
def requests_2931():
    """(instance, backend, build report) of psf__requests-2931; skips without the shared data or the interpreter."""
    from pivot_sandbox import docker_backend
    from pivot_sandbox.tasks.swe import default_instances
    from pivot_sandbox.tasks.swe_image import swe_image
    from pivot_sandbox.tasks.swe_tests import SWE_LIMITS

    path = default_instances()
    if path is None:
        message = "needs the shared data (swe/verified/instances.jsonl: set PIVOT_SHARED_DATA)"
        if os.environ.get("PIVOT_REQUIRE_SHARED_DATA", "") not in ("", "0"):
            pytest.fail(message)
        pytest.skip(message)
    instance = load_instance(INSTANCE, path)
    try:
        find_python(instance.python_minor)
    except TaskError as e:  # a laptop without pyenv's interpreters; this machine kind (CI) has them: a failure there
        if os.environ.get("PIVOT_REQUIRE_SHARED_DATA", "") not in ("", "0"):
            pytest.fail(str(e))
        pytest.skip(str(e))
    backend = docker_backend(**SWE_LIMITS)
    report = swe_image(backend.client, instance)
    assert report.status in ("built", "cached"), report.reason
    return instance, backend, report


@pytest.fixture(scope="module")
def validity(requests_2931):
    from pivot_sandbox.tasks.swe_tests import validate_instance

    instance, backend, report = requests_2931
    return validate_instance(backend, instance, report.image)


@pytest.mark.docker
@pytest.mark.slow
def test_the_image_is_reused_and_holds_the_base_commit_without_the_tests(requests_2931, docker_client):
    from pivot_sandbox.tasks.swe_image import swe_image

    instance, backend, report = requests_2931
    again = swe_image(backend.client, instance)
    assert again.status == "cached" and again.image == report.image and again.seconds < 10
    probe = (
        "git status --porcelain; git log --format=%s; python --version; command -v python; "
        "grep -c test_binary_put test_requests.py; cat /opt/pivot-swe/pins-mode"
    )
    out = docker_client.containers.run(report.image, ["bash", "-c", probe], remove=True, network_mode="none")
    lines = out.decode().split()
    assert lines[:2] == ["SWE-bench", INSTANCE] and lines[2:4] == ["Python", "3.9.18"]
    assert lines[4:] == ["/opt/miniconda3/envs/testbed/bin/python", "0", "resolved"]


@pytest.mark.docker
@pytest.mark.slow
def test_the_base_fails_fail_to_pass_and_the_gold_patch_passes_it_offline(validity):
    assert validity.valid, validity.reason
    assert validity.before.fail_to_pass["failure"] == ["test_requests.py::TestRequests::test_binary_put"]
    assert validity.gold.passed("fail_to_pass") == "1/1" and not validity.regressions
    # the tests connect to an unroutable address and expect a timeout: with no network they fail either way
    assert sorted(validity.offline_failures) == sorted(TARPIT)
    assert validity.gold.passed("pass_to_pass") == "82/84"


@pytest.mark.docker
@pytest.mark.slow
def test_the_recorded_submission_resolves_and_a_wrong_edit_does_not(requests_2931, validity):
    from pivot_sandbox.tasks.swe_tests import run_swe_tests

    instance, backend, report = requests_2931
    submission = json.loads(instance.trajectory.read_text())["info"]["submission"]
    agent = run_swe_tests(backend, instance, submission, image=report.image, exclude=validity.offline_failures)
    assert agent.resolved is True and instance.resolved is True, agent.reason
    wrong = run_swe_tests(backend, instance, WRONG_EDIT, image=report.image, exclude=validity.offline_failures)
    assert wrong.applied and wrong.resolved is False and wrong.fail_to_pass["failure"]


@pytest.mark.docker
@pytest.mark.slow
def test_an_edit_made_in_a_live_session_is_graded_where_it_was_made(requests_2931, validity):
    from pivot_sandbox.replay.session import open_session
    from pivot_sandbox.tasks.swe_tests import run_swe_tests, swe_spec

    instance, backend, report = requests_2931
    session = open_session(backend, swe_spec(report.image), [])
    try:
        assert session.run("git apply - <<'EOF'\n" + instance.patch + "EOF").exit_code == 0
        outcome = run_swe_tests(session, instance, exclude=validity.offline_failures)
        assert outcome.resolved is True, outcome.reason
        # the test patch was there for the run only: the tree holds the agent's edit alone
        assert session.run("git status --porcelain").output.split() == ["M", "requests/models.py"]
        connect = "python -c 'import socket; socket.create_connection((\"10.255.255.1\", 80), 3)'"
        assert "Network is unreachable" in session.run(connect).output  # no network: the tarpit fails at once
    finally:
        session.close()


@pytest.mark.docker
@pytest.mark.slow
def test_an_old_requests_suite_is_graded_against_a_local_httpbin_with_no_network(requests_2931, docker_client):
    """psf__requests-1766's tests send their requests to httpbin.org: 0/6 FAIL_TO_PASS either way offline before."""
    from pivot_sandbox.tasks.swe import default_instances
    from pivot_sandbox.tasks.swe_image import swe_image
    from pivot_sandbox.tasks.swe_tests import validate_instance

    _, backend, _ = requests_2931
    instance = load_instance("psf__requests-1766", default_instances())
    report = swe_image(backend.client, instance)  # the environment is 2931's: only the instance layer is built
    assert report.status in ("built", "cached"), report.reason
    v = validate_instance(backend, instance, report.image)
    assert v.valid, v.reason
    assert v.before.fail_to_pass["failure"] and v.gold.passed("fail_to_pass") == "6/6"
    assert "HTTPBIN_URL=http://127.0.0.1:8080/" in eval_script(instance)
    # httpbin lives apart: the tested environment does not get its Flask
    probe = "python -c 'import flask' 2>&1 | tail -1; /opt/pivot-services/httpbin/bin/python -c 'import httpbin'"
    out = docker_client.containers.run(report.image, ["bash", "-c", probe], remove=True, network_mode="none")
    assert "No module named 'flask'" in out.decode()


@pytest.mark.docker
@pytest.mark.slow
def test_a_validity_is_kept_by_what_it_depends_on_and_a_damaged_entry_runs_again(requests_2931, validity):
    import time

    from pivot_sandbox.tasks.swe_tests import _validity_file, validate_instance

    instance, backend, report = requests_2931
    started = time.monotonic()
    again = validate_instance(backend, instance, report.image)
    assert time.monotonic() - started < 3  # no test run: two runs take 10 s and more
    assert (again.valid, again.offline_failures) == (validity.valid, validity.offline_failures)
    assert again.gold.passed("pass_to_pass") == validity.gold.passed("pass_to_pass")
    path = _validity_file(backend, instance, report.image)
    path.write_text('{"before": ')  # cut short: read as no entry, run again, kept anew
    rerun = validate_instance(backend, instance, report.image)
    assert rerun.valid and rerun.before.seconds > 0.5 and "FAIL_TO_PASS" in path.read_text()


@pytest.mark.docker
@pytest.mark.slow
def test_pivot_sandbox_build_swe_builds_validates_and_names_what_is_wrong(requests_2931, validity, tmp_path):
    from typer.testing import CliRunner

    from pivot_cli import app
    from pivot_sandbox.tasks.swe import default_instances

    instance, _, report = requests_2931
    runner = CliRunner()
    args = ["sandbox", "build-swe", str(default_instances()), "--only", INSTANCE, "--validate", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    (row,) = out["instances"]
    assert (out["built"], out["valid"]) == (1, 1) and row["image"] == report.image and row["status"] == "cached"
    assert sorted(row["offline_failures"]) == sorted(validity.offline_failures)
    bad = runner.invoke(app, ["sandbox", "build-swe", str(_write(tmp_path / "bad.jsonl", ['{"repo": 1}']))])
    assert bad.exit_code == 1 and "bad.jsonl:1" in bad.output
    unknown = runner.invoke(app, ["sandbox", "build-swe", str(default_instances()), "--only", "nope__nope-1"])
    assert unknown.exit_code == 1 and "nope__nope-1" in unknown.output
