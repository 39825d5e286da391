"""`json_schema` gate: tool-call arguments validate against the tool's schema; Terminus turns against theirs."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema
import jsonschema

from pivot_core import TERMINUS_SCHEMA, Message, Pivot, parse_terminus
from verifiers_plugins._memo import CACHE_SIZE, call_arguments
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.hookspecs import hookimpl


def is_terminus(pivot: Pivot) -> bool:
    """True when the pivot's actions are Terminus JSON turns."""
    return pivot.context.get("format") == "terminus" or (not pivot.expert.is_tool_call and _is_terminus(pivot.expert))


@functools.lru_cache(maxsize=CACHE_SIZE)
def _is_terminus(expert: Message) -> bool:
    return parse_terminus(expert.content) is not None


def validators_for(schema: Mapping[str, Any]) -> tuple[Any, Any]:
    """(jsonschema validator or None when the schema is unusable, fastjsonschema function or None), compiled once.

    fastjsonschema's generated code answers "valid" about 10x faster; jsonschema stays the judge
    whenever it says anything else. Compiled once per distinct schema (keyed by its canonical JSON).
    """
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):  # not JSON: no validator can come of it
        return None, None
    return _compiled(key)


@functools.lru_cache(maxsize=1024)
def _compiled(schema_json: str) -> tuple[Any, Any]:
    schema = json.loads(schema_json)
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
    except (jsonschema.SchemaError, TypeError, AttributeError):
        return None, None
    try:
        fast = fastjsonschema.compile(schema)
    except Exception:  # a schema fastjsonschema cannot compile: jsonschema alone decides
        fast = None
    return validator, fast


def schema_errors(instance: Any, schema: Mapping[str, Any]) -> list[str]:
    """Validation messages ("at <path>: <message>"), empty when valid or the schema itself is unusable."""
    validator, fast = validators_for(schema)
    if validator is None:
        return []
    if fast is not None:
        try:
            fast(instance)
            return []
        except Exception:  # JsonSchemaValueException or a failure of the generated code: ask jsonschema
            pass
    if validator.is_valid(instance):
        return []
    return [
        f"at /{'/'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    ][:5]


@functools.lru_cache(maxsize=CACHE_SIZE)
def terminus_of(message: Message) -> dict[str, Any] | None:
    """`parse_terminus(message.content)`, once per candidate (shared: never mutate it)."""
    return parse_terminus(message.content)


_TERMINUS_MISSING = Verdict.reject("expected a Terminus JSON object with 'commands', found none")
_TERMINUS_VALID = Verdict.accept("valid Terminus JSON")
_NO_SCHEMA = Verdict.skip("text turn with no schema")
_CALLS_VALID = Verdict.accept("arguments valid against the tool schemas")


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
            obj = terminus_of(action)
            if obj is None:
                return _TERMINUS_MISSING
            errors = schema_errors(obj, TERMINUS_SCHEMA)
            if errors:
                return Verdict.reject(f"Terminus JSON invalid: {errors[0]}", errors=errors)
            return _TERMINUS_VALID
        return _NO_SCHEMA

    def _verify_calls(self, pivot: Pivot, action: Message) -> Verdict:
        schemas = pivot.tool_schemas
        for call in action.tool_calls:
            if schemas and call.name not in schemas:
                return Verdict.reject(f"unknown tool {call.name!r}; expected one of {sorted(schemas)}")
            args = call_arguments(call)
            if not isinstance(args, dict):
                return Verdict.reject(f"{call.name}: arguments are not a JSON object: {call.arguments[:80]!r}")
            schema = schemas.get(call.name)
            errors = schema_errors(args, schema) if schema else []
            if errors:
                return Verdict.reject(f"{call.name}: arguments invalid {errors[0]}", errors=errors)
        return _CALLS_VALID


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `json_schema`."""
    register("json_schema", JsonSchemaGate)
