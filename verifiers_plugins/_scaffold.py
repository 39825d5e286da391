"""`pivot plugins new NAME`: write a ready-to-install verifier package.

The package follows examples/pivot-verifier-ast: a `src/` layout, an entry point in the group
`pivot`, a plugin module with one `@hookimpl register_verifiers`, a verifier class that already
works (exact tool call, or normalized text, equal to the expert's), tests that install-check the
plugin and run the audit kit on it, and a README. It installs and passes its own tests unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from verifiers_plugins.hookspecs import HOOK_API_VERSION

_NAME = re.compile(r"[a-z][a-z0-9_]*")

_PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "$dist"
version = "0.1.0"
description = "A pivot-gym verifier: $name"
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["pivot-gym"]

# The host finds the plugin through this entry point (group `pivot`); the entry-point name is
# the plugin's name in `pivot plugins` and may be used in the PIVOT_PLUGINS allow-list.
[project.entry-points.pivot]
$name = "$package.plugin"

[tool.setuptools.packages.find]
where = ["src"]

[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = "-ra --import-mode=importlib"
"""

_INIT = '''\
"""$dist: the `$name` verifier for pivot-gym."""

from $package.plugin import $cls, register_verifiers

__all__ = ["$cls", "register_verifiers"]
'''

_PLUGIN = '''\
"""The `$name` verifier and the hook that registers it (written for hook API v$api)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from verifiers_plugins import Verdict, hookimpl


def _calls(message: Any) -> list[tuple[str, Any]]:
    """The message's tool calls as (name, parsed arguments), order-free."""
    out = []
    for call in message.tool_calls:
        args = call.parsed_arguments()
        out.append((call.name, json.dumps(args, sort_keys=True) if args is not None else call.arguments))
    return sorted(out)


class $cls:
    """Accepts a candidate whose tool calls (name + arguments) or normalized text equal the expert's.

    Replace `verify` with your own check; keep the contract: return a `Verdict`, never raise on a
    bad completion (reject it with a reason), and set `error` only when you could not decide.
    """

    role = "acceptor"  # "gate" verifiers must pass first; "acceptor" verifiers can accept
    cost = "cheap"  # "cheap" < "sandbox" < "judge": the chain runs cheaper verifiers first
    deterministic = True
    version = "1"  # bump when the semantics change: it is part of every cached reward's key

    def __init__(self, case_sensitive: bool = False) -> None:
        self.case_sensitive = case_sensitive

    def _norm(self, text: str) -> str:
        text = " ".join(text.split())
        return text if self.case_sensitive else text.casefold()

    def verify(self, pivot: Any, action: Any) -> Verdict:
        """Compare the candidate `action` (a parsed assistant Message) with `pivot.expert`."""
        expert = pivot.expert
        if expert.tool_calls:
            if not action.tool_calls:
                return Verdict.reject("expert called a tool; the candidate did not")
            if _calls(action) == _calls(expert):
                return Verdict.accept("same tool calls and arguments")
            return Verdict.reject("tool calls differ", expert=[n for n, _ in _calls(expert)],
                                  candidate=[n for n, _ in _calls(action)])
        want, got = self._norm(expert.text), self._norm(action.text)
        if action.tool_calls or not got:
            return Verdict.reject("expected a text answer")
        if not want:
            return Verdict.skip("the expert turn has no text to compare")
        if got == want:
            return Verdict.accept("same text")
        return Verdict.reject("text differs")


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `$name`: `gym.make(id, verifiers=["$name"])` selects it."""
    register("$name", $cls)
'''

_CONFTEST = '''\
"""Test isolation: load this package's plugin and no other, with a fresh host per test."""

import os

import pytest

# The allow-list admits only this distribution: other installed plugins cannot interfere.
os.environ["PIVOT_PLUGINS"] = "$dist"


@pytest.fixture(autouse=True)
def fresh_host():
    """Each test gets its own plugin host (the allow-list is read when it loads)."""
    from verifiers_plugins import reset_host

    yield reset_host()
    reset_host()
'''

_TEST = '''\
"""Tests of `$name`: the plugin loads, the env uses it, known cases score right, the audit passes."""

import json
import subprocess
import sys

import gymnasium as gym
import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_envs import render_completion
from verifiers_plugins import audit, audit_failures, check_plugins, get_verifiers

ENV_ID = "pivot/tool-use-v0"


def test_registered_from_this_distribution():
    reg = get_verifiers()["$name"]
    assert reg.distribution == "$dist"


def test_pivot_plugins_lists_it_and_check_passes():
    out = subprocess.run([sys.executable, "-m", "pivot_cli", "plugins", "--json"],
                         capture_output=True, text=True, check=True)
    rows = [r for r in json.loads(out.stdout)["plugins"] if r["name"] == "$name"]
    assert rows and rows[0]["distribution"] == "$dist" and rows[0]["version"] == "0.1.0"
    report = check_plugins()
    assert report.ok, [p.to_json() for p in report.problems]


def test_env_uses_it_expert_scores_one_empty_scores_zero():
    env = gym.make(ENV_ID, verifiers=["$name"])
    for pivot in env.unwrapped.pivots:
        env.reset(options={"pivot_id": pivot.id})
        _, reward, _, _, info = env.step(render_completion(pivot.expert, pivot.domain))
        assert list(info["verdicts"]) == ["$name"]
        assert reward == 1.0, info["verdicts"]
        _, reward, _, _, info = env.step("")
        assert reward == 0.0, info["verdicts"]


def test_audit_kit_accepts_no_adversarial_case():
    # The reward-hacking audit: canned adversarial completions (empty, prose for a tool, junk
    # arguments, echo of the history, ...) at every pivot; none may be accepted.
    rows = audit(gym.make(ENV_ID, verifiers=["$name"]).unwrapped)
    assert rows and not audit_failures(rows), audit_failures(rows)
'''

_README = """\
# $dist

A [pivot-gym](https://github.com/) verifier plugin that registers `$name`.

```bash
pip install -e .                 # or: pip install $dist
pivot plugins                    # lists $name with its distribution and version
pivot plugins --check            # validates it against the hook API (v$api)
python -m pytest                 # its tests, including the reward-hacking audit
```

```python
import gymnasium as gym, pivot_envs
env = gym.make("pivot/tool-use-v0", verifiers=["$name"])
```

Edit `src/$package/plugin.py`: `$cls.verify(pivot, action)` returns a `Verdict`
(reward in [0, 1], `accepted`, a one-line `reason`; `error` only when it could not decide).
Set `cost` ("cheap" | "sandbox" | "judge") and `role` ("gate" | "acceptor"): the chain runs gates
first, then cheaper verifiers first. Bump `version` when the semantics change.
See pivot-gym's docs/plugins.md for the full guide.
"""

FILES: dict[str, str] = {
    "pyproject.toml": _PYPROJECT,
    "README.md": _README,
    "src/$package/__init__.py": _INIT,
    "src/$package/plugin.py": _PLUGIN,
    "tests/conftest.py": _CONFTEST,
    "tests/test_$name.py": _TEST,
}


def scaffold_names(name: str) -> dict[str, str]:
    """The template variables for a verifier name (`api-call` and `api_call` both give `api_call`).

    Raises:
        ValueError: the name is not a lowercase identifier.
    """
    verifier = name.strip().replace("-", "_")
    if not _NAME.fullmatch(verifier):
        raise ValueError(f"expected a lowercase verifier name like 'api_call_check', got {name!r}")
    words = verifier.split("_")
    return {
        "name": verifier,
        "dist": "pivot-verifier-" + "-".join(w for w in words if w),
        "package": "pivot_verifier_" + verifier,
        "cls": "".join(w.capitalize() for w in words),
        "api": str(HOOK_API_VERSION),
    }


def scaffold_files(name: str) -> dict[str, str]:
    """Relative path -> content of every file of the package for `name`."""
    names = scaffold_names(name)
    return {Template(path).substitute(names): Template(text).substitute(names) for path, text in FILES.items()}


def write_scaffold(name: str, out: str | Path = ".") -> Path:
    """Write the package folder `<out>/pivot-verifier-<name>/` and return its path.

    Raises:
        FileExistsError: the folder already exists (nothing is overwritten).
        ValueError: the name is not a lowercase identifier.
    """
    files = scaffold_files(name)
    root = Path(out) / scaffold_names(name)["dist"]
    if root.exists():
        raise FileExistsError(f"{root} already exists")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
