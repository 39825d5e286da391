"""verl: an agent loop that plays a pivot episode env turn by turn with the policy's own tokens.

verl's multi-turn path (0.9: `verl.experimental.agent_loop`) instantiates a registered
`AgentLoopBase` per trajectory and awaits `run(sampling_params, **row)`; the loop asks the rollout
server for tokens (`server_manager.generate(prompt_ids=...) -> TokenOutput`) and returns an
`AgentLoopOutput`: prompt ids, response ids, a response mask that is 1 on the policy's tokens and
0 on everything the environment said, the reward (`reward_score`, put on the last token by verl)
and the turn count.

`PivotEpisodeAgentLoop` resets the row's episode env (`extra_info["env_id"]`, `pivot_id`), renders
the pivot's history with the pivot's own tools through verl's Continuous Token builder, then
alternates: generate, decode, `env.step(text)`, append the env's new messages (tool results,
terminal output, the user's reply) as masked context tokens, until the episode ends. The reward is
the episode's outcome (`trainers.adapters._common.outcome_reward`; an undecidable outcome scores 0
with `extra_fields["pivot_error"]` set, since verl has no "not applicable"). An episode still
running when `rollout.response_length` tokens are spent is cut there and scores 0
(`extra_fields["ended_by"] == "response_length"`), as tau-bench scores a run cut by its step limit;
a terminal episode's tests are not run for it.

Use it with `actor_rollout_ref.rollout.agent.default_agent_loop=pivot_episode_agent` (importing this
module registers it; or list `{name: pivot_episode_agent, _target_: AGENT_LOOP_TARGET}` in the
file `actor_rollout_ref.rollout.agent.agent_loop_config_path` names) and rows from
`write_episode_parquet`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

import pivot_envs  # noqa: F401  (registers the episode ids)
from pivot_core import Pivot
from trainers.adapters._common import EPISODES, expert_text, flat_prompt_messages, outcome_reward

try:
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import ToolResponse
except ImportError as e:  # no stand-in: a loop that is not an AgentLoopBase would fail inside verl
    raise ImportError(f"trainers.adapters.verl_agent_loop needs verl >= 0.9: pip install verl ({e})") from e

AGENT_NAME = "pivot_episode_agent"
AGENT_LOOP_TARGET = "trainers.adapters.verl_agent_loop.PivotEpisodeAgentLoop"


def episode_rows(pivots: Sequence[Pivot], env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> list[dict]:
    """Verl RL rows that start an episode at each pivot (`agent_name` picks this loop)."""
    return [
        {
            "data_source": env_id,
            "prompt": flat_prompt_messages(p),
            "ability": p.domain,
            "agent_name": AGENT_NAME,
            "reward_model": {"style": "rule", "ground_truth": expert_text(p)},
            "extra_info": {"index": i, "pivot_id": p.id, "env_id": env_id, "env_kwargs": json.dumps(env_kwargs or {})},
        }
        for i, p in enumerate(pivots)
    ]


def write_episode_parquet(
    pivots: Sequence[Pivot], path: str | Path, env_id: str, env_kwargs: Mapping[str, Any] | None = None
) -> int:
    """Write `episode_rows` as Parquet (what verl's `RLHFDataset` reads); returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = episode_rows(pivots, env_id, env_kwargs)
    pq.write_table(pa.Table.from_pylist(rows), str(path))
    return len(rows)


@register(AGENT_NAME)
class PivotEpisodeAgentLoop(AgentLoopBase):
    """One episode of a pivot episode env, generated token by token by verl's rollout server."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play the row's episode; see the module docstring for what the output holds."""
        info = dict(kwargs.get("extra_info") or {})
        env_id, env_kwargs = str(info["env_id"]), str(info.get("env_kwargs") or "{}")
        env = EPISODES.acquire(env_id, env_kwargs)
        try:
            return await self._play(env, str(info["pivot_id"]), sampling_params)
        finally:
            EPISODES.release(env_id, env_kwargs, env)  # a container of an unfinished episode goes now

    async def _play(self, env: Any, pivot_id: str, sampling_params: dict[str, Any]) -> AgentLoopOutput:
        observation, _ = env.reset(options={"pivot_id": pivot_id})
        messages, tools = list(observation["messages"]), observation["tools"] or None
        prompt_ids = await self.ct_build_initial_tokens(messages, tools=tools)
        runtime, mask, request_id = list(prompt_ids), [], uuid4().hex
        turns, reward, error, ended_by = 1, 0.0, None, "response_length"
        while len(mask) < self.response_length:
            output = await self.server_manager.generate(
                request_id=request_id, prompt_ids=runtime, sampling_params=sampling_params
            )
            merged, mask, _ = await self.ct_merge_assistant_token(runtime, output.token_ids, mask)
            runtime, turns = merged.token_ids, turns + 1
            text = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
            observation, _, terminated, truncated, step = env.step(text)
            if terminated or truncated:
                reward_or_none = outcome_reward(step)
                reward = reward_or_none or 0.0
                error = step["outcome"]["error"] if reward_or_none is None else None
                ended_by = step["outcome"]["ended_by"]
                break
            said = len(step["new_messages"])
            messages = list(observation["messages"])  # the history, each parsed turn and what the env answered
            before = messages[: len(messages) - said]  # up to the policy's own turn, already in `runtime`
            merged, mask, _ = await self.ct_merge_context_msg(before, messages, runtime, mask, tools=tools)
            runtime, turns = merged.token_ids, turns + said
        response = runtime[len(prompt_ids) :]
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response[: self.response_length],
            response_mask=mask[: self.response_length],
            reward_score=reward,
            num_turns=turns,
            metrics=AgentLoopMetrics(),
            extra_fields={"pivot_id": pivot_id, "ended_by": ended_by, "pivot_error": error},
        )


class PivotSchemaTool(BaseTool):
    """A pivot tool declared to verl (`verl.write_verl_tool_config`) so that its schema renders in prompts.

    Single-step pivots score the first turn, so verl's `ToolAgentLoop` runs them with
    `max_assistant_turns=1` and never calls a tool; a call that does arrive answers an error the
    policy can read instead of pretending to run (tools run in the live state in `pivot_episode_agent`).
    """

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[Any, float, dict]:
        """Refuse: no live state here."""
        why = f"error: {self.name} does not run in this loop; pivot tools run in the {AGENT_NAME} agent loop"
        return ToolResponse(text=why), 0.0, {}
