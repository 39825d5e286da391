"""The canonical AST: formatting, comments, docstrings and local names ignored; the rest kept."""

import pytest
from pivot_verifier_ast import canonical_dump


def same(a: str, b: str, script: bool = True) -> bool:
    return canonical_dump(a, script=script) == canonical_dump(b, script=script)


def test_formatting_comments_and_quotes_are_ignored():
    assert same("print('a',  1)  # hi", 'print(\n    "a", 1\n)')


def test_script_locals_are_renamed_canonically():
    assert same("x = 1\nfor i in range(3):\n    x += i\nprint(x)", "t = 1\nfor k in range(3):\n    t += k\nprint(t)")


def test_renaming_keeps_the_binding_structure():
    assert not same("a, b = 1, 2\nprint(a - b)", "a, b = 1, 2\nprint(b - a)")


def test_file_module_names_are_kept_but_function_locals_renamed():
    assert not same("x = 1\nprint(x)", "y = 1\nprint(y)", script=False)
    f1 = 'def total(values):\n    """Sum."""\n    result = 0\n    for v in values:\n        result += v\n'
    f1 += "    return result\n"
    f2 = "def total(values):\n    acc = 0\n    for item in values: acc += item\n    return acc\n"
    assert same(f1, f2, script=False)


def test_parameters_attributes_keywords_and_imports_are_kept():
    assert not same("def f(a):\n    return a", "def f(b):\n    return b", script=False)
    assert not same("o.x = 1", "o.y = 1")
    assert not same("f(key=1)", "f(other=1)")
    assert not same("import os\nprint(os.sep)", "import os as o\nprint(o.sep)")


def test_comprehension_closure_and_nonlocal_scopes():
    assert same("[x * 2 for x in xs if x]", "[y * 2 for y in xs if y]", script=False)
    g1 = "def f():\n    x = 1\n    def g():\n        nonlocal x\n        x += 1\n        return x\n    return g()"
    g2 = "def f():\n    z = 1\n    def g():\n        nonlocal z\n        z += 1\n        return z\n    return g()"
    assert same(g1, g2, script=False)


def test_indented_fragment_parses_and_bad_code_raises():
    assert same("    a = 1\n    b = a", "a = 1\nb = a", script=False)
    with pytest.raises(SyntaxError):
        canonical_dump("def broken(:\n", script=True)
