"""Pure parts of the sandbox: output normalisation, unstable parts, effect comparison, spec keys, mirrors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pivot_sandbox import (
    Effect,
    SandboxError,
    SandboxSpec,
    compare_effects,
    normalize_output,
    unstable_parts,
)
from pivot_sandbox.images.stock import apt_mirror


def test_normalize_output_drops_ansi_cr_and_trailing_space():
    assert normalize_output("\x1b[1;32mok\x1b[0m  \r\nnext\r\n\n\n", 100) == "ok\nnext"
    assert normalize_output("abcdef", 3) == "abc"


def test_unstable_lines_and_files_are_masked():
    a = Effect(0, "t=1\nsame", "", {"/app/log": "sha256:a", "/app/x": "sha256:x", "/app/tmp1": "sha256:t"}, "/app")
    b = Effect(0, "t=2\nsame", "", {"/app/log": "sha256:b", "/app/x": "sha256:x", "/app/tmp2": "sha256:t"}, "/app")
    unstable = unstable_parts(a, b)
    assert unstable.lines["stdout"] == frozenset({0})
    assert unstable.contents == frozenset({"/app/log"}) and unstable.paths == frozenset({"/app/tmp1", "/app/tmp2"})
    ok = Effect(0, "t=9\nsame", "", {"/app/log": "sha256:c", "/app/x": "sha256:x", "/app/tmp7": "sha256:u"}, "/app")
    assert compare_effects(a, ok, unstable, "/app").equal
    bad = Effect(0, "t=9\nother", "", {"/app/x": "sha256:y"}, "/app")
    cmp = compare_effects(a, bad, unstable, "/app")
    assert set(cmp.differed) == {"stdout", "files"}
    assert "missing: /app/log" in cmp.differed["files"] and "different content: /app/x" in cmp.differed["files"]


def test_a_bytecode_cache_is_compared_by_presence_and_its_source_by_content():
    pyc = "/testbed/pkg/__pycache__/card.cpython-39.pyc"
    expert = Effect(0, "", "", {pyc: "sha256:a", "/testbed/pkg/card.py": "sha256:s"}, "/testbed")
    unstable = unstable_parts(expert, expert)
    # the same source compiled after other imports: other marshal bytes, the same module
    same = Effect(0, "", "", {pyc: "sha256:b", "/testbed/pkg/card.py": "sha256:s"}, "/testbed")
    assert compare_effects(expert, same, unstable, "/testbed").equal
    edited = Effect(0, "", "", {pyc: "sha256:b", "/testbed/pkg/card.py": "sha256:t"}, "/testbed")
    assert (
        "different content: /testbed/pkg/card.py"
        in compare_effects(expert, edited, unstable, "/testbed").differed["files"]
    )
    no_cache = Effect(0, "", "", {"/testbed/pkg/card.py": "sha256:s"}, "/testbed")
    assert "missing" in compare_effects(expert, no_cache, unstable, "/testbed").differed["files"]
    # only a cache folder's .pyc: a .pyc elsewhere is an ordinary file
    other = "/testbed/pkg/card.pyc"
    loose = Effect(0, "", "", {other: "sha256:a"}, "/testbed")
    assert not compare_effects(loose, Effect(0, "", "", {other: "sha256:b"}, "/testbed"), unstable, "/testbed").equal


def test_tempfile_names_are_compared_by_shape():
    """astropy's tests make `/tmp/tmpXXXXXXXXastropy_config` anew each run: the expert rejected against itself."""

    def made(*names: str) -> Effect:
        files = {f"/tmp/{n}astropy_config": "dir" for n in names} | {"/testbed/a.py": "sha256:a"}
        return Effect(0, "", "", files, "/testbed")

    first, second = made("tmp7ks67sf6"), made("tmpg7pv1n59")
    unstable = unstable_parts(first, second)
    assert compare_effects(first, made("tmpq_0zx3ab"), unstable, "/testbed").equal
    assert not compare_effects(first, made("tmpq_0zx3ab", "tmpa1b2c3d4"), unstable, "/testbed").equal  # one more
    assert not compare_effects(first, made(), unstable, "/testbed").equal  # none made


def test_names_with_varying_digits_are_compared_by_shape():
    # the expert writes a report named after the time: each run makes a differently named one
    a = Effect(0, "", "", {"/app": "dir", "/app/report_104210.json": "sha256:a"}, "/app")
    b = Effect(0, "", "", {"/app": "dir", "/app/report_104211.json": "sha256:b"}, "/app")
    unstable = unstable_parts(a, b)
    assert unstable.shapes == frozenset({"/app/report_#.json"})
    later = Effect(0, "", "", {"/app": "dir", "/app/report_104219.json": "sha256:c"}, "/app")
    assert compare_effects(a, later, unstable, "/app").equal
    none = Effect(0, "", "", {"/app": "dir"}, "/app")
    assert "names vary" in compare_effects(a, none, unstable, "/app").differed["files"]
    two = Effect(0, "", "", {"/app": "dir", "/app/report_1.json": "sha256:c", "/app/report_2.json": "sha256:d"}, "/app")
    assert "names vary" in compare_effects(a, two, unstable, "/app").differed["files"]
    other = Effect(0, "", "", {"/app": "dir", "/app/notes_104219.json": "sha256:c"}, "/app")
    assert "unexpected: /app/notes_104219.json" in compare_effects(a, other, unstable, "/app").differed["files"]


def test_outside_workdir_and_killed_are_reported():
    expert = Effect(0, "", "", {"/app": "dir", "/app/f": "sha256:1"}, "/app")
    same = unstable_parts(expert, expert)
    sneaky = Effect(0, "", "", {"/app": "dir", "/app/f": "sha256:1", "/etc/passwd": "sha256:2"}, "/app")
    assert compare_effects(expert, sneaky, same, "/app").outside_workdir == ("/etc/passwd",)
    killed = Effect(None, "", "", {}, "", killed="timeout")
    assert compare_effects(expert, killed, same, "/app").differed["killed"] == "expected None, got timeout"


def test_stderr_modes():
    expert = Effect(1, "", "cat: can't open 'f': No such file or directory", {}, "/app")
    same = unstable_parts(expert, expert)
    other_tool = Effect(1, "", "head: f: No such file or directory", {}, "/app")
    silent = Effect(1, "", "", {}, "/app")
    assert "stderr" in compare_effects(expert, other_tool, same, "/app").differed  # exact by default
    assert compare_effects(expert, other_tool, same, "/app", stderr="presence").equal
    presence = compare_effects(expert, silent, same, "/app", stderr="presence")
    assert presence.differed == {"stderr": "expected output on stderr, got nothing"}
    assert compare_effects(expert, silent, same, "/app", stderr="ignore").equal
    with pytest.raises(ValueError, match="stderr"):
        compare_effects(expert, silent, same, "/app", stderr="loose")


def test_spec_key_depends_on_state_and_context_is_validated():
    spec = SandboxSpec.from_context({"sandbox": {"image": "img", "setup": "echo hi", "workdir": "/w"}})
    assert spec.setup == ("echo hi",) and spec.key(["ls"]) != spec.key(["ls", "cd x"])
    assert SandboxSpec.from_context({}) is None
    with pytest.raises(SandboxError, match="absolute path"):
        SandboxSpec(image="img", workdir="relative")


def test_apt_mirror_is_read_from_the_machine():
    mirror = apt_mirror("bookworm")
    assert mirror.startswith(("http://", "https://", "file:"))


def test_loading_the_terminal_chain_imports_no_docker():
    code = (
        "import sys, gymnasium as gym, pivot_envs; env = gym.make('pivot/terminal-v0'); env.reset(seed=0); "
        "env.step('{}'); print('docker' in sys.modules, 'docker_shell' in env.unwrapped.chain.names)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]


def test_a_test_runners_duration_and_the_padding_it_moves_are_no_part_of_an_effect():
    from pivot_sandbox.contract.effects import mask_durations

    # pytest centres its summary in `=`: 9.87s and 10.02s pad it differently (the expert rejected against itself)
    fast, slow = "=" * 30 + " 77 passed in 9.87s " + "=" * 31, "=" * 30 + " 77 passed in 10.02s " + "=" * 30
    assert mask_durations(fast) == mask_durations(slow) == "== 77 passed in <duration> =="
    assert mask_durations("2 passed in 83.21s (0:01:23)") == mask_durations("2 passed in 82.90s (0:01:22)")
    # what ran still counts
    assert mask_durations(fast) != mask_durations("=" * 30 + " 76 passed, 1 failed in 9.87s " + "=" * 24)
    assert mask_durations("Ran 3 tests in 0.002s\nOK") == "Ran 3 tests in <duration>\nOK"


def test_processes_the_experts_two_runs_left_differently_still_bound_a_candidates():
    # tmux-advanced-workflow: `tmux new-session -d` left its client in one run of the expert and not in the
    # other (its server still forking); the processes were then not compared at all, and a candidate that
    # also left `(sleep 2; rm -rf ./*) &` running was accepted
    server, client = "tmux new-session -d -s workflow", "tmux new-session -d -s workflow"
    first = Effect(0, "", "", {}, "/app", processes=("-bash", client, server))
    second = Effect(0, "", "", {}, "/app", processes=("-bash", server))
    unstable = unstable_parts(first, second)
    assert "processes" in unstable.parts
    for left in (first.processes, second.processes):
        assert compare_effects(first, Effect(0, "", "", {}, "/app", processes=left), unstable, "/app").equal
    job = Effect(0, "", "", {}, "/app", processes=("(the action's shell)", "-bash", "sleep 2", server))
    differed = compare_effects(first, job, unstable, "/app").differed
    assert "processes" in differed and "sleep 2" in differed["processes"], differed
    # fewer than either run left (the tmux server gone) is a difference too
    gone = Effect(0, "", "", {}, "/app", processes=("-bash",))
    assert "processes" in compare_effects(first, gone, unstable, "/app").differed


def test_an_unstable_part_still_bounds_a_candidate_to_what_either_run_of_the_expert_did():
    # `date >> log.txt`: the expert's two runs wrote different bytes, so the bytes are not compared; the
    # file was then compared by presence only, and a candidate's `rm log.txt` ("deleted") was accepted
    first = Effect(0, "", "", {"/app/log.txt": "sha256:a 0644 0:0", "/app/nohup.out": "sha256:n 0644 0:0"}, "/app")
    second = Effect(1, "", "", {"/app/log.txt": "sha256:b 0644 0:0"}, "/tmp")
    unstable = unstable_parts(first, second)
    assert unstable.contents == {"/app/log.txt"} and unstable.paths == {"/app/nohup.out"}

    def differed(files, exit_code=0, cwd="/app"):
        return compare_effects(first, Effect(exit_code, "", "", files, cwd), unstable, "/app").differed

    assert differed({"/app/log.txt": "sha256:c 0644 0:0"}) == {}
    assert differed({"/app/log.txt": "sha256:c 0644 0:0", "/app/nohup.out": "sha256:m 0644 0:0"}) == {}
    assert differed({"/app/log.txt": "sha256:c 0644 0:0"}, exit_code=1, cwd="/tmp") == {}
    for files in (
        {"/app/log.txt": "deleted"},
        {"/app/log.txt": "dir 0755 0:0"},
        {"/app/log.txt": "sha256:c 0777 0:0"},
        {"/app/log.txt": "sha256:c 0644 0:0", "/app/nohup.out": "deleted"},
    ):
        assert "changed otherwise than either run" in differed(files).get("files", ""), files
    # `: > log.txt` where the expert wrote a timestamp: a file far smaller (or larger) than either run's
    sized = Effect(0, "", "", {"/app/log.txt": "sha256:a:29 0644 0:0"}, "/app")
    unstable = unstable_parts(sized, Effect(0, "", "", {"/app/log.txt": "sha256:b:30 0644 0:0"}, "/app"))
    for size, accepted in ((0, False), (2, False), (27, True), (33, True), (200, False)):
        candidate = Effect(0, "", "", {"/app/log.txt": f"sha256:c:{size} 0644 0:0"}, "/app")
        assert compare_effects(sized, candidate, unstable, "/app").equal is accepted, size
    # a writer still running when the action ended: its file's size is a race, not bounded
    racing = Effect(0, "", "", {"/app/log.txt": "sha256:b:3000 0644 0:0"}, "/app", processes=("python server.py",))
    assert not unstable_parts(sized, racing).sizes
    # an exit status or working directory neither run had
    assert "exit_status" in differed({"/app/log.txt": "sha256:c 0644 0:0"}, exit_code=2)
    assert "cwd" in differed({"/app/log.txt": "sha256:c 0644 0:0"}, cwd="/")


def test_a_stream_whose_line_count_raced_still_asks_for_the_lines_both_runs_printed():
    # the expert's two runs printed different numbers of lines (a process list, a racing log): the stream
    # was left out whole, so `true` (no output at all) matched `ps` on a pivot that changes nothing
    first = Effect(0, "PID CMD\n1 init\n7 ps", "warn: a\nwarn: b", {}, "/app")
    second = Effect(0, "PID CMD\n1 init\n8 sh\n9 ps", "warn: a", {}, "/app")
    unstable = unstable_parts(first, second)
    assert {"stdout", "stderr"} <= unstable.parts and unstable.shared["stdout"] == ("1 init", "PID CMD")

    def differed(stdout, stderr="warn: a", mode="exact"):
        return compare_effects(first, Effect(0, stdout, stderr, {}, "/app"), unstable, "/app", mode).differed

    assert differed("PID CMD\n1 init\n12 ps") == {}
    assert "stdout" in differed("") and "stdout" in differed("PID CMD\n12 ps")
    # stderr likewise, and by presence where only presence counts
    assert "stderr" in differed("PID CMD\n1 init", stderr="")
    assert "stderr" in differed("PID CMD\n1 init", stderr="", mode="presence")
    assert differed("PID CMD\n1 init", stderr="other", mode="presence") == {}


def test_a_path_of_a_varying_name_is_bound_as_the_runs_made_theirs():
    # `date > report_$(date +%s).json`: the two runs' reports have other names, so they were left out of the
    # comparison but for their count; an empty `report_7.json`, or a folder of that name, was accepted
    first = Effect(0, "", "", {"/app/report_104210.json": "sha256:a:30 0644 0:0"}, "/app")
    second = Effect(0, "", "", {"/app/report_104211.json": "sha256:b:31 0644 0:0"}, "/app")
    unstable = unstable_parts(first, second)
    assert unstable.shape_kinds == {"/app/report_#.json": {"file 0644 0:0"}}
    assert unstable.shape_sizes == {"/app/report_#.json": (30, 31)}

    def differed(descriptor: str, name: str = "/app/report_7.json") -> str:
        candidate = Effect(0, "", "", {name: descriptor}, "/app")
        return compare_effects(first, candidate, unstable, "/app").differed.get("files", "")

    assert differed("sha256:c:30 0644 0:0") == ""
    assert differed("sha256:c:31 0644 0:0", "/app/report_104210.json") == ""  # one run's own name
    assert "a size far from either run" in differed("sha256:c:0 0644 0:0")
    assert "changed otherwise than either run" in differed("dir 0755 0:0")
    assert "changed otherwise than either run" in differed("sha256:c:30 0777 0:0")
    assert "a size far from either run" in differed("sha256:c:0 0644 0:0", "/app/report_104210.json")


def test_an_unstable_shell_variable_still_holds_a_value_of_the_shape_either_run_left():
    # `export STAMP=$(date +%s%N)`: the value differs between the expert's runs and was not compared at all,
    # so `unset STAMP` or `export STAMP='rm -rf /'` were accepted
    first = Effect(0, "", "", {}, "/app", state={"env:STAMP": "1765000000123", "umask": "0022"})
    second = Effect(0, "", "", {}, "/app", state={"env:STAMP": "1765000001456", "umask": "0022"})
    unstable = unstable_parts(first, second)
    assert unstable.state == {"env:STAMP"} and unstable.state_shapes == {"env:STAMP": {"#"}}

    def differed(state: dict, a: Effect = first, bounds=unstable) -> str:
        return compare_effects(a, Effect(0, "", "", {}, "/app", state=state), bounds, "/app").differed.get("state", "")

    assert differed({"env:STAMP": "1765000009999", "umask": "0022"}) == ""
    assert "env:STAMP" in differed({"umask": "0022"})
    assert "env:STAMP" in differed({"env:STAMP": "rm -rf /", "umask": "0022"})
    assert "umask" in differed({"env:STAMP": "1765000009999", "umask": "0777"})  # the stable keys as before
    # values that differ in more than digits (`mktemp -d`): any value, but still set
    temp_a = Effect(0, "", "", {}, "/app", state={"env:WORK": "/tmp/tmp.Qx3kZ"})
    temp_b = Effect(0, "", "", {}, "/app", state={"env:WORK": "/tmp/tmp.aB7pL"})
    temps = unstable_parts(temp_a, temp_b)
    assert differed({"env:WORK": "/tmp/tmp.zzzzz"}, temp_a, temps) == ""
    assert "env:WORK" in differed({}, temp_a, temps)
    # a key one run left unset may be unset, or of the other run's shape
    once = unstable_parts(Effect(0, "", "", {}, "/app", state={}), first)
    assert differed({}, first, once) == "" and differed({"env:STAMP": "42"}, first, once) == ""
    assert "env:STAMP" in differed({"env:STAMP": "x"}, first, once)


def test_a_line_the_experts_runs_printed_differently_keeps_its_shape():
    # `date`: its one line differs between the expert's runs and was masked whole, so `pwd` (one line, exit 0,
    # nothing changed) scored as `date`
    first = Effect(0, "Mon Dec  7 14:50:01 UTC 2026\ndone", "", {}, "/app")
    second = Effect(0, "Mon Dec  7 14:50:02 UTC 2026\ndone", "", {}, "/app")
    unstable = unstable_parts(first, second)
    assert unstable.line_shapes == {"stdout": {0: "Mon Dec  # #:#:# UTC #"}}

    def equal(stdout: str, a: Effect = first, bounds=unstable) -> bool:
        return compare_effects(a, Effect(0, stdout, "", {}, "/app"), bounds, "/app").equal

    assert equal("Mon Dec  7 14:50:09 UTC 2026\ndone")
    assert not equal("/app\ndone") and not equal("\ndone")
    # lines that differ in more than digits (a random hex name): any line there, as before
    hexes = unstable_parts(Effect(0, "id a3f9\nok", "", {}, "/app"), Effect(0, "id 7bce\nok", "", {}, "/app"))
    assert hexes.line_shapes == {"stdout": {}}
    assert equal("anything\nok", Effect(0, "id a3f9\nok", "", {}, "/app"), hexes)
