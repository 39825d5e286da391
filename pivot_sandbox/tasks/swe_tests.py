"""An SWE-bench instance's tests, run in a sandbox with no network and graded as SWE-bench grades them.

`run_swe_tests(target, instance, patch)` does what SWE-bench's `run_instance` does, in a session of the
project's sandbox (`replay/session.py`: no network, the backend's limits) instead of a container of
SWE-bench's images:

1. the patch (a candidate's diff, the gold patch, or none) is applied with SWE-bench's own chain of
   commands (`GIT_APPLY_CMDS`: `git apply`, `--3way`, `--reject`, `patch --fuzz=5`), from a clean tree
   between attempts, as root in `/testbed`; if none applies, the log says `APPLY_PATCH_FAIL`;
2. the eval script SWE-bench's harness (v4) writes for a Python instance runs: the test files reset to the
   base commit, the test patch applied (it reaches the sandbox only now, never a candidate), the spec's
   test command between the start and end markers, its exit status recorded (`record_test_exit_code`),
   the test files reset again. Two differences: no conda activation (the environment's Python is first
   on PATH) and no second `install` (SWE-bench reruns it with the network; here the tests import the
   working tree: editable installs, and pytest's rootdir for `pip install .`);
3. the log is graded by `swebench` itself: the repository's log parser, `get_eval_report` (FAIL_TO_PASS
   and PASS_TO_PASS, resolved when all of both pass).

`exclude` leaves named tests out of the grading (and says so): the tests an offline sandbox fails by
design (requests' TestTimeout tests connect to an unroutable address and expect a timeout, which an empty
network namespace turns into an immediate error). `validate_instance` finds them: the tests that fail
with the gold patch applied.

`SWE_LIMITS` are the sandbox limits a test run needs (`docker_backend(**SWE_LIMITS)`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shlex
import tarfile
import tempfile
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pivot_core import cache_dir
from pivot_sandbox.contract.backend import SandboxBackend
from pivot_sandbox.contract.spec import SandboxSpec
from pivot_sandbox.errors import TaskError
from pivot_sandbox.replay import box as ct
from pivot_sandbox.replay.session import Session, open_session
from pivot_sandbox.tasks.harness import new_nonce
from pivot_sandbox.tasks.swe import SWEInstance
from pivot_sandbox.tasks.swe_image import TESTBED
from pivot_sandbox.tasks.swe_services import start_lines, stop_lines

# What a test run needs: SWE-bench's own harness gives an instance 30 minutes; its suites spawn processes
# (tox, multiprocessing), write caches and need memory well past a candidate's 256 MB.
SWE_LIMITS: dict[str, Any] = {
    "memory": "4g",
    "pids": 4096,
    "cpus": 2.0,
    "file_size": 1 << 30,
    "action_timeout": 1800.0,
    "replay_timeout": 1800.0,
    "output_cap": 32 << 20,
    "compare_chars": 1 << 20,
    "max_changed_paths": 200_000,
    "change_set_timeout": 120.0,
}
# What restoring a state of an agent's run on an instance and running one candidate there may take
# (`docker_shell`'s and `swe_tests`' backend on SWE pivots): the history runs the repository's test suites.
SWE_STATE_LIMITS: dict[str, Any] = {"memory": "2g", "pids": 1024, "replay_timeout": 900.0, "action_timeout": 120.0}
TEST_TIMEOUT = 1800.0
LOG_CAP = 32 << 20  # bytes of the test log read back
LOG_TAIL = 4000  # characters of it kept in the outcome
HEREDOC = "EOF_114329324912"  # the delimiter SWE-bench's eval scripts use


@dataclass(frozen=True)
class SWEOutcome:
    """An instance's test run, graded by `swebench`.

    Attributes:
        instance_id: the instance.
        resolved: SWE-bench's verdict (every FAIL_TO_PASS and PASS_TO_PASS test passes); None when the run
            could not be graded (`reason` says why).
        applied: whether the patch applied (an empty patch always does).
        fail_to_pass: `{"success": [...], "failure": [...]}` of the FAIL_TO_PASS tests graded.
        pass_to_pass: the same for PASS_TO_PASS.
        excluded: tests left out of the grading (`exclude`).
        reason: what happened, in words.
        seconds: wall-clock seconds of the run (patch, tests, grading).
        log_tail: the end of the test log.
    """

    instance_id: str
    resolved: bool | None
    applied: bool
    fail_to_pass: Mapping[str, list[str]] = field(default_factory=dict)
    pass_to_pass: Mapping[str, list[str]] = field(default_factory=dict)
    excluded: tuple[str, ...] = ()
    reason: str = ""
    seconds: float = 0.0
    log_tail: str = ""

    def passed(self, which: str) -> str:
        """`"passed/total"` of "fail_to_pass" or "pass_to_pass"."""
        lists = getattr(self, which)
        ok, bad = len(lists.get("success", [])), len(lists.get("failure", []))
        return f"{ok}/{ok + bad}"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the episode's `outcome.details`, the bench's rows)."""
        return {
            "instance_id": self.instance_id,
            "resolved": self.resolved,
            "applied": self.applied,
            "FAIL_TO_PASS": dict(self.fail_to_pass),
            "PASS_TO_PASS": dict(self.pass_to_pass),
            "excluded": list(self.excluded),
            "reason": self.reason,
            "seconds": round(self.seconds, 2),
        }


def swe_spec(image: str) -> SandboxSpec:
    """Where an instance's commands run: `/testbed` as root, in bash (as mini-swe-agent and SWE-bench run them).

    HOME is root's, as in SWE-bench's container (the sandbox's default is the working directory): the
    login shell each mini-swe-agent command runs in reads root's profile, which activates the environment.
    """
    return SandboxSpec(image=image, workdir=TESTBED, user="root", shell="/bin/bash", env={"HOME": "/root"})


def eval_script(instance: SWEInstance) -> str:
    """SWE-bench's eval script for the instance (see the module docstring), its test exit status recorded."""
    from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT
    from swebench.harness.utils import record_test_exit_code

    base = instance.bundle_commit  # the base commit's tree, under the bundle's commit id
    reset = f"git checkout {base} {' '.join(shlex.quote(f) for f in instance.test_files)}"
    lines = [
        f"cd {TESTBED}",
        f"git config --global --add safe.directory {TESTBED}",
        "git status",
        "git show",
        f"git -c core.fileMode=false diff {base}",
        reset,
        f"git apply -v - <<'{HEREDOC}'\n{instance.test_patch}\n{HEREDOC}",
        *start_lines(instance),  # local stand-ins for the hosts the tests reach (swe_services.py)
        f": '{START_TEST_OUTPUT}'",
        instance.harness.test_command,
        f": '{END_TEST_OUTPUT}'",
        *stop_lines(instance),
        reset,
    ]
    return "\n".join(["#!/bin/bash", "set -uxo pipefail", *record_test_exit_code(lines)]) + "\n"


def apply_script(fresh: bool) -> str:
    """SWE-bench's patch chain on `patch.diff` beside the script; `fresh`: reset the tree between attempts."""
    from swebench.harness.constants import APPLY_PATCH_FAIL, APPLY_PATCH_PASS
    from swebench.harness.run_evaluation import GIT_APPLY_CMDS

    attempts = " ".join(shlex.quote(c) for c in GIT_APPLY_CMDS)
    reset = "git checkout -- . ; git clean -fdq" if fresh else ":"
    return (
        f'#!/bin/bash\ncd {TESTBED}\nP="$(dirname "$0")/patch.diff"\nn=0\n'
        f"for cmd in {attempts}; do\n"
        f"  [ $n -gt 0 ] && {{ {reset}; }}\n  n=$((n+1))\n"
        f'  if $cmd "$P"; then echo "{APPLY_PATCH_PASS}"; exit 0; fi\n'
        "done\n"
        f'if git apply --check --reverse "$P"; then echo "{APPLY_PATCH_PASS}: verified already applied"; exit 0; fi\n'
        f'echo "{APPLY_PATCH_FAIL}"; exit 1\n'
    )


def _files_tar(folder: str, files: Mapping[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in {"": "", **files}.items():
            info = tarfile.TarInfo(f"{folder.lstrip('/')}/{name}".rstrip("/"))
            data = text.encode()
            if name:
                info.size, info.mode = len(data), 0o600
            else:
                info.type, info.mode = tarfile.DIRTYPE, 0o700
            tar.addfile(info, io.BytesIO(data) if name else None)
    return buf.getvalue()


def _run_in_box(session: Session, instance: SWEInstance, patch: str, fresh: bool, timeout: float) -> tuple[str, str]:
    """Deliver and run the patch chain and the eval script as root; (log, why the run did not finish or "").

    They run in a fresh shell with the image's own environment and root's home (`env -i`): nothing an agent
    exported reaches them, and `git config --global` writes where SWE-bench's image has it.
    """
    box, nonce = session.live(), new_nonce()
    folder = f"/tmp/pivot-swe-{nonce}"
    files = {"eval.sh": eval_script(instance), "apply.sh": apply_script(fresh), "patch.diff": patch}
    box.sandbox.put_archive("/", _files_tar(folder, files))
    log = f"{folder}/log"
    apply = f"bash {folder}/apply.sh > {log} 2>&1 && bash {folder}/eval.sh >> {log} 2>&1" if patch.strip() else ""
    script = f"{apply or f'bash {folder}/eval.sh > {log} 2>&1'}; echo {nonce} $?"
    env = [e for e in session.image_env() if "=" in e and not e.startswith(("HOME=", "BASH_ENV=", "ENV="))]
    argv = ["/usr/bin/env", "-i", *env, "HOME=/root", "/bin/bash", "--noprofile", "--norc", "-c", script]
    raw = ct.run(box, argv, user="0", timeout=timeout, output_cap=64 * 1024, keep=True)
    read = ct.run(box, ["head", "-c", str(LOG_CAP), log], user="0", timeout=120, output_cap=LOG_CAP + 1024, keep=True)
    ct.run(box, ["rm", "-rf", folder], user="0", timeout=60, output_cap=4096, keep=True)
    text = read.stdout.decode(errors="replace")
    if raw.killed:
        return text, f"stopped by the sandbox ({raw.killed})"
    if nonce not in raw.stdout.decode(errors="replace"):
        return text, "the test run did not finish"
    return text, ""


def grade(instance: SWEInstance, log: str, patch: str, exclude: Collection[str] = ()) -> SWEOutcome:
    """Grade a test log as SWE-bench does (`get_eval_report`), `exclude`d tests left out of both lists."""
    from swebench.harness.constants import APPLY_PATCH_FAIL, FAIL_TO_PASS, PASS_TO_PASS, EvalType
    from swebench.harness.grading import get_eval_report
    from swebench.harness.log_parsers import PARSER_REGISTRY
    from swebench.types import TestSpec

    if instance.harness.log_parser not in PARSER_REGISTRY:
        raise TaskError(f"{instance.source}: swebench has no log parser {instance.harness.log_parser!r}")
    skip = set(exclude)
    spec = TestSpec(
        instance_id=instance.instance_id,
        image="",
        eval_script_list=[],
        repo=instance.repo,
        version=instance.version,
        FAIL_TO_PASS=[t for t in instance.fail_to_pass if t not in skip],
        PASS_TO_PASS=[t for t in instance.pass_to_pass if t not in skip],
        log_parser=instance.harness.log_parser,
        eval_type=EvalType.PASS_AND_FAIL.value,
    )
    prediction = {"instance_id": instance.instance_id, "model_patch": patch, "model_name_or_path": "pivot-gym"}
    with tempfile.NamedTemporaryFile("w", suffix=".log", encoding="utf-8") as f:
        f.write(log)
        f.flush()
        report = get_eval_report(spec, prediction, f.name, include_tests_status=True)[instance.instance_id]
    excluded = tuple(t for t in (*instance.fail_to_pass, *instance.pass_to_pass) if t in skip)
    if not report["patch_successfully_applied"]:
        applied = APPLY_PATCH_FAIL not in log
        why = "the patch did not apply" if not applied else "the log holds no gradable test output"
        return SWEOutcome(instance.instance_id, None, applied, excluded=excluded, reason=why, log_tail=log[-LOG_TAIL:])
    status = report["tests_status"]
    return SWEOutcome(
        instance.instance_id,
        bool(report["resolved"]),
        True,
        fail_to_pass=status[FAIL_TO_PASS],
        pass_to_pass=status[PASS_TO_PASS],
        excluded=excluded,
        reason="resolved" if report["resolved"] else "not resolved",
        log_tail=log[-LOG_TAIL:],
    )


# Files that decide what the test run runs or reports, wherever they sit: a conftest.py can rewrite every
# test's outcome, pytest.ini its options and plugins, sitecustomize/.pth run code in every interpreter. No
# gold patch nor recorded submission of the shared instances touches one. tox.ini, setup.cfg and
# pyproject.toml are not here by name: SWE-bench's own set-up edits them (sphinx's tox.ini, astropy's
# pyproject.toml), so a run's `git diff` submits those edits; their pytest options are (below).
TEST_MACHINERY = frozenset({"conftest.py", "pytest.ini", "sitecustomize.py", "usercustomize.py"})
_PATCH_PATHS = re.compile(r"^(?:diff --git a/(\S+) b/(\S+)|(?:---|\+\+\+) (\S+)|Index: (\S+))", re.M)
# The shared configuration files hold pytest's options too (`[tool:pytest]`, `[pytest]`,
# `[tool.pytest.ini_options]`): an `addopts = -p mymodule` there loads a plugin from any new module, which
# can mark every test passed. A changed line that names a section or an option of pytest's, or a
# continuation that loads a plugin (`-p NAME`), is tampering; the other edits of those files are not.
PYTEST_CONFIG_FILES = frozenset({"setup.cfg", "tox.ini", "pyproject.toml"})
_PYTEST_CONFIG_LINE = re.compile(
    r"^\s*(?:\[(?:tool:pytest|pytest|tool\.pytest[\w.]*)\]"
    r"|(?:addopts|python_files|python_classes|python_functions|testpaths|norecursedirs|required_plugins"
    r"|pytest_plugins|confcutdir|usefixtures|rootdir|filterwarnings|xfail_strict|markers|doctest_\w+)\s*="
    r"|[\"']?-p\s*\S)"
)


def test_tampering(instance: SWEInstance, patch: str) -> list[str]:
    """The files a submitted patch changes that run or configure the instance's tests (none: []).

    `TEST_MACHINERY` by name anywhere, `*.pth`, and the paths the test command runs (`bin/test`); not
    the test patch's files, which the grading resets before it applies the test patch (an agent's own
    edit of a test file is no tampering: runs that edit one resolved). Every path a
    patch header names counts, with and without its first component (`git apply` and `patch -p1`
    strip it), so a header spelled for either tool is seen.
    """
    named = {p for m in _PATCH_PATHS.finditer(patch) for p in m.groups() if p and p != "/dev/null"}
    stripped = {p.split("/", 1)[1] for p in named if "/" in p}
    paths = stripped | {p for p in named if not p.startswith(("a/", "b/"))}  # a/x, b/x: x alone
    words = {w.strip("'\"") for w in instance.harness.test_command.split() if "/" in w and not w.startswith("-")}
    command = words - set(instance.harness.test_directives) - set(instance.test_files)  # the program, not its tests
    found = {p for p in paths if p.rsplit("/", 1)[-1] in TEST_MACHINERY or p.endswith(".pth") or p in command}
    found |= _pytest_options_changed(patch)
    return sorted(found)


def _pytest_options_changed(patch: str) -> set[str]:
    """The configuration files (`PYTEST_CONFIG_FILES`) whose changed lines touch pytest's section or options.

    A file's hunks start at its `diff --git` line or at a `---` line followed by a `+++` line (a removed
    line that reads `-- x` is no header, whatever follows it).
    """
    found, path = set(), ""
    lines = patch.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("diff --git ") or (
            line.startswith("--- ") and lines[i + 1 : i + 2] and lines[i + 1].startswith("+++ ")
        ):
            # the header's path, renamed by a `+++` line after it (`diff --git`'s b/ path alone: a mode change)
            header = _PATCH_PATHS.match(line)
            named = [p for p in (header.groups() if header else ()) if p and p != "/dev/null"]
            path = named[-1] if named else ""
        elif line.startswith("+++ ") and i and lines[i - 1].startswith("--- "):
            path = line[4:].split("\t")[0].strip() if line[4:].strip() != "/dev/null" else path
        elif line[:1] in ("+", "-") and _base_name(path) in PYTEST_CONFIG_FILES and _PYTEST_CONFIG_LINE.match(line[1:]):
            found.add(path.split("/", 1)[1] if path.startswith(("a/", "b/")) else path)
    return found


def _base_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def run_swe_tests(
    target: SandboxBackend | Session,
    instance: SWEInstance,
    patch: str = "",
    *,
    image: str = "",
    exclude: Collection[str] = (),
    timeout: float = TEST_TIMEOUT,
) -> SWEOutcome:
    """Apply `patch`, run the instance's tests with no network, grade them (see the module docstring).

    Args:
        target: a backend with live sessions (a fresh sandbox of the instance image is made and removed:
            SWE-bench's own procedure), or a `Session` whose state the tests run on as the agent left it
            (its leftover processes stopped first; the patch chain then never resets the tree).
        instance: the instance.
        patch: a unified diff to apply first ("" for none: the base commit, or the session's state).
        image: the instance image (a backend target); built or found by its hash when empty.
        exclude: tests left out of the grading (`validate_instance`'s offline failures).
        timeout: seconds the patch and the tests may take.

    Raises:
        SandboxError: the sandbox could not be made; TaskError: the instance cannot be built or graded.
    """
    started = time.monotonic()
    tampering = test_tampering(instance, patch)
    if tampering:  # graded, it could report what it likes: rejected unrun, with the files named
        why = f"the patch changes what runs or configures the tests ({', '.join(tampering)}): not a fix"
        return SWEOutcome(instance.instance_id, False, False, reason=why)
    if isinstance(target, Session):
        stopped = target.freeze()
        if stopped:
            return SWEOutcome(instance.instance_id, None, False, reason=stopped)
        log, why = _run_in_box(target, instance, patch, False, timeout)
    else:
        session = open_session(target, swe_spec(image or _image(target, instance)), [])
        try:
            log, why = _run_in_box(session, instance, patch, True, timeout)
        finally:
            session.close()
    outcome = grade(instance, log, patch, exclude) if not why else None
    if outcome is None:
        outcome = SWEOutcome(instance.instance_id, None, False, reason=why, log_tail=log[-LOG_TAIL:])
    return replace(outcome, seconds=time.monotonic() - started)


def _image(backend: SandboxBackend, instance: SWEInstance) -> str:
    from pivot_sandbox.tasks.swe_image import swe_image

    report = swe_image(backend.client, instance)  # type: ignore[attr-defined]  (a live-session backend: Docker's)
    if not report.image:
        raise TaskError(f"{instance.instance_id}: no image: {report.reason}")
    return report.image


@dataclass(frozen=True)
class Validity:
    """An instance checked as SWE-bench validates it: the base fails FAIL_TO_PASS, the gold patch passes all.

    Attributes:
        instance_id: the instance.
        valid: the gold patch passes every FAIL_TO_PASS test and every PASS_TO_PASS test but the offline
            failures, and the base commit fails at least one FAIL_TO_PASS test.
        before: the run on the base commit (the test patch only), graded on every test.
        gold: the run with the gold patch, graded on every test.
        offline_failures: PASS_TO_PASS tests that fail on the base commit and with the gold patch alike: the
            environment fails them (a network the sandbox lacks), not a patch; `exclude` them when grading.
        regressions: PASS_TO_PASS tests that pass on the base commit and fail with the gold patch.
        reason: why it is not valid ("" when it is).
    """

    instance_id: str
    valid: bool
    before: SWEOutcome
    gold: SWEOutcome
    offline_failures: tuple[str, ...]
    regressions: tuple[str, ...] = ()
    reason: str = ""


# bump when what a validity run means changes in a way its inputs (below) do not show
VALIDITY_VERSION = "1"


def _outcome_from_json(raw: Mapping[str, Any]) -> SWEOutcome:
    return SWEOutcome(
        str(raw["instance_id"]),
        raw["resolved"],
        bool(raw["applied"]),
        dict(raw["FAIL_TO_PASS"]),
        dict(raw["PASS_TO_PASS"]),
        tuple(raw["excluded"]),
        str(raw["reason"]),
        float(raw["seconds"]),
    )


def _validity_file(backend: SandboxBackend, instance: SWEInstance, image: str) -> Path | None:
    """Where the validity of `image` is kept: named by what the two runs depend on (None: no image id)."""
    import swebench

    image_id = backend.image_id(image)
    if not image_id:  # an image the backend cannot name is validated, not cached
        return None
    parts = (VALIDITY_VERSION, image_id, eval_script(instance), apply_script(True), instance.patch)
    parts += (json.dumps([instance.fail_to_pass, instance.pass_to_pass]), swebench.__version__)
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
    return cache_dir("swe-validity") / f"{instance.instance_id}-{key}.json"


def validate_instance(
    backend: SandboxBackend, instance: SWEInstance, image: str = "", *, cache: bool = True
) -> Validity:
    """Run the tests on the base commit and with the gold patch, and judge them as SWE-bench's validation does.

    The two runs are kept on disk by what they depend on (the image's id, the eval and apply scripts,
    the gold patch and test lists, the `swebench` release) and reused; a run that was not graded (a
    timeout on a loaded machine, a patch that did not apply) is never kept.
    """
    image = image or _image(backend, instance)
    path = _validity_file(backend, instance, image) if cache else None
    if path is not None and path.exists():
        try:
            raw = json.loads(path.read_text())
            before, gold = _outcome_from_json(raw["before"]), _outcome_from_json(raw["gold"])
        except (OSError, ValueError, KeyError, TypeError):  # a damaged entry: run again
            path.unlink(missing_ok=True)
        else:
            return _judge_validity(instance, before, gold)
    before = run_swe_tests(backend, instance, "", image=image)
    gold = run_swe_tests(backend, instance, instance.patch, image=image)
    if path is not None and before.resolved is not None and gold.resolved is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"before": before.to_json(), "gold": gold.to_json()}))
        tmp.replace(path)
    return _judge_validity(instance, before, gold)


def _judge_validity(instance: SWEInstance, before: SWEOutcome, gold: SWEOutcome) -> Validity:
    failed_before = set(before.pass_to_pass.get("failure", []))
    gold_p2p = gold.pass_to_pass.get("failure", [])
    offline = tuple(t for t in gold_p2p if t in failed_before)
    broken = tuple(t for t in gold_p2p if t not in failed_before)
    f2p_failed = gold.fail_to_pass.get("failure", [])
    if gold.resolved is None or before.resolved is None:
        why = f"not graded: gold: {gold.reason}; base: {before.reason}"
    elif f2p_failed:
        why = f"the gold patch fails {len(f2p_failed)} FAIL_TO_PASS test(s) here, e.g. {f2p_failed[0]}"
    elif broken:
        why = f"the gold patch breaks {len(broken)} PASS_TO_PASS test(s) that pass on the base, e.g. {broken[0]}"
    elif not before.fail_to_pass.get("failure"):
        why = "no FAIL_TO_PASS test fails on the base commit: the tests do not tell the patch apart here"
    else:
        why = ""
    return Validity(instance.instance_id, not why, before, gold, offline, broken, why)


__all__ = [
    "SWE_LIMITS",
    "SWE_STATE_LIMITS",
    "SWEOutcome",
    "Validity",
    "eval_script",
    "grade",
    "run_swe_tests",
    "swe_spec",
    "validate_instance",
]
