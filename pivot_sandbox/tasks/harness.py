"""A task's tests: how they run (`TestPlan`), and the test run itself, as Terminal-Bench's harness runs it.

The tests run after the agent's commands, in the same container, but with nothing of the agent's
making: a fresh shell with the image's own environment (`env -i` plus the image's `Config.Env`, so
an exported `BASH_ENV`, `PYTHONPATH` or `PYTEST_PLUGINS` never reaches them), the tests and their
venv copied in only now (through the daemon, owned by root: the image's build set the venv aside,
`test_tools_tar`, as Terminal-Bench's harness installs the tests' tools only after the agent is
done, so an agent's `ls /opt` or `find /` sees what it saw in the run), the interpreter and the
rest checked against the container's change set first: a test run whose tools the agent changed
(the venv, the tests' folder, the interpreter and its standard library, `sitecustomize`, a pytest
configuration or `conftest.py` above the tests, an installed pytest plugin) is not run, and fails
with the path named. The status line carries a nonce the agent cannot know.
"""

from __future__ import annotations

import io
import json
import re
import secrets
import shlex
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pivot_core import user_cache_dir
from pivot_sandbox.contract.spec import DEFAULT_PATH
from pivot_sandbox.images.context_tar import checkout_mode

TESTS_VENV = "/opt/pivot-tests"
# the pytest plugins registered in the image as its build left it (the venv's and the image's own), one
# module a line: the only ones the test run loads (`run_argv`); written into the venv, set aside with it
PLUGINS_FILE = f"{TESTS_VENV}/pytest-plugins.txt"
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
TESTS_DIR = "/tests"
# Seconds a task's test run may take past its own `max_test_timeout_sec` (installing its runner, reading the log).
TESTS_GRACE = 60.0
TEST_LOG_TAIL = 200_000  # bytes of a test run's output kept: its end holds pytest's summary


@dataclass(frozen=True)
class TestPlan:
    """How a task's tests run: what is installed at build time and the script run afterwards.

    Attributes:
        pip: packages installed into the tests venv at build time (pytest and run-tests.sh's own).
        apt: Debian packages run-tests.sh installs (installed into the image at build time).
        script: the test script, with its installation lines removed, run with `TEST_DIR=/tests`.
        timeout: seconds the tests may run (task.yaml `max_test_timeout_sec`).
        problem: why the tests cannot run here, "" when they can.
    """

    pip: tuple[str, ...]
    apt: tuple[str, ...]
    script: str
    timeout: float
    problem: str = ""


_PIP = re.compile(r"^\s*(?:python3?\s+-m\s+)?(?:pip3?|uv\s+pip)\s+install\s+(.*)$")
_UV_ADD = re.compile(r"^\s*uv\s+add\s+(.*)$")
_APT = re.compile(r"^\s*(?:apt-get|apt)\s+(?:update|install)\b")


def test_plan(task_dir: Path, timeout: float, hosts: frozenset[str] | None = None) -> TestPlan:
    """Read run-tests.sh (or Terminal-Bench's default uv + pytest harness) into a `TestPlan`."""
    path = task_dir / "run-tests.sh"
    if not (task_dir / "tests").is_dir():
        return TestPlan((), (), "", timeout, "the task has no tests/ folder")
    if not path.is_file():
        script = f"cd {{workdir}} && pytest {TESTS_DIR}/test_outputs.py -rA"
        return TestPlan(("pytest",), (), script, timeout)
    pip, apt, kept = ["pytest"], [], []
    problem = ""
    for line in path.read_text(errors="replace").replace("\\\n", " ").splitlines():
        stripped = line.strip()
        if m := (_PIP.match(stripped) or _UV_ADD.match(stripped)):
            try:
                words = shlex.split(m.group(1).split(" #")[0])
            except ValueError:  # an unbalanced quote: plain words are close enough for package names
                words = m.group(1).split()
            for i, w in enumerate(words):
                if w in ("--index-url", "-i", "--extra-index-url") and i + 1 < len(words):
                    host = re.sub(r"^\w+://([^/]+).*$", r"\1", words[i + 1])
                    if hosts is not None and host not in hosts:
                        problem = f"run-tests.sh installs from {host}, outside the registries: {stripped[:80]!r}"
            pip += [w for i, w in enumerate(words) if not w.startswith("-") and not words[i - 1].startswith("--")]
        elif _APT.match(stripped):
            if "install" in stripped:
                apt += [w for w in stripped.split("install", 1)[1].split() if not w.startswith("-") and w != "&&"]
        elif "setup-uv-pytest.sh" in stripped:
            continue
        elif "run-uv-pytest.sh" in stripped:
            kept.append(f"pytest {TESTS_DIR}/test_outputs.py -rA")
        else:
            kept.append(re.sub(r"\bpython3?\s+-m\s+pytest\b", "pytest", line))
    return TestPlan(tuple(dict.fromkeys(pip)), tuple(dict.fromkeys(apt)), "\n".join(kept), timeout, problem)


@dataclass(frozen=True)
class TestOutcome:
    """The result of a test run: `passed` when every test passed (and at least one ran).

    `reward`: the float a Harbor task's test.sh wrote (reward.json, else reward.txt), None for a
    Terminal-Bench task (its tests pass or fail) and when none could be read.
    """

    passed: bool
    ran: bool
    counts: Mapping[str, int]
    reason: str
    reward: float | None = None


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A tests entry as a git checkout copied in leaves it: owned by root, mode 0644 or 0755.

    The task folder may be read-only (a shared data copy): tests that write beside themselves
    (`shutil.copytree(..., TEST_DIR + "/src")`) then failed where the test run's user lacks
    CAP_DAC_OVERRIDE (`checkout_mode`, as the image's copied files get).
    """
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    if info.isfile() or info.isdir():
        info.mode = checkout_mode(info.mode)
    return info


def test_tools_tar(image_id: str) -> Path:
    """Where this machine keeps the tests' venv that the build of the task image `image_id` set aside.

    Its entries are named `pivot-tests/...`: it unpacks into `TESTS_VENV`'s parent. Keyed by the
    image's id, so every tag of one image (a bundled task's stable name) finds it. In the user's own
    cache whatever `PIVOT_CACHE_DIR` says, as the engine's images are one store for all processes:
    a process with a cache of its own (the docs examples' runs) found no venv for an image that had
    one, built the image again, and moved the stable name away from every other process's venv.
    """
    return user_cache_dir("test-tools", image_id.removeprefix("sha256:")[:32] + ".tar")


def tests_tar(tests: Path) -> bytes:
    """The task's `tests/` folder as a tar to unpack at `/` (entries under `tests/`, owned by root)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(tests), arcname=TESTS_DIR.lstrip("/"), filter=_owned_by_root)
    return buf.getvalue()


# What the test run executes or reads besides the tests, which a candidate must not have changed: the
# programs a test script starts by name that the tests' venv (first on the PATH) does not provide,
# wherever on the PATH a copy of them would be found first (a `bash` in /usr/local/sbin shadows
# /bin/bash); python, pytest and pip are the venv's, so an agent's `pip install pytest` shadows nothing.
# Also the dynamic loader's preload and cache files (a preloaded library runs in every program), and
# pytest's configuration above the tests.
HARNESS_PROGRAMS = ("bash", "sh", "env", "tail", "uv", "uvx")
_TOOL_FILES = frozenset(
    {
        *(f"{d}/{n}" for d in DEFAULT_PATH.split(":") for n in HARNESS_PROGRAMS),
        *("/etc/ld.so.preload", "/etc/ld.so.cache", "/etc/ld.so.conf"),
        # pytest reads its configuration and conftest.py from the tests' folder and every folder above it
        *(f"/{n}" for n in ("conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")),
    }
)
_LOADER_CONFIG = "/etc/ld.so.conf.d/"
_INTERPRETER = re.compile(
    r"^/usr(/local)?/bin/python3[\d.]*$|^/usr(/local)?/lib/python3[\d.]*/(?!(site|dist)-packages(/|$))"
)
_STARTUP = re.compile(r"(^|/)(sitecustomize|usercustomize)(\.py|\.pyc|\.cpython-[^/]*\.pyc|/.*)?$")
# changed files whose content decides: an installed pytest plugin (auto-loaded), a .pth that runs code
SUSPECT_FILES = re.compile(r"(/entry_points\.txt|\.pth)$")


def tampered_tools(
    changed: Sequence[str],
    suspects: Mapping[str, str] = {},  # noqa: B006 - read only
    autoload: bool = True,
) -> list[str]:
    """Paths of the test run's own tools among the paths the agent changed (deleted included).

    `suspects` maps the changed `SUSPECT_FILES` to their content: a `.pth` file with an `import`
    line (run by every interpreter start) counts as tampering, and so does an `entry_points.txt`
    that registers a pytest plugin (`[pytest11]`) where the test run's pytest loads every registered
    plugin (`autoload`; Harbor's test.sh). Terminal-Bench's test run here loads only the plugins the
    image's build registered (`PLUGINS_FILE`): one the agent registered (anyio's, with every `pip
    install httpx`) is not loaded, and no tampering.
    """
    out = []
    for path in changed:
        if (
            path in (TESTS_VENV, TESTS_DIR)
            or path.startswith((TESTS_VENV + "/", TESTS_DIR + "/"))
            or path in _TOOL_FILES
            or path.startswith(_LOADER_CONFIG)
            or _INTERPRETER.search(path)
            or _STARTUP.search(path)
        ):
            out.append(path)
        elif path in suspects:
            text = suspects[path]
            if (autoload and "[pytest11]" in text) or any(line.startswith("import") for line in text.splitlines()):
                out.append(path)
    return sorted(out)


def run_argv(
    image_env: Sequence[str], plan: TestPlan, workdir: str, nonce: str, plugins: Sequence[str] = ()
) -> list[str]:
    """The test run's command: a fresh shell with the image's own environment, as Terminal-Bench's harness has it.

    `env -i` leaves out everything but the image's `Config.Env`: nothing the agent exported (an
    exported `BASH_ENV` made `bash -c` run the agent's script first, `PYTHONPATH` plus
    `PYTEST_PLUGINS` loaded its plugin), and `PYTHONNOUSERSITE` keeps the user's site folder out
    (what `python -I` would do, for the interpreter pytest's own script starts). Only the end of
    a long log is kept (the output cap would cut pytest's summary and the status line); pipefail
    keeps the tests' own status, which the nonce line reports. The harness's own programs are named
    by absolute path (`/usr/bin/env`, `/bin/bash`, `/usr/bin/tail`), never looked up on a PATH whose
    earlier folders the agent could fill; no bytecode or pytest cache is written, so nothing in the
    tests' folder changes while they run (`TestsFolder`). pytest loads no plugin by its entry
    point but `plugins` (the modules the image's build registered: `PLUGINS_FILE`), each by `-p`.
    """
    env = [e for e in image_env if "=" in e and not e.startswith(("PATH=", "BASH_ENV=", "ENV=", "LD_"))]
    path = next(
        (e[5:] for e in image_env if e.startswith("PATH=")),
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    )
    script = plan.script.replace("{workdir}", workdir)
    outer = (
        f"cd {shlex.quote(workdir)} 2>/dev/null; set -o pipefail; "
        f"/bin/bash --noprofile --norc -c {shlex.quote(script)} 2>&1 </dev/null | /usr/bin/tail -c {TEST_LOG_TAIL}; "
        f'st=$?; echo; echo "{nonce} $st"; exit $st'
    )
    fixed = [f"TEST_DIR={TESTS_DIR}", f"PATH={TESTS_VENV}/bin:{path}", "PYTHONNOUSERSITE=1", "HOME=/root"]
    loaded = "".join(f" -p {m}" for m in plugins if _MODULE.fullmatch(m))
    fixed += [
        "PYTHONDONTWRITEBYTECODE=1",
        f"PYTEST_ADDOPTS=-p no:cacheprovider{loaded}",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
    ]
    return ["/usr/bin/env", "-i", *env, *fixed, "/bin/bash", "--noprofile", "--norc", "-c", outer]


def new_nonce() -> str:
    """A status-line marker the agent cannot know."""
    return "pivot-tests-" + secrets.token_hex(8)


_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s", re.M)


def test_outcome(output: str, nonce: str, exit_code: int | None = None) -> TestOutcome:
    """Read a test run's output: pytest's `-rA` summary lines and the nonce status line.

    The status is the last nonce line (the harness prints it last; a program the tests ran may have
    read the nonce and printed one before), and where the runner reports the run's own exit status
    (`exit_code`), the two must agree.
    """
    found = re.findall(rf"^{re.escape(nonce)} (\d+)$", output, re.M)
    if found and exit_code is not None and int(found[-1]) != exit_code:
        return TestOutcome(False, False, {}, f"the status line says {found[-1]}, the test run exited {exit_code}")
    counts: dict[str, int] = {}
    for word in _SUMMARY.findall(output):
        counts[word] = counts.get(word, 0) + 1
    if not found:
        return TestOutcome(False, False, counts, "the test run did not finish (no status line)")
    status = int(found[-1])
    bad = counts.get("FAILED", 0) + counts.get("ERROR", 0)
    if status == 0 and counts.get("PASSED", 0) > 0 and bad == 0:
        return TestOutcome(True, True, counts, f"{counts['PASSED']} tests passed")
    if not counts:
        tail = output.strip().splitlines()[-3:]
        return TestOutcome(
            False, False, counts, f"tests exited {status} without a pytest summary: {' | '.join(tail)[:200]}"
        )
    return TestOutcome(False, True, counts, f"tests exited {status}: {json.dumps(counts, sort_keys=True)}")
