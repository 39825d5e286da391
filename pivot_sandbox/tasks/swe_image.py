"""SWE-bench instance images, built offline by the project's own builder in three cached layers.

1. **base** (`pivot-gym/swe-base:<hash>`): the stock Debian bookworm image (`images/stock.py`) with what
   SWE-bench's base image has for Python repositories (compilers, git, patch, locales) and the runtime
   libraries of a CPython built on bookworm. Built once per machine.
2. **environment** (`pivot-gym/swe-env:py<X.Y>-<hash>`): a CPython of the instance's minor version at
   `/opt/miniconda3/envs/testbed` (where SWE-bench's conda environment lies: the paths the recorded agent
   runs print), first on PATH, and the instance's pip pins from the registries. The interpreter comes
   from the machine: its pyenv versions (this machine kind has 2.7 and 3.6-3.13 under `$(pyenv root)`,
   built on bookworm), or a folder of `X.Y.Z` interpreters named by `$PIVOT_SWE_PYTHONS` or `pythons=`.
   No registry serves a CPython build (`uv python install` downloads from GitHub, unreachable here), and
   Debian has no 3.10. The interpreter's own site-packages is not copied (ensurepip starts a fresh pip).
   Pins resolve with pip's resolver; a conda export pip cannot resolve (xarray) is installed as the
   freeze it is, `--no-deps` (which one is written to `/opt/pivot-swe/pins-mode`). Shared by every
   instance with the same interpreter and pins.
3. **instance** (`pivot-gym/swe:<instance id>-<hash>`): the repository at its base commit in `/testbed`
   (`swe.checkout`: one commit, nothing of another instance's tree), SWE-bench's clean-diff commit
   ("SWE-bench") of that tree, then the spec's `pre_install` and `install` (with
   `SETUPTOOLS_SCM_PRETEND_VERSION` where the row gives one): `git diff` shows what an agent changed and
   the set-up's own edits, as in the recorded runs; root's `.bashrc` puts the environment first on PATH,
   as SWE-bench's `conda activate testbed` there does for a login shell, the repository's directories are
   777 as in SWE-bench's clone (those its reset recreated 755), and the servers the tests reach run from
   their own virtualenvs (`swe_services.py`).

Network (the machine's registries, `images/access.py`) reaches build steps only; tests run with none.
Each tag holds the hash of what the layer depends on (recipe, parent image id, interpreter, pins, bundle
commit, spec), so a change rebuilds it and anything else is reused.

Public API:
    swe_image(client, instance, *, pythons=None, force=False) -> SWEBuildReport
    find_python(minor, pythons=None) -> Path      (TaskError says where it looked)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pivot_sandbox.contract.spec import DEFAULT_PATH, LABEL
from pivot_sandbox.errors import DockerfileError, TaskError
from pivot_sandbox.images import dockerfile as df
from pivot_sandbox.images.access import build_access
from pivot_sandbox.images.build import build
from pivot_sandbox.images.stock import DEBIAN_TAG, build_debian_image, image_exists
from pivot_sandbox.tasks.swe import SWEInstance, checkout, removed_later, split_pins
from pivot_sandbox.tasks.swe_services import install_lines

if TYPE_CHECKING:
    import docker

RECIPE_VERSION = "1"
TESTBED = "/testbed"
ENV_PREFIX = "/opt/miniconda3/envs/testbed"
PINS_DIR = "/opt/pivot-swe"
PYTHONS_ENV = "PIVOT_SWE_PYTHONS"
BASE_REPO, ENV_REPO, INSTANCE_REPO = "pivot-gym/swe-base", "pivot-gym/swe-env", "pivot-gym/swe"
# SWE-bench's base image for Python repositories (build-essential, git, patch, locales, tzdata, libffi-dev)
# and the runtime libraries a pyenv CPython built on bookworm links against (ssl, sqlite, readline, ...).
# Not ca-certificates: the stock image has it, and an upgrade's postinst cannot replace the CA bundle the
# build mounts over it (`images/access.py`).
BASE_PACKAGES = (
    *("build-essential", "git", "patch", "locales", "tzdata", "libffi-dev", "procps"),
    *("libssl3", "libffi8", "libsqlite3-0", "libbz2-1.0", "liblzma5", "libreadline8", "libncursesw6"),
    *("libuuid1", "zlib1g", "libexpat1", "libgdbm6", "libnsl2", "libtirpc3", "libcrypt1"),
)
BUILD_ACCESS_SUITE = "bookworm"
PIP = "python -m pip install -q --no-cache-dir --disable-pip-version-check"
# Directories of the instances' trees that the repository's default branch no longer has: SWE-bench clones
# the branch's tip, runs `chmod -R 777`, then `git reset --hard <base commit>`, which recreates them with
# the umask's 755, as a recorded `ls -la` prints them. Those gone by the bundle's newest instance are found
# (`swe.removed_later`); this table names those gone since (requests moved its package to src/ in 2.32)
RECREATED_DIRS = {"psf/requests": ("requests",)}
CLEAN_DIFF_COMMIT = "RUN git commit --allow-empty -qam SWE-bench"


@dataclass(frozen=True)
class SWEBuildReport:
    """One instance's build: `status` "built", "cached" or "skipped" (with the one `reason`).

    Attributes:
        instance_id: the instance.
        status: "built" (its own layer was built now), "cached" or "skipped".
        image: the instance image's tag ("" when skipped).
        reason: why it was skipped.
        seconds: wall-clock seconds of the whole call (every layer built on the way).
        env_image: the environment image's tag.
        env_status: "built" or "cached".
        env_seconds: seconds the environment layer took (0 when cached).
        python: the interpreter's version (`3.9.18`), from the machine.
        dropped_pins: pins left out (backports the interpreter has in its standard library).
    """

    instance_id: str
    status: str
    image: str = ""
    reason: str = ""
    seconds: float = 0.0
    env_image: str = ""
    env_status: str = ""
    env_seconds: float = 0.0
    python: str = ""
    dropped_pins: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """JSON-ready dict (the bench's rows)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items() if v not in ("", ())}


def _pyenv_versions() -> Path | None:
    try:
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    return Path(root) / "versions" if root else None


def find_python(minor: tuple[int, int], pythons: Path | str | None = None) -> Path:
    """The machine's CPython of version `minor` (the highest patch release): its prefix folder.

    Looks in `pythons`, else `$PIVOT_SWE_PYTHONS`, else `$(pyenv root)/versions`; a folder named `X.Y.Z`
    with `bin/pythonX.Y` in it.
    """
    folder = Path(pythons) if pythons else Path(os.environ[PYTHONS_ENV]) if os.environ.get(PYTHONS_ENV) else None
    folder = folder or _pyenv_versions()
    found = []
    for cand in sorted(folder.iterdir()) if folder and folder.is_dir() else []:
        m = re.fullmatch(rf"{minor[0]}\.{minor[1]}\.(\d+)", cand.name)
        if m and (cand / "bin" / f"python{minor[0]}.{minor[1]}").is_file():
            found.append((int(m.group(1)), cand))
    if not found:
        raise TaskError(
            f"no CPython {minor[0]}.{minor[1]} in {folder} (pyenv's versions, or set {PYTHONS_ENV}): "
            f"install one there, e.g. `pyenv install {minor[0]}.{minor[1]}`"
        )
    return max(found)[1]


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _build(
    client: docker.DockerClient, text: str, context: Path, base: str, tag: str, labels: Mapping[str, str]
) -> float:
    """Run a generated Dockerfile with build-time registry access; the seconds it took."""
    instructions = df.parse(text, f"<{tag}>")
    access = build_access(BUILD_ACCESS_SUITE)
    result = build(client, instructions, context, base, tag, access, labels={LABEL: "task", **labels})
    return result.seconds


def swe_base(client: docker.DockerClient, force: bool = False) -> str:
    """The base image (layer 1), built on first use; its tag."""
    build_debian_image(client, DEBIAN_TAG)
    text = (
        f"FROM {DEBIAN_TAG}\n"
        "RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
        + " ".join(BASE_PACKAGES)
        + " && rm -rf /var/lib/apt/lists/*\n"
        "RUN sed -i 's/^# *en_US.UTF-8/en_US.UTF-8/' /etc/locale.gen && locale-gen >/dev/null\n"
    )
    tag = f"{BASE_REPO}:{_digest(RECIPE_VERSION, text, client.images.get(DEBIAN_TAG).id)}"
    if force or not image_exists(client, tag):
        _build(client, text, Path("/nonexistent"), DEBIAN_TAG, tag, {f"{LABEL}.swe": "base"})
    return tag


def _stage_python(prefix: Path, dest: Path) -> None:
    """Copy an interpreter's prefix without its site-packages (the machine's own packages) nor its test suite."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        here = Path(folder)
        if here.name == "site-packages":
            return names
        if here.name == "test" and here.parent.name.startswith("python"):
            return [n for n in names if n not in ("__init__.py", "support")]
        return []

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(prefix, dest, symlinks=True, ignore=ignore, copy_function=link_or_copy)


def _interpreter_id(prefix: Path, minor: tuple[int, int]) -> str:
    """The interpreter's identity for the cache: its version and the bytes of its binary and libpython."""
    h = hashlib.sha256(prefix.name.encode())
    for rel in (f"bin/python{minor[0]}.{minor[1]}", f"lib/libpython{minor[0]}.{minor[1]}.so.1.0"):
        path = prefix / rel
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def env_text(base: str, minor: tuple[int, int]) -> str:
    """The environment layer's Dockerfile (the build context holds `python/` and `pins/`)."""
    check = "import ssl, sqlite3, ctypes, lzma, bz2, zlib, readline"
    pins, fallback = f"{PINS_DIR}/pins.txt", f"{PINS_DIR}/pins-mode"
    return (
        f"FROM {base}\n"
        f"COPY python/ {ENV_PREFIX}/\n"
        f"COPY pins/ {PINS_DIR}/\n"
        f"ENV PATH={ENV_PREFIX}/bin:{DEFAULT_PATH}\n"
        f"RUN echo {ENV_PREFIX}/lib > /etc/ld.so.conf.d/pivot-swe-python.conf && ldconfig"
        f" && python{minor[0]}.{minor[1]} -c {shlex.quote(check)}\n"
        f"RUN python -m ensurepip --default-pip >/dev/null && {PIP} -r {PINS_DIR}/bootstrap.txt\n"
        # a conda export pip cannot resolve (conda-forge patched metadata) installs as the freeze it is
        f"RUN if [ -s {pins} ]; then {PIP} -r {pins} && echo resolved > {fallback}"
        f" || {{ {PIP} --no-deps -r {pins} && echo no-deps > {fallback}; }}; fi\n"
    )


def env_image(
    client: docker.DockerClient, instance: SWEInstance, pythons: Path | str | None = None, force: bool = False
) -> tuple[str, str, float, str]:
    """The environment image (layer 2) of the instance: (tag, "built" | "cached", seconds, python version)."""
    minor = instance.python_minor
    prefix = find_python(minor, pythons)
    pins = split_pins(instance, minor)
    base = swe_base(client)
    text = env_text(base, minor)
    key = _digest(RECIPE_VERSION, text, client.images.get(base).id, _interpreter_id(prefix, minor), asdict(pins))
    tag = f"{ENV_REPO}:py{minor[0]}.{minor[1]}-{key}"
    if not force and image_exists(client, tag):
        return tag, "cached", 0.0, prefix.name
    with tempfile.TemporaryDirectory(prefix="pivot-swe-env-") as tmp:
        context = Path(tmp)
        _stage_python(prefix, context / "python")
        (context / "pins").mkdir()
        (context / "pins" / "bootstrap.txt").write_text("".join(p + "\n" for p in pins.bootstrap))
        (context / "pins" / "pins.txt").write_text("".join(p + "\n" for p in pins.rest))
        labels = {f"{LABEL}.swe": "env", f"{LABEL}.python": prefix.name}
        seconds = _build(client, text, context, base, tag, labels)
    return tag, "built", seconds, prefix.name


def instance_text(env: str, instance: SWEInstance, recreated: tuple[str, ...] = ()) -> str:
    """The instance layer's Dockerfile (the build context holds `repo/`): SWE-bench's repository set-up.

    `recreated`: directories SWE-bench's reset made anew (`swe.removed_later`), 755 where the rest are 777.
    """
    pretend = instance.scm_pretend_version
    if pretend and "+" not in pretend:
        # setuptools_scm in SWE-bench's clone adds the commit (`5.4.1.dev593+ge6e300e72`, nine hex digits, as
        # the recorded runs print it); pytest prints its version in every session header
        pretend = f"{pretend}+g{instance.base_commit[:9]}"
    export = f"export SETUPTOOLS_SCM_PRETEND_VERSION={shlex.quote(pretend)}; " if pretend else ""
    remade = dict.fromkeys((*RECREATED_DIRS.get(instance.repo, ()), *recreated))
    lines = [
        f"FROM {env}",
        f"COPY repo/ {TESTBED}/",
        f"WORKDIR {TESTBED}",
        # SWE-bench clones with `chmod -R 777` before resetting to the base commit, which rewrites the files
        # (644, 755) and leaves the directories 777: what an agent's first `ls -la` prints
        f"RUN find {TESTBED} -type d -exec chmod 777 {{}} +",
        *(
            [
                f"RUN for d in {' '.join(shlex.quote(f'{TESTBED}/{d}') for d in remade)}; do"
                ' [ ! -d "$d" ] || find "$d" -type d -exec chmod 755 {} +; done'
            ]
            if remade
            else []
        ),
        "RUN git config --global user.email setup@swebench.config && git config --global user.name SWE-bench"
        f" && git config --global --add safe.directory {TESTBED}",
        # SWE-bench's image activates the environment in root's .bashrc, which a login shell reads (`~/.profile`):
        # mini-swe-agent runs each command as `bash -lc`, whose /etc/profile resets PATH before
        f"RUN echo 'export PATH={ENV_PREFIX}/bin:$PATH' > /root/.bashrc",
        # SWE-bench's clean-diff commit holds the base commit's tree: the spec's own edits of tracked files
        # (`pre_install`: sphinx's tox.ini and setup.py pins, astropy's setuptools pin) stay uncommitted, as
        # the recorded runs' `git status` and `git diff` show them (and their submissions hold them)
        *([CLEAN_DIFF_COMMIT] if instance.harness.pre_install else []),
        *(f"RUN {command}" for command in instance.harness.pre_install),
        f"RUN {export}{instance.harness.install}",
        *install_lines(instance),  # servers the tests reach (httpbin for old requests suites), apart from the env
        *([] if instance.harness.pre_install else [CLEAN_DIFF_COMMIT]),  # `install` edits no tracked file
    ]
    return "\n".join(lines) + "\n"


def _instance_layer(client: docker.DockerClient, instance: SWEInstance, env: str, force: bool) -> tuple[str, str]:
    """The instance image (layer 3) on `env`: (tag, "built" | "cached")."""
    text = instance_text(env, instance, removed_later(instance))
    key = _digest(RECIPE_VERSION, text, client.images.get(env).id, instance.bundle_commit, instance.base_tree)
    tag = f"{INSTANCE_REPO}:{instance.instance_id}-{key}"
    if not force and image_exists(client, tag):
        return tag, "cached"
    with tempfile.TemporaryDirectory(prefix="pivot-swe-repo-") as tmp:
        checkout(instance, Path(tmp) / "repo")
        labels = {f"{LABEL}.swe": "instance", f"{LABEL}.instance": instance.instance_id}
        _build(client, text, Path(tmp), env, tag, labels)
    return tag, "built"


def swe_image(
    client: docker.DockerClient, instance: SWEInstance, *, pythons: Path | str | None = None, force: bool = False
) -> SWEBuildReport:
    """Build the instance's image, or reuse each layer by its hash; an instance that cannot build says why.

    `force` rebuilds the environment and instance layers (the base only when its recipe changed).
    """
    started = time.monotonic()
    env, env_status, env_seconds, python = "", "", 0.0, ""
    try:
        env, env_status, env_seconds, python = env_image(client, instance, pythons, force)
        tag, status = _instance_layer(client, instance, env, force)
    except (DockerfileError, TaskError) as e:
        return SWEBuildReport(
            instance.instance_id,
            "skipped",
            reason=str(e),
            seconds=time.monotonic() - started,
            env_image=env,
            env_status=env_status,
            python=python,
        )
    return SWEBuildReport(
        instance.instance_id,
        status,
        tag,
        seconds=time.monotonic() - started,
        env_image=env,
        env_status=env_status,
        env_seconds=env_seconds,
        python=python,
        dropped_pins=split_pins(instance, instance.python_minor).dropped,
    )


__all__ = ["SWEBuildReport", "env_image", "find_python", "swe_base", "swe_image"]
