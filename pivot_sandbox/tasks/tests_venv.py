"""The tests' venv of a Terminal-Bench task image: its build steps, and the tar the build sets it aside in.

The venv (`harness.TESTS_VENV`) holds pytest and what run-tests.sh would install, fetched at build time
(the tests run with no network); the build sets it aside before its commit (`images/build.py`
`set_aside`), so the image holds none of it, and the test run gets it with the tests
(`verification.run_task_tests`). Its last step lists the pytest plugins the build registered
(`harness.PLUGINS_FILE`): the only ones the test run loads.

Public API:
    tools_steps(plan) -> (before, after)   Dockerfile text around the task's own steps
    tools_kept(client, tag) -> bool        whether this machine still has the image's set-aside venv
    sweep_test_tools(client, idle) -> int  the venvs of images gone from the engine, removed
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING

from pivot_core import least_recently_used, remove_entries
from pivot_sandbox.tasks.harness import PLUGINS_FILE, TESTS_VENV, TestPlan, test_tools_tar

if TYPE_CHECKING:
    import docker

_LIST_PLUGINS = (
    "import importlib.metadata as m; "
    "print('\\n'.join(sorted({e.value.split(':')[0].strip() for e in m.entry_points(group='pytest11')})))"
)


def tools_steps(plan: TestPlan) -> tuple[str, str]:
    """Dockerfile text of the test-tools layer (run as root, with build access): (before, after) the task's steps.

    The venv with pytest (and run-tests.sh's apt packages) comes before the Dockerfile's own steps, which
    may break the network or pip on purpose (broken-networking, broken-python). The rest of run-tests.sh's
    packages comes after them: the venv sees the image's own packages, so a torch the Dockerfile installed
    is not installed a second time (several GB).
    """
    lines = []
    if plan.apt:
        lines.append(
            "RUN --user=0 apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
            + " ".join(shlex.quote(p) for p in plan.apt)
        )
    pip = f"{TESTS_VENV}/bin/python -m pip install -q --disable-pip-version-check"
    first = [p for p in plan.pip if re.match(r"pytest\b", p)] or ["pytest"]
    rest = [p for p in plan.pip if p not in first]
    lines.append(
        f"RUN --user=0 python3 -m venv --system-site-packages {TESTS_VENV}"
        f" && {pip} {' '.join(shlex.quote(p) for p in first)}"
    )
    after = f"RUN --user=0 {pip} {' '.join(shlex.quote(p) for p in rest)}\n" if rest else ""
    # last: the plugins the image's build registered, the Dockerfile's installs included (none where its python
    # breaks): the only ones the test run loads (`harness.run_argv`)
    listing = f"{TESTS_VENV}/bin/python -c {shlex.quote(_LIST_PLUGINS)}"
    after += f"RUN --user=0 {listing} > {PLUGINS_FILE} 2>/dev/null || : > {PLUGINS_FILE}\n"
    return "\n".join(lines) + "\n", after


def tools_kept(client: docker.DockerClient, tag: str) -> bool:
    """Whether this machine still has the tests' venv the build of `tag` set aside (a cleared cache: built again)."""
    return test_tools_tar(client.images.get(tag).id).is_file()


def sweep_test_tools(client: docker.DockerClient, idle: float = 3600.0) -> int:
    """Remove the set-aside test venvs whose image is gone (evicted, pruned), once unused for `idle` s; how many.

    The wait spares a build that committed its image after the engine was asked (its venv is renamed
    to the image's id right after the commit) and a test run reading one; a build that died leaves a
    `.building-*` part, removed after the same wait.
    """
    folder = test_tools_tar("").parent
    if not folder.is_dir():
        return 0
    try:
        known = {str(row["Id"]).removeprefix("sha256:")[:32] for row in client.api.images(all=True)}
    except Exception:  # noqa: BLE001 - an engine that does not answer: keep everything
        return 0
    orphans = [e for e in folder.iterdir() if e.name.split(".")[0] not in known]
    return remove_entries(least_recently_used(orphans, 0, idle))
