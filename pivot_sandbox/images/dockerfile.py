"""A Dockerfile, read offline: its instructions, the files they copy, the hosts they reach.

No image registry is reachable, so `docker build` cannot resolve `FROM` and BuildKit is not on every
machine; the steps are few (`RUN`, `COPY`/`ADD`, `WORKDIR`, `ENV`, `ARG`, `USER`, `SHELL`, `CMD`,
`ENTRYPOINT`, `LABEL`, `EXPOSE`), so the project runs them itself (`images/build.py`).

The reading is the `dockerfile-parse` library's (`DockerfileParser.structure`): instructions and
their lines, line continuations, comments (inside a continuation too), the `# escape=` directive
(`# syntax=` is a comment to it, as to this builder); ENV/LABEL pairs are its `extract_key_values`,
ARG words its `WordSplitter`, a FROM's stage name its `image_from`. Around it, small steps that the
library does not take (checked by tests/pivot_sandbox/test_dockerfile_parse.py):

- here-documents (`RUN <<EOF` ... `EOF`, BuildKit's syntax): the library reads a body's lines as
  instructions of their own (`line one` becomes an instruction `LINE`). Each body is cut out of the
  text before (its lines left blank, so that line numbers hold) and kept on its instruction; the text
  is read again after each cut, since what followed the body was read wrongly.
- `args`: the library joins a continuation's lines verbatim (`a && <escape>` then `    b` gives `a &&     b`);
  here they are stripped and joined with one space, as this module always did (the builder's steps,
  the hosts found and the tests read them so), and the leading `--name=value` flags go to `flags`.
- a text that ends inside a continuation: the library drops that last instruction, so a blank
  line is added at the end.
- checks that are the builder's, not a parser's: an unknown instruction, a Dockerfile without FROM
  or with a step before it other than ARG, a fragment with one, a stage name used twice, an ENV or
  LABEL word that is no `name=value`, an unclosed quote; each `DockerfileError` names file and line.

Multi-stage Dockerfiles are read (`Instruction.stage`, `COPY --from=NAME` in `flags["from"]`); the
builder runs the stages the last one needs (`images/stages.py`). The library is imported on first use: the minimal
install (`pip install pivot-gym`, no extras) imports this module (`images.build`) but never reads a
Dockerfile, which only a sandbox with Docker does; `dockerfile-parse` is in the `sandbox` extra.

Public API:
    parse(text, path, fragment=False) -> list[Instruction]   (DockerfileError names file and line)
    substitute(text, values), hosts_in(text, allowed), implicit_hosts(text)
    foreign_hosts(instructions, allowed) -> list[(host, Instruction)]
    copy_sources(ins, context, values), context_files(instructions, context)
"""

from __future__ import annotations

import io
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlparse

from pivot_sandbox.errors import DockerfileError

_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)[\"']?([A-Za-z_][A-Za-z0-9_]*)[\"']?")
_URL = re.compile(r"\b(?:https?|git|ftp)://([A-Za-z0-9.-]+)")
_GIT_SSH = re.compile(r"\bgit@([A-Za-z0-9.-]+):")
KNOWN = {"FROM", "RUN", "COPY", "ADD", "WORKDIR", "ENV", "ARG", "USER", "SHELL", "CMD", "ENTRYPOINT", "LABEL"}
IGNORED = {"EXPOSE", "VOLUME", "HEALTHCHECK", "STOPSIGNAL", "MAINTAINER", "ONBUILD"}
# the instructions whose arguments may open here-documents (BuildKit's)
_TAKES_HEREDOCS = ("RUN", "COPY", "ADD")


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
        stage: the build stage it belongs to, as `COPY --from=` names it: its FROM's `AS` name
            (lower-case, as docker compares them), else the stage's number ("0", "1", ...); ""
            before the first FROM (the global ARGs) and in a fragment.
    """

    keyword: str
    args: str
    flags: Mapping[str, str] = field(default_factory=dict)
    line: int = 0
    path: str = "Dockerfile"
    heredocs: tuple[str, ...] = ()
    stage: str = ""

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

    def pairs(self) -> dict[str, str]:
        """The names and values an ENV, LABEL or ARG sets (`_pairs`)."""
        return _pairs(self.args, self.where, self.keyword)


def _library() -> tuple[ModuleType, ModuleType]:
    """(`dockerfile_parse.parser`, `dockerfile_parse.util`), imported on first use (the minimal install lacks it)."""
    try:
        from dockerfile_parse import parser, util
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            "reading a Dockerfile needs the dockerfile-parse package: pip install 'pivot-gym[sandbox]'", name=e.name
        ) from e
    return parser, util


def _structure(lines: Sequence[str]) -> list[dict[str, Any]]:
    """The library's instructions of `lines` (each ending in a newline), comments left out."""
    data = "".join(lines).encode("utf-8", errors="replace")
    parser = _library()[0].DockerfileParser(fileobj=io.BytesIO(data), env_replace=False)
    return [s for s in parser.structure if s["instruction"] != "COMMENT"]


def _markers(s: Mapping[str, Any]) -> list[re.Match[str]]:
    """The `<<NAME` here-document openers of an instruction of the library's structure."""
    return list(_HEREDOC.finditer(s["value"])) if s["instruction"] in _TAKES_HEREDOCS else []


def _cut_body(lines: list[str], start: int, m: re.Match[str], where: str) -> tuple[str, int]:
    """(body, the line after its terminator) of the here-document `m` opens, its lines blanked in `lines`."""
    strip_tabs, name = bool(m.group(1)), m.group(2)
    body, i = [], start
    while i < len(lines):
        text = lines[i].rstrip("\r\n")
        lines[i] = "\n"
        if (text.strip() if strip_tabs else text) == name:
            return "\n".join(body) + "\n", i + 1
        body.append(text.lstrip("\t") if strip_tabs else text)
        i += 1
    raise DockerfileError(f"{where}: here-document <<{name} is never closed")


def _read(text: str, path: str) -> tuple[list[dict[str, Any]], dict[int, tuple[str, ...]]]:
    """(the library's instructions, here-document bodies by 0-based start line) of a Dockerfile's text.

    The library does not know here-documents: the first instruction that opens one has its bodies
    cut out of the text (their lines blanked), then the text is read again, until none is left.
    """
    data = (text if text.endswith("\n") else text + "\n") + "\n"  # a last continuation ends
    lines = [line + "\n" for line in data.split("\n")[:-1]]
    bodies: dict[int, tuple[str, ...]] = {}
    while True:
        structure = _structure(lines)
        pending = next((s for s in structure if s["startline"] not in bodies and _markers(s)), None)
        if pending is None:
            return structure, bodies
        found, i = [], pending["endline"] + 1
        for m in _markers(pending):
            body, i = _cut_body(lines, i, m, f"{path}:{pending['startline'] + 1}")
            found.append(body)
        bodies[pending["startline"]] = tuple(found)


def _instruction(s: Mapping[str, Any], path: str, heredocs: tuple[str, ...]) -> Instruction:
    """An `Instruction` of one entry of the library's structure: args joined as this module joins them."""
    keyword, line = s["instruction"], s["startline"] + 1
    if keyword not in KNOWN | IGNORED:
        raise DockerfileError(f"{path}:{line}: unknown instruction {keyword!r}")
    # every line of a continuation but the last ends in the escape character, whichever it is
    physical = s["content"].split("\n")[:-1]
    joined = " ".join(p.strip() for p in [*(p.rstrip()[:-1] for p in physical[:-1]), physical[-1]])
    rest = (joined.split(None, 1) + [""])[1].strip()
    flags = {}
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        name, _, value = flag[2:].partition("=")
        flags[name] = value
        rest = rest.strip()
    return Instruction(keyword, rest, flags, line, path, heredocs)


def _with_stages(instructions: list[Instruction], path: str, fragment: bool) -> list[Instruction]:
    """The instructions with their `stage`; a FROM missing, misplaced or naming a stage twice raises."""
    froms = [i for i in instructions if i.keyword == "FROM"]
    if fragment:
        if froms:
            raise DockerfileError(f"{froms[0].where}: FROM in steps appended to another Dockerfile")
        return instructions
    if not froms:
        raise DockerfileError(f"{path}:1: no FROM instruction")
    early = next((i for i in instructions if i.keyword not in ("ARG", "FROM")), None)
    if early is not None and early.line < froms[0].line:
        raise DockerfileError(f"{early.where}: {early.keyword} before the first FROM (only ARG may come before it)")
    image_from = _library()[0].image_from
    out: list[Instruction] = []
    stage, names = "", []  # names: every stage's, in order
    for ins in instructions:
        if ins.keyword == "FROM":
            image, name = image_from(ins.args)
            if not image:
                raise DockerfileError(f"{ins.where}: FROM names no image")
            if name and name.lower() in names:
                raise DockerfileError(f"{ins.where}: stage name {name!r} is used twice")
            stage = name.lower() if name else str(len(names))
            names.append(stage)
        out.append(replace(ins, stage=stage))
    return out


def parse(text: str, path: str = "Dockerfile", fragment: bool = False) -> list[Instruction]:
    """The instructions of a Dockerfile; an unknown or malformed one raises `DockerfileError` with its line.

    A `fragment` (steps appended to another Dockerfile) has no FROM. A multi-stage Dockerfile is read
    (each instruction's `stage`); the builder plans its stages (`images/stages.py`).
    """
    structure, bodies = _read(text, path)
    instructions = [_instruction(s, path, bodies.get(s["startline"], ())) for s in structure]
    return _with_stages(instructions, path, fragment)


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


def _pairs(text: str, where: str, keyword: str = "ENV") -> dict[str, str]:
    """`ENV`/`LABEL` arguments (`k=v k2="v 2"` or the legacy `ENV k v`), or `ARG`'s (`NAME[=default] ...`).

    Words and quotes are read as docker reads them (the library's `WordSplitter`, `extract_key_values`);
    variables are left for `substitute`. An unclosed quote, or an ENV/LABEL word that is no
    `name=value` after a first one that is, raises `DockerfileError` naming `where`.
    """
    util = _library()[1]
    splitter = util.WordSplitter(text)
    words = list(splitter.split(dequote=False))
    if splitter.quotes:
        raise DockerfileError(f"{where}: {keyword} has an unclosed {splitter.quotes} in {text[:60]!r}")
    if not words:
        return {}
    if keyword == "ARG":
        return dict(util.WordSplitter(word).dequote().partition("=")[::2] for word in words)
    try:
        return dict(util.extract_key_values(env_replace=False, args={}, envs={}, instruction_value=text))
    except ValueError as e:
        raise DockerfileError(f"{where}: malformed {keyword} pair: {e}") from e


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
    """Hosts that RUN/ADD steps name beyond the registries in `allowed` (the build cannot reach them).

    A step's text is read as written and with the ARG/ENV values declared before it: a URL held in a
    build argument (`ARG DATA_URL=https://...` then `RUN curl "$DATA_URL"`) is refused before the build,
    naming its host, instead of failing inside it.
    """
    out = []
    values: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword in ("ENV", "ARG"):
            values.update(ins.pairs())
        if ins.keyword in ("RUN", "ADD"):
            text = ins.args + "".join(ins.heredocs)
            text += "\n" + substitute(text, values) if values and "$" in text else ""
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
            values.update(ins.pairs())
        if ins.keyword in ("COPY", "ADD") and "from" not in ins.flags:
            for path in copy_sources(ins, context, values)[0]:
                files.update([path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()])
    return sorted(files)
