"""`python_ast_equivalent`: accept Python that is the expert's Python up to formatting and local names.

Registered only through the public hook `register_verifiers`, found through the entry point
`python_ast_equivalent` in the group `pivot` (see this package's pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pivot_verifier_ast._canon import canonical_dump
from pivot_verifier_ast._extract import Piece, has_python, pieces
from verifiers_plugins import Verdict, hookimpl


class PythonAstEquivalent:
    """Accepts a candidate whose Python (edits, file writes, `python -c` scripts) has the expert's AST.

    The action is split into commands / tool calls (`pieces`); each must pair up with the
    expert's in order: the same kind, the same surroundings (tool arguments, the rest of the
    shell command), and Python whose canonical AST is equal (formatting, comments, docstrings
    and local names ignored). A pivot whose expert runs or writes no Python is not applicable.
    When the expert's code does not parse on its own (an edit that cuts a block in half), its
    non-blank lines are compared with whitespace collapsed instead.

    Args:
        rename_locals: treat local variable names as irrelevant.
        drop_docstrings: leave docstrings out of the comparison.
    """

    role = "acceptor"
    cost = "cheap"
    deterministic = True
    version = "2"  # 2: only commands the terminal runs; escaped operators are not operators

    def __init__(self, rename_locals: bool = True, drop_docstrings: bool = True) -> None:
        self.options = {"rename_locals": bool(rename_locals), "drop_docstrings": bool(drop_docstrings)}

    def verify(self, pivot: Any, action: Any) -> Verdict:
        """Compare the Python of `action` with the Python of `pivot.expert`."""
        want = pieces(pivot.expert)
        if not has_python(want):
            return Verdict.skip("the expert action runs or writes no Python")
        got = pieces(action)
        if not has_python(got):
            return Verdict.reject("the candidate runs or writes no Python")
        if len(got) != len(want):
            return Verdict.reject(f"expected {len(want)} command(s) or tool call(s), got {len(got)}")
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            problem = self._compare(w, g)
            if problem:
                return Verdict.reject(f"piece {i + 1}: {problem}", piece=i + 1, kind=w.kind)
        return Verdict.accept(
            "same Python AST as the expert (formatting and local names ignored)",
            pieces=len(want),
            kinds=[p.kind for p in want],
        )

    def _compare(self, want: Piece, got: Piece) -> str:
        if want.kind != got.kind:
            return f"expected a {want.kind} piece, got {got.kind}"
        if want.context != got.context:
            return "the command or tool arguments around the Python differ"
        if want.kind == "other":
            return ""
        script = want.kind == "script"
        try:
            expected = canonical_dump(want.code, script=script, **self.options)
        except SyntaxError:
            same = _lines(want.code) == _lines(got.code)
            return "" if same else "the code differs (the expert's fragment does not parse: compared as text)"
        try:
            candidate = canonical_dump(got.code, script=script, **self.options)
        except SyntaxError as e:
            return f"the candidate's Python does not parse: {e.msg} (line {e.lineno})"
        return "" if candidate == expected else "the Python AST differs from the expert's"


def _lines(code: str) -> list[str]:
    return [" ".join(line.split()) for line in code.splitlines() if line.strip()]


@hookimpl
def register_verifiers(register: Callable[..., None]) -> None:
    """Register `python_ast_equivalent`."""
    register("python_ast_equivalent", PythonAstEquivalent)
