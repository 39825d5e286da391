"""ReAct HotpotQA trajectories (Search/Lookup/Finish over Wikipedia) and the raw ReAct few-shot prompts.

ReAct's `Search[entity]` is really an exact-title open (LangChain's Wikipedia docstore returns the
page intro or `Could not find [x]. Similar: [...]`), so it becomes an `open` call; `Lookup[k]`
becomes `find` in the open page and `Finish[a]` becomes `answer`. The original action strings are
kept in each assistant message's `extra["react_action"]`, so `to_react` writes them back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pivot_core._model import Message, ToolCall, Trajectory
from pivot_core.browse._tools import BROWSE_TOOLS
from pivot_core.errors import InvalidTrajectory

# ReAct verb -> (browse tool, argument name)
REACT_TOOLS: dict[str, tuple[str, str]] = {
    "search": ("open", "title"),
    "lookup": ("find", "keyword"),
    "finish": ("answer", "answer"),
}
_VERB = {tool: verb for verb, (tool, _) in REACT_TOOLS.items()}
_ACTION = re.compile(r"^\s*(\w+)\[(.*)\]\s*$", re.DOTALL)
_PROMPT_LINE = re.compile(r"^(Question|Thought \d+|Action \d+|Observation \d+):\s?(.*)$")


def detect(record: Mapping[str, Any]) -> bool:
    """True for a ReAct trajectory record (`steps` with `action`s, and a `question`)."""
    steps = record.get("steps")
    return isinstance(steps, list) and "question" in record and all(isinstance(s, Mapping) for s in steps[:1])


def parse_action(action: str) -> tuple[str, str] | None:
    """`"Search[x]"` -> `("search", "x")`; None for text that is no ReAct action."""
    match = _ACTION.match(action or "")
    if match is None or match.group(1).lower() not in REACT_TOOLS:
        return None
    return match.group(1).lower(), match.group(2)


def _turn(n: int, thought: str, action: str, observation: str | None) -> list[Message]:
    """One ReAct step as an assistant message (a tool call when the action parses) and its observation."""
    parsed = parse_action(action)
    extra = {"react_action": action}
    if parsed is None:
        # An unparseable action is kept as text: it demonstrates a malformed turn, not a tool call.
        out = [Message("assistant", f"{thought}\n{action}".strip(), extra=extra)]
        return out + ([Message("user", observation)] if observation is not None else [])
    tool, arg = REACT_TOOLS[parsed[0]]
    call = ToolCall(tool, json.dumps({arg: parsed[1]}, ensure_ascii=False), f"call_{n}")
    out = [Message("assistant", thought.strip() or None, (call,), extra=extra)]
    if observation is not None:
        out.append(Message("tool", observation, tool_call_id=call.id, name=tool))
    return out


def from_react(record: Mapping[str, Any], *, default_id: str = "") -> Trajectory:
    """Read one ReAct trajectory record (see ../shared/data/browse/SOURCES.md) into a Trajectory."""
    traj_id = str(record.get("id") or default_id)
    if not traj_id:
        raise InvalidTrajectory("react record: missing field 'id' (and no default id given)")
    question = record["question"]
    if not isinstance(question, str):
        raise InvalidTrajectory(f"react record: expected 'question' to be a string, got {type(question).__name__}")
    messages = [Message("user", question)]
    for i, step in enumerate(record["steps"], start=1):
        if not isinstance(step.get("action"), str):
            raise InvalidTrajectory(f"react record: steps[{i - 1}].action: expected a string")
        messages += _turn(i, str(step.get("thought") or ""), step["action"], step.get("observation"))
    success = record.get("success")
    context = {
        "source_format": "react",
        "question_id": record.get("question_id"),
        "question": question,
        "gold_answer": record.get("gold_answer"),
        "gold_doc_ids": list(record.get("gold_doc_ids") or ()),
        "status": record.get("status"),
        "mode": record.get("mode"),
    }
    return Trajectory(
        id=traj_id,
        domain="browse",
        messages=tuple(messages),
        tools=BROWSE_TOOLS,
        reward=None if success is None else float(bool(success)),
        context={k: v for k, v in context.items() if v not in (None, "")},
        source=str(record.get("source") or ""),
    )


def to_react(trajectory: Trajectory) -> dict[str, Any]:
    """Write a Trajectory back as a ReAct record (inverse of `from_react` on the fields it reads)."""
    steps: list[dict[str, Any]] = []
    for m in trajectory.messages[1:]:
        if m.role == "assistant":
            action = m.extra.get("react_action") or _action_of(m)
            thought = m.text
            if not m.tool_calls and thought.endswith(action):
                thought = thought[: -len(action)].strip()
            steps.append({"step": len(steps) + 1, "thought": thought, "action": action})
        elif steps and "observation" not in steps[-1]:
            steps[-1]["observation"] = m.text
    ctx = trajectory.context
    out: dict[str, Any] = {
        "id": trajectory.id,
        "source": trajectory.source,
        "question": trajectory.messages[0].text,
        "steps": steps,
    }
    for key in ("question_id", "gold_answer", "gold_doc_ids", "status", "mode"):
        if key in ctx:
            out[key] = ctx[key]
    if trajectory.reward is not None:
        out["success"] = trajectory.reward >= 1.0
    return out


def _action_of(message: Message) -> str:
    if not message.tool_calls:
        return ""
    call = message.tool_calls[0]
    args = call.parsed_arguments() or {}
    verb = _VERB.get(call.name, call.name)
    return f"{verb.capitalize()}[{next(iter(args.values()), '') if isinstance(args, dict) else ''}]"


def from_react_prompt(name: str, text: str) -> list[Trajectory]:
    """Split one raw ReAct few-shot prompt (`Question:`/`Thought n:`/`Action n:`/`Observation n:`) into trajectories."""
    episodes: list[dict[str, Any]] = []
    for line in text.splitlines():
        match = _PROMPT_LINE.match(line.strip())
        if match is None:
            if episodes and line.strip():  # a wrapped observation line continues the last field
                last = episodes[-1]["steps"][-1] if episodes[-1]["steps"] else None
                if last and "observation" in last:
                    last["observation"] += "\n" + line.strip()
            continue
        label, value = match.groups()
        if label == "Question":
            episodes.append({"question": value, "steps": []})
        elif not episodes:
            raise InvalidTrajectory(f"react prompt {name!r}: {label} before any Question")
        elif label.startswith("Thought"):
            episodes[-1]["steps"].append({"thought": value})
        elif label.startswith("Action"):
            if not episodes[-1]["steps"] or "action" in episodes[-1]["steps"][-1]:
                episodes[-1]["steps"].append({"thought": ""})
            episodes[-1]["steps"][-1]["action"] = value
        else:
            episodes[-1]["steps"][-1]["observation"] = value
    out = []
    for i, ep in enumerate(episodes):
        finish = [parse_action(s.get("action", "")) for s in ep["steps"]]
        gold = next((a[1] for a in finish if a and a[0] == "finish"), None)
        rec = {
            "id": f"react-prompt/{name}/{i}",
            "question": ep["question"],
            "steps": ep["steps"],
            "gold_answer": gold,
            "success": True,
            "source": f"ysymyth/ReAct:prompts/prompts_naive.json#{name}",
        }
        out.append(from_react(rec))
    return out
