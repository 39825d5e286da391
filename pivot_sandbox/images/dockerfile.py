"""A Dockerfile, read offline: its instructions, the files they copy, the hosts they reach.

No image registry is reachable, so `docker build` cannot resolve `FROM` and BuildKit is not on every
machine; the steps are few (`RUN`, `COPY`/`ADD`, `WORKDIR`, `ENV`, `ARG`, `USER`, `SHELL`, `CMD`,
`ENTRYPOINT`, `LABEL`, `EXPOSE`), so the project parses them here and runs them itself (`images/build.py`).

Public API:
    parse(text, path) -> list[Instruction]           (DockerfileError names file and line)
    foreign_hosts(instructions, allowed) -> list[(host, Instruction)]
    copy_sources(ins, context, values), context_files(instructions, context)
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from pivot_sandbox.errors import DockerfileError

_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)[\"']?([A-Za-z_][A-Za-z0-9_]*)[\"']?")
_URL = re.compile(r"\b(?:https?|git|ftp)://([A-Za-z0-9.-]+)")
_GIT_SSH = re.compile(r"\bgit@([A-Za-z0-9.-]+):")
KNOWN = {"FROM", "RUN", "COPY", "ADD", "WORKDIR", "ENV", "ARG", "USER", "SHELL", "CMD", "ENTRYPOINT", "LABEL"}
IGNORED = {"EXPOSE", "VOLUME", "HEALTHCHECK", "STOPSIGNAL", "MAINTAINER", "ONBUILD"}


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction.

    Attributes:
        keyword: upper-case instruction name.
        args: the text after the keyword (continuations joined, flags removed).
        flags: `--name=value` flags (e.g. `chown`, `from`, `platform`).
        line: 1-based line of the instruction in its file.
        path: the file it came from (for error messages).
        heredocs: bodies of `<<NAME` here-documents, in order.
    """

    keyword: str
    args: str
    flags: Mapping[str, str] = field(default_factory=dict)
    line: int = 0
    path: str = "Dockerfile"
    heredocs: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """`path:line` for messages."""
        return f"{self.path}:{self.line}"

    def json_form(self) -> list[str] | None:
        """The exec (JSON array) form of the arguments, None for the shell form."""
        text = self.args.strip()
        if not text.startswith("["):
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return None
        return [str(v) for v in value] if isinstance(value, list) else None


def _logical_lines(text: str, path: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """(first line, instruction text, heredoc bodies): continuations joined, comments and blanks dropped."""
    lines = text.splitlines()
    out: list[tuple[int, str, tuple[str, ...]]] = []
    i = 0
    while i < len(lines):
        start, raw = i + 1, lines[i]
        i += 1
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = [raw]
        while parts[-1].rstrip().endswith("\\") and i < len(lines):
            parts[-1] = parts[-1].rstrip()[:-1]
            while i < len(lines) and lines[i].lstrip().startswith("#"):
                i += 1  # comments inside a continuation are dropped by docker too
            if i < len(lines):
                parts.append(lines[i])
                i += 1
        joined = " ".join(p.strip() for p in parts)
        bodies = []
        takes_heredocs = joined.split(maxsplit=1)[0].upper() in ("RUN", "COPY", "ADD")
        for m in _HEREDOC.finditer(joined) if takes_heredocs else ():
            body: list[str] = []
            while i < len(lines) and (lines[i].strip() if m.group(1) else lines[i]) != m.group(2):
                body.append(lines[i].lstrip("\t") if m.group(1) else lines[i])
                i += 1
            if i >= len(lines):
                raise DockerfileError(f"{path}:{start}: here-document <<{m.group(2)} is never closed")
            i += 1
            bodies.append("\n".join(body) + "\n")
        out.append((start, joined, tuple(bodies)))
    return out


def parse(text: str, path: str = "Dockerfile", fragment: bool = False) -> list[Instruction]:
    """The instructions of a Dockerfile; an unknown or malformed one raises `DockerfileError` with its line.

    A `fragment` (steps appended to another Dockerfile) has no FROM.
    """
    out = []
    for line, joined, bodies in _logical_lines(text, path):
        keyword, _, rest = joined.strip().partition(" ")
        keyword = keyword.upper()
        if keyword not in KNOWN | IGNORED:
            raise DockerfileError(f"{path}:{line}: unknown instruction {keyword!r}")
        flags = {}
        rest = rest.strip()
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            name, _, value = flag[2:].partition("=")
            flags[name] = value
            rest = rest.strip()
        out.append(Instruction(keyword, rest, flags, line, path, bodies))
    froms = [i for i in out if i.keyword == "FROM"]
    if len(froms) != (0 if fragment else 1):
        where = froms[1].where if len(froms) > 1 else f"{path}:1"
        raise DockerfileError(f"{where}: expected one FROM, found {len(froms)} (multi-stage builds are not supported)")
    return out


def substitute(text: str, values: Mapping[str, str]) -> str:
    """`$NAME`, `${NAME}`, `${NAME:-default}` and `${NAME:+alt}` as docker expands them in non-RUN instructions."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        op, arg = m.group(3), m.group(4) or ""
        value = values.get(name, "")
        if op == ":-":
            return value or arg
        if op == ":+":
            return arg if value else ""
        return value

    return re.sub(r"\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:[-+])([^}]*))?\})", one, text)


def _pairs(text: str, where: str) -> dict[str, str]:
    """`ENV`/`LABEL`/`ARG` arguments: `k=v k2="v 2"` or the legacy `ENV k v` form."""
    try:
        tokens = shlex.split(text)
    except ValueError as e:
        raise DockerfileError(f"{where}: cannot split {text[:60]!r}: {e}") from e
    if tokens and "=" not in tokens[0]:
        name, _, value = text.strip().partition(" ")
        return {name: value.strip()}
    out = {}
    for token in tokens:
        name, eq, value = token.partition("=")
        out[name] = value if eq else ""
    return out


def hosts_in(text: str, allowed: frozenset[str]) -> list[str]:
    """Host names of URLs (and `git@host:` remotes) in `text` that are not among the registries in `allowed`."""
    out = []
    for host in _URL.findall(text) + _GIT_SSH.findall(text):
        host = host.lower().rstrip(".")
        # placeholders (`http://CONTAINER_IP:8080`), localhost and addresses are no outside host
        if not re.fullmatch(r"(?:[a-z0-9-]+\.)+[a-z]{2,}", host) or host.endswith(".local"):
            continue
        if host not in allowed and not any(host.endswith("." + a) for a in allowed) and host not in out:
            out.append(host)
    return out


# Downloads whose host no URL names: a model or data set by its hub id.
HUB_DOWNLOADS = (
    re.compile(
        r"from_pretrained|load_dataset|snapshot_download|hf_hub_download|huggingface-cli|SentenceTransformer\("
        r"|\bmteb\s+run\b.*\s-m\s"
    ),
    "huggingface.co",
)


def implicit_hosts(text: str) -> list[str]:
    """Hosts a text fetches from without naming them (a hub model or data set), as `hosts_in` would list them."""
    pattern, host = HUB_DOWNLOADS
    return [host] if pattern.search(text) else []


def foreign_hosts(instructions: Sequence[Instruction], allowed: frozenset[str]) -> list[tuple[str, Instruction]]:
    """Hosts that RUN/ADD steps name beyond the registries in `allowed` (the build cannot reach them)."""
    out = []
    for ins in instructions:
        if ins.keyword in ("RUN", "ADD"):
            text = ins.args + "".join(ins.heredocs)
            out += [(host, ins) for host in hosts_in(text, allowed) + implicit_hosts(text) if host not in allowed]
    return out


def copy_sources(ins: Instruction, context: Path, values: Mapping[str, str]) -> tuple[list[Path], str]:
    """(local sources, destination) of a COPY/ADD; a source outside the context or missing raises."""
    form = ins.json_form()
    parts = form if form is not None else shlex.split(substitute(ins.args, values))
    if ins.heredocs:
        return [], parts[-1] if parts else ""
    if len(parts) < 2:
        raise DockerfileError(f"{ins.where}: {ins.keyword} needs a source and a destination")
    *srcs, dest = parts
    root = context.resolve()
    paths: list[Path] = []
    for src in srcs:
        if urlparse(src).scheme in ("http", "https"):
            raise DockerfileError(f"{ins.where}: ADD of a URL ({urlparse(src).hostname}) needs the network")
        pattern = src.lstrip("/")
        matches = sorted(root.glob(pattern)) if any(c in pattern for c in "*?[") else [root / pattern]
        for path in matches:
            resolved = path.resolve()
            if resolved != root and root not in resolved.parents:
                raise DockerfileError(f"{ins.where}: {src!r} lies outside the build context")
            if not resolved.exists():
                raise DockerfileError(f"{ins.where}: {src!r} is not in the task folder")
            paths.append(resolved)
    return paths, dest


def context_files(instructions: Sequence[Instruction], context: Path) -> list[Path]:
    """Every local file COPY/ADD reads (for the content hash), in a stable order."""
    files: set[Path] = set()
    values: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword in ("ENV", "ARG"):
            values.update(_pairs(ins.args, ins.where))
        if ins.keyword in ("COPY", "ADD") and "from" not in ins.flags:
            for path in copy_sources(ins, context, values)[0]:
                files.update([path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()])
    return sorted(files)
