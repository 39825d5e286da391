"""The bases of a task's build: each stage it needs, on its local stand-in, and what the swap of an Ubuntu base changes.

`prepare(client, instructions)` is what a task build does before its steps run: the stages the build
needs (`images/stages.py`: unused stages out, a `COPY --from=` an image no registry serves refused
with its line), the stand-in of each one's FROM built or reused (`images/bases.py`), and the apt
steps of the stages whose Ubuntu base is built as Debian rewritten (`images/ubuntu_apt.py`: Ubuntu's
version pins dropped, names mapped). Every substitution is in `Prepared.notes` and `Prepared.labels`.

Public API:
    Prepared, prepare(client, instructions) -> Prepared
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pivot_sandbox.contract.spec import LABEL
from pivot_sandbox.images.access import BuildAccess, build_access
from pivot_sandbox.images.bases import ensure_base, swapped_release
from pivot_sandbox.images.dockerfile import Instruction
from pivot_sandbox.images.stages import needed, plan_stages
from pivot_sandbox.images.ubuntu_apt import debian_apt_steps

if TYPE_CHECKING:
    import docker


@dataclass(frozen=True)
class Prepared:
    """A task build's instructions and bases, once its stages are planned and their bases are there.

    Attributes:
        instructions: the needed stages' instructions (global ARGs first), apt steps rewritten for Debian.
        image: the image the last FROM names.
        base: its local stand-in; `note` how it differs.
        stage_bases: the other stages' FROM images -> their local stand-ins.
        base_ids: the ids of every stand-in used, last stage's first (for a content hash).
        notes: each substitution made beyond the base's own note (apt pins dropped, names mapped).
        stage_base: another stage's FROM image -> (its stand-in, build access): `build`'s `stage_base`.
    """

    instructions: list[Instruction]
    image: str
    base: str
    note: str
    stage_bases: Mapping[str, str] = field(default_factory=dict)
    base_ids: str = ""
    notes: tuple[str, ...] = ()
    stage_base: Callable[[str], tuple[str, BuildAccess | None]] | None = None

    @property
    def labels(self) -> dict[str, str]:
        """The image labels recording the substitutions: `from`, `base-note`, and `apt` when any."""
        out = {f"{LABEL}.from": self.image, f"{LABEL}.base-note": self.note}
        if self.notes:
            out[f"{LABEL}.apt"] = json.dumps(list(self.notes))
        return out


def prepare(client: docker.DockerClient, instructions: Sequence[Instruction]) -> Prepared:
    """Plan the stages, build or reuse each needed stage's base, rewrite Ubuntu apt steps for Debian.

    Raises:
        DockerfileError: a step or a `COPY --from=` the builder cannot run (file and line named).
        TaskError: a FROM image with no local stand-in.
    """
    stages = plan_stages(instructions)  # refused before any base is built
    kept = needed(instructions)
    last = stages[-1].image
    base, note = ensure_base(client, last)
    others = {s.image: ensure_base(client, s.image)[0] for s in stages[:-1]}
    swapped = {s.name: origin for s in stages if (origin := swapped_release(s.image))}
    kept, notes = debian_apt_steps(kept, swapped)
    ids = ",".join(client.images.get(t).id for t in [base, *others.values()])

    def stage_base(image: str) -> tuple[str, BuildAccess | None]:
        tag = others[image]
        return tag, build_access(client.images.get(tag).labels.get(f"{LABEL}.suite", "trixie"))

    return Prepared(kept, last, base, note, others, ids, tuple(notes), stage_base)


__all__ = ["Prepared", "prepare"]
