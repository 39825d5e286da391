"""What a build's COPY, ADD and here-document steps put into the build container: tars made of the context.

Files keep the modes a git checkout of the task folder gives them (`checkout_mode`), whatever the
copy of the folder on this machine has; small text files may be rewritten on the way (`rewritten`).

Public API:
    context_tar(paths, dest, dest_is_dir, add, rewrite) -> bytes   (a tar to unpack at `/`)
    heredoc_tar(dest, body) -> bytes
    checkout_mode(mode) -> int
    rewritten(path, rewrite) -> bytes | None
"""

from __future__ import annotations

import contextlib
import io
import posixpath
import stat
import tarfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def rewritten(path: Path, rewrite: Callable[[str], str] | None) -> bytes | None:
    """The bytes `rewrite` makes of a small text file, None when it leaves the file as it is."""
    if rewrite is None or not path.is_file() or path.stat().st_size > 1_000_000:
        return None
    try:
        text = path.read_text()
    except (UnicodeDecodeError, OSError):
        return None
    new = rewrite(text)
    return new.encode() if new != text else None


def checkout_mode(mode: int) -> int:
    """The permission bits a git checkout of the task's folder gives a file or folder: 0755 or 0644.

    A task folder is a git tree upstream, and git keeps only whether the owner may execute; a copy
    of it elsewhere (a read-only share, another umask) must not make the image's files read-only or
    group-writable where the task's own image has them 0644 (an agent's `ls -la`, a write as a
    non-root user, the task's tests of modes all see the difference).
    """
    kind = stat.S_IFMT(mode)
    return kind | (0o755 if kind == stat.S_IFDIR or mode & stat.S_IXUSR else 0o644)


def context_tar(
    paths: Sequence[Path], dest: str, dest_is_dir: bool, add: bool, rewrite: Callable[[str], str] | None = None
) -> bytes:
    """A tar to unpack at `/`: files and folders of the context placed at `dest` as docker COPY places them.

    `rewrite` is applied to the text files (`_equivalents.registry_equivalent`: a script's fetch from
    outside the registries replaced by the registry's package).
    """
    buf = io.BytesIO()

    def put(path: Path, arcname: str) -> None:
        info = tar.gettarinfo(str(path), arcname=arcname)
        if info.isfile() or info.isdir():
            info.mode = checkout_mode(info.mode)
        data = rewritten(path, rewrite) if info.isfile() else None
        if data is None:
            with open(path, "rb") if info.isfile() else contextlib.nullcontext() as f:
                tar.addfile(info, f)
            return
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in paths:
            if path.is_dir():
                for sub in sorted(path.rglob("*")):
                    put(sub, posixpath.join(dest, sub.relative_to(path).as_posix()))
                continue
            if add and tarfile.is_tarfile(path):
                continue  # extracted by the caller
            put(path, posixpath.join(dest, path.name) if dest_is_dir else dest)
    return buf.getvalue()


def heredoc_tar(dest: str, body: str) -> bytes:
    """A tar to unpack at `/` holding one file at `dest`: a `COPY <<EOF` here-document's body."""
    buf = io.BytesIO()
    data = body.encode()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(dest.lstrip("/"))
        info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
