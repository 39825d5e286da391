"""`json_schema` gate: tool-call arguments validate against the tool's schema; Terminus turns against theirs."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema
import jsonschema

from pivot_core import TERMINUS_SCHEMA, Message, Pivot, parse_terminus
from verifiers_plugins._memo import call_arguments, per_candidate, per_pivot
from verifiers_plugins._verdict import Verdict, constant
from verifiers_plugins.hookspecs import hookimpl


@per_pivot
def is_terminus(pivot: Pivot) -> bool:
    """True when the pivot's actions are Terminus JSON turns."""
    return pivot.context.get("format") == "terminus" or (
        not pivot.expert.is_tool_call and parse_terminus(pivot.expert.content) is not None
    )


# Compiled validators by schema object. A pivot's tool schemas are the same dict objects call after
# call, so a group (and every later group at that pivot) compiles each schema once; the entry holds
# the schema itself, so its id cannot be reused by another object while it is cached. The entry is
# (schema, jsonschema validator, fastjsonschema function or None): fastjsonschema's generated code
# answers "valid" about 10x faster; jsonschema stays the judge whenever it says anything else.
# The oldest entry goes first when it is full.
_VALIDATORS: OrderedDict[int, tuple[Mapping[str, Any], Any, Any]] = OrderedDict()
_VALIDATORS_SIZE = 1024
_VALIDATORS_LOCK = threading.Lock()


def validators_for(schema: Mapping[str, Any]) -> tuple[Any, Any]:
    """(jsonschema validator or None when the schema is unusable, fastjsonschema function or None), compiled once."""
    hit = _VALIDATORS.get(id(schema))  # without the lock: a dict lookup is atomic, and the entry holds the schema
    if hit is not None and hit[0] is schema:
        return hit[1], hit[2]
    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
    except (jsonschema.SchemaError, TypeError, AttributeError):
        validator = None
    fast = None
    if validator is not None:
        try:
            fast = fastjsonschema.compile(dict(schema))
        except Exception:  # a schema fastjsonschema cannot compile: jsonschema alone decides
            fast = None
    with _VALIDATORS_LOCK:
        _VALIDATORS[id(schema)] = (schema, validator, fast)
        while len(_VALIDATORS) > _VALIDATORS_SIZE:
            _VALIDATORS.popitem(last=False)
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


@per_pivot
def tool_names(pivot: Pivot) -> frozenset[str]:
    """The names of the pivot's tools."""
    return frozenset(pivot.tool_names)


@per_pivot
def tool_schemas(pivot: Pivot) -> Mapping[str, Mapping[str, Any] | None]:
    """`pivot.tool_schema(name)` for every tool of the pivot (the first schema of a name, as `tool_schema` finds)."""
    schemas: dict[str, Mapping[str, Any] | None] = {}
    for name in pivot.tool_names:
        schemas.setdefault(name, pivot.tool_schema(name))
    return schemas


@per_candidate
def terminus_of(message: Message) -> dict[str, Any] | None:
    """`parse_terminus(message.content)`, once per candidate (shared: never mutate it)."""
    return parse_terminus(message.content)


_TERMINUS_MISSING = constant(Verdict.reject("expected a Terminus JSON object with 'commands', found none"))
_TERMINUS_VALID = constant(Verdict.accept("valid Terminus JSON"))
_NO_SCHEMA = constant(Verdict.skip("text turn with no schema"))
_CALLS_VALID = constant(Verdict.accept("arguments valid against the tool schemas"))


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
        known = tool_names(pivot)
        schemas = tool_schemas(pivot)
        for call in action.tool_calls:
            if known and call.name not in known:
                return Verdict.reject(f"unknown tool {call.name!r}; expected one of {sorted(known)}")
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
