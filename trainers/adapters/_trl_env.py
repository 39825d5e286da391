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
On a terminal run converted from a real agent (`context.harness`), the tools are that harness's
own and each call is one of its turns: OpenHands' tools by their schemas, mini-swe-agent's `bash`.
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
from pivot_core import HARNESSES, MINI_SWE_AGENT, OPENHANDS, TERMINUS, Message, Pivot, ToolCall, render_completion
from pivot_envs.episodes import database_differs, doubtful_failures, gold_state
from pivot_tool_worlds import WorldState
from trainers.adapters._common import PivotScorer, action_reward, flat_prompt_messages, outcome_reward

TOOL_USE = "pivot/tool-use-episode-v0"
TERMINAL = "pivot/terminal-episode-v0"
SCORING_ENV = {TOOL_USE: "pivot/tool-use-v0"}  # the single-step env whose verifier chain scores a pivot's action
AIRLINE_WORLD = "tau-airline"  # the world the tool-use episode env restores (its `db_path` is that world's)
_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool}
_TYPES |= {"array": list, "object": dict}
ENDED = "error: the episode has ended ({why}); no further tool call runs"
# The harnesses whose own format the terminal episode plays (`pivot_envs/episodes/_harness.py`);
# any other pivot (synthesized, a Terminus run) reads Terminus JSON turns.
MINI_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # how mini-swe-agent ends a run
MINI_THOUGHT = "I run the next command."


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
    """The airline world's tools; the reward judges the rollout's first turn and every call after it.

    TRL does not tell an environment where one assistant turn ends, so the pivot's action is read
    as the rollout's first calls, as many as the expert's own turn made (tau-bench's recorded
    turns make one): a rollout whose first call is the expert's scores 1, a wrong call 0, and a
    rollout that called nothing 0 (the expert called a tool there). The calls after the action are
    judged as the episode env judges them (tau-bench's database rule): a record they changed must end
    as the task's gold database holds it, so a lookup, or a write the world rejected, costs nothing
    and a stray write (cancelling a reservation the task keeps) turns the 1 into 0.
    """

    _scorer: PivotScorer | None = None

    def __init__(self) -> None:
        super().__init__()
        self._action_state: WorldState | None = None  # the database as the pivot's action left it
        self._action_failed = 0  # the episode's rejected writes by then

    def reset(self, pivot_id: str, **row: Any) -> None:
        """Restore the live state at `pivot_id` (the other row columns are TRL's; the prompt is the history)."""
        super().reset(pivot_id, **row)
        self._action_state, self._action_failed = None, 0

    def _call_tool(self, name: str, arguments: Mapping[str, Any]) -> str:
        call = ToolCall(name=name, arguments=json.dumps(dict(arguments), ensure_ascii=False))
        self._calls.append(call)
        out = self._step(Message("assistant", None, tool_calls=(call,)))
        if len(self._calls) == self._width():  # the action ends here: what follows is judged on its own
            self._action_state, self._action_failed = self._env.state, len(self._env.failed_writes)
        return out

    def _width(self) -> int:
        """The calls that make the pivot's action: as many as the expert's turn made (at least one)."""
        assert self._pivot is not None
        return max(1, len(self._pivot.expert.tool_calls))

    def get_reward(self) -> float | None:
        """The pivot's verifier chain on the rollout's first calls, times the database rule on the rest.

        None when either cannot be decided (an error verdict; a rejected write on the bundled subset
        database, which the episode env's outcome calls an error too).
        """
        if self._pivot is None:
            return None
        width = self._width()
        action = Message("assistant", None if self._calls else "", tool_calls=tuple(self._calls[:width]))
        scorer = type(self)._scorer
        if scorer is None:
            scorer = type(self)._scorer = PivotScorer(SCORING_ENV[TOOL_USE], **scoring_kwargs(self._env_kwargs))
        reward = action_reward(scorer, self._pivot, action)
        if not reward or len(self._calls) <= width:  # a wrong or undecided action, or no call after it
            return reward
        after = self._after_action()
        return None if after is None else reward * after

    def _after_action(self) -> float | None:
        """1.0 when the calls after the action pass the episode env's database rule, 0.0 when not, None undecided.

        The rule is the episode env's own (`database_differs` against the task's gold database, and
        `doubtful_failures` for writes rejected on the subset database), asked only of the records
        those calls changed: the rollout need not finish the task, only not stray from it.
        """
        assert self._pivot is not None and self._action_state is not None
        world, final = self._env.world, self._env.state
        failed = list(self._env.failed_writes[self._action_failed :])
        changed = final.changes_since(self._action_state)
        if not changed:
            return None if doubtful_failures(world, failed) else 1.0
        gold, gold_failed = gold_state(world, self._pivot.context["task"])
        if doubtful_failures(world, failed + gold_failed):  # the gold database itself may be a guess there
            return None
        return 0.0 if set(changed) & set(database_differs(world, final, gold)) else 1.0


class ShellEnvironment(EpisodeEnvironment):
    """A terminal episode: the reward is the task's tests after the rollout, in the harness's own format.

    Subclasses say which harness's turns they write (`_harness`, see `harness_name`) and how that
    harness ends a run (`_end_turn`): TRL does not end an episode, so `get_reward` ends it the way
    the harness would before the tests run.
    """

    _env_id = TERMINAL
    _harness = TERMINUS

    def reset(self, pivot_id: str, **row: Any) -> None:
        """Restore the task's container at `pivot_id`, a pivot of this class's harness.

        Raises:
            ValueError: the pivot is another harness's: this class's tools would write turns its
                harness does not read.
        """
        harness = harness_name(self._env.pivot(pivot_id))
        if harness != self._harness:  # checked before a container starts for it
            raise ValueError(
                f"pivot {pivot_id!r} is a {harness} pivot; this environment writes {self._harness} turns "
                f"(pivot_environment(..., harness={harness!r}) plays it)"
            )
        super().reset(pivot_id, **row)

    def _end_turn(self) -> Message:
        """The turn with which the harness ends its run."""
        raise NotImplementedError

    def get_reward(self) -> float | None:
        """The task's tests in the final state (the episode is ended here when the rollout did not end it)."""
        if self._pivot is None:
            return None
        if self._ended is None:
            self._step(self._end_turn())
        if self._ended is None:  # the harness did not end on its own end turn: no outcome to read
            return None
        return outcome_reward(self._last_info)


class TerminalEnvironment(ShellEnvironment):
    """A shell in the task's container at the pivot's state, one Terminus JSON turn per `bash` call."""

    def bash(self, command: str) -> str:
        """Run a shell command in the task's terminal and return what the terminal shows.

        Args:
            command: the command line to run (bash syntax; it runs in the task's working directory).
        """
        turn = {"analysis": "", "plan": "", "commands": [{"keystrokes": command + "\n", "duration": 1.0}]}
        return self._step(Message("assistant", json.dumps(turn | {"task_complete": False})))

    def _end_turn(self) -> Message:
        return Message("assistant", json.dumps({"analysis": "", "plan": "", "commands": [], "task_complete": True}))


class OpenHandsEnvironment(ShellEnvironment):
    """A converted OpenHands run: its own tools (one method per schema in the pivots' `tools`).

    Each call is one OpenHands tool-call turn of the episode, answered as OpenHands answers it
    (`execute_bash`'s output with its exit-code and working-directory lines, the editor's own
    messages; an editor `create` or `str_replace` changes the file in the container); `finish`
    ends the episode. The methods come from `tool_method`.
    """

    _harness = OPENHANDS

    def _call_tool(self, name: str, arguments: Mapping[str, Any]) -> str:
        call = ToolCall(name=name, arguments=json.dumps(dict(arguments), ensure_ascii=False))
        return self._step(Message("assistant", None, tool_calls=(call,)))

    def _end_turn(self) -> Message:
        finish = {"message": "", "task_completed": "true"}
        return Message("assistant", None, tool_calls=(ToolCall(name="finish", arguments=json.dumps(finish)),))


class MiniSweAgentEnvironment(ShellEnvironment):
    """A converted mini-swe-agent run: `bash` writes its turn (a THOUGHT and one ```bash block)."""

    _harness = MINI_SWE_AGENT

    def bash(self, command: str) -> str:
        """Run a command as mini-swe-agent runs it and return its <returncode> and <output>.

        Each command runs in a fresh `/bin/sh -c` in the task's working directory: `cd` and
        `export` do not persist to the next command. To submit, run `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.

        Args:
            command: the command line to run (one holding a ```bash fence is mini-swe-agent's format error).
        """
        return self._step(Message("assistant", mini_turn(command)))

    def _end_turn(self) -> Message:
        return Message("assistant", mini_turn(MINI_SUBMIT))


def mini_turn(command: str) -> str:
    """mini-swe-agent's reply format for one command: a THOUGHT line and exactly one ```bash block."""
    return f"THOUGHT: {MINI_THOUGHT}\n\n```bash\n{command}\n```"


def harness_name(pivot: Pivot) -> str:
    """The harness whose turns an episode at `pivot` reads: a converted run's, else Terminus JSON."""
    harness = str(pivot.context.get("harness") or "")
    return harness if harness in HARNESSES else TERMINUS


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
    Google docstring's `Args:`; enums travel as `(choices: [...])`. The tool's description comes
    back with its lines, less surrounding blank space (and cut at a literal `Args:`, `Returns:` or
    `Raises:`, where transformers' parser starts a section); a parameter's on one line. Calling it
    runs the tool in the episode (`_call_tool`).

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

    def call(self: Any, **arguments: Any) -> str:
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
    # the description keeps its lines (OpenHands' are markdown); transformers strips only its ends
    description = inspect.cleandoc(str(fn.get("description") or name))
    call.__name__ = call.__qualname__ = name
    # no return annotation: transformers would add `"return": {"type": "string"}`, which the tool's own schema lacks
    call.__signature__ = inspect.Signature(signature)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in signature[1:]}
    call.__doc__ = description + ("\n\nArgs:\n" + "\n".join(lines) if lines else "")
    return call


def environment_class(
    env_id: str, env_kwargs: Mapping[str, Any], tools: Sequence[Mapping[str, Any]] = (), harness: str = TERMINUS
) -> type:
    """The environment class for an episode env id: the domain's base plus one method per tool schema.

    For the terminal, `harness` picks the turns the tools write: `TERMINUS` (`bash`), `MINI_SWE_AGENT`
    (`bash` in mini-swe-agent's format) or `OPENHANDS` (one method per schema in `tools`).
    """
    methods = {}
    if env_id == TOOL_USE or harness == OPENHANDS:
        for schema in tools:
            method = tool_method(schema)
            if method.__name__ in ("reset", "get_reward") or hasattr(ShellEnvironment, method.__name__):
                raise ValueError(f"tool {method.__name__!r} would shadow the environment's own method")
            methods[method.__name__] = method
    if env_id == TOOL_USE:
        base: type = ToolUseEnvironment
        name = "PivotToolUseEnvironment"
    elif env_id == TERMINAL:
        bases = {
            TERMINUS: TerminalEnvironment,
            OPENHANDS: OpenHandsEnvironment,
            MINI_SWE_AGENT: MiniSweAgentEnvironment,
        }
        if harness not in bases:
            raise ValueError(f"expected a terminal harness in {sorted(bases)}, got {harness!r}")
        base = bases[harness]
        name = {TERMINUS: "PivotTerminalEnvironment", OPENHANDS: "PivotOpenHandsEnvironment"}.get(
            harness, "PivotMiniSweAgentEnvironment"
        )
    else:
        raise ValueError(f"pivot_environment: expected an episode env id in {[TOOL_USE, TERMINAL]}, got {env_id!r}")
    return type(name, (base,), {**methods, "_env_id": env_id, "_env_kwargs": dict(env_kwargs)})


def harness_tools(pivots: Sequence[Pivot]) -> list[dict[str, Any]]:
    """The tool schemas of a converted run's pivots (every name once, in the order first seen).

    Raises:
        ValueError: two pivots give one tool different schemas (one method cannot render both), or none gives any.
    """
    found: dict[str, dict[str, Any]] = {}
    for pivot in pivots:
        for schema in pivot.tools:
            name = str(schema.get("function", schema)["name"])
            if found.setdefault(name, dict(schema)) != schema:
                raise ValueError(f"pivot {pivot.id!r}: tool {name!r} has another schema than earlier pivots' {name!r}")
    if not found:
        raise ValueError("OpenHands pivots without tool schemas (`tools`): convert the runs again with `pivot convert`")
    return list(found.values())


def select_harness(pivots: Sequence[Pivot], harness: str | None, explicit: bool) -> tuple[str, list[Pivot]]:
    """The harness a terminal dataset is played in, and its pivots.

    TRL shows one environment class's methods as the tools of every row, and each harness reads
    only its own turns (mini-swe-agent reads no tool call; OpenHands has no `bash`), so one
    environment cannot serve two harnesses: a dataset mixing them is refused unless `harness`
    picks one (rows of the others are left out; an explicitly listed pivot of another is refused).
    """
    kinds = sorted({harness_name(p) for p in pivots})
    if harness is None:
        if len(kinds) > 1:
            counts = {k: sum(harness_name(p) == k for p in pivots) for k in kinds}
            raise ValueError(
                f"pivot_environment: the dataset mixes harnesses {counts} (pivots each); one environment "
                f"exposes one harness's tools to every row: pass harness= one of {kinds}, one pivot_environment each"
            )
        return (kinds[0] if kinds else TERMINUS), list(pivots)
    if harness not in (TERMINUS, *HARNESSES):
        raise ValueError(f"pivot_environment: expected harness in {[TERMINUS, *HARNESSES]}, got {harness!r}")
    others = [p.id for p in pivots if harness_name(p) != harness]
    if explicit and others:
        raise ValueError(f"pivot_environment: pivots {others[:3]} are not {harness} pivots")
    return harness, [p for p in pivots if harness_name(p) == harness]


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
    harness: str | None = None,
    **env_kwargs: Any,
) -> PivotEnvironment:
    """Episode env `env_id` as TRL's `environment_factory` plus its train dataset.

    ```python
    env = pivot_environment("pivot/tool-use-episode-v0")
    trainer = GRPOTrainer(model=..., train_dataset=env.train_dataset, environment_factory=env.factory, ...)
    ```

    Args:
        env_id: `pivot/tool-use-episode-v0` (the airline world's tools, reward from the pivot's
            verifiers) or `pivot/terminal-episode-v0` (reward from the task's tests; the tools are
            `bash`, or a converted run's harness's own: OpenHands' tools by their schemas,
            mini-swe-agent's `bash` answered with `<returncode>`/`<output>`).
        dataset: the episode env's data file(s); its bundled sample when None (the terminal env has none).
        pivot_ids: rows for these pivots only (default: every pivot that can start a rollout; for
            tool use, those whose expert turn calls a tool, which is what the reward scores).
        max_history_messages: the last history messages kept in each prompt besides a leading system
            message (None keeps all); for small policies that cannot read a long history.
        system_prompt: keep the history's leading system message (tau-bench's airline policy is
            long: a tiny policy cannot read it).
        harness: for the terminal, the pivots played: `openhands` and `mini-swe-agent` (runs
            converted by `pivot convert`: their harness's own tools, see below) or `terminus`
            (the others: `bash` writing Terminus JSON). None takes the dataset's one harness and
            refuses a dataset mixing harnesses (TRL shows one class's tools to every row).
        env_kwargs: more keyword arguments for the episode env (`max_turns`, `backend`, ...).

    Returns:
        A `PivotEnvironment`.
    """
    from datasets import Dataset

    kwargs = {**env_kwargs, **({"dataset": dataset} if dataset is not None else {})}
    if harness is not None and env_id != TERMINAL:
        raise ValueError(f"pivot_environment: harness= is for {TERMINAL}, got env {env_id!r}")
    probe = gym.make(env_id, **kwargs).unwrapped
    pivots = [probe.pivot(pid) for pid in pivot_ids] if pivot_ids is not None else list(probe.pivots)
    if env_id == TOOL_USE:
        tools = [t.schema for t in probe.world.tools.values()]
        pivots = pivots if pivot_ids is not None else [p for p in pivots if p.expert.tool_calls]
        cls = environment_class(env_id, kwargs, tools)
    else:
        harness, pivots = select_harness(pivots, harness, explicit=pivot_ids is not None)
        cls = environment_class(env_id, kwargs, harness_tools(pivots) if harness == OPENHANDS else (), harness)
    rows = _train_rows(pivots, env_id, max_history_messages, system_prompt)
    probe.close()
    return PivotEnvironment(train_dataset=Dataset.from_list(rows), factory=cls, environment_class=cls)


def _train_rows(pivots: Sequence[Pivot], env_id: str, keep: int | None, system_prompt: bool) -> list[dict[str, Any]]:
    """One train-dataset row per pivot: its prompt messages (cut as `cut_history` cuts), its id, the env's id."""
    prompts = [cut_history(flat_prompt_messages(p), keep, system_prompt) for p in pivots]
    return [{"prompt": m, "pivot_id": p.id, "env_id": env_id} for m, p in zip(prompts, pivots, strict=True)]
