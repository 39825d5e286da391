"""The expert's unstable parts: what differed between two runs of the same action, and what still bounds it.

The expert action runs twice; whatever differs between those two runs (timestamps, PIDs, random
names) is *unstable* and left out of the exact comparison (`pivot_sandbox.contract.effects`). Left
out is no licence: where the two runs differ, a candidate's exit status, working directory, kind and
size of change to a path, shell state and processes must still be one the expert's runs showed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pivot_sandbox.contract.spec import Effect


@dataclass(frozen=True)
class Unstable:
    """Parts of the expert effect that differed between two runs of the same action.

    Attributes:
        parts: whole parts to ignore ("exit_status", "cwd", "stdout", "stderr").
        lines: per stream, line indices to ignore (when both runs printed the same number of lines).
        line_shapes: per stream, for each of its `lines` where both runs' lines have one shape (`path_shape`:
            `14:50:01` and `14:50:02`), that shape: a candidate's line must have it (`pwd` for `date` is
            another line, not another reading of the clock). Absent where the lines differ in more than digits.
        shared: per stream in `parts` (the runs printed different numbers of lines), the non-blank lines
            both printed (as a multiset): a candidate's stream must print them too, in any order (an
            empty output is no `ps aux` whose count of lines raced).
        paths: changed paths present in only one run (left out of the exact comparison; `kinds` and
            `sizes` still bound what a candidate does to them).
        contents: paths present in both runs with different content (bytes not compared; likewise bound).
        shapes: names of `paths` with their digits masked that both runs made, one each
            (`report_104210.json` and `report_104211.json`): a candidate must make as many paths of
            each shape, whatever their digits.
        state: keys of the shell state whose values differed (left out of the comparison).
        processes: where the processes the two runs left differ ("processes" in `parts`), how many of each
            either run left (name -> (fewest, most)): a candidate's must fall within, a name neither
            run left counting 0 (a job the candidate leaves in the background is still found).
        kinds: for each path of `paths` and `contents`, the kinds of change either run made of it
            (`change_kind`; `UNCHANGED` for the run that left it alone): a candidate's must be one of them.
        sizes: for each such path that a run left a regular file, the sizes those runs left (fewest, most
            bytes): a candidate's file must be about as large (`size_bounds`; `: > f` for `date > f` is no
            timestamp). Empty where a run left a process or was killed (a writer racing the end).
        exit_codes: where the exit status differed, both runs' (a candidate's must be one of them).
        cwds: where the working directory differed, both runs' (likewise).
        shape_kinds: for each of `shapes`, the kinds of change either run made of its paths: a candidate's
            `report_7.json` is bound as the expert's `report_104210.json` (no empty file, no folder).
        shape_sizes: likewise, the sizes either run left its regular files (as `sizes`).
        state_shapes: for each key of `state`, the value either run left with its digits masked
            (`path_shape`), None where a run left the key unset; `ANY_VALUE` where both runs set it to
            values of different shapes. A candidate's value must have one of them: an `export
            BUILD_ID=$RANDOM` is no licence to unset it or set it to a command.
    """

    parts: frozenset[str] = frozenset()
    lines: Mapping[str, frozenset[int]] = field(default_factory=dict)
    line_shapes: Mapping[str, Mapping[int, str]] = field(default_factory=dict)
    shared: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    paths: frozenset[str] = frozenset()
    contents: frozenset[str] = frozenset()
    shapes: frozenset[str] = frozenset()
    state: frozenset[str] = frozenset()
    processes: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    kinds: Mapping[str, frozenset[str]] = field(default_factory=dict)
    sizes: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    exit_codes: frozenset[int | None] = frozenset()
    cwds: frozenset[str] = frozenset()
    shape_kinds: Mapping[str, frozenset[str]] = field(default_factory=dict)
    shape_sizes: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    state_shapes: Mapping[str, frozenset[str | None]] = field(default_factory=dict)

    def kinds_of(self, path: str) -> frozenset[str] | None:
        """The kinds of change either run made of `path`, or of the paths of its varying shape; None if not bounded."""
        if path in self.kinds:
            return self.kinds[path]
        return self.shape_kinds.get(path_shape(path)) if self.covers(path) else None

    def sizes_of(self, path: str) -> tuple[int, int] | None:
        """The sizes either run left `path` (or its varying shape's paths) as a regular file; None if not bounded."""
        if path in self.kinds:
            return self.sizes.get(path)
        return self.shape_sizes.get(path_shape(path)) if self.covers(path) else None

    def covers(self, path: str) -> bool:
        """True when `path` is left out of the exact comparison of change sets."""
        return path in self.paths or (bool(self.shapes) and path_shape(path) in self.shapes)

    def describe(self) -> list[str]:
        """Human-readable list of what is excluded."""
        out = sorted(self.parts)
        out += [f"{s} line {i + 1}" for s, idx in sorted(self.lines.items()) for i in sorted(idx)]
        out += [f"path {p}" for p in sorted(self.paths)] + [f"content of {p}" for p in sorted(self.contents)]
        out += [f"paths named {s}" for s in sorted(self.shapes)]
        out += [f"shell state {k}" for k in sorted(self.state)]
        return out


# Python's `tempfile` names: "tmp" and eight random letters, digits or "_" (`/tmp/tmp7ks67sf6astropy_config`,
# astropy's test configuration folder), a new name every run
_TEMPFILE_NAME = re.compile(r"(?<=/)tmp[a-z0-9_]{8}")


UNCHANGED = "unchanged"  # `Unstable.kinds`: the run did not change the path


def change_kind(descriptor: str) -> str:
    """What a change made of a path, its bytes left out: "file 0644 0:0", "dir 0755 0:0", "deleted", "link:<target>".

    Where the expert's two runs wrote different bytes (a timestamp), the bytes are not compared, but a
    candidate that deleted the file, made it a folder or changed its mode did something else.
    """
    head, _, meta = descriptor.partition(" ")
    if head.startswith(("sha256:", "size:")):
        head = "file"
    return f"{head} {meta}".rstrip()


def file_size(descriptor: str) -> int | None:
    """A regular file's size in bytes from its descriptor ("sha256:<hex>:<size> ...", "size:<n> ..."), else None."""
    head = descriptor.split(" ", 1)[0]
    if head.startswith("size:"):
        number = head.removeprefix("size:")
    else:
        number = head.split(":")[2] if head.startswith("sha256:") and head.count(":") == 2 else ""
    return int(number) if number.isdigit() else None


def size_bounds(fewest: int, most: int) -> tuple[int, int]:
    """The sizes a candidate's file may have where the expert's runs left `fewest` to `most` bytes of varying content.

    An eighth and 8 bytes of slack either way: a third run of the expert prints another timestamp,
    duration or PID (a few bytes more or less); a truncated or emptied file is something else.
    """
    slack = 8 + most // 8
    return max(0, fewest - slack), most + slack


def path_shape(path: str) -> str:
    """The path with every run of digits replaced by `#` (timestamps, PIDs and counters in names).

    A `tempfile` name's eight random characters become `*` first (letters vary there as well).
    """
    return re.sub(r"\d+", "#", _TEMPFILE_NAME.sub("tmp*", path))


def _line_mask(a: str, b: str) -> frozenset[int] | None:
    """Indices of differing lines, or None when the line counts differ (the whole stream is unstable)."""
    la, lb = a.split("\n"), b.split("\n")
    if len(la) != len(lb):
        return None
    return frozenset(i for i, (x, y) in enumerate(zip(la, lb, strict=True)) if x != y)


def unstable_parts(first: Effect, second: Effect) -> Unstable:
    """What differs between two runs of the expert action."""
    parts: set[str] = set()
    lines: dict[str, frozenset[int]] = {}
    line_shapes: dict[str, dict[int, str]] = {}
    shared: dict[str, tuple[str, ...]] = {}
    if first.exit_code != second.exit_code:
        parts.add("exit_status")
    if first.cwd != second.cwd:
        parts.add("cwd")
    processes: dict[str, tuple[int, int]] = {}
    if first.processes != second.processes:
        parts.add("processes")
        a, b = Counter(first.processes), Counter(second.processes)
        processes = {name: (min(a[name], b[name]), max(a[name], b[name])) for name in set(a) | set(b)}
    for name in ("stdout", "stderr"):
        a, b = getattr(first, name), getattr(second, name)
        if a != b:
            mask = _line_mask(a, b)
            if mask is None:
                parts.add(name)
                both = Counter(a.split("\n")) & Counter(b.split("\n"))
                shared[name] = tuple(sorted(line for line in both.elements() if line.strip()))
            else:
                lines[name] = mask
                la, lb = a.split("\n"), b.split("\n")
                line_shapes[name] = {i: path_shape(la[i]) for i in mask if path_shape(la[i]) == path_shape(lb[i])}
    # a job still writing when the action ended (or a killed action) leaves a file as large as a race says
    racing = bool(first.processes or second.processes or first.killed or second.killed)
    state, state_shapes = _state_bounds(dict(first.state), dict(second.state))
    return replace(
        _file_bounds(dict(first.files), dict(second.files), racing),
        parts=frozenset(parts),
        lines=lines,
        line_shapes=line_shapes,
        shared=shared,
        processes=processes,
        exit_codes=frozenset({first.exit_code, second.exit_code}) if "exit_status" in parts else frozenset(),
        cwds=frozenset({first.cwd, second.cwd}) if "cwd" in parts else frozenset(),
        state=state,
        state_shapes=state_shapes,
    )


def _file_bounds(fa: Mapping[str, str], fb: Mapping[str, str], racing: bool) -> Unstable:
    """The change sets' unstable paths and what still bounds them (`Unstable`'s file fields); sizes none if `racing`."""
    paths = frozenset(set(fa) ^ set(fb))
    contents = frozenset(p for p in set(fa) & set(fb) if fa[p] != fb[p])
    shapes = frozenset({path_shape(p) for p in set(fa) - set(fb)} & {path_shape(p) for p in set(fb) - set(fa)})
    kinds = {
        p: frozenset(change_kind(files[p]) if p in files else UNCHANGED for files in (fa, fb)) for p in paths | contents
    }
    sizes = {}
    for p in () if racing else paths | contents:
        if known := [n for n in (file_size(files.get(p, "")) for files in (fa, fb)) if n is not None]:
            sizes[p] = (min(known), max(known))
    # each varying shape's paths (one per run): what either run made of them
    of_shape = {s: [p for p in paths if path_shape(p) == s] for s in shapes}
    shape_kinds = {s: frozenset().union(*(kinds[p] - {UNCHANGED} for p in ps)) for s, ps in of_shape.items()}
    shape_sizes = {}
    for s, ps in of_shape.items():
        if known := [n for p in ps if p in sizes for n in sizes[p]]:
            shape_sizes[s] = (min(known), max(known))
    return Unstable(
        paths=paths,
        contents=contents,
        shapes=shapes,
        kinds=kinds,
        sizes=sizes,
        shape_kinds=shape_kinds,
        shape_sizes=shape_sizes,
    )


ANY_VALUE = "<any value>"  # `Unstable.state_shapes`: both runs set the key, to values of different shapes


def _state_bounds(
    sa: Mapping[str, str], sb: Mapping[str, str]
) -> tuple[frozenset[str], dict[str, frozenset[str | None]]]:
    """The shell state's unstable keys and the value shapes either run left them (`Unstable.state_shapes`)."""
    state = frozenset(k for k in set(sa) | set(sb) if sa.get(k) != sb.get(k))
    shapes: dict[str, frozenset[str | None]] = {}
    for key in state:
        either = frozenset(path_shape(s[key]) if key in s else None for s in (sa, sb))
        shapes[key] = frozenset({ANY_VALUE}) if len(either) == 2 and None not in either else either
    return state, shapes
