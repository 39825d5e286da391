"""What a Harbor task's `tests/test.sh` fetches, and how its reward is read: the pure half of Harbor's verifier.

TB2's `test.sh` installs its tools when it runs: `apt-get install -y curl`, uv from astral.sh
(`curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh; source $HOME/.local/bin/env`), then
`uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest ...`, or `pip install pytest==...`.
None of it is reachable from a test run here (`--network none`); `verifier_plan` reads what it
needs so that `harbor_layer.py` installs it from the registries beforehand, into a layer that only
the test run gets, and the unmodified `test.sh` then finds everything in place. A line that needs
another host (a `git clone` from GitHub, torch's own index) makes the task "not verifiable offline".

The reward is Harbor's (`harbor-format.md` §5): `/logs/verifier/reward.json`, a non-empty JSON object
whose numeric entries are the rewards, is read first; else `reward.txt`, one float. `ctrf.json`
(pytest-json-ctrf) holds the per-test results, which go into the details.

Public API:
    verifier_plan(tests_dir, allowed_hosts) -> VerifierPlan
    read_rewards(reward_json, reward_txt) -> Rewards        read_ctrf(text) -> dict
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pivot_core import Rewards, read_rewards
from pivot_sandbox.images.dockerfile import hosts_in, implicit_hosts

# uv's installer: the one fetch the layer stands in for (uv itself is a wheel on PyPI)
UV_INSTALLER = re.compile(r"https?://astral\.sh/uv/(?:(\d+\.\d+\.\d+)/)?install\.sh")
_APT_INSTALL = re.compile(r"^(?:sudo\s+)?(?:apt-get|apt)\s+(?:-\S+\s+)*install\b(.*)$")
_PIP_INSTALL = re.compile(r"^(?:python3?(?:\.\d+)?\s+-m\s+)?pip3?\s+install\b")
_UV = re.compile(r"^(?:uvx|uv)\s")
_ACTIVATE = re.compile(r"^(?:source|\.)\s+\S*bin/activate$")
_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
# a package name as apt reads it (not an option, a variable, a quote's end or a Python expression)
_PACKAGE_WORD = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
# fetch-like calls in the test files (not every URL a test names is fetched: a docstring's is not)
_FETCH = re.compile(
    r"urlopen|urlretrieve|requests\.(get|post)|httpx\.|\bcurl\b|\bwget\b|git\s+clone|\bclone\b|download"
)
# uvx/uv options that take a value (what comes after them is no tool name)
_VALUE_OPTIONS = frozenset(
    "-p --python -w --with --with-requirements --with-editable --from --index --default-index --index-url "
    "--extra-index-url --index-strategy --find-links -f --constraint -c --override --directory --project "
    "--cache-dir --config-file --refresh-package --reinstall-package --upgrade-package".split()
)


@dataclass(frozen=True)
class VerifierPlan:
    """What the layer of a task's test run installs, read from its `test.sh`.

    Attributes:
        apt: Debian packages `test.sh` installs (`apt-get install`).
        pip: its `pip install` commands, as written (run at build time into the image's own Python).
        uv: the uv version its installer line names ("" = the newest; None: it installs no uv).
        uv_steps: its `uv`/`uvx` commands, with the tool each `uvx` runs asked for `--version` only: run
            once at build time (they fill uv's cache), then again offline to check that the cache suffices.
        problem: why the test run cannot be made offline ("" when it can): a host beyond the registries.
    """

    apt: tuple[str, ...] = ()
    pip: tuple[str, ...] = ()
    uv: str | None = None
    uv_steps: tuple[str, ...] = ()
    problem: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (what the layer's cache key hashes)."""
        return {"apt": list(self.apt), "pip": list(self.pip), "uv": self.uv, "uv_steps": list(self.uv_steps)}


def commands(script: str) -> list[str]:
    """The simple commands of a shell script: continuations joined, comments dropped, split at `&&`, `||`, `;`, `|`.

    Enough for TB2's `test.sh` (no functions, no nested quoting across those operators); a quoted `;`
    splits a command in two, which can only add words to look at, never hide one.
    """
    out = []
    for line in script.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line):
            words = part.split()
            while words and _ENV_WORD.match(words[0]):  # `DEBIAN_FRONTEND=noninteractive apt-get ...`
                words.pop(0)
            if words:
                out.append(" ".join(words))
    return out


def _uv_step(command: str) -> str:
    """A `uvx`/`uv run` command with its tool asked for `--version` only: it fills uv's cache, runs no test."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    runs = {"uvx": 1, "uv": 2 if words[1:2] in (["run"], ["tool"]) else 0}.get(words[0], 0)
    if runs == 0:
        return command  # `uv venv`, `uv pip install ...`: as written
    i = runs + (1 if words[:3] == ["uv", "tool", "run"] else 0)
    while i < len(words) and words[i].startswith("-"):
        i += 1 if "=" in words[i] or words[i] not in _VALUE_OPTIONS else 2
    return shlex.join([*words[: i + 1], "--version"])


def _foreign(text: str, allowed: frozenset[str]) -> list[tuple[str, str]]:
    """(host, line) of the lines of `text` that name a host beyond the registries (uv's installer aside)."""
    found = []
    for line in text.splitlines():
        if line.lstrip().startswith("#") or UV_INSTALLER.search(line):
            continue
        for host in hosts_in(line, allowed) + implicit_hosts(line):
            found.append((host, line.strip()[:100]))
    return found


def _test_file_hosts(path: Path, allowed: frozenset[str]) -> list[tuple[str, str]]:
    """Hosts a test file fetches from: the foreign URLs of a file that fetches at all, and hub downloads.

    A URL and the call that fetches it are often lines apart (`url = "..."`, then `urlretrieve(url)`);
    a file that names URLs but fetches nothing (an HTML sample with links) needs no host.
    """
    if path.stat().st_size > 1_000_000:
        return []
    text = path.read_text(errors="replace")
    return _foreign(text, allowed) if _FETCH.search(text) or implicit_hosts(text) else []


def _test_file_apt(path: Path) -> list[str]:
    """Debian packages a test file installs when it runs: the layer has them, as it has those of `test.sh`.

    git-multibranch's test writes a script that runs `apt-get install -y curl expect ...` in the test run.
    """
    if path.stat().st_size > 1_000_000:
        return []
    found = []
    for command in commands(path.read_text(errors="replace")):
        if m := _APT_INSTALL.match(command.lstrip("\"'(")):
            found += [w for w in m.group(1).split() if _PACKAGE_WORD.match(w)]
    return found


def verifier_plan(tests: Path, allowed: frozenset[str]) -> VerifierPlan:
    """Read a task's `tests/test.sh` (and the fetches its test files make) into a `VerifierPlan`."""
    script = (tests / "test.sh").read_text(errors="replace")
    apt: list[str] = []
    pip: list[str] = []
    uv_steps: list[str] = []
    uv: str | None = None
    for command in commands(script):
        if m := _APT_INSTALL.match(command):
            apt += [w for w in m.group(1).split() if not w.startswith("-")]
        elif _PIP_INSTALL.match(command):
            pip.append(command)
        elif _UV.match(command) or _ACTIVATE.match(command):  # a venv `uv venv` made, activated for `uv pip`
            uv_steps.append(_uv_step(command))
    if m := UV_INSTALLER.search(script):
        uv = m.group(1) or ""
    foreign = _foreign(script, allowed)
    for path in sorted(tests.rglob("*.py")):
        foreign += _test_file_hosts(path, allowed)
    for path in sorted(p for p in tests.rglob("*") if p.suffix in (".py", ".sh") and p.name != "test.sh"):
        apt += _test_file_apt(path)
    problem = ""
    if foreign:
        host, line = foreign[0]
        problem = f"the tests need {host}, outside the registries: {line!r}"
    return VerifierPlan(tuple(dict.fromkeys(apt)), tuple(pip), uv, tuple(uv_steps), problem)


MAX_TESTS = 500  # per-test rows kept in the details


def read_ctrf(text: str | None) -> dict[str, Any]:
    """Per-test results of a CTRF report (`{"summary": {...}, "tests": [{"name", "status"}, ...]}`), {} when none."""
    if not text:
        return {}
    try:
        results = (json.loads(text) or {}).get("results") or {}
    except (json.JSONDecodeError, AttributeError):
        return {"error": "ctrf.json is not a CTRF report"}
    tests: Sequence[Any] = results.get("tests") or []
    rows = [{"name": str(t.get("name", "")), "status": str(t.get("status", ""))} for t in tests if isinstance(t, dict)]
    summary = {k: v for k, v in (results.get("summary") or {}).items() if isinstance(v, int | float)}
    return {"summary": summary, "tests": rows[:MAX_TESTS], **({"cut": len(rows)} if len(rows) > MAX_TESTS else {})}


__all__ = ["Rewards", "VerifierPlan", "commands", "read_ctrf", "read_rewards", "verifier_plan"]
