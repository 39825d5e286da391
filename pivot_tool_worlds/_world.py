"""`ToolWorld`: an initial state, tool implementations and their schemas.

A world executes one tool call on a state and returns the call's `Outcome` plus the next state;
the input state is never changed (copy-on-write forks make that cheap). Tool functions take the
state and the call's arguments as keywords, return the text the agent sees, and raise
`ToolFailure` for a failed call, whose message becomes an `Error: ...` output exactly as the
recorded tools print it. Any other exception inside a tool becomes an error output too: a
candidate's call can never crash the verifier.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

try:  # compiled validators: ~30x faster than jsonschema on nested schemas (the hot path of tool_exec)
    import fastjsonschema
except ImportError:  # pragma: no cover - a declared dependency; jsonschema alone stays correct
    fastjsonschema = None

from pivot_tool_worlds._state import WorldState
from pivot_tool_worlds.errors import ToolFailure

ToolFn = Callable[..., str]


@dataclass(frozen=True)
class Tool:
    """One tool of a world.

    Attributes:
        schema: the OpenAI function schema (`{"type": "function", "function": {...}}`).
        fn: `fn(state, **arguments) -> output text`; writes through `state.edit/put/delete`.
        read_only: True when the tool never changes the state (its effect is its output alone).
        note_args: arguments whose free text is the call's effect (a thought, a hand-off summary):
            compared by text similarity, since the output says nothing about them.
    """

    schema: Mapping[str, Any]
    fn: ToolFn
    read_only: bool = True
    note_args: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The tool's name from its schema."""
        return str(self.schema.get("function", self.schema)["name"])

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON schema of the arguments."""
        return self.schema.get("function", self.schema).get("parameters") or {"type": "object"}


@dataclass(frozen=True)
class Outcome:
    """What one executed call did.

    Attributes:
        name: the tool called.
        arguments: the parsed arguments (empty when they were not a JSON object).
        output: the text the tool returned (errors start with `Error: `).
        error: True for a failed call (no state change).
        changes: `{"table/key": record or None}` for every record the call changed.
        notes: `{argument: text}` free-text effects (see `Tool.note_args`).
    """

    name: str
    arguments: Mapping[str, Any]
    output: str
    error: bool = False
    changes: Mapping[str, Any] = field(default_factory=dict)
    notes: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "name": self.name,
            "arguments": dict(self.arguments),
            "output": self.output,
            "error": self.error,
            "changes": dict(self.changes),
            "notes": dict(self.notes),
        }


def same_output(a: str, b: str) -> bool:
    """Equal outputs: identical text, else equal canonical JSON (the slow path runs only on a difference)."""
    return a == b or canonical_output(a) == canonical_output(b)


def canonical_value(value: Any) -> Any:
    """Numbers by value: integral floats become ints (`50.0` -> `50`), containers recursively.

    Booleans stay booleans (JSON `true` is not `1`), and non-integral floats are kept as they are.
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [canonical_value(v) for v in value]
    if isinstance(value, dict):
        return {k: canonical_value(v) for k, v in value.items()}
    return value


def canonical_json(value: Any) -> str:
    """Canonical JSON text of a value: sorted keys, no spaces, numbers by value (see `canonical_value`)."""
    return json.dumps(canonical_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_output(output: str) -> str:
    """The output as canonical JSON (sorted keys, no spaces, numbers by value) when it parses, else stripped text.

    Numbers compare by value because a tool echoes the arguments it stored: a booking paid with
    `"amount": 250.0` prints `250.0` where the expert's `250` printed `250`, for the same booking.
    """
    text = output.strip()
    try:
        return canonical_json(json.loads(text))
    except (ValueError, RecursionError):
        return text


class ToolWorld:
    """A set of tools over one initial state.

    Subclasses (or callers) provide `name`, the tools and the initial tables.

    Args:
        name: the world's registered name (pivots carry it in `context["world"]`).
        tools: the world's tools.
        tables: the initial tables `{table: {key: record}}` (never mutated).
        description: one line saying where the state came from (shown in verdict details).
        fingerprint: a hash of the content the initial state was built from (the database
            files); computed from `tables` when not given. Verdicts made on the world depend on
            it, so it is part of their reward-cache key.
    """

    def __init__(
        self,
        name: str,
        tools: Sequence[Tool],
        tables: Mapping[str, Mapping[str, Any]],
        description: str = "",
        fingerprint: str = "",
    ) -> None:
        self.name = name
        self.tools: dict[str, Tool] = {t.name: t for t in tools}
        self.tables = tables
        self.description = description
        self._fingerprint = fingerprint
        self._validators = {t.name: jsonschema.validators.validator_for(t.parameters)(t.parameters) for t in tools}
        self._fast = {t.name: _compile(t.parameters) for t in tools}

    @property
    def fingerprint(self) -> str:
        """SHA-256 of what the initial state holds: the given fingerprint, else of the tables (computed once)."""
        if not self._fingerprint:
            blob = json.dumps(self.tables, sort_keys=True, ensure_ascii=False, default=str)
            self._fingerprint = hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()
        return self._fingerprint

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI function schemas of every tool."""
        return [dict(t.schema) for t in self.tools.values()]

    def initial_state(self) -> WorldState:
        """A fresh state over the initial tables."""
        return WorldState(self.tables)

    def step(self, state: WorldState, name: str, arguments: str | Mapping[str, Any]) -> tuple[Outcome, WorldState]:
        """Execute one call on a fork of `state`: `(outcome, next state)`; `state` itself is unchanged."""
        args, problem = self._check(name, arguments)
        if problem is not None:
            return Outcome(name, args, f"Error: {problem}", error=True), state
        tool = self.tools[name]
        # Even read-only tools run on a fork: a tool that writes by mistake must not corrupt a
        # state shared through the prefix cache (its writes then show up in `changes`).
        child = state.fork()
        try:
            output = tool.fn(child, **args)
        except ToolFailure as e:
            return Outcome(name, args, f"Error: {e}", error=True), state
        except Exception as e:  # the candidate's arguments broke the tool: an error output, not a crash
            return Outcome(name, args, f"Error: {type(e).__name__}: {e}", error=True), state
        notes = {a: str(args.get(a, "")) for a in tool.note_args}
        changes = child.changes_since(state)
        return Outcome(name, args, str(output), False, changes, notes), child if changes else state

    def _check(self, name: str, arguments: str | Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """Parse and validate the arguments: `(arguments, None)` or `({}, problem)`."""
        if name not in self.tools:
            return {}, f"unknown tool {name!r}"
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError as e:
                return {}, f"arguments are not valid JSON ({e})"
        if not isinstance(arguments, Mapping):
            return {}, f"arguments must be a JSON object, got {type(arguments).__name__}"
        args = dict(arguments)
        known = self.tools[name].parameters.get("properties", {})
        extra = sorted(set(args) - set(known))
        if extra:
            return args, f"{name}() got unexpected argument(s) {extra}"
        if _valid(self._fast[name], args):  # the common case: skip collecting and sorting errors
            return args, None
        validator = self._validators[name]
        error = next(iter(sorted(validator.iter_errors(args), key=lambda e: list(e.path))), None)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            return args, f"{name}() invalid argument{' ' + where if where else ''}: {error.message}"
        return args, None


def _compile(schema: Mapping[str, Any]) -> Callable[[Any], Any] | None:
    """A compiled validator, or None when fastjsonschema is missing or cannot compile the schema."""
    if fastjsonschema is None:
        return None
    try:
        return fastjsonschema.compile(dict(schema))
    except Exception:  # an unsupported construct: jsonschema validates this tool instead
        return None


def _valid(fast: Callable[[Any], Any] | None, args: Mapping[str, Any]) -> bool:
    """True when the compiled validator accepts `args` (False also means "ask jsonschema")."""
    if fast is None:
        return False
    try:
        fast(args)
    except Exception:  # JsonSchemaException or a validator bug: jsonschema gives the verdict and message
        return False
    return True
