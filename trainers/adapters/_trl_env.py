"""TRL's `environment_factory`: episode envs whose tools are an environment object's public methods.

TRL 1.16 (`GRPOTrainer(environment_factory=...)`, experimental there) builds one environment per
rollout with the factory, lists the public methods of the environment's class as tools (their
schemas come from the signature and the Google docstring, `transformers.get_json_schema`), calls
`reset(**row)` with every column of the rollout's dataset row (a returned string is appended to
the last prompt message; None appends nothing), executes each parsed tool call as
`method(**arguments)`, and, when the class defines `get_reward()`, calls it once per finished
rollout as a reward source named after the class. None from `get_reward` is "not applicable".

Here each environment holds one episode env (`pivot/tool-use-episode-v0`, `pivot/terminal-episode-v0`)
and every tool call is one step of it, so calls run in the live state restored at the row's pivot.
"""

from __future__ import annotations

import inspect
import json
import keyword
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

import pivot_envs  # noqa: F401  (registers the pivot/* ids with gymnasium)
from pivot_core import Message, Pivot, ToolCall, render_completion
from trainers.adapters._common import PivotScorer, action_reward, flat_prompt_messages, outcome_reward

TOOL_USE = "pivot/tool-use-episode-v0"
TERMINAL = "pivot/terminal-episode-v0"
SCORING_ENV = {TOOL_USE: "pivot/tool-use-v0"}  # the single-step env whose verifier chain scores a pivot's action
AIRLINE_WORLD = "tau-airline"  # the world the tool-use episode env restores (its `db_path` is that world's)
_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}
_TYPES |= {"array": list, "object": dict}
ENDED = "error: the episode has ended ({why}); no further tool call runs"


@dataclass(frozen=True)
class PivotEnvironment:
    """What `pivot_environment` returns: the dataset TRL trains on and the factory of environments.

    Attributes:
        train_dataset: a `datasets.Dataset`, one row per pivot (`prompt` as chat messages,
            `pivot_id`, `env_id`); TRL passes each row to `reset`.
        factory: a zero-argument callable building one environment (pass it as
            `GRPOTrainer(environment_factory=...)`).
        environment_class: the class `factory` builds (its public methods are the tools).
    """

    train_dataset: Any
    factory: Callable[[], Any]
    environment_class: type


class EpisodeEnvironment:
    """One TRL rollout: an episode env restored at the row's pivot, stepped by tool calls.

    Only `reset` and `get_reward` are public on this base: TRL exposes every other public method
    as a tool, so the domain's tools are the only other public names its subclasses define.
    """

    _env_id: str = TOOL_USE
    _env_kwargs: Mapping[str, Any] = {}

    def __init__(self) -> None:
        self._env = gym.make(self._env_id, **self._env_kwargs).unwrapped
        self._pivot: Pivot | None = None
        self._calls: list[ToolCall] = []
        self._last_info: dict[str, Any] = {}
        self._ended: str | None = None

    def reset(self, pivot_id: str, **row: Any) -> None:
        """Restore the live state at `pivot_id` (the other row columns are TRL's; the prompt is the history)."""
        self._env.reset(options={"pivot_id": pivot_id})
        self._pivot = self._env.pivot(pivot_id)
        self._calls, self._last_info, self._ended = [], {}, None

    def get_reward(self) -> float | None:
        """The rollout's reward (see the subclass); None when it cannot be decided."""
        raise NotImplementedError

    def _step(self, action: Message) -> str:
        """Run one agent message in the episode; the text the live state answered."""
        if self._pivot is None:
            raise RuntimeError("reset(pivot_id=...) must run before a tool call")
        if self._ended is not None:
            return ENDED.format(why=self._ended)
        _, _, terminated, truncated, info = self._env.step(render_completion(action, self._pivot.domain))
        self._last_info = info
        if terminated or truncated:
            self._ended = str(info["outcome"]["ended_by"])
        return "\n".join(str(m.get("content") or "") for m in info["new_messages"])


class ToolUseEnvironment(EpisodeEnvironment):
    """The airline world's tools; the reward is the pivot's verifiers on the rollout's first turn.

    TRL does not tell an environment where one assistant turn ends, so the pivot's action is read
    as the rollout's first calls, as many as the expert's own turn made (tau-bench's recorded
    turns make one): a rollout whose first call is the expert's scores 1, a wrong call 0, and a
    rollout that called nothing 0 (the expert called a tool there).
    """

    _scorer: PivotScorer | None = None

    def _call_tool(self, name: str, arguments: Mapping[str, Any]) -> str:
        call = ToolCall(name=name, arguments=json.dumps(dict(arguments), ensure_ascii=False))
        self._calls.append(call)
        return self._step(Message("assistant", None, tool_calls=(call,)))

    def get_reward(self) -> float | None:
        """The pivot's verifier chain on the rollout's first calls (None on an error verdict)."""
        if self._pivot is None:
            return None
        width = max(1, len(self._pivot.expert.tool_calls))
        action = Message("assistant", None if self._calls else "", tool_calls=tuple(self._calls[:width]))
        scorer = type(self)._scorer
        if scorer is None:
            scorer = type(self)._scorer = PivotScorer(SCORING_ENV[TOOL_USE], **scoring_kwargs(self._env_kwargs))
        return action_reward(scorer, self._pivot, action)


class TerminalEnvironment(EpisodeEnvironment):
    """A shell in the task's container at the pivot's state; the reward is the task's tests after the rollout."""

    _env_id = TERMINAL

    def bash(self, command: str) -> str:
        """Run a shell command in the task's terminal and return what the terminal shows.

        Args:
            command: the command line to run (bash syntax; it runs in the task's working directory).
        """
        turn = {"analysis": "", "plan": "", "commands": [{"keystrokes": command + "\n", "duration": 1.0}]}
        return self._step(Message("assistant", json.dumps(turn | {"task_complete": False})))

    def get_reward(self) -> float | None:
        """The task's tests in the final state (the episode is ended here when the rollout did not end it)."""
        if self._pivot is None:
            return None
        if self._ended is None:
            done = {"analysis": "", "plan": "", "commands": [], "task_complete": True}
            self._step(Message("assistant", json.dumps(done)))
        return outcome_reward(self._last_info)


def scoring_kwargs(env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """`gym.make` kwargs of the scoring env that make its verifiers run on the episode's own database.

    The episode env restores the world from `db_path`; `tool_exec` judges a call by executing it,
    so it must execute on that same database, or a call would be scored on data the rollout never saw.
    """
    db_path = env_kwargs.get("db_path")
    if db_path is None:
        return {}
    return {"verifier_config": {"tool_exec": {"world_config": {AIRLINE_WORLD: {"db_path": str(db_path)}}}}}


def tool_method(schema: Mapping[str, Any]) -> Callable[..., str]:
    """A method named after an OpenAI function schema, whose signature and docstring give back that schema.

    `transformers.get_json_schema` (what TRL renders tools with) reads the type hints and the
    Google docstring's `Args:`; enums travel as `(choices: [...])`. Calling it runs the tool in
    the episode (`_call_tool`).

    Raises:
        ValueError: the schema names a parameter that is not a Python identifier.
    """
    fn = schema.get("function", schema)
    name = str(fn["name"])
    params = fn.get("parameters") or {}
    props: Mapping[str, Any] = params.get("properties") or {}
    required = set(params.get("required") or ())
    for p in (name, *props):
        if not p.isidentifier() or keyword.iskeyword(p):
            raise ValueError(f"tool {name!r}: expected identifiers for the tool and its parameters, got {p!r}")

    def call(self: ToolUseEnvironment, **arguments: Any) -> str:
        return self._call_tool(name, arguments)

    signature = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    lines = []
    for p, spec in props.items():
        hint = _TYPES.get(str(spec.get("type")), str)
        items = spec.get("items")
        if hint is list and isinstance(items, Mapping) and items.get("type") in _TYPES:
            hint = list[_TYPES[items["type"]]]  # an array's item type survives into the schema
        default = inspect.Parameter.empty if p in required else None
        signature.append(inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, annotation=hint, default=default))
        desc = " ".join(str(spec.get("description") or f"the {p.replace('_', ' ')}").split())
        if spec.get("enum"):
            desc += f" (choices: {json.dumps(list(spec['enum']))})"
        lines.append(f"    {p}: {desc}")
    description = " ".join(str(fn.get("description") or name).split())
    call.__name__ = call.__qualname__ = name
    call.__signature__ = inspect.Signature(signature, return_annotation=str)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in signature[1:]} | {"return": str}
    call.__doc__ = description + ("\n\nArgs:\n" + "\n".join(lines) if lines else "")
    return call


def environment_class(env_id: str, env_kwargs: Mapping[str, Any], tools: Sequence[Mapping[str, Any]] = ()) -> type:
    """The environment class for an episode env id: the domain's base plus one method per tool schema."""
    if env_id == TOOL_USE:
        methods = {}
        for schema in tools:
            method = tool_method(schema)
            if method.__name__ in ("reset", "get_reward") or hasattr(EpisodeEnvironment, method.__name__):
                raise ValueError(f"tool {method.__name__!r} would shadow the environment's own method")
            methods[method.__name__] = method
        base: type = ToolUseEnvironment
        name = "PivotToolUseEnvironment"
    elif env_id == TERMINAL:
        methods, base, name = {}, TerminalEnvironment, "PivotTerminalEnvironment"
    else:
        raise ValueError(f"pivot_environment: expected an episode env id in {[TOOL_USE, TERMINAL]}, got {env_id!r}")
    return type(name, (base,), {**methods, "_env_id": env_id, "_env_kwargs": dict(env_kwargs)})


def cut_history(messages: list[dict[str, str]], keep: int | None, system_prompt: bool) -> list[dict[str, str]]:
    """The leading system message (when kept) and the last `keep` other messages, never starting on a tool result."""
    head = [messages[0]] if messages and messages[0]["role"] == "system" else []
    rest = messages[len(head) :]
    rest = rest[-keep:] if keep is not None else rest
    while rest and rest[0]["role"] == "tool":
        rest = rest[1:]
    return (head if system_prompt else []) + rest


def pivot_environment(
    env_id: str = TOOL_USE,
    *,
    dataset: Any = None,
    pivot_ids: Sequence[str] | None = None,
    max_history_messages: int | None = None,
    system_prompt: bool = True,
    **env_kwargs: Any,
) -> PivotEnvironment:
    """Episode env `env_id` as TRL's `environment_factory` plus its train dataset.

    ```python
    env = pivot_environment("pivot/tool-use-episode-v0")
    trainer = GRPOTrainer(model=..., train_dataset=env.train_dataset, environment_factory=env.factory, ...)
    ```

    Args:
        env_id: `pivot/tool-use-episode-v0` (the airline world's tools, reward from the pivot's
            verifiers) or `pivot/terminal-episode-v0` (`bash`, reward from the task's tests).
        dataset: the episode env's data file(s); its bundled sample when None (the terminal env has none).
        pivot_ids: rows for these pivots only (default: every pivot that can start a rollout; for
            tool use, those whose expert turn calls a tool, which is what the reward scores).
        max_history_messages: the last history messages kept in each prompt besides a leading system
            message (None keeps all); for small policies that cannot read a long history.
        system_prompt: keep the history's leading system message (tau-bench's airline policy is
            long: a tiny policy cannot read it).
        env_kwargs: more keyword arguments for the episode env (`max_turns`, `backend`, ...).

    Returns:
        A `PivotEnvironment`.
    """
    from datasets import Dataset

    kwargs = {**env_kwargs, **({"dataset": dataset} if dataset is not None else {})}
    probe = gym.make(env_id, **kwargs).unwrapped
    tools = [t.schema for t in probe.world.tools.values()] if env_id == TOOL_USE else []
    cls = environment_class(env_id, kwargs, tools)
    pivots = [probe.pivot(pid) for pid in pivot_ids] if pivot_ids is not None else list(probe.pivots)
    if pivot_ids is None and env_id == TOOL_USE:
        pivots = [p for p in pivots if p.expert.tool_calls]
    rows = [
        {
            "prompt": cut_history(flat_prompt_messages(p), max_history_messages, system_prompt),
            "pivot_id": p.id,
            "env_id": env_id,
        }
        for p in pivots
    ]
    probe.close()
    return PivotEnvironment(train_dataset=Dataset.from_list(rows), factory=cls, environment_class=cls)
