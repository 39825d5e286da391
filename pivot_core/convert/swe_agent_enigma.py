"""SWE-agent EnIGMA trajectories (CTF demonstrations): `{id, messages[{role, content, thought?, action?}], steps}`.

Each assistant message carries a `thought` and the `action` the agent ran. The action becomes a
fenced bash block after the thought, so shell commands read the same way as in mini-swe-agent
trajectories (`pivot_core._actions.bash_blocks`); the original content is kept in `extra`.
EnIGMA's own commands (`open`, `edit`, `decompile`, `submit`) stay as they are: they only run inside
SWE-agent's tool bundle, and these pivots have no sandbox context, so they are scored statically.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pivot_core._model import Message, Trajectory
from pivot_core.errors import InvalidTrajectory


def detect(record: Mapping[str, Any]) -> bool:
    """True for an EnIGMA/SWE-agent trajectory record (messages plus `steps` and `exit_status`)."""
    return (
        isinstance(record.get("messages"), list) and isinstance(record.get("steps"), list) and ("exit_status" in record)
    )


def _message(m: Mapping[str, Any]) -> Message:
    role = m.get("role")
    if role != "assistant" or not isinstance(m.get("action"), str):
        return Message.from_json({"role": role, "content": m.get("content")})
    thought = (m.get("thought") or "").rstrip()
    action = m["action"].rstrip("\n")
    content = f"{thought}\n```bash\n{action}\n```" if thought else f"```bash\n{action}\n```"
    return Message("assistant", content, extra={"original_content": m.get("content")})


def from_enigma(record: Mapping[str, Any], *, default_id: str = "") -> Trajectory:
    """One EnIGMA record -> a terminal-domain Trajectory (reward 1.0 when the flag was submitted)."""
    traj_id = str(record.get("id") or default_id)
    if not traj_id:
        raise InvalidTrajectory("swe-agent record: missing field 'id' (and no default id given)")
    messages = []
    for i, m in enumerate(record["messages"]):
        try:
            messages.append(_message(m))
        except InvalidTrajectory as e:
            raise InvalidTrajectory(f"messages[{i}]: {e}") from e
    status = record.get("exit_status")
    context = {"format": "swe-agent", "exit_status": status}
    for key in ("ctf_category", "submission"):
        if record.get(key) is not None:
            context[key] = record[key]
    return Trajectory(
        id=traj_id,
        domain="terminal",
        messages=tuple(messages),
        reward=1.0 if status == "submitted" else 0.0,
        context=context,
        source=str(record.get("source", "")),
    )


def to_enigma(trajectory: Trajectory) -> dict[str, Any]:
    """Inverse of `from_enigma` (assistant turns get back their original content, thought and action)."""
    from pivot_core._actions import bash_blocks

    messages = []
    for m in trajectory.messages:
        if m.role == "assistant" and "original_content" in m.extra:
            blocks = bash_blocks(m.content)
            thought = m.text.split("```bash", 1)[0].rstrip("\n")
            messages.append(
                {
                    "role": "assistant",
                    "content": m.extra["original_content"],
                    "thought": thought + "\n" if thought else "",
                    "action": (blocks[-1] if blocks else "") + "\n",
                }
            )
        else:
            messages.append({"role": m.role, "content": m.content})
    ctx = dict(trajectory.context)
    out = {
        "id": trajectory.id,
        "source": trajectory.source,
        "exit_status": ctx.get("exit_status"),
        "messages": messages,
        "steps": [],
    }
    for key in ("ctf_category", "submission"):
        if key in ctx:
            out[key] = ctx[key]
    return out
