"""Canonical form of Python source: its AST, with docstrings dropped and local names renamed.

Two snippets are equivalent when their canonical dumps are equal. What is ignored: formatting,
comments, quote style, docstrings, and the names of local variables (numbered in order of first
appearance). What is kept: everything else, including attribute names, keyword-argument names,
imported names, parameters (callers may pass them by keyword) and module-level names of files
(other modules may import them). In a *script* (`python -c`, `python - <<EOF`, a python tool
call) module-level names are local to the run, so they are renamed too.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = (*_FUNCTIONS, ast.ClassDef, *_COMPREHENSIONS)


def canonical_dump(code: str, *, script: bool, rename_locals: bool = True, drop_docstrings: bool = True) -> str:
    """The canonical AST dump of `code` (dedented first, so an indented edit fragment parses).

    Args:
        code: Python source.
        script: True when module-level names are local to this run (`python -c`).
        rename_locals: rename local variables canonically.
        drop_docstrings: leave docstrings out of the comparison.

    Raises:
        SyntaxError: the code does not parse.
    """
    tree = ast.parse(textwrap.dedent(code).strip("\n") + "\n")
    if drop_docstrings:
        _drop_docstrings(tree)
    if rename_locals:
        _Renamer(tree, script).visit(tree)
    return ast.dump(tree, annotate_fields=True, include_attributes=False)


def _drop_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                node.body = node.body[1:] or [ast.Pass()]


def _params(node: ast.AST) -> set[str]:
    if not isinstance(node, _FUNCTIONS):
        return set()
    a = node.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return set(names)


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """Nodes evaluated in `scope` itself (nested scopes are yielded but not entered)."""
    if isinstance(scope, ast.Lambda):
        todo: list[ast.AST] = [scope.body]
    elif isinstance(scope, _COMPREHENSIONS):
        todo = list(scope.generators)
    else:
        todo = list(getattr(scope, "body", []))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))


def _bound_names(scope: ast.AST) -> set[str]:
    """Names a scope binds: assignments, loop/with targets, except names, nested defs.

    Parameters, imports and names declared global or nonlocal are left out.
    """
    bound: set[str] = set()
    declared: set[str] = set()
    for node in _own_nodes(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
    return bound - declared - _params(scope)


class _Renamer(ast.NodeVisitor):
    """Renames, in place, every name bound by a renamable scope, numbering them in visit order."""

    def __init__(self, tree: ast.AST, script: bool) -> None:
        self.bound = {id(n): _bound_names(n) for n in ast.walk(tree) if isinstance(n, (ast.Module, *_SCOPES))}
        self.renamable = {id(n) for n in ast.walk(tree) if isinstance(n, (*_FUNCTIONS, *_COMPREHENSIONS))}
        if script:
            self.renamable.add(id(tree))
        self.stack: list[ast.AST] = []
        self.names: dict[tuple[int, str], str] = {}

    def lookup(self, name: str) -> str:
        for depth, scope in enumerate(reversed(self.stack)):
            if isinstance(scope, ast.ClassDef) and depth > 0:
                continue  # class bodies are not enclosing scopes for the functions inside them
            if name in self.bound[id(scope)]:
                if id(scope) not in self.renamable:
                    return name
                key = (id(scope), name)
                # "<" cannot start an identifier, so a canonical name never meets a real one.
                return self.names.setdefault(key, f"<local{len(self.names)}>")
        return name

    def in_scope(self, scope: ast.AST, *parts: ast.AST | list | None) -> None:
        self.stack.append(scope)
        for part in parts:
            for node in part if isinstance(part, list) else [part]:
                if node is not None:
                    self.visit(node)
        self.stack.pop()

    def visit_Module(self, node: ast.Module) -> None:
        self.in_scope(node, node.body)

    def visit_Name(self, node: ast.Name) -> None:
        node.id = self.lookup(node.id)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            node.name = self.lookup(node.name)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        node.names = [self.lookup(n) for n in node.names]

    visit_Nonlocal = visit_Global

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        node.name = self.lookup(node.name)
        for part in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults, node.returns):
            if part is not None:
                self.visit(part)
        self.in_scope(node, node.body)

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for part in (*node.args.defaults, *node.args.kw_defaults):
            if part is not None:
                self.visit(part)
        self.in_scope(node, node.body)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        node.name = self.lookup(node.name)
        for part in (*node.decorator_list, *node.bases, *node.keywords):
            self.visit(part)
        self.in_scope(node, node.body)

    def _comprehension(self, node: ast.AST) -> None:
        first, *rest = node.generators  # type: ignore[attr-defined]
        self.visit(first.iter)  # the first iterable is evaluated in the enclosing scope
        parts: list = [first.target, *first.ifs]
        for gen in rest:
            parts += [gen.iter, gen.target, *gen.ifs]
        elts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]  # type: ignore[attr-defined]
        self.in_scope(node, parts, elts)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension
