"""OpenRLHF: an agent file that plays a pivot episode env turn by turn (`--train.agent_func_path`).

OpenRLHF (0.11) runs multi-turn rollouts through `openrlhf.utils.agent.MultiTurnAgentExecutor`:
its vLLM actor loads the Python file given as `--train.agent_func_path`, takes the module's
`AgentExecutor` class (an `AgentExecutorBase`) and awaits `execute(prompt, label, ...)` once per
sample. The multi-turn executor builds one `AgentInstance` per sample, awaits
`reset({"observation": prompt, "label": label})` (returning `{"observation": text}`, the text the
policy continues), then loops: vLLM generates an action, `step({"observation_text", "action_text",
"label", "sampling_params"})` returns `{"rewards": tensor, "scores", "environment_feedback": text,
"done": bool, "extra_logs": {...}}`; the feedback's tokens are appended outside the action ranges
(so they get no loss) and the rewards of all steps are summed.

Here the label names the episode (`{"env_id", "pivot_id", "env_kwargs"}`, written by
`write_openrlhf_episode_jsonl`), never the text: `reset` restores the env at that pivot and
answers the env's own observation (history and the pivot's tools) rendered with the policy's chat
template; each `step` plays the action as one turn and answers what the env said (tool results,
terminal output, the user's reply) rendered as the template renders those turns, ending with the
next assistant header. The reward is 0 on every turn but the last, which carries the episode's
outcome (`_common.outcome_reward`). OpenRLHF has no "not applicable": an undecidable outcome or an
unreadable label scores 0, is logged with its reason and counted in `extra_logs["pivot/errors"]`.
An episode still running when OpenRLHF's `max_length` is spent is cut there and scores 0 (the
executor stops calling `step`), as tau-bench scores a run cut by its step limit; its env is given
back when `execute` returns.

Rendering needs the policy's tokenizer, which OpenRLHF hands to `execute` only; this module's
`AgentExecutor` passes it on to the instances it runs. Train with
`--train.agent_func_path examples/openrlhf_agent_func.py --data.input_key context_messages
--data.apply_chat_template --data.label_key label`.
"""

# No `from __future__ import annotations` here either: OpenRLHF may run this file by path with
# `exec_module` (see openrlhf.py); nothing below needs string annotations.
import asyncio
import contextvars
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from pivot_core import Pivot
from trainers import render_prompt
from trainers.adapters._common import EPISODES, is_episode_env, outcome_reward, prompt_messages
from trainers.backends._base import template_messages

try:
    from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor
except ImportError as e:  # no stand-in: OpenRLHF checks the classes' bases itself
    raise ImportError(f"trainers.adapters.openrlhf_agent needs openrlhf >= 0.11: pip install openrlhf ({e})") from e

log = logging.getLogger(__name__)

# Set by `AgentExecutor.execute` for the instances of that one sample (asyncio tasks copy the
# context, so concurrent samples never see each other's values).
_TOKENIZER: contextvars.ContextVar[Any] = contextvars.ContextVar("pivot_openrlhf_tokenizer")
_HELD: contextvars.ContextVar[list] = contextvars.ContextVar("pivot_openrlhf_held")

# A text no chat template writes, to find where the template puts an assistant turn's content.
_SENTINEL = "\x00pivot-sentinel\x00"
# The fixed turns the feedback is rendered after: templates render a turn by what precedes it, so
# the delta after the same base is what the policy's context gains (SkyRL's generator does the same).
_BASE = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]


def episode_label(env_id: str, pivot_id: str, env_kwargs: Mapping[str, Any] | None = None) -> str:
    """The label of one episode row: the env id, the pivot to start at, `gym.make` kwargs as JSON."""
    return json.dumps({"env_id": env_id, "pivot_id": pivot_id, "env_kwargs": json.dumps(dict(env_kwargs or {}))})


def write_openrlhf_episode_jsonl(
    pivots: Sequence[Pivot],
    path: str | Path,
    env_id: str,
    env_kwargs: Mapping[str, Any] | None = None,
    *,
    tokenizer: Any = None,
) -> int:
    """One JSON line per episode start: `context_messages`, `label` (`episode_label`); `prompt` with a tokenizer.

    `env_kwargs` builds the episode env in the rollout worker (`dataset=PATH`, `max_turns`, ...):
    the pivot ids must be ids of that env's dataset.
    """
    if not is_episode_env(env_id):
        raise ValueError(f"expected an episode env id (pivot/tool-use-episode-v0, ...), got {env_id!r}")
    path = Path(path)
    with path.open("w", encoding="utf-8") as f:
        for p in pivots:
            row = {"context_messages": prompt_messages(p), "label": episode_label(env_id, p.id, env_kwargs)}
            if tokenizer is not None:
                row["prompt"] = render_prompt(tokenizer, p)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(pivots)


def turn_closer(tokenizer: Any) -> str:
    """What the chat template writes after an assistant turn's content (ChatML: the end-of-turn token, a newline)."""
    text = tokenizer.apply_chat_template([*_BASE, {"role": "assistant", "content": _SENTINEL}], tokenize=False)
    return text[text.rindex(_SENTINEL) + len(_SENTINEL) :]


def split_closer(action: str, closer: str, eos: str | None) -> tuple[str, str]:
    """`action` without the end of turn it ends with, and the rest of `closer` the feedback must write.

    A finished action ends with the end-of-turn token (`eos`, which `closer` starts with); a cut
    one does not, and then the whole `closer` closes it. Only the whole token is taken off, so a
    cut action that happens to end with `<` keeps it.
    """
    for head in (closer, eos if eos and closer.startswith(eos) else None):
        if head and action.endswith(head):
            return action[: len(action) - len(head)], closer[len(head) :]
    return action, closer


def render_feedback(tokenizer: Any, messages: Sequence[Mapping[str, Any]]) -> str:
    """The text the template writes for `messages` after an assistant turn, up to the next assistant header.

    Raises:
        ValueError: the template does not render the base turns as a prefix of the longer chat.
    """
    base = [*_BASE, {"role": "assistant", "content": "a"}]
    head = tokenizer.apply_chat_template(base, tokenize=False)
    full = tokenizer.apply_chat_template(
        template_messages([*base, *messages]), tokenize=False, add_generation_prompt=True
    )
    if not full.startswith(head):
        raise ValueError("the chat template renders earlier turns differently once later turns follow")
    return full[len(head) :]


class AgentInstance(AgentInstanceBase):
    """One episode of a pivot episode env, the sample whose label names it (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.env: Any = None
        self.key = ("", "{}")
        self.problem: str | None = None  # why the label named no episode (then the first step ends it)
        self.tokenizer: Any = None
        self.turns = 0

    async def reset(self, states: dict, **kwargs: Any) -> dict:
        """Restore the env at the label's pivot; the observation is its history and tools, rendered."""
        self.tokenizer = _TOKENIZER.get(None)
        if self.tokenizer is None:
            raise RuntimeError(
                "AgentInstance renders turns with the policy's tokenizer: run it through this module's AgentExecutor "
                "(--train.agent_func_path examples/openrlhf_agent_func.py), not a bare MultiTurnAgentExecutor"
            )
        try:
            ref = json.loads(states["label"]) if isinstance(states["label"], str) else dict(states["label"])
            self.key = (str(ref["env_id"]), str(ref.get("env_kwargs") or "{}"))
            if not is_episode_env(self.key[0]):
                raise ValueError(f"expected an episode env id, got {self.key[0]!r}")
            self.env = EPISODES.acquire(*self.key)
            _HELD.get([]).append(self)
            observation, _ = await asyncio.to_thread(self.env.reset, options={"pivot_id": str(ref["pivot_id"])})
        except Exception as e:  # a bad label scores 0 with the reason; it never stops the rollout
            self.problem = f"label names no episode: {type(e).__name__}: {e}"
            return {"observation": states["observation"]}
        return {"observation": render_prompt(self.tokenizer, observation)}

    async def step(self, state_dict: dict, **kwargs: Any) -> dict:
        """Play the action as one turn; the env's answer is the feedback, the outcome the last reward."""
        self.turns += 1
        if self.problem is not None:
            log.warning("pivot episode error (scored 0): %s", self.problem)
            return self._result(0.0, "", done=True, error=True)
        action, rest = split_closer(
            state_dict["action_text"], turn_closer(self.tokenizer), getattr(self.tokenizer, "eos_token", None)
        )
        _, _, terminated, truncated, info = await asyncio.to_thread(self.env.step, action)
        if terminated or truncated:
            reward = outcome_reward(info)
            if reward is None:
                log.warning("pivot episode error (scored 0): %s", info["outcome"]["error"])
            self.close()
            return self._result(reward or 0.0, "", done=True, error=reward is None)
        return self._result(0.0, rest + render_feedback(self.tokenizer, info["new_messages"]), done=False)

    def _result(self, reward: float, feedback: str, *, done: bool, error: bool = False) -> dict:
        logs = {"pivot/turns": torch.tensor(float(self.turns)), "pivot/errors": torch.tensor(float(error))}
        r = torch.tensor(reward, dtype=torch.float32)
        return {"rewards": r, "scores": r.clamp(0, 1), "environment_feedback": feedback, "done": done,
                "extra_logs": logs}  # fmt: skip

    def close(self) -> None:
        """Give back the episode env (a container goes now); idempotent."""
        env, self.env = self.env, None
        if env is not None:
            EPISODES.release(*self.key, env)


class AgentExecutor(MultiTurnAgentExecutor):
    """OpenRLHF's multi-turn executor over `AgentInstance`, handing it the policy's tokenizer.

    `execute` is OpenRLHF's own; this only sets what the instances read and gives back an
    episode env that OpenRLHF stopped stepping (its token budget ran out).
    """

    def __init__(self) -> None:
        super().__init__(AgentInstance)

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer, llm_engine, images=None):
        """OpenRLHF's `MultiTurnAgentExecutor.execute`, with the tokenizer passed to the instances."""
        held: list[AgentInstance] = []
        tokens = (_TOKENIZER.set(hf_tokenizer), _HELD.set(held))
        try:
            return await super().execute(prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine, images)
        finally:
            for instance in held:
                instance.close()
            _HELD.reset(tokens[1])
            _TOKENIZER.reset(tokens[0])
