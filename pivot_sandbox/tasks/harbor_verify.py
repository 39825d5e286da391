"""Harbor's verifier, run offline in a live sandbox session; the oracle and the untouched environment.

`run_harbor_tests(session, task, layer)` is Harbor's `Verifier.verify` (`harbor-format.md` §5) in a
session's sandbox, after the agent (or a candidate) is done:

1. the state is frozen (`Session.freeze`: what the agent left is stopped, what ran is started again)
   and the test run's own tools are checked against the change set (`verification._tampered_tools`:
   the interpreter, a shadowing bash or uv, pytest plugins, ...);
2. as root, `/tests` and `/logs/verifier` are removed, then the task's `tests/` is copied to `/tests`
   and the test-run layer (`harbor_layer.py`: what test.sh would download) is unpacked at `/`, the
   layer's own folders (uv's cache) emptied first; `/logs/verifier` is made anew, writable by all;
3. `test.sh` runs as the verifier's user in a fresh shell with the image's own environment (`env -i`,
   so nothing the agent exported reaches it) plus `[verifier].env` and `offline_env()`, from the
   working directory, as `(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1`: its exit status
   is ignored, as Harbor ignores it; it may run `[verifier].timeout_sec` (task.toml) in all, as in
   Harbor: past it, it is stopped and gives no reward, the limit named in the reason;
4. the reward is `reward.json`'s, else `reward.txt`'s (`harbor_plan.read_rewards`), and the per-test
   results of `ctrf.json` go into the details.

A task whose layer could not be made (`VerifierLayer.problem`) is reported "not verifiable offline"
and never scored (`HarborOutcome.verifiable` False, `reward` None).

`check_harbor_task` runs the tests on the untouched image (reward 0 expected) and after the oracle
(`solution/solve.sh` copied to /solution, as Harbor's oracle agent does, and run as the history's
one command with registry access, in `oracle_env`: `[solution].env` and uv's registry access: reward
1 expected).
"""

from __future__ import annotations

import io
import re
import shlex
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pivot_sandbox.contract.spec import DEFAULT_PATH, LABEL, SandboxSpec
from pivot_sandbox.errors import SandboxError
from pivot_sandbox.images.context_tar import checkout_mode
from pivot_sandbox.images.stock import image_exists
from pivot_sandbox.replay import box as ct
from pivot_sandbox.replay.session import Session, open_session
from pivot_sandbox.tasks.harbor_layer import VerifierLayer, offline_env, uv_registry_env, verifier_layer
from pivot_sandbox.tasks.harbor_plan import read_ctrf, read_rewards
from pivot_sandbox.tasks.harness import TESTS_DIR, TestOutcome, new_nonce, tests_tar
from pivot_sandbox.tasks.verification import _tampered_tools

LOGS = "/logs/verifier"
SOLUTION_DIR = "/solution"
READ_CAP = 1 << 20  # bytes of a reward, ctrf or log file read back
STDOUT_TAIL = 4000  # characters of test-stdout.txt kept in the details


@dataclass(frozen=True)
class HarborOutcome:
    """A Harbor test run's result.

    Attributes:
        reward: the reward (`harbor_plan.Rewards.reward`); None when none could be read or the task is
            not verifiable offline (`reason` says which).
        verifiable: False when the task's tests cannot run offline here: never a score.
        reason: what happened, in words.
        rewards: every reward entry (`{"reward": 1.0}` from reward.txt).
        details: `ctrf` (summary and per-test status), `test_stdout` (its end), `reward_source`.
    """

    reward: float | None
    verifiable: bool
    reason: str
    rewards: Mapping[str, float] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when the reward is 1 (or more)."""
        return self.reward is not None and self.reward >= 1.0

    def to_test_outcome(self) -> TestOutcome:
        """The outcome in the form Terminal-Bench's test runs report (`TestOutcome`), the float reward kept."""
        summary = (self.details.get("ctrf") or {}).get("summary") or {}
        counts = {k.upper(): int(v) for k, v in summary.items() if k in ("passed", "failed", "skipped")}
        return TestOutcome(self.passed, self.reward is not None, counts, self.reason, self.reward)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the bench's rows)."""
        return {
            "reward": self.reward,
            "verifiable": self.verifiable,
            "reason": self.reason,
            "rewards": dict(self.rewards),
            **dict(self.details),
        }


def _folder_tar(folder: Path, arcname: str) -> bytes:
    """A task folder (`solution/`) as a tar to unpack at `/`, owned by root with a checkout's modes."""

    def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        if info.isfile() or info.isdir():
            info.mode = checkout_mode(info.mode)
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(folder), arcname=arcname, filter=owned)
    return buf.getvalue()


def _root(box: ct.Box, script: str, timeout: float = 120.0) -> ct.RawRun:
    return ct.run(box, ["/bin/sh", "-c", script], user="0", timeout=timeout, output_cap=64 * 1024, keep=True)


def _read(box: ct.Box, path: str) -> str | None:
    """The text of a regular file in the sandbox (its first `READ_CAP` bytes), None when there is none."""
    script = 'test -f "$1" && ! test -L "$1" || exit 3; head -c "$2" "$1"'
    argv = ["/bin/sh", "-c", script, "sh", path, str(READ_CAP)]
    raw = ct.run(box, argv, user="0", timeout=30, output_cap=READ_CAP + 1024, keep=True)
    return raw.stdout.decode(errors="replace") if raw.exit_code == 0 else None


def deliver(box: ct.Box, task: Any, layer: VerifierLayer) -> str:
    """Put the tests at /tests and unpack the layer at `/` (as root); "" or why it failed."""
    assert layer.tar is not None  # the caller checked that the task is verifiable
    gone = " ".join(shlex.quote(p) for p in (TESTS_DIR, LOGS, *layer.owned, *layer.deleted))
    raw = _root(box, f"rm -rf -- {gone}")
    if raw.exit_code != 0:
        return f"clearing the test run's folders failed: {raw.stderr.decode(errors='replace')[-200:]}"
    box.sandbox.put_archive("/", tests_tar(task.dir / "tests"))
    box.sandbox.put_archive("/", layer.tar.read_bytes())
    ldconfig = " && (ldconfig 2>/dev/null || true)" if layer.apt else ""  # as apt's trigger does
    raw = _root(box, f"mkdir -p {LOGS} /logs/agent /logs/artifacts && chmod 777 {LOGS}{ldconfig}")
    return "" if raw.exit_code == 0 else f"making {LOGS} failed: {raw.stderr.decode(errors='replace')[-200:]}"


def harbor_argv(image_env: list[str], task: Any, layer: VerifierLayer, workdir: str, nonce: str) -> list[str]:
    """The test run's command: `(/tests/test.sh) > test-stdout.txt 2>&1` in a fresh shell with the image's env."""
    env = [e for e in image_env if "=" in e and not e.startswith(("PATH=", "HOME=", "BASH_ENV=", "ENV=", "LD_"))]
    path = next((e[5:] for e in image_env if e.startswith("PATH=")), DEFAULT_PATH)
    extra = {"DEBIAN_FRONTEND": "noninteractive", **offline_env(), **dict(task.harbor.verifier_env)}
    script = (
        f"cd {shlex.quote(workdir)} 2>/dev/null; chmod +x {TESTS_DIR}/test.sh; "
        f"({TESTS_DIR}/test.sh) > {LOGS}/test-stdout.txt 2>&1 </dev/null; "
        f'st=$?; echo; echo "{nonce} $st"'
    )
    fixed = [f"PATH={path}", f"HOME={layer.home}", *(f"{k}={v}" for k, v in extra.items())]
    return ["/usr/bin/env", "-i", *env, *fixed, "/bin/bash", "--noprofile", "--norc", "-c", script]


def _outcome(box: ct.Box, raw: ct.RawRun, nonce: str) -> HarborOutcome:
    """Read a finished test run: the nonce line, the reward files, ctrf.json and the log's end."""
    output = (raw.stdout + raw.stderr).decode(errors="replace")
    found = re.findall(rf"^{re.escape(nonce)} (\d+)$", output, re.M)
    log = _read(box, f"{LOGS}/test-stdout.txt") or ""
    details: dict[str, Any] = {"test_stdout": log[-STDOUT_TAIL:]}
    if raw.killed or not found:
        why = f"stopped by the sandbox ({raw.killed})" if raw.killed else "the test run did not finish"
        return HarborOutcome(None, True, why, details=details)
    rewards = read_rewards(_read(box, f"{LOGS}/reward.json"), _read(box, f"{LOGS}/reward.txt"))
    details |= {"ctrf": read_ctrf(_read(box, f"{LOGS}/ctrf.json")), "test_exit": int(found[-1])}
    details["reward_source"] = rewards.source
    if rewards.dropped:
        details["dropped"] = list(rewards.dropped)
    reason = rewards.error or f"reward {rewards.reward:g} ({rewards.source})"
    return HarborOutcome(rewards.reward, True, reason, dict(rewards.rewards), details)


def run_harbor_tests(session: Session, task: Any, layer: VerifierLayer, timeout: float | None = None) -> HarborOutcome:
    """The task's test.sh, as Harbor's verifier runs it, in the session's sandbox (see the module docstring)."""
    if layer.tar is None:
        return HarborOutcome(None, False, f"not verifiable offline: {layer.problem}")
    stopped = session.freeze()
    if stopped:
        return HarborOutcome(None, True, stopped)
    box, limits = session.live(), session.backend.limits
    tampered = _tampered_tools(box, limits)
    if tampered:  # as for Terminal-Bench's tests: a run whose tools the agent changed scores 0
        return HarborOutcome(0.0, True, f"the agent changed the test run's own tools: {tampered}")
    problem = deliver(box, task, layer)
    if problem:
        return HarborOutcome(None, True, problem)
    nonce = new_nonce()
    limit = timeout or task.tests.timeout  # Harbor's: test.sh as a whole, `[verifier].timeout_sec`, no grace
    raw = ct.run(
        box,
        harbor_argv(session.image_env(), task, layer, session.spec.workdir, nonce),
        user=layer.user,
        timeout=limit,
        output_cap=limits.output_cap,
        keep=True,  # the state's servers keep running for what the tests ask them
    )
    outcome = _outcome(box, raw, nonce)
    if raw.killed == "timeout":  # Harbor's VerifierTimeoutError: no reward, the limit named
        where = "" if timeout else f" ([verifier].timeout_sec of {task.harbor.path})"
        return replace(outcome, reason=f"test.sh ran past its {limit:g} s{where}: stopped, no reward")
    return outcome


def run_harbor_in_session(session: Session, task: Any, timeout: float | None = None) -> HarborOutcome:
    """`run_harbor_tests` with the layer of the session's image (made on first use, then from the cache).

    What `verification.run_task_tests` (the `task_tests` verifier, the terminal episode env) runs for
    a Harbor task.
    """
    layer = verifier_layer(session.backend.client, task, session.spec.image)
    return run_harbor_tests(session, task, layer, timeout)


def _solution_tar(client: Any, task: Any, image: str) -> bytes:
    """The task's `solution/` as a tar for /solution, solve.sh made to run on the image.

    On an Ubuntu (or bookworm) image built on trixie, solve.sh's apt installs are rewritten as the image's
    build had its own (`images/ubuntu_apt.on_debian`: the release's version pins dropped, names mapped), as `pivot
    synthesize` rewrites the oracle's commands; elsewhere the folder goes as it is.
    """
    import shutil
    import tempfile

    from pivot_sandbox.errors import DockerfileError
    from pivot_sandbox.images.bases import swapped_release
    from pivot_sandbox.images.ubuntu_apt import on_debian

    folder = task.dir / "solution"
    origin = swapped_release((client.images.get(image).labels or {}).get(f"{LABEL}.from") or "")
    solve = folder / "solve.sh"
    if not origin or not solve.is_file():
        return _folder_tar(folder, SOLUTION_DIR.lstrip("/"))
    try:
        text, notes = on_debian(solve.read_text(errors="replace"), "solution/solve.sh", origin)
    except DockerfileError:  # a package Debian lacks: the script as written, its apt step says so in the log
        notes = []
    if not notes:
        return _folder_tar(folder, SOLUTION_DIR.lstrip("/"))
    with tempfile.TemporaryDirectory(prefix="pivot-solution-") as tmp:
        copy = Path(tmp) / "solution"
        shutil.copytree(folder, copy, symlinks=True)
        (copy / "solve.sh").write_text(text)
        return _folder_tar(copy, SOLUTION_DIR.lstrip("/"))


def oracle_image(client: Any, task: Any, image: str) -> str:
    """`image` with the task's `solution/` at /solution (what Harbor's oracle agent uploads), committed once.

    On an Ubuntu task built on Debian, solve.sh's apt installs are rewritten for Debian (`_solution_tar`).
    """
    import hashlib

    solution = _solution_tar(client, task, image)
    repo, _, name = image.partition(":")
    tag = f"{repo}:{name}-oracle-{hashlib.sha256(solution).hexdigest()[:12]}"
    if image_exists(client, tag):
        return tag
    api = client.api
    labels = {LABEL: "build"}
    cid = api.create_container(image, ["true"], entrypoint=[], user="0", labels=labels)["Id"]
    try:
        api.put_archive(cid, "/", solution)
        api.commit(cid, repository=repo, tag=tag.partition(":")[2], changes=[f"LABEL {LABEL}=task", 'CMD ["/bin/sh"]'])
    finally:
        api.remove_container(cid, force=True)
    return tag


def oracle_env(task: Any) -> dict[str, str]:
    """The environment of the oracle's `solve.sh`: Harbor's (`[solution].env`) and uv's registry access.

    The oracle runs as history with the machine's registry access (`SandboxSpec.replay_access`: the system
    CA bundle mounted, pip's index configured); uv trusts its own CA roots and reads no pip.conf, so a
    `uv run`/`uv pip` of `solve.sh` gets `UV_NATIVE_TLS=1` and the machine's index (`uv_index_env`), as
    the test-run layer's build does. Candidates never run with any of it.
    """
    return {"DEBIAN_FRONTEND": "noninteractive", **uv_registry_env(), **dict(task.harbor.solution_env)}


def oracle_command(task: Any) -> str:
    """Harbor's oracle run of `solve.sh`, from the working directory, its output to /logs/agent/oracle.txt."""
    env = oracle_env(task)
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (
        f"mkdir -p /logs/agent && chmod +x {SOLUTION_DIR}/solve.sh && "
        f"(env {assigns} {SOLUTION_DIR}/solve.sh) > /logs/agent/oracle.txt 2>&1; echo oracle exited $?"
    )


def harbor_tests_at(
    backend: Any, spec: SandboxSpec, history: list[str], task: Any, layer: VerifierLayer
) -> HarborOutcome:
    """The Harbor test run at the state after `history` (a session of `backend`, closed after)."""
    try:
        session = open_session(backend, spec, history)
    except SandboxError as e:
        return HarborOutcome(None, True, f"the state could not be built: {e}")
    try:
        outcome = run_harbor_tests(session, task, layer)
        agent_log = _read(session.live(), "/logs/agent/oracle.txt") if history else None
    finally:
        session.close()
    if agent_log is None:
        return outcome
    return replace(outcome, details={**outcome.details, "agent_log": agent_log[-STDOUT_TAIL:]})


def check_harbor_task(backend: Any, task: Any, image: str, layer: VerifierLayer, workdir: str, user: str) -> dict:
    """Tests on the untouched image and after the oracle: `{untouched, oracle}` outcomes (oracle None: no solve.sh)."""
    spec = SandboxSpec(image=image, workdir=workdir, user=user or "root", shell="/bin/bash", replay_access=True)
    untouched = harbor_tests_at(backend, spec, [], task, layer)
    if not (task.dir / "solution" / "solve.sh").is_file() or layer.tar is None:
        return {"untouched": untouched, "oracle": None}
    oracle_spec = replace(spec, image=oracle_image(backend.client, task, image))
    return {
        "untouched": untouched,
        "oracle": harbor_tests_at(backend, oracle_spec, [oracle_command(task)], task, layer),
    }


__all__ = [
    "HarborOutcome",
    "check_harbor_task",
    "deliver",
    "harbor_argv",
    "oracle_command",
    "oracle_env",
    "oracle_image",
    "run_harbor_in_session",
    "run_harbor_tests",
    "harbor_tests_at",
]
