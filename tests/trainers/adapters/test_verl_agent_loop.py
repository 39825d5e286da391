"""The verl episode agent loop through verl's own classes: registry, hydra instantiation, RLHFDataset, Continuous Token.

No GPU here: the rollout server (vLLM in a verl run) is the only stand-in. `ScriptServer.generate`
returns, as `TokenOutput`, the tokens of scripted assistant turns (the recorded agent's turns, or a
wrong call); everything else is verl's code and the episode env's.
"""

import json

import gymnasium as gym
import hydra
import pytest
from omegaconf import OmegaConf

# verl is a CI install (.ci/run): a missing one fails here, it is never skipped.
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

import pivot_envs  # noqa: F401
from pivot_core import render_completion
from trainers.adapters import verl_agent_loop
from trainers.adapters.verl_agent_loop import AGENT_NAME, write_episode_parquet

ENV = "pivot/tool-use-episode-v0"


class ScriptServer:
    """The rollout server's `generate`, answering each request with the next scripted turn's tokens."""

    def __init__(self, episode_tokenizer, turns):
        self.tok, self.turns, self.sent = episode_tokenizer, list(turns), []

    async def generate(self, *, request_id, prompt_ids, sampling_params, **kw):
        ids = self.tok(text=self.turns.pop(0) + "<|im_end|>", add_special_tokens=False)["input_ids"]
        self.sent.append(ids)
        return TokenOutput(token_ids=ids, log_probs=None, stop_reason="completed")


def recorded_turns(episode_env, pivot):
    recorded = episode_env.recorded_messages(pivot)
    return [render_completion(m, "tool-use") for m in recorded[len(pivot.history) :] if m.role == "assistant"]


def replay_in_process(episode_env, pivot, turns):
    episode_env.reset(options={"pivot_id": pivot.id})
    for k, text in enumerate(turns):
        _, reward, terminated, truncated, info = episode_env.step(text)
        if terminated or truncated:
            return reward, info, k + 1
    raise AssertionError("the script ran out before the episode ended")


def run_loop(episode_tokenizer, row, turns, response_length=8192):
    config = OmegaConf.create(
        {"actor_rollout_ref": {"rollout": {"prompt_length": 8192, "response_length": response_length}}, "data": {}}
    )
    server = ScriptServer(episode_tokenizer, turns)
    loop = hydra.utils.instantiate(  # as verl's AgentLoopWorker builds a registered loop
        config=_agent_loop_registry[AGENT_NAME],
        trainer_config=DictConfigWrap(config=config),
        server_manager=server,
        tokenizer=episode_tokenizer,
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
    )
    assert isinstance(loop, verl_agent_loop.PivotEpisodeAgentLoop)
    kwargs = {k: row[k] for k in ("raw_prompt", "extra_info", "agent_name")}
    return loop.loop.run_until_complete(loop.run({"temperature": 1.0}, **kwargs)), server  # verl's worker loop


@pytest.fixture(scope="module")
def rows(episode_env, episode_tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("verl_episodes")
    path = folder / "episodes.parquet"
    firsts = {}
    for p in episode_env.pivots:
        firsts.setdefault(p.context["trajectory_id"], p)
    write_episode_parquet(list(firsts.values()), path, ENV)
    config = OmegaConf.create({"max_prompt_length": 100000, "filter_overlong_prompts": False, "cache_dir": str(folder)})
    dataset = RLHFDataset(str(path), episode_tokenizer, config)
    return {dataset[i]["extra_info"]["pivot_id"]: dataset[i] for i in range(len(dataset))}


def test_recorded_agent_plays_the_episode_with_masked_observations(episode_env, episode_tokenizer, rows):
    scored = 0
    for pivot_id, row in list(rows.items())[:3]:
        assert row["agent_name"] == AGENT_NAME
        pivot = episode_env.pivot(pivot_id)
        turns = recorded_turns(episode_env, pivot)
        reward, info, steps = replay_in_process(episode_env, pivot, turns)
        out, server = run_loop(episode_tokenizer, row, turns)
        want = 0.0 if info["outcome"]["error"] else reward
        assert out.reward_score == want and out.extra_fields["pivot_error"] == info["outcome"]["error"]
        scored += out.reward_score
        assert len(server.sent) == steps
        # The mask is 1 exactly on the policy's tokens, in order, and 0 on everything else (what the env said).
        ids, mask = out.response_ids, out.response_mask
        assert len(ids) == len(mask)
        assert [t for t, m in zip(ids, mask, strict=True) if m] == [t for sent in server.sent for t in sent]
        observed = episode_tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
        last = len(episode_env.conversation) - len(info["new_messages"])  # the last step's answer ends the episode
        said = [m for m in episode_env.conversation[len(pivot.history) : last] if m.role != "assistant"]
        assert said and all((m.content or "").strip()[:200] in observed for m in said)
        assert "<tool_call>" not in observed  # no generated token is masked out
        assert out.num_turns == 1 + steps + len(said)
        assert (
            out.prompt_ids
            == episode_tokenizer.apply_chat_template(
                row["raw_prompt"].tolist() if hasattr(row["raw_prompt"], "tolist") else row["raw_prompt"],
                tools=pivot.tools or None,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
            )["input_ids"]
        )
    assert scored >= 1  # at least one recorded run is a success the loop reproduces


def test_a_wrong_first_call_that_runs_out_of_tokens_scores_zero(episode_env, episode_tokenizer, rows):
    pivot_id, row = next(iter(rows.items()))
    wrong = '<tool_call>\n{"name": "get_user_details", "arguments": {"user_id": "nobody_1"}}\n</tool_call>'
    out, server = run_loop(episode_tokenizer, row, [wrong] * 3, response_length=64)
    assert len(server.sent) >= 1 and out.reward_score == 0.0
    assert out.extra_fields["ended_by"] == "response_length" and len(out.response_ids) <= 64


# -- terminal episodes: the same loop, a live container, the task's tests --------------------------

TASK = {
    "task_id": "verl-notes",
    "instruction": "In /app, write the TODO lines of notes.txt into todo.txt.",
    "setup": ["printf 'a TODO one\\nb draft\\n' > notes.txt"],
    "solution_commands": ["grep TODO notes.txt > todo.txt"],
}


def terminus(command, complete=False):
    keys = [{"keystrokes": command + "\n", "duration": 0.1}] if command else []
    return json.dumps({"analysis": "a", "plan": "p", "commands": keys, "task_complete": complete})


@pytest.fixture(scope="module")
def terminal_row(episode_tokenizer, tmp_path_factory):
    import dataclasses

    from pivot_envs import extract_pivots, write_pivots
    from pivot_sandbox import docker_backend
    from pivot_sandbox.images.stock import build_busybox_image
    from pivot_tasks import synthesize_task, task_spec

    image = build_busybox_image(docker_backend().client, "pivot-gym/busybox:1")
    traj, reason = synthesize_task(TASK, task_spec(TASK, image), docker_backend())
    assert traj is not None, reason
    tests = {"commands": ["test \"$(cat /app/todo.txt)\" = 'a TODO one'"], "timeout": 10.0}
    traj = dataclasses.replace(traj, context={**traj.context, "task_tests": tests})
    folder = tmp_path_factory.mktemp("verl_terminal")
    pivots = list(extract_pivots(traj))
    write_pivots(pivots, folder / "pivots.jsonl")
    kwargs = {"dataset": str(folder / "pivots.jsonl"), "backend_config": {"pool_size": 0}}
    write_episode_parquet(pivots[:1], folder / "episodes.parquet", "pivot/terminal-episode-v0", kwargs)
    config = OmegaConf.create({"max_prompt_length": 100000, "filter_overlong_prompts": False, "cache_dir": str(folder)})
    return RLHFDataset(str(folder / "episodes.parquet"), episode_tokenizer, config)[0]


@pytest.mark.docker
def test_terminal_episode_in_the_loop_scored_by_the_tasks_tests(episode_tokenizer, terminal_row):
    script = [terminus("grep TODO notes.txt > todo.txt"), terminus("", complete=True)]
    out, server = run_loop(episode_tokenizer, terminal_row, script)
    assert out.reward_score == 1.0 and out.extra_fields["ended_by"] == "task_complete"
    ids, mask = out.response_ids, out.response_mask
    assert [t for t, m in zip(ids, mask, strict=True) if m] == [t for sent in server.sent for t in sent]
    observed = episode_tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if not m])
    assert "New Terminal Output" in observed and "grep TODO" in observed  # the terminal's answer, masked
    wrong, _ = run_loop(episode_tokenizer, terminal_row, [terminus("echo no > todo.txt"), terminus("", complete=True)])
    assert wrong.reward_score == 0.0 and wrong.extra_fields["pivot_error"] is None


# -- single-step pivots: each pivot's tools in the prompt verl's own ToolAgentLoop renders ----------


def test_each_pivots_tools_render_in_verls_tool_agent_loop(episode_tokenizer, tmp_path):
    from verl.experimental.agent_loop.agent_loop import ToolListWrap
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.tools.tool_registry import load_all_tools

    from trainers.adapters.verl import tool_name, write_verl_parquet, write_verl_tool_config

    single = gym.make("pivot/tool-use-v0").unwrapped
    by_tools = {}
    for p in single.pivots:
        by_tools.setdefault(tuple(sorted(tool_name(t) for t in p.tools)), p)
    with pytest.raises(ValueError, match="transfer_to_human_agents"):  # two worlds, one name: verl keys tools by name
        write_verl_tool_config(single.pivots, tmp_path / "tools.yaml")
    pivots = [p for p in by_tools.values() if not any(tool_name(t) == "authenticate_user" for t in p.tools)]
    assert len(pivots) >= 3  # airline, weather, stocks and weather: different tool sets
    write_verl_parquet(pivots, tmp_path / "train.parquet")
    names = {tool_name(t) for p in pivots for t in p.tools}
    assert write_verl_tool_config(pivots, tmp_path / "tools.yaml") == len(names)
    tools = load_all_tools(tool_config_path=str(tmp_path / "tools.yaml"), function_tool_path=None)
    data = OmegaConf.create(
        {"max_prompt_length": 100000, "filter_overlong_prompts": False, "cache_dir": str(tmp_path),
         "tool_config_path": str(tmp_path / "tools.yaml")}
    )  # fmt: skip
    dataset = RLHFDataset(str(tmp_path / "train.parquet"), episode_tokenizer, data)
    multi_turn = {"max_user_turns": 1, "max_assistant_turns": 1, "max_parallel_calls": 1, "format": "hermes",
                  "max_tool_response_length": 256, "tool_response_truncate_side": "middle"}  # fmt: skip
    rollout = {"prompt_length": 100000, "response_length": 256, "multi_turn": multi_turn, "full_determinism": False}
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": rollout}, "data": {}})
    all_names = {tool.name for tool in tools}
    for i, pivot in enumerate(pivots):
        row = dataset[i]
        loop = hydra.utils.instantiate(
            config=_agent_loop_registry["tool_agent"],
            trainer_config=DictConfigWrap(config=config),
            server_manager=ScriptServer(episode_tokenizer, ["I will check."]),
            tokenizer=episode_tokenizer,
            processor=None,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(config.data),
            tools=ToolListWrap(tools),
        )
        assert isinstance(loop, ToolAgentLoop)
        kwargs = {k: row[k] for k in ("raw_prompt", "extra_info", "tools_kwargs")}
        out = loop.loop.run_until_complete(loop.run({"temperature": 1.0}, **kwargs))
        prompt = episode_tokenizer.decode(out.prompt_ids)
        mine = {tool_name(t) for t in pivot.tools}
        assert mine and all(f"{name}(" in prompt for name in mine), pivot.id  # the tiny template lists name(args)
        assert not any(f"\n{name}(" in prompt for name in all_names - mine), pivot.id  # and no other pivot's tools
