"""TRL's `environment_factory` on pivot episodes: tools as methods, live execution, `get_reward`, a GRPOTrainer run."""

import dataclasses
import json
import math

import pytest
from transformers.utils import get_json_schema

from trainers.adapters.trl import pivot_environment
from verifiers_plugins import get_host

# Two pivots whose expert turn is one lookup call; the rollout's next turns are the policy's own.
USER_LOOKUP = "tau_bench/airline/gpt-4o/task11/trial0#4"  # get_user_details(user_id="ivan_muller_7015")
RESERVATION_LOOKUP = "tau_bench/airline/gpt-4o/task27/trial1#4"  # get_reservation_details("IFOYYZ")


@pytest.fixture(scope="module")
def tool_env():
    return pivot_environment("pivot/tool-use-episode-v0", max_history_messages=2, system_prompt=False)


def test_every_airline_tool_is_a_method_whose_schema_is_the_worlds(tool_env):
    world = get_host().get("tool_worlds", "tau-airline")()
    cls = tool_env.environment_class
    public = {n for n in vars(cls) if not n.startswith("_")} | {"reset", "get_reward"}
    assert public == set(world.tools) | {"reset", "get_reward"}  # TRL turns every other public method into a tool
    for name, tool in world.tools.items():
        got = get_json_schema(getattr(cls, name))["function"]  # what TRL renders into the prompt
        want = tool.schema["function"]
        assert got["name"] == name and got["description"] == " ".join(want["description"].split())
        gp, wp = got["parameters"], want["parameters"]
        assert set(gp["properties"]) == set(wp["properties"]), name
        assert set(gp.get("required", [])) == set(wp.get("required", [])), name
        for p, spec in wp["properties"].items():
            assert gp["properties"][p]["type"] == spec["type"], (name, p)
            assert gp["properties"][p].get("enum") == spec.get("enum"), (name, p)


def test_rows_reset_tools_run_in_the_restored_world_and_the_first_call_is_scored(tool_env):
    rows = {r["pivot_id"]: r for r in tool_env.train_dataset}
    assert USER_LOOKUP in rows and all(isinstance(r["prompt"], list) for r in rows.values())
    assert rows[USER_LOOKUP]["prompt"][0]["role"] != "system" and len(rows[USER_LOOKUP]["prompt"]) <= 2
    env = tool_env.factory()
    assert env.reset(**rows[USER_LOOKUP]) is None  # TRL appends a returned string to the prompt; we add nothing
    out = env.get_user_details(user_id="ivan_muller_7015")
    assert json.loads(out)["name"]["last_name"] == "Muller"  # what the world's tool returns
    assert "G72NSF" in env.get_reservation_details(reservation_id="G72NSF")  # a second call goes on in the episode
    assert env.get_reward() == 1.0  # the first call is the expert's
    env.reset(**rows[USER_LOOKUP])
    assert "not found" in env.get_user_details(user_id="nobody_1")
    env.get_user_details(user_id="ivan_muller_7015")
    assert env.get_reward() == 0.0  # a wrong first call, even if a right one follows
    env.reset(**rows[USER_LOOKUP])
    assert env.get_reward() == 0.0  # no call where the expert called a tool
    env.reset(**rows[USER_LOOKUP])
    env.transfer_to_human_agents(summary="x")
    assert env.get_user_details(user_id="ivan_muller_7015").startswith("error: the episode has ended (transfer)")


def test_state_is_restored_at_the_pivot_for_every_rollout(tool_env):
    env = tool_env.factory()
    row = next(r for r in tool_env.train_dataset if r["pivot_id"] == RESERVATION_LOOKUP)
    env.reset(**row)
    before = env.get_reservation_details(reservation_id="NQNU5R")
    assert "cancelled" not in before
    env.cancel_reservation(reservation_id="NQNU5R")
    assert "cancelled" in env.get_reservation_details(reservation_id="NQNU5R")
    env.reset(**row)
    assert env.get_reservation_details(reservation_id="NQNU5R") == before  # the cancellation did not leak


def test_calls_after_the_experts_are_judged_by_the_episode_envs_database_rule(tool_env):
    """A rollout is judged whole: a call after the expert's that changes the database is not free.

    Task 27's user asks to cancel IFOYYZ and NQNU5R; its gold database (tau-bench's rule, which the
    episode env scores by) has NQNU5R cancelled and IFOYYZ not. Calls that change nothing (a lookup,
    a cancellation the world rejects) cost nothing there, and here.
    """
    row = next(r for r in tool_env.train_dataset if r["pivot_id"] == RESERVATION_LOOKUP)
    env = tool_env.factory()

    def rollout(*cancel: str) -> float | None:
        env.reset(**row)
        assert "IFOYYZ" in env.get_reservation_details(reservation_id="IFOYYZ")  # the expert's call
        for reservation_id in cancel:
            env.cancel_reservation(reservation_id=reservation_id)
        return env.get_reward()

    assert rollout() == 1.0
    assert rollout("IFOYYZ") == 0.0  # the world cancels it; the task's gold database keeps it
    assert rollout("NQNU5R") == 1.0  # a cancellation the task's gold actions make
    env.reset(**row)
    env.get_reservation_details(reservation_id="IFOYYZ")
    env.get_user_details(user_id="aarav_ahmed_6699")  # read-only
    assert env.get_reward() == 1.0


@pytest.mark.parametrize("subset", [False, True])
def test_a_rejected_write_after_the_experts_is_judged_as_the_episode_env_judges_it(subset, shared_data):
    """A write the world rejects changes nothing: free on the full database. On the bundled subset,
    "reservation not found" may only mean a record the subset lacks: the episode env's outcome is an
    error there, and the reward undecided (None) here."""
    from pivot_tool_worlds import locate_db
    from pivot_tool_worlds._tau_airline import SUBSET_FILE, _bundled

    db = _bundled(SUBSET_FILE) if subset else locate_db()[0]
    env = pivot_environment("pivot/tool-use-episode-v0", pivot_ids=[RESERVATION_LOOKUP], db_path=str(db))
    rollout = env.factory()
    rollout.reset(**env.train_dataset[0])
    rollout.get_reservation_details(reservation_id="IFOYYZ")
    assert rollout.cancel_reservation(reservation_id="ZZZZZZ") == "Error: reservation not found"
    assert rollout.get_reward() == (None if subset else 1.0)


def test_a_rollout_on_its_own_database_is_scored_on_that_database(tmp_path):
    """`db_path` reaches the scorer too: `tool_exec` judges a call by running it, on the data the rollout saw.

    In this database another id holds Ivan Muller's record, so looking it up has the expert's effect
    (1.0 there); scored on the default database, where the id does not exist, it read 0.0.
    """
    from pivot_tool_worlds import locate_db
    from pivot_tool_worlds._tau_airline import load_tables

    tables = {k: dict(v) for k, v in load_tables(str(locate_db()[0])).items()}
    tables["users"]["ivan_copy_0001"] = tables["users"]["ivan_muller_7015"]
    (tmp_path / "db.json").write_text(json.dumps(tables))
    env = pivot_environment("pivot/tool-use-episode-v0", pivot_ids=[USER_LOOKUP], db_path=str(tmp_path / "db.json"))
    rollout = env.factory()
    rollout.reset(**env.train_dataset[0])
    assert "Muller" in rollout.get_user_details(user_id="ivan_copy_0001")  # the rollout saw the record
    assert rollout.get_reward() == 1.0
    rollout.reset(**env.train_dataset[0])
    rollout.get_user_details(user_id="nobody_1")
    assert rollout.get_reward() == 0.0


def test_unknown_env_and_non_identifier_tools_are_refused():
    from trainers.adapters._trl_env import tool_method

    with pytest.raises(ValueError, match="expected an episode env id"):
        pivot_environment("pivot/tool-use-v0")
    with pytest.raises(ValueError, match="identifiers"):
        tool_method({"name": "x", "parameters": {"properties": {"not an id": {"type": "string"}}}})


# -- a GRPOTrainer run ------------------------------------------------------------------------------


class ScriptedPolicy:
    """Stands in for the tiny model's `generate` only (TRL computes log-probs, loss and steps with the model).

    A tiny model trained by the test helpers rarely chains two valid calls, so the rollouts are
    scripted: first turn the expert's lookup in every other rollout of a pivot and a wrong lookup
    in the others, second turn a `calculate` call, then a text reply. Everything else (parsing the
    calls, running the tools, the tool-result tokens, `get_reward`, the loss) is TRL's and ours.
    """

    FIRST = {
        USER_LOOKUP: (("get_user_details", {"user_id": "ivan_muller_7015"}), "Ivan Muller"),
        RESERVATION_LOOKUP: (("get_reservation_details", {"reservation_id": "IFOYYZ"}), "IFOYYZ"),
    }
    WRONG = ("get_user_details", {"user_id": "nobody_1"})

    def __init__(self, tokenizer, rows):
        self.tok = tokenizer
        self.markers = {r["pivot_id"]: r["prompt"][-1]["content"][-40:] for r in rows}
        self.seen = {pid: 0 for pid in self.markers}

    def _turn(self, prompt: str) -> str:
        pid = next(p for p, m in self.markers.items() if m in prompt)
        stage = prompt.count("<tool_response>")
        if stage == 0:
            self.seen[pid] += 1
            name, args = self.FIRST[pid][0] if self.seen[pid] % 2 else self.WRONG
        elif stage == 1:
            name, args = "calculate", {"expression": "1 + 1"}
        else:
            return "Thank you, that is all.<|im_end|>"
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call><|im_end|>"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, tool_env):
    import gymnasium as gym

    from pivot_demo.tiny_model import TEST_MODEL, build_tiny_model

    folder = tmp_path_factory.mktemp("tiny")
    # TRL drops a tool result that would pass the model's context: a user record alone is ~900 tokens here
    config = dataclasses.replace(TEST_MODEL, max_positions=4096)
    build_tiny_model(folder, pivots=gym.make("pivot/tool-use-v0").unwrapped.pivots, config=config)
    return folder


@pytest.mark.slow
def test_grpo_trainer_runs_multi_turn_rollouts_scored_by_get_reward(
    tool_env, tiny_model, scripted_generate, trl_args, tmp_path
):
    from transformers import AutoTokenizer
    from trl import GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model))
    tokenizer.response_template = qwen3_template  # the tiny template writes calls in Qwen's Hermes form
    rows = tool_env.train_dataset.filter(lambda r: r["pivot_id"] in ScriptedPolicy.FIRST)
    assert len(rows) == 2
    rewards: list[float | None] = []
    calls: list[list[str]] = []

    def factory():
        env = tool_env.factory()
        reset, get_reward, call_tool = env.reset, env.get_reward, env._call_tool

        def recording_reset(**row):
            calls.append([])  # TRL resets every rollout's environment before any of them calls a tool
            env._record = calls[-1]
            return reset(**row)

        def recording_call(name, arguments):
            env._record.append(name)
            return call_tool(name, arguments)

        def recording_reward():
            rewards.append(get_reward())
            return rewards[-1]

        env.reset, env.get_reward, env._call_tool = recording_reset, recording_reward, recording_call
        return env

    args = trl_args(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=8,  # both pivots, 4 rollouts each, per step
        num_generations=4,
        max_completion_length=2048,  # room for two calls, their results (a user record is long) and a reply
    )
    trainer = GRPOTrainer(
        model=str(tiny_model), args=args, train_dataset=rows, processing_class=tokenizer, environment_factory=factory
    )
    trainer.model.generate = scripted_generate(tokenizer, ScriptedPolicy(tokenizer, rows)._turn)
    trainer.train()
    logs = [x for x in trainer.state.log_history if "rewards/PivotToolUseEnvironment/mean" in x]
    assert len(logs) == 2 and all(math.isfinite(x["loss"]) for x in logs)
    played = [c for c in calls if c]
    assert len(played) == 16 and all(len(c) == 2 and c[1] == "calculate" for c in played)  # two calls each
    assert sorted(rewards) == [0.0] * 8 + [1.0] * 8  # the expert's first call scores 1, the wrong one 0
    assert all(x["rewards/PivotToolUseEnvironment/std"] > 0 for x in logs)
    assert all(x["tools/call_frequency"] == 2.0 and x["tools/failure_frequency"] == 0.0 for x in logs)


# -- the terminal: bash in the task's container, the task's tests as the reward ---------------------

TASK = {
    "task_id": "trl-notes",
    "instruction": "In /app, write the TODO lines of notes.txt into todo.txt.",
    "setup": ["printf 'a TODO one\\nb draft\\n' > notes.txt"],
    "solution_commands": ["grep TODO notes.txt > todo.txt"],
}


@pytest.fixture(scope="module")
def terminal_data(tmp_path_factory):
    from pivot_envs import extract_pivots, write_pivots
    from pivot_sandbox import docker_backend
    from pivot_sandbox.images.stock import build_busybox_image
    from pivot_tasks import synthesize_task, task_spec

    image = build_busybox_image(docker_backend().client, "pivot-gym/busybox:1")
    traj, reason = synthesize_task(TASK, task_spec(TASK, image), docker_backend())
    assert traj is not None, reason
    tests = {"commands": ["test \"$(cat /app/todo.txt)\" = 'a TODO one'"], "timeout": 10.0}
    traj = dataclasses.replace(traj, context={**traj.context, "task_tests": tests})
    path = tmp_path_factory.mktemp("terminal") / "pivots.jsonl"
    write_pivots(list(extract_pivots(traj)), path)
    return path


@pytest.mark.docker
def test_terminal_bash_runs_in_the_container_and_the_tests_are_the_reward(terminal_data):
    env = pivot_environment("pivot/terminal-episode-v0", dataset=str(terminal_data), backend_config={"pool_size": 0})
    cls = env.environment_class
    assert get_json_schema(cls.bash)["function"]["parameters"]["required"] == ["command"]
    row = env.train_dataset[0]  # the task's start
    rollout = env.factory()
    try:
        rollout.reset(**row)
        assert "TODO" in rollout.bash("cat notes.txt")
        rollout.bash("grep TODO notes.txt > todo.txt")
        assert rollout.get_reward() == 1.0
        rollout.reset(**row)
        rollout.bash("echo nothing > todo.txt")
        assert rollout.get_reward() == 0.0
        rollout.reset(**row)
        assert rollout.get_reward() == 0.0  # nothing done: the tests fail
    finally:
        rollout._env.close()
