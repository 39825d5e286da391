"""Multi-stage Dockerfiles: the stages a build needs, and what `COPY --from=` takes from another stage or image.

The builder (`images/build.py`) runs each stage the final stage copies from (and those they copy
from) in a build container of its own, on its own mapped base, keeps that container until the final
stage is committed, and copies the named paths out of it (docker's `get_archive`, renamed here to
where COPY puts them, then `put_archive`). A stage nothing copies from is not built.

`COPY --from=` an image rather than a stage is served only where a registry has the same files:
astral's uv image (`ghcr.io/astral-sh/uv:<version>`, whose `/uv` and `/uvx` are the binaries of
PyPI's `uv` wheel of that version), installed by pip in a helper container with build access. Any
other image cannot be fetched here: `plan_stages` raises `DockerfileError` naming the image and the
line, before anything is built.

Public API:
    Stage, plan_stages(instructions) -> list[Stage]   (the stages to build, the final one last)
    needed(instructions) -> list[Instruction]         (the global ARGs and the needed stages' instructions)
    uv_version(image) -> str | None                   (the uv an image reference serves; None: not uv's image)
    uv_script(version), retarget(archive, dest, as_dir)
"""

from __future__ import annotations

import posixpath
import re
import shlex
import tarfile
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import IO

from pivot_sandbox.errors import DockerfileError
from pivot_sandbox.images.dockerfile import Instruction

# Matched on the image's path, never on a registry host name; a bare version tag (the distroless image).
_UV_IMAGE = re.compile(r"(^|/)astral-sh/uv(?::(\d+\.\d+\.\d+|latest))?(@sha256:[0-9a-f]+)?$")
UV_PATHS = ("/uv", "/uvx")
# where the helper container's pip puts the wheel (its `bin/` holds uv and uvx)
_UV_TARGET = "/tmp/pivot-uv"


@dataclass(frozen=True)
class Stage:
    """One build stage of a Dockerfile.

    Attributes:
        name: how `COPY --from=` names it (`Instruction.stage`: the `AS` name lower-case, else its number).
        index: its number (0 for the first FROM); `--from=<index>` names it too.
        image: the image its FROM names (with the global ARGs' defaults substituted by the caller).
        frm: its FROM instruction.
        steps: its instructions after the FROM.
        copies_from: the stages and images its `COPY --from=` steps name, as written (lower-case).
    """

    name: str
    index: int
    image: str
    frm: Instruction
    steps: tuple[Instruction, ...]
    copies_from: tuple[str, ...]


def uv_version(image: str) -> str | None:
    """The uv version astral's uv image `image` holds ("" for `latest` or no tag), None for any other image."""
    m = _UV_IMAGE.search(image.strip().lower())
    if m is None:
        return None
    return "" if m.group(2) in (None, "latest") else m.group(2)


def uv_script(version: str) -> str:
    """The helper container's script: PyPI's `uv` wheel by pip, its `uv` and `uvx` at `/` as astral's image has them."""
    spec = shlex.quote(f"uv=={version}" if version else "uv")
    return (
        f"PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-cache-dir --no-deps --target {_UV_TARGET} {spec}"
        f" && cp {_UV_TARGET}/bin/uv {_UV_TARGET}/bin/uvx / && rm -rf {_UV_TARGET} && /uv --version"
    )


def _split(instructions: Sequence[Instruction]) -> tuple[list[Instruction], list[list[Instruction]]]:
    """(the instructions before the first FROM, each stage's instructions from its FROM on), by position."""
    head: list[Instruction] = []
    stages: list[list[Instruction]] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            stages.append([ins])
        elif stages:
            stages[-1].append(ins)
        else:
            head.append(ins)
    return head, stages


def _stage(group: list[Instruction], index: int) -> Stage:
    frm = group[0]
    words = frm.args.split()
    image = words[0] if words else ""
    name = frm.stage or str(index)
    sources = tuple(i.flags["from"].lower() for i in group[1:] if i.keyword in ("COPY", "ADD") and "from" in i.flags)
    return Stage(name, index, image, frm, tuple(group[1:]), sources)


def _check_copy(ins: Instruction, known: dict[str, Stage]) -> None:
    """Raise for a `COPY --from=` the builder cannot serve: an image other than uv's, a later stage, a pattern."""
    ref = ins.flags["from"]
    if ins.keyword == "ADD":
        raise DockerfileError(f"{ins.where}: ADD takes no --from (COPY --from={ref} copies from a stage or image)")
    form = ins.json_form()
    sources = (form if form is not None else shlex.split(ins.args))[:-1]
    if ref.lower() not in known:
        if uv_version(ref) is None:
            raise DockerfileError(
                f"{ins.where}: COPY --from={ref}: the image {ref!r} cannot be fetched here (no image registry is "
                "reachable; a stage of this Dockerfile or astral's uv image, served from PyPI's uv, can be copied from)"
            )
        extra = [s for s in sources if posixpath.normpath("/" + s.lstrip("/")) not in UV_PATHS]
        if extra:
            raise DockerfileError(
                f"{ins.where}: COPY --from={ref}: only {' and '.join(UV_PATHS)} are served from PyPI's uv, not {extra}"
            )
    if any(c in s for s in sources for c in "*?["):
        raise DockerfileError(f"{ins.where}: COPY --from={ref} with a wildcard source is not supported by the builder")


def plan_stages(instructions: Sequence[Instruction]) -> list[Stage]:
    """The stages to build: the last one and every stage it copies from, transitively, in file order.

    Raises:
        DockerfileError: a `COPY --from=` an image no registry here serves, a stage copying from
            itself or a later one, a FROM naming an earlier stage; each names the file and line.
    """
    stages = [_stage(group, n) for n, group in enumerate(_split(instructions)[1])]
    if not stages:
        raise DockerfileError("no FROM instruction")
    known: dict[str, Stage] = {}
    for stage in stages:
        if stage.image.lower() in known:
            raise DockerfileError(
                f"{stage.frm.where}: FROM {stage.image} (a stage of this Dockerfile as a base) "
                "is not supported by the builder yet"
            )
        for ins in stage.steps:
            if ins.keyword in ("COPY", "ADD") and "from" in ins.flags:
                _check_copy(ins, known)
        known[stage.name] = known[str(stage.index)] = stage
    wanted, todo = set(), [stages[-1]]
    while todo:
        stage = todo.pop()
        if stage.index not in wanted:
            wanted.add(stage.index)
            todo += [known[ref] for ref in stage.copies_from if ref in known]
    return [s for s in stages if s.index in wanted]


def needed(instructions: Sequence[Instruction]) -> list[Instruction]:
    """The instructions the build runs: the global ARGs and the stages `plan_stages` keeps (unused stages out)."""
    head, groups = _split(instructions)
    keep = {s.index for s in plan_stages(instructions)}
    return [*head, *(ins for n, group in enumerate(groups) if n in keep for ins in group)]


def _renamed(name: str, top_is_dir: bool, dest: str, as_dir: bool) -> str:
    """Where an entry of `get_archive`'s tar (named from the copied path's base name) goes: COPY's rule."""
    head, _, rest = name.partition("/")
    if top_is_dir:  # a folder: its contents into dest
        target = posixpath.join(dest, rest) if rest else dest
    else:
        target = posixpath.join(dest, head) if as_dir else dest
    return target.lstrip("/")


def retarget(archive: Iterable[bytes], dest: str, as_dir: bool) -> IO[bytes]:
    """The tar docker's `get_archive` streams for one path, renamed to where COPY puts it and owned by root.

    `dest` is the absolute destination; a folder's contents go into it, a file into it when `as_dir`,
    else to it. Returns a file positioned at 0 (spooled to disk past 64 MiB).
    """
    raw = tempfile.SpooledTemporaryFile(max_size=64 << 20)
    for chunk in archive:
        raw.write(chunk)
    raw.seek(0)
    out = tempfile.SpooledTemporaryFile(max_size=64 << 20)
    with tarfile.open(fileobj=raw, mode="r|") as src, tarfile.open(fileobj=out, mode="w") as dst:
        top_is_dir: bool | None = None
        for member in src:
            if top_is_dir is None:
                top_is_dir = member.isdir()
            data = src.extractfile(member) if member.isfile() else None
            member.name = _renamed(member.name, top_is_dir, dest, as_dir)
            if member.islnk():
                member.linkname = _renamed(member.linkname, top_is_dir, dest, as_dir)
            member.uid = member.gid = 0
            member.uname = member.gname = "root"
            dst.addfile(member, data)
    out.seek(0)
    return out
