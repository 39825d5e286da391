"""The layer a Harbor task's test run gets and its agent never sees: test.sh's downloads, made beforehand.

`verifier_layer(client, task, image)` starts a container of the task's image with build-time
registry access (`images/access.py`), installs there what `test.sh` would fetch when it runs
(`harbor_plan.verifier_plan`): its apt packages from Debian, its `pip install` lines as written, uv
from PyPI where test.sh runs astral.sh's installer (placed as that installer places it: `uv`, `uvx`
and the `env` script in `$HOME/.local/bin`), and each of its `uv`/`uvx` commands once with the tool
asked only for `--version`, which fills uv's cache with the pinned packages and the environment.
The same uv commands then run again with `UV_OFFLINE=1`: a test run that would still need the
network (an interpreter `uvx -p` names that the image lacks, a package no registry serves) makes the
task "not verifiable offline", with uv's own words.

The container's change set (`docker diff`: what the steps added, changed and deleted, less the
package managers' caches and state, logs and scratch folders) is archived as a tar on this machine
(`cache_dir("harbor-layers")`, keyed by the image id, the plan and `LAYER_VERSION`). The task image
itself never holds any of it: the tar is unpacked into the test run's container after the agent is
done, with the tests (`harbor_verify.py`), as Harbor copies the tests in only then.

Public API:
    verifier_layer(client, task, image, *, force=False) -> VerifierLayer
    offline_env() -> dict          (what a test run gets so that uv and pip use the layer, never the network)
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shlex
import tarfile
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pivot_core import cache_dir, least_recently_used, remove_entries
from pivot_sandbox.contract.spec import LABEL, OWNER
from pivot_sandbox.images.access import build_access, pip_indexes, registry_hosts
from pivot_sandbox.images.build import IDLE, api_timeout
from pivot_sandbox.tasks.harbor_plan import VerifierPlan, verifier_plan

LAYER_VERSION = "1"
STEP_TIMEOUT = 1800.0
WARM = "/tmp/pivot-warm"  # where test.sh's uv commands are run once (a `uv venv .tb` made there, not in /app)
# what the layer leaves out: package managers' caches and state, logs, scratch, the build access's files
EXCLUDED = (
    *("/tmp", "/var/tmp", "/var/cache", "/var/lib/apt", "/var/lib/dpkg", "/var/log", "/run", "/proc", "/sys"),
    *("/dev", "/etc/ld.so.cache", "/etc/apt/sources.list", "/etc/pip.conf", "/etc/ssl/certs/ca-certificates.crt"),
)
_EXCLUDED_PARTS = ("/.cache/pip", "/.wget-hsts", "/__pycache__/")
# astral.sh's installer writes this `env` script beside uv (test.sh sources it)
UV_ENV_SCRIPT = """#!/bin/sh
# add binaries to PATH if they aren't added yet
case ":${PATH}:" in
    *:"$HOME/.local/bin":*)
        ;;
    *)
        export PATH="$HOME/.local/bin:$PATH"
        ;;
esac
"""


@dataclass(frozen=True)
class VerifierLayer:
    """A task's test-run layer, or why its tests cannot run offline.

    Attributes:
        tar: the archive to unpack at `/` before the test run; None when the task is not verifiable offline.
        problem: why not ("" when it is).
        user: the user test.sh runs as (`[verifier].user`, else the image's USER).
        home: that user's home in the image (where uv and its cache lie, as its installer puts them).
        owned: folders of the layer that are wholly its own (uv's cache and tools): removed before
            unpacking, so nothing an agent left in them remains.
        deleted: paths the steps deleted (a package pip replaced), removed before unpacking too.
        files: entries in the archive; bytes: its size; seconds: how long the build took.
        cached: the layer came from this machine's cache.
    """

    tar: Path | None
    problem: str = ""
    user: str = "root"
    home: str = "/root"
    owned: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    cached: bool = False
    apt: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (the cache's record, the bench's rows)."""
        out = asdict(self)
        out["tar"] = str(self.tar) if self.tar else None
        return out


def uv_index_env() -> dict[str, str]:
    """The index uv uses, the machine's pip index where it names one (uv reads no pip.conf); {} for PyPI itself.

    Read at run time, never stored: the same variables at build time and in the test run, since uv's
    cache keys what it fetched by index.
    """
    index, extras = pip_indexes()
    return {**({"UV_DEFAULT_INDEX": index} if index else {}), **({"UV_INDEX": " ".join(extras)} if extras else {})}


def uv_registry_env() -> dict[str, str]:
    """What uv needs to reach the registries through the machine's build-time access (`images/access.py`).

    The access mounts the machine's CA bundle as the system one, which uv trusts only with native TLS
    (it ships its own roots otherwise), and uv reads no pip.conf: the index comes from `uv_index_env`.
    For what runs with registry access only (the layer's build, the oracle's replay), never a candidate.
    """
    return {"UV_NATIVE_TLS": "1", **uv_index_env()}


def offline_env() -> dict[str, str]:
    """What the test run's environment gets: uv and pip use what the layer holds and never the network.

    pip is not told `--no-index`: a test may install from a package index the task itself serves on the
    loopback (pypi-server's `pip install --index-url http://localhost:8080/simple ...`), which no-index
    would ignore. A requirement the layer already satisfies needs no index, and a fetch from any other
    index fails at its first try (no retries) in the run's empty network.
    """
    return {"UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never", "PIP_RETRIES": "0", "PIP_TIMEOUT": "5", **uv_index_env()}


# the interpreter a uv command asks for (`uvx -p 3.13`, `uv venv --python 3.12`, `-p=3.11`)
_PYTHON_ASKED = re.compile(r"(?:^|\s)(?:-p|--python)[=\s]+(?:python|cpython-?)?(3\.\d+)\b")


def _steps(plan: VerifierPlan, home: str, user: str) -> list[tuple[str, str, dict[str, str]]]:
    """(what, shell script, extra environment) of each build step of the layer, in order."""
    env = {"HOME": home, "DEBIAN_FRONTEND": "noninteractive", **uv_registry_env()}
    steps = []
    if plan.apt:
        packages = " ".join(shlex.quote(p) for p in plan.apt)
        steps.append(
            (f"apt-get install {' '.join(plan.apt)}", f"apt-get update -qq && apt-get install -y -qq {packages}", env)
        )
    for command in plan.pip:
        steps.append((f"test.sh's {command[:80]!r}", f"cd /tmp && {command}", env))
    if plan.uv is not None:
        spec = shlex.quote(f"uv=={plan.uv}" if plan.uv else "uv")
        bin_dir = f"{home}/.local/bin"
        script = (
            f"PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-cache-dir --target /tmp/pivot-uv {spec}"
            f" && mkdir -p {bin_dir} && cp /tmp/pivot-uv/bin/uv /tmp/pivot-uv/bin/uvx {bin_dir}/"
            f" && printf '%s' {shlex.quote(UV_ENV_SCRIPT)} > {bin_dir}/env"
        )
        steps.append((f"uv {plan.uv or '(newest)'} from PyPI", script, env))
    for version in sorted({m.group(1) for step in plan.uv_steps for m in _PYTHON_ASKED.finditer(step)}):
        # uv would download an interpreter the image lacks from GitHub (python-build-standalone), which no
        # registry serves: said plainly here, instead of as uv's DNS error in the step below
        why = f"the image has no python{version}, which uv would download from GitHub (no registry serves it)"
        steps.append(
            (f"Python {version} (uv -p {version})", f"command -v python{version} || {{ echo '{why}'; exit 1; }}", env)
        )
    if plan.uv_steps:
        warm = "\n".join(["set -e", f". {home}/.local/bin/env 2>/dev/null || true", *plan.uv_steps])
        steps.append(("test.sh's uv commands", f"mkdir -p {WARM}/1 && cd {WARM}/1 && {warm}", env))
        offline = {**env, "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never"}
        steps.append(("test.sh's uv commands offline", f"mkdir -p {WARM}/2 && cd {WARM}/2 && {warm}", offline))
    if user not in ("root", "0"):
        steps.append(
            (
                "handing uv to the verifier's user",
                f"chown -R {shlex.quote(user)} {home}/.cache {home}/.local || true",
                env,
            )
        )
    return steps


class _Container:
    """The layer's build container: the task image with build-time registry access."""

    def __init__(self, client: Any, image: str) -> None:
        self.api = client.api
        suite = client.images.get(image).labels.get(f"{LABEL}.suite", "trixie")
        access = build_access(suite)
        host_config = self.api.create_host_config(network_mode="host", mounts=access.docker_mounts(), init=True)
        labels = {LABEL: "build", f"{LABEL}.owner": OWNER}
        self.id = self.api.create_container(
            image, IDLE, entrypoint=[], user="0", working_dir="/", labels=labels, host_config=host_config
        )["Id"]
        self.api.start(self.id)

    def sh(self, script: str, env: Mapping[str, str] = {}, timeout: float = 60.0) -> tuple[int, str]:  # noqa: B006
        """Run a shell script as root; (exit code, last 600 characters of its output)."""
        argv = ["timeout", "-s", "KILL", str(int(timeout)), "/bin/sh", "-c", script]
        exec_id = self.api.exec_create(self.id, argv, user="0", workdir="/", environment=dict(env))["Id"]
        with api_timeout(self.api, timeout + 60):
            out = self.api.exec_start(exec_id, stream=False, demux=False) or b""
        code = self.api.exec_inspect(exec_id).get("ExitCode")
        return (code if code is not None else -1), out.decode(errors="replace")[-600:]

    def remove(self) -> None:
        try:
            self.api.remove_container(self.id, force=True)
        except Exception:  # noqa: BLE001 - best effort: the label lets `pivot sandbox gc` find it later
            pass


def _excluded(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in EXCLUDED) or any(p in path for p in _EXCLUDED_PARTS)


def _collect(box: _Container, out: Path) -> tuple[int, int, tuple[str, ...]]:
    """Archive the container's change set (less `EXCLUDED`) to `out`: (entries, bytes, deleted paths)."""
    changes = box.api.diff(box.id) or []
    kept = sorted(c["Path"] for c in changes if c["Kind"] in (0, 1) and not _excluded(c["Path"]))
    deleted = tuple(sorted(c["Path"] for c in changes if c["Kind"] == 2 and not _excluded(c["Path"])))
    listing = "\0".join(p.lstrip("/") for p in kept).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("tmp/pivot-layer.list")
        info.size = len(listing)
        tar.addfile(info, io.BytesIO(listing))
    box.api.put_archive(box.id, "/", buf.getvalue())
    code, tail = box.sh("tar --null --no-recursion -C / -cf /tmp/pivot-layer.tar -T /tmp/pivot-layer.list", timeout=600)
    if code != 0:
        raise OSError(f"archiving the layer failed ({code}): {tail}")
    stream, _ = box.api.get_archive(box.id, "/tmp/pivot-layer.tar")
    with tempfile.TemporaryFile() as outer:
        for chunk in stream:
            outer.write(chunk)
        outer.seek(0)
        with tarfile.open(fileobj=outer) as wrapper:
            member = wrapper.extractfile("pivot-layer.tar")
            assert member is not None  # get_archive of a file: one regular member
            out.parent.mkdir(parents=True, exist_ok=True)
            with open(out, "wb") as f:
                while chunk := member.read(1 << 20):
                    f.write(chunk)
    return len(kept), out.stat().st_size, deleted


def _build(client: Any, image: str, plan: VerifierPlan, user: str, out: Path) -> VerifierLayer:
    """Run the plan's steps in a build container and archive what they changed (see the module docstring)."""
    started = time.monotonic()
    box = _Container(client, image)
    try:
        code, text = box.sh(f"getent passwd {shlex.quote(user)} | cut -d: -f6")
        home = (text.strip() if code == 0 else "") or "/root"
        for what, script, env in _steps(plan, home, user):
            code, tail = box.sh(script, env, STEP_TIMEOUT)
            if code != 0:
                last = " | ".join(tail.strip().splitlines()[-3:])[-300:]
                return VerifierLayer(None, f"{what} fails here ({code}): {last}", user, home, apt=plan.apt)
        files, size, deleted = _collect(box, out)
    finally:
        box.remove()
    owned = (f"{home}/.cache/uv", f"{home}/.local/share/uv") if plan.uv_steps else ()
    seconds = round(time.monotonic() - started, 1)
    return VerifierLayer(out, "", user, home, owned, deleted, files, size, seconds, apt=plan.apt)


# layers kept (LRU): each is what a task's tests install, 10 MB to 5 GB (torch for the torch tasks' tests);
# the TB2 bench over every folder left 18 GB of them
LAYERS_KEEP = 16
LAYER_IN_USE_SECONDS = 600.0


def sweep_layers(keep: int = LAYERS_KEEP) -> int:
    """Remove the least recently used test-run layers past `keep` (record and tar together); how many went."""
    folder = cache_dir("harbor-layers")
    if not folder.is_dir():
        return 0
    old = least_recently_used(folder.glob("*.json"), keep, LAYER_IN_USE_SECONDS)
    return remove_entries([p for record in old for p in (record.with_suffix(".tar"), record)]) // 2


def verifier_layer(client: Any, task: Any, image: str, *, force: bool = False) -> VerifierLayer:
    """The layer of `task`'s test run on `image` (its task image), built once and then read from the cache.

    A task whose tests reach a host beyond the registries, or whose uv commands still need the network
    after the layer is made, gets `tar=None` and the `problem`: it is not verifiable offline.
    """
    if task.tests.problem:
        return VerifierLayer(None, task.tests.problem)
    plan = verifier_plan(task.dir / "tests", registry_hosts())
    if plan.problem:
        return VerifierLayer(None, plan.problem, apt=plan.apt)
    config = client.images.get(image).attrs.get("Config") or {}
    user = (task.harbor.verifier_user if task.harbor else "") or config.get("User") or "root"
    payload = [LAYER_VERSION, client.images.get(image).id, plan.to_json(), user]
    key = hashlib.sha256(json.dumps(payload).encode()).hexdigest()[:20]
    record = cache_dir("harbor-layers", f"{task.task_id}-{key}.json")
    if not force and record.is_file():
        data = json.loads(record.read_text())
        tar = Path(data["tar"]) if data.get("tar") else None
        if tar is None or tar.is_file():
            for used in (record, tar) if tar else (record,):
                used.touch()  # recently used: the sweep keeps it
            fields = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k != "tar"}
            return VerifierLayer(tar, **{**fields, "cached": True})
    sweep_layers()
    layer = _build(client, image, plan, user, record.with_suffix(".tar"))
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(layer.to_json()))
    return layer


__all__ = ["UV_ENV_SCRIPT", "VerifierLayer", "offline_env", "uv_index_env", "uv_registry_env", "verifier_layer"]
