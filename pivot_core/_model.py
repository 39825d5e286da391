"""The data model: OpenAI-chat messages, trajectories, pivots and their profiles.

Every class is a frozen dataclass validated in `__post_init__` (or in an `__init__` written out
where construction cost matters), with `to_json`/`from_json` that round-trip. A bad payload
raises `InvalidTrajectory` naming the field, with the cause chained.
Mappings held by these classes (`arguments` is a JSON string, `context`/`extra` are plain dicts)
are treated as read-only by convention: transforms build new objects with `dataclasses.replace`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pivot_core._safejson import decode_json
from pivot_core.errors import InvalidTrajectory

ROLES = ("system", "user", "assistant", "tool")
DOMAINS = ("tool-use", "swe", "terminal", "browse")


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise InvalidTrajectory(message)


def _check_tools(owner: str, tools: tuple[Any, ...]) -> None:
    """Each tool is an OpenAI function schema: an object with a non-empty name and object parameters."""
    for i, tool in enumerate(tools):
        _require(
            isinstance(tool, Mapping), f"{owner}.tools[{i}]: expected a tool schema object, got {type(tool).__name__}"
        )
        fn = tool.get("function", tool)
        _require(isinstance(fn, Mapping), f"{owner}.tools[{i}].function: expected an object, got {type(fn).__name__}")
        name = fn.get("name")
        _require(isinstance(name, str) and bool(name), f"{owner}.tools[{i}]: expected a non-empty name, got {name!r}")
        params = fn.get("parameters")
        _require(
            params is None or isinstance(params, Mapping),
            f"{owner}.tools[{i}] ({name}): expected parameters as a JSON schema object, got {type(params).__name__}",
        )


def _list_field(payload: Mapping[str, Any], key: str, required: bool = False) -> tuple[Any, ...]:
    """A list field of a JSON payload (missing or null is empty unless `required`).

    A string or an object where a list belongs is an error, not the list of its characters or keys.
    """
    value = payload[key] if required else payload.get(key)
    if value is None and not required:
        return ()
    if not isinstance(value, list | tuple):
        raise InvalidTrajectory(f"{key}: expected a list, got {type(value).__name__}")
    return tuple(value)


def _object_field(payload: Mapping[str, Any], key: str) -> dict[str, Any]:
    """An object field of a JSON payload (missing or null is empty); a list of pairs is an error, not a dict."""
    value = payload.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidTrajectory(f"{key}: expected an object, got {type(value).__name__}")
    return dict(value)


def _id_field(payload: Mapping[str, Any], key: str) -> str | None:
    """A call id: a string, or a number some formats write (kept as its text); anything else is an error."""
    value = payload.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InvalidTrajectory(f"{key}: expected a string id, got {type(value).__name__}")


def _load(cls_name: str, payload: Any, build) -> Any:
    """Run `build(payload)` turning KeyError/TypeError into InvalidTrajectory with the cause chained."""
    if not isinstance(payload, Mapping):
        raise InvalidTrajectory(f"{cls_name}: expected a JSON object, got {type(payload).__name__}")
    try:
        return build(payload)
    except InvalidTrajectory:
        raise
    except KeyError as e:
        raise InvalidTrajectory(f"{cls_name}: missing field {e.args[0]!r}") from e
    except (TypeError, ValueError, AttributeError) as e:
        raise InvalidTrajectory(f"{cls_name}: {e}") from e


@dataclass(frozen=True, init=False)
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

    # Written out rather than generated (as `Verdict.__init__` is): every parsed completion builds
    # a ToolCall and a Message, and the generated frozen `__init__` (one `object.__setattr__` per
    # field, then `__post_init__`) cost about as much as decoding the call. Same arguments, same checks.
    def __init__(self, name: str, arguments: str = "{}", id: str = "") -> None:
        # `if ...: raise` rather than `_require(cond, f"...")`: formatting messages that are never
        # raised was most of the cost.
        if not isinstance(name, str):
            raise InvalidTrajectory(f"ToolCall.name: expected str, got {type(name).__name__}")
        if not isinstance(arguments, str):
            raise InvalidTrajectory(f"ToolCall.arguments: expected a JSON string, got {type(arguments).__name__}")
        if not isinstance(id, str):
            raise InvalidTrajectory(f"ToolCall.id: expected str, got {type(id).__name__}")
        d = self.__dict__  # item stores: cheaper than `update(**kwargs)`, which builds a dict first
        d["name"], d["arguments"], d["id"] = name, arguments, id

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


# `Message(...)` without `extra` gets a fresh dict, as the field's `default_factory` gives (None stays an error).
_NO_EXTRA: Any = object()


@dataclass(frozen=True, init=False)
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

    # Written out, as `ToolCall.__init__` is (one per parsed completion). Same arguments, same checks.
    def __init__(
        self,
        role: str,
        content: str | None = None,
        tool_calls: Sequence[ToolCall] = (),
        tool_call_id: str | None = None,
        name: str | None = None,
        extra: Mapping[str, Any] = _NO_EXTRA,
    ) -> None:
        if role not in ROLES:
            raise InvalidTrajectory(f"Message.role: expected one of {ROLES}, got {role!r}")
        if not (content is None or isinstance(content, str)):
            raise InvalidTrajectory(f"Message.content: expected str or None, got {type(content).__name__}")
        if type(tool_calls) is not tuple:
            tool_calls = tuple(tool_calls)
        if tool_calls:
            if not all(isinstance(c, ToolCall) for c in tool_calls):
                raise InvalidTrajectory("Message.tool_calls: expected ToolCall items")
            if role != "assistant":
                raise InvalidTrajectory(f"Message.tool_calls: only assistant messages call tools, got role {role!r}")
        if not (tool_call_id is None or isinstance(tool_call_id, str)):
            raise InvalidTrajectory(f"Message.tool_call_id: expected str or None, got {type(tool_call_id).__name__}")
        if not (name is None or isinstance(name, str)):
            raise InvalidTrajectory(f"Message.name: expected str or None, got {type(name).__name__}")
        if extra is _NO_EXTRA:
            extra = {}  # the field's default: a fresh dict per message
        elif type(extra) is not dict and not isinstance(extra, Mapping):  # the ABC check only when needed
            raise InvalidTrajectory(f"Message.extra: expected a mapping, got {type(extra).__name__}")
        d = self.__dict__  # item stores: cheaper than `update(**kwargs)`, which builds a dict first
        d["role"] = role
        d["content"] = content
        d["tool_calls"] = tool_calls
        d["tool_call_id"] = tool_call_id
        d["name"] = name
        d["extra"] = extra

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


ProfileOutcome = Literal["unprofiled", "all_zero", "all_one", "constant", "mixed"]


@dataclass(frozen=True)
class Profile:
    """K verified samples of a reference policy at one pivot.

    Attributes:
        k: number of samples.
        rewards: the K rewards in sample order.
        policy_id: which policy sampled them (model path or name + revision).
        verifier_hash: hash of the verifier chain configuration that scored them.
    """

    k: int
    rewards: tuple[float, ...]
    policy_id: str = ""
    verifier_hash: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "rewards", tuple(float(r) for r in self.rewards))
        _require(self.k == len(self.rewards), f"Profile.k: expected len(rewards)={len(self.rewards)}, got {self.k}")
        _require(all(math.isfinite(r) for r in self.rewards), "Profile.rewards: expected finite numbers")
        _require(
            all(0.0 <= r <= 1.0 for r in self.rewards),
            f"Profile.rewards: expected rewards in [0, 1], got {[r for r in self.rewards if not 0.0 <= r <= 1.0][:3]}",
        )

    @property
    def mean(self) -> float:
        """Mean reward (0.0 for an empty profile)."""
        return sum(self.rewards) / self.k if self.k else 0.0

    @property
    def variance(self) -> float:
        """Population variance of the rewards, the quantity PivotRL filters on."""
        if not self.k:
            return 0.0
        m = self.mean
        return sum((r - m) ** 2 for r in self.rewards) / self.k

    @property
    def outcome(self) -> ProfileOutcome:
        """The group's kind, the one classification the report and `select_pivots` share.

        "all_zero" and "all_one" are the zero-variance groups of binary rewards; "constant" is a
        zero-variance group of one partial reward (all 0.5): it teaches nothing either; "mixed"
        has variance > 0 (what selection keeps is a subset of it); "unprofiled" has no samples.
        """
        if not self.k:
            return "unprofiled"
        if self.variance > 0:
            return "mixed"
        if self.mean >= 1.0:
            return "all_one"
        return "all_zero" if self.mean <= 0.0 else "constant"

    @property
    def zero_variance(self) -> bool:
        """True for a profiled group whose rewards are all equal (GRPO's advantage is 0 for every sample)."""
        return self.outcome in ("all_zero", "all_one", "constant")

    def to_json(self) -> dict[str, Any]:
        """`{k, rewards, mean, variance, policy_id, verifier_hash}`; mean/variance are informative."""
        return {
            "k": self.k,
            "rewards": list(self.rewards),
            "mean": self.mean,
            "variance": self.variance,
            "policy_id": self.policy_id,
            "verifier_hash": self.verifier_hash,
        }

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Profile:
        """Inverse of `to_json` (mean and variance are recomputed, not trusted)."""

        def build(p: Mapping[str, Any]) -> Profile:
            rewards = tuple(p["rewards"])
            return cls(
                k=int(p.get("k", len(rewards))),
                rewards=rewards,
                policy_id=p.get("policy_id", ""),
                verifier_hash=p.get("verifier_hash", ""),
            )

        return _load("Profile", payload, build)


@dataclass(frozen=True)
class Pivot:
    """One assistant turn of an expert trajectory, seen as a one-step decision problem.

    Attributes:
        id: stable id, `"<trajectory id>#<turn index>"` (index into the trajectory's messages).
        domain: one of `DOMAINS`.
        history: every message before the expert turn (the state).
        expert: the expert's assistant message (the demonstrated action).
        tools: OpenAI function schemas available at this turn.
        context: what verifiers need beyond the chat (e.g. `sandbox`, `corpus`, `world`,
            `format` such as "terminus", `source_format` and fields a writer must give back).
        profile: the reference policy's K verified samples, once profiled.
    """

    id: str
    domain: str
    history: tuple[Message, ...]
    expert: Message
    tools: tuple[Mapping[str, Any], ...] = ()
    context: Mapping[str, Any] = field(default_factory=dict)
    profile: Profile | None = None

    def __post_init__(self) -> None:
        _require(isinstance(self.id, str) and bool(self.id), "Pivot.id: expected a non-empty string")
        _require(self.domain in DOMAINS, f"Pivot.domain: expected one of {DOMAINS}, got {self.domain!r}")
        object.__setattr__(self, "history", tuple(self.history))
        object.__setattr__(self, "tools", tuple(self.tools))
        _require(isinstance(self.expert, Message), "Pivot.expert: expected a Message")
        _require(self.expert.role == "assistant", f"Pivot.expert: expected role 'assistant', got {self.expert.role!r}")
        _require(all(isinstance(m, Message) for m in self.history), "Pivot.history: expected Message items")
        _check_tools("Pivot", self.tools)
        _require(isinstance(self.context, Mapping), "Pivot.context: expected a mapping")

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Names of the tools available at this pivot."""
        return tuple(tool_schema_name(t) for t in self.tools)

    def tool_schema(self, name: str) -> Mapping[str, Any] | None:
        """The JSON schema of a tool's parameters, None when the tool is unknown."""
        for t in self.tools:
            if tool_schema_name(t) == name:
                fn = t.get("function", t)
                return fn.get("parameters")
        return None

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
