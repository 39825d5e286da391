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

import hashlib
import os
import stat
import sys
import time
from dataclasses import dataclass

ADDED_OR_CHANGED, DELETED = 0, 2
_OPAQUE = ("trusted.overlay.opaque", "user.overlay.opaque")


@dataclass(frozen=True)
class Layers:
    """Where a container's overlay layers are on this machine: its upper directory and the lower ones, top first."""

    upper: str
    lowers: tuple[str, ...]


@dataclass(frozen=True)
class UpperScan:
    """One bounded walk of a container's upper directory.

    Attributes:
        changes: (path, kind) of every change; kind 0 added or changed, 2 deleted.
        entries: every entry seen in the upper directory, changes or not (0: the container's
            files are exactly the image's, metadata included).
        root: the upper directory's own metadata (`root_state`); a change there is a change of `/`.
        over: why the walk stopped before the end (too many entries, out of time), else None.
    """

    changes: tuple[tuple[str, int], ...]
    entries: int
    root: tuple[int, ...]
    over: str | None = None


def root_state(layers: Layers) -> tuple[int, ...]:
    """Mode, owner and times of the upper directory itself: `touch`/`chmod` of `/` change them, not its entries."""
    st = os.lstat(layers.upper)
    return (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_ctime_ns)


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


def _listing(folder: str) -> list[tuple[str, os.stat_result]]:
    """(name, lstat) of a folder's entries, sorted; entries removed meanwhile are skipped."""
    out = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []  # removed while walking (a process that outlived its action, through docker exec)
    for name in names:
        try:
            out.append((name, os.lstat(os.path.join(folder, name))))
        except OSError:
            continue
    return out


def scan_upper(layers: Layers, max_entries: int, deadline: float) -> UpperScan:
    """Every change in the upper directory, walked with an explicit stack (any depth), within bounds.

    A directory of the image is left out of the changes unless its mode or owner changed: it is
    there as the parent of a change, which its entries already show, or because only its times
    changed (`touch`, a temporary file made and removed), which `entries` still counts, so the
    container is not reused. (Docker also compares modification times, to the second, so whether
    it lists the parent depended on when the action ran.) The walk stops after `max_entries`
    entries or at `deadline` (`time.monotonic()`), saying so in `over`.
    """
    out: list[tuple[str, int]] = []
    root, entries = layers.upper, 0
    stack = ["/"]
    while stack:
        rel_folder = stack.pop()
        for name, st in _listing(root + rel_folder if rel_folder != "/" else root):
            entries += 1
            if entries > max_entries:
                return UpperScan(tuple(out), entries, root_state(layers), f"more than {max_entries} changed paths")
            if entries % 256 == 0 and time.monotonic() > deadline:
                return UpperScan(tuple(out), entries, root_state(layers), "the change set took too long to read")
            path = os.path.join(rel_folder, name)
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                out.append((path, DELETED))  # a whiteout
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(path)
                if _image_folder_kept(layers, path, st, out):
                    continue
            out.append((path, ADDED_OR_CHANGED))
    return UpperScan(tuple(out), entries, root_state(layers))


def _image_folder_kept(layers: Layers, path: str, st: os.stat_result, out: list[tuple[str, int]]) -> bool:
    """True for a folder of the image with its mode and owner (left out); adds what an opaque folder hid."""
    below = _lower_stat(layers, path)
    if below is None:
        return False
    opaque = any(_xattr(layers.upper + path, key) == b"y" for key in _OPAQUE)
    if opaque:
        # the directory replaced the image's: what the image had below it is gone
        try:
            present = set(os.listdir(layers.upper + path))
        except OSError:
            present = set()
        out += [(os.path.join(path, gone), DELETED) for gone in sorted(_lower_children(layers, path) - present)]
        return False
    return stat.S_ISDIR(below.st_mode) and (below.st_mode, below.st_uid, below.st_gid) == (
        st.st_mode,
        st.st_uid,
        st.st_gid,
    )


def upper_changes(layers: Layers) -> list[tuple[str, int]]:
    """(path, kind) of every change in the upper directory (unbounded: tests and tools; see `scan_upper`)."""
    return list(scan_upper(layers, sys.maxsize, float("inf")).changes)


def describe(layers: Layers, path: str, hash_cap: int, deadline: float) -> str | None:
    """The content descriptor of a changed path, read from the upper directory; None past `deadline`.

    Called only when nothing runs in the container any more (the runner said so), so no entry can
    change under the walk; still, nothing is followed: a symbolic link is described by its target,
    a FIFO or device as "other", and only a regular file is opened (without following links).
    Mode and owner are part of it: `chmod +x f` and `touch f` leave the same bytes.
    """
    full = layers.upper + path
    try:
        st = os.lstat(full)
    except OSError:
        return "deleted"
    meta = f" {stat.S_IMODE(st.st_mode):o} {st.st_uid}:{st.st_gid}" + _xattrs(full)
    if stat.S_ISLNK(st.st_mode):
        return f"link:{os.readlink(full)}"
    if stat.S_ISDIR(st.st_mode):
        return "dir" + meta
    if not stat.S_ISREG(st.st_mode):
        return f"other:{_special_type(st)}" + meta
    if st.st_size > hash_cap:
        return f"size:{st.st_size}" + meta
    digest = hashlib.sha256()
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return "unreadable" + meta
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return "other" + meta
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            if time.monotonic() > deadline:
                return None
    return f"sha256:{digest.hexdigest()}:{st.st_size}" + meta


# `stat -c %F` names (what `_action.HASHER` prints in the container), so both readings agree
_SPECIAL_TYPES = (
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character special file"),
    (stat.S_ISBLK, "block special file"),
)


def _special_type(st: os.stat_result) -> str:
    """A FIFO, socket or device as `stat -c '%F %t:%T'` shows it (a device with its numbers, in hex)."""
    name = next((n for test, n in _SPECIAL_TYPES if test(st.st_mode)), "unknown")
    return f"{name} {os.major(st.st_rdev):x}:{os.minor(st.st_rdev):x}"


def _xattrs(path: str) -> str:
    """The extended attributes of a path (file capabilities, ACLs, `user.*`), each name with a digest of its value.

    `setcap cap_setuid+ep f` or `setfattr -n user.x` change no byte of the file; overlayfs's own
    (`trusted.overlay.*`: opaque folders, whiteouts, copy-up origins) are the layer's, not the action's.
    """
    try:
        names = sorted(n for n in os.listxattr(path, follow_symlinks=False) if not n.startswith("trusted.overlay."))
    except OSError:
        return ""
    shown = []
    for name in names:
        value = _xattr(path, name)
        shown.append(f"{name}={hashlib.sha256(value or b'').hexdigest()[:16]}")
    return f" xattr:{','.join(shown)}" if shown else ""


def _xattr(path: str, key: str) -> bytes | None:
    try:
        return os.getxattr(path, key, follow_symlinks=False)
    except OSError:
        return None
