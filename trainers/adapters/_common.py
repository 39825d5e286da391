"""What every adapter shares: scoring completions at a pivot through a pivot env, and row payloads.

Adapters translate another trainer's calling convention into `PivotEnv` scoring; they never
re-implement verification or the loss. A row exported for another trainer carries the env id and
the whole pivot as JSON (`pivot_json`), so a reward function running in a remote worker can score
it without the original data file; when a row only carries a `pivot_id`, the env's own dataset
resolves it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

import pivot_envs  # noqa: F401  (registers the pivot/* ids with gymnasium)
from pivot_envs._env import PivotEnv
from pivot_envs._model import Pivot
from pivot_envs._render import observation, render_completion
from verifiers_plugins import ChainResult

DEFAULT_ENV = "pivot/tool-use-v0"


def completion_text(completion: Any) -> str:
    """A completion as plain text: strings pass; chat-message lists (TRL conversational) are joined.

    An assistant message with `tool_calls` is rendered in the Hermes form the env's parser reads.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    parts: list[str] = []
    for message in completion or ():
        calls = message.get("tool_calls") or ()
        text = message.get("content") or ""
        if isinstance(text, list):  # OpenAI content parts
            text = "".join(p.get("text", "") for p in text if isinstance(p, Mapping))
        parts.append(text)
        for call in calls:
            fn = call.get("function", call)
            args = fn.get("arguments", {})
            args = json.loads(args) if isinstance(args, str) and args.strip().startswith("{") else args
            parts.append("<tool_call>\n" + json.dumps({"name": fn.get("name"), "arguments": args}) + "\n</tool_call>")
    return "\n".join(p for p in parts if p)


def prompt_messages(pivot: Pivot) -> list[dict[str, Any]]:
    """The pivot's history as OpenAI chat messages (the prompt every trainer renders)."""
    return observation(pivot)["messages"]


def flat_prompt_messages(pivot: Pivot) -> list[dict[str, str]]:
    """History as `{role, content}` string pairs only (tool calls rendered as Hermes text).

    For columnar formats (Parquet) whose trainers apply a chat template to plain messages.
    """
    out = []
    for m in pivot.history:
        content = render_completion(m, pivot.domain) if m.tool_calls else (m.content or "")
        out.append({"role": m.role, "content": content})
    return out


def expert_text(pivot: Pivot) -> str:
    """The expert action as the completion text a policy would emit (used as `ground_truth`)."""
    return render_completion(pivot.expert, pivot.domain)


class PivotScorer:
    """Scores completions at pivots with one env per env id, built lazily and reused.

    Args:
        env: an env id (`"pivot/tool-use-v0"`) or a built env; ids are made with `env_kwargs`.
        env_kwargs: keyword arguments for `gym.make` (dataset, verifiers, verifier_config, ...).
    """

    def __init__(self, env: str | gym.Env = DEFAULT_ENV, **env_kwargs: Any) -> None:
        self._default = env if isinstance(env, str) else env.spec.id if env.spec else DEFAULT_ENV
        self._env_kwargs = env_kwargs
        self._envs: dict[str, PivotEnv] = {} if isinstance(env, str) else {self._default: env.unwrapped}

    def env(self, env_id: str | None = None) -> PivotEnv:
        """The (cached) unwrapped env for `env_id` (the default env when None)."""
        key = env_id or self._default
        if key not in self._envs:
            self._envs[key] = gym.make(key, **self._env_kwargs).unwrapped
        return self._envs[key]

    def score(
        self,
        completions: Sequence[str],
        *,
        pivot_id: str | None = None,
        pivot: Pivot | Mapping | str | None = None,
        env_id: str | None = None,
    ) -> list[ChainResult]:
        """Score a group of completions at one pivot, given by id (the env's data) or by value.

        Args:
            completions: completion texts.
            pivot_id: a pivot of the env's dataset.
            pivot: the pivot itself (a `Pivot`, its JSON dict, or a JSON string); wins over `pivot_id`.
            env_id: which env's parser and verifier chain score it (the default env when None).

        Returns:
            One `ChainResult` per completion.

        Raises:
            ValueError: when neither `pivot_id` nor `pivot` is given.
        """
        env = self.env(env_id)
        if pivot is None:
            if pivot_id is None:
                raise ValueError("expected a pivot_id or a pivot, got neither")
            return env.score(pivot_id, list(completions))
        if isinstance(pivot, str):
            pivot = json.loads(pivot)
        if not isinstance(pivot, Pivot):
            pivot = Pivot.from_json(pivot)
        # chain_for: pivots that carry a tool world are judged by executing their calls
        return env.chain_for(pivot).verify_batch(pivot, [env.parse(c) for c in completions])


def pivot_ref(env_id: str, pivot: Pivot) -> dict[str, Any]:
    """The self-contained reference to a pivot that exported rows carry."""
    return {"env_id": env_id, "pivot_id": pivot.id, "pivot_json": json.dumps(pivot.to_json(), ensure_ascii=False)}
