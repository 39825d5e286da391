"""Harbor's Agent Trajectory Interchange Format (ATIF, `trajectory.json`, schema `ATIF-v1.x`): read and write.

A document is `{schema_version, session_id, agent: {name, version, model_name, tool_definitions?},
steps: [{step_id, source: system|user|agent, message, tool_calls?: [{tool_call_id, function_name,
arguments}], observation?: {results: [{source_call_id?, content}]}}]}`. Reading: a system or user
step is that message; an agent step is an assistant turn (its message and tool calls) followed
by its observation, one tool message per result that names its call, and the results that name
none as one user message (what a text-only harness shows as the next user turn). A Terminus agent
(`agent.name` terminus-*) replied in JSON and read terminal output as the next user turn: its
steps become Terminus JSON turns (the recorded reply when `message` is one, else one built from
its `bash_command` keystrokes and `mark_task_complete`), its observations user turns. Writing is the
inverse, so a converted run goes out and comes back with the same chat.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pivot_core._actions import parse_terminus
from pivot_core._model import Message, ToolCall, Trajectory
from pivot_core.errors import InvalidTrajectory

SCHEMA_VERSION = "ATIF-v1.4"
_ANALYSIS_PLAN = re.compile(r"Analysis:\s*(.*?)\s*\nPlan:\s*(.*)\Z", re.DOTALL)


def detect(record: Mapping[str, Any]) -> bool:
    """True for an ATIF document."""
    return str(record.get("schema_version", "")).upper().startswith("ATIF") and isinstance(record.get("steps"), list)


def _content(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # multimodal content parts: their text
        return "".join(p.get("text", "") for p in value if isinstance(p, Mapping))
    return "" if value is None else json.dumps(value, ensure_ascii=False)


def _terminus_turn(text: str, step: Mapping[str, Any]) -> str:
    """A Terminus agent step as the JSON reply its harness parsed (the recorded reply when it is one)."""
    if parse_terminus(text) is not None:
        return text
    commands, done = [], False
    for call in step.get("tool_calls") or []:
        args = call.get("arguments") if isinstance(call.get("arguments"), Mapping) else {}
        if call.get("function_name") == "mark_task_complete":
            done = True
        elif isinstance(args.get("keystrokes"), str):
            commands.append({"keystrokes": args["keystrokes"], "duration": args.get("duration", 1.0)})
    # Harbor writes Terminus-2's reply as "Analysis: ...\nPlan: ..." (the JSON's two text fields)
    found = _ANALYSIS_PLAN.match(text)
    analysis, plan = (found.group(1), found.group(2)) if found else (text, "")
    turn = {"analysis": analysis, "plan": plan, "commands": commands, "task_complete": done}
    return json.dumps(turn, ensure_ascii=False)


def _tool_calls(step: Mapping[str, Any]) -> list[ToolCall]:
    """An agent step's tool calls (arguments kept as recorded when a string, else as JSON)."""
    calls = []
    for call in step.get("tool_calls") or []:
        args = call.get("arguments")
        arguments = args if isinstance(args, str) else json.dumps(args if args is not None else {}, ensure_ascii=False)
        calls.append(ToolCall(str(call.get("function_name")), arguments, str(call.get("tool_call_id") or "")))
    return calls


def _observation(step: Mapping[str, Any], named: bool) -> list[Message]:
    """An agent step's observation: a tool message per result naming its call (when `named`), the rest one user turn."""
    observation = step.get("observation")
    results = (observation.get("results") or []) if isinstance(observation, Mapping) else []
    messages, loose = [], []
    for r in results:
        if not isinstance(r, Mapping):
            continue
        if r.get("source_call_id") and named:
            messages.append(Message("tool", _content(r.get("content")), tool_call_id=str(r["source_call_id"])))
        else:
            loose.append(_content(r.get("content")))
    if loose:
        messages.append(Message("user", "\n".join(loose)))
    return messages


def from_atif(
    record: Mapping[str, Any], *, default_id: str = "", context: Mapping[str, Any] | None = None
) -> Trajectory:
    """One ATIF document -> Trajectory (domain terminal; `context.harness` is the agent's name)."""
    if not detect(record):
        raise InvalidTrajectory(
            f"expected an ATIF document (schema_version 'ATIF-v1.x' and steps), got keys {sorted(record)[:8]}"
        )
    agent = record.get("agent") if isinstance(record.get("agent"), Mapping) else {}
    messages: list[Message] = []
    actions = 0
    terminus = str(agent.get("name") or "").lower().startswith("terminus")
    for i, step in enumerate(record["steps"]):
        if not isinstance(step, Mapping):
            raise InvalidTrajectory(f"steps[{i}]: expected an object")
        source, text = step.get("source"), _content(step.get("message"))
        if source in ("system", "user"):
            messages.append(Message(source, text))
            continue
        if source != "agent":
            raise InvalidTrajectory(f"steps[{i}]: expected source system, user or agent, got {source!r}")
        calls = _tool_calls(step)
        actions += 1
        if terminus:
            # Terminus replies in JSON; Harbor records the reply as `message` and its keystrokes as calls
            messages.append(Message("assistant", _terminus_turn(text, step), extra={"step_id": step.get("step_id")}))
        else:
            messages.append(
                Message("assistant", text or None, tool_calls=calls, extra={"step_id": step.get("step_id")})
            )
        messages.extend(_observation(step, named=bool(calls) and not terminus))
    tools = tuple(t for t in agent.get("tool_definitions") or () if isinstance(t, Mapping))
    ctx = {
        "harness": str(agent.get("name") or "atif"),
        "format": "atif",
        "action_format": "tool_call" if any(m.tool_calls for m in messages) else "text",
        "agent": " ".join(str(agent[k]) for k in ("name", "version") if agent.get(k)),
        "model": agent.get("model_name"),
        "schema_version": record.get("schema_version"),
        **dict(context or {}),
        "actions": actions,
    }
    resolved, trial_reward = ctx.get("is_resolved"), ctx.get("trial_reward")
    # a Harbor trial's verifier float (`harbor_trials.py`) is the run's outcome; else Terminal-Bench's is_resolved
    reward = float(trial_reward) if isinstance(trial_reward, int | float) else None
    return Trajectory(
        id=str(record.get("session_id") or default_id),
        domain="terminal",
        messages=tuple(messages),
        tools=tools,
        reward=reward if reward is not None else (None if resolved is None else float(bool(resolved))),
        context={k: v for k, v in ctx.items() if v is not None},
        source="atif",
    )


def to_atif(
    messages: Iterable[Message], *, session_id: str, agent: Mapping[str, Any], tools: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """A chat -> one ATIF document (the inverse of `from_atif`)."""
    steps: list[dict[str, Any]] = []
    last_agent: dict[str, Any] | None = None
    for m in messages:
        if m.role == "tool" and last_agent is not None:
            results = last_agent.setdefault("observation", {"results": []})["results"]
            results.append({"source_call_id": m.tool_call_id, "content": m.content or ""})
            continue
        step: dict[str, Any] = {"step_id": len(steps) + 1, "source": "agent" if m.role == "assistant" else m.role}
        step["message"] = m.content or ""
        if m.role == "assistant":
            if m.tool_calls:
                step["tool_calls"] = [
                    {
                        "tool_call_id": c.id,
                        "function_name": c.name,
                        "arguments": c.parsed_arguments() if isinstance(c.parsed_arguments(), dict) else c.arguments,
                    }
                    for c in m.tool_calls
                ]
        # tool messages attach to the agent step before them; a user turn (a text harness's observation) is a step
        last_agent = step if m.role == "assistant" else None
        steps.append(step)
    head: dict[str, Any] = {"name": agent.get("name") or "unknown", "version": agent.get("version") or "unknown"}
    if agent.get("model_name"):
        head["model_name"] = agent["model_name"]
    tool_list = [dict(t) for t in tools]
    if tool_list:
        head["tool_definitions"] = tool_list
    return {"schema_version": SCHEMA_VERSION, "session_id": session_id, "agent": head, "steps": steps}


def trajectory_to_atif(trajectory: Trajectory) -> dict[str, Any]:
    """A Trajectory -> ATIF (agent name from `context.harness`)."""
    ctx = trajectory.context
    agent = {"name": ctx.get("harness") or ctx.get("agent") or "unknown", "model_name": ctx.get("model")}
    return to_atif(trajectory.messages, session_id=trajectory.id, agent=agent, tools=trajectory.tools)
