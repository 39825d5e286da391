"""`json_schema` gate: tool-call arguments validate against the tool's schema; Terminus turns against theirs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jsonschema

from pivot_envs._actions import TERMINUS_SCHEMA, parse_terminus
from pivot_envs._model import Message, Pivot
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.hookspecs import hookimpl


def is_terminus(pivot: Pivot) -> bool:
    """True when the pivot's actions are Terminus JSON turns."""
    return pivot.context.get("format") == "terminus" or (
        not pivot.expert.is_tool_call and parse_terminus(pivot.expert.content) is not None
    )


def schema_errors(instance: Any, schema: Mapping[str, Any]) -> list[str]:
    """Validation messages ("at <path>: <message>"), empty when valid or the schema itself is unusable."""
    try:
        cls = jsonschema.validators.validator_for(schema)
        validator = cls(schema)
        return [
            f"at /{'/'.join(str(p) for p in e.absolute_path)}: {e.message}"
            for e in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
        ][:5]
    except jsonschema.SchemaError:
        return []


class JsonSchemaGate:
    """Tool calls: known tool, JSON object arguments, valid against `parameters`. Terminus: valid turn JSON."""

    role = "gate"
    cost = "cheap"
    deterministic = True
    version = "1"

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Validate the action's structure."""
        if action.tool_calls:
            return self._verify_calls(pivot, action)
        if is_terminus(pivot):
            obj = parse_terminus(action.content)
            if obj is None:
                return Verdict.reject("expected a Terminus JSON object with 'commands', found none")
            errors = schema_errors(obj, TERMINUS_SCHEMA)
            if errors:
                return Verdict.reject(f"Terminus JSON invalid: {errors[0]}", errors=errors)
            return Verdict.accept("valid Terminus JSON")
        return Verdict.skip("text turn with no schema")

    def _verify_calls(self, pivot: Pivot, action: Message) -> Verdict:
        known = set(pivot.tool_names)
        for call in action.tool_calls:
            if known and call.name not in known:
                return Verdict.reject(f"unknown tool {call.name!r}; expected one of {sorted(known)}")
            args = call.parsed_arguments()
            if not isinstance(args, dict):
                return Verdict.reject(f"{call.name}: arguments are not a JSON object: {call.arguments[:80]!r}")
            schema = pivot.tool_schema(call.name)
            errors = schema_errors(args, schema) if schema else []
            if errors:
                return Verdict.reject(f"{call.name}: arguments invalid {errors[0]}", errors=errors)
        return Verdict.accept("arguments valid against the tool schemas")


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `json_schema`."""
    register("json_schema", JsonSchemaGate)
