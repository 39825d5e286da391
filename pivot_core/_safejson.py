r"""JSON decoding for untrusted text (model completions, request bodies, data files).

`json.loads` accepts text that later breaks the code reading the result: an integer of more
than 4,300 digits raises `ValueError` (not `JSONDecodeError`), deep nesting raises
`RecursionError` (here or in the first recursive reader downstream), `NaN`/`Infinity`/`1e999`
give floats no verifier can compare, and a `\ud800` escape gives a lone surrogate that cannot
be encoded back to UTF-8. `decode_json` raises `UnsafeJSON` for every one of these and the
plain `json.JSONDecodeError` for a syntax error; `UnsafeJSON` subclasses it, so callers that
already catch `JSONDecodeError` (or `ValueError`) treat such text like any other unreadable JSON,
and callers that must tell the two apart (a parser keeps a syntax error for the verifiers to
reject, naming the call) catch `UnsafeJSON` first.

Ground module: imports nothing of the project.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pivot_core.errors import UnsafeJSON

# Deep enough for any real tool call or record; shallow enough that recursive readers
# downstream (jsonschema, canonicalisers, `json.dumps`) stay far from the recursion limit.
MAX_DEPTH = 64
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]", re.ASCII)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]}{'...' if len(text) > 20 else ''} overflows a float")
    return value


def has_lone_surrogate(text: str) -> bool:
    """True when `text` holds a surrogate code point (it cannot be encoded as UTF-8)."""
    if text.isascii():  # a flag Python keeps on every string: no copy made to find out
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_value(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why a decoded JSON value is unsafe (too deep, a lone surrogate, a non-finite float), else None.

    Iterative, so a value nested past the recursion limit is reported rather than crashing here.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                return "a string holds a lone surrogate (not valid Unicode)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "a number is NaN or infinite"
        elif isinstance(item, dict | list | tuple):
            if depth > max_depth:
                return f"nesting deeper than {max_depth} levels"
            children = list(item.items()) if isinstance(item, dict) else [(None, v) for v in item]
            for key, child in children:
                if isinstance(key, str) and has_lone_surrogate(key):
                    return "a key holds a lone surrogate (not valid Unicode)"
                stack.append((child, depth + 1))
    return None


# One decoder for every call: `json.loads(text, parse_constant=..., parse_float=...)` builds a
# decoder and its scanner per call, which cost more than decoding a tool call's arguments. The
# stdlib shares its own default decoder across threads the same way.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def decode_json(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads` for untrusted text; every failure is a `JSONDecodeError`.

    Args:
        text: the JSON text.
        max_depth: the deepest nesting of arrays and objects accepted.

    Returns:
        The decoded value: finite numbers, valid Unicode strings, at most `max_depth` levels deep.

    Raises:
        UnsafeJSON: the text decodes to an over-long integer, a non-finite number, a lone
            surrogate or nesting deeper than `max_depth`.
        json.JSONDecodeError: the text is not JSON at all.
    """
    if not isinstance(text, str):
        raise json.JSONDecodeError(f"expected JSON text, got {type(text).__name__}", "", 0)
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError:
        raise
    except RecursionError as e:
        raise UnsafeJSON(f"nesting deeper than {max_depth} levels", text, 0) from e
    except ValueError as e:  # integers past sys.get_int_max_str_digits(), NaN/Infinity, float overflow
        raise UnsafeJSON(str(e).split(";")[0], text, 0) from e
    if _plainly_safe(text, max_depth):
        return value
    problem = check_value(value, max_depth)
    if problem is not None:
        raise UnsafeJSON(problem, text, 0)
    return value


def _plainly_safe(text: str, max_depth: int) -> bool:
    r"""True when the text alone shows what `check_value` would walk the value to find.

    A lone surrogate in a decoded value comes from a surrogate in the text or a `\uD800`-`\uDFFF`
    escape; nesting is at most the number of brackets. Tool-call arguments are a few brackets of
    plain text, so the walk (the costly part of decoding them) is rarely needed.
    """
    if text.count("[") + text.count("{") > max_depth:
        return False
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        return False
    return not has_lone_surrogate(text)


__all__ = ["MAX_DEPTH", "UnsafeJSON", "check_value", "decode_json", "has_lone_surrogate"]
