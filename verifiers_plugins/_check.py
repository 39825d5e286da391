"""`check_plugins`: validate every plugin the host would load, reporting all problems at once.

The host fails fast on the first broken plugin (so a typo never passes silently); this module is
the diagnosis behind `pivot plugins --check`. Each plugin is registered alone in a fresh pluggy
manager, so one plugin's problems never hide another's:

- import errors of an entry point;
- hook signature errors (pluggy's `PluginValidationError` at register time), named with the
  plugin and the hook;
- unknown hooks (what `check_pending` rejects), with a did-you-mean;
- deprecated hooks or arguments (`warn_on_impl`), as warnings;
- hooks that raise or call `register` with a bad name or object;
- the same name registered by two plugins, naming both distributions;
- for third-party verifiers: `factory()` must build an object with a callable `verify` and a
  valid `role` and `cost`.
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, Literal

import pluggy

from pivot_core.errors import did_you_mean
from verifiers_plugins import hookspecs
from verifiers_plugins._async import is_async_verifier
from verifiers_plugins._host import (
    DEFAULT_PLUGINS,
    KINDS,
    allowed_plugins,
    check_registration,
    distribution_version,
    entry_point_plugins,
    hook_names,
    unknown_hooks,
)
from verifiers_plugins._verdict import COST_ORDER, verifier_meta
from verifiers_plugins.errors import PluginError

Severity = Literal["error", "warning"]
ROLES = ("gate", "acceptor")


@dataclass(frozen=True)
class Problem:
    """One finding of `check_plugins`.

    Attributes:
        severity: "error" (the host would refuse or misuse the plugin) or "warning" (deprecated use).
        plugin: the plugin (entry-point or module) name.
        distribution: the distribution that ships it.
        hook: the hook concerned ("" when the problem is not about one hook).
        message: what is wrong and, where known, how to fix it.
    """

    severity: Severity
    plugin: str
    distribution: str
    hook: str
    message: str

    def to_json(self) -> dict[str, str]:
        """JSON-ready dict."""
        return {
            "severity": self.severity,
            "plugin": self.plugin,
            "distribution": self.distribution,
            "hook": self.hook,
            "message": self.message,
        }


@dataclass(frozen=True)
class Candidate:
    """A plugin to check: its object (None when it failed to import) and provenance."""

    name: str
    distribution: str
    version: str
    plugin: object | None
    builtin: bool = False
    registered: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckReport:
    """What `check_plugins` found: every plugin checked and every problem."""

    plugins: tuple[Candidate, ...]
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """True when no problem is an error (warnings allowed)."""
        return not any(p.severity == "error" for p in self.problems)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (`pivot plugins --check --json`)."""
        return {
            "ok": self.ok,
            "hook_api_version": hookspecs.HOOK_API_VERSION,
            "plugins": [
                {
                    "plugin": c.name,
                    "distribution": c.distribution,
                    "version": c.version,
                    "builtin": c.builtin,
                    "registered": {k: list(v) for k, v in c.registered.items()},
                }
                for c in self.plugins
            ],
            "problems": [p.to_json() for p in self.problems],
        }


def check_plugins(
    load_entrypoints: bool = True,
    extra: Sequence[tuple[object, str, str]] = (),
    specs: ModuleType = hookspecs,
) -> CheckReport:
    """Validate the built-ins, the allowed entry-point plugins and `extra` (plugin, name, distribution).

    `PIVOT_PLUGINS` applies as it does for the host: the check covers what would load.
    """
    problems: list[Problem] = []
    candidates = _candidates(load_entrypoints, extra, problems)
    owners: dict[tuple[str, str], list[Candidate]] = {}
    checked = []
    for cand in candidates:
        pm = _register_alone(cand, specs, problems) if cand.plugin is not None else None
        registered: dict[str, tuple[str, ...]] = {}
        for kind in KINDS if pm is not None else ():
            got = _collect_one(pm, cand, kind, problems)
            registered[kind] = tuple(name for name, _ in got)
            for name, obj in got:
                owners.setdefault((kind, name), []).append(cand)
                if kind == "verifiers" and not cand.builtin:
                    problems.extend(_check_factory(cand, name, obj))
        checked.append(replace(cand, registered={k: v for k, v in registered.items() if v}))
    for (kind, name), who in owners.items():
        if len(who) > 1:
            both = " and ".join(f"plugin {c.name!r} (distribution {c.distribution} {c.version})" for c in who)
            problems.append(
                Problem(
                    "error",
                    who[-1].name,
                    who[-1].distribution,
                    f"register_{kind}",
                    f"{kind[:-1]} name {name!r} is registered by {both}; uninstall one, or "
                    f"leave one out with PIVOT_PLUGINS",
                )
            )
    return CheckReport(tuple(checked), tuple(problems))


def _candidates(
    load_entrypoints: bool, extra: Sequence[tuple[object, str, str]], problems: list[Problem]
) -> list[Candidate]:
    out = [
        Candidate(m, "pivot-gym", distribution_version("pivot-gym"), importlib.import_module(m), builtin=True)
        for m in DEFAULT_PLUGINS
    ]
    if load_entrypoints:
        try:
            found = entry_point_plugins(allowed_plugins())
        except PluginError as e:  # two distributions claim one entry-point name
            problems.append(Problem("error", "", "", "", str(e)))
            found = []
        for ep in found:
            try:
                plugin = ep.entry_point.load()
            except Exception as e:
                problems.append(
                    Problem(
                        "error",
                        ep.name,
                        ep.distribution,
                        "",
                        f"import of {ep.entry_point.value!r} failed: {type(e).__name__}: {e}",
                    )
                )
                plugin = None
            out.append(Candidate(ep.name, ep.distribution, ep.version, plugin))
    out.extend(Candidate(name, dist, "", plugin) for plugin, name, dist in extra)
    return out


def _register_alone(cand: Candidate, specs: ModuleType, problems: list[Problem]) -> pluggy.PluginManager | None:
    """Register one plugin in a fresh manager; signature errors, unknown hooks and deprecations become problems."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(specs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            pm.register(cand.plugin, name=cand.name)
        except pluggy.PluginValidationError as e:
            match = re.search(r"hook '(\w+)'", str(e))
            problems.append(
                Problem(
                    "error", cand.name, cand.distribution, match.group(1) if match else "", " ".join(str(e).split())
                )
            )
            return None
    for w in caught:
        hook = next((h for h in hook_names(specs) if h in str(w.message)), "")
        problems.append(
            Problem("warning", cand.name, cand.distribution, hook, f"deprecated: {w.message} ({w.filename}:{w.lineno})")
        )
    for hook in unknown_hooks(pm, cand.plugin):
        problems.append(
            Problem(
                "error",
                cand.name,
                cand.distribution,
                hook,
                f"unknown hook {hook!r}: no such hookspec (known: {hook_names(specs)})."
                f"{did_you_mean(hook, hook_names(specs))}",
            )
        )
    return pm


def _collect_one(
    pm: pluggy.PluginManager, cand: Candidate, kind: str, problems: list[Problem]
) -> list[tuple[str, Any]]:
    """Call one hook of a lone plugin, recording valid registrations and reporting bad ones."""
    got: list[tuple[str, Any]] = []
    hook = f"register_{kind}"

    def register(name: str, obj: Any) -> None:
        try:
            check_registration(kind, cand.name, name, obj)
        except PluginError as e:
            problems.append(Problem("error", cand.name, cand.distribution, hook, str(e)))
            return
        if any(n == name for n, _ in got):
            problems.append(
                Problem(
                    "error",
                    cand.name,
                    cand.distribution,
                    hook,
                    f"{kind[:-1]} name {name!r} is registered twice by the same plugin",
                )
            )
            return
        got.append((name, obj))

    caller = getattr(pm.hook, hook, None)
    if caller is None:
        return got
    try:
        caller(register=register)
    except Exception as e:
        problems.append(
            Problem("error", cand.name, cand.distribution, hook, f"the hook raised {type(e).__name__}: {e}")
        )
    return got


def _check_factory(cand: Candidate, name: str, factory: Any) -> list[Problem]:
    """A third-party verifier must build with no config and follow the Verifier protocol."""

    def problem(message: str, severity: Severity = "error") -> Problem:
        return Problem(severity, cand.name, cand.distribution, "register_verifiers", f"verifier {name!r}: {message}")

    try:
        verifier = factory()
    except Exception as e:
        return [
            problem(
                f"factory() with no config raised {type(e).__name__}: {e}; give every option a "
                f"default so `gym.make(id, verifiers=[{name!r}])` works",
                "warning",
            )
        ]
    out = []
    if not callable(getattr(verifier, "verify", None)):
        out.append(problem(f"factory() returned {type(verifier).__name__}, which has no callable verify()"))
    meta = verifier_meta(verifier)
    if meta["role"] not in ROLES:
        out.append(problem(f"expected role in {list(ROLES)}, got {meta['role']!r}"))
    if meta["cost"] not in COST_ORDER:
        out.append(problem(f"expected cost in {list(COST_ORDER)}, got {meta['cost']!r}"))
    if is_async_verifier(verifier) and getattr(verifier, "timeout", None) is None:
        out.append(problem("async verifier without a `timeout` attribute: the host's default applies", "warning"))
    return out
