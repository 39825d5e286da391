"""A container's filesystem change set, read from its overlay upper directory when this process can.

`docker diff` is not always exact. When the daemon cannot use its native overlay diff (here: for
containers of committed snapshot images), it compares the container's files with the image's by
size and modification time, and the image's times are whole seconds: a same-size edit made in the
same second as the file was written (`sed -i s/alpha/ALPHA/` right after the snapshot), or one
that keeps the time (`mv` over a sibling written in the same second, `cp -p`, `touch -r`), is not
reported. The verifier then saw an expert's edit in one run and not in the other, which took the
edited file out of every comparison.

Every path an action changed is in the container's upper directory: a copy-up, a new file, a
character device 0/0 for a deletion, an "opaque" directory for one that replaced a directory of
the image. When the daemon stores containers with overlay2 on this machine and this process may
read its folders (root, as CI runs), the change set comes from there, which is what the daemon's
native diff does; otherwise from `docker diff`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Any

ADDED_OR_CHANGED, DELETED = 0, 2
_OPAQUE = ("trusted.overlay.opaque", "user.overlay.opaque")


@dataclass(frozen=True)
class Layers:
    """Where a container's overlay layers are on this machine: its upper directory and the lower ones, top first."""

    upper: str
    lowers: tuple[str, ...]


def layers_of(container: Any) -> Layers | None:
    """The container's overlay layers, None when they cannot be read from here (not overlay2, not local, not root)."""
    try:
        driver = container.client.api.inspect_container(container.id)["GraphDriver"]
    except Exception:  # noqa: BLE001 - any failure means: use docker diff
        return None
    data = driver.get("Data") or {}
    upper, lowers = data.get("UpperDir"), tuple(p for p in (data.get("LowerDir") or "").split(":") if p)
    if driver.get("Name") != "overlay2" or not upper or not lowers:
        return None
    if not all(os.access(p, os.R_OK | os.X_OK) for p in (upper, *lowers)):
        return None
    return Layers(upper, lowers)


def _lower_stat(layers: Layers, path: str) -> os.stat_result | None:
    """The image's entry at `path` (the topmost layer that has one), None when absent or deleted."""
    for lower in layers.lowers:
        try:
            st = os.lstat(lower + path)
        except OSError:
            continue
        return None if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0 else st
    return None


def _lower_children(layers: Layers, path: str) -> set[str]:
    names: set[str] = set()
    for lower in layers.lowers:
        try:
            names.update(os.listdir(lower + path))
        except OSError:
            continue
    return names


def upper_changes(layers: Layers) -> list[tuple[str, int]]:
    """(path, kind) of every change in the upper directory; kind 0 added or changed, 2 deleted.

    A directory of the image is left out unless its mode or owner changed: it is there as the
    parent of a change, which its entries already show. (Docker also compares its modification
    time, to the second, so whether it lists the parent depended on when the action ran.)
    """
    out: list[tuple[str, int]] = []
    root = layers.upper
    for folder, dirs, files in os.walk(root):
        rel_folder = folder[len(root) :] or "/"
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(rel_folder, name)
            try:
                st = os.lstat(os.path.join(folder, name))
            except FileNotFoundError:
                continue  # removed while walking (a process that outlived its action, through docker exec)
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                out.append((path, DELETED))  # a whiteout
                continue
            if stat.S_ISDIR(st.st_mode):
                below = _lower_stat(layers, path)
                opaque = any(_xattr(os.path.join(folder, name), key) == b"y" for key in _OPAQUE)
                if opaque and below is not None:
                    # the directory replaced the image's: what the image had below it is gone
                    try:
                        present = set(os.listdir(os.path.join(folder, name)))
                    except OSError:
                        present = set()
                    out += [
                        (os.path.join(path, gone), DELETED) for gone in sorted(_lower_children(layers, path) - present)
                    ]
                if (
                    below is not None
                    and stat.S_ISDIR(below.st_mode)
                    and not opaque
                    and (below.st_mode, below.st_uid, below.st_gid) == (st.st_mode, st.st_uid, st.st_gid)
                ):
                    continue
            out.append((path, ADDED_OR_CHANGED))
    return out


def _xattr(path: str, key: str) -> bytes | None:
    try:
        return os.getxattr(path, key, follow_symlinks=False)
    except OSError:
        return None
