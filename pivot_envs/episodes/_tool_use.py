"""`pivot/tool-use-episode-v0`: tau-bench airline episodes in the tool world, scored by tau-bench's rule.

The episode follows tau-bench's own loop (`tau_bench/agents/tool_calling_agent.py`, `envs/base.py`):

- a tool call runs in the airline world and its output is the observation; calling
  `transfer_to_human_agents` ends the episode;
- a message without tool calls is said to the user, and the user simulator's reply is the
  observation; a reply holding `###STOP###` (or a recorded user with nothing more to say) ends it;
- one agent message is one step, and a task gets 30 steps (tau-bench's `max_num_steps`) counted
  from its start, so an episode from a later pivot has the steps the history has not used.

The outcome is tau-bench's `calculate_reward`: 1 when the final database equals the database after
the task's gold `actions` (run from the initial database, hand-off tools skipped), and every one of
the task's `outputs` appears (case-insensitive, commas removed) in a message the agent said to the
user. tau-bench computes the reward only when the episode is done: a run cut by the step limit
scores 0, and so does a truncated episode here.

Differences from tau-bench, each visible in `info`: an agent message with several tool calls runs
all of them in order (tau-bench runs only the first); none of the recorded GPT-4o turns has more
than one call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pivot_core import Message, Pivot
from pivot_envs.episodes._base import TRUNCATIONS, EpisodeEnv, EpisodeOutcome, PathLike, StepResult
from pivot_tool_worlds import PrefixStateCache, ToolWorld, WorldState
from verifiers_plugins import get_host, get_user_simulator

WORLD = "tau-airline"
TERMINATE_TOOLS = ("transfer_to_human_agents",)
MAX_STEPS = 30  # tau-bench's default max_num_steps per task
MAX_LISTED_DIFFS = 20


# the airline tools' failures for a record missing from the database (`_tau_airline_tools`)
MISSING_RECORD = re.compile(r"Error: (?:user not found|reservation not found|flight \S+ not found)$")


def gold_state(world: ToolWorld, task: Mapping[str, Any]) -> tuple[WorldState, list[str]]:
    """The database after the task's gold actions, and the gold actions that failed."""
    state, failed = world.initial_state(), []
    for action in task.get("actions") or ():
        if action.get("name") in TERMINATE_TOOLS:
            continue  # tau-bench skips its terminate tools when it builds the gold database
        out, state = world.step(state, str(action.get("name")), action.get("kwargs") or {})
        if out.error:
            failed.append(f"{action.get('name')}: {out.output}")
    return state, failed


def said_to_user(conversation: Sequence[Message]) -> list[str]:
    """The agent's messages to the user: tau-bench's `respond` actions (messages with no tool call)."""
    return [m.content or "" for m in conversation if m.role == "assistant" and not m.tool_calls]


def database_differs(world: ToolWorld, final: WorldState, gold: WorldState) -> list[str]:
    """The records (`table/key`) whose changes since the initial database differ between `final` and `gold`."""
    base = world.initial_state()
    got, want = final.changes_since(base), gold.changes_since(base)
    return sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))


def doubtful_failures(world: ToolWorld, failed: Sequence[str]) -> list[str]:
    """The failures that may only mean a record the bundled subset database lacks ([] on the full database).

    A write that failed for want of a record the subset lacks may have succeeded on the full database:
    comparing databases could then call a wrong one right. Any other failure (a price that does not
    add up, a flight not available that day) is read from records the subset holds verbatim: the same there.
    """
    if not world.description.startswith("subset:"):
        return []
    return [f for f in failed if MISSING_RECORD.search(f)]


def tau_bench_outcome(
    world: ToolWorld, final: WorldState, task: Mapping[str, Any], conversation: Sequence[Message], ended_by: str
) -> EpisodeOutcome:
    """tau-bench's reward for an ended episode (see the module docstring)."""
    gold, gold_failed = gold_state(world, task)
    differs = database_differs(world, final, gold)
    texts = [t.lower().replace(",", "") for t in said_to_user(conversation)]
    outputs = {str(o): any(str(o).lower() in t for t in texts) for o in task.get("outputs") or ()}
    details: dict[str, Any] = {
        "r_actions": not differs,
        "r_outputs": all(outputs.values()),
        "outputs": outputs,
        "db_differs": differs[:MAX_LISTED_DIFFS],
        "gold_failed": gold_failed,
        "database": world.description,
    }
    if ended_by in TRUNCATIONS:
        details["why"] = "tau-bench scores a run only when it is done: one cut by the step limit (or time) scores 0"
        return EpisodeOutcome(0.0, ended_by, "tau-bench", details)
    done = not differs and all(outputs.values())
    return EpisodeOutcome(1.0 if done else 0.0, ended_by, "tau-bench", details)


class ToolUseEpisodeEnv(EpisodeEnv):
    """`pivot/tool-use-episode-v0`: tau-bench airline tasks continued from any pivot.

    Args:
        dataset: tau-bench airline trajectories (or pivots of them); the bundled sample when None.
        max_turns: agent turns per episode; None gives the task's 30 steps minus those the history used.
        time_limit: wall-clock seconds per episode; None for none (tau-bench has no time limit).
        user_simulator: a registered simulator name ("recorded", "llm") or a simulator object.
        user_simulator_config: keyword arguments for the simulator's factory (e.g. `url` for llm).
        db_path: the airline database (see `pivot_tool_worlds.locate_db`).
        parser: parser name; hermes when None.
        max_completion_chars: the action space's maximum completion length.
    """

    domain: ClassVar[str] = "tool-use"
    bundled_files: ClassVar[tuple[str, ...]] = ("tool_use_tau_airline.jsonl", "tool_use_tau_airline_exec.jsonl")
    rule: ClassVar[str] = "tau-bench"

    def __init__(
        self,
        dataset: PathLike | Sequence[PathLike] | None = None,
        *,
        max_turns: int | None = None,
        time_limit: float | None = None,
        user_simulator: str | Any = "recorded",
        user_simulator_config: Mapping[str, Any] | None = None,
        db_path: PathLike | None = None,
        parser: str | None = None,
        max_completion_chars: int = 65536,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(
            dataset,
            max_turns=max_turns,
            time_limit=time_limit,
            parser=parser,
            max_completion_chars=max_completion_chars,
            render_mode=render_mode,
        )
        self.world: ToolWorld = get_host().get("tool_worlds", WORLD)(db_path=db_path)
        self.states = PrefixStateCache(self.world)
        if isinstance(user_simulator, str):
            user_simulator = get_user_simulator(user_simulator, **dict(user_simulator_config or {}))
        self.user = user_simulator
        self.state: WorldState | None = None
        self._failed_writes: list[str] = []

    def accepts(self, pivot: Pivot) -> bool:
        """Airline pivots with a task; anything else in the data is an error naming the pivot."""
        task = pivot.context.get("task")
        if pivot.context.get("world") != WORLD or not isinstance(task, Mapping) or "actions" not in task:
            raise ValueError(
                f"ToolUseEpisodeEnv: expected tau-bench airline pivots (context world {WORLD!r} and a task with "
                f"gold 'actions'), got pivot {pivot.id!r} (world {pivot.context.get('world')!r})"
            )
        return True

    def default_budget(self, pivot: Pivot) -> int:
        """tau-bench's 30 steps per task, less the agent turns already in the history."""
        return MAX_STEPS - sum(1 for m in pivot.history if m.role == "assistant")

    def restore(self, pivot: Pivot) -> dict[str, Any]:
        """The database at the history prefix: every recorded call replayed (prefix-cached)."""
        at = self.states.state_at(pivot.history)
        self.state = at.state.fork()
        self._failed_writes = []
        return {"restore": {"calls": at.calls, "diverged": list(at.diverged), "database": self.world.description}}

    def act(self, message: Message) -> StepResult:
        """Run the tool calls in the world, or hand the text to the user simulator."""
        assert self.state is not None and self.current is not None
        if not message.tool_calls:
            reply = self.user.reply(self.conversation, task=self.current.context["task"], recorded=self._recorded())
            if reply.error is not None:
                return StepResult(error=f"user simulator: {reply.error}")
            said = (Message("user", reply.content),) if reply.content is not None else ()
            return StepResult(said, "user_stop" if reply.stop else None)
        results = []
        for call in message.tool_calls:
            out, self.state = self.world.step(self.state, call.name, call.arguments)
            results.append(Message("tool", out.output, tool_call_id=call.id, name=call.name))
            tool = self.world.tools.get(call.name)
            if out.error and tool is not None and not tool.read_only:
                self._failed_writes.append(f"{call.name}: {out.output}")
            if call.name in TERMINATE_TOOLS:
                return StepResult(tuple(results), "transfer")  # no call after a hand-off runs
        return StepResult(tuple(results))

    def outcome(self, ended_by: str) -> EpisodeOutcome:
        """tau-bench's rule; on the bundled subset database a failed write cannot be trusted."""
        assert self.state is not None and self.current is not None
        result = tau_bench_outcome(self.world, self.state, self.current.context["task"], self.conversation, ended_by)
        doubtful = doubtful_failures(self.world, list(result.details.get("gold_failed", [])) + self._failed_writes)
        if doubtful:  # no reward given on a guess
            return EpisodeOutcome(
                0.0,
                ended_by,
                self.rule,
                result.details,
                error=f"writes failed on the bundled subset database ({doubtful[:3]}); use the full database",
            )
        return result

    @property
    def failed_writes(self) -> tuple[str, ...]:
        """The episode's state-changing calls the world rejected so far (`name: output`), in order."""
        return tuple(self._failed_writes)

    def _recorded(self) -> tuple[Message, ...]:
        assert self.current is not None
        return self.recorded_messages(self.current)
