"""Checks shared by the data model's constructors and readers.

Each failure is an `InvalidTrajectory` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pivot_core.errors import InvalidTrajectory


def require(cond: bool, message: str) -> None:
    if not cond:
        raise InvalidTrajectory(message)


def check_tools(owner: str, tools: tuple[Any, ...]) -> None:
    """Each tool is an OpenAI function schema: an object with a non-empty name and object parameters."""
    for i, tool in enumerate(tools):
        require(
            isinstance(tool, Mapping), f"{owner}.tools[{i}]: expected a tool schema object, got {type(tool).__name__}"
        )
        fn = tool.get("function", tool)
        require(isinstance(fn, Mapping), f"{owner}.tools[{i}].function: expected an object, got {type(fn).__name__}")
        name = fn.get("name")
        require(isinstance(name, str) and bool(name), f"{owner}.tools[{i}]: expected a non-empty name, got {name!r}")
        params = fn.get("parameters")
        require(
            params is None or isinstance(params, Mapping),
            f"{owner}.tools[{i}] ({name}): expected parameters as a JSON schema object, got {type(params).__name__}",
        )


def list_field(payload: Mapping[str, Any], key: str, required: bool = False) -> tuple[Any, ...]:
    """A list field of a JSON payload (missing or null is empty unless `required`).

    A string or an object where a list belongs is an error, not the list of its characters or keys.
    """
    value = payload[key] if required else payload.get(key)
    if value is None and not required:
        return ()
    if not isinstance(value, list | tuple):
        raise InvalidTrajectory(f"{key}: expected a list, got {type(value).__name__}")
    return tuple(value)


def object_field(payload: Mapping[str, Any], key: str) -> dict[str, Any]:
    """An object field of a JSON payload (missing or null is empty); a list of pairs is an error, not a dict."""
    value = payload.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidTrajectory(f"{key}: expected an object, got {type(value).__name__}")
    return dict(value)


def id_field(payload: Mapping[str, Any], key: str) -> str | None:
    """A call id: a string, or a number some formats write (kept as its text); anything else is an error."""
    value = payload.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InvalidTrajectory(f"{key}: expected a string id, got {type(value).__name__}")


def load(cls_name: str, payload: Any, build) -> Any:
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
