"""OpenHands event streams (`agent-logs/<id>.json`): one run -> one Trajectory in the harness's own form.

The stream is a JSON list of events. An *action* event (`source: agent`, `action: run | edit |
read | think | finish | run_ipython | message | system`) carries, under `tool_call_metadata`,
the model's own response (its text and the function call); an *observation* event names its
action by `cause`. The chat is what CodeAct's conversation memory showed the model:

- the system prompt (the `system` action) and the task instruction (the first user message);
- each model response as one assistant turn: its text, and its function calls as tool calls
  (`execute_bash`, `str_replace_editor`, `think`, `finish`, `execute_ipython_cell`) in OpenHands'
  schemas (`pivot_core/data/openhands_tools.json`); a response with several calls is one turn;
- each observation as a tool message, rendered as OpenHands renders it: a command's output is
  `prefix + content + suffix`, then its working directory, Python interpreter and exit code
  (`CmdOutputObservation.to_agent_observation`); others are their `content`;
- a plain agent `message` is a text turn, and the user's later messages ("Please continue ...")
  are user turns. Recall events (workspace context) are left out: they hold no action.

`edit` actions carry the editor's sub-command (`create`, `str_replace`, `insert`, `undo_edit`)
in the call's arguments; `read` is the same tool's `view`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

from pivot_core._harnesses import OPENHANDS
from pivot_core._model import Message, ToolCall, Trajectory
from pivot_core._openhands_runtime import runtime_files
from pivot_core._shell import COMMAND_POSITION
from pivot_core.errors import InvalidTrajectory

SOURCES = ("agent", "user", "environment")


@cache
def openhands_tools() -> tuple[dict[str, Any], ...]:
    """OpenHands CodeAct's tool schemas (OpenAI function form), as the runs' model saw them."""
    text = (resources.files("pivot_core") / "data" / "openhands_tools.json").read_text(encoding="utf-8")
    return tuple(json.loads(text))


def tool_names() -> frozenset[str]:
    """The names of OpenHands' tools."""
    return frozenset(t["function"]["name"] for t in openhands_tools())


def detect(record: Mapping[str, Any]) -> bool:
    """True for an OpenHands event (the first item of an event-stream file)."""
    return (
        isinstance(record.get("id"), int)
        and record.get("source") in SOURCES
        and ("action" in record or "observation" in record)
        and "timestamp" in record
    )


def render_observation(event: Mapping[str, Any]) -> str:
    """An observation's text as OpenHands showed it to the model."""
    content = event.get("content")
    text = content if isinstance(content, str) else ""
    extras = event.get("extras") if isinstance(event.get("extras"), Mapping) else {}
    meta = extras.get("metadata") if isinstance(extras.get("metadata"), Mapping) else None
    if event.get("observation") != "run" or meta is None:
        return text
    out = f"{meta.get('prefix') or ''}{text}{meta.get('suffix') or ''}"
    if meta.get("working_dir"):
        out += f"\n[Current working directory: {meta['working_dir']}]"
    if meta.get("py_interpreter_path"):
        out += f"\n[Python interpreter: {meta['py_interpreter_path']}]"
    if meta.get("exit_code", -1) != -1:
        out += f"\n[Command finished with exit code {meta['exit_code']}]"
    return out


def exit_code(event: Mapping[str, Any]) -> int | None:
    """The exit code an observation recorded (-1: the command was still running), None when none."""
    extras = event.get("extras") if isinstance(event.get("extras"), Mapping) else {}
    meta = extras.get("metadata") if isinstance(extras.get("metadata"), Mapping) else {}
    code = meta.get("exit_code")
    return code if isinstance(code, int) else None


def _response(event: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """(response id, the model's message) of an action event; None when it has no model response."""
    meta = event.get("tool_call_metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("model_response"), Mapping):
        return None
    response = meta["model_response"]
    choices = response.get("choices") or [{}]
    message = (choices[0] or {}).get("message") if isinstance(choices[0], Mapping) else None
    if not isinstance(message, Mapping):
        return None
    return str(response.get("id") or meta.get("tool_call_id") or event.get("id")), message


def _assistant(message: Mapping[str, Any], event_ids: list[int]) -> Message:
    calls = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        args = fn.get("arguments")
        calls.append(
            ToolCall(str(fn.get("name")), args if isinstance(args, str) else json.dumps(args), str(call["id"]))
        )
    content = message.get("content")
    if isinstance(content, list):  # Anthropic-style content blocks through litellm
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return Message("assistant", content or None, tool_calls=tuple(calls), extra={"events": event_ids})


# a command that moves the shell: the directory after it is not the one the shell started in
_MOVES = re.compile(COMMAND_POSITION + r"(?:cd|pushd|popd)(?=\s|$)")


def start_dir(events: Sequence[Mapping[str, Any]]) -> str | None:
    """The directory OpenHands' shell started in, as the run recorded it; None when it does not tell.

    Every command's observation names the shell's directory after it (`metadata.working_dir`): the
    first command that does not move the shell shows where it started (OpenHands' Terminal-Bench
    runtime: /app, whatever the task image's WORKDIR).
    """
    for e in events:
        if not isinstance(e, Mapping) or e.get("observation") != "run":
            continue
        extras = e.get("extras") if isinstance(e.get("extras"), Mapping) else {}
        meta = extras.get("metadata") if isinstance(extras.get("metadata"), Mapping) else {}
        if _MOVES.search(str(extras.get("command") or "")):
            return None  # where it started is no longer shown
        where = meta.get("working_dir")
        if isinstance(where, str) and where.startswith("/"):
            return where
    return None


def _text(event: Mapping[str, Any]) -> str:
    """A message or system event's text: its `args.content`, else its `message`."""
    args = event.get("args") if isinstance(event.get("args"), Mapping) else {}
    return str(args.get("content") or event.get("message") or "")


def _tool_message(obs: Mapping[str, Any], call_id: str) -> tuple[Message, int | None]:
    """An observation as the tool message the model read, and the exit code it recorded (None when none).

    The message carries what the action did, for a replay to compare with: the output and the exit
    code (an editor call's is 1 when the editor refused it, as its shell equivalent exits).
    """
    code = exit_code(obs)
    output = obs.get("content") if isinstance(obs.get("content"), str) else ""
    if obs.get("observation") == "edit":
        code = 1 if output.startswith("ERROR") else 0
    recorded = {"output": output, **({"exit_code": code} if code is not None else {})}
    return Message("tool", render_observation(obs), tool_call_id=call_id or None, extra={"recorded": recorded}), code


def convert_events(events: Sequence[Mapping[str, Any]]) -> tuple[list[Message], dict[str, Any]]:
    """The chat of an event stream, and facts about it: `{"actions", "exit_codes"}`.

    `actions` counts the agent's action events (what the report's share is of); `exit_codes` maps a
    tool call id to its recorded exit code.
    """
    messages: list[Message] = []
    observations: dict[int, Mapping[str, Any]] = {}
    for e in events:
        if "observation" in e and isinstance(e.get("cause"), int):
            observations[e["cause"]] = e
    seen_responses: set[str] = set()
    actions = 0
    exit_codes: dict[str, int] = {}
    pending_tools: list[Message] = []
    turn_events: list[int] = []
    for e in events:
        if not isinstance(e, Mapping) or "action" not in e:
            continue
        kind, source = e["action"], e.get("source")
        if kind == "system":
            messages.append(Message("system", _text(e)))
            continue
        if kind == "recall" or source == "environment":
            continue
        if source == "user":
            if kind == "message":
                messages.extend(pending_tools)
                pending_tools = []
                messages.append(Message("user", _text(e)))
            continue
        actions += 1
        found = _response(e)
        if found is None:  # a plain text turn (`message`), no model response recorded with it
            messages.extend(pending_tools)
            pending_tools = []
            messages.append(Message("assistant", _text(e)))
            continue
        response_id, model_message = found
        if response_id not in seen_responses:
            # one model response -> one assistant turn, however many actions it became
            seen_responses.add(response_id)
            messages.extend(pending_tools)
            pending_tools = []
            turn_events = [int(e["id"])]  # the same list object stays in the message's `extra`
            messages.append(_assistant(model_message, turn_events))
        else:
            turn_events.append(int(e["id"]))
        obs = observations.get(int(e["id"]))
        call_id = str((e.get("tool_call_metadata") or {}).get("tool_call_id") or "")
        if obs is not None:
            tool, code = _tool_message(obs, call_id)
            pending_tools.append(tool)
            if code is not None and call_id:
                exit_codes[call_id] = code
    messages.extend(pending_tools)
    return messages, {"actions": actions, "exit_codes": exit_codes}


def from_openhands(
    events: Sequence[Mapping[str, Any]], *, run_id: str, context: Mapping[str, Any] | None = None
) -> Trajectory:
    """One OpenHands event stream -> Trajectory (domain terminal, OpenHands' tools).

    Args:
        events: the items of `agent-logs/<id>.json`.
        run_id: the trajectory id (the trial's name when the run sits in a trial folder).
        context: what the run's folder tells (`task_id`, `run`, `is_resolved`, ...).
    """
    if not events or not detect(events[0]):
        raise InvalidTrajectory("expected an OpenHands event stream (a JSON list of events with id/source/action)")
    messages, facts = convert_events(events)
    if not any(m.role == "assistant" for m in messages):
        raise InvalidTrajectory("OpenHands event stream: no agent action")
    ctx = {"harness": OPENHANDS, "format": "openhands", "action_format": "tool_call", **dict(context or {})}
    ctx["actions"] = facts["actions"]
    if facts["exit_codes"]:
        ctx["exit_codes"] = facts["exit_codes"]
    started = start_dir(events)
    if started:
        ctx["start_dir"] = started
    left = runtime_files(events, started or "/app")  # what the runtime made there, as the run shows it
    if left:
        ctx["runtime_files"] = left
    resolved = ctx.get("is_resolved")
    return Trajectory(
        id=run_id,
        domain="terminal",
        messages=tuple(messages),
        tools=openhands_tools(),
        reward=None if resolved is None else float(bool(resolved)),
        context=ctx,
        source="openhands",
    )
