"""The build of a parsed Dockerfile: each step run in one build container, committed once.

The container is of the mapped base image and alone has the host network and the machine's registry
configuration mounted (`_access.BuildAccess`); the result is one committed image whose config carries
the Dockerfile's `ENV`, `WORKDIR` and `USER`, and no trace of the build access. Parsing is `images/dockerfile.py`.

A multi-stage Dockerfile: each stage the final one copies from runs in a build container of its own
on its own mapped base (`stage_base`), kept until the commit; `COPY --from=` copies out of it, or out
of a helper container holding what an image would (astral's uv image: PyPI's uv). `images/stages.py`
plans the stages and refuses what cannot be served.

Public API:
    build(client, instructions, context, base, tag, access, ...) -> BuildResult
    check_supported(instructions)   (a COPY --from an image no registry serves, a stage as a base: DockerfileError)
    api_timeout(api, seconds)   (a context manager: a long silent step, a large commit)
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import shlex
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pivot_sandbox.contract.spec import LABEL, OWNER
from pivot_sandbox.errors import DockerfileError
from pivot_sandbox.images.access import BuildAccess
from pivot_sandbox.images.context_tar import context_tar, heredoc_tar
from pivot_sandbox.images.dockerfile import _HEREDOC, IGNORED, Instruction, copy_sources, substitute
from pivot_sandbox.images.stages import Stage, plan_stages, retarget, uv_script, uv_version

# the build container's own process
IDLE = ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"]


@dataclass(frozen=True)
class BuildResult:
    """What `build` made: the image tag, its id, seconds it took, and the config it committed."""

    tag: str
    image_id: str
    seconds: float
    workdir: str
    user: str
    env: Mapping[str, str]
    copied_from: tuple[str, ...] = ()  # what the other stages and served images were (multi-stage builds)
    set_aside: Path | None = None  # the tar of the folder `build(set_aside=...)` took out of the image


class _Session:
    """The build container and the state the Dockerfile has set so far (env, working directory, user, shell)."""

    def __init__(self, client: Any, base: str, access: BuildAccess | None, labels: Mapping[str, str]) -> None:
        config = client.images.get(base).attrs.get("Config") or {}
        self.base, self.access = base, access
        self.env: dict[str, str] = dict(e.split("=", 1) for e in config.get("Env") or [] if "=" in e)
        self.args: dict[str, str] = {}
        self.workdir = config.get("WorkingDir") or "/"
        self.user = config.get("User") or "root"
        self.shell = ["/bin/sh", "-c"]
        self.cmd: list[str] | None = None
        self.labels = dict(labels)
        self.env_set: dict[str, str] = {}
        self.rewrite: Callable[[str], str] | None = None
        api = client.api
        host_config = api.create_host_config(
            network_mode="host" if access else "none",
            mounts=access.docker_mounts() if access else [],
            init=True,
        )
        self.id = api.create_container(
            base,
            IDLE,
            entrypoint=[],
            user="0",
            working_dir="/",
            labels={LABEL: "build", f"{LABEL}.owner": OWNER},
            host_config=host_config,
        )["Id"]
        api.start(self.id)
        self.api = api

    def run(
        self, argv: Sequence[str], *, user: str | None = None, timeout: float, cwd: str | None = None
    ) -> tuple[int, str]:
        """Run argv in the container (killed after `timeout` s); (exit code, last 2000 chars of output).

        Without `cwd` it runs in the Dockerfile's working directory, created first as docker does.
        """
        if cwd is None:
            self.run(["mkdir", "-p", self.workdir], user="0", timeout=30, cwd="/")
        wrapped = ["timeout", "-s", "KILL", str(int(timeout)), *argv]
        environment = {**self.args, **self.env}
        exec_id = self.api.exec_create(
            self.id, wrapped, user=user or self.user, workdir=cwd or self.workdir, environment=environment
        )["Id"]
        with api_timeout(self.api, timeout + 60):  # `timeout` kills the step itself; a silent step is no hang
            out = self.api.exec_start(exec_id, stream=False, demux=False) or b""
        code = self.api.exec_inspect(exec_id).get("ExitCode")
        text = out.decode(errors="replace")
        return (code if code is not None else -1), text[-2000:]

    def is_dir(self, path: str) -> bool:
        return self.run(["test", "-d", path], user="0", timeout=30, cwd="/")[0] == 0

    def remove(self) -> None:
        try:
            self.api.remove_container(self.id, force=True)
        except Exception:  # noqa: BLE001 - best effort: the label lets `pivot sandbox gc` find it later
            pass


# Committing a task image of several GB (torch and its CUDA wheels, MTEB) takes minutes on a busy
# machine; the client's default of 60 s read timeout gave up while the daemon was still writing.
COMMIT_TIMEOUT = 1800.0


_TIMEOUTS_LOCK = threading.Lock()
_RAISED: dict[int, list[Any]] = {}  # id(api) -> [timeout before the first raise, active raises, largest asked]


@contextlib.contextmanager
def api_timeout(api: Any, seconds: float) -> Iterator[None]:
    """Raise a docker API client's read timeout for the calls inside (a long silent step, a large commit).

    The client is shared by the backend's threads: the timeout goes back to its own value when the last
    of overlapping raises ends (a thread's request takes the timeout when it starts).
    """
    with _TIMEOUTS_LOCK:
        entry = _RAISED.setdefault(id(api), [api.timeout, 0, 0.0])
        entry[1] += 1
        entry[2] = max(entry[2], seconds)
        api.timeout = max(entry[0] or 0, entry[2])
    try:
        yield
    finally:
        with _TIMEOUTS_LOCK:
            entry[1] -= 1
            if entry[1] == 0:
                api.timeout = entry[0]
                del _RAISED[id(api)]


def _abs(workdir: str, path: str) -> str:
    return posixpath.normpath(path if path.startswith("/") else posixpath.join(workdir, path))


def _step(s: _Session, ins: Instruction, context: Path, step_timeout: float) -> list[str]:
    """Run one instruction in the session; returns the paths a COPY/ADD put in (none for the others)."""
    values = {**s.args, **s.env}
    kw = ins.keyword
    if kw == "RUN":
        _run(s, ins, step_timeout)
    elif kw in ("COPY", "ADD"):
        return _copy(s, ins, context, values)
    elif kw == "WORKDIR":
        s.workdir = _abs(s.workdir, substitute(ins.args.strip(), values))
        s.run(["mkdir", "-p", s.workdir], user="0", timeout=30, cwd="/")
    elif kw == "ENV":
        pairs = {k: substitute(v, values) for k, v in ins.pairs().items()}
        s.env.update(pairs)
        s.env_set.update(pairs)
    elif kw == "ARG":
        for name, default in ins.pairs().items():
            s.args.setdefault(name, substitute(default, values))
    elif kw == "USER":
        s.user = substitute(ins.args.strip(), values)
    elif kw == "SHELL":
        form = ins.json_form()
        if not form:
            raise DockerfileError(f"{ins.where}: SHELL needs the JSON array form")
        s.shell = form
    elif kw in ("CMD", "ENTRYPOINT"):
        s.cmd = ins.json_form() or [*s.shell, ins.args]
    elif kw == "LABEL":
        s.labels.update(ins.pairs())
    return []


def _run(s: _Session, ins: Instruction, step_timeout: float) -> None:
    """RUN: the exec form, a heredoc script, or the shell form with its heredoc bodies after the line."""
    form = ins.json_form()
    if form is not None:
        argv = form
    elif ins.heredocs and ins.args.strip().startswith("<<"):
        argv = [*s.shell, ins.heredocs[0]]  # `RUN <<EOT`: the body is the script
    else:
        # docker hands the shell the line followed by each body and its terminator
        names = [m.group(2) for m in _HEREDOC.finditer(ins.args)]
        argv = [
            *s.shell,
            ins.args + "".join(f"\n{body}{name}" for body, name in zip(ins.heredocs, names, strict=False)),
        ]
    # `--user=` is this builder's own flag (the test-tools layer runs as root whatever USER says)
    code, tail = s.run(argv, user=ins.flags.get("user") or None, timeout=step_timeout)
    if code != 0:
        last = tail.strip().splitlines()[-1][:200] if tail.strip() else ""
        reason = "timed out" if code in (124, 137) else f"exited {code}"
        raise DockerfileError(f"{ins.where}: RUN {ins.args[:80]!r} {reason}: {last}")


def _copy(s: _Session, ins: Instruction, context: Path, values: Mapping[str, str]) -> list[str]:
    """COPY/ADD from the build context (ADD also unpacks local tar archives), then `--chown`/`--chmod`.

    Returns the paths it put in the container (a folder source: each of its entries), and the folder
    it created for a file: what removing the copy takes. A folder a folder's copy created stays, empty
    (`tasks/oracle_files.py`: the runs list it).
    """
    kw = ins.keyword
    paths, dest = copy_sources(ins, context, values)
    dest_abs = _abs(s.workdir, dest)
    was_dir = s.is_dir(dest_abs)
    placed = [] if was_dir or any(p.is_dir() for p in paths) else [dest_abs]
    if ins.heredocs:
        s.api.put_archive(s.id, "/", heredoc_tar(dest_abs, ins.heredocs[0]))
    else:
        as_dir = dest.endswith("/") or len(paths) > 1 or was_dir or dest in (".", "./")
        for path in paths:
            entries = sorted(path.iterdir()) if path.is_dir() else [path]
            placed[:0] = [posixpath.join(dest_abs, e.name) if as_dir or path.is_dir() else dest_abs for e in entries]
        if as_dir or any(p.is_dir() for p in paths):
            s.run(["mkdir", "-p", dest_abs], user="0", timeout=30, cwd="/")
        else:
            s.run(["mkdir", "-p", posixpath.dirname(dest_abs)], user="0", timeout=30, cwd="/")
        s.api.put_archive(s.id, "/", context_tar(paths, dest_abs.lstrip("/"), as_dir, kw == "ADD", s.rewrite))
        for path in paths:
            if kw == "ADD" and path.is_file() and tarfile.is_tarfile(path):
                with open(path, "rb") as f:
                    s.run(["mkdir", "-p", dest_abs], user="0", timeout=30, cwd="/")
                    s.api.put_archive(s.id, dest_abs, f.read())
    _owner_and_mode(s, ins, dest_abs, values)
    return placed


def _owner_and_mode(s: _Session, ins: Instruction, dest_abs: str, values: Mapping[str, str]) -> None:
    """A COPY/ADD's `--chown` and `--chmod`, applied to what it put at `dest_abs`."""
    if ins.flags.get("chown"):
        s.run(["chown", "-R", substitute(ins.flags["chown"], values), dest_abs], user="0", timeout=120, cwd="/")
    if ins.flags.get("chmod"):
        s.run(["chmod", "-R", ins.flags["chmod"], dest_abs], user="0", timeout=120, cwd="/")


class _Sources:
    """The containers `COPY --from=` reads: the stages built so far, and helpers holding a served image's files."""

    def __init__(self, client: Any, stage_base: Callable[[str], tuple[str, BuildAccess | None]] | None) -> None:
        self.client, self.stage_base = client, stage_base
        self.by_ref: dict[str, _Session] = {}
        self.sessions: list[_Session] = []
        self.notes: list[str] = []

    def stage(self, stage: Stage) -> _Session:
        """A build container for a stage other than the final one, on the base its FROM maps to."""
        if self.stage_base is None:
            raise DockerfileError(f"{stage.frm.where}: a stage other than the last one needs its base (stage_base)")
        base, access = self.stage_base(stage.image)
        session = _Session(self.client, base, access, {})
        self.sessions.append(session)
        self.by_ref[stage.name] = self.by_ref[str(stage.index)] = session
        self.notes.append(f"stage {stage.name!r} ({stage.frm.where}): {stage.image} built on {base}")
        return session

    def container(self, ins: Instruction, asking: _Session) -> str:
        """The id of the container a `COPY --from=` reads (a served image: made now, on the asking stage's base)."""
        ref = ins.flags["from"].lower()
        if ref in self.by_ref:
            return self.by_ref[ref].id
        version = uv_version(ref)
        if version is None or asking.access is None:  # plan_stages refused other images before the build
            raise DockerfileError(f"{ins.where}: COPY --from={ref}: no stage or served image of that name")
        helper = _Session(self.client, asking.base, asking.access, {})
        self.sessions.append(helper)
        self.by_ref[ref] = helper
        code, tail = helper.run(["/bin/sh", "-c", uv_script(version)], timeout=900, cwd="/")
        if code != 0:
            raise DockerfileError(f"{ins.where}: COPY --from={ref}: uv {version} from PyPI failed: {tail[-300:]}")
        self.notes.append(f"{ref} ({ins.where}): uv {tail.strip().split()[-1]} from PyPI's uv wheel (/uv, /uvx)")
        return helper.id

    def remove(self) -> None:
        for session in self.sessions:
            session.remove()


def _copy_from(s: _Session, ins: Instruction, source: str, values: Mapping[str, str]) -> None:
    """COPY --from: each source path of the container `source` to where COPY puts it (root-owned unless --chown)."""
    import docker.errors

    form = ins.json_form()
    *srcs, dest = form if form is not None else shlex.split(substitute(ins.args, values))
    dest_abs = _abs(s.workdir, dest)
    as_dir = dest.endswith("/") or len(srcs) > 1 or s.is_dir(dest_abs)
    for src in srcs:
        try:
            with api_timeout(s.api, COMMIT_TIMEOUT):
                stream, _ = s.api.get_archive(source, _abs("/", src))
                data = retarget(stream, dest_abs, as_dir)
        except docker.errors.NotFound as e:
            raise DockerfileError(f"{ins.where}: COPY --from={ins.flags['from']}: {src!r} does not exist there") from e
        s.run(["mkdir", "-p", dest_abs if as_dir else posixpath.dirname(dest_abs)], user="0", timeout=30, cwd="/")
        with data:
            s.api.put_archive(s.id, "/", data.read())
    _owner_and_mode(s, ins, dest_abs, values)


def _remove_withheld(s: _Session, paths: Sequence[str]) -> None:
    """Remove what withheld copies put in (the folders they created last, once empty); a failure raises."""
    if not paths:
        return
    code, out = s.run(["rm", "-rf", "--", *paths], user="0", timeout=120, cwd="/")
    left = [p for p in paths if s.run(["test", "-e", p], user="0", timeout=30, cwd="/")[0] == 0]
    if code != 0 or left:
        raise DockerfileError(f"the withheld files could not be removed before the commit ({left or out})")


def _set_aside(s: _Session, folder: str, tar: Path) -> None:
    """Archive `folder` of the build container to `tar` (entries `<its name>/...`, written whole), then remove it."""
    part = tar.with_name(tar.name + ".part")
    try:
        part.parent.mkdir(parents=True, exist_ok=True)  # a fresh machine has no cache folder yet
        with api_timeout(s.api, COMMIT_TIMEOUT), part.open("wb") as out:
            for chunk in s.api.get_archive(s.id, folder)[0]:
                out.write(chunk)
        code, said = s.run(["rm", "-rf", "--", folder], user="0", timeout=120, cwd="/")
    except Exception as e:  # noqa: BLE001 - the engine's errors vary by version: named in the build's error
        part.unlink(missing_ok=True)
        raise DockerfileError(f"{folder} could not be set aside before the commit: {e}") from e
    if code != 0:
        part.unlink(missing_ok=True)
        raise DockerfileError(f"{folder} could not be removed before the commit: {said}")
    part.replace(tar)


def check_supported(instructions: Sequence[Instruction]) -> None:
    """Raise `DockerfileError` (file and line) for what the parser reads but this builder cannot run.

    A `COPY --from=` an image no registry here serves (only astral's uv image is: PyPI's uv), a FROM
    naming another stage (`images/stages.py`, `plan_stages`).
    """
    plan_stages(instructions)


def build(
    client: Any,
    instructions: Sequence[Instruction],
    context: Path,
    base: str,
    tag: str,
    access: BuildAccess | None,
    *,
    labels: Mapping[str, str] = (),
    step_timeout: float = 1800.0,
    progress: Callable[[Instruction], None] | None = None,
    rewrite: Callable[[str], str] | None = None,
    withheld: Sequence[Instruction] = (),
    stage_base: Callable[[str], tuple[str, BuildAccess | None]] | None = None,
    set_aside: tuple[str, Path] | None = None,
) -> BuildResult:
    """Run the instructions (FROM excluded: `base` is the image the last FROM maps to) and commit the result as `tag`.

    What the COPY/ADD steps in `withheld` put in (a task's solution a later step uses) is removed
    before the commit: the image is one layer over its base, so none of it holds those files.
    `set_aside` (folder, tar file): that folder is archived to the tar on this machine and removed
    before the commit (a task's test tools, which its agent never sees: `tasks/tests_venv.py`).

    The committed image has an empty ENTRYPOINT (sandbox containers choose their own command), the
    Dockerfile's CMD as a label, and ENV/WORKDIR/USER as the Dockerfile left them. `rewrite` is applied
    to the text files COPY/ADD put in (the caller rewrites RUN lines itself).

    A multi-stage Dockerfile: the stages the last one copies from run first, each in its own container
    on `stage_base(image its FROM names)` -> (local base, build access); unused stages are not run.
    What they were is in `BuildResult.copied_from` and the image's `pivot-gym.copied-from` label.

    Raises:
        DockerfileError: a step failed, or the Dockerfile is one the builder cannot run (`check_supported`);
            the message names the file, line and step.
    """
    stages = plan_stages(instructions)
    head = [i for i in instructions if i.keyword == "ARG" and not i.stage]  # the global ARGs, before the first FROM
    started = time.monotonic()
    sources = _Sources(client, stage_base)
    session: _Session | None = None
    try:
        for stage in stages[:-1]:
            _run_steps(sources.stage(stage), [*head, *stage.steps], context, step_timeout, progress, sources)
        session = _Session(client, base, access, {LABEL: "task", **dict(labels)})
        session.rewrite = rewrite
        steps = [*head, *stages[-1].steps]
        remove = _run_steps(session, steps, context, step_timeout, progress, sources, withheld)
        _remove_withheld(session, remove)
        if set_aside is not None:
            _set_aside(session, *set_aside)
        if sources.notes:
            session.labels[f"{LABEL}.copied-from"] = json.dumps(sources.notes)
        image_id = _commit(client, session, tag)
    finally:
        sources.remove()
        if session is not None:
            session.remove()
    seconds, env = time.monotonic() - started, dict(session.env_set)
    aside = set_aside[1] if set_aside else None
    return BuildResult(tag, image_id, seconds, session.workdir, session.user, env, tuple(sources.notes), aside)


def _run_steps(
    s: _Session,
    steps: Sequence[Instruction],
    context: Path,
    step_timeout: float,
    progress: Callable[[Instruction], None] | None,
    sources: _Sources,
    withheld: Sequence[Instruction] = (),
) -> list[str]:
    """Run one stage's steps in its session; returns what the `withheld` copies put in."""
    remove: list[str] = []
    for ins in steps:
        if ins.keyword in IGNORED:
            continue
        if progress:
            progress(ins)
        if ins.keyword == "COPY" and "from" in ins.flags:
            _copy_from(s, ins, sources.container(ins, s), {**s.args, **s.env})
            continue
        placed = _step(s, ins, context, step_timeout)
        if any(ins is w for w in withheld):
            remove += placed
    return remove


def _commit(client: Any, session: _Session, tag: str) -> str:
    """Commit the build container as `tag` with the config the Dockerfile left; returns the image id."""
    changes = [f"ENV {k}={json.dumps(v)}" for k, v in session.env_set.items()]
    changes += [f"WORKDIR {session.workdir}", f"USER {session.user}", "ENTRYPOINT []", 'CMD ["/bin/sh"]']
    # the build container's owner label would otherwise be copied into the image
    all_labels = {
        **session.labels,
        f"{LABEL}.owner": "",
        f"{LABEL}.cmd": json.dumps(session.cmd) if session.cmd else "",
    }
    changes += [f"LABEL {k}={json.dumps(v)}" for k, v in all_labels.items()]
    repo, _, version = tag.partition(":")
    with api_timeout(client.api, COMMIT_TIMEOUT):
        return client.api.commit(session.id, repository=repo, tag=version or "latest", changes=changes)["Id"]
