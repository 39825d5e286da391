"""pivot-verifier-ast: the `python_ast_equivalent` verifier, an example third-party pivot-gym plugin."""

from pivot_verifier_ast._canon import canonical_dump
from pivot_verifier_ast._extract import Piece, pieces
from pivot_verifier_ast.plugin import PythonAstEquivalent, register_verifiers

__all__ = ["Piece", "PythonAstEquivalent", "canonical_dump", "pieces", "register_verifiers"]
