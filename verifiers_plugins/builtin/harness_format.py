"""`harness_format` gate: a completion must be one the pivot's harness would read as an action.

Pivots converted from a real agent's run carry `context.harness`; a completion is parsed the way
that harness parses its model's reply, and one it would not run is a format error (0, reason):

- `mini-swe-agent`: exactly one ```bash block (its own `action_regex`), no
  tool call; anything else gets its "Please always provide EXACTLY ONE action" error.
- `openhands`: function calls to OpenHands' own tools (`execute_bash`, `str_replace_editor`,
  `think`, `finish`, `execute_ipython_cell`) with a JSON object of arguments holding the tool's
  required parameters; a reply without a call is a message turn, which OpenHands accepts where the
  expert's turn was a message too (`turn_kind` checks which kind the expert's turn was). A call
  OpenHands takes but runs no command for (`is_input` text for a running process, an empty
  command, several commands in one call, a negative timeout: `pivot_core.shell_call` gives
  `NotRun`) scores 0 with the reason, unless the expert's own turn holds a call of that kind.
- `terminus` (and ATIF runs of a Terminus agent): a Terminus JSON object with `commands`.

Pivots without a harness (synthesized, NeMo rows) are not this gate's business: it skips them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pivot_core import (
    MINI_SWE_AGENT,
    MINI_SWE_AGENT_ACTION,
    OPENHANDS,
    TERMINUS,
    Message,
    NotRun,
    Pivot,
    parse_terminus,
    shell_call,
)
from verifiers_plugins._verdict import Verdict
from verifiers_plugins.hookspecs import hookimpl


def _mini(action: Message) -> Verdict:
    if action.tool_calls:
        return Verdict.reject("format error: mini-swe-agent reads one ```bash block from the text, not tool calls")
    n = len(MINI_SWE_AGENT_ACTION.findall(action.content or ""))
    if n != 1:
        return Verdict.reject(f"format error: mini-swe-agent needs exactly one ```bash block, found {n}", blocks=n)
    return Verdict.accept("one ```bash block, as mini-swe-agent reads it")


def _openhands(pivot: Pivot, action: Message) -> Verdict:
    if not action.tool_calls:
        if parse_terminus(action.content) is not None or MINI_SWE_AGENT_ACTION.search(action.content or ""):
            return Verdict.reject(
                "format error: OpenHands runs function calls; a command in the text is a message, not run"
            )
        return Verdict.accept("a message turn (OpenHands runs nothing)")
    known = {name: pivot.tool_schema(name) for name in pivot.tool_names}
    for call in action.tool_calls:
        if call.name not in known:
            return Verdict.reject(f"format error: OpenHands has no tool {call.name!r} (tools: {sorted(known)})")
        args = call.parsed_arguments()
        if not isinstance(args, dict):
            return Verdict.reject(f"format error: {call.name} arguments are not a JSON object")
        schema = known[call.name]
        params = schema if isinstance(schema, Mapping) else {}
        missing = [k for k in params.get("required", ()) if k not in args]
        if missing:
            return Verdict.reject(f"format error: {call.name} needs {missing}")
    return _not_run(pivot, action) or Verdict.accept("OpenHands function calls")


def _not_run(pivot: Pivot, action: Message) -> Verdict | None:
    """0 for a call OpenHands takes but runs no command for (`NotRun`), unless the expert's turn has one of that kind.

    Such a call does nothing a command would (input for a running process, a refused call): scored
    as a command it could pass for the expert's. Where the expert's own call is of the same kind
    (it sent input too), the chain compares the two calls as written (`tool_args`). The verdict's
    `not_run` detail tells the episode env that the format is fine: it answers as OpenHands does.
    """
    expert = {n.kind for c in pivot.expert.tool_calls if isinstance(n := shell_call(c), NotRun)}
    for call in action.tool_calls:
        outcome = shell_call(call)
        if isinstance(outcome, NotRun) and outcome.kind not in expert:
            return Verdict.reject(f"not run by OpenHands: {outcome.reason}", not_run=outcome.kind)
    return None


def _terminus(action: Message) -> Verdict:
    if action.tool_calls or parse_terminus(action.content) is None:
        return Verdict.reject("format error: Terminus reads a JSON object with `commands`")
    return Verdict.accept("a Terminus JSON turn")


class HarnessFormatGate:
    """Rejects a completion the pivot's harness (`context.harness`) would not read as an action."""

    role = "gate"
    cost = "cheap"
    deterministic = True
    version = "2"  # 2: calls OpenHands does not run (`NotRun`) score 0

    def verify(self, pivot: Pivot, action: Message) -> Verdict:
        """Check the completion against the harness's own reply format."""
        harness = str(pivot.context.get("harness") or "")
        if harness == MINI_SWE_AGENT:
            return _mini(action)
        if harness == OPENHANDS:
            return _openhands(pivot, action)
        if harness.startswith(TERMINUS):
            return _terminus(action)
        return _NOT_MINE


_NOT_MINE = Verdict.skip("the pivot names no harness whose format this gate knows")


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `harness_format`."""
    register("harness_format", HarnessFormatGate)
