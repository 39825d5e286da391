"""OpenHands' IPython cells replayed as shell commands: a kernel-equivalent Python process, cell by cell.

OpenHands runs an `execute_ipython_cell` call in its own Jupyter kernel: one Python process that
keeps the names earlier cells made, starts each cell in the bash shell's directory when that moved
since the last cell (V0 `action_execution_server.run_ipython`), and answers the stream output, the
value of a last expression, or the traceback, with "[Code executed successfully with no output]"
when there is none (`plugins/jupyter/execute_server.py`).

A replay runs each cell as one shell command (`ipython_command`): `python3 -c KERNEL CELL`, a fresh
process that first brings back the kernel's names from the sandbox's state folder (`/.pivot`, left
out of every change set and kept in every snapshot, so an expert's cell and a candidate's compare
by their effect on files alone), runs the cell's top-level statements in order in a `__main__`
module, and saves the names again: modules by name, values that pickle by value, and functions and
classes a cell defined by re-running their definitions (with the imports) before the next cell,
so what a later cell reads of them is there. A name that does not pickle (an open file, a
generator) does not reach a later cell, which then fails where the kernel ran it: the replay
check sees that. A snapshot keeps files, not processes, so a kernel that lives between commands
would be gone from every sandbox started on one; this one lives in files.

Magics: `!cmd` lines run through `/bin/sh` (IPython's `system`), `%pip ARGS` as `python3 -m pip
ARGS` with IPython's note after it, `%cd DIR` changes the kernel's directory. Any other magic, a
cell magic (`%%`) or an assignment from `!` is refused (`ipython_refusal`): no replay runs it.

The kernel's interpreter is the task image's `python3`; OpenHands' was its own
(`/app/.venv/bin/python3`, the runtime's install, which no task image holds): where a cell's
imports differ between the two, the replay check finds the cell's result differs and says so.
"""

from __future__ import annotations

import re
import shlex

IPYTHON_TOOL = "execute_ipython_cell"
NO_OUTPUT = "[Code executed successfully with no output]"
# the lines OpenHands adds after a cell's output (`include_extra`)
_TRAILER = re.compile(
    r"\n?\[Jupyter current working directory: [^\]\n]*\](?:\n\[Jupyter Python interpreter: [^\]\n]*\])?\s*$"
)
# IPython's traceback: a rule of dashes, then "NameError    Traceback (most recent call last)"
_TRACEBACK = re.compile(r"^-{20,}\n\S+\s+Traceback \(most recent call last\)", re.M)
_LINE_MAGIC = re.compile(r"^\s*%(?!%)(\w+)")
_ALLOWED_MAGICS = ("pip", "cd")

# The kernel: a fresh process per cell whose names live in files (see the module docstring).
_KERNEL = r"""
import ast, builtins, importlib, io, os, pickle, re, subprocess, sys, traceback, types
def _main(cell):
    d = os.environ.get("PIVOT_IPYTHON_STATE") or "/.pivot/ipython"
    try:
        os.makedirs(d, exist_ok=True)
    except OSError:
        d = "/tmp/.pivot-ipython"; os.makedirs(d, exist_ok=True)
    def load(name, default):
        try:
            with open(os.path.join(d, name), "rb") as f: return pickle.load(f)
        except Exception: return default
    defs, names, where = load("defs", []), load("names", {}), load("cwd", None)
    here = os.getcwd()
    if where and where[0] == here and os.path.isdir(where[1]): os.chdir(where[1])
    mod = types.ModuleType("__main__"); sys.modules["__main__"] = mod; ns = mod.__dict__
    ns["__builtins__"] = builtins
    out, real = io.StringIO(), sys.stdout
    sys.stdout = sys.stderr = out
    for src in defs:
        try: exec(compile(src, "<cell>", "exec"), ns)
        except BaseException: pass
    for k, (kind, v) in names.items():
        try: ns[k] = importlib.import_module(v) if kind == "m" else pickle.loads(v)
        except BaseException: pass
    out.seek(0); out.truncate()
    def system(cmd):
        sys.stdout.flush()
        r = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out.write(r.stdout.decode(errors="replace"))
    ns["__pivot_system"] = system
    src, failed = _translate(cell), None
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        tree, failed = None, e
    body = tree.body if tree else []
    for i, stmt in enumerate(body):
        try:
            if i == len(body) - 1 and isinstance(stmt, ast.Expr) and not src.rstrip().endswith(";"):
                value = eval(compile(ast.Expression(stmt.value), "<cell>", "eval"), ns)
                if value is not None: out.write(repr(value) + "\n")
            else:
                exec(compile(ast.Module([stmt], []), "<cell>", "exec"), ns)
        except BaseException as e:
            failed = e; break
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs.append(ast.get_source_segment(src, stmt) or "")
    sys.stdout, sys.stderr = real, sys.__stderr__
    text = out.getvalue()
    if failed is not None:
        last = traceback.format_exception_only(type(failed), failed)[-1].strip()
        text = (text.rstrip("\n") + "\n" + last) if text.strip() else last
    real.write(text if text.strip() or failed else "@NO_OUTPUT@")
    keep = {}
    for k, v in list(ns.items()):
        if k.startswith("__"): continue
        if isinstance(v, types.ModuleType): keep[k] = ("m", v.__name__); continue
        try:
            b = pickle.dumps(v)
            if len(b) <= 16 << 20: keep[k] = ("v", b)
        except BaseException: pass
    for name, value in (("defs", defs), ("names", keep), ("cwd", (here, os.getcwd()))):
        with open(os.path.join(d, name + ".new"), "wb") as f: pickle.dump(value, f)
        os.replace(os.path.join(d, name + ".new"), os.path.join(d, name))
    real.flush()
    os._exit(1 if failed is not None else 0)
def _translate(cell):
    lines = []
    for line in cell.split("\n"):
        s = line.lstrip(); pad = line[: len(line) - len(s)]
        if s.startswith("!"):
            line = pad + "__pivot_system(%r)" % s[1:]
        elif s.startswith("%pip"):
            note = "Note: you may need to restart the kernel to use updated packages."
            line = pad + "__pivot_system(%r); print(%r)" % ("python3 -m pip" + s[4:], note)
        elif s.startswith("%cd"):
            line = pad + "import os as __pivot_os; __pivot_os.chdir(%r)" % s[3:].strip()
        lines.append(line)
    return "\n".join(lines)
_main(sys.argv[1])
""".replace("@NO_OUTPUT@", NO_OUTPUT)


def ipython_command(code: str) -> str:
    """The shell command that replays one IPython cell in the kernel-equivalent process (module docstring)."""
    return f"python3 -c {shlex.quote(_KERNEL.strip())} {shlex.quote(code)}"


def ipython_refusal(code: str) -> str | None:
    """Why a cell cannot be replayed (a magic the kernel-equivalent does not run), None when it can."""
    for line in code.split("\n"):
        s = line.strip()
        if s.startswith("%%"):
            return f"the cell magic {s.split()[0]!r} is not replayed"
        magic = _LINE_MAGIC.match(line)
        if magic and magic.group(1) not in _ALLOWED_MAGICS:
            return f"the magic %{magic.group(1)} is not replayed"
        if re.match(r"^[\w., ]+=\s*[!%]", s):
            return "an assignment from a shell command or magic (`x = !cmd`) is not replayed"
    return None


def recorded_cell(output: str) -> tuple[int | None, str | None]:
    """(exit code, comparable output) of a cell's recorded observation, as the replayed kernel prints them.

    The output loses OpenHands' trailer (the kernel's directory and interpreter); a traceback (an
    exception ended the cell) becomes exit code 1 and its last line ("NameError: ..."), after what
    the cell printed before it, which is what the replayed kernel prints for an exception. A cell
    OpenHands timed out is no record (None, None).
    """
    if output.startswith("[Execution timed out"):
        return None, None
    text = _TRAILER.sub("", output)
    found = _TRACEBACK.search(text)
    if found is None:
        return 0, text
    before = text[: found.start()]
    lines = [line for line in text[found.start() :].split("\n") if line.strip()]
    last = lines[-1].strip() if lines else ""
    return 1, (before.rstrip("\n") + "\n" + last) if before.strip() else last
