"""Every ```python and ```bash example in README.md and docs/ runs, unless marked as not meant to run.

A block is skipped from running only when the line before its fence is `<!-- no-run: REASON -->`
(the reason is required: a download, a GPU, minutes of training, a server to start). Python blocks
run as scripts in a fresh folder against the bundled data; bash blocks run under `bash -e` with
this venv's `pivot` on the PATH. Both see `PIVOT_NO_SHARED_DATA=1`, as on a fresh clone, and a
private cache folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
NO_RUN = re.compile(r"<!--\s*no-run(?::\s*(.*?))?\s*-->\s*\n$")
# what a runnable example must never do: it runs in the suite's own environment
UNSAFE = re.compile(r"\bpip3? (install|uninstall)\b|\.ci/run|\bapt(-get)? install\b|\bsudo\b")


@dataclass(frozen=True)
class Example:
    """One fenced block of a doc: its language, code, where it sits, and why it does not run (if so)."""

    doc: Path
    line: int
    lang: str
    code: str
    no_run: str | None

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def examples() -> list[Example]:
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for m in FENCE.finditer(text):
            if m.group(1) not in ("python", "bash"):
                continue
            before = text[: m.start()]
            mark = NO_RUN.search(before[-400:])
            found.append(
                Example(doc, before.count("\n") + 1, m.group(1), m.group(2), (mark.group(1) or "") if mark else None)
            )
    return found


EXAMPLES = examples()
RUNNABLE = [e for e in EXAMPLES if e.no_run is None]
# `<!-- needs-docker -->` before a fence: the example runs a sandboxed verdict (`pytest -m "not docker"` leaves it)
NEEDS_DOCKER = re.compile(r"<!--\s*needs-docker\s*-->\s*\n$")


def _param(e: Example):
    text = e.doc.read_text()
    start = sum(len(line) + 1 for line in text.split("\n")[: e.line - 1])
    marks = [pytest.mark.docker] if NEEDS_DOCKER.search(text[:start][-200:]) else []
    return pytest.param(e, id=e.id, marks=marks)


def test_every_example_not_run_says_why():
    assert EXAMPLES and RUNNABLE
    unexplained = [e.id for e in EXAMPLES if e.no_run is not None and len(e.no_run.strip()) < 8]
    assert not unexplained, f"<!-- no-run: REASON --> needs a reason: {unexplained}"


def test_no_runnable_example_installs_anything():
    unsafe = [e.id for e in RUNNABLE if UNSAFE.search(e.code)]
    assert not unsafe, f"these examples install software: mark them <!-- no-run: REASON -->: {unsafe}"


def _environ(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIVOT_")}
    env.update(
        PIVOT_PLUGINS="",
        PIVOT_NO_SHARED_DATA="1",
        PIVOT_CACHE_DIR=str(tmp_path / "cache"),
        PIVOT_CACHE=str(tmp_path / "cache" / "rewards.sqlite"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        COLUMNS="200",
    )
    return env


@pytest.mark.parametrize("example", [_param(e) for e in RUNNABLE])
def test_example_runs(example: Example, tmp_path):
    if UNSAFE.search(example.code):  # never run an install into the suite's venv, even when pending
        pytest.fail(f"{example.id} installs software; mark it <!-- no-run: REASON -->")
    if example.lang == "python":
        script = tmp_path / "example.py"
        script.write_text(example.code)
        argv = [sys.executable, str(script)]
    else:
        argv = ["bash", "-e", "-o", "pipefail", "-c", example.code]
    run = subprocess.run(argv, cwd=tmp_path, env=_environ(tmp_path), capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{example.id} failed:\n{example.code}\n--- output\n{run.stdout}\n{run.stderr}"


def test_score_takes_a_pivot_in_every_doc():
    # env.score(pivot, completions): an id there raised TypeError in three docs' examples
    wrong = re.compile(r"score\(\s*(PID|pivot_id|pid|info\[\"pivot_id\"\])\s*,")
    found = []
    for doc in DOCS:
        text = doc.read_text()
        found += [f"{doc.relative_to(REPO)}:{text[: m.start()].count(chr(10)) + 1}" for m in wrong.finditer(text)]
    assert not found, found


def test_the_training_guide_stays_a_guide_and_links_its_results():
    text = (REPO / "docs" / "training.md").read_text()
    assert len(text.splitlines()) < 250 and "results/training.md" in text
    assert (REPO / "docs" / "results" / "training.md").is_file()
