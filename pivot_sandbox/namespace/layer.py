"""A state the Docker backend replayed, taken over by the namespace backend: its snapshot's top layer.

A state whose replay needs registry access (`SandboxSpec.replay_access`: `pip install` in the
history) is replayed and committed by the Docker backend, which gives that replay the host network
(`DockerBackend.snapshot`). The namespace backend then takes only what the commit added: the
snapshot image's top layer, as the daemon's overlay2 driver stores it (`GraphDriver.Data.UpperDir`),
copied into the namespace snapshot's upper folder. Those are the very files Docker's own candidate
containers see as their top lower layer: deletions already overlay whiteouts (character devices
0:0), folders that replaced the image's already `trusted.overlay.opaque=y` (the driver converted
the layer tar's `.wh.NAME` / `.wh..wh..opq` entries when it applied the commit), with the shell
state in `/.pivot` (cwd, environment). Candidates then run on the stack Docker's containers have
(`docker_stack`): a copy of a container's init layer, that upper folder, the image's layer folders.

Why not the layer tar (`docker image save`) with the whiteouts converted here: the save writes
the whole image, every base layer too (hello-world: 230 MB in 2.8 s, against 8-12 ms for the
copy), and a conversion written here could differ from the driver's, where a copy checked entry
for entry cannot.

What is checked rather than assumed (a failure routes the state to Docker with the reason):
- the daemon runs on this machine and stores layers with overlay2, without user-namespace
  remapping or rootless mode (the layer's owners would be shifted ids);
- the snapshot lies on exactly the image whose root file system was exported (its layers but
  the last are that image's);
- the layer holds no overlay metadata but opaque marks (redirects, metacopy, origins mean
  something only under the driver's own mount options), no unconverted `.wh.` entry, and no
  device node but whiteouts (what opening one does is Docker's device cgroup's to say);
- the copy equals the layer entry for entry: type, mode, owner, size (a folder's too: `ls -l`),
  blocks (holes: `du`), link count and hard-link groups, modification time, symbolic link
  targets and every xattr.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pivot_sandbox.contract.spec import Json, SandboxSpec
from pivot_sandbox.contract.spec import labels as spec_labels
from pivot_sandbox.errors import StateRefused
from pivot_sandbox.namespace.box import Root
from pivot_sandbox.namespace.root import MOUNT_POINTS, remove_tree

if TYPE_CHECKING:
    import docker

    from pivot_sandbox.replay.session import LiveBackend

OPAQUE = "trusted.overlay.opaque"
# cp keeps these or fails (`-a` would ignore a failure to keep xattrs)
COPY = ["cp", "-dR", "--preserve=mode,ownership,timestamps,links,xattr", "--"]
# Docker writes a container's init layer through an overlay mount, so it carries the marks overlay
# leaves on an upper layer (the copy-up origins, "impure" folders, the file system's uuid); the
# kernel reads them on an upper layer only, and the init layer is a lower one in Docker's containers
# as here: they are not copied (and any other xattr there is)
MAX_LOWERDIR = 3500  # bytes of `lowerdir=`: the upper and work folders share the page
UPPER_MARKS = frozenset({"trusted.overlay.origin", "trusted.overlay.impure", "trusted.overlay.uuid"})
# what a copy must keep of one entry (`manifest`): kind, mode, uid, gid, size, device, mtime (ns),
# blocks, link count, hard-link group (its first path), link target, xattrs
Entry = tuple[int, int, int, int, int, int, int, int, int, str, str, tuple[tuple[str, bytes], ...]]


def daemon_refusal(client: docker.DockerClient, base_url: str | None) -> str | None:
    """Why the daemon's layers cannot be taken from here (None when they can)."""
    where = base_url or os.environ.get("DOCKER_HOST") or ""
    if where and not where.startswith("unix://"):
        return f"the Docker daemon is not on this machine ({where}): its layers cannot be read here"
    info = client.info()
    if info.get("Driver") != "overlay2":
        return f"the Docker daemon stores layers with {info.get('Driver')!r}, not overlay2"
    options = " ".join(info.get("SecurityOptions") or [])
    for mode in ("userns", "rootless"):
        if f"name={mode}" in options:
            return f"the Docker daemon runs with {mode}: its layers' owners are shifted ids"
    return None


def take_over(
    builder: LiveBackend,
    client: docker.DockerClient,
    spec: SandboxSpec,
    history: Sequence[str],
    root: Root,
    upper: Path,
) -> tuple[Root, dict[str, int]]:
    """Docker (`builder`) replays and commits the state; its top layer is copied to `upper`.

    Returns the root the snapshot lies on (`Root.stack`: a copy of a container's init layer, then
    the image's own layer folders, as Docker's candidate containers have them) and the
    milliseconds spent (`docker_replay_ms`, `layer_copy_ms`). Raises `StateRefused` with the reason.
    """
    start = time.perf_counter()
    _, image = builder.snapshot(spec, history)
    built = time.perf_counter()
    init = upper.with_name(upper.name + "-init")
    remove_tree(init)
    info = client.api.inspect_image(image)
    why = import_layer(info, root.layers, upper)
    stack, why = ((), why) if why else docker_stack(client, image, info, init, upper)
    spent = {
        "docker_replay_ms": round(1000 * (built - start)),
        "layer_copy_ms": round(1000 * (time.perf_counter() - built)),
    }
    if why:
        remove_tree(init)
        raise StateRefused(why)
    return replace(root, stack=stack), spent


def docker_stack(
    client: docker.DockerClient, image: str, info: Mapping[str, Json], init: Path, upper: Path
) -> tuple[tuple[Path, ...], str | None]:
    """(copy of a container's init layer, the image's base layer folders) below the snapshot's top layer.

    The directories Docker's overlay merges are then the same here: a merged folder reports a link
    count of 1 (`ls -l`), so a root file system flattened into one folder would show another count
    for every folder that more than one layer holds. The init layer (`/etc/hosts`, `/.dockerenv`,
    `/proc`, ...) is a created container's, copied, and given the mount points the sandbox binds
    over where no layer has them. `info`: the daemon's `inspect_image` of `image`.
    """
    data = (info.get("GraphDriver") or {}).get("Data") or {}
    base = tuple(Path(p) for p in (data.get("LowerDir") or "").split(":") if p)
    labels = spec_labels("init-layer")
    container = client.api.create_container(
        image, ["true"], labels=labels, host_config=client.api.create_host_config(network_mode="none")
    )["Id"]
    try:
        cdata = client.api.inspect_container(container)["GraphDriver"]["Data"]
        lowers = [p for p in (cdata.get("LowerDir") or "").split(":") if p]
        if (
            len(lowers) < 2
            or not lowers[0].endswith("-init/diff")
            or lowers[1:] != [data.get("UpperDir"), *map(str, base)]
        ):
            return (), f"a container of the snapshot does not lie on its layers ({lowers[:2]})"
        expected, why = manifest(lowers[0], UPPER_MARKS)
        copy = [COPY[0], COPY[1], "--preserve=mode,ownership,timestamps,links", "--", lowers[0], str(init)]
        proc = subprocess.run(copy, capture_output=True, text=True, check=False)
    finally:
        client.api.remove_container(container, force=True)
    if why or proc.returncode != 0 or manifest(str(init)) != (expected, None):
        return (), why or f"copying a container's init layer failed: {proc.stderr.strip()[-300:]}"
    if not all(os.access(p, os.R_OK | os.X_OK) for p in base):
        return (), "the image's layer folders are not readable here"
    if len(":".join(map(str, (init, upper, *base)))) > MAX_LOWERDIR:
        # mount options fit in one page (Docker mounts through short links for that reason)
        return (), f"the image has too many layers ({len(base)}) for one overlay mount's options"
    for path, kind in MOUNT_POINTS.items():
        if any(os.path.lexists(str(layer) + path) for layer in (init, upper, *base)):
            continue
        if kind == "dir":
            (init / path.lstrip("/")).mkdir()
        else:
            (init / path.lstrip("/")).touch()
    return (init, *base), None


def import_layer(info: Mapping[str, Json], base_layers: tuple[str, ...], target: Path) -> str | None:
    """Copy an image's top layer to `target` (which must not exist); why not, when it cannot be exact.

    `info`: the daemon's `inspect_image` of the image (its layers and its top layer's folder).
    """
    driver = info.get("GraphDriver") or {}
    layers = tuple((info.get("RootFS") or {}).get("Layers") or ())
    if not base_layers or layers[:-1] != base_layers:
        return "the snapshot does not lie on the image whose root file system was exported (rebuilt meanwhile?)"
    source = (driver.get("Data") or {}).get("UpperDir") or ""
    if driver.get("Name") != "overlay2" or not os.access(source, os.R_OK | os.X_OK):
        return f"the snapshot's top layer is not readable here ({driver.get('Name')}: {source or 'no folder'})"
    expected, why = manifest(source)
    if why:
        return why
    proc = subprocess.run([*COPY, source, str(target)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return f"copying the snapshot's top layer failed: {proc.stderr.strip()[-300:]}"
    copied, _ = manifest(str(target))
    if copied != expected:
        diff = sorted(set(expected.items()) ^ set(copied.items()))[:3]
        return f"the copied layer differs from Docker's (special files, links, xattrs, owners?): {diff}"
    return None


def manifest(root: str, unread: frozenset[str] = frozenset()) -> tuple[dict[str, Entry], str | None]:
    """Every entry under `root` (itself included) with what a copy must keep (but the xattrs `unread`); or why not."""
    out: dict[str, Entry] = {}
    first_of: dict[tuple[int, int], str] = {}  # inode -> the first path seen with it (hard-link groups)
    stack = [""]
    while stack:
        rel = stack.pop()
        full = root + rel
        st = os.lstat(full)
        kind = stat.S_IFMT(st.st_mode)
        if rel.rsplit("/", 1)[-1].startswith(".wh."):
            return out, f"the layer holds an unconverted whiteout {rel!r}"
        if kind in (stat.S_IFCHR, stat.S_IFBLK) and not (kind == stat.S_IFCHR and st.st_rdev == 0):
            # Docker's device cgroup decides what opening it does; no namespace sandbox has that list
            return out, f"the layer holds a device node {rel!r} ({os.major(st.st_rdev)}:{os.minor(st.st_rdev)})"
        xattrs = tuple(
            sorted((k, os.getxattr(full, k, follow_symlinks=False)) for k in _names(full) if k not in unread)
        )
        for key, value in xattrs:
            if key.startswith(("trusted.overlay.", "user.overlay.")) and (key, value) != (OPAQUE, b"y"):
                return out, f"the layer holds overlay metadata {key}={value!r} at {rel or '/'!r}"
        link = os.readlink(full) if kind == stat.S_IFLNK else ""
        group = ""
        if kind != stat.S_IFDIR:
            group = first_of.setdefault((st.st_dev, st.st_ino), rel)
        # what `ls -l`, `stat` and `du` show: a folder's size, a file's blocks (holes), links
        size = st.st_size if kind in (stat.S_IFREG, stat.S_IFLNK, stat.S_IFDIR) else 0
        blocks = st.st_blocks if kind == stat.S_IFREG else 0
        shown = (st.st_uid, st.st_gid, size, st.st_rdev, st.st_mtime_ns)
        out[rel or "/"] = (kind, stat.S_IMODE(st.st_mode), *shown, blocks, st.st_nlink, group, link, xattrs)
        if kind == stat.S_IFDIR:
            stack += [f"{rel}/{name}" for name in sorted(os.listdir(full), reverse=True)]
    return out, None


def _names(path: str) -> list[str]:
    try:
        return os.listxattr(path, follow_symlinks=False)
    except OSError:
        return []
