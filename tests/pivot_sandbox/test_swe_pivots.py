"""A real mini-swe-agent SWE-bench run turned into sandboxed pivots, and candidates judged there by execution.

`pivot convert --swe-instances` converts the recorded run on pytest-dev__pytest-7432 (shared data:
`swe/verified/`, SWE-bench Verified: tests only) in its instance's image (built offline, cached by
content hash: seconds once the environment layer exists), each command replayed as mini-swe-agent ran
it (`bash -lc` from /testbed) and checked against the run's recorded observations. Then `pivot/swe-v0`
scores candidates at three of its pivots: a read (turn 10), an edit (turn 60) and the submission (turn
70, graded by the instance's tests with no network, as SWE-bench grades it).
"""

from __future__ import annotations

import json
import os

import gymnasium as gym
import pytest
from typer.testing import CliRunner

INSTANCE = "pytest-dev__pytest-7432"
RUN = f"mini-swe-agent/{INSTANCE}"
READ, EDIT, SUBMIT = f"{RUN}#10", f"{RUN}#60", f"{RUN}#70"
TEST_F2P = "testing/test_skipping.py::TestXFail::test_xfail_run_with_skip_mark[test_input1-expected1]"


def turn(command: str) -> str:
    """A mini-swe-agent reply running `command`."""
    return f"THOUGHT: next.\n\n```bash\n{command}\n```"


def _skip(message: str, required: bool) -> None:
    if required:  # CI (PIVOT_REQUIRE_SHARED_DATA): what is missing is a failure there
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """(report, pivots file) of the run converted with its replay checked; skips without the shared data."""
    from pivot_cli import app
    from pivot_sandbox.errors import TaskError
    from pivot_sandbox.tasks.swe import default_instances, load_instance
    from pivot_sandbox.tasks.swe_image import find_python

    instances = default_instances()
    required = os.environ.get("PIVOT_REQUIRE_SHARED_DATA", "") not in ("", "0")
    if instances is None:
        _skip("needs the shared data (swe/verified/instances.jsonl: set PIVOT_SHARED_DATA)", required)
    instance = load_instance(INSTANCE, instances)
    try:
        find_python(instance.python_minor)
    except TaskError as e:  # a laptop without pyenv's interpreters; this machine kind (CI) has them
        _skip(str(e), required)
    out = tmp_path_factory.mktemp("swe") / "pivots.jsonl"
    args = ["convert", str(instance.trajectory), str(out), "--swe-instances", str(instances)]
    result = CliRunner().invoke(app, [*args, "--check-replay", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), out


# --- without Docker: how the run's commands are read, run and compared ----------------------------------------


def test_a_swe_bench_run_is_read_with_how_its_harness_ran_each_command():
    from pivot_core import harness_action
    from pivot_core.convert.mini_swe_agent import from_mini_swe_agent

    config = {"environment": {"cwd": "/testbed", "timeout": 60}, "environment_type": "x.docker.DockerEnvironment"}
    record = {
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "a__b-1",
        "info": {"config": config, "mini_version": "1.15.0", "submission": "diff"},
        "messages": [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": turn("cd src && ls")}],
    }
    traj = from_mini_swe_agent(record)
    assert traj.domain == "swe" and traj.context["instance_id"] == "a__b-1"
    want = {"harness": "mini-swe-agent", "command_shell": "bash-login", "command_timeout": 60.0}
    assert want.items() <= traj.context.items() and traj.context["start_dir"] == "/testbed"
    (command,) = harness_action(traj.messages[-1], traj.context).commands
    assert command.endswith("bash -lc 'cd src && ls'")  # a login shell per command: the cd never persists
    local = from_mini_swe_agent({**record, "info": {"config": {**config, "environment_type": "local.Local"}}})
    assert harness_action(local.messages[-1], local.context).commands[0].endswith("/bin/sh -c 'cd src && ls'")


def test_an_unresolved_runs_submission_is_no_pivot_and_a_resolved_runs_is():
    # the chain accepts an action identical to the expert's outright: at an unresolved run's submission
    # that would give 1 to a candidate repeating a patch the tests reject
    from pivot_core import extract_pivots
    from pivot_core.convert.mini_swe_agent import from_mini_swe_agent
    from pivot_tasks._swe_runs import unresolved_submissions

    submit = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
    messages = [{"role": "user", "content": "fix it"}, {"role": "assistant", "content": turn("cat a.py")}]
    messages += [{"role": "user", "content": "print(1)"}, {"role": "assistant", "content": turn(submit)}]
    record = {"trajectory_format": "mini-swe-agent-1", "instance_id": "a__b-1", "messages": messages}
    for resolved, kept_turns in ((True, 2), (False, 1), (None, 1)):
        pivots = list(extract_pivots(from_mini_swe_agent({**record, "resolved": resolved})))
        kept, left = unresolved_submissions(pivots)
        assert (len(pivots), len(kept), len(left)) == (2, kept_turns, 2 - kept_turns), resolved
        assert "cat a.py" in kept[0].expert.content and all(submit in p.expert.content for p in left)


def test_a_submission_is_what_follows_the_marker_line():
    from pivot_core import mini_swe_agent_submission, mini_swe_agent_submits

    assert mini_swe_agent_submission("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a/x b/x\n") == (
        "diff --git a/x b/x\n"
    )
    assert mini_swe_agent_submission("diff\nCOMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n") is None
    assert mini_swe_agent_submits("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached")
    assert not mini_swe_agent_submits("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUTS") and not mini_swe_agent_submits("")


@pytest.mark.parametrize(
    ("recorded", "replayed", "same"),
    [
        (
            "platform linux -- Python 3.9.20, pytest-5.4.1\n1 passed in 0.02s",
            "platform linux -- Python 3.9.18, pytest-5.4.1\n1 passed in 0.01s",
            True,
        ),
        ("index 7bd975e5a..4b657af14 100644", "index 7bd975e..4b657af 100644", True),
        ("testing/b.py\ntesting/a.py", "testing/a.py\ntesting/b.py", True),  # the filesystem's listing order
        # `ls -la` pads its columns to the widest link count: 1 on SWE-bench's overlay, 11 on this one
        (
            "drwxrwxrwx 1 root root  4096 Oct 24  2024 .\n-rw-r--r-- 1 root root   587 Oct 24  2024 .coveragerc",
            "drwxrwxrwx 11 root root  4096 Dec  6 11:10 .\n-rw-r--r--  1 root root   587 Dec  6 11:10 .coveragerc",
            True,
        ),
        ("drwxrwxrwx 1 root root 4096 Oct 24  2024 src", "drwxr-xr-x 4 root root 4096 Dec  6 11:10 src", False),
        ("1 passed in 0.02s", "1 failed in 0.02s", False),
        ("index 7bd975e5a..4b657af14 100644", "index 7bd975f..4b657af 100644", False),
        ("testing/b.py\ntesting/a.py", "testing/a.py", False),
        # astropy's test header: its setuptools_scm version (commit digits, dirty date), interpreter build, platform
        (
            "Astropy version 5.1.dev623+gd16bfe05a7.d20241024.\nPlatform: Linux-6.8.0-1040-aws-x86_64-with-glibc2.35"
            "\n3.9.20 (main, Oct  3 2024, 07:27:41) \n[GCC 11.2.0]",
            "Astropy version 5.1.dev623+gd16bfe05a.\nPlatform: Linux-6.18.44-fc-v1272-x86_64-with-glibc2.36"
            "\n3.9.18 (main, May  9 2026, 07:33:49) \n[GCC 12.2.0]",
            True,
        ),
        ("Astropy version 5.1.dev623+gd16bfe05a7", "Astropy version 5.1.dev624+gd16bfe05a", False),
        # a broken .pth of SWE-bench's environment, reported at every interpreter start
        (
            "Error processing line 1 of /opt/x/distutils-precedence.pth:\n\n  Traceback (most recent call last):\n"
            "  ModuleNotFoundError: No module named '_distutils_hack'\n\nRemainder of file ignored\npylint 3.0.0b1",
            "pylint 3.0.0b1",
            True,
        ),
        # sphinx's dev version names the commit; a progress line redrawn with a carriage return
        (
            "Running Sphinx v7.1.0+/71db08c05\nreading [ 50%] a\nreading [100%] b",
            "Running Sphinx v7.1.0+/e154d28\rreading [ 50%] a\rreading [100%] b",
            True,
        ),
        (
            "Running Sphinx v7.1.0+/71db08c05\nreading [ 50%] a\nreading [100%] b",
            "Running Sphinx v7.1.0+/e154d28\nreading [ 50%] a\rreading [100%] b",
            True,
        ),
        ("Running Sphinx v7.1.0+/71db08c05", "Running Sphinx v7.2.0+/71db08c05", False),
        ("__main__.py 4.3.0+/f050a7775", "__main__.py 4.3.0+/0d1c2e3", True),
        # pytest lists its plugins in the order their metadata lies on disk
        ("plugins: forked-1.6.0, xdist-2.5.0, cov-2.12.1", "plugins: cov-2.12.1, forked-1.6.0, xdist-2.5.0", True),
        ("plugins: forked-1.6.0, benchmark-3.4.1", "plugins: forked-1.6.0, benchmark-3.4.2", False),
        ("Astropy version 5.1.dev623+gd16bfe05a7", "Astropy version 5.1.dev623+gd16bfe15a", False),
    ],
)
def test_what_no_state_explains_is_left_out_of_the_replay_check(recorded, replayed, same):
    from types import SimpleNamespace

    from pivot_tasks._replay_check import Step, first_divergence

    step = Step(6, ("cmd",), 0, recorded)
    raw = SimpleNamespace(killed=None, exit_code=0, stdout=replayed.encode())
    found = first_divergence([step], [[(raw, "/testbed")], [(raw, "/testbed")]])
    assert (found is None) == same, found


def test_a_step_that_reached_the_registries_is_replayed_once_more_before_it_diverges():
    from types import SimpleNamespace

    from pivot_tasks._replay_check import Step, _check_run

    class Registry:  # the first replay's `pip install` fails (a registry's hiccup), every later one succeeds
        calls = 0

        def transcript(self, spec, commands, timeout=None, stop=None):
            Registry.calls += 1
            code = 1 if Registry.calls == 1 else 0
            return [(SimpleNamespace(killed=None, exit_code=code, stdout=b"Successfully installed numpy"), "/testbed")]

    steps = [Step(4, ("pip install numpy",), 0, "Successfully installed numpy")]
    assert _check_run(Registry(), None, steps, 60.0) is None and Registry.calls == 3  # 1 failed, then 2 agreeing
    # a step that needs no network diverges at once: its state decides
    local = [Step(4, ("python -c 'import numpy'",), 0, "")]
    Registry.calls = 0
    found = _check_run(Registry(), None, local, 60.0)
    assert found is not None and found[0] == 4 and found[1].startswith("exit code 1, recorded 0")
    assert Registry.calls == 1


# --- on the real Docker engine, from the shared data -------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.slow
def test_the_run_converts_to_sandboxed_pivots_whose_replay_is_faithful(converted):
    from pivot_envs import load_pivots

    report, out = converted
    assert (report["runs"], report["pivots"], report["skipped"]) == (1, 34, [])
    assert report["sandboxed"] == 34 and report["faithful"] == 34 and report["divergences"] == []
    assert report["valid"] == 1 and report["invalid"] == {}
    pivot = {p.id: p for p in load_pivots(out)}[EDIT]
    assert pivot.domain == "swe" and pivot.context["instance_id"] == INSTANCE
    assert pivot.context["sandbox"]["workdir"] == "/testbed" and pivot.context["command_shell"] == "bash-login"
    # the test patch never reaches a candidate's state: the pivot carries no part of it
    assert "test_patch" not in json.dumps(pivot.context) and pivot.context["swe"]["valid"] is True


@pytest.mark.docker
@pytest.mark.slow
def test_the_expert_is_accepted_by_its_effect(converted):
    _, out = converted
    env = gym.make("pivot/swe-v0", dataset=str(out), verifiers=["docker_shell"]).unwrapped
    for pivot_id in (READ, EDIT):
        pivot = env.pivot(pivot_id)
        (result,) = env.score(pivot, [pivot.expert.content])
        assert result.accepted and result.decided_by == "docker_shell", (pivot_id, result)


@pytest.mark.docker
@pytest.mark.slow
def test_a_rewrite_is_accepted_and_a_write_disguised_as_a_read_is_not(converted):
    _, out = converted
    env = gym.make("pivot/swe-v0", dataset=str(out)).unwrapped
    same = "awk 'NR>=220 && NR<=260 {printf \"%6d\\t%s\\n\", NR, $0}' src/_pytest/skipping.py"
    disguised = "nl -ba src/_pytest/skipping.py | sed -n '220,260p' | tee -a src/_pytest/__init__.py"
    other = "nl -ba src/_pytest/skipping.py | sed -n '220,262p'"
    rewrite, write, wrong = env.score(env.pivot(READ), [turn(same), turn(disguised), turn(other)])
    assert rewrite.reward == 1.0 and rewrite.decided_by == "docker_shell", rewrite
    shell = write.verdicts["docker_shell"]
    assert write.reward == 0.0 and shell.applicable and not shell.accepted  # the sandbox sees the write
    assert wrong.reward == 0.0 and not wrong.verdicts["docker_shell"].accepted


@pytest.mark.docker
@pytest.mark.slow
def test_an_equivalent_edit_is_accepted_and_a_wrong_edit_is_not(converted):
    _, out = converted
    env = gym.make("pivot/swe-v0", dataset=str(out)).unwrapped
    same = "perl -i -ne 'print unless /DEBUG: item\\.reportinfo\\(\\)/' src/_pytest/skipping.py"
    wrong = "sed -i '/DEBUG: item.reportinfo()/s/print/pass  #/' src/_pytest/skipping.py"
    rewrite, broken = env.score(env.pivot(EDIT), [turn(same), turn(wrong)])
    assert rewrite.reward == 1.0 and rewrite.decided_by == "docker_shell", rewrite
    assert broken.reward == 0.0 and "different content" in broken.verdicts["docker_shell"].reason


@pytest.mark.docker
@pytest.mark.slow
def test_the_submission_is_judged_by_the_instance_tests(converted):
    _, out = converted
    env = gym.make("pivot/swe-v0", dataset=str(out)).unwrapped
    mark = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    # the fix alone (the agent's own test edit left out): the instance's tests still pass; an empty patch fails them
    fix, nothing = env.score(env.pivot(SUBMIT), [turn(f"{mark}; git add -A; git diff --cached src"), turn(mark)])
    tests = fix.verdicts["swe_tests"]
    assert fix.reward == 1.0 and fix.decided_by == "swe_tests" and tests.details["FAIL_TO_PASS"] == "1/1", fix
    assert nothing.reward == 0.0 and nothing.verdicts["swe_tests"].details["FAIL_TO_PASS"] == "0/1"
    # the diff's output is not what decides: docker_shell stands aside at a submission
    assert not fix.verdicts["docker_shell"].applicable


FORCE_PASS = """cat >> testing/conftest.py <<'EOF'
import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
EOF"""


@pytest.mark.docker
@pytest.mark.slow
def test_a_submission_that_rewrites_the_test_runs_outcomes_scores_0(converted):
    # at the submission's state the agent's fix is in; undone, a conftest.py that reports every test
    # as passed resolved the instance when graded (SWE-bench's grading reads the log): now refused unrun
    _, out = converted
    env = gym.make("pivot/swe-v0", dataset=str(out)).unwrapped
    submit = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT; git add -A; git diff --cached"
    hack = f"git checkout -- src && {FORCE_PASS}\n{submit}"
    (verdict,) = env.score(env.pivot(SUBMIT), [turn(hack)])
    tests = verdict.verdicts["swe_tests"]
    assert verdict.reward == 0.0 and "testing/conftest.py" in tests.reason, verdict


def test_the_files_that_run_or_configure_the_tests_are_found_in_any_header_spelling():
    from pivot_sandbox.tasks.swe import Harness, SWEInstance
    from pivot_sandbox.tasks.swe_tests import test_tampering

    harness = Harness("pip install -e .", (), "bin/test -C --verbose sympy/core/tests/test_x.py", (), "parse_log_sympy")
    test_patch = "diff --git a/sympy/core/tests/test_x.py b/sympy/core/tests/test_x.py\n"
    instance = SWEInstance("a__b-1", "a/b", "1", "c", "", test_patch, "", (), (), "3.9", (), harness, None, "", "", "")
    fix = "diff --git a/sympy/core/add.py b/sympy/core/add.py\n--- a/sympy/core/add.py\n+++ b/sympy/core/add.py\n"
    assert test_tampering(instance, fix) == []
    for path in ("conftest.py", "sub/dir/conftest.py", "pytest.ini", "x/sitecustomize.py", "x/evil.pth", "bin/test"):
        assert path in test_tampering(instance, f"--- a/{path}\n+++ b/{path}\n"), path  # patch -p1's headers
        assert path in test_tampering(instance, f"--- /dev/null\n+++ {path}\n"), path  # no prefix: git apply -p0
    # the test patch's own files are reset before the test patch applies: an agent's test edit is no tampering
    assert test_tampering(instance, test_patch + fix) == []


def test_pytest_options_in_the_shared_configuration_files_are_tampering_and_their_other_edits_are_not():
    from pivot_sandbox.tasks.swe import Harness, SWEInstance
    from pivot_sandbox.tasks.swe_tests import test_tampering

    harness = Harness("pip install -e .", (), "pytest -rA testing/test_x.py", (), "parse_log_pytest")
    instance = SWEInstance("a__b-1", "a/b", "1", "c", "", "", "", (), (), "3.9", (), harness, None, "", "", "")

    def edit(path: str, *lines: str) -> str:
        return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,2 +1,3 @@\n " + "\n".join(lines) + "\n"

    # a plugin module loaded through addopts can mark every test passed: each spelling of it is seen
    assert test_tampering(instance, edit("setup.cfg", "[tool:pytest]", "+addopts = -p evilplug")) == ["setup.cfg"]
    assert test_tampering(instance, edit("tox.ini", "addopts =", "+    -p evilplug")) == ["tox.ini"]
    toml = edit("pyproject.toml", "+[tool.pytest.ini_options]", '+addopts = "-p evilplug"')
    assert test_tampering(instance, toml) == ["pyproject.toml"]
    assert test_tampering(instance, edit("setup.cfg", "[pytest]", "-python_files = test_*.py")) == ["setup.cfg"]
    # SWE-bench's own set-up edits these files (sphinx's tox.ini, astropy's build requirements): not tampering
    tox = edit("tox.ini", "-commands = pytest --durations 25 {posargs}", "+commands = pytest -rA --durations 25")
    assert test_tampering(instance, tox) == []
    build = edit("pyproject.toml", '-requires = ["setuptools",', '+requires = ["setuptools==68.0.0",')
    assert test_tampering(instance, build) == []
    # a removed line that reads `-- x` is no file header: the option after it is still seen as setup.cfg's
    hidden = edit("setup.cfg", "[tool:pytest]", "--- x", "+addopts = -p evilplug")
    assert test_tampering(instance, hidden) == ["setup.cfg"]


@pytest.mark.docker
@pytest.mark.slow
def test_an_episode_replaying_the_run_to_its_submission_is_resolved_as_recorded(converted):
    from pivot_envs import load_pivots

    _, out = converted
    pivots = {p.id: p for p in load_pivots(out)}
    start, last = pivots[f"{RUN}#66"], pivots[SUBMIT]
    env = gym.make("pivot/terminal-episode-v0", dataset=str(out), backend_config={"action_timeout": 120.0})
    try:
        env.reset(options={"pivot_id": start.id})
        # the agent's own last turns, as it wrote them: clean up, look at the diff, submit
        recorded = [m for m in [*last.history, last.expert][len(start.history) :] if m.role == "assistant"]
        for message in recorded:
            _, reward, terminated, truncated, info = env.step(message.content)
            if terminated or truncated:
                break
        outcome = info["outcome"]
        assert terminated and outcome["ended_by"] == "submitted" and outcome["error"] is None, outcome
        assert reward == outcome["reward"] == 1.0 and outcome["rule"] == "swe_tests"  # the run resolved it
        assert outcome["details"]["FAIL_TO_PASS"] == {"success": [TEST_F2P], "failure": []}
        assert outcome["details"]["PASS_TO_PASS"]["failure"] == []
    finally:
        env.close()
