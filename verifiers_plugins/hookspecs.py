"""Every hook of the `pivot` plugin API, in one module.

Each hook is `register_<things>(register)`: the host passes a `register` callback, the plugin
calls it zero or more times and returns None. Plugins are discovered through the entry-point
group `pivot`; built-ins use the same hooks. The guide is docs/plugins.md.

Versioning (the promise to plugin authors):

- `HOOK_API_VERSION` is the version of this module's contract. It goes up by one whenever a
  hook gains an argument or a hook is added, and never goes down.
- Specs only ever gain arguments. An impl declares the subset it uses (pluggy passes only the
  arguments an impl names), so a plugin written for version N keeps working on N+k.
- A hook or argument is never removed or renamed in one step: first a release in which the
  spec carries pluggy's `warn_on_impl` (or `warn_on_impl_args`) with a `DeprecationWarning`
  naming the replacement, which `pivot plugins --check` reports; removal comes later.
- Each hook's docstring says in which version it and each of its arguments appeared.
- Validation happens when a plugin registers: an impl argument the spec lacks is a
  `PluginValidationError` (the host re-raises it naming plugin, distribution and hook), and an
  impl for an unknown hook is refused by `check_pending` with a did-you-mean.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

PROJECT = "pivot"
HOOK_API_VERSION = 2  # bumped when a hook gains an argument; never decreases

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_verifiers(register: Callable[..., None]) -> None:
    """Register verifiers: `register(name, factory)`. Since hook API 1.

    `factory(**config)` returns an object with `verify(pivot, action) -> Verdict` (see
    `verifiers_plugins.Verifier`); `config` holds the keyword arguments a user passes for that
    verifier, e.g. `gym.make(id, verifier_config={"string_similarity": {"threshold": 0.9}})`.
    `verify` may be `async def`: the host awaits it with the verifier's `timeout` (seconds).
    An optional `fingerprint(pivot) -> str | None` names what a verdict depends on beyond the
    pivot, action and config (a database's content hash, an image id); the reward cache keys on
    it, and None turns caching off for that pivot. A verdict with `details["stable"] is False`
    is never cached (see docs/plugins.md).
    A name is global: two plugins registering it is a `DuplicateName` error naming both.

    Args:
        register: `register(name: str, factory: Callable[..., Verifier]) -> None` (API 1).
    """


@hookspec
def register_parsers(register: Callable[..., None]) -> None:
    """Register completion parsers: `register(name, parse)`. Since hook API 1.

    `parse(text: str) -> Message` turns a policy's completion text into an assistant Message.
    It must not raise on any input: text it cannot read becomes a plain-content message.

    Args:
        register: `register(name: str, parse: Callable[[str], Message]) -> None` (API 1).
    """


@hookspec
def register_sandboxes(register: Callable[..., None]) -> None:
    """Register sandbox backends: `register(name, factory)`; `factory(**config)` returns a backend.

    Since hook API 1.

    Args:
        register: `register(name: str, factory: Callable[..., backend]) -> None` (API 1).
    """


@hookspec
def register_tool_worlds(register: Callable[..., None]) -> None:
    """Register tool worlds: `register(name, factory)`; `factory()` returns a world (state + tools).

    Since hook API 1.

    Args:
        register: `register(name: str, factory: Callable[[], world]) -> None` (API 1).
    """


@hookspec
def register_categories(register: Callable[..., None]) -> None:
    """Register SWE action categories: `register(alias, category)` maps a tool name or verb to a category.

    Since hook API 1.

    Args:
        register: `register(alias: str, category: str) -> None` (API 1).
    """


@hookspec
def register_user_simulators(register: Callable[..., None]) -> None:
    """Register user simulators for episode envs: `register(name, factory)`. Since hook API 2.

    `factory(**config)` returns an object with `reply(conversation, *, task, recorded) -> UserReply`
    (see `verifiers_plugins.builtin.user_simulators`); `config` holds the keyword arguments given
    as `gym.make("pivot/tool-use-episode-v0", user_simulator=name, user_simulator_config={...})`.

    Args:
        register: `register(name: str, factory: Callable[..., simulator]) -> None` (API 2).
    """
