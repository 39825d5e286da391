"""Pivot episodes through OpenRLHF's own multi-turn path: PromptDataset, its agent-file loader, the executor.

vLLM cannot run without a GPU, so the only stand-in is the engine: `ScriptEngine.generate` answers
each request with the tokens of the next scripted assistant turn (the recorded agent's turns, or a
wrong one) followed by the end-of-turn token, as vLLM returns them with OpenRLHF's
`skip_special_tokens=False`. The agent file is loaded by OpenRLHF's own `_load_agent_executor`
(read from the installed `vllm_engine.py`, whose module imports vLLM); `execute` is OpenRLHF's.
"""

import ast
import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym

# OpenRLHF is a CI install (.ci/run): a missing one fails here, it is never skipped.
import openrlhf
import pytest
from openrlhf.datasets.prompts_dataset import PromptDataset
from openrlhf.utils.agent import AgentExecutorBase, MultiTurnAgentExecutor

import pivot_envs  # noqa: F401
from pivot_core import render_completion
from trainers import render_prompt
from trainers.adapters._common import EPISODES
from trainers.adapters.openrlhf_agent import split_closer, write_openrlhf_episode_jsonl
from trainers.backends._base import template_messages

ENV = "pivot/tool-use-episode-v0"
AGENT_FILE = Path(__file__).resolve().parents[3] / "examples" / "openrlhf_agent_func.py"
END = "<|im_end|>"


def openrlhf_loader():
    """OpenRLHF's `_load_agent_executor`, taken from its source (importing its module needs vLLM)."""
    source = (Path(openrlhf.__file__).parent / "trainer" / "ray" / "vllm_engine.py").read_text()
    (fn,) = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "_load_agent_executor"]
    scope = {"AgentExecutorBase": AgentExecutorBase}
    exec(compile(ast.Module([fn], []), "vllm_engine.py", "exec"), scope)
    return scope["_load_agent_executor"]


class ScriptEngine:
    """Where vLLM would generate: each request gets the next scripted turn's tokens, end-of-turn included."""

    def __init__(self, episode_tokenizer, turns):
        self.tok, self.turns, self.sent, self.prompts = episode_tokenizer, list(turns), [], []

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        ids = self.tok(text=self.turns.pop(0) + END, add_special_tokens=False)["input_ids"]
        ids = ids[: sampling_params.max_tokens]
        self.sent.append(ids)
        self.prompts.append(list(prompt_token_ids))
        reason = "stop" if ids[-1:] == [self.tok.convert_tokens_to_ids(END)] else "length"
        text = self.tok.decode(ids, skip_special_tokens=False)
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason=reason, logprobs=None)])


@pytest.fixture(scope="module")
def executor():
    executor = openrlhf_loader()(str(AGENT_FILE))
    assert isinstance(executor, MultiTurnAgentExecutor)
    return executor


def dataset_rows(pivots, episode_tokenizer, path, env_id, env_kwargs=None):
    """OpenRLHF's PromptDataset over the written rows (`--data.apply_chat_template`): (prompt, label) pairs."""
    write_openrlhf_episode_jsonl(pivots, path, env_id, env_kwargs)
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    data_args = SimpleNamespace(input_key="context_messages", label_key="label", apply_chat_template=True)
    ds = PromptDataset(
        rows, episode_tokenizer, SimpleNamespace(args=SimpleNamespace(data=data_args), is_rank_0=lambda: True)
    )
    return [ds[i][1:3] for i in range(len(ds))]


def recorded_turns(episode_env, pivot, domain="tool-use"):
    recorded = episode_env.recorded_messages(pivot)
    return [render_completion(m, domain) for m in recorded[len(pivot.history) :] if m.role == "assistant"]


def replay_in_process(episode_env, pivot, turns):
    """The in-process reward, the step count, and the chat the policy saw (all but the env's last answer)."""
    episode_env.reset(options={"pivot_id": pivot.id})
    for k, text in enumerate(turns):
        obs, reward, terminated, truncated, info = episode_env.step(text)
        if terminated or truncated:
            seen = {**obs, "messages": obs["messages"][: len(obs["messages"]) - len(info["new_messages"])]}
            return (0.0 if info["outcome"]["error"] else reward), k + 1, seen
    raise AssertionError("the script ran out before the episode ended")


def execute(executor, episode_tokenizer, prompt, label, turns, max_length=16384):
    engine = ScriptEngine(episode_tokenizer, turns)
    params = SimpleNamespace(max_tokens=None, logprobs=None)
    return asyncio.run(executor.execute(prompt, label, params, max_length, episode_tokenizer, engine)), engine


def check_ranges(episode_tokenizer, out, engine):
    """The action ranges hold exactly the generated tokens; everything the env said is outside them."""
    ids, ranges = out["observation_tokens"], out["action_ranges"]
    assert [ids[a:b] for a, b in ranges] == engine.sent
    inside = {i for a, b in ranges for i in range(a, b)}
    observed = episode_tokenizer.decode([t for i, t in enumerate(ids) if i not in inside and i >= ranges[0][0]])
    assert "<tool_call>" not in observed  # no generated token sits outside a range
    for k, (a, _) in enumerate(ranges):  # each turn was generated from exactly the tokens before it
        assert engine.prompts[k] == ids[:a]
    return observed


def test_recorded_agent_plays_episodes_with_observations_outside_the_action_ranges(
    episode_env, episode_tokenizer, executor, tmp_path
):
    firsts = {}
    for p in episode_env.pivots:
        firsts.setdefault(p.context["trajectory_id"], p)
    pivots = list(firsts.values())[:3]
    scored = 0.0
    for pivot, (prompt, label) in zip(
        pivots, dataset_rows(pivots, episode_tokenizer, tmp_path / "e.jsonl", ENV), strict=True
    ):
        turns = recorded_turns(episode_env, pivot)
        want, steps, seen = replay_in_process(episode_env, pivot, turns)
        out, engine = execute(executor, episode_tokenizer, prompt, label, turns)
        assert len(engine.sent) == steps > 1
        # the whole sequence is the template's own render of the episode, tools and every env answer included
        chat = episode_tokenizer.apply_chat_template(
            template_messages(seen["messages"]), tools=seen["tools"], tokenize=False
        )
        assert episode_tokenizer.decode(out["observation_tokens"]) == chat.removesuffix("\n"), pivot.id
        assert out["reward"] == want and out["scores"].item() == want, pivot.id
        assert out["extra_logs"]["pivot/turns"].item() == steps and out["extra_logs"]["pivot/errors"].item() == 0
        scored += out["reward"]
        observed = check_ranges(episode_tokenizer, out, engine)
        said = [m for m in seen["messages"][len(pivot.history) :] if m["role"] != "assistant"]
        assert said and all(m["content"].strip()[:200] in observed for m in said), pivot.id
    assert scored >= 1  # at least one recorded run is a success the executor reproduces


def test_a_run_cut_by_max_length_scores_zero_and_gives_its_env_back(episode_env, episode_tokenizer, executor, tmp_path):
    pivot = episode_env.pivots[0]
    ((prompt, label),) = dataset_rows([pivot], episode_tokenizer, tmp_path / "e.jsonl", ENV)
    start = len(
        episode_tokenizer(text=render_prompt(episode_tokenizer, episode_env.reset(options={"pivot_id": pivot.id})[0]))[
            "input_ids"
        ]
    )
    wrong = '<tool_call>\n{"name": "get_user_details", "arguments": {"user_id": "nobody_1"}}\n</tool_call>'
    free = EPISODES._free.setdefault((ENV, "{}"), [])
    free.clear()  # no idle env: the run builds its own, and must give it back
    out, engine = execute(executor, episode_tokenizer, prompt, label, [wrong] * 50, max_length=start + 400)
    assert 1 <= len(engine.sent) < 30 and out["reward"] == 0.0  # cut by OpenRLHF's budget, not the env's 30 turns
    assert len(out["observation_tokens"]) >= start + 400 - 1
    assert len(free) == 1  # the env is back in the pool (`EPISODES.release` gave back what it held)


def test_a_bad_label_scores_zero_with_the_reason_and_never_raises(episode_tokenizer, executor):
    for label in ("not json", json.dumps({"env_id": "pivot/tool-use-v0", "pivot_id": "x"}),
                  json.dumps({"env_id": ENV, "pivot_id": "no such pivot"})):  # fmt: skip
        out, engine = execute(executor, episode_tokenizer, "<|im_start|>user\nhi<|im_end|>\n", label, ["hello"])
        assert out["reward"] == 0.0 and out["extra_logs"]["pivot/errors"].item() == 1, label
        assert len(engine.sent) == 1


def test_split_closer_takes_off_only_a_whole_end_of_turn():
    closer = END + "\n"
    assert split_closer("done" + END, closer, END) == ("done", "\n")
    assert split_closer("done" + closer, closer, END) == ("done", "")
    assert split_closer("cut <", closer, END) == ("cut <", closer)  # a cut turn is closed by the feedback


# -- terminal episodes: a Terminal-Bench task image, the task's own tests ------------------------------


@pytest.mark.docker
def test_terminal_episode_through_the_executor_scored_by_the_tasks_tests(episode_tokenizer, executor, tmp_path):
    from pivot_envs._env import bundled_paths

    kwargs = {"dataset": str(bundled_paths(["terminal_tasks.jsonl"])[0])}
    episodes = gym.make("pivot/terminal-episode-v0", **kwargs).unwrapped
    try:
        pivot = next(p for p in episodes.pivots if p.id.endswith("hello-world#1"))
        turns = recorded_turns(episodes, pivot, "terminal")
        want, steps, _ = replay_in_process(episodes, pivot, turns)
        ((prompt, label),) = dataset_rows(
            [pivot], episode_tokenizer, tmp_path / "t.jsonl", "pivot/terminal-episode-v0", kwargs
        )
        out, engine = execute(executor, episode_tokenizer, prompt, label, turns)
        assert want == 1.0 and out["reward"] == want and len(engine.sent) == steps > 1
        observed = check_ranges(episode_tokenizer, out, engine)
        assert "New Terminal Output" in observed  # the terminal's answer, outside the action ranges
    finally:
        episodes.close()
