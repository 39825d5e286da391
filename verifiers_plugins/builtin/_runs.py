"""What an SWE command runs (`TestRun`): the program, the tests it selects, and whether it runs any.

A command that runs a program is compared by what it runs: the program (a script path resolved
against any `cd`, or the runner module: `python3 -m pytest` is `pytest`) and the tests it selects
(labels, node ids, `-k`/`-m` expressions, plugins and ini overrides, the environment it is given),
so `./tests/runtests.py X`, `python3 tests/runtests.py X` and `cd tests && ./runtests.py X` are one
run and `... Y` another. Options that change only how results print (`-v`, `--verbosity 2`, `-q`,
`--tb=short`) are ignored; options under which a runner runs no test (`--co`, `--collect-only`,
`--setup-plan`, `--fixtures`, `-h`, `--version`) or fewer (`--lf`, `-x`, a `timeout` under a
minute) are part of the run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from rapidfuzz import fuzz

from verifiers_plugins.builtin._categories import first_line, strip_prefixes
from verifiers_plugins.builtin._shellwords import join_path, shell_segments, words

CODE_MIN_SIMILARITY = 70  # rapidfuzz ratio (0-100) between two inline programs (`python -c`, heredoc)
_RUNNER_MODULES = {"pytest": "pytest", "py.test": "pytest", "unittest": "unittest", "nose": "nosetests"}
# Options whose next word is their value; the selecting ones are part of what a run is.
_VALUE_OPTIONS = frozenset(
    "-k -m -n -p -c -o -W -r --tb --rootdir --maxfail --deselect --ignore --settings --parallel "
    "--verbosity --durations --timeout --junitxml --log-level --cov --basetemp --pythonpath "
    "--override-ini --confcutdir".split()
)
# `-p no:python` and `-o python_files=x` change what is collected as much as `-k` does
_SELECT_OPTIONS = frozenset(
    {"-k", "-m", "--deselect", "--ignore", "-p", "-o", "--override-ini", "-c", "--confcutdir", "--pythonpath"}
)
# Under these a test runner runs no test at all: it lists, plans, or prints help (one key per kind).
_NO_RUN = {
    "--co": "collect only",
    "--collect-only": "collect only",
    "--collectonly": "collect only",
    "--setup-plan": "setup plan",
    "--setup-only": "setup only",
    "--fixtures": "fixtures",
    "--funcargs": "fixtures",
    "--fixtures-per-test": "fixtures",
    "--markers": "markers",
    "--cache-show": "cache",
    "-h": "help",
    "--help": "help",
    "--version": "version",
    "-V": "version",
}
# ... and under these it runs fewer tests than it selects (the last failures, up to the first failure).
_FEWER = {
    "--lf": "--lf",
    "--last-failed": "--lf",
    "--ff": "--ff",
    "--failed-first": "--ff",
    "--nf": "--nf",
    "--new-first": "--nf",
    "--sw": "--sw",
    "--stepwise": "--sw",
    "--sw-skip": "--sw-skip",
    "--stepwise-skip": "--sw-skip",
    "-x": "-x",
    "--exitfirst": "-x",
    "--failfast": "-x",
    "--noconftest": "--noconftest",
}
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=.*", re.DOTALL)
SHORT_LIMIT_S = 60.0  # a `timeout` shorter than this cuts a test run short: it runs fewer tests
_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def time_limit(prefix: list[str]) -> float | None:
    """The seconds a `timeout N` among a command's prefix words allows (None: no limit)."""
    if "timeout" not in prefix:
        return None
    words = prefix[prefix.index("timeout") + 1 :]
    i = 0
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in ("-s", "-k", "--signal", "--kill-after") else 1  # `-k 1` is not the limit
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", words[i]) if i < len(words) else None
    return float(m.group(1)) * _SECONDS[m.group(2)] if m else None


@dataclass(frozen=True)
class TestRun:
    """One program a command runs: what it is and what it selects.

    Attributes:
        program: a script path (relative to the repository root), `pytest`, `unittest`, `-m MODULE`,
            or `python -c` / `python -` for inline code.
        selection: the tests or arguments it is given (paths resolved, `-k=EXPR`, `runs nothing: help`,
            `env:NAME=VALUE`), order ignored.
        code: the inline program (`python -c CODE`, a heredoc on stdin), whitespace collapsed.
    """

    __test__ = False  # not a pytest test class, whatever its name

    program: str
    selection: frozenset[str] = frozenset()
    code: str = ""

    def same_as(self, other: TestRun) -> bool:
        """The same run: program and selection equal; inline code similar enough."""
        if self.program != other.program or self.selection != other.selection:
            return False
        return self.code == other.code or fuzz.ratio(self.code, other.code) >= CODE_MIN_SIMILARITY


def _is_test_runner(program: str) -> bool:
    """`pytest`, `unittest`, or a script named like a test runner (`tests/runtests.py`, `bin/test`)."""
    return program in _RUNNER_MODULES.values() or "test" in program.rsplit("/", 1)[-1]


def _run(program: str, args: list[str], cwd: str) -> TestRun:
    """A run of `program`: a test runner's options that only change its report are left out, a script's are kept."""
    if _is_test_runner(program):
        return TestRun(program, _selection(args, cwd))
    return TestRun(program, _selection(args, cwd) | {w for w in args if w.startswith("-") and ">" not in w})


def _selection(args: list[str], cwd: str) -> frozenset[str]:
    """What the arguments select: path-like words resolved against `cwd`, labels, `-k`/`-m` expressions."""
    out: set[str] = set()
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word in (">", ">>", "<", "1>", "2>", "2>>", "&>"):
            i += 1  # `> out.txt`: the redirect and its file are not arguments
            continue
        if ">" in word or "<" in word:
            continue  # `2>&1`, `>out.txt`
        if word.startswith("-"):
            name, eq, value = word.partition("=")
            if name in _NO_RUN:
                out.add(f"runs nothing: {_NO_RUN[name]}")
            elif name in _FEWER:
                out.add(f"runs fewer: {_FEWER[name]}")
            if not eq and name in _VALUE_OPTIONS and i < len(args):
                value, i = args[i], i + 1
            elif not eq and i < len(args) and args[i].isdigit():
                i += 1  # `-v 2` (Django's runtests): a number after an option is its value
            if name in _SELECT_OPTIONS:
                out.add(f"{name}={' '.join(value.split())}")
            continue
        path, sep, rest = word.partition("::")
        out.add(join_path(cwd, path) + sep + rest if "/" in path or path.endswith(".py") or sep else word)
    return frozenset(out)


def _python_run(args: list[str], cwd: str, body: str) -> TestRun | None:
    """The run of `python ARGS`: a module (`-m`), inline code (`-c`, stdin) or a script."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] not in ("-m", "-c", "-"):
        i += 2 if args[i] in ("-W", "-X") else 1  # interpreter options
    if i >= len(args) or args[i] == "-":
        return TestRun("python -", code=" ".join(body.split()))
    if args[i] == "-m" and i + 1 < len(args):
        module = args[i + 1]
        return _run(_RUNNER_MODULES.get(module, f"-m {module}"), args[i + 2 :], cwd)
    if args[i] == "-c" and i + 1 < len(args):
        return TestRun("python -c", code=" ".join(args[i + 1].split()))
    if ">" in args[i] or "<" in args[i]:
        return TestRun("python -", code=" ".join(body.split()))
    return _run(join_path(cwd, args[i]), args[i + 1 :], cwd)


def heredoc_body(command: str) -> str:
    """The lines after the first, without a closing heredoc word (`EOF`)."""
    lines = command.split("\n")[1:]
    if lines and re.fullmatch(r"\s*[A-Za-z_]+\s*", lines[-1]):
        lines = lines[:-1]
    return "\n".join(lines)


def command_runs(command: str) -> tuple[TestRun, ...]:
    """The programs the first line of a command runs, with `cd` followed (empty when none is recognised).

    Variables set for a run (`PYTEST_ADDOPTS=--co pytest`, or `export` earlier on the line) are
    part of what it runs: they reach the runner as options do.
    """
    body = heredoc_body(command)
    cwd = "."
    env: set[str] = set()
    runs: list[TestRun] = []
    for segment in shell_segments(first_line(command)[:4000]):
        raw = words(segment)
        argv = strip_prefixes(raw)
        if not argv:
            continue
        verb = argv[0].rsplit("/", 1)[-1]
        prefix = raw[: len(raw) - len(argv)]
        mine = env | {f"env:{w}" for w in prefix if _ASSIGNMENT.fullmatch(w)}
        limit = time_limit(prefix)
        short = {f"runs fewer: cut after {limit:g} s"} if limit is not None and limit < SHORT_LIMIT_S else set()
        if verb == "cd":
            cwd = join_path(cwd, argv[1]) if len(argv) > 1 else "."
        elif verb == "export":
            env |= {f"env:{w}" for w in argv[1:] if _ASSIGNMENT.fullmatch(w)}
        elif re.fullmatch(r"python[\d.]*", verb):
            run = _python_run(argv[1:], cwd, body)
            if run is not None:
                runs.append(_with(run, mine, short))
        elif verb in _RUNNER_MODULES:
            runs.append(_with(_run(_RUNNER_MODULES[verb], argv[1:], cwd), mine, short))
        elif argv[0].startswith(("./", "bin/")) or verb.endswith(".py"):
            runs.append(_with(_run(join_path(cwd, argv[0]), argv[1:], cwd), mine, short))
    return tuple(runs)


def _with(run: TestRun, env: set[str], short: set[str]) -> TestRun:
    """`run` given its variables, and (a test runner only) the mark of a time limit that cuts it short."""
    return replace(run, selection=run.selection | env | (short if _is_test_runner(run.program) else set()))


def runs_problem(want: tuple[TestRun, ...], got: tuple[TestRun, ...]) -> str | None:
    """Why the candidate's runs are not the expert's (None when they pair up one to one)."""
    left = list(got)
    for run in want:
        match = next((g for g in left if run.same_as(g)), None)
        if match is None:
            what = sorted(run.selection)[:3]
            nothing = sorted(s for g in got for s in g.selection if s.startswith(("runs nothing", "runs fewer")))
            if nothing:
                return f"expected a run of {run.program}{' ' + str(what) if what else ''}, got one that {nothing[0]}"
            return f"expected a run of {run.program}{' ' + str(what) if what else ''}, got another run"
        left.remove(match)
    return "runs more programs than the expert" if left else None
