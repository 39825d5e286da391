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
from pivot_core import Message, Pivot, observation, render_completion
from pivot_core.errors import UnknownPivot
from pivot_envs import PivotEnv
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

    Every score goes through the env's one scoring path (`env.score(pivot, completions)`:
    parse once, then the env's caching verifier chain); an adapter never runs a chain itself.

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

    def pivot(
        self, *, pivot_id: str | None = None, pivot: Pivot | Mapping | str | None = None, env_id: str | None = None
    ) -> Pivot:
        """The pivot a row names: its embedded value when given, else the env's pivot with that id.

        Raises:
            ValueError: neither is given, or the embedded value is not a pivot.
            UnknownPivot: the id is not in the env's dataset; the message says how to fix it.
        """
        if pivot is not None:
            return as_pivot(pivot)
        if pivot_id is None:
            raise ValueError("expected a pivot_id or a pivot, got neither")
        env = self.env(env_id)
        try:
            return env.pivot(pivot_id)
        except UnknownPivot as e:
            raise UnknownPivot(
                f"{e} The env {env_id or self._default!r} holds {len(env.pivots)} pivots of its own dataset: "
                "pass the file the rows were exported from (`dataset=PATH`), or export the rows with the pivot "
                "embedded (`pivot_json`)."
            ) from None

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
            ValueError: when neither `pivot_id` nor `pivot` is given, or `pivot` is not a pivot.
            UnknownPivot: when `pivot_id` is not in the env's dataset.
        """
        target = self.pivot(pivot_id=pivot_id, pivot=pivot, env_id=env_id)
        return self.env(env_id).score(target, list(completions))


def as_pivot(value: Pivot | Mapping | str) -> Pivot:
    """A pivot from its value in a row: a `Pivot`, its JSON dict, or that dict as a JSON string.

    Raises:
        ValueError: the value is not valid JSON or not a pivot's JSON.
    """
    if isinstance(value, Pivot):
        return value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"expected the pivot as JSON, got unreadable text ({e})") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"expected the pivot as a JSON object, got {type(value).__name__}")
    return Pivot.from_json(value)


def error_result(decided_by: str, error: str) -> ChainResult:
    """An error verdict raised by an adapter itself (nothing was scored): reward 0, `error` set."""
    return ChainResult(reward=0.0, accepted=False, decided_by=decided_by, verdicts={}, error=error)


def pivot_ref(env_id: str, pivot: Pivot) -> dict[str, Any]:
    """The self-contained reference to a pivot that exported rows carry."""
    return {"env_id": env_id, "pivot_id": pivot.id, "pivot_json": json.dumps(pivot.to_json(), ensure_ascii=False)}


# -- episodes: the one place a multi-turn rollout becomes a reward ---------------------------------


def outcome_reward(info: Mapping[str, Any]) -> float | None:
    """The reward of an ended episode from its last step's `info`; None when the outcome is an error.

    An episode whose outcome could not be decided (the live state failed, the tests could not
    run) has no reward: None, which trainers that allow it read as "not applicable", never a 0
    that would read as "wrong".
    """
    outcome = info.get("outcome")
    if not isinstance(outcome, Mapping):
        raise ValueError(f"expected the info of an episode's last step (with 'outcome'), got keys {sorted(info)}")
    return None if outcome.get("error") else float(outcome["reward"])


def action_reward(scorer: PivotScorer, pivot: Pivot, action: Message, env_id: str | None = None) -> float | None:
    """The pivot's verifiers on one assistant action a rollout took there; None on an error verdict.

    Multi-turn trainers see a rollout as a sequence of calls and texts; scoring the pivot's own
    action (the first turn) goes through the same chain as a single-step completion.
    """
    (result,) = scorer.score([render_completion(action, pivot.domain)], pivot=pivot, env_id=env_id)
    return None if result.error else result.reward


def is_episode_env(env_id: str | None) -> bool:
    """True when `env_id` names a registered episode env (multi-turn, outcome reward)."""
    if not env_id:
        return False
    try:
        entry = gym.spec(env_id).entry_point
    except gym.error.Error:
        return False
    return isinstance(entry, str) and entry.startswith("pivot_envs.episodes:")


class EpisodePool:
    """Idle episode envs by (env id, `gym.make` kwargs as JSON), one per concurrent rollout.

    An episode env is stateful (a restored world, a container): trainers that run rollouts
    concurrently in one worker take one each and give it back when the rollout ends.
    """

    def __init__(self) -> None:
        self._free: dict[tuple[str, str], list[Any]] = {}

    def acquire(self, env_id: str, kwargs_json: str = "{}") -> Any:
        """An idle env for `env_id`, built with `json.loads(kwargs_json)` when none is idle."""
        free = self._free.setdefault((env_id, kwargs_json), [])
        return free.pop() if free else gym.make(env_id, **json.loads(kwargs_json)).unwrapped

    def release(self, env_id: str, kwargs_json: str, env: Any) -> None:
        """Give back `env` after its episode; what the episode held (a container) is released now."""
        env.release()
        self._free.setdefault((env_id, kwargs_json), []).append(env)


EPISODES = EpisodePool()
"""The worker's one pool (adapters that play episodes share it)."""


HERMES_TOOLS = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{schemas}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n'
    "</tool_call>"
)
"""The tools block Qwen/Hermes chat templates render into the system message (the env's parser reads Hermes calls)."""


def with_tools_in_system(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[dict]:
    """`messages` with the pivot's tool schemas in the system message, for trainers that pass no per-row tools.

    SkyRL renders every prompt with one set of chat-template arguments for the whole run, so a
    pivot's own tools reach its prompt only as text: the block a Qwen/Hermes template writes.
    """
    out = [dict(m) for m in messages]
    if not tools:
        return out
    block = HERMES_TOOLS.format(schemas="\n".join(json.dumps(dict(t), ensure_ascii=False) for t in tools))
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0].get('content') or ''}\n\n{block}"
    else:
        out.insert(0, {"role": "system", "content": block})
    return out
