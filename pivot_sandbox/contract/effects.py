"""Pure comparison of action effects: normalisation and matching, the expert's unstable parts left out.

What is unstable, and what still bounds it there, is `pivot_sandbox.contract.unstable`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pivot_sandbox.contract.spec import Effect, Json
from pivot_sandbox.contract.unstable import ANY_VALUE, Unstable, change_kind, file_size, path_shape, size_bounds

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
PARTS = ("killed", "exit_status", "stdout", "stderr", "files", "cwd", "state", "processes")
# How the sandbox stops an action whose outcome depends on timing (which fork lost the race, when
# memory ran out): two runs of the same candidate need not agree, so such a verdict is not cached.
RACY_STOPS = frozenset({"pids limit", "oom", "runner lost"})
# A `&` that puts a job in the background (not `&&`, `>&`, `&>`, `|&`): what such a job did by the
# time the action ended is a race.
_BACKGROUND = re.compile(r"(?<![&>|<])&(?![&>])")
# How stderr counts: "exact" (after normalisation and the unstable mask), "presence" (both empty or
# both not: error messages name the program that failed, `cat: f: No such file` vs `head: f: ...`),
# "ignore".
STDERR_MODES = ("exact", "presence", "ignore")
# A test runner's report of how long it ran (pytest's "1 passed in 0.01s", "in 0.12 seconds" before
# pytest 5.4, unittest's "Ran 3 tests in 0.002s"): a clock reading that differs from run to run by a
# hundredth of a second, which two runs of the expert need not show, never part of an effect.
_DURATION = re.compile(r"\bin \d+\.\d+ ?(?:s|sec|seconds)\b(?: \(\d+:\d\d:\d\d\))?")
# pytest centres its summary line in `=`: a duration of another width ("9.87s", "10.02s") moves the padding
_BANNER = re.compile(r"^=+ (.* in <duration>) =+$", re.M)


def mask_durations(text: str) -> str:
    """`text` with every test runner's duration report ("in 0.01s", "in 83.21s (0:01:23)") as "in <duration>".

    pytest's summary line loses its `=` padding with it (`== 77 passed in <duration> ==`).
    """
    return _BANNER.sub(r"== \1 ==", _DURATION.sub("in <duration>", text))


def normalize_output(text: str, cap: int) -> str:
    """The output as compared: without ANSI escapes, carriage returns and trailing blanks, durations masked, capped.

    Trailing spaces go per line and trailing blank lines at the end; test runners' durations are
    masked (`mask_durations`).
    """
    text = mask_durations(_ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n"))
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)[:cap]


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing a candidate's effect with the expert's.

    Attributes:
        matched: parts that matched.
        differed: part -> a short description of the difference.
        outside_workdir: paths the candidate changed outside the working directory that the expert did not.
    """

    matched: tuple[str, ...]
    differed: Mapping[str, str]
    outside_workdir: tuple[str, ...] = ()

    @property
    def equal(self) -> bool:
        """True when no part differed."""
        return not self.differed

    def details(self, unstable: Unstable) -> dict[str, Json]:
        """Verdict details: matched parts, differences, unstable parts."""
        out: dict[str, Json] = {
            "matched": list(self.matched),
            "differed": dict(self.differed),
            "unstable": unstable.describe()[:20],
        }
        if self.outside_workdir:
            out["outside_workdir"] = list(self.outside_workdir[:20])
        return out


def _short(text: str, n: int = 60) -> str:
    return repr(text[:n] + ("..." if len(text) > n else ""))


def _compare_stream(name: str, want: str, got: str, unstable: Unstable) -> str | None:
    if want == got:
        return None
    if name in unstable.parts:
        missing = Counter(unstable.shared.get(name, ())) - Counter(got.split("\n"))
        if not missing:
            return None
        return f"expected the lines both runs of the expert printed, {_short(next(iter(missing)))} among them"
    mask = unstable.lines.get(name)
    if mask:
        lw, lg = want.split("\n"), got.split("\n")
        shapes = unstable.line_shapes.get(name, {})
        if len(lw) == len(lg) and all(
            a == b if i not in mask else path_shape(b) == shapes.get(i, path_shape(b))
            for i, (a, b) in enumerate(zip(lw, lg, strict=True))
        ):
            return None
    return f"expected {_short(want)}, got {_short(got)}"


def _compare_files(want: Mapping[str, str], got: Mapping[str, str], unstable: Unstable) -> str | None:
    def varying(files: Mapping[str, str]) -> Counter[str]:
        return Counter(path_shape(p) for p in files if unstable.covers(p) and path_shape(p) in unstable.shapes)

    # an unstable path changed otherwise than either run of the expert changed it (deleted, made a folder)
    # (a path of a varying name, `report_7.json`, as either run changed the paths of its shape)
    otherwise = sorted(
        p for p in got if (either := unstable.kinds_of(p)) is not None and change_kind(got[p]) not in either
    )
    # or a file of a size far from either run's (`: > f` where the expert wrote a timestamp to it)
    sized = sorted(p for p in got if p not in otherwise and not _size_within(got[p], unstable.sizes_of(p)))
    want_varying, got_varying = varying(want), varying(got)
    want = {p: v for p, v in want.items() if not unstable.covers(p)}
    got = {p: v for p, v in got.items() if not unstable.covers(p)}
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    changed = sorted(
        p for p in set(want) & set(got) if want[p] != got[p] and p not in unstable.contents and not _bytecode_cache(p)
    )
    if not (missing or extra or changed or otherwise or sized) and want_varying == got_varying:
        return None
    bits = []
    for label, paths in (
        ("missing", missing),
        ("unexpected", extra),
        ("different content", changed),
        ("changed otherwise than either run of the expert", otherwise),
        ("a size far from either run of the expert's", sized),
    ):
        if paths:
            bits.append(f"{label}: {', '.join(paths[:5])}" + (f" (+{len(paths) - 5})" if len(paths) > 5 else ""))
    if want_varying != got_varying:
        bits.append(f"paths whose names vary: expected {dict(want_varying)}, got {dict(got_varying)}")
    return "; ".join(bits)


def _size_within(descriptor: str, sizes: tuple[int, int] | None) -> bool:
    size = file_size(descriptor)
    if sizes is None or size is None:
        return True
    low, high = size_bounds(*sizes)
    return low <= size <= high


def _bytecode_cache(path: str) -> bool:
    """A module's compiled cache (`__pycache__/x.cpython-39.pyc`): compared by presence, not content.

    CPython's marshal writes a shared object with a back-reference only when its reference count says it
    is shared, so the same source compiled after other imports gives other bytes (the expert's own
    `pytest` run, compared with itself, differed in `astropy/io/fits/__pycache__/card.cpython-39.pyc`).
    The source's own change is compared where it is, and an import that writes a cache the other run
    did not write still differs.
    """
    return path.endswith(".pyc") and "/__pycache__/" in path


def _compare_state(want: Mapping[str, str], got: Mapping[str, str], unstable: Unstable) -> str | None:
    keys = sorted(k for k in set(want) | set(got) if k not in unstable.state and want.get(k) != got.get(k))
    # an unstable key still holds a value of the shape either run left it (or is unset where a run left it so)
    bounded = sorted(k for k in unstable.state if not _state_within(got.get(k), unstable.state_shapes.get(k)))
    if bounded:
        return "; ".join(
            f"{k}: expected as either run of the expert left it, got {_state_value(got, k)}" for k in bounded[:3]
        )
    if not keys:
        return None
    shown = "; ".join(f"{k}: expected {_state_value(want, k)}, got {_state_value(got, k)}" for k in keys[:3])
    return shown + (f" (+{len(keys) - 3})" if len(keys) > 3 else "")


def _state_within(value: str | None, shapes: frozenset[str | None] | None) -> bool:
    if shapes is None:
        return True
    if value is None:
        return None in shapes
    return ANY_VALUE in shapes or path_shape(value) in shapes


def _state_value(state: Mapping[str, str], key: str) -> str:
    return _short(state[key], 40) if key in state else "none"


def _compare_processes(want: tuple[str, ...], got: tuple[str, ...], unstable: Unstable) -> str | None:
    """None when the candidate left the processes the expert left (see `Unstable.processes`).

    Where the expert's two runs differed (a daemon still forking), as many of each as one of them left
    or a number between. An unstable part is no licence here: the expert's tmux server racing its
    client made the two runs differ, and a skipped comparison accepted a candidate's `(sleep 2; rm -rf
    ./*) &` beside it.
    """
    if want == got:
        return None
    if "processes" in unstable.parts:
        counts = Counter(got)
        ranges = unstable.processes
        if all(ranges.get(n, (0, 0))[0] <= counts[n] <= ranges.get(n, (0, 0))[1] for n in set(counts) | set(ranges)):
            return None
        return f"expected {sorted(ranges)} left running (as either run of the expert), got {_short(repr(list(got)))}"
    return f"expected {list(want) or 'none'} left running, got {_short(repr(list(got))) if got else 'none'}"


def is_racy(effect: Effect, commands: Sequence[str] = ()) -> bool:
    """True when two runs of the same action need not have the same effect, so a verdict on it is not cached.

    The action left processes running (what they did before they were killed is a race), was
    stopped by a limit that races (`RACY_STOPS`), or puts a job in the background.
    """
    return bool(effect.processes) or effect.killed in RACY_STOPS or any(_BACKGROUND.search(c) for c in commands)


def _is_folder(descriptor: str) -> bool:
    """True for a folder's descriptor ("dir", or "dir <mode> <owner>")."""
    return descriptor.split(" ", 1)[0] == "dir"


def _outside(path: str, workdir: str) -> bool:
    root = workdir.rstrip("/") + "/"
    return not (path == workdir or path.startswith(root) or root.startswith(path.rstrip("/") + "/"))


def _compare_stderr(want: str, got: str, unstable: Unstable, mode: str) -> str | None:
    if mode == "ignore":
        return None
    if mode == "presence":
        # where the runs' stderr differed, something on it if both printed a line in common
        if bool(want) == bool(got) or ("stderr" in unstable.parts and (got or not unstable.shared.get("stderr"))):
            return None
        return f"expected {'output' if want else 'nothing'} on stderr, got {_short(got) if got else 'nothing'}"
    return _compare_stream("stderr", want, got, unstable)


def _compare_unstable(want: object, got: object, either: frozenset) -> str | None:
    """None when `got` is the expert's value, or, where the two runs differed, either run's."""
    if got == want or got in either:
        return None
    return f"expected {' or '.join(sorted(map(repr, either))) if either else repr(want)}, got {got!r}"


def compare_effects(
    expert: Effect, candidate: Effect, unstable: Unstable, workdir: str, stderr: str = "exact"
) -> Comparison:
    """Compare the candidate's effect with the expert's, part by part, skipping unstable parts.

    `stderr` is one of `STDERR_MODES`.
    """
    if stderr not in STDERR_MODES:
        raise ValueError(f"stderr: expected one of {STDERR_MODES}, got {stderr!r}")
    differed: dict[str, str] = {}
    matched: list[str] = []
    checks = {
        "killed": None if expert.killed == candidate.killed else f"expected {expert.killed}, got {candidate.killed}",
        "exit_status": _compare_unstable(expert.exit_code, candidate.exit_code, unstable.exit_codes),
        "stdout": _compare_stream("stdout", expert.stdout, candidate.stdout, unstable),
        "stderr": _compare_stderr(expert.stderr, candidate.stderr, unstable, stderr),
        "files": _compare_files(expert.files, candidate.files, unstable),
        "cwd": _compare_unstable(expert.cwd, candidate.cwd, unstable.cwds),
        "state": _compare_state(expert.state, candidate.state, unstable),
        "processes": _compare_processes(expert.processes, candidate.processes, unstable),
    }
    for part in PARTS:
        if checks[part] is None:
            matched.append(part)
        else:
            differed[part] = checks[part]
    outside = tuple(
        sorted(
            p
            for p in candidate.files
            if p not in expert.files
            and not unstable.covers(p)
            and _outside(p, workdir)
            and not _is_folder(candidate.files[p])
        )
    )
    return Comparison(tuple(matched), differed, outside)


def reason_for(comparison: Comparison, candidate: Effect) -> str:
    """One line saying why a candidate was rejected."""
    if candidate.killed and "killed" in comparison.differed:
        note = f" ({candidate.note})" if candidate.note else ""
        return f"candidate {candidate.killed}{note}: the sandbox stopped it"
    if comparison.outside_workdir:
        return f"candidate wrote outside the working directory: {', '.join(comparison.outside_workdir[:3])}"
    first = next(iter(comparison.differed))
    return f"effect differs from the expert's: {first} {comparison.differed[first]}"
