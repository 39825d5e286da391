"""`pivot/terminal-episode-v0`: Terminus episodes in one live container, scored by the task's own tests.

Each episode holds one live container of the sandbox backend (`pivot_sandbox`
`Session`), started from the backend's snapshot of the pivot's state and made like a
verifier's candidate container (no network unless `network="registries"`, no capabilities, the
backend's limits). A turn is a Terminus JSON message: its keystrokes run one by one in the live
shell, and the observation is
the terminal output in Terminus's framing (`New Terminal Output:`). `task_complete: true` ends the
episode; a command the sandbox had to stop (timeout, memory, output flood) ends it too, with
outcome 0, as in the verifier. The episode is truncated at its turn budget and at the task's
wall-clock limit (task.yaml's `max_agent_timeout_sec`, a Harbor task.toml's `[agent].timeout_sec`):
once the limit has passed no further command runs, and a command still running when it passes is
stopped there (outcome 0, as any command the sandbox stops). A Harbor task's container runs under
its task.toml's cpus and memory (`pivot_sandbox.task_limits`). The container is removed at the
end, on reset, on close, and by the backend's exit and signal clean-up if the process dies.

A pivot converted from a real agent's run (`pivot convert`: `context.harness` openhands or
mini-swe-agent) plays its harness's own format instead: OpenHands tool calls (its file editor
included) answered by tool messages, mini-swe-agent's one bash block answered by its
`<returncode>`/`<output>` message, `finish` and mini-swe-agent's submission ending the episode
(`_harness.py`). Stepping a run's recorded turns from its first pivot replays the run.

The outcome is the task's tests, run in the final state whatever ended the episode (Terminal-Bench
runs them after a timeout too); a Harbor task's outcome is the float its test.sh wrote (reward.json,
else reward.txt), and a Harbor task not verifiable offline gives an error outcome. A pivot
synthesized from a Terminal-Bench task folder (`context["task"]["dir"]`) is scored by the task's own
pytest suite, delivered only now, run in a fresh shell with the image's own environment and read
through a nonce status line (the sandbox's `pivot_sandbox.run_task_tests`, as `task_tests` does). A
pivot without a task folder may name shell checks in `context["task_tests"]`: `{"commands":
[commands run as root that must all exit 0], "timeout": seconds}`. A pivot with neither has no
outcome: its episodes end with an error outcome, never a guessed reward.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pivot_core import Message, Pivot, history_typed, parse_terminus, typed_action
from pivot_envs.episodes._base import EpisodeEnv, EpisodeOutcome, PathLike, StepResult
from pivot_envs.episodes._harness import Ran, harness_of, harness_turn, recorded_interpreter
from pivot_envs.episodes._swe import swe_outcome
from verifiers_plugins import sandbox_backend

DEFAULT_TURNS = 50  # Terminal-Bench bounds an agent by time, not turns; a turn budget keeps RL episodes finite
OUTPUT_CHARS = 4000  # as much terminal output per command as the synthesized trajectories show
PARSE_ERROR = (
    'Previous response had parsing errors:\nERROR: expected one JSON object with the fields "analysis", '
    '"plan", "commands" and "task_complete".\n\nPlease fix these issues and provide a proper JSON response.'
)


def screen(cwd: str, command: str, output: str) -> str:
    """A command and its output as the terminal shows them (the synthesized trajectories' framing)."""
    text = output if len(output) <= OUTPUT_CHARS else output[:OUTPUT_CHARS] + "\n[... output truncated]"
    return f"agent@sandbox:{cwd}$ {command}\n{text}".rstrip("\n") + "\n"


class TerminalEpisodeEnv(EpisodeEnv):
    """`pivot/terminal-episode-v0`: terminal tasks continued from any pivot in a live container.

    Args:
        dataset: synthesized terminal pivots or trajectories (their pivots carry `context["sandbox"]`).
        max_turns: agent turns per episode; None gives `context["max_turns"]`, else 50, less the history's turns.
        time_limit: wall-clock seconds per episode; None gives the task's `max_agent_timeout_sec`
            (a pivot synthesized from a Terminal-Bench folder; a Harbor folder's `[agent].timeout_sec`;
            others have none), `math.inf` none.
            It counts from the pivot whichever pivot starts the episode: the record does not say
            how long the history took.
        backend: a sandbox backend name registered through `register_sandboxes`.
        backend_config: keyword arguments of the backend factory (e.g. `action_timeout`), over
            `pivot_sandbox.TEST_LIMITS` (a task's tests run in the episode's container) and over the
            task's own container limits (a Harbor task's cpus and memory: `pivot_sandbox.task_limits`,
            shown in the reset `info["restore"]["limits"]`).
        network: "none" (default): the episode's container has no network, as a candidate's.
            "registries": the agent's commands may reach the package registries this machine is
            configured for (`pip install`, `apt-get install`, as the replay of a task's set-up does)
            and no other host, through the Docker backend's registry proxy; the network is taken away
            before the task's tests, which run as without it. `info` after reset and
            `info["outcome"]` then carry `network: "registries"`. Single-step verifiers never get it.
            A backend without live sessions (namespace) is refused here.
        parser: parser name; hermes when None (Terminus JSON stays plain content).
        max_completion_chars: the action space's maximum completion length.
    """

    domain: ClassVar[str] = "terminal"
    rule: ClassVar[str] = "task_tests"

    def __init__(
        self,
        dataset: PathLike | Sequence[PathLike] | None = None,
        *,
        max_turns: int | None = None,
        time_limit: float | None = None,
        backend: str = "docker",
        backend_config: Mapping[str, Any] | None = None,
        network: str = "none",
        parser: str | None = None,
        max_completion_chars: int = 65536,
        render_mode: str | None = None,
    ) -> None:
        if dataset is None:
            raise ValueError(
                "TerminalEpisodeEnv: expected a dataset of sandboxed pivots (`pivot synthesize`), got None"
            )
        from pivot_sandbox import SESSION_NETWORKS

        if network not in SESSION_NETWORKS:
            raise ValueError(f"TerminalEpisodeEnv: expected network in {SESSION_NETWORKS}, got {network!r}")
        super().__init__(
            dataset,
            max_turns=max_turns,
            time_limit=time_limit,
            parser=parser,
            max_completion_chars=max_completion_chars,
            render_mode=render_mode,
        )
        from pivot_sandbox import TEST_LIMITS

        # the limits of a task's test run (memory, processes): the tests run in the episode's container
        self._backend_name, self._backend_config = backend, dict(backend_config or {})
        self.backend = sandbox_backend(backend, **{**TEST_LIMITS, **self._backend_config})
        if network != "none" and not getattr(self.backend, "live_sessions", False):
            raise ValueError(
                f"TerminalEpisodeEnv: the {backend} sandbox backend cannot give an episode registry access "
                f"(network={network!r}): it has no live sessions; use backend='docker'"
            )
        self.network = network
        self.session: Any = None
        self._killed: str | None = None
        # typed at the prompt and not run (no Enter): the next turn's line starts with it
        self._typed = ""
        self._agent_timeouts: dict[str, float] = {}  # task folder -> its max_agent_timeout_sec

    def accepts(self, pivot: Pivot) -> bool:
        """Pivots with a sandbox; a converted run's unsandboxed ones are skipped; others raise naming the pivot.

        `pivot convert --tasks-dir` leaves a pivot unsandboxed with the reason (`context.unsandboxed`).
        """
        from pivot_sandbox import RunFacts, SandboxContext

        if SandboxContext.from_context(pivot.context) is None:
            if RunFacts.from_context(pivot.context).unsandboxed:  # `pivot convert --tasks-dir`: state not rebuilt
                return False
            raise ValueError(
                f"TerminalEpisodeEnv: expected pivots with context['sandbox'] (from `pivot synthesize`), "
                f"got pivot {pivot.id!r}"
            )
        return True

    def default_budget(self, pivot: Pivot) -> int:
        """The pivot's `max_turns` (or 50, or a converted run's own actions if more) less the history's turns."""
        total = int(pivot.context.get("max_turns") or max(DEFAULT_TURNS, int(pivot.context.get("actions") or 0)))
        return total - sum(1 for m in pivot.history if m.role == "assistant")

    def default_time_limit(self, pivot: Pivot) -> float | None:
        """The task's agent timeout for a pivot synthesized from a task folder.

        Terminal-Bench's `max_agent_timeout_sec` (task.yaml), Harbor's `[agent].timeout_sec` (task.toml;
        `harbor.AGENT_TIMEOUT` where the file sets none: Harbor's agent has no limit, an episode has one).
        """
        task = pivot.context.get("task")
        if not isinstance(task, Mapping) or not task.get("dir"):
            return None
        folder = str(task["dir"])
        if folder not in self._agent_timeouts:
            from pivot_sandbox import load_task, resolve_task_dir

            # a folder without a readable task.yaml raises TaskError naming it: its tests could not run either
            self._agent_timeouts[folder] = load_task(resolve_task_dir(folder)).agent_timeout
        return self._agent_timeouts[folder]

    def restore(self, pivot: Pivot) -> dict[str, Any]:
        """Start the episode's container at the pivot's state (snapshot of set-up + history)."""
        from pivot_sandbox import TEST_LIMITS, SandboxSpec, open_session, task_limits

        spec = SandboxSpec.from_context(pivot.context)
        before = history_typed(pivot)
        history = list(before.commands)
        self._killed = None
        self._submission: str | None = None
        self._typed = before.pending
        # the task's own container limits (a Harbor task's task.toml: cpus, memory); `backend_config` over them
        limits = task_limits(pivot.context)
        config = {**TEST_LIMITS, **limits, **self._backend_config}
        self.backend = sandbox_backend(self._backend_name, **config)
        self.session = open_session(self.backend, spec, history, self.network)
        applied = {k: config[k] for k in limits}
        reached = {"network": self.network} if self.network != "none" else {}  # said only when used
        return {
            "restore": {"commands": len(history), "image": spec.image, **({"limits": applied} if applied else {})},
            **reached,
        }

    def step(self, action: str) -> tuple[dict, float, bool, bool, dict]:
        """`EpisodeEnv.step`; the outcome says when the episode reached the registries (`network`)."""
        observation, reward, terminated, truncated, info = super().step(action)
        if "outcome" in info and self.network != "none":
            info["outcome"]["network"] = self.network
        return observation, reward, terminated, truncated, info

    def act(self, message: Message) -> StepResult:
        """Run the turn's keystrokes in the live shell; `task_complete` ends the episode."""
        assert self.current is not None
        if harness_of(self.current) is not None:
            return self._harness_act(message)
        turn = parse_terminus(message.content)
        if turn is None:
            return StepResult((Message("user", PARSE_ERROR),))
        done = "task_complete" if turn.get("task_complete") is True else None
        shown = []
        typed = typed_action(message, self._typed)  # what the terminal runs: keystrokes without Enter wait
        self._typed = typed.pending
        for command in typed.commands:
            left = self.remaining()
            if left <= 0:  # the agent's time is up: the rest of the turn does not run
                return StepResult((Message("user", "New Terminal Output:\n\n" + "".join(shown)),), "time_limit")
            # a command may run until its own timeout or the episode's limit, whichever comes first
            capped = left < self.backend.limits.action_timeout
            cwd = self.session.cwd
            run = self.session.run(command, timeout=left if capped else None)
            if run.killed:
                at_limit = capped and run.killed == "timeout"
                why = "the episode's time limit" if at_limit else run.killed
                self._killed = f"{command[:80]!r}: {why}"
                shown.append(screen(cwd, command, f"[stopped by the sandbox: {why}]"))
                text = "New Terminal Output:\n\n" + "".join(shown)
                return StepResult((Message("user", text),), "time_limit" if at_limit else "killed")
            shown.append(screen(cwd, command, run.output))
        if done and not shown:
            return StepResult((), done)  # a bare "task complete" turn: nothing ran, nothing to show
        if typed.pending:  # shown at the prompt, as a terminal shows typed text
            shown.append(f"agent@sandbox:{self.session.cwd}$ {typed.pending}\n")
        text = "New Terminal Output:\n\n" + ("".join(shown) or "(no command ran)\n")
        return StepResult((Message("user", text),), done)

    def _harness_act(self, message: Message) -> StepResult:
        """A converted run's turn, read and answered in its harness's format (`_harness.py`)."""
        assert self.current is not None
        interpreter = recorded_interpreter(self.recorded_messages(self.current))
        turn = harness_turn(self.current, message, self._run_bounded, interpreter)
        self._submission = turn.submission
        if turn.stopped is not None:
            self._killed = f"a command of turn {self.turn}: {turn.stopped}"
        return StepResult(turn.messages, turn.ended_by)

    def _run_bounded(self, command: str) -> Ran:
        """One command in the live shell, stopped at its timeout or at the episode's time limit."""
        left = self.remaining()
        if left <= 0:  # the agent's time is up: nothing more runs
            return Ran(None, "", "time_limit", self.session.cwd)
        capped = left < self.backend.limits.action_timeout
        run = self.session.run(command, timeout=left if capped else None)
        stopped = "time_limit" if run.killed == "timeout" and capped else run.killed
        return Ran(run.exit_code, run.output, stopped, run.cwd or self.session.cwd)

    def outcome(self, ended_by: str) -> EpisodeOutcome:
        """The task's tests in the final state (0 with the reason when a command had to be stopped)."""
        assert self.current is not None
        if self._killed is not None:
            return EpisodeOutcome(0.0, ended_by, self.rule, {"killed": self._killed})
        # the tests never reach the registries the episode did (`freeze` does it too; shell checks don't freeze)
        self.session.go_offline()
        if isinstance(self.current.context.get("swe"), Mapping):
            return swe_outcome(self.current, self._submission, ended_by)
        task = self.current.context.get("task")
        if isinstance(task, Mapping) and task.get("dir"):
            return self._task_tests(str(task["dir"]), ended_by)
        tests = self.current.context.get("task_tests")
        if not isinstance(tests, Mapping) or not tests.get("commands"):
            return EpisodeOutcome(
                0.0,
                ended_by,
                self.rule,
                error=f"pivot {self.current.id!r} carries no task tests (context['task_tests'])",
            )
        timeout = float(tests.get("timeout") or 60.0)
        results = []
        for command in tests["commands"]:
            run = self.session.run_as_root(str(command), timeout)
            results.append(
                {
                    "command": str(command)[:200],
                    "exit_code": run.exit_code,
                    "killed": run.killed,
                    "output": run.output[-500:],
                }
            )
            if run.exit_code != 0:
                break
        passed = len(results) == len(tests["commands"]) and all(r["exit_code"] == 0 for r in results)
        return EpisodeOutcome(1.0 if passed else 0.0, ended_by, self.rule, {"tests": results, "passed": passed})

    def _task_tests(self, task_dir: str, ended_by: str) -> EpisodeOutcome:
        """The Terminal-Bench task's own pytest suite, run in the live container as its harness runs it.

        A fresh shell with the image's own environment (nothing the policy exported reaches it), the
        tests delivered only now, their tools checked unchanged first (`pivot_sandbox.run_task_tests`, issue 30).
        """
        from pivot_sandbox import SandboxError, TaskError, load_task, resolve_task_dir, run_task_tests

        try:
            task = load_task(resolve_task_dir(task_dir))
            if task.tests.problem:
                raise TaskError(task.tests.problem)
            result = run_task_tests(self.session, task)
        except SandboxError as e:  # the tests cannot run here: no outcome rather than a guess
            return EpisodeOutcome(0.0, ended_by, self.rule, error=f"task tests: {e}")
        details = {"passed": result.passed, "ran": result.ran, "counts": dict(result.counts), "reason": result.reason}
        if task.harbor is not None:  # Harbor's reward is test.sh's float (reward.json, else reward.txt)
            if result.reward is None:  # not verifiable offline, or no reward written: no outcome, never a guess
                return EpisodeOutcome(0.0, ended_by, self.rule, details, error=f"task tests: {result.reason}")
            return EpisodeOutcome(float(result.reward), ended_by, self.rule, details)
        return EpisodeOutcome(1.0 if result.passed else 0.0, ended_by, self.rule, details)

    def release(self) -> None:
        """Remove the episode's container."""
        session, self.session = self.session, None
        if session is not None:
            session.close()
