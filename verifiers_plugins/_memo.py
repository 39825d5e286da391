"""Values the verifiers derive from the expert or a candidate, cached by content.

`Message` and `ToolCall` are frozen and hashable (by their content), so a derived value is a
plain `functools.lru_cache` away: the expert's form is derived once for a GRPO group and every
epoch that returns to its pivot, and a candidate's decoded arguments once for the verifiers of
a chain. The cached values are shared by every caller that asks with an equal object: they are
read-only by contract (`tests/verifiers_plugins/test_memo.py` checks the built-ins leave them
as decoded).
"""

from __future__ import annotations

import functools
from typing import Any

from pivot_core import ToolCall

# A GRPO group or two; bounded because an entry holds its key, and a completion may be 64 KB.
CACHE_SIZE = 1024


@functools.lru_cache(maxsize=CACHE_SIZE)
def call_arguments(call: ToolCall) -> Any:
    """`call.parsed_arguments()`, decoded once per distinct call and shared: never mutate the value."""
    return call.parsed_arguments()
