"""The plugin host: one pluggy manager, lazy loading, and the registries the hooks fill.

Built-in verifiers are plugins too (`DEFAULT_PLUGINS`), registered through the same hooks as a
third-party package's entry point. Loading runs once, lazily, on the first accessor call.
`PIVOT_PLUGINS` (comma-separated distribution or plugin names; "" means none) limits which
entry-point plugins load; built-ins always load.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from typing import Any

import pluggy

from pivot_envs.errors import did_you_mean
from verifiers_plugins import hookspecs
from verifiers_plugins.errors import DuplicateName, PluginError, UnknownVerifier

DEFAULT_PLUGINS: tuple[str, ...] = (
    "verifiers_plugins.builtin.parsers",
    "verifiers_plugins.builtin.turn_kind",
    "verifiers_plugins.builtin.json_schema",
    "verifiers_plugins.builtin.string_similarity",
    "verifiers_plugins.builtin.tool_name",
    "verifiers_plugins.builtin.tool_args",
    "verifiers_plugins.builtin.tool_worlds",
    "verifiers_plugins.builtin.tool_exec",
)
KINDS = ("verifiers", "parsers", "sandboxes", "tool_worlds", "categories")


@dataclass(frozen=True)
class Registration:
    """One registered object and where it came from."""

    name: str
    obj: Any
    plugin: str
    distribution: str
    version: str


class PluginHost:
    """A pluggy manager plus one registry per hook, filled through `register` callbacks."""

    def __init__(self, load_entrypoints: bool = True) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.load_entrypoints = load_entrypoints
        self._registries: dict[str, dict[str, Registration]] = {k: {} for k in KINDS}
        self._dists: dict[str, tuple[str, str]] = {}
        self._loaded = False
        self._lock = threading.RLock()

    # -- loading ---------------------------------------------------------------------------

    def load_plugins(self) -> None:
        """Load built-ins and allowed entry points once, then fill the registries."""
        with self._lock:
            if self._loaded:
                return
            for module_name in DEFAULT_PLUGINS:
                if self.pm.get_plugin(module_name) is None:
                    self.pm.register(importlib.import_module(module_name), name=module_name)
                    self._dists[module_name] = ("pivot-gym", _version("pivot-gym"))
            if self.load_entrypoints:
                self._load_entrypoints()
            self.pm.check_pending()
            self._loaded = True
            self._collect()

    def _load_entrypoints(self) -> None:
        allow = os.environ.get("PIVOT_PLUGINS")
        allowed = None if allow is None else {n.strip() for n in allow.split(",") if n.strip()}
        for ep in importlib_metadata.entry_points(group=hookspecs.PROJECT):
            dist = ep.dist.name if ep.dist else "unknown"
            if allowed is not None and ep.name not in allowed and dist not in allowed:
                continue
            if self.pm.get_plugin(ep.name) is not None or self.pm.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as e:
                raise PluginError(f"plugin {ep.name!r} from {dist}: import failed: {e}") from e
            self.pm.register(plugin, name=ep.name)
            self._dists[ep.name] = (dist, ep.dist.version if ep.dist else "")

    def register_plugin(self, plugin: object, name: str, distribution: str = "local") -> None:
        """Register a plugin object by hand (tests and notebooks); refreshes the registries."""
        with self._lock:
            self.load_plugins()
            self.pm.register(plugin, name=name)
            self._dists[name] = (distribution, "")
            try:
                self._collect()
            except Exception:
                self.pm.unregister(name=name)
                self._dists.pop(name, None)
                self._collect()
                raise

    def unregister_plugin(self, name: str) -> None:
        """Remove a plugin registered with `register_plugin`."""
        with self._lock:
            self.pm.unregister(name=name)
            self._dists.pop(name, None)
            self._collect()

    def _collect(self) -> None:
        """Call every hook once per plugin, with a `register` closure that credits the plugin."""
        fresh: dict[str, dict[str, Registration]] = {k: {} for k in KINDS}
        for kind in KINDS:
            hook = getattr(self.pm.hook, f"register_{kind}")
            for plugin_name, plugin in self.pm.list_name_plugin():
                if plugin is None:
                    continue
                register = self._make_register(kind, plugin_name, fresh[kind])
                self._call_for_plugin(hook, plugin, register)
        self._registries = fresh

    def _call_for_plugin(self, hook: pluggy.HookCaller, plugin: object, register: Callable[..., None]) -> None:
        # Calling the hook with all other plugins excluded credits each registration to exactly
        # one plugin, without touching pluggy internals or calling impl functions directly.
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        self.pm.subset_hook_caller(hook.name, remove_plugins=others)(register=register)

    def _make_register(self, kind: str, plugin_name: str, registry: dict[str, Registration]) -> Callable[..., None]:
        dist, version = self._dists.get(plugin_name, ("unknown", ""))

        def register(name: str, obj: Any) -> None:
            if not isinstance(name, str) or not name:
                raise PluginError(f"plugin {plugin_name!r}: register_{kind} expects a non-empty name, got {name!r}")
            # Category registrations map an alias to a category name; every other kind registers a factory.
            if not (callable(obj) or (kind == "categories" and isinstance(obj, str))):
                raise PluginError(
                    f"plugin {plugin_name!r}: register_{kind}({name!r}, ...) expects a callable, "
                    f"got {type(obj).__name__}"
                )
            if name in registry:
                first = registry[name]
                raise DuplicateName(
                    f"{kind[:-1]} name {name!r} is registered twice: by plugin {first.plugin!r} "
                    f"(distribution {first.distribution}) and by plugin {plugin_name!r} (distribution {dist})"
                )
            registry[name] = Registration(name, obj, plugin_name, dist, version)

        return register

    # -- accessors -------------------------------------------------------------------------

    def registry(self, kind: str) -> dict[str, Registration]:
        """All registrations of one kind ("verifiers", "parsers", ...), loading plugins first."""
        if kind not in KINDS:
            raise KeyError(f"expected one of {KINDS}, got {kind!r}")
        self.load_plugins()
        return dict(self._registries[kind])

    def get(self, kind: str, name: str) -> Any:
        """The registered object, or UnknownVerifier with a did-you-mean."""
        reg = self.registry(kind)
        if name not in reg:
            raise UnknownVerifier(
                f"no {kind[:-1]} named {name!r}; registered: {sorted(reg)}.{did_you_mean(name, reg)}"
            )
        return reg[name].obj

    def distributions(self) -> dict[str, tuple[str, str]]:
        """Plugin name -> (distribution, version) for every loaded plugin."""
        self.load_plugins()
        return dict(self._dists)


def _version(dist: str) -> str:
    try:
        return importlib_metadata.version(dist)
    except importlib_metadata.PackageNotFoundError:
        return "0+local"


_HOST: PluginHost | None = None
_HOST_LOCK = threading.Lock()


def get_host() -> PluginHost:
    """The process-wide host (created on first use; `reset_host` replaces it in tests)."""
    global _HOST
    with _HOST_LOCK:
        if _HOST is None:
            _HOST = PluginHost(load_entrypoints=os.environ.get("PIVOT_NO_ENTRYPOINTS", "") != "1")
        return _HOST


def reset_host(load_entrypoints: bool = True) -> PluginHost:
    """Replace the process-wide host with a fresh one (tests use this for isolation)."""
    global _HOST
    with _HOST_LOCK:
        _HOST = PluginHost(load_entrypoints=load_entrypoints)
        return _HOST


def load_plugins() -> None:
    """Load every plugin once (idempotent)."""
    get_host().load_plugins()


def get_verifiers() -> dict[str, Registration]:
    """Name -> registration of every verifier factory."""
    return get_host().registry("verifiers")


def get_parsers() -> dict[str, Registration]:
    """Name -> registration of every completion parser."""
    return get_host().registry("parsers")


def get_verifier(name: str, **config: Any) -> Any:
    """Build the verifier registered under `name` with its config."""
    return get_host().get("verifiers", name)(**config)


def get_parser(name: str) -> Callable[[str], Any]:
    """The parser registered under `name`."""
    return get_host().get("parsers", name)
