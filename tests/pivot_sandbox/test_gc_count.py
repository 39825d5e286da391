"""`pivot sandbox gc` prints what it really removed (issue 19 item 11).

Before the fix the command connected through a backend, whose first connection already swept
dead owners' leftovers, and then printed what its own second pass found: "removed 0 containers".

Other sessions share this Docker daemon and sweep dead owners' leftovers whenever one of their
backends connects, so the leftovers here belong to a live process and are removed by owner.
"""

import json
import socket
import subprocess

import docker
import pytest
from typer.testing import CliRunner

from pivot_cli import app
from pivot_sandbox.contract.spec import LABEL
from pivot_sandbox.docker.cleanup import GcReport, gc, removed_in_this_process

pytestmark = pytest.mark.docker


@pytest.fixture
def client(busybox):
    """A Docker client, with the busybox image these tests create containers from built."""
    try:
        c = docker.from_env()
        c.ping()
    except docker.errors.DockerException as e:
        pytest.fail(f"the Docker daemon is part of CI and must be reachable: {e}")
    return c


@pytest.fixture
def owner():
    """The owner label of a live process of this host (no other session's sweep touches its things)."""
    proc = subprocess.Popen(["sleep", "600"])
    yield f"{socket.gethostname()}:{proc.pid}"
    proc.kill()
    proc.wait()


def leftovers(client, owner: str) -> None:
    """Two containers and one snapshot image labelled as `owner`'s."""
    labels = {LABEL: "test-gc", f"{LABEL}.owner": owner}
    made = [client.containers.create("pivot-gym/busybox:1", "true", labels=labels) for _ in range(2)]
    made[0].commit(
        repository="pivot-gym/snapshot",
        tag=f"gc-test-{owner.rpartition(':')[2]}",
        conf={"Labels": {LABEL: "snapshot", f"{LABEL}.owner": owner}},
    )


def test_gc_counts_only_what_the_daemon_removed_and_keeps_a_process_total(client, owner):
    leftovers(client, owner)
    before = removed_in_this_process()
    report = gc(client, owner=owner)
    after = removed_in_this_process()
    assert report == GcReport(containers=2, images=1)
    assert (after.containers - before.containers, after.images - before.images) == (2, 1)
    assert not client.api.containers(all=True, filters={"label": f"{LABEL}.owner={owner}"})
    assert not client.images.list(filters={"label": f"{LABEL}.owner={owner}"})
    assert gc(client, owner=owner) == GcReport(0, 0)  # nothing left: nothing counted


def test_cli_gc_prints_what_this_process_removed_the_connection_sweep_included(client, owner):
    leftovers(client, owner)
    gc(client, owner=owner)  # stands in for the sweep a backend runs when it first connects
    swept = removed_in_this_process()
    result = CliRunner().invoke(app, ["sandbox", "gc", "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    total = removed_in_this_process()
    assert printed == total.to_json()
    assert printed["containers"] >= swept.containers >= 2 and printed["images"] >= swept.images >= 1


def test_the_rootfs_exports_of_gone_images_are_swept_and_live_or_recent_ones_stay(tmp_path, monkeypatch):
    """The namespace backend's exports are named by image id: once the image is gone, nothing asks for it again."""
    import os
    import time

    from pivot_sandbox.namespace.root import sweep_rootfs

    monkeypatch.setenv("PIVOT_CACHE_DIR", str(tmp_path))
    folder = tmp_path / "rootfs"
    for name in ("a" * 32, "b" * 32, "c" * 32):
        (folder / name / "root" / "etc").mkdir(parents=True)
    old = time.time() - 7200
    os.utime(folder / ("a" * 32), (old, old))  # gone from the engine, unused for two hours: removed
    os.utime(folder / ("b" * 32), (old - 100, old - 100))  # still an image of the engine: stays
    # "c": gone from the engine but used a moment ago (a live sandbox's lower layer): stays

    class Engine:
        class api:  # noqa: N801 - docker's low-level client shape
            @staticmethod
            def images(all: bool = False):  # noqa: A002 - docker's keyword
                return [{"Id": "sha256:" + c * 64} for c in "bde"]

    assert sweep_rootfs(Engine()) == 1
    assert sorted(p.name for p in folder.iterdir()) == ["b" * 32, "c" * 32]
    # past `keep`, the least recently used goes, unless used in the last minutes (a live sandbox's layer)
    for n, name in enumerate(("d" * 32, "e" * 32)):
        (folder / name / "root").mkdir(parents=True)
        os.utime(folder / name, (old + n, old + n))
    assert sweep_rootfs(Engine(), keep=2) == 2  # "b" (oldest use) and "d" went; "c" is in use
    assert sorted(p.name for p in folder.iterdir()) == ["c" * 32, "e" * 32]


def test_the_set_aside_test_venvs_of_gone_images_are_swept_and_live_or_recent_ones_stay(client, tmp_path, monkeypatch):
    """A task image's tests' venv lies beside it, by image id: evicted or pruned, its venv goes too."""
    import os
    import time

    from pivot_sandbox.tasks.harness import test_tools_tar
    from pivot_sandbox.tasks.tests_venv import sweep_test_tools

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    live = client.images.list()[0].id  # an image of this engine
    kept, gone, recent = test_tools_tar(live), test_tools_tar("sha256:" + "0" * 64), test_tools_tar("1" * 64)
    dead_build = kept.with_name(".building-1-ab.tar.part")  # a build that died while setting its venv aside
    old = time.time() - 7200
    for path in (kept, gone, recent, dead_build):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"tar")
    for path in (kept, gone, dead_build):
        os.utime(path, (old, old))
    # "recent": no image yet, written a moment ago (a build that committed after the engine was asked)
    assert sweep_test_tools(client) == 2
    assert sorted(p.name for p in kept.parent.iterdir()) == sorted([kept.name, recent.name])
