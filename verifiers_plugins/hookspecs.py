"""Every hook of the `pivot` plugin API, in one module.

Each hook is `register_<things>(register)`: the host passes a `register` callback, the plugin
calls it zero or more times and returns None. Specs only ever gain arguments (pluggy lets an
impl accept a subset), and a hook is removed only after a release in which it warns through
`warn_on_impl`. Plugins are discovered through the entry-point group `pivot`.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

PROJECT = "pivot"
HOOK_API_VERSION = 1  # bumped when a hook gains an argument; never decreases

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_verifiers(register: Callable[..., None]) -> None:
    """Register verifiers: `register(name, factory)`.

    `factory(**config)` returns an object with `verify(pivot, action) -> Verdict` (see
    `verifiers_plugins.Verifier`); `config` holds the keyword arguments a user passes for that
    verifier, e.g. `gym.make(id, verifier_config={"string_similarity": {"threshold": 0.9}})`.
    """


@hookspec
def register_parsers(register: Callable[..., None]) -> None:
    """Register completion parsers: `register(name, parse)`.

    `parse(text: str) -> Message` turns a policy's completion text into an assistant Message.
    It must not raise on any input: text it cannot read becomes a plain-content message.
    """


@hookspec
def register_sandboxes(register: Callable[..., None]) -> None:
    """Register sandbox backends: `register(name, factory)`; `factory(**config)` returns a backend."""


@hookspec
def register_tool_worlds(register: Callable[..., None]) -> None:
    """Register tool worlds: `register(name, factory)`; `factory()` returns a world (state + tools)."""


@hookspec
def register_categories(register: Callable[..., None]) -> None:
    """Register SWE action categories: `register(alias, category)` maps a tool name or verb to a category."""
