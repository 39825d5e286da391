"""`json_schema` gate: tool-call arguments validate against the tool's schema; Terminus turns against theirs."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema
import jsonschema

from pivot_core import TERMINUS_SCHEMA, Message, Pivot, parse_terminus
from verifiers_plugins._memo import per_pivot
from verifiers_plugins._verdict import Verdict
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
_VALIDATORS: OrderedDict[int, tuple[Mapping[str, Any], Any, Any]] = OrderedDict()
_VALIDATORS_SIZE = 1024
_VALIDATORS_LOCK = threading.Lock()


def validators_for(schema: Mapping[str, Any]) -> tuple[Any, Any]:
    """(jsonschema validator or None when the schema is unusable, fastjsonschema function or None), compiled once."""
    with _VALIDATORS_LOCK:
        hit = _VALIDATORS.get(id(schema))
        if hit is not None and hit[0] is schema:
            _VALIDATORS.move_to_end(id(schema))
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
def _tool_names(pivot: Pivot) -> frozenset[str]:
    return frozenset(pivot.tool_names)


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
        known = _tool_names(pivot)
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
