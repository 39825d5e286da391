"""tau2-bench simulations (dual control: the user simulator calls tools too).

Two inputs: the converted JSONL (`{id, benchmark: "tau2-bench", task, policy, reward,
messages}`) and the original `Results` JSON (`{timestamp, info, tasks, simulations}`), whose
simulations `results_records` expands into records of the same shape.

How user-side tool calls appear: they do not, in the agent's history. In tau2 the user's tool
calls run against the user's own device and the agent only ever receives the user's text
messages, so a pivot's history is what the agent saw. The hidden user-side messages (user turns
that call tools and the tool results they get, `requestor: "user"`) ride along in
`extra["tau2_hidden_before"]` of the next visible message (or `context["tau2_hidden_after"]` at
the end), so `to_tau2` gives them back. Only agent assistant turns become pivots.

The agent's system prompt is not recorded; the converter writes the recorded policy as the
system message (`extra["reconstructed"] = True`). The run recorded no tool schemas: a file
reader infers them from every agent call in the file (`infer_tools`: names, argument keys and
JSON types, keys present in every call required), marked `"x-inferred": true`, so the policy
sees which tools exist and `json_schema` can check names and types.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pivot_core._model import Message, ToolCall, Trajectory
from pivot_core.errors import InvalidTrajectory

# Per-message fields the converted file drops too (provider payloads, token accounting).
_DROP = ("raw_data", "usage", "cost")
_CORE = ("role", "content", "tool_calls", "id")


def is_results(data: Mapping[str, Any]) -> bool:
    """True for an original tau2 `Results` object."""
    return isinstance(data.get("simulations"), list) and "tasks" in data


def results_records(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One record per simulation of a `Results` object, with its task, policy and domain attached."""
    tasks = {t.get("id"): t for t in data.get("tasks") or () if isinstance(t, Mapping)}
    env = (data.get("info") or {}).get("environment_info") or {}
    agent = ((data.get("info") or {}).get("agent_info") or {}).get("llm")
    user = ((data.get("info") or {}).get("user_info") or {}).get("llm")
    out = []
    for sim in data["simulations"]:
        rec = dict(sim)
        rec.update(
            {
                "benchmark": "tau2-bench",
                "domain": env.get("domain_name"),
                "policy": env.get("policy"),
                "task": tasks.get(sim.get("task_id")),
                "agent_model": agent,
                "user_model": user,
            }
        )
        rec["simulation_id"] = sim.get("id")
        rec["id"] = f"tau2_bench/{env.get('domain_name')}/{agent}/{sim.get('task_id')}/trial{sim.get('trial', 0)}"
        out.append(rec)
    return out


EXPECTED = "a tau2 simulation record (benchmark 'tau2-bench', or task_id + termination_reason + messages)"


def detect(record: Mapping[str, Any]) -> bool:
    """True for a tau2 simulation record (converted or expanded from `Results`)."""
    return record.get("benchmark") == "tau2-bench" or {"task_id", "termination_reason", "messages"} <= set(record)


def _hidden(m: Mapping[str, Any]) -> bool:
    """User-side traffic the agent never sees: user tool calls and the results they get."""
    if m.get("role") == "user" and m.get("tool_calls"):
        return True
    return m.get("role") == "tool" and m.get("requestor") == "user"


def _message(m: Mapping[str, Any], hidden: list[dict[str, Any]]) -> Message:
    extra = {k: v for k, v in m.items() if k not in _CORE and k not in _DROP}
    if hidden:
        extra["tau2_hidden_before"] = hidden
    calls = tuple(ToolCall.from_json(c) for c in m.get("tool_calls") or ())
    role = m["role"]
    if role == "tool":
        return Message("tool", m.get("content"), tool_call_id=str(m.get("id") or ""), extra=extra)
    return Message(role, m.get("content"), tool_calls=calls, extra=extra)


_JSON_TYPES = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def _json_type(value: Any) -> str | None:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), None)


def infer_tools(records: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """OpenAI tool schemas inferred from the agent's recorded calls (user-side calls excluded)."""
    seen: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        for m in rec.get("messages") or ():
            if isinstance(m, Mapping) and m.get("role") == "assistant":
                for call in m.get("tool_calls") or ():
                    args = call.get("arguments")
                    seen.setdefault(call.get("name"), []).append(args if isinstance(args, dict) else {})
    tools = []
    for name, calls in sorted((n, c) for n, c in seen.items() if isinstance(n, str)):
        props: dict[str, Any] = {}
        for args in calls:
            for key, value in args.items():
                types = props.setdefault(key, set())
                if _json_type(value):
                    types.add("number" if _json_type(value) == "integer" else _json_type(value))
        required = sorted(k for k in props if all(k in a for a in calls))
        params = {
            "type": "object",
            "properties": {k: ({"type": sorted(t)[0]} if len(t) == 1 else {}) for k, t in sorted(props.items())},
            "required": required,
        }
        tools.append(
            {
                "type": "function",
                "x-inferred": True,
                "function": {
                    "name": name,
                    "description": "Inferred from the recorded agent calls (tau2 recorded no schema).",
                    "parameters": params,
                },
            }
        )
    return tuple(tools)


def from_tau2(
    record: Mapping[str, Any], *, default_id: str = "", tools: tuple[Mapping[str, Any], ...] = ()
) -> Trajectory:
    """One tau2 simulation record -> Trajectory (domain tool-use; reward, task and policy kept)."""
    if not detect(record):
        raise InvalidTrajectory(f"expected {EXPECTED}, got keys {sorted(record)[:8]}")
    raw = record.get("messages")
    if not isinstance(raw, list):
        raise InvalidTrajectory("tau2 record: missing field 'messages'")
    messages: list[Message] = []
    if record.get("policy"):
        messages.append(Message("system", record["policy"], extra={"reconstructed": True}))
    hidden: list[dict[str, Any]] = []
    for i, m in enumerate(raw):
        if not isinstance(m, Mapping):
            raise InvalidTrajectory(f"messages[{i}]: expected an object, got {type(m).__name__}")
        slim = {k: v for k, v in m.items() if k not in _DROP}
        if _hidden(m):
            hidden.append(slim)
            continue
        try:
            messages.append(_message(slim, hidden))
        except (InvalidTrajectory, KeyError, TypeError) as e:
            raise InvalidTrajectory(f"messages[{i}]: {e}") from e
        hidden = []
    reward = record.get("reward", (record.get("reward_info") or {}).get("reward"))
    context = {
        k: record.get(k)
        for k in ("benchmark", "task_id", "trial", "termination_reason", "agent_model", "user_model", "simulation_id")
        if record.get(k) is not None
    }
    context.update(
        {
            "tau_domain": record.get("domain") or "telecom",
            "task": record.get("task"),
            "policy_is_system": bool(record.get("policy")),
        }
    )
    if hidden:
        context["tau2_hidden_after"] = hidden
    traj_id = record.get("id") or default_id
    if not traj_id:
        raise InvalidTrajectory("tau2 record: missing field 'id' (and no default id given)")
    return Trajectory(
        id=str(traj_id),
        domain="tool-use",
        messages=tuple(messages),
        tools=tuple(record.get("tools") or tools),
        reward=float(reward) if isinstance(reward, (int, float)) else None,
        context=context,
        source=str(record.get("source") or ""),
    )


def _raw_message(m: Message) -> list[dict[str, Any]]:
    extra = dict(m.extra)
    out = [dict(h) for h in extra.pop("tau2_hidden_before", ())]
    row: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.role == "tool":
        row["id"] = m.tool_call_id
    else:
        row["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.parsed_arguments()} for c in m.tool_calls
        ] or None
        if m.tool_calls:
            for call, raw in zip(row["tool_calls"], m.tool_calls, strict=True):
                call["requestor"] = "assistant"
                if call["arguments"] is None:
                    call["arguments"] = raw.arguments
    row.update(extra)
    out.append(row)
    return out


def to_tau2(trajectory: Trajectory) -> dict[str, Any]:
    """Trajectory -> converted tau2 JSONL record (hidden user-side messages given back in place)."""
    ctx = dict(trajectory.context)
    messages = list(trajectory.messages)
    policy = None
    if ctx.pop("policy_is_system", False) and messages and messages[0].role == "system":
        policy = messages.pop(0).content
    raw: list[dict[str, Any]] = []
    for m in messages:
        raw.extend(_raw_message(m))
    raw.extend(dict(h) for h in ctx.pop("tau2_hidden_after", ()))
    domain = ctx.pop("tau_domain", "telecom")
    return {
        "id": trajectory.id,
        "source": trajectory.source,
        "benchmark": ctx.pop("benchmark", "tau2-bench"),
        "domain": domain,
        **ctx,
        "reward": trajectory.reward,
        "policy": policy,
        "tools": [dict(t) for t in trajectory.tools],
        "messages": raw,
    }
