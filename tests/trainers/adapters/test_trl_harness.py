"""TRL's `environment_factory` on converted agent runs: the harness's own tools, its turns, its answers.

hello-world by OpenHands and by mini-swe-agent (Terminal-Bench leaderboard logs, read by path:
canary, tests only), converted with the bundled CI task folder into one mixed file. Each recorded
action is called through the environment's methods, as TRL calls a parsed tool call: the answers
are the ones the harness gave and `get_reward` (the task's tests) is the run's recorded outcome.
"""

from __future__ import annotations

import inspect

import pytest
from transformers.utils import get_json_schema

from pivot_core import MINI_SWE_AGENT_ACTION
from trainers.adapters.trl import pivot_environment

pytestmark = pytest.mark.docker

TERMINAL = "pivot/terminal-episode-v0"


@pytest.fixture(scope="module")
def mixed(hello_world_agent_runs):
    return hello_world_agent_runs


@pytest.fixture(scope="module")
def openhands(mixed):
    return pivot_environment(TERMINAL, dataset=str(mixed[0]), harness="openhands")


@pytest.fixture(scope="module")
def mini(mixed):
    return pivot_environment(TERMINAL, dataset=str(mixed[0]), harness="mini-swe-agent")


def _start(env):
    """A rollout at the run's first pivot (the task's initial state) and the run's recorded messages after it."""
    rows = {r["pivot_id"]: r for r in env.train_dataset}
    rollout = env.factory()
    first = min(
        (p for p in rollout._env.pivots if p.id in rows),
        key=lambda p: (p.context["trajectory_id"], p.context["turn_index"]),
    )
    assert first.context["is_resolved"] is True and not any(m.role == "assistant" for m in first.history)
    rollout.reset(**rows[first.id])
    return rollout, rows[first.id], list(rollout._env.recorded_messages(first)[len(first.history) :])


def _tools_as_trl_lists_them(cls):
    """The tool methods TRL takes from an environment (`GRPOTrainer.__init__`, TRL 1.16)."""
    names = [n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction)]
    return {n for n in names if n not in ("reset", "get_reward") and not n.startswith("_")}


def test_openhands_methods_are_its_tools_with_its_schemas(openhands, mixed):
    schemas = {t["function"]["name"]: t["function"] for t in mixed[1][0].tools}
    assert mixed[1][0].context["harness"] == "openhands"
    cls = openhands.environment_class
    assert _tools_as_trl_lists_them(cls) == set(schemas) >= {"execute_bash", "str_replace_editor", "think", "finish"}
    for name, want in schemas.items():
        got = get_json_schema(getattr(cls, name))["function"]  # what TRL renders into the prompt
        assert got["name"] == name and got["description"] == want["description"].strip(), name
        assert got["parameters"] == want["parameters"], name  # enums, array items, required: OpenHands' own


def test_openhands_tools_render_into_the_prompt_through_the_chat_template(openhands, mixed):
    import copy
    import json

    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_chat_template

    from pivot_demo import bundled_reference

    tokenizer = AutoTokenizer.from_pretrained(bundled_reference())
    tokenizer.chat_template = qwen3_chat_template  # TRL's Qwen3 template writes each tool's whole schema
    env = openhands.factory()
    # TRL passes the bound methods as `tools` to the chat template (`_tokenize_prompts`)
    tools = [getattr(env, n) for n in sorted(_tools_as_trl_lists_them(type(env)))]
    text = tokenizer.apply_chat_template(openhands.train_dataset[0]["prompt"], tools=tools, tokenize=False)
    rendered = [json.loads(line) for line in text.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()]
    want = sorted(copy.deepcopy(mixed[1][0].tools), key=lambda t: t["function"]["name"])
    for schema in want:
        schema["function"]["description"] = schema["function"]["description"].strip()
    assert rendered == want  # OpenHands' own schemas in the prompt the policy reads


def test_openhands_recorded_calls_give_its_answers_and_the_recorded_outcome(openhands):
    rollout, _, recorded = _start(openhands)
    try:
        answers, wanted = [], []
        for m in recorded:
            if m.role == "tool":
                wanted.append(m.content)
            for call in m.tool_calls if m.role == "assistant" else ():
                answers.append(getattr(rollout, call.name)(**call.parsed_arguments()))
        assert len(answers) == len(wanted) + 1 >= 10  # the last call is `finish`: the run ended there
        # the editor's messages (relative path refused, file created, its failed str_replace, cat -n views),
        # bash's own error, the exit code, working directory and interpreter lines
        assert answers[:-1] == wanted
        assert rollout._ended == "finish"
        assert rollout.get_reward() == 1.0
    finally:
        rollout._env.close()


def test_the_editor_changes_the_file_and_a_wrong_run_scores_0(openhands):
    rollout, row, _ = _start(openhands)
    try:
        assert rollout.str_replace_editor(command="create", path="/app/hello.txt", file_text="Hello, world!") == (
            "File created successfully at: /app/hello.txt"
        )
        assert "Hello, world!" in rollout.execute_bash(command="cat /app/hello.txt")
        assert rollout.get_reward() == 0.0  # no newline at the end: one of the task's two tests fails
        rollout.reset(**row)
        rollout.str_replace_editor(command="create", path="/app/hello.txt", file_text="Hello, world!")
        shown = rollout.str_replace_editor(
            command="str_replace", path="/app/hello.txt", old_str="world!", new_str="world!\n"
        )
        assert shown.startswith("The file /app/hello.txt has been edited."), shown
        assert rollout.think(thought="done") == "Your thought has been logged."
        assert rollout.get_reward() == 1.0  # ended with OpenHands' own `finish` before the tests
        rollout.reset(**row)  # docs/trainers.md's example
        rollout.str_replace_editor(command="create", path="/app/hello.txt", file_text="Hello, world!\n")
        assert rollout.get_reward() == 1.0
    finally:
        rollout._env.close()


def test_mini_swe_agent_bash_writes_its_turn_and_gives_its_answers(mini):
    cls = mini.environment_class
    assert _tools_as_trl_lists_them(cls) == {"bash"}
    assert get_json_schema(cls.bash)["function"]["parameters"]["required"] == ["command"]
    rollout, row, recorded = _start(mini)
    try:
        commands = [MINI_SWE_AGENT_ACTION.findall(m.content)[0].strip() for m in recorded if m.role == "assistant"]
        wanted = [m.content for m in recorded if m.role == "user"]
        answers = [rollout.bash(command=c) for c in commands]
        # `echo > hello.txt`, then `cat hello.txt`; the third (`ls -la`) shows today's clock
        assert answers[:2] == wanted[:2] and answers[2].startswith("<returncode>0</returncode>\n<output>\n-rw-r--r--")
        assert commands[-1] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" and rollout._ended == "submitted"
        assert rollout.get_reward() == 1.0
        rollout.reset(**row)
        rollout.bash(command="cd /tmp && export X=1")
        assert rollout.bash(command='pwd; echo "x=$X"') == "<returncode>0</returncode>\n<output>\n/app\nx=\n</output>"
        rollout.bash(command="echo 'Hello world' > hello.txt")
        assert rollout.get_reward() == 0.0  # get_reward submits as mini-swe-agent does; the content is wrong
    finally:
        rollout._env.close()


def test_a_mixed_dataset_is_refused_naming_its_harnesses(mixed, openhands, mini):
    with pytest.raises(ValueError, match=r"mixes harnesses \{'mini-swe-agent': 16, 'openhands': 12\}.*harness="):
        pivot_environment(TERMINAL, dataset=str(mixed[0]))
    assert len(openhands.train_dataset) == 12 and len(mini.train_dataset) == 16
    rollout = openhands.factory()
    try:
        with pytest.raises(ValueError, match="is a mini-swe-agent pivot"):
            rollout.reset(**mini.train_dataset[0])  # OpenHands' tools on a mini-swe-agent pivot: never played
    finally:
        rollout._env.close()


def test_trl_env_has_an_environment_class_for_every_harness_the_episode_plays():
    from pivot_core import HARNESSES
    from trainers.adapters._trl_env import TERMINAL, environment_class

    for harness in HARNESSES:  # a new harness needs its environment class in the adapter too
        cls = environment_class(TERMINAL, {}, (), harness)
        assert cls._harness == harness, (harness, cls)


# -- a GRPOTrainer run: TRL parses the calls and runs them through OpenHands' tools ------------------


class ScriptedOpenHands:
    """Stands in for the model's `generate` only (TRL parses the calls, runs the tools, scores, steps).

    Every rollout writes the file with OpenHands' editor, then reads it with `execute_bash`, then
    replies in text (TRL's rollout ends there; `get_reward` finishes it as OpenHands does). Every
    other rollout's file lacks the comma, so its tests fail.
    """

    def __init__(self, tokenizer):
        self.tok, self.started = tokenizer, 0

    def _turn(self, prompt: str) -> str:
        import json

        stage = prompt.count("<tool_response>")
        if stage == 0:
            self.started += 1
            text = "Hello, world!\n" if self.started % 2 else "Hello world!\n"
            call = ("str_replace_editor", {"command": "create", "path": "/app/hello.txt", "file_text": text})
        elif stage == 1:
            call = ("execute_bash", {"command": "cat /app/hello.txt"})
        else:
            return "Done.<|im_end|>"
        return "<tool_call>\n" + json.dumps({"name": call[0], "arguments": call[1]}) + "\n</tool_call><|im_end|>"


@pytest.mark.slow
def test_grpo_trainer_runs_openhands_tools_and_scores_with_the_tasks_tests(
    mixed, scripted_generate, trl_args, tmp_path
):
    import dataclasses
    import math

    from transformers import AutoTokenizer
    from trl import GRPOTrainer
    from trl.chat_template_utils import qwen3_template

    from pivot_demo.tiny_model import TEST_MODEL, build_tiny_model

    model = tmp_path / "tiny"  # room for the prompt, two calls and their answers (the bundled reference has 512)
    build_tiny_model(model, pivots=mixed[1], config=dataclasses.replace(TEST_MODEL, max_positions=1024))

    env = pivot_environment(
        TERMINAL,
        dataset=str(mixed[0]),
        harness="openhands",
        max_history_messages=1,
        system_prompt=False,  # OpenHands' system prompt is longer than the small model's context
        backend_config={"pool_size": 0},
    )
    start = min(env.train_dataset, key=lambda r: int(r["pivot_id"].rsplit("#", 1)[1]))
    rows = env.train_dataset.filter(lambda r: r["pivot_id"] == start["pivot_id"])
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    tokenizer.response_template = qwen3_template  # the scripted calls are Qwen/Hermes calls
    rewards: list[float | None] = []
    answers: list[str] = []
    rollouts = []

    def factory():
        rollout = env.factory()
        rollouts.append(rollout)
        get_reward, call_tool = rollout.get_reward, rollout._call_tool

        def recording_call(name, arguments):
            answers.append(call_tool(name, arguments))
            return answers[-1]

        def recording_reward():
            rewards.append(get_reward())
            return rewards[-1]

        rollout.get_reward, rollout._call_tool = recording_reward, recording_call
        return rollout

    args = trl_args(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        per_device_train_batch_size=4,  # the run's start, 4 rollouts per step
        num_generations=4,
        max_completion_length=640,
    )
    trainer = GRPOTrainer(
        model=str(model),
        args=args,
        train_dataset=rows,
        processing_class=tokenizer,
        environment_factory=factory,
    )
    trainer.model.generate = scripted_generate(tokenizer, ScriptedOpenHands(tokenizer)._turn)
    try:
        trainer.train()
    finally:
        for rollout in rollouts:
            rollout._env.close()
    logs = [x for x in trainer.state.log_history if "rewards/PivotOpenHandsEnvironment/mean" in x]
    assert len(logs) == 2 and all(math.isfinite(x["loss"]) for x in logs)
    assert all(x["tools/call_frequency"] == 2.0 and x["tools/failure_frequency"] == 0.0 for x in logs)
    assert answers.count("File created successfully at: /app/hello.txt") == 8
    assert sorted(a.split("\n")[0] for a in answers if a.endswith("[Command finished with exit code 0]")) == (
        ["Hello world!"] * 4 + ["Hello, world!"] * 4
    )  # `cat` saw the file the editor's call wrote in the container
    assert sorted(rewards) == [0.0] * 4 + [1.0] * 4  # the task's tests after OpenHands' `finish`
    assert all(x["rewards/PivotOpenHandsEnvironment/std"] > 0 for x in logs)
