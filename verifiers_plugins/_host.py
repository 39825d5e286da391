"""The plugin host: one pluggy manager, lazy loading, and the registries the hooks fill.

Built-in verifiers are plugins too (`DEFAULT_PLUGINS`), registered through the same hooks as a
third-party package's entry point. Loading runs once, lazily, on the first accessor call.

An installed plugin that breaks at run time (its import raises, a hook raises or registers a
bad object) is left out, loudly: a `BrokenPluginWarning` names it and its error, `pivot plugins`
lists it, and asking for a name it registered (or for any unknown name while some plugin is
broken) raises an error naming the broken plugin. Everything else keeps working, so one bad
package cannot disable every env. A plugin that does not match the hook API (an unknown hook, a
bad signature: what `pivot plugins --check` reports) and a duplicate name stay errors for the
whole load, as pluggy validates at registration: they fail again on every accessor until fixed,
never leaving half-filled registries behind. `register_plugin` (a plugin given by hand)
stays strict: it raises. `PIVOT_PLUGINS` (comma-separated distribution or entry-point names; ""
means none) limits which entry-point plugins load and is read when loading runs; built-ins always
load.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from types import ModuleType
from typing import Any

import pluggy

from pivot_core.errors import did_you_mean
from verifiers_plugins import hookspecs
from verifiers_plugins.errors import BrokenPluginWarning, DuplicateName, PluginError, UnknownVerifier

DEFAULT_PLUGINS: tuple[str, ...] = (
    "verifiers_plugins.builtin.parsers",
    "verifiers_plugins.builtin.turn_kind",
    "verifiers_plugins.builtin.harness_format",
    "verifiers_plugins.builtin.json_schema",
    "verifiers_plugins.builtin.string_similarity",
    "verifiers_plugins.builtin.tool_name",
    "verifiers_plugins.builtin.tool_args",
    "verifiers_plugins.builtin.tool_worlds",
    "verifiers_plugins.builtin.tool_exec",
    "verifiers_plugins.builtin.browse_tool",
    "verifiers_plugins.builtin.retrieval_match",
    "verifiers_plugins.builtin.answer_match",
    "verifiers_plugins.builtin.exact_match",
    "verifiers_plugins.builtin.swe_target",
    "verifiers_plugins.builtin.docker_shell",
    "verifiers_plugins.builtin.task_tests",
    "verifiers_plugins.builtin.swe_tests",
    "verifiers_plugins.builtin.llm_judge",
    "verifiers_plugins.builtin.user_simulators",
)
KINDS = ("verifiers", "parsers", "sandboxes", "tool_worlds", "categories", "user_simulators")
ALLOW_LIST_VAR = "PIVOT_PLUGINS"


@dataclass(frozen=True)
class Registration:
    """One registered object and where it came from."""

    name: str
    obj: Any
    plugin: str
    distribution: str
    version: str


@dataclass(frozen=True)
class BrokenPlugin:
    """An installed plugin left out of the registries, and why.

    Attributes:
        name: the plugin (entry-point) name.
        distribution: the distribution that ships it.
        version: its version.
        error: what went wrong, as the user should read it.
        names: `(kind, name)` pairs it registered before failing (none when its import failed).
    """

    name: str
    distribution: str
    version: str
    error: str
    names: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class EntryPointPlugin:
    """One installed entry point of the group `pivot`, with the distribution that ships it."""

    name: str
    distribution: str
    version: str
    entry_point: importlib_metadata.EntryPoint


def normalize_dist(name: str) -> str:
    """PEP 503 form of a distribution name (`Pivot_Verifier.AST` == `pivot-verifier-ast`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def allowed_plugins() -> frozenset[str] | None:
    """The `PIVOT_PLUGINS` allow-list (normalized names), read now; None when the variable is unset."""
    allow = os.environ.get(ALLOW_LIST_VAR)
    if allow is None:
        return None
    return frozenset(normalize_dist(n.strip()) for n in allow.split(",") if n.strip())


def entry_point_plugins(allowed: frozenset[str] | None = None) -> list[EntryPointPlugin]:
    """Installed entry points of the group `pivot` that the allow-list admits, sorted by distribution.

    The order is fixed (distribution, then entry-point name) so that loading, and every error
    about two plugins, reads the same on every machine whatever the install order.

    Raises:
        DuplicateName: two distributions declare the same entry-point name.
    """
    seen: dict[str, EntryPointPlugin] = {}
    eps = importlib_metadata.entry_points(group=hookspecs.PROJECT)
    for ep in sorted(eps, key=lambda e: (normalize_dist(e.dist.name if e.dist else ""), e.name)):
        dist = ep.dist.name if ep.dist else "unknown"
        if allowed is not None and normalize_dist(ep.name) not in allowed and normalize_dist(dist) not in allowed:
            continue
        found = EntryPointPlugin(ep.name, dist, ep.dist.version if ep.dist else "", ep)
        first = seen.get(ep.name)
        if first is not None and normalize_dist(first.distribution) != normalize_dist(dist):
            raise DuplicateName(
                f"entry point {ep.name!r} in group {hookspecs.PROJECT!r} is declared by two distributions: "
                f"{first.distribution} {first.version} and {dist} {found.version}; uninstall one, or pick one "
                f"with {ALLOW_LIST_VAR}"
            )
        seen.setdefault(ep.name, found)
    return list(seen.values())


def check_registration(kind: str, plugin_name: str, name: object, obj: object) -> None:
    """Validate one `register(name, obj)` call of hook `register_<kind>`.

    Raises:
        PluginError: the name is not a non-empty string or the object is not callable.
    """
    if not isinstance(name, str) or not name:
        raise PluginError(f"plugin {plugin_name!r}: register_{kind} expects a non-empty name, got {name!r}")
    # Category registrations map an alias to a category name; every other kind registers a factory.
    if not (callable(obj) or (kind == "categories" and isinstance(obj, str))):
        raise PluginError(
            f"plugin {plugin_name!r}: register_{kind}({name!r}, ...) expects a callable, got {type(obj).__name__}"
        )


def unknown_hooks(pm: pluggy.PluginManager, plugin: object) -> list[str]:
    """Names of the plugin's non-optional hookimpls that match no hookspec (what `check_pending` rejects)."""
    out = []
    for caller in pm.get_hookcallers(plugin) or []:
        if caller.has_spec():
            continue
        if any(impl.plugin is plugin and not impl.optionalhook for impl in caller.get_hookimpls()):
            out.append(caller.name)
    return sorted(out)


def hook_names(specs: ModuleType = hookspecs) -> list[str]:
    """Every hook the spec module declares."""
    marker = f"{hookspecs.PROJECT}_spec"
    return sorted(n for n in dir(specs) if hasattr(getattr(specs, n), marker))


class PluginHost:
    """A pluggy manager plus one registry per hook, filled through `register` callbacks.

    Args:
        load_entrypoints: load installed entry points of the group `pivot` (subject to
            `PIVOT_PLUGINS`); False loads the built-ins only.
        specs: the hookspec module (tests pass their own to exercise deprecations).
    """

    def __init__(self, load_entrypoints: bool = True, specs: ModuleType = hookspecs) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(specs)
        self.specs = specs
        self.load_entrypoints = load_entrypoints
        self._registries: dict[str, dict[str, Registration]] = {k: {} for k in KINDS}
        self._dists: dict[str, tuple[str, str]] = {}
        self._broken: dict[str, BrokenPlugin] = {}
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
                    module = importlib.import_module(module_name)
                    self._register(module, module_name, "pivot-gym", distribution_version("pivot-gym"))
            if self.load_entrypoints:
                self._load_entrypoints()
            self._check_pending()
            self._collect(lenient=True)
            self._loaded = True  # only after the registries are complete: a failed load fails again

    def _load_entrypoints(self) -> None:
        for found in entry_point_plugins(allowed_plugins()):
            if self.pm.get_plugin(found.name) is not None or self.pm.is_blocked(found.name):
                continue
            try:
                plugin = found.entry_point.load()
            except Exception as e:
                error = f"import of {found.entry_point.value!r} failed: {type(e).__name__}: {e}"
                self._mark_broken(BrokenPlugin(found.name, found.distribution, found.version, error))
                continue
            self._register(plugin, found.name, found.distribution, found.version)

    def _mark_broken(self, broken: BrokenPlugin) -> None:
        """Leave an installed plugin out, warning once with its name and error."""
        if self.pm.get_plugin(broken.name) is not None:
            self.pm.unregister(name=broken.name)
        self._dists.pop(broken.name, None)
        self._broken[broken.name] = broken
        warnings.warn(
            f"plugin {broken.name!r} (distribution {broken.distribution} {broken.version}) is broken and was "
            f"left out: {broken.error}. Envs that need its verifiers fail; fix it, uninstall it, or leave it out "
            f"with {ALLOW_LIST_VAR}.",
            BrokenPluginWarning,
            stacklevel=4,
        )

    def _register(self, plugin: object, name: str, distribution: str, version: str) -> None:
        """`pm.register` with pluggy's validation errors re-raised naming plugin and distribution."""
        try:
            self.pm.register(plugin, name=name)
        except pluggy.PluginValidationError as e:
            raise PluginError(
                f"plugin {name!r} (distribution {distribution}) does not match the hook API: "
                f"{' '.join(str(e).split())}. Run `pivot plugins --check` for every problem."
            ) from e
        except ValueError as e:  # pluggy: name or object already registered
            raise PluginError(f"plugin {name!r} (distribution {distribution}): {str(e).splitlines()[0]}") from e
        self._dists[name] = (distribution, version)

    def _check_pending(self, only: object | None = None) -> None:
        """`check_pending` for one plugin (or all), naming the plugin, its distribution and the hook."""
        for plugin_name, plugin in self.pm.list_name_plugin():
            if plugin is None or (only is not None and plugin is not only):
                continue
            unknown = unknown_hooks(self.pm, plugin)
            if unknown:
                dist = self._dists.get(plugin_name, ("unknown", ""))[0]
                hints = "".join(did_you_mean(h, hook_names(self.specs)) for h in unknown)
                raise PluginError(
                    f"plugin {plugin_name!r} (distribution {dist}) implements unknown hook(s) {unknown}; "
                    f"known hooks: {hook_names(self.specs)}.{hints} Fix the plugin or leave it out with "
                    f"{ALLOW_LIST_VAR}."
                )
        if only is None:
            self.pm.check_pending()  # pluggy's own strictness check, after ours named the culprit

    def register_plugin(self, plugin: object, name: str, distribution: str = "local", version: str = "") -> None:
        """Register a plugin object by hand (tests, notebooks); validates it, then refreshes the registries.

        Raises:
            PluginError: the plugin has an unknown hook or a hook signature the spec does not allow.
            DuplicateName: it registers a name another plugin already holds (nothing is kept).
        """
        with self._lock:
            self.load_plugins()
            self._register(plugin, name, distribution, version)
            try:
                self._check_pending(only=plugin)
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

    def _collect(self, lenient: bool = False) -> None:
        """Call every hook once per plugin, with a `register` closure that credits the plugin.

        A plugin's registrations are staged and kept only when all its hooks succeed; with
        `lenient`, an installed plugin whose hook fails is left out (`_mark_broken`), else the
        error propagates. A name two plugins register is a `DuplicateName` either way.
        """
        fresh: dict[str, dict[str, Registration]] = {k: {} for k in KINDS}
        for plugin_name, plugin in self.pm.list_name_plugin():
            if plugin is None:
                continue
            staged: dict[str, dict[str, Registration]] = {k: {} for k in KINDS}
            try:
                for kind in KINDS:
                    hook = getattr(self.pm.hook, f"register_{kind}")
                    self._call_for_plugin(
                        hook, plugin_name, plugin, self._make_register(kind, plugin_name, staged[kind])
                    )
            except DuplicateName:
                raise
            except PluginError as e:
                if not lenient or plugin_name in DEFAULT_PLUGINS:
                    raise
                dist, version = self._dists.get(plugin_name, ("unknown", ""))
                names = tuple((kind, name) for kind in KINDS for name in staged[kind])
                self._mark_broken(BrokenPlugin(plugin_name, dist, version, str(e), names))
                continue
            for kind in KINDS:
                for name, reg in staged[kind].items():
                    if name in fresh[kind]:
                        raise DuplicateName(_duplicate_message(kind, name, fresh[kind][name], reg))
                    fresh[kind][name] = reg
        self._registries = fresh

    def _call_for_plugin(
        self, hook: pluggy.HookCaller, plugin_name: str, plugin: object, register: Callable[..., None]
    ) -> None:
        # Calling the hook with all other plugins excluded credits each registration to exactly
        # one plugin, without touching pluggy internals or calling impl functions directly.
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        try:
            self.pm.subset_hook_caller(hook.name, remove_plugins=others)(register=register)
        except PluginError:
            raise
        except Exception as e:
            dist = self._dists.get(plugin_name, ("unknown", ""))[0]
            raise PluginError(
                f"plugin {plugin_name!r} (distribution {dist}): hook {hook.name} raised {type(e).__name__}: {e}"
            ) from e

    def _make_register(self, kind: str, plugin_name: str, registry: dict[str, Registration]) -> Callable[..., None]:
        dist, version = self._dists.get(plugin_name, ("unknown", ""))

        def register(name: str, obj: Any) -> None:
            check_registration(kind, plugin_name, name, obj)
            reg = Registration(name, obj, plugin_name, dist, version)
            if name in registry:
                raise DuplicateName(_duplicate_message(kind, name, registry[name], reg))
            registry[name] = reg

        return register

    # -- accessors -------------------------------------------------------------------------

    def registry(self, kind: str) -> dict[str, Registration]:
        """All registrations of one kind ("verifiers", "parsers", ...), loading plugins first."""
        if kind not in KINDS:
            raise KeyError(f"expected one of {KINDS}, got {kind!r}")
        self.load_plugins()
        return dict(self._registries[kind])

    def get(self, kind: str, name: str) -> Any:
        """The registered object, or UnknownVerifier with a did-you-mean (and the broken plugins, if any)."""
        reg = self.registry(kind)
        if name in reg:
            return reg[name].obj
        owner = next((b for b in self._broken.values() if (kind, name) in b.names), None)
        if owner is not None:
            raise PluginError(
                f"{kind[:-1]} {name!r} comes from plugin {owner.name!r} (distribution {owner.distribution} "
                f"{owner.version}), which is broken and was left out: {owner.error}"
            )
        broken = "".join(
            f" Plugin {b.name!r} (distribution {b.distribution}) is broken and was left out, so it may be the one "
            f"that provides it: {b.error}."
            for b in self._broken.values()
        )
        raise UnknownVerifier(
            f"no {kind[:-1]} named {name!r}; registered: {sorted(reg)}.{did_you_mean(name, reg)}{broken}"
        )

    def broken(self) -> dict[str, BrokenPlugin]:
        """Installed plugins left out because they are broken, by plugin name."""
        self.load_plugins()
        return dict(self._broken)

    def distributions(self) -> dict[str, tuple[str, str]]:
        """Plugin name -> (distribution, version) for every loaded plugin."""
        self.load_plugins()
        return dict(self._dists)


def _duplicate_message(kind: str, name: str, first: Registration, second: Registration) -> str:
    return (
        f"{kind[:-1]} name {name!r} is registered twice: by plugin {first.plugin!r} "
        f"(distribution {first.distribution}) and by plugin {second.plugin!r} (distribution {second.distribution}); "
        f"uninstall one, or leave one out with {ALLOW_LIST_VAR}"
    )


def distribution_version(dist: str) -> str:
    """The installed version of `dist` ("0+local" when it is not installed, e.g. a source checkout)."""
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


def get_user_simulator(name: str, **config: Any) -> Any:
    """Build the user simulator registered under `name` with its config (episode envs)."""
    return get_host().get("user_simulators", name)(**config)
