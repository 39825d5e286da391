"""The images of a docker-compose task's other services, built offline as the task's own image is.

Each service beside the client (`tasks/compose.py`) is its Dockerfile run by the same builder on the
same local stand-ins as the task image (`images/task_bases.py`, `images/build.py`), with build-time
registry access, its fetches from outside the registries refused and the task's tests and solution
left out (`oracle_files.without_oracle`: the client reaches the service, so it must not serve them).
It gets no test-tools layer (the tests run in the client). The image is tagged
`pivot-gym/task:<task>-<service>-<hash>` by a content hash of (Dockerfile, copied files, base ids,
builder version), labelled as a task image (`pivot-gym=task`, `pivot-gym.task`, `pivot-gym.service`),
so a second build reuses it and the task images' LRU bound (`terminal_bench.evict`) removes it too.

What it runs: the compose file's `entrypoint`/`command` when given, else the Dockerfile's CMD (or
ENTRYPOINT, whichever came last: the builder keeps one, in the image's `pivot-gym.cmd` label).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pivot_sandbox.contract.equivalents import registry_equivalent
from pivot_sandbox.contract.services import ServiceSpec
from pivot_sandbox.contract.spec import LABEL
from pivot_sandbox.errors import DockerfileError, TaskError
from pivot_sandbox.images import dockerfile as df
from pivot_sandbox.images.access import build_access
from pivot_sandbox.images.build import build
from pivot_sandbox.images.context_tar import checkout_mode
from pivot_sandbox.images.stock import image_exists
from pivot_sandbox.images.task_bases import prepare
from pivot_sandbox.tasks.compose import ComposeService
from pivot_sandbox.tasks.folders import TASK_REPO
from pivot_sandbox.tasks.oracle_files import without_oracle

if TYPE_CHECKING:
    import docker

SERVICE_BUILDER_VERSION = "2"  # 2: the folder a left-out or withheld copy of tests/ creates stays, empty


def service_images(
    client: docker.DockerClient,
    task_id: str,
    task_dir: Path,
    services: tuple[ComposeService, ...],
    *,
    force: bool = False,
    touch: Callable[[str], None] = lambda tag: None,
) -> tuple[tuple[ServiceSpec, ...], str]:
    """(the services' specs, "") with each image built or reused, or ((), why one cannot be built).

    `touch` marks an image used (the task images' LRU stamp).
    """
    specs = []
    for service in services:
        try:
            tag = service_image(client, task_id, task_dir, service, force=force)
        except (DockerfileError, TaskError) as e:
            return (), f"service {service.name!r}: {e}"
        touch(tag)
        command = service.command or _image_command(client, tag)
        if not command:
            return (), f"service {service.name!r}: neither the compose file nor its Dockerfile gives a command"
        specs.append(ServiceSpec(service.name, tag, service.env, command))
    return tuple(specs), ""


def service_image(
    client: docker.DockerClient, task_id: str, task_dir: Path, service: ComposeService, *, force: bool = False
) -> str:
    """Build one service's image (or reuse it by content hash); its tag.

    Raises:
        DockerfileError: a step failed or cannot run here (file and line named).
        TaskError: a base with no local stand-in, a fetch from outside the registries, the oracle copied.
    """
    plan = prepare(client, df.parse(service.dockerfile, service.where))
    access = build_access(client.images.get(plan.base).labels.get(f"{LABEL}.suite", "trixie"))
    instructions = [_equivalent(i) for i in plan.instructions]
    instructions, withheld, _ = without_oracle(task_dir, service.context, instructions)
    foreign = df.foreign_hosts(instructions, access.hosts)
    if foreign:
        host, ins = foreign[0]
        raise TaskError(f"{ins.where}: needs {host}, outside the registries")
    digest = _content_hash(service, instructions, plan.base_ids)
    tag = f"{TASK_REPO}:{task_id}-{service.name.lower()}-{digest[:16]}"
    if force or not image_exists(client, tag):
        labels = {f"{LABEL}.task": task_id, f"{LABEL}.service": service.name, **plan.labels}
        labels[f"{LABEL}.suite"] = client.images.get(plan.base).labels.get(f"{LABEL}.suite", "trixie")
        options = {"labels": labels, "rewrite": registry_equivalent, "withheld": withheld}
        build(client, instructions, service.context, plan.base, tag, access, **options, stage_base=plan.stage_base)
    return tag


def _equivalent(ins: df.Instruction) -> df.Instruction:
    """A RUN step with its fetches from outside the registries replaced by the registry's package.

    As `terminal_bench.equivalent_instruction` does for the task image (which imports this module).
    """
    if ins.keyword != "RUN":
        return ins
    heredocs = tuple(registry_equivalent(h) for h in ins.heredocs)
    return dataclasses.replace(ins, args=registry_equivalent(ins.args), heredocs=heredocs)


def _content_hash(service: ComposeService, instructions: list[df.Instruction], base_ids: str) -> str:
    """Hash of (builder version, Dockerfile, base ids, every file it copies with its mode)."""
    h = hashlib.sha256(json.dumps([SERVICE_BUILDER_VERSION, service.dockerfile, base_ids]).encode())
    for path in df.context_files(instructions, service.context):
        h.update(path.relative_to(service.context.resolve()).as_posix().encode() + b"\0")
        h.update(str(checkout_mode(path.stat().st_mode) & 0o777).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _image_command(client: docker.DockerClient, tag: str) -> tuple[str, ...]:
    """The Dockerfile's CMD or ENTRYPOINT, as the builder recorded it (its image's own is a shell)."""
    raw = client.images.get(tag).labels.get(f"{LABEL}.cmd") or ""
    try:
        found = json.loads(raw) if raw else []
    except ValueError:
        return ()
    return tuple(str(a) for a in found) if isinstance(found, list) else ()


__all__ = ["SERVICE_BUILDER_VERSION", "service_image", "service_images"]
