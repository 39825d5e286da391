"""mini-swe-agent trajectories: bash-only agents (THOUGHT + exactly one fenced bash block per turn).

Two inputs: the converted JSONL (`{id, instance_id, repo, agent: "mini-swe-agent ...", resolved,
messages}`) and the original `.traj.json` (`{info, messages, trajectory_format:
"mini-swe-agent-1", instance_id}`). Observations (`<returncode>..</returncode><output>..`) are user
messages and stay so: the agent saw them as user turns. The provider's raw response
(`extra.response`, with an encrypted reasoning blob) is dropped; the plain reasoning summary is kept.

A turn the harness rejected as malformed (not exactly one bash block: the next message is
mini-swe-agent's format error, "Please always provide EXACTLY ONE action ...") demonstrates no
action; it stays in the history (the agent saw it) and is never a pivot (`rejected_by_harness`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pivot_core._harnesses import MINI_SWE_AGENT
from pivot_core._model import Message, Trajectory
from pivot_core.convert._messages import convert_messages
from pivot_core.errors import InvalidTrajectory

_CONTEXT_KEYS = (
    "benchmark",
    "instance_id",
    "repo",
    "agent",
    "agent_model",
    "exit_status",
    "submission_patch",
    "action_format",
    "harness",
    "fresh_shell",
    "command_timeout",
    "command_shell",
    "start_dir",
    "actions",
)
# mini-swe-agent's environment classes whose commands run as `bash -lc` in a container (`docker exec`)
_LOGIN_SHELL_ENVIRONMENTS = ("docker.DockerEnvironment", "singularity.SingularityEnvironment")

FORMAT_ERROR = "Please always provide EXACTLY ONE action"  # mini-swe-agent's format_error_template
EXPECTED = "a mini-swe-agent record (trajectory_format 'mini-swe-agent-*' or agent 'mini-swe-agent ...')"


def detect(record: Mapping[str, Any]) -> bool:
    """True for a mini-swe-agent record (converted or original)."""
    return str(record.get("trajectory_format", "")).startswith("mini-swe-agent") or str(
        record.get("agent", "")
    ).startswith("mini-swe-agent")


def rejected_by_harness(trajectory: Trajectory, index: int, message: Message) -> bool:
    """True for an assistant turn answered by mini-swe-agent's format error (never a pivot)."""
    following = trajectory.messages[index + 1] if index + 1 < len(trajectory.messages) else None
    return following is not None and following.role == "user" and following.text.lstrip().startswith(FORMAT_ERROR)


def _message(m: Mapping[str, Any]) -> Message:
    extra: dict[str, Any] = {}
    reasoning = m.get("reasoning")
    src_extra = m.get("extra") if isinstance(m.get("extra"), Mapping) else {}
    if reasoning is None and isinstance(src_extra.get("response"), Mapping):
        choices = src_extra["response"].get("choices") or [{}]
        reasoning = ((choices[0] or {}).get("message") or {}).get("reasoning")
    if reasoning:
        extra["reasoning"] = reasoning
    content = m.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return Message(m["role"], content, extra=extra)


def harness_context(info: Mapping[str, Any]) -> dict[str, Any]:
    """How the run's harness ran its commands, from an original record's `info.config` ({} without one).

    `harness`, `fresh_shell` (each command in a fresh subshell), `command_timeout` (its
    environment's timeout, seconds), `command_shell` (`bash-login` for a container environment:
    `docker exec ... bash -lc`), `start_dir` (its environment's `cwd`): what a replay of the run
    needs to run each command as the harness did (`pivot_core.harness_action`).
    """
    config = info.get("config") if isinstance(info.get("config"), Mapping) else None
    if config is None:
        return {}
    env = config.get("environment") if isinstance(config.get("environment"), Mapping) else {}
    kind = str(config.get("environment_type") or "")
    out: dict[str, Any] = {"harness": MINI_SWE_AGENT, "fresh_shell": True}
    if isinstance(env.get("timeout"), int | float) and not isinstance(env.get("timeout"), bool):
        out["command_timeout"] = float(env["timeout"])
    out["command_shell"] = "bash-login" if kind.endswith(_LOGIN_SHELL_ENVIRONMENTS) else "sh"
    if isinstance(env.get("cwd"), str) and env["cwd"]:
        out["start_dir"] = env["cwd"]
    return out


def from_mini_swe_agent(record: Mapping[str, Any], *, default_id: str = "") -> Trajectory:
    """One mini-swe-agent record -> Trajectory (domain swe; reward 1.0 when resolved)."""
    if not detect(record):
        raise InvalidTrajectory(f"expected {EXPECTED}, got keys {sorted(record)[:8]}")
    raw = record.get("messages")
    if not isinstance(raw, list):
        raise InvalidTrajectory("mini-swe-agent record: missing field 'messages'")
    messages = convert_messages(raw, _message)
    info = record.get("info") if isinstance(record.get("info"), Mapping) else {}
    context = {k: record[k] for k in _CONTEXT_KEYS if record.get(k) is not None}
    for key, value in harness_context(info).items():
        context.setdefault(key, value)
    if context.get("harness") == MINI_SWE_AGENT:
        context.setdefault("actions", sum(m.role == "assistant" for m in messages))
    context.setdefault("agent", f"mini-swe-agent {info.get('mini_version', '')}".strip())
    context.setdefault("exit_status", info.get("exit_status"))
    context.setdefault("submission_patch", info.get("submission"))
    context["action_format"] = "bash_block"
    resolved = record.get("resolved")
    if resolved is None and isinstance(record.get("eval_report"), Mapping):
        resolved = record["eval_report"].get("resolved")
    traj_id = record.get("id") or (
        f"mini-swe-agent/{record['instance_id']}" if record.get("instance_id") else default_id
    )
    if not traj_id:
        raise InvalidTrajectory("mini-swe-agent record: missing field 'id' (and no default id given)")
    return Trajectory(
        id=str(traj_id),
        domain="swe",
        messages=tuple(messages),
        reward=None if resolved is None else float(bool(resolved)),
        context={k: v for k, v in context.items() if v is not None},
        source=str(record.get("source") or ""),
    )


def to_mini_swe_agent(trajectory: Trajectory) -> dict[str, Any]:
    """Trajectory -> converted mini-swe-agent JSONL record."""
    ctx = dict(trajectory.context)
    messages = []
    for m in trajectory.messages:
        row: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.extra.get("reasoning"):
            row["reasoning"] = m.extra["reasoning"]
        messages.append(row)
    return {
        "id": trajectory.id,
        "source": trajectory.source,
        **ctx,
        "resolved": None if trajectory.reward is None else trajectory.reward >= 1.0,
        "messages": messages,
    }
