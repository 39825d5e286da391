"""The change set misses no edit: same-size edits right after the snapshot, `mv` over a same-second sibling.

`docker diff` compares such files by size and whole-second time against the snapshot image and
misses them about half of the time; the upper folder of the container always has them.
"""

from __future__ import annotations

import pytest

from pivot_sandbox import SandboxSpec

pytestmark = pytest.mark.docker

SETUP = "printf 'alpha\\nbeta\\n' > notes.txt && cp notes.txt notes.bak && sed -i 's/beta/BETA/' notes.txt"


def test_every_same_size_edit_is_seen(busybox):
    from pivot_sandbox.docker.backend import DockerBackend

    backend = DockerBackend(pool_size=1, parallelism=1)
    try:
        seen = []
        for i in range(4):  # a new snapshot each time, so each edit lands right after one
            spec = SandboxSpec(busybox, setup=(f": state {i}", SETUP))
            edit, restore, nothing = backend.run_group(
                spec, [], [["sed -i 's/alpha/ALPHA/' notes.txt"], ["mv notes.bak notes.txt"], ["cat notes.txt"]]
            )
            seen.append(
                (
                    edit.files.get("/app/notes.txt", "").startswith("sha256:"),
                    restore.files.get("/app/notes.bak") == "deleted"
                    and restore.files.get("/app/notes.txt", "").startswith("sha256:"),
                    nothing.files == {},
                )
            )
    finally:
        backend.close()
    assert seen == [(True, True, True)] * 4
