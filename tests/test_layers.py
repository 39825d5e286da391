"""The layers hold: lint-imports' contract, public surfaces between packages, imports in any order."""

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# the packages, bottom floor first, as the import-linter contract names them (one list for every check)
PACKAGES = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"])


def _package_files():
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "data" not in path.relative_to(ROOT / package).parts:
                yield package, path


def test_lint_imports_keeps_every_contract():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    proc = subprocess.run([exe], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "broken" in proc.stdout and "0 broken" in proc.stdout


def test_packages_reach_each_other_only_through_their_public_surface():
    offenders = []
    for package, path in _package_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                top, *rest = node.module.split(".")
                if top in PACKAGES and top != package and any(part.startswith("_") for part in rest):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {node.module}")
                # `from pkg.sub import _private` reaches a private module (or name) just the same
                hidden = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if top in PACKAGES and top != package and hidden:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {hidden} from {node.module}")
    assert not offenders, "\n".join(offenders)


def _public_modules():
    out = []
    for _, path in _package_files():
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] == "__main__" or any(p.startswith("_") for p in parts[1:]):
            continue
        out.append(".".join(parts))
    return sorted(set(out))


@pytest.mark.parametrize("order", [PACKAGES, tuple(reversed(PACKAGES))], ids=["ground-first", "top-first"])
def test_every_public_module_imports_in_a_fresh_interpreter_in_either_order(order):
    modules = [m for top in order for m in _public_modules() if m.split(".")[0] == top]
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\nprint('ok')"
    proc = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def test_no_library_file_is_over_500_lines_and_the_verifiers_hold_at_most_a_quarter():
    # STYLE rule 1 (one concept per file) and the house issue: no room turns into a warehouse again
    lines = {path: len(path.read_text(encoding="utf-8").splitlines()) for _, path in _package_files()}
    long = sorted(f"{p.relative_to(ROOT)}: {n}" for p, n in lines.items() if n > 500)
    assert not long, long
    verifiers = sum(n for p, n in lines.items() if p.relative_to(ROOT).parts[0] == "verifiers_plugins")
    assert verifiers <= sum(lines.values()) / 4, (verifiers, sum(lines.values()))
