"""SWE-bench instances: one row of an `instances.jsonl`, its repository at the base commit, its pins.

The layout is the interface (issue 43): an `instances.jsonl` with `repos/<owner>__<repo>.bundle` and
`trajectories/` beside it. Each row holds the SWE-bench instance (repo, base_commit, the gold `patch`,
`test_patch`, FAIL_TO_PASS and PASS_TO_PASS as JSON-encoded strings, version), the Python version and pip
pins of the instance's original environment, the harness spec (pre_install, install, test command, log
parser name) and where its tree lies in the bundle (`bundle_tag`, `bundle_commit`, `base_tree`).

SWE-bench Verified is an evaluation set: tests, demos and benchmarks only, never training data by default.

Public API:
    load_instance(instance_id, instances=None) -> SWEInstance   (TaskError names the file and line)
    load_instances(instances=None, only=()) -> list[SWEInstance]
    default_instances() -> Path | None      (the shared data's `swe/verified/instances.jsonl`)
    checkout(instance, dest) -> Path        (the repository at its base commit, one commit, no other tree)
    split_pins(instance, python) -> Pins    (bootstrap pins first; backports the interpreter has left out)
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pivot_core import shared_data_file
from pivot_sandbox.contract.spec import Json
from pivot_sandbox.errors import TaskError

SHARED_INSTANCES = "swe/verified/instances.jsonl"
BOOTSTRAP = ("pip", "setuptools", "wheel")
# Pins of a conda export that only back-port a standard module to older Pythons: on a Python that has the
# module they are no-ops on conda, and their sdists do not build there (backports.zoneinfo on 3.10).
BACKPORTS = {"backports.zoneinfo": (3, 9), "dataclasses": (3, 7)}
# The branch SWE-bench's image leaves /testbed on (its `git clone --single-branch` of the default branch);
# an agent's `git status` says it. Repositories not listed are on "main".
DEFAULT_BRANCHES = {"mwaskom/seaborn": "master", "sphinx-doc/sphinx": "master", "sympy/sympy": "master"}


@dataclass(frozen=True)
class Harness:
    """How SWE-bench's harness sets up and tests an instance (its spec for the repository version).

    Attributes:
        install: the command that installs the repository (`python -m pip install -e .`).
        pre_install: commands run in the repository before `install` (sed on setup.py, tox.ini).
        test_command: the test command with the instance's test files (`pytest -rA test_requests.py`).
        test_directives: the test files (or modules) the command names.
        log_parser: the name of the `swebench` log parser for the repository (`parse_log_requests`).
        spec: the whole spec as read (python, packages, pip_packages, test_cmd, ...).
    """

    install: str
    pre_install: tuple[str, ...]
    test_command: str
    test_directives: tuple[str, ...]
    log_parser: str
    spec: Mapping[str, Json] = field(default_factory=dict)


@dataclass(frozen=True)
class SWEInstance:
    """One SWE-bench instance as `instances.jsonl` holds it, with its repository bundle located.

    Attributes:
        instance_id: `owner__repo-number`.
        repo: `owner/repo`.
        version: the repository version the harness spec is for.
        base_commit: the upstream commit the instance starts from.
        patch: the gold patch.
        test_patch: the patch that adds the instance's tests (applied only for a test run).
        problem_statement: the issue text the agent is given.
        fail_to_pass: tests the gold patch makes pass.
        pass_to_pass: tests that pass before and after.
        python: the Python version of the original environment ("3.9.20").
        pip_pins: `name==version` of the original environment's Python packages.
        harness: the harness spec.
        bundle: the git bundle holding the tree (`repos/<owner>__<repo>.bundle`).
        bundle_tag: the bundle's tag for this instance (its id).
        bundle_commit: the commit the tag names (its tree is the base commit's).
        base_tree: the tree id of the base commit.
        scm_pretend_version: `SETUPTOOLS_SCM_PRETEND_VERSION` for a setuptools_scm repository, else "".
        resolved: whether the recorded agent run resolved it (None when not recorded).
        trajectory: the recorded agent run beside the instances, None when absent.
        offline_check: what the hand-made rebuild of the staging found (`feasibility.md`), empty when the
            instance was never rebuilt by hand (the benchmark holds those back).
        source: the file and line it was read from.
    """

    instance_id: str
    repo: str
    version: str
    base_commit: str
    patch: str
    test_patch: str
    problem_statement: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    python: str
    pip_pins: tuple[str, ...]
    harness: Harness
    bundle: Path
    bundle_tag: str
    bundle_commit: str
    base_tree: str
    scm_pretend_version: str = ""
    resolved: bool | None = None
    trajectory: Path | None = None
    offline_check: Mapping[str, Json] = field(default_factory=dict)
    source: str = ""

    @property
    def python_minor(self) -> tuple[int, int]:
        """(major, minor) of the instance's Python."""
        major, minor = self.python.split(".")[:2]
        return int(major), int(minor)

    @property
    def test_files(self) -> tuple[str, ...]:
        """The files the test patch touches (SWE-bench resets them before and after a test run)."""
        return tuple(dict.fromkeys(re.findall(r"^diff --git a/(\S+) b/", self.test_patch, re.M)))

    @property
    def default_branch(self) -> str:
        """The branch /testbed is on in SWE-bench's image."""
        return DEFAULT_BRANCHES.get(self.repo, "main")


@dataclass(frozen=True)
class Pins:
    """An instance's pins as the environment installs them: bootstrap first, then the rest; what was left out."""

    bootstrap: tuple[str, ...]
    rest: tuple[str, ...]
    dropped: tuple[str, ...]


def default_instances() -> Path | None:
    """The shared data's SWE-bench Verified `instances.jsonl`, None when this machine has no shared data."""
    return shared_data_file(SHARED_INSTANCES)


def _instances_path(instances: Path | str | None) -> Path:
    if instances is not None:
        return Path(instances)
    found = default_instances()
    if found is None:
        raise TaskError(f"no {SHARED_INSTANCES} in the shared data (set PIVOT_SHARED_DATA) and no file was given")
    return found


def _strings(row: Mapping[str, Json], key: str) -> tuple[str, ...]:
    """A list of strings, or a JSON-encoded one (FAIL_TO_PASS and PASS_TO_PASS are stored encoded)."""
    value = row.get(key)
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key}: expected a list of strings (or its JSON text), got {type(value).__name__}")
    return tuple(value)


def _text(row: Mapping[str, Json], key: str, required: bool = True) -> str:
    value = row.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise ValueError(f"{key}: expected a non-empty string, got {value!r:.60}")
    return value


def _harness(row: Mapping[str, Json]) -> Harness:
    h = row.get("harness")
    if not isinstance(h, dict) or not isinstance(h.get("spec"), dict):
        raise ValueError("harness: expected an object with a `spec` object")
    spec = h["spec"]
    pre = spec.get("pre_install") or []
    if not isinstance(pre, list):
        raise ValueError(f"harness.spec.pre_install: expected a list of commands, got {type(pre).__name__}")
    return Harness(
        install=_text(spec, "install"),
        pre_install=tuple(str(c) for c in pre),
        test_command=_text(h, "test_command"),
        test_directives=_strings(h, "test_directives"),
        log_parser=_text(h, "log_parser"),
        spec=dict(spec),
    )


def _instance(row: Mapping[str, Json], root: Path, source: str) -> SWEInstance:
    """A row as an `SWEInstance` (raises ValueError naming the field)."""
    python = _text(row, "python")
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", python):
        raise ValueError(f"python: expected a version such as 3.9.20, got {python!r}")
    trajectory = root / _text(row, "trajectory_file") if row.get("trajectory_file") else None
    resolved = row.get("resolved")
    return SWEInstance(
        instance_id=_text(row, "instance_id"),
        repo=_text(row, "repo"),
        version=_text(row, "version"),
        base_commit=_text(row, "base_commit"),
        patch=_text(row, "patch"),
        test_patch=_text(row, "test_patch"),
        problem_statement=_text(row, "problem_statement", required=False),
        fail_to_pass=_strings(row, "FAIL_TO_PASS"),
        pass_to_pass=_strings(row, "PASS_TO_PASS"),
        python=python,
        pip_pins=_strings(row, "pip_pins"),
        harness=_harness(row),
        bundle=root / _text(row, "bundle"),
        bundle_tag=_text(row, "bundle_tag"),
        bundle_commit=_text(row, "bundle_commit"),
        base_tree=_text(row, "base_tree"),
        scm_pretend_version=_text(row, "scm_pretend_version", required=False),
        resolved=resolved if isinstance(resolved, bool) else None,
        trajectory=trajectory if trajectory is not None and trajectory.is_file() else None,
        offline_check=row.get("offline_check") if isinstance(row.get("offline_check"), dict) else {},
        source=source,
    )


def load_instances(instances: Path | str | None = None, only: Sequence[str] = ()) -> list[SWEInstance]:
    """Every row of an `instances.jsonl` (default: the shared data's), or only the named ones, in file order.

    Raises:
        TaskError: the file is missing, a row is not a valid instance (the message names the file, the line
            and the field), or a name in `only` is not in the file (with the closest ids).
    """
    path = _instances_path(instances)
    if not path.is_file():
        raise TaskError(f"{path}: no such instances file")
    out: list[SWEInstance] = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise ValueError(f"expected a JSON object, got {type(row).__name__}")
                out.append(_instance(row, path.parent, where))
            except (ValueError, json.JSONDecodeError) as e:
                raise TaskError(f"{where}: not a valid SWE-bench instance: {e}") from e
    if not only:
        return out
    by_id = {i.instance_id: i for i in out}
    for name in only:
        if name not in by_id:
            close = difflib.get_close_matches(name, list(by_id), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise TaskError(f"{path}: no instance {name!r}{hint}")
    return [by_id[name] for name in only]


def load_instance(instance_id: str, instances: Path | str | None = None) -> SWEInstance:
    """One instance of an `instances.jsonl` (default: the shared data's); see `load_instances`."""
    return load_instances(instances, only=[instance_id])[0]


def _git(args: Sequence[str], cwd: Path, timeout: float = 300.0) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise TaskError(f"git {' '.join(args[:3])} failed in {cwd}: {proc.stderr.strip()[-300:]}")
    return proc.stdout.strip()


def checkout(instance: SWEInstance, dest: Path) -> Path:
    """The repository at the instance's base commit in `dest`, as the only commit its `.git` holds.

    The bundle holds every instance of the repository (other base commits, some later than this one): only
    the instance's tag is fetched, the objects of the others are pruned, and the tree is checked against
    `base_tree`, so that nothing of another instance's tree reaches the image.
    """
    if not instance.bundle.is_file():
        raise TaskError(f"{instance.source}: the bundle {instance.bundle} is missing")
    dest.mkdir(parents=True, exist_ok=True)
    _git(["init", "-q", "-b", instance.default_branch], dest)
    ref = f"refs/tags/{instance.bundle_tag}"
    _git(["fetch", "-q", "--no-tags", str(instance.bundle), f"{ref}:refs/pivot-import"], dest)
    _git(["reset", "-q", "--hard", "refs/pivot-import"], dest)
    _git(["update-ref", "-d", "refs/pivot-import"], dest)
    _git(["reflog", "expire", "--expire=now", "--all"], dest)
    _git(["gc", "-q", "--prune=now"], dest)
    tree, commit = _git(["rev-parse", "HEAD^{tree}", "HEAD"], dest).split()
    if tree != instance.base_tree or commit != instance.bundle_commit:
        raise TaskError(
            f"{instance.source}: the bundle's {instance.bundle_tag} is commit {commit} with tree {tree}, "
            f"expected {instance.bundle_commit} with tree {instance.base_tree}"
        )
    return dest


def removed_later(instance: SWEInstance) -> tuple[str, ...]:
    """The directories of the instance's tree that the newest tree of its bundle no longer has (top-most ones).

    SWE-bench clones the repository's tip, runs `chmod -R 777`, then resets to the base commit: what the
    tip no longer has is made anew by the reset, with the umask's 755, and an agent's `ls -la` shows it
    so (sphinx's `.circleci`, pylint's `elisp`). The tip is not in the bundle; the newest instance's tree
    (the highest pull-request number) stands for it: what was gone by then is gone from the tip.
    """
    if not instance.bundle.is_file():
        return ()
    # every lookup of an instance image asks (its Dockerfile text is part of the cache key): read once per bundle
    return _removed_later(str(instance.bundle), instance.bundle.stat().st_mtime_ns, instance.bundle_tag)


@functools.lru_cache(maxsize=256)
def _removed_later(bundle: str, mtime_ns: int, tag: str) -> tuple[str, ...]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pivot-swe-trees-") as tmp:
        repo = Path(tmp)
        _git(["init", "-q", "--bare"], repo)
        _git(["fetch", "-q", bundle, "refs/tags/*:refs/tags/*"], repo)
        tags = _git(["tag"], repo).split()
        newest = max(tags, key=lambda t: int(t.rsplit("-", 1)[-1]) if t.rsplit("-", 1)[-1].isdigit() else -1)
        if newest == tag:
            return ()
        mine = set(_git(["ls-tree", "-r", "-d", "--name-only", tag], repo).splitlines())
        later = set(_git(["ls-tree", "-r", "-d", "--name-only", newest], repo).splitlines())
    gone = sorted(mine - later)
    return tuple(d for d in gone if not any(d.startswith(f"{g}/") for g in gone))


def _name(pin: str) -> str:
    return re.split(r"[=<>!~ ;\[]", pin, maxsplit=1)[0].strip().lower().replace("_", "-")


def split_pins(instance: SWEInstance, python: tuple[int, int]) -> Pins:
    """The instance's pins for an interpreter of version `python`: pip/setuptools/wheel apart, backports dropped."""
    bootstrap, rest, dropped = [], [], []
    backports = {k.replace("_", "-"): v for k, v in BACKPORTS.items()}
    for pin in instance.pip_pins:
        name = _name(pin)
        if name in BOOTSTRAP:
            bootstrap.append(pin)
        elif name in backports and python >= backports[name]:
            dropped.append(pin)
        else:
            rest.append(pin)
    return Pins(tuple(bootstrap), tuple(rest), tuple(dropped))


__all__ = [
    "removed_later",
    "Harness",
    "Pins",
    "SWEInstance",
    "checkout",
    "default_instances",
    "load_instance",
    "load_instances",
    "split_pins",
]
