"""Task folders without Docker: the Dockerfile reader, test plans, compose files, build access, test outcomes."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from pivot_sandbox.contract.equivalents import registry_equivalent
from pivot_sandbox.images import access as _access
from pivot_sandbox.images import bases as _bases
from pivot_sandbox.images import build as _build
from pivot_sandbox.images import context_tar as _context_tar
from pivot_sandbox.images import dockerfile as df
from pivot_sandbox.tasks import harness as _task_tests
from pivot_sandbox.tasks import terminal_bench as _tasks
from pivot_sandbox.tasks.tests_venv import tools_steps

REGISTRIES = frozenset({"deb.example", "pypi.example"})


def test_parse_joins_continuations_drops_comments_and_reads_heredocs():
    text = (
        "# a comment\n"
        "FROM --platform=linux/amd64 some/t-bench/python-3-13:latest\n"
        "RUN apt-get update && \\\n"
        "    # dropped inside a continuation\n"
        "    apt-get install -y git\n"
        "COPY <<EOT /app/notes.txt\n"
        "line one\n"
        "EOT\n"
        'ENV A=1 B="two words"\n'
        "COPY --chown=1000:1000 src/ /app/src/\n"
    )
    ins = df.parse(text, "Dockerfile")
    assert [i.keyword for i in ins] == ["FROM", "RUN", "COPY", "ENV", "COPY"]
    assert ins[0].flags == {"platform": "linux/amd64"} and ins[0].args == "some/t-bench/python-3-13:latest"
    assert ins[1].args == "apt-get update && apt-get install -y git"
    assert ins[2].heredocs == ("line one\n",) and ins[2].line == 6
    assert df._pairs(ins[3].args, ins[3].where) == {"A": "1", "B": "two words"}
    assert ins[4].flags == {"chown": "1000:1000"}


def test_parse_errors_name_file_and_line():
    with pytest.raises(df.DockerfileError, match=r"Dockerfile:2: unknown instruction 'FORM'"):
        df.parse("FROM x\nFORM y\n", "Dockerfile")
    with pytest.raises(df.DockerfileError, match=r"Dockerfile:1: no FROM instruction"):
        df.parse("RUN true\n", "Dockerfile")
    # two stages are read and built (tests/pivot_sandbox/test_build_stages.py); a copy from an image is refused
    with pytest.raises(df.DockerfileError, match=r"Dockerfile:3: COPY --from=alpine:3.20: the image 'alpine:3.20'"):
        _build.check_supported(df.parse("FROM a\nFROM b AS c\nCOPY --from=alpine:3.20 /x /x\n", "Dockerfile"))
    with pytest.raises(df.DockerfileError, match=r"Dockerfile:2: here-document <<EOT is never closed"):
        df.parse("FROM a\nRUN cat <<EOT\nno end\n", "Dockerfile")


def test_substitute_expands_like_docker():
    values = {"HOME": "/root", "EMPTY": ""}
    assert df.substitute("$HOME/x ${HOME}/y ${EMPTY:-dflt} ${HOME:+set} ${NOPE}", values) == "/root/x /root/y dflt set "


def test_foreign_hosts_are_named_and_registries_pass():
    ins = df.parse(
        "FROM a\nRUN apt-get install -y curl\nRUN git clone https://github.com/x/y.git\n"
        "RUN pip install --index-url https://pypi.example/simple z\n",
        "Dockerfile",
    )
    found = df.foreign_hosts(ins, REGISTRIES)
    assert [(h, i.line) for h, i in found] == [("github.com", 3)]


def test_a_host_held_in_a_build_argument_is_named_before_the_build():
    # TB2's bn-fit-modify: `ARG BN_URL=https://raw.githubusercontent.com/...` then `RUN curl "${BN_URL}"`
    ins = df.parse(
        "FROM a\nARG DATA_URL=https://raw.githubusercontent.com/o/r/main/d.csv\nENV MIRROR=https://example.org\n"
        'RUN curl -fsSL "${DATA_URL}" -o d.csv\nRUN curl $MIRROR/x\nRUN echo ${UNSET}\n',
        "Dockerfile",
    )
    found = df.foreign_hosts(ins, REGISTRIES)
    assert [(h, i.line) for h, i in found] == [("raw.githubusercontent.com", 4), ("example.org", 5)]


def test_copy_outside_the_context_is_refused(tmp_path: Path):
    (tmp_path / "ctx").mkdir()
    (tmp_path / "secret").write_text("x")
    ins = df.parse("FROM a\nCOPY ../secret /app/\n", "Dockerfile")[1]
    with pytest.raises(df.DockerfileError, match="outside the build context"):
        df.copy_sources(ins, tmp_path / "ctx", {})
    missing = df.parse("FROM a\nCOPY nothere /app/\n", "Dockerfile")[1]
    with pytest.raises(df.DockerfileError, match=r"Dockerfile:2: 'nothere' is not in the task folder"):
        df.copy_sources(missing, tmp_path / "ctx", {})


def _task_folder(tmp_path: Path, run_tests: str | None, compose: str | None = None) -> Path:
    folder = tmp_path / "demo-task"
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_outputs.py").write_text("def test_ok():\n    assert True\n")
    (folder / "task.yaml").write_text("instruction: do it\nmax_test_timeout_sec: 30\n")
    (folder / "Dockerfile").write_text("FROM t-bench/python-3-13:latest\n")
    if run_tests is not None:
        (folder / "run-tests.sh").write_text(run_tests)
    if compose is not None:
        (folder / "docker-compose.yaml").write_text(compose)
    return folder


def test_test_plan_moves_installs_to_build_time(tmp_path: Path):
    folder = _task_folder(
        tmp_path,
        "#!/bin/bash\nsource $TEST_DIR/setup-uv-pytest.sh\nuv add pandas pyarrow\npip install -q requests\n"
        "apt-get update && apt-get install -y ffmpeg\npython -m pytest $TEST_DIR/test_outputs.py -rA\n",
    )
    plan = _tasks.load_task(folder).tests
    assert plan.pip == ("pytest", "pandas", "pyarrow", "requests")
    assert plan.apt == ("ffmpeg",)
    assert "pip install" not in plan.script and "uv add" not in plan.script
    assert "pytest $TEST_DIR/test_outputs.py -rA" in plan.script
    assert plan.timeout == 30.0 and plan.problem == ""


def test_test_plan_names_an_index_outside_the_registries(tmp_path: Path):
    folder = _task_folder(tmp_path, "pip install torch --index-url https://download.example/whl/cpu\npytest x\n")
    plan = _task_tests.test_plan(folder, 60.0, REGISTRIES)
    assert "download.example" in plan.problem


def test_default_harness_without_run_tests(tmp_path: Path):
    plan = _tasks.load_task(_task_folder(tmp_path, None)).tests
    assert plan.pip == ("pytest",) and "test_outputs.py -rA" in plan.script


def test_compose_one_client_service_builds_from_its_context(tmp_path: Path):
    compose = "services:\n  client:\n    build:\n      context: client\n      dockerfile: Dockerfile\n"
    folder = _task_folder(tmp_path, None, compose)
    (folder / "client").mkdir()
    (folder / "client" / "Dockerfile").write_text("FROM debian:bullseye-slim\n")
    task = _tasks.load_task(folder)
    assert task.compose == "" and task.context == (folder / "client").resolve()
    assert task.dockerfile.startswith("FROM debian:bullseye-slim")


def test_compose_with_registry_services_is_a_precise_skip(tmp_path: Path):
    compose = "services:\n  client:\n    build: .\n  node1:\n    image: vendor/minio:1\n"
    task = _tasks.load_task(_task_folder(tmp_path, None, compose))
    assert "2 services" in task.compose and "'node1' runs image 'vendor/minio:1'" in task.compose


def test_broken_task_yaml_names_file_and_line(tmp_path: Path):
    folder = _task_folder(tmp_path, None)
    (folder / "task.yaml").write_text("instruction: ok\n  bad: [\n")
    with pytest.raises(_tasks.TaskError, match=r"task.yaml:\d+: task.yaml is not valid YAML"):
        _tasks.load_task(folder)


def test_base_names_map_without_registry_hosts():
    assert _bases.map_base("ghcr.io/laude-institute/t-bench/python-3-13:latest").tag.endswith("python-3-13")
    assert _bases.map_base("ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest").root == "pivot-gym/root:trixie"
    # pins made for 3.8/3.9 (fix-pandas-version: pandas 1.3, numpy 1.21) have wheels for bullseye's 3.9 only
    assert _bases.map_base("python:3.8-slim-bookworm").root == "pivot-gym/root:bullseye"
    assert _bases.map_base("python:3.9-slim-bookworm").root == "pivot-gym/root:bullseye"
    assert _bases.map_base("python:3.10-slim-bookworm").root == "pivot-gym/root:bookworm"
    assert _bases.map_base("debian:bullseye-slim").root == "pivot-gym/root:bullseye"
    assert _bases.map_base("localstack/localstack:4.3") is None


def test_test_outcome_needs_the_nonce_and_a_clean_summary():
    nonce = "pivot-tests-0123"
    good = "PASSED tests/test_outputs.py::test_a\nPASSED tests/test_outputs.py::test_b\n\npivot-tests-0123 0\n"
    assert _task_tests.test_outcome(good, nonce).passed
    failed = "PASSED t::a\nFAILED t::b - assert\n\npivot-tests-0123 1\n"
    assert not _task_tests.test_outcome(failed, nonce).passed
    # a candidate that prints a status line cannot know the nonce
    forged = "PASSED t::a\n\npivot-tests-ffff 0\n"
    outcome = _task_tests.test_outcome(forged, nonce)
    assert not outcome.passed and not outcome.ran
    assert not _task_tests.test_outcome("\npivot-tests-0123 0\n", nonce).passed  # no test ran at all
    # a program the tests ran read the nonce and printed a passing status first: the last line and the
    # runner's exit status decide (issue 38, D5)
    early = "PASSED t::a\npivot-tests-0123 0\nFAILED t::b\n\npivot-tests-0123 1\n"
    assert not _task_tests.test_outcome(early, nonce).passed
    assert not _task_tests.test_outcome(good, nonce, exit_code=1).passed
    assert _task_tests.test_outcome(good, nonce, exit_code=0).passed


def test_the_test_run_starts_from_the_images_environment_only(tmp_path: Path):
    plan = _tasks.load_task(_task_folder(tmp_path, None)).tests
    image_env = ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "BASH_ENV=/etc/image-bashenv"]
    argv = _task_tests.run_argv(image_env, plan, "/app", "pivot-tests-1")
    # nothing inherited: env -i, then the image's variables and the run's own, then a shell without rc files
    # the harness's programs by absolute path: a copy earlier on the PATH is never the one run (issue 38, D5)
    assert argv[:2] == ["/usr/bin/env", "-i"] and "LANG=C.UTF-8" in argv
    assert not any(a.startswith("BASH_ENV=") for a in argv)
    assert f"PATH={_task_tests.TESTS_VENV}/bin:/usr/local/bin:/usr/bin:/bin" in argv
    assert argv[-5:-1] == ["/bin/bash", "--noprofile", "--norc", "-c"]
    assert argv[-1].endswith('echo "pivot-tests-1 $st"; exit $st') and "| /usr/bin/tail " in argv[-1]


def test_the_test_runs_own_tools_changed_by_the_agent_are_named():
    changed = [
        "/app/hello.txt",
        "/usr/local/lib/python3.13/dist-packages/requests/__init__.py",  # pip installs: allowed
        f"{_task_tests.TESTS_VENV}/bin/pytest",
        "/usr/lib/python3.13/json/__init__.py",
        "/conftest.py",
        "/app/sitecustomize.py",
        "/usr/local/lib/python3.13/dist-packages/evil-1.0.dist-info/entry_points.txt",
        "/usr/local/lib/python3.13/dist-packages/ok-1.0.dist-info/entry_points.txt",
    ]
    suspects = {
        changed[-2]: "[pytest11]\nevil = evil.plugin\n",
        changed[-1]: "[console_scripts]\nok = ok:main\n",
    }
    assert _task_tests.tampered_tools(changed, suspects) == sorted(changed[2:7])
    # where the test run loads only the plugins the image's build registered, one the agent registered is
    # not loaded: no tampering (anyio's, with every `pip install httpx`)
    assert _task_tests.tampered_tools(changed, suspects, autoload=False) == sorted(changed[2:6])


def test_the_test_run_loads_only_the_plugins_the_image_build_registered(tmp_path: Path):
    plan = _tasks.load_task(_task_folder(tmp_path, None)).tests
    plugins = ["anyio.pytest_plugin", "xdist.plugin", "evil; rm -rf /", "-p"]
    argv = _task_tests.run_argv(["PATH=/usr/bin:/bin"], plan, "/app", "pivot-tests-1", plugins)
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1" in argv
    # module names only: anything else in the list is dropped, never a word of the command line
    assert "PYTEST_ADDOPTS=-p no:cacheprovider -p anyio.pytest_plugin -p xdist.plugin" in argv


def test_build_access_reads_the_machine_and_keeps_file_indexes_out(monkeypatch):
    sources = [
        _access.AptSource("http://mirror.example/debian", ("bookworm", "bookworm-updates"), ("main",), False),
        _access.AptSource("http://mirror.example/debian-security", ("bookworm-security",), ("main",), True),
    ]
    monkeypatch.setattr(_access, "apt_sources", lambda: sources)
    monkeypatch.setattr(_access, "machine_codename", lambda: "bookworm")
    text = _access.sources_for("trixie")
    assert text.splitlines() == [
        "deb http://mirror.example/debian trixie main",
        "deb http://mirror.example/debian trixie-updates main",
        "deb http://mirror.example/debian-security trixie-security main",
    ]
    config = {"index-url": "https://pypi.example/simple", "extra-index-url": "file:///opt/x https://more.example/s"}
    monkeypatch.setattr(_access, "_pip_config", lambda: config)
    assert _access.pip_indexes() == ("https://pypi.example/simple", ["https://more.example/s"])
    assert {"mirror.example", "pypi.example", "more.example"} <= _access.registry_hosts()


def _pivot(context: dict, n_history: int = 1):
    import json

    from pivot_envs import Message, Pivot

    def turn(command: str) -> Message:
        body = {"analysis": "", "plan": "", "commands": [{"keystrokes": command + "\n"}]}
        return Message("assistant", json.dumps(body))

    history = (Message("user", "task"),) + tuple(
        m for i in range(n_history) for m in (turn(f"echo {i}"), Message("user", "out"))
    )
    return Pivot(id="t#1", domain="terminal", history=history, expert=turn("echo expert"), context=context)


def test_task_tests_without_a_usable_task_is_a_skip_or_an_error_never_a_raise(tmp_path: Path):
    from pivot_envs import Message
    from verifiers_plugins.builtin.task_tests import TaskTests

    verifier = TaskTests()
    action = Message("assistant", '{"analysis": "", "plan": "", "commands": [{"keystrokes": "ls\\n"}]}')
    sandbox = {"image": "pivot-gym/task:x", "workdir": "/app", "user": "root"}
    assert not verifier.verify(_pivot({"sandbox": sandbox}), action).applicable
    gone = {"sandbox": sandbox, "task": {"dir": str(tmp_path / "gone"), "solution": ["echo 0", "echo expert"]}}
    verdict = verifier.verify(_pivot(gone), action)
    assert verdict.error and "no task.yaml" in verdict.error and verdict.reward == 0.0
    # final mode applies at the last pivot of the solution only
    longer = {**gone, "task": {**gone["task"], "solution": ["echo 0", "echo expert", "echo more"]}}
    assert not TaskTests(mode="final").verify(_pivot(longer), action).applicable
    with pytest.raises(ValueError, match="mode"):
        TaskTests(mode="sometimes")


def test_registry_equivalents_replace_only_fetches_a_registry_also_serves():
    torch = "pip install torch==2.7.0 torchvision==0.22.0 --index-url https://download.pytorch.org/whl/cpu && ls"
    assert registry_equivalent(torch) == "pip install torch==2.7.0 torchvision==0.22.0 && ls"
    script = "apt-get install -y curl\ncurl -LsSf https://astral.sh/uv/install.sh | sh\nsource $HOME/.local/bin/env\n"
    out = registry_equivalent(script)
    assert "astral.sh" not in out and "pip install --quiet --user --break-system-packages uv" in out
    assert out.startswith("apt-get install -y curl\n") and out.endswith("source $HOME/.local/bin/env\n")
    assert r"printf 'native-tls = true\n'" in out  # the replacement's own backslashes are kept
    # other hosts, and other indexes, stay as they are: the build names them and skips
    for kept in (
        "pip install torch --index-url https://download.pytorch.org/whl/cu121",
        "pip install x --index-url https://pypi.example.org/simple",
        "curl -LsSf https://astral.sh/ruff/install.sh | sh",
        "wget https://github.com/x/y/releases/latest/download/z",
    ):
        assert registry_equivalent(kept) == kept


def test_get_pip_from_bootstrap_becomes_the_interpreters_ensurepip_and_the_solution_runs():
    import subprocess

    from pivot_tasks import skip_reason

    # broken-python's solution: the file it fetches from bootstrap.pypa.io, then `python get-pip.py`
    fetch = (
        'python -c "import urllib.request; '
        "urllib.request.urlretrieve('https://bootstrap.pypa.io/get-pip.py', 'get-pip.py')\""
    )
    record = {"solution_commands": [fetch, "python get-pip.py"]}
    assert "bootstrap.pypa.io" in skip_reason(record, REGISTRIES)
    replaced = [registry_equivalent(c) for c in record["solution_commands"]]
    assert "bootstrap.pypa.io" not in replaced[0] and replaced[0].endswith("> get-pip.py")
    assert skip_reason({"solution_commands": replaced}, REGISTRIES) is None
    for form, out in (
        ("curl -sS -o /tmp/gp.py https://bootstrap.pypa.io/get-pip.py", "/tmp/gp.py"),
        ("wget -O gp.py https://bootstrap.pypa.io/get-pip.py", "gp.py"),
    ):
        assert registry_equivalent(form).endswith(f"> {out}"), form
    # what it writes is a Python script that runs ensurepip with the interpreter that runs it
    script = subprocess.run(
        ["sh", "-c", registry_equivalent(fetch).replace("> get-pip.py", "")], capture_output=True, text=True, check=True
    ).stdout
    assert "ensurepip" in script and "--upgrade" in script
    compile(script, "get-pip.py", "exec")
    # a pipe into python is not a file fetch: it stays, and the build names the host
    piped = "curl https://bootstrap.pypa.io/get-pip.py | python"
    assert registry_equivalent(piped) == piped


def test_a_copied_script_that_fetches_uv_builds_and_other_hosts_still_skip(tmp_path: Path):
    folder = _task_folder(tmp_path, None)
    (folder / "install.sh").write_text("apt-get install -y curl\ncurl -LsSf https://astral.sh/uv/install.sh | sh\n")
    (folder / "fetch.sh").write_text("wget https://github.com/x/y/archive/z.tar.gz\n")
    text = "FROM t-bench/python-3-13\nWORKDIR /app\nCOPY install.sh fetch.sh /app/\nRUN bash /app/install.sh\n"
    instructions = df.parse(text, "Dockerfile")
    task = _tasks.load_task(folder)
    assert _tasks.script_hosts(task, instructions, REGISTRIES) == []  # fetch.sh is copied but never run
    run_both = df.parse(text + "RUN bash /app/fetch.sh\n", "Dockerfile")
    assert _tasks.script_hosts(task, run_both, REGISTRIES) == [("fetch.sh", "github.com")]
    # the copy the build puts into the image holds the registry's equivalent
    data = _context_tar.context_tar([folder / "install.sh"], "app", True, False, registry_equivalent)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        body = tar.extractfile("app/install.sh").read().decode()
    assert "astral.sh" not in body and "uv" in body


def test_copied_files_have_the_modes_of_a_git_checkout_whatever_the_folders_copy_has(tmp_path: Path):
    # the shared task folders are a read-only copy (0444 files, 0555 folders); the task's own image,
    # built from its git tree, has 0644 and 0755: an agent's `ls -la` and a write as a user see that
    folder = tmp_path / "ctx"
    (folder / "sub").mkdir(parents=True)
    (folder / "data.csv").write_text("a,b\n")
    (folder / "run.sh").write_text("echo hi\n")
    (folder / "sub" / "notes.txt").write_text("x\n")
    for path, mode in ((folder / "data.csv", 0o444), (folder / "run.sh", 0o555), (folder / "sub" / "notes.txt", 0o600)):
        path.chmod(mode)
    (folder / "sub").chmod(0o555)
    try:
        data = _context_tar.context_tar([folder], "app", True, False)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            modes = {m.name: m.mode & 0o7777 for m in tar.getmembers()}
            assert tar.extractfile("app/run.sh").read() == b"echo hi\n"
    finally:
        (folder / "sub").chmod(0o755)
    assert modes == {"app/data.csv": 0o644, "app/run.sh": 0o755, "app/sub": 0o755, "app/sub/notes.txt": 0o644}


def test_a_torch_index_step_maps_to_pypi_and_the_tests_venv_reuses_the_image_torch(tmp_path: Path):
    ins = df.parse("FROM x\nRUN pip install torch==2.7.0 --index-url https://download.pytorch.org/whl/cpu\n")[1]
    ins = _tasks.equivalent_instruction(ins)
    assert ins.args == "pip install torch==2.7.0" and df.foreign_hosts([ins], REGISTRIES) == []
    folder = _task_folder(tmp_path, "pip install torch==2.7.0 --index-url https://download.pytorch.org/whl/cpu\n")
    before, after = tools_steps(_tasks.load_task(folder).tests)
    # pytest first (a Dockerfile may break pip later); torch after the task's steps, where the venv
    # (with the system site-packages) finds the torch the Dockerfile installed
    assert "pytest" in before and "torch" not in before
    install, listing = after.splitlines()  # then the plugins the build registered are listed
    assert "torch==2.7.0" in install and "pytest" not in install.replace(_task_tests.TESTS_VENV, "")
    assert listing.endswith(f"> {_task_tests.PLUGINS_FILE}")


def test_tests_are_delivered_writable_by_root_from_a_read_only_task_folder(tmp_path: Path):
    # the shared task folders are read-only (mode 555); a test run without CAP_DAC_OVERRIDE, a test that
    # copies files beside itself (fix-pandas-version: copytree into TEST_DIR) failed to collect
    folder = _task_folder(tmp_path, None)
    (folder / "tests" / "test_outputs.py").chmod(0o444)
    (folder / "tests").chmod(0o555)
    try:
        data = _task_tests.tests_tar(folder / "tests")
    finally:
        (folder / "tests").chmod(0o755)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
    assert {m.name for m in members} == {"tests", "tests/test_outputs.py"}
    assert all(m.uid == 0 and m.gid == 0 and m.mode & 0o200 for m in members), [(m.name, oct(m.mode)) for m in members]


def test_overlapping_raised_client_timeouts_end_at_the_clients_own():
    # builds and snapshot commits of large images raise the shared client's 60 s read timeout; two threads'
    # raises may overlap, and the last to end must restore the client's own value (not the other's raise)
    import docker

    api = docker.APIClient(base_url="unix:///nonexistent.sock", timeout=60, version="1.41")  # never connects
    first = _build.api_timeout(api, 1800)
    second = _build.api_timeout(api, 900)
    first.__enter__()
    second.__enter__()
    assert api.timeout == 1800
    first.__exit__(None, None, None)
    assert api.timeout == 1800  # the second commit still runs
    second.__exit__(None, None, None)
    assert api.timeout == 60


def test_hub_downloads_by_id_are_named_in_builds_and_solutions(tmp_path: Path):
    from pivot_tasks import skip_reason

    # eval-mteb's solution fetched its model by id: replayed, it failed without saying why
    record = {"solution_commands": ["mteb --help", "mteb run -m BAAI/bge-small-en-v1.5 -t STS12"]}
    assert skip_reason(record, REGISTRIES) == (
        "solution command 2 needs huggingface.co ('mteb run -m'): 'mteb run -m BAAI/bge-small-en-v1.5 -t STS12'"
    )
    # reshard-c4-data's Dockerfile runs a copied setup.py that calls load_dataset
    folder = _task_folder(tmp_path, None)
    (folder / "setup.py").write_text("from datasets import load_dataset\nload_dataset('allenai/c4')\n")
    text = "FROM t-bench/python-3-13\nCOPY setup.py ./\nRUN python setup.py\n"
    assert _tasks.script_hosts(_tasks.load_task(folder), df.parse(text), REGISTRIES) == [("setup.py", "huggingface.co")]
    step = df.parse("FROM x\nRUN python -c 'from transformers import AutoModel; AutoModel.from_pretrained(\"m\")'\n")
    assert [host for host, _ in df.foreign_hosts(step, REGISTRIES)] == ["huggingface.co"]


def test_a_task_yaml_alias_bomb_is_refused_with_the_file_named(tmp_path):
    from pivot_sandbox import TaskError, load_task

    lines = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 9):  # each level names the last ten times: 10**9 strings once expanded
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [{', '.join(['*' + prev] * 10)}]")
    (tmp_path / "task.yaml").write_text("\n".join(lines) + "\ninstruction: hi\n")
    with pytest.raises(TaskError, match=r"task\.yaml: YAML aliases expand past"):
        load_task(tmp_path)
