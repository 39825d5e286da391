"""The data model: OpenAI-chat messages, trajectories, pivots and their profiles.

Every class is a frozen dataclass validated in `__post_init__`, with `to_json`/`from_json` that
round-trip. A bad payload raises `InvalidTrajectory` naming the field, with the cause chained.
Mappings held by these classes (`arguments` is a JSON string, `context`/`extra` are plain dicts)
are treated as read-only by convention: transforms build new objects with `dataclasses.replace`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pivot_core._checks import check_tools as _check_tools
from pivot_core._checks import id_field as _id_field
from pivot_core._checks import list_field as _list_field
from pivot_core._checks import load as _load
from pivot_core._checks import object_field as _object_field
from pivot_core._checks import require as _require
from pivot_core._history import History
from pivot_core._profile import Profile
from pivot_core._safejson import decode_json
from pivot_core.errors import InvalidTrajectory

ROLES = ("system", "user", "assistant", "tool")
DOMAINS = ("tool-use", "swe", "terminal", "browse")


@dataclass(frozen=True)
class ToolCall:
    """One function call of an assistant turn (OpenAI `tool_calls[i]`).

    Attributes:
        name: the function name.
        arguments: the arguments as a JSON string, exactly as the model emitted them.
        id: the call id that the tool message answers (`tool_call_id`), "" when unknown.
    """

    name: str
    arguments: str = "{}"
    id: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise InvalidTrajectory(f"ToolCall.name: expected str, got {type(self.name).__name__}")
        if not isinstance(self.arguments, str):
            raise InvalidTrajectory(f"ToolCall.arguments: expected a JSON string, got {type(self.arguments).__name__}")
        if not isinstance(self.id, str):
            raise InvalidTrajectory(f"ToolCall.id: expected str, got {type(self.id).__name__}")

    def parsed_arguments(self) -> Any:
        """The arguments decoded from JSON, or None when they are not valid, safe JSON (see `decode_json`)."""
        try:
            return decode_json(self.arguments) if self.arguments.strip() else {}
        except json.JSONDecodeError:
            return None

    def to_json(self) -> dict[str, Any]:
        """OpenAI shape: `{id, type: "function", function: {name, arguments}}`."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> ToolCall:
        """Read the OpenAI shape; also accepts a flat `{name, arguments}` with dict arguments."""

        def build(p: Mapping[str, Any]) -> ToolCall:
            fn = p.get("function", p)
            args = fn.get("arguments", "{}")
            if not isinstance(args, str):
                args = json.dumps(args, ensure_ascii=False)
            return cls(name=fn["name"], arguments=args, id=_id_field(p, "id") or "")

        return _load("ToolCall", payload, build)


@dataclass(frozen=True)
class Message:
    """One chat message in the OpenAI shape.

    Attributes:
        role: one of system, user, assistant, tool.
        content: the text, or None for an assistant turn that only calls tools.
        tool_calls: the calls of an assistant turn, in order (parallel calls are several).
        tool_call_id: for a tool message, the id of the call it answers.
        name: for a tool message, the tool's name (optional in OpenAI chat).
        extra: fields of the source format that the canonical shape has no slot for (kept so
            that writers can give them back); never read by verifiers.
    """

    role: str
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidTrajectory(f"Message.role: expected one of {ROLES}, got {self.role!r}")
        if not (self.content is None or isinstance(self.content, str)):
            raise InvalidTrajectory(f"Message.content: expected str or None, got {type(self.content).__name__}")
        if type(self.tool_calls) is not tuple:
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.tool_calls:
            if not all(isinstance(c, ToolCall) for c in self.tool_calls):
                raise InvalidTrajectory("Message.tool_calls: expected ToolCall items")
            if self.role != "assistant":
                raise InvalidTrajectory(
                    f"Message.tool_calls: only assistant messages call tools, got role {self.role!r}"
                )
        for name in ("tool_call_id", "name"):
            value = getattr(self, name)
            if not (value is None or isinstance(value, str)):
                raise InvalidTrajectory(f"Message.{name}: expected str or None, got {type(value).__name__}")
        if not isinstance(self.extra, Mapping):
            raise InvalidTrajectory(f"Message.extra: expected a mapping, got {type(self.extra).__name__}")

    @property
    def is_tool_call(self) -> bool:
        """True when this assistant turn calls at least one tool."""
        return bool(self.tool_calls)

    @property
    def text(self) -> str:
        """The content, "" when None."""
        return self.content or ""

    def to_json(self) -> dict[str, Any]:
        """OpenAI chat shape; `extra` is written under the `"extra"` key only when non-empty."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_json() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        if self.extra:
            out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Message:
        """Read the OpenAI chat shape (content given as a list of text parts is joined)."""

        def build(p: Mapping[str, Any]) -> Message:
            content = p.get("content")
            if isinstance(content, list):
                content = "".join(part.get("text", "") if isinstance(part, Mapping) else str(part) for part in content)
            calls = tuple(ToolCall.from_json(c) for c in _list_field(p, "tool_calls"))
            return cls(
                role=p["role"],
                content=content,
                tool_calls=calls,
                tool_call_id=_id_field(p, "tool_call_id"),
                name=p.get("name"),
                extra=_object_field(p, "extra"),
            )

        return _load("Message", payload, build)


@dataclass(frozen=True)
class Trajectory:
    """An expert agent episode: a chat, the tools it could call, and what is known about it.

    Attributes:
        id: stable id, unique within a dataset.
        domain: one of `DOMAINS`.
        messages: the chat in order.
        tools: OpenAI function schemas (`{"type": "function", "function": {...}}`).
        reward: the episode outcome when the source recorded one (1.0 = success).
        context: what verifiers need beyond the chat (sandbox, corpus, world, task metadata).
        source: where it came from (`owner/repo@commit:path`).
    """

    id: str
    domain: str
    messages: tuple[Message, ...]
    tools: tuple[Mapping[str, Any], ...] = ()
    reward: float | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""

    def __post_init__(self) -> None:
        _require(isinstance(self.id, str) and bool(self.id), "Trajectory.id: expected a non-empty string")
        _require(self.domain in DOMAINS, f"Trajectory.domain: expected one of {DOMAINS}, got {self.domain!r}")
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "tools", tuple(self.tools))
        _require(all(isinstance(m, Message) for m in self.messages), "Trajectory.messages: expected Message items")
        _check_tools("Trajectory", self.tools)
        _require(isinstance(self.context, Mapping), "Trajectory.context: expected a mapping")

    def to_json(self) -> dict[str, Any]:
        """OpenAI-chat JSONL record: `{id, domain, messages, tools, reward, context, source}`."""
        return {
            "id": self.id,
            "domain": self.domain,
            "messages": [m.to_json() for m in self.messages],
            "tools": [dict(t) for t in self.tools],
            "reward": self.reward,
            "context": dict(self.context),
            "source": self.source,
        }

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Trajectory:
        """Inverse of `to_json`."""

        def build(p: Mapping[str, Any]) -> Trajectory:
            return cls(
                id=p["id"],
                domain=p["domain"],
                messages=tuple(Message.from_json(m) for m in _list_field(p, "messages", required=True)),
                tools=_list_field(p, "tools"),
                reward=p.get("reward"),
                context=_object_field(p, "context"),
                source=p.get("source") or "",
            )

        return _load("Trajectory", payload, build)


@dataclass(frozen=True)
class Pivot:
    """One assistant turn of an expert trajectory, seen as a one-step decision problem.

    Attributes:
        id: stable id, `"<trajectory id>#<turn index>"` (index into the trajectory's messages).
        domain: one of `DOMAINS`.
        history: every message before the expert turn (the state): a `History`, which reads as a
            tuple; pivots of one trajectory share its messages (`History.prefix`) instead of
            each copying its prefix.
        expert: the expert's assistant message (the demonstrated action).
        tools: OpenAI function schemas available at this turn.
        context: what verifiers need beyond the chat (e.g. `sandbox`, `corpus`, `world`,
            `format` such as "terminus", `source_format` and fields a writer must give back).
        profile: the reference policy's K verified samples, once profiled.
    """

    id: str
    domain: str
    history: Sequence[Message]
    expert: Message
    tools: tuple[Mapping[str, Any], ...] = ()
    context: Mapping[str, Any] = field(default_factory=dict)
    profile: Profile | None = None

    def __post_init__(self) -> None:
        _require(isinstance(self.id, str) and bool(self.id), "Pivot.id: expected a non-empty string")
        _require(self.domain in DOMAINS, f"Pivot.domain: expected one of {DOMAINS}, got {self.domain!r}")
        if type(self.history) is not History:  # a History's items were checked when it was made
            items = tuple(self.history)
            for i, m in enumerate(items):
                if not isinstance(m, Message):
                    raise InvalidTrajectory(f"Pivot.history[{i}]: expected a Message, got {type(m).__name__}")
            object.__setattr__(self, "history", History(items))
        object.__setattr__(self, "tools", tuple(self.tools))
        _require(isinstance(self.expert, Message), "Pivot.expert: expected a Message")
        _require(self.expert.role == "assistant", f"Pivot.expert: expected role 'assistant', got {self.expert.role!r}")
        _check_tools("Pivot", self.tools)
        _require(isinstance(self.context, Mapping), "Pivot.context: expected a mapping")

    @functools.cached_property
    def tool_schemas(self) -> Mapping[str, Mapping[str, Any] | None]:
        """Each tool's parameter schema by name (the first tool of a name wins), read once per pivot."""
        out: dict[str, Mapping[str, Any] | None] = {}
        for t in self.tools:
            out.setdefault(tool_schema_name(t), t.get("function", t).get("parameters"))
        return out

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Names of the tools available at this pivot."""
        return tuple(tool_schema_name(t) for t in self.tools)

    def tool_schema(self, name: str) -> Mapping[str, Any] | None:
        """The JSON schema of a tool's parameters, None when the tool is unknown."""
        return self.tool_schemas.get(name)

    def content_hash(self) -> str:
        """SHA-256 of the pivot's state and expert action (not its profile): the cache key."""
        payload = self.to_json()
        payload.pop("profile", None)
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        """`{id, domain, history, expert, tools, context, profile}` with messages in OpenAI shape."""
        return {
            "id": self.id,
            "domain": self.domain,
            "history": [m.to_json() for m in self.history],
            "expert": self.expert.to_json(),
            "tools": [dict(t) for t in self.tools],
            "context": dict(self.context),
            "profile": self.profile.to_json() if self.profile else None,
        }

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Pivot:
        """Inverse of `to_json`."""

        def build(p: Mapping[str, Any]) -> Pivot:
            return cls(
                id=p["id"],
                domain=p["domain"],
                history=tuple(Message.from_json(m) for m in _list_field(p, "history", required=True)),
                expert=Message.from_json(p["expert"]),
                tools=_list_field(p, "tools"),
                context=_object_field(p, "context"),
                profile=Profile.from_json(p["profile"]) if p.get("profile") else None,
            )

        return _load("Pivot", payload, build)


def tool_schema_name(tool: Mapping[str, Any]) -> str:
    """Name of an OpenAI tool schema, nested (`{"function": {"name"}}`) or flat (`{"name"}`)."""
    fn = tool.get("function", tool)
    return str(fn.get("name", ""))


def as_tool_schemas(tools: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """Normalise flat Responses-API tools (`{type, name, parameters}`) to nested chat tools."""
    out = []
    for t in tools:
        if "function" in t:
            out.append(dict(t))
        else:
            fn = {k: v for k, v in t.items() if k != "type"}
            out.append({"type": "function", "function": fn})
    return tuple(out)


# `Profile` lives in `_profile.py` and `History` in `_history.py`; both are part of the model.
__all__ = ["DOMAINS", "ROLES", "History", "Message", "Pivot", "Profile", "ToolCall", "Trajectory", "as_tool_schemas"]
