"""Harbor tasks as pivots and episodes, on the real Docker engine (issue 39, item 4 and the float reward of item 3).

`pivot synthesize harbor` turns the CI tasks' `solution/solve.sh` (tests/data/harbor_tasks) into Terminus
turns in each task's own image; `pivot/terminal-v0` scores candidates at those pivots by their effect in
the sandbox and `pivot/terminal-episode-v0` plays to the task's `tests/test.sh`, its outcome the float the
test run wrote. A Harbor job folder written by hand (tests/data/harbor_trials, README there) converts
with `pivot convert --from atif --tasks-dir` into sandboxed pivots that carry the trial's reward. The
images and the test-run layers are cached after the first run (`test_harbor_tasks.py` builds them too).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gymnasium as gym
import pytest
from typer.testing import CliRunner

import pivot_envs  # noqa: F401 - registers the env ids
from pivot_core import load_pivots, parse_terminus
from pivot_core.convert.harbor_trials import harbor_trial_context, is_harbor_trial
from pivot_tasks import harbor_record, solution_commands

DATA = Path(__file__).resolve().parents[1] / "data"
TASKS = DATA / "harbor_tasks"
JOB = DATA / "harbor_trials" / "2026-12-06__10-00-00"
GOOD, BAD = JOB / "py-greeting__Xk3LmQ9", JOB / "py-greeting__pR7vT2w"
EXPERT = 'echo "hello, harbor" > /app/greeting.txt'


def terminus(*commands: str, complete: bool = False) -> str:
    """A Terminus JSON turn running `commands`."""
    turn = {"analysis": "", "plan": "", "commands": [{"keystrokes": c + "\n", "duration": 1.0} for c in commands]}
    return json.dumps({**turn, "task_complete": complete})


# -- no engine needed -------------------------------------------------------------------------------


def test_solve_sh_becomes_its_top_level_commands():
    script = "#!/bin/bash\nset -euo pipefail\n# write it\ncd /app\ncat > a.py <<'EOF'\nprint(1)\nEOF\npython a.py\n"
    assert solution_commands(script) == (["cd /app", "cat > a.py <<'EOF'\nprint(1)\nEOF", "python a.py"], "")
    commands, why = solution_commands("cp /solution/tool.py /app/\n")
    assert commands == [] and "/solution" in why  # only Harbor's oracle agent gets the solution's folder
    record, why = harbor_record(TASKS / "py-greeting")
    assert why == "" and record["solution_commands"] == [EXPERT] and "hello, harbor" in record["instruction"]


def test_on_an_ubuntu_task_built_on_debian_the_oracles_apt_pins_are_rewritten_as_its_build_was(tmp_path):
    task = tmp_path / "pinned"
    shutil.copytree(TASKS / "ubuntu-done-count", task)
    (task / "solution" / "solve.sh").write_text(
        "#!/bin/bash\napt-get install -y tesseract-ocr=5.3.4-1build5 netcat\necho done > /app/out.txt\n"
    )
    record, why = harbor_record(task)
    assert why == "" and record["solution_commands"][0] == "apt-get install -y tesseract-ocr netcat-openbsd"
    (task / "solution" / "solve.sh").write_text("apt-get install -y software-properties-common\n")
    record, why = harbor_record(task)  # no Debian equivalent: no oracle pivots, and why
    assert "solution_commands" not in record and "software-properties-common" in why
    # a bookworm-tagged base built on trixie: bookworm's pins dropped, as its build's own apt steps were
    shutil.copytree(TASKS / "py-greeting", tmp_path / "bookworm")
    (tmp_path / "bookworm" / "solution" / "solve.sh").write_text("apt-get install -y jq=1.6-2.1 libgl1-mesa-glx\n")
    assert harbor_record(tmp_path / "bookworm")[0]["solution_commands"] == ["apt-get install -y jq libgl1"]
    # a Debian task built on its own release: its oracle is left as it is
    shutil.copytree(TASKS / "py-greeting", tmp_path / "debian")
    dockerfile = tmp_path / "debian" / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("python:3.13-slim-bookworm", "debian:bookworm-slim"))
    (tmp_path / "debian" / "solution" / "solve.sh").write_text("apt-get install -y jq=1.6-2.1\n")
    assert harbor_record(tmp_path / "debian")[0]["solution_commands"] == ["apt-get install -y jq=1.6-2.1"]


def test_a_harbor_trial_folder_gives_its_task_and_reward():
    assert is_harbor_trial(GOOD) and not is_harbor_trial(JOB)  # the job's own result.json is no trial
    good, bad = harbor_trial_context(GOOD), harbor_trial_context(BAD)
    assert good["task_id"] == "py-greeting" and good["run"] == GOOD.name and good["trial_agent"] == "terminus-2"
    assert (good["trial_reward"], bad["trial_reward"]) == (1.0, 0.0)
    assert good["reward_source"] == "verifier/reward.txt"


def test_reward_json_is_read_before_reward_txt_and_result_json_is_the_fallback(tmp_path):
    trial = tmp_path / GOOD.name
    shutil.copytree(GOOD, trial)
    (trial / "verifier" / "reward.json").write_text('{"reward": 0.25, "style": 1.0}')
    assert harbor_trial_context(trial)["trial_reward"] == 0.25
    for name in ("reward.json", "reward.txt"):
        (trial / "verifier" / name).unlink()
    ctx = harbor_trial_context(trial)  # the verifier's files gone: result.json's verifier_result.rewards
    assert ctx["trial_reward"] == 1.0 and ctx["reward_source"] == "result.json"


# -- on the engine ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def synthesized(docker_client, tmp_path_factory):
    """`pivot synthesize harbor` over the CI tasks: (the report, the pivot file)."""
    from pivot_cli import app

    out = tmp_path_factory.mktemp("harbor") / "pivots.jsonl"
    result = CliRunner().invoke(app, ["synthesize", "harbor", str(TASKS), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output), out


@pytest.mark.docker
def test_synthesize_writes_terminus_pivots_in_each_tasks_own_image(synthesized):
    report, out = synthesized
    statuses = {t["task_id"]: t["status"] for t in report["tasks"]}
    assert statuses == {"py-greeting": "ok", "ubuntu-done-count": "ok", "staged-words": "ok"}
    pivots = {p.id: p for p in load_pivots(out)}
    first = pivots["synth/harbor/py-greeting#1"]
    assert [c["keystrokes"] for c in parse_terminus(first.expert.content)["commands"]] == [EXPERT + "\n"]
    images = {t["task_id"]: t["image"] for t in report["tasks"]}
    assert first.context["sandbox"]["image"] == images["py-greeting"]
    assert first.context["task"]["dir"] == str((TASKS / "py-greeting").resolve())
    assert parse_terminus(pivots["synth/harbor/py-greeting#3"].expert.content)["task_complete"] is True


@pytest.mark.docker
@pytest.mark.parametrize(
    ("completion", "reward"),
    [
        (EXPERT, 1.0),
        ("printf 'hello, harbor\\n' > /app/greeting.txt", 1.0),  # another command with the same effect
        ("echo 'hello harbor' > /app/greeting.txt", 0.0),  # a wrong command
        (EXPERT + " && rm -f /app/seed.txt", 0.0),  # a destructive suffix
    ],
)
def test_terminal_v0_scores_candidates_at_a_harbor_pivot_by_their_effect(synthesized, completion, reward):
    # the default chain (which may reject early on the text), then the sandbox's effect alone
    for verifiers in (None, ["docker_shell"]):
        env = gym.make("pivot/terminal-v0", dataset=str(synthesized[1]), verifiers=verifiers)
        env.reset(options={"pivot_id": "synth/harbor/py-greeting#1"})
        _, got, _, _, info = env.step(terminus(completion))
        assert got == reward, (verifiers, info["verdicts"])
        env.close()
    assert info["decided_by"] == "docker_shell"


def _play(env, pivot_id: str, turns: list[str]) -> dict:
    """Reset to the pivot, step `turns`, return the last step's info (the episode must have ended)."""
    env.reset(options={"pivot_id": pivot_id})
    for turn in turns:
        _, _, terminated, truncated, info = env.step(turn)
    assert terminated and not truncated
    return info


@pytest.mark.docker
def test_an_episode_from_the_first_pivot_ends_with_test_sh_float_reward(synthesized):
    env = gym.make("pivot/terminal-episode-v0", dataset=str(synthesized[1]))
    pivot_id = "synth/harbor/py-greeting#1"
    oracle = _play(env, pivot_id, [terminus(EXPERT), terminus(complete=True)])["outcome"]
    assert oracle["error"] is None and type(oracle["reward"]) is float and oracle["reward"] == 1.0, oracle
    assert oracle["details"]["counts"] == {"PASSED": 2, "FAILED": 0, "SKIPPED": 0}
    untouched = _play(env, pivot_id, [terminus(complete=True)])["outcome"]
    assert untouched["error"] is None and untouched["reward"] == 0.0, untouched
    env.close()


@pytest.mark.docker
def test_harbor_trials_convert_into_sandboxed_pivots_with_the_trials_reward(docker_client, tmp_path):
    from pivot_cli import app

    out = tmp_path / "runs.jsonl"
    args = ["convert", "--from", "atif", str(JOB), str(out), "--tasks-dir", str(TASKS), "--check-replay", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["runs"], report["pivots"], report["sandboxed"], report["skipped"]) == (2, 5, 5, [])
    pivots = sorted(load_pivots(out), key=lambda p: len(p.history))
    recorded = {p.context["run"]: p.context["trajectory_reward"] for p in pivots}
    assert recorded == {GOOD.name: 1.0, BAD.name: 0.0}
    # each run, played from its first pivot with its own turns, ends with the reward its trial recorded
    env = gym.make("pivot/terminal-episode-v0", dataset=str(out))
    for run, reward in recorded.items():
        turns = [p for p in pivots if p.context["run"] == run]
        outcome = _play(env, turns[0].id, [p.expert.content for p in turns])["outcome"]
        assert outcome["error"] is None and outcome["reward"] == reward, (run, outcome)
    env.close()


PARTIAL_CREDIT = """
python3 - <<'EOF'
import json
summary = json.load(open("/logs/verifier/ctrf.json"))["results"]["summary"]
json.dump({"reward": summary["passed"] / summary["tests"]}, open("/logs/verifier/reward.json", "w"))
EOF
"""


@pytest.mark.docker
def test_a_partial_reward_is_the_episodes_float_and_a_detail_of_the_0_1_verdict(docker_client, tmp_path):
    from pivot_tasks import synthesize_harbor

    task = tmp_path / "tasks" / "py-greeting"
    shutil.copytree(TASKS / "py-greeting", task)
    with open(task / "tests" / "test.sh", "a") as f:
        f.write(PARTIAL_CREDIT)  # reward.json (read before reward.txt): the share of the tests that passed
    out = tmp_path / "pivots.jsonl"
    assert synthesize_harbor(task, out)["succeeded"] == 1  # one task's folder is a tasks folder too
    env = gym.make("pivot/terminal-episode-v0", dataset=str(out))
    untouched = _play(env, "synth/harbor/py-greeting#1", [terminus(complete=True)])["outcome"]
    assert untouched["error"] is None and untouched["reward"] == 0.5, untouched  # the seed test passes
    env.close()
    env = gym.make("pivot/terminal-v0", dataset=str(out), verifiers=["task_tests"])
    env.reset(options={"pivot_id": "synth/harbor/py-greeting#1"})
    _, reward, _, _, info = env.step(terminus("echo 'hello harbor' > /app/greeting.txt"))
    verdict = info["verdicts"]["task_tests"]
    assert reward == 0.0 and verdict["details"]["test_reward"] == 0.5, verdict
    env.close()
