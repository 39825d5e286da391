"""Both sandbox backends, the same isolation and the same verdicts (issue 27).

Every test here runs against each backend this machine can run (`pivot_sandbox.usable_backends`;
CI prints which): the escape attempts, the adversarial candidates through `docker_shell`, a job
left in the background, and verdict-for-verdict agreement on the demo pivots. The namespace
backend's own checks follow: nothing left after `kill -9` of the verifying process, an explicit
choice that cannot work fails with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from pivot_core import Pivot
from pivot_envs import Message
from pivot_sandbox import SandboxSpec, SandboxUnavailable, usable_backends
from pivot_sandbox.replay.runner import ROOT_CANDIDATE_CAPABILITIES
from verifiers_plugins import get_verifier

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BACKENDS = [name for name, why in usable_backends().items() if why is None]
BUSYBOX = "pivot-gym/busybox:1"
# test_adversarial.py's hostile candidates (the test folder is no package to import them from)
ADVERSARIAL = {
    "fork bomb": ("f(){ f|f& };f", None),
    "rm -rf /": ("rm -rf / --no-preserve-root 2>/dev/null; rm -rf /", None),
    "sleep forever": ("sleep 100000", "timeout"),
    "endless output": ("yes", "output cap"),
    "1 GB write": ("dd if=/dev/zero of=big bs=1M count=1024", "file size cap"),
    "memory hog": ("awk 'BEGIN { s = \"x\"; while (1) s = s s }'", "oom"),
    "network": ("wget -q -O- http://1.1.1.1/ || nc -w 2 1.1.1.1 80", None),
    "kill everything": ("kill -9 -1", None),
    "outside workdir": ("ls -la; echo owned > /tmp/owned", "outside the working directory"),
}


def terminus(command: str) -> Message:
    return Message(
        "assistant",
        json.dumps({"analysis": "a", "plan": "p", "commands": [{"keystrokes": command + "\n", "duration": 0.1}]}),
    )


@pytest.fixture(params=BACKENDS)
def backend(request, busybox):
    # through the registry and the contract, as every caller gets one (`sandbox_backend` checks it)
    from verifiers_plugins import sandbox_backend

    return sandbox_backend(request.param, action_timeout=6.0)


def test_the_namespace_backend_runs_where_the_machine_allows_it():
    # root, bubblewrap and overlayfs (as CI has them): the backend must not drop out silently
    if os.geteuid() == 0 and shutil.which("bwrap") and "overlay" in Path("/proc/filesystems").read_text():
        assert "namespace" in BACKENDS, usable_backends()
    assert "docker" in BACKENDS
    print("sandbox backends tested:", BACKENDS)


# linux/capability.h: the bit of each capability a sandbox may hold
CAPABILITY_BITS = {
    "CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6, "SETUID": 7, "SETPCAP": 8,
    "NET_BIND_SERVICE": 10, "NET_RAW": 13, "SYS_CHROOT": 18, "MKNOD": 27, "AUDIT_WRITE": 29, "SETFCAP": 31,
}  # fmt: skip


def capability_mask(names) -> int:
    return sum(1 << CAPABILITY_BITS[name] for name in names)


def test_a_root_candidate_may_do_what_a_root_agent_may_in_the_tasks_environment(backend):
    # Terminal-Bench gives its agent root with Docker's default capabilities: a read-only file is
    # writable, chown works. A candidate that could not do them would score 0 where the agent's
    # own action succeeded (OpenHands' editor on prove-plus-comm's read-only proof).
    spec = SandboxSpec(image=BUSYBOX, user="root", setup=("echo old > /app/proof.v && chmod 444 /app/proof.v",))
    write, chown, node = backend.run_group(
        spec, [], [["echo new > /app/proof.v && cat /app/proof.v"], ["chown 1000:1000 /app/proof.v"], ["mknod d b 8 0"]]
    )
    assert (write.exit_code, write.stdout.strip()) == (0, "new"), write
    assert chown.exit_code == 0, chown
    assert node.exit_code != 0, node  # no device nodes: the namespace backend has no device cgroup


def test_the_agents_shell_starts_where_its_harness_started_it(backend):
    # OpenHands' runtime starts in /app where prove-plus-comm's image works in /workspace: the
    # history and every candidate start in start_dir, set-up in the working directory
    spec = SandboxSpec(image=BUSYBOX, workdir="/workspace", start_dir="/app", setup=("pwd > /tmp/setup_dir",))
    (here,) = backend.run_group(spec, ["pwd > history_dir"], [["pwd; cat history_dir /tmp/setup_dir"]])
    assert (here.exit_code, here.stdout.split(), here.cwd) == (0, ["/app", "/app", "/workspace"], "/app"), here
    # a spec without one keeps the snapshot key it had before the field existed
    old = {"image": BUSYBOX, "setup": [], "workdir": "/app", "user": "1000:1000", "shell": "/bin/sh", "env": {}}
    payload = json.dumps({**old, "replay_access": False, "history": []}, sort_keys=True).encode()
    assert SandboxSpec(image=BUSYBOX).key() == hashlib.sha256(payload).hexdigest()
    assert spec.key() != SandboxSpec(image=BUSYBOX, workdir="/workspace").key()


def test_escape_attempts_reach_nothing_of_the_host(backend, tmp_path):
    token = uuid.uuid4().hex
    sentinel = Path("/tmp") / f"pivot-gym-sentinel-{token[:8]}"
    sentinel.write_text(token)
    try:
        actions = {
            "proc root": f"cat /proc/1/root{sentinel} /proc/self/root{sentinel} {sentinel} 2>&1; ls /proc/1/root/",
            "mount": "mount -t tmpfs none /mnt; echo rc=$?",
            "unshare": "unshare -r id; echo rc=$?",
            "privileges": "grep -E 'NoNewPrivs|CapEff' /proc/self/status",
            "symlink out": f"ln -s {sentinel} link && ln -s /proc/1/root/ root && cat link 2>&1; echo done",
            "host processes": "ps -o pid,comm | wc -l; ls /proc | grep -c '^[0-9]'",
            "network": "cat /proc/net/dev | grep -c ':'",
        }
        for user in ("1000:1000", "root"):
            spec = SandboxSpec(image=BUSYBOX, user=user)
            effects = dict(zip(actions, backend.run_group(spec, [], [[a] for a in actions.values()]), strict=True))
            for name, effect in effects.items():
                assert not isinstance(effect, Exception), (name, effect)
                assert token not in effect.stdout + effect.stderr, (user, name, effect.stdout)
            assert "rc=0" not in effects["mount"].stdout and "rc=0" not in effects["unshare"].stdout
            assert "NoNewPrivs:\t1" in effects["privileges"].stdout
            caps = ROOT_CANDIDATE_CAPABILITIES if user == "root" else []
            assert f"CapEff:\t{capability_mask(caps):016x}" in effects["privileges"].stdout, (user, caps)
            assert effects["symlink out"].files["/app/link"] == f"link:{sentinel}"
            assert int(effects["host processes"].stdout.split()[-1]) < 10  # the sandbox's own few only
            assert effects["network"].stdout.strip() == "1"  # loopback alone
    finally:
        sentinel.unlink()


def test_limits_stop_what_they_should(backend):
    spec = SandboxSpec(image=BUSYBOX)
    actions = {
        "fill the disk": ("dd if=/dev/zero of=big bs=1M count=1024", {"file size cap"}),
        "1 GB sparse file": ("truncate -s 1G sparse", {"file size cap"}),
        "100k inodes": ("mkdir d && cd d && seq 1 100000 | xargs touch", {"change set cap", "timeout"}),
        "memory": ("awk 'BEGIN { s = \"x\"; while (1) s = s s }'", {"oom"}),
        "endless output": ("yes", {"output cap"}),
        "sleep": ("sleep 1000", {"timeout"}),
    }
    effects = backend.run_group(spec, [], [[a] for a, _ in actions.values()])
    for (name, (_, expected)), effect in zip(actions.items(), effects, strict=True):
        assert not isinstance(effect, Exception), (name, effect)
        assert effect.killed in expected, (name, effect.killed, effect.stderr[:200])
    # a backgrounded fork bomb: stopped by the pids limit, or its processes (no more than the limit) are the effect
    (bomb,) = backend.run_group(spec, [], [["f(){ f|f& };f"]])
    assert bomb.killed in ("pids limit", "timeout", "oom") or 0 < len(bomb.processes) <= backend.limits.pids, bomb


def test_an_action_never_inherits_the_verifiers_ignored_signals(backend):
    # ignored signals survive exec: a verifying process that ignores SIGQUIT (a test runner, a
    # trainer) made the namespace sandbox's shell show `trap -- '' QUIT`, unlike Docker's
    import signal

    before = signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    try:
        (effect,) = backend.run_group(SandboxSpec(image=BUSYBOX), [], [["trap; echo done"]])
    finally:
        signal.signal(signal.SIGQUIT, before)
    assert effect.stdout == "done" and effect.state.get("traps", "") == "", (effect.stdout, effect.state)


def test_a_delayed_background_job_is_part_of_the_effect(backend):
    spec = SandboxSpec(image=BUSYBOX)
    plain, job = backend.run_group(spec, [], [["ls"], ["ls; (sleep 2; rm -rf /app/*) >/dev/null 2>&1 &"]])
    assert plain.processes == () and plain.exit_code == job.exit_code == 0
    assert job.processes, job  # the subshell that would delete the files in two seconds


def test_a_background_job_is_named_by_what_it_runs_not_by_the_fork_before_its_exec(backend):
    # `sleep 3 &` forks a copy of the shell that then execs sleep. Listed in between, the job showed
    # the shell's command line: on a loaded machine Docker named it `(the action's shell)` and the
    # namespace backend `sleep 3` for the same candidate. A copy that computes a while before its
    # exec widens that gap on purpose; the listing waits for it to settle.
    spec = SandboxSpec(image=BUSYBOX)
    slow_exec = "ls; { i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; exec sleep 3; } &"
    for effect in backend.run_group(spec, [], [["ls; sleep 3 &"], [slow_exec]]):
        assert effect.processes == ("sleep 3",), effect.processes


SERVED = ["mkdir -p www && echo hi > www/index.html", "httpd -p 127.0.0.1:8080 -h /app/www"]
HTTPD = "httpd -p 127.0.0.1:8080 -h /app/www"
PAGE = "wget -q -O- http://127.0.0.1:8080/index.html"


def test_a_server_the_history_started_runs_again_for_every_candidate(backend):
    # a snapshot keeps files, not processes: the history's own command starts the server again in
    # each sandbox, and what an action does to it (stops it, starts another) is part of its effect
    spec = SandboxSpec(image=BUSYBOX)
    actions = [[PAGE], ["cat www/index.html"], ["killall httpd; " + PAGE], [PAGE], ["sleep 300 &"]]
    fetched, read, stopped, again, started = backend.run_group(spec, SERVED, actions)
    assert (fetched.stdout, fetched.exit_code, fetched.processes) == ("hi", 0, ()), fetched
    assert (read.stdout, read.processes) == ("hi", ()), read
    assert stopped.exit_code != 0 and stopped.processes == (f"(stopped) {HTTPD}",), stopped
    assert (again.stdout, again.processes) == ("hi", ()), again  # the stop did not reach the next sandbox
    assert started.processes == ("sleep 300",), started
    # a history whose background job ended is a plain state
    (effect,) = backend.run_group(spec, ["(echo done > d.txt) & wait"], [["cat d.txt"]])
    assert effect.stdout == "done" and effect.processes == (), effect
    # the replay moves the shell state from folder to folder (its own per command), which clears
    # nothing between history commands: shared memory one command leaves is there for the next
    history = ["echo x > /dev/shm/f", "cd /tmp", "cp /dev/shm/f /app/kept"]
    (kept,) = backend.run_group(spec, history, [["cat /app/kept; pwd"]])
    assert kept.stdout == "x\n/tmp", kept


def test_the_states_processes_are_compared_by_identity_not_command_line(backend):
    # D6 (issue 38): where the history started a server, killing it and starting the same command line
    # again from / (now serving another folder), stopping it or renicing it all scored 1.0
    spec = SandboxSpec(image=BUSYBOX)
    actions = [
        [PAGE],
        [f"killall httpd; sleep 0.2; cd / && {HTTPD}; " + PAGE],
        ["kill -STOP $(pidof httpd); echo hi"],
        ["renice -n 5 -p $(pidof httpd) >/dev/null; " + PAGE],
    ]
    expert, restarted, paused, reniced = backend.run_group(spec, SERVED, actions)
    assert (expert.stdout, expert.processes) == ("hi", ()), expert
    assert restarted.stdout == "hi" and restarted.processes == (HTTPD, f"(stopped) {HTTPD}"), restarted
    assert paused.processes == (f"(paused) {HTTPD}",), paused
    assert reniced.stdout == "hi" and reniced.processes == (f"(reniced +5) {HTTPD}",), reniced


def test_a_server_that_computes_before_it_listens_is_waited_for(backend):
    # a notebook server imports for seconds before it binds: measured on the sockets alone, the
    # state's settled on none after 2 s, and a candidate's fetch raced the server's start
    spec = SandboxSpec(image=BUSYBOX)
    compute = "i=0; while [ $i -lt 20000 ]; do i=$((i + 1)); done"
    slow = (
        "{ end=$(($(date +%s) + 3)); while [ $(date +%s) -lt $end ]; do " + compute + "; done; exec " + HTTPD + "; } &"
    )
    history = [SERVED[0], slow]
    fetched, again = backend.run_group(spec, history, [[PAGE], [PAGE]])
    assert (fetched.stdout, fetched.exit_code) == ("hi", 0), fetched
    assert (again.stdout, again.exit_code) == ("hi", 0), again


def test_docker_lends_no_network_namespace_a_server_ran_in(busybox):
    # Docker lends a retired container's network namespace to the next container; a server's closed
    # connections linger there (TIME_WAIT), where the next restart of the same server would meet them
    from pivot_sandbox import docker_backend

    backend = docker_backend(action_timeout=6.0)
    spec = SandboxSpec(image=BUSYBOX)
    key, image = backend.snapshot(spec, SERVED)
    for _ in range(2):  # one that owns its namespace, one that borrowed a free holder's
        box = backend.at_state(key, image, spec, "pool")
        assert box.running == (HTTPD,), box
        free = list(backend._fleet.holders._free)
        backend._fleet.retire(box)
        assert [h.id for h in backend._fleet.holders._free] == [h.id for h in free if h is not box.holder], box


def test_the_experts_cached_effect_belongs_to_one_build_of_the_snapshot(backend):
    # the expert's effect holds the state's file times (`ls -l`); cached across an eviction and a
    # rebuild a minute later, it differed from every candidate's: a false 0 (the flaky
    # test_a_metadata_only_change_does_not_reach_the_next_candidate, in the full suite)
    from verifiers_plugins.builtin.docker_shell import DockerShell

    spec = SandboxSpec(image=BUSYBOX, setup=("echo rebuilt > f",))
    first = backend.snapshot_id(spec, [])
    assert backend.snapshot_id(spec, []) == first  # served from the cache: the same build
    pivot = Pivot(
        "rebuilt#1",
        "terminal",
        (Message("user", "list"),),
        terminus("ls -al"),
        (),
        {"sandbox": {"image": BUSYBOX, "setup": ["echo rebuilt > f"]}},
    )
    verifier = get_verifier("docker_shell", backend=backend.name, action_timeout=6.0)
    assert verifier.verify_batch(pivot, [terminus("ls -la")])[0].accepted
    runs = DockerShell.stats["expert_runs"]
    assert verifier.verify_batch(pivot, [terminus("ls -la")])[0].accepted
    assert DockerShell.stats["expert_runs"] == runs  # the same build: the cached effect serves
    backend.close()  # every snapshot gone: the next verification builds the state again
    rebuilt = get_verifier("docker_shell", backend=backend.name, action_timeout=6.0)
    assert rebuilt.verify_batch(pivot, [terminus("ls -la")])[0].accepted
    assert DockerShell.stats["expert_runs"] == runs + 2  # a new build: its own expert runs, not the cached ones
    assert rebuilt.backend().snapshot_id(spec, []) != first


def test_processes_that_cannot_be_started_again_refuse_the_state_with_the_reason(backend, monkeypatch):
    from pivot_sandbox import ProcessesNotRestored
    from pivot_sandbox.replay import restore as _restore

    monkeypatch.setattr(_restore, "RESTART_TIMEOUT", 3.0)  # how long a restart waits for the processes

    # set-up steps are the dataset's (installs): never re-run per sandbox, so their processes cannot come back
    spec = SandboxSpec(image=BUSYBOX, setup=("sleep 600 &",))
    for _ in range(2):  # the second time from the backend's memory of the state, not a new replay
        with pytest.raises(ProcessesNotRestored, match="set-up started them"):
            backend.run_group(spec, [], [["ls"]])
    # a command that started a process only by chance (it reads a file the history then removed)
    flaky = ["echo x > go", "[ -f go ] && sleep 600 &", "rm go"]
    with pytest.raises(ProcessesNotRestored, match="sleep 600"):
        backend.run_group(SandboxSpec(image=BUSYBOX), flaky, [["ls"]])


def test_docker_shell_judges_a_pivot_after_a_server_started_with_the_server_running(backend):
    from pivot_core import Pivot

    pivot = Pivot(
        "served#1",
        "terminal",
        (Message("user", "serve the folder"), *(terminus(c) for c in SERVED)),
        terminus(PAGE),
        (),
        {"sandbox": {"image": BUSYBOX}},
    )
    candidates = {
        "the expert": (PAGE, 1.0),
        "an equivalent read": ("cat www/index.html", 1.0),
        "another page": ("wget -q -O- http://127.0.0.1:8080/nothing.html", 0.0),  # a 404, as the agent saw it
        "a stopped server": (PAGE + "; killall httpd", 0.0),
    }
    verifier = get_verifier("docker_shell", backend=backend.name, action_timeout=6.0)
    verdicts = verifier.verify_batch(pivot, [terminus(c) for c, _ in candidates.values()])
    for (name, (_, reward)), verdict in zip(candidates.items(), verdicts, strict=True):
        # before, no server ran at the pivot: every wget failed alike, and another page was accepted
        assert (verdict.reward, verdict.error) == (reward, None), (name, verdict)
    # rejected for the server it stopped; under heavy load the effect may first differ in killall's own
    # exit status (seen once with two test runs and a model conversion sharing 2 cores)
    assert "processes" in verdicts[3].reason or "exit_status" in verdicts[3].reason, verdicts[3].reason


def test_the_adversarial_suite_scores_zero_with_a_reason(backend, demo_pivots):
    sentinel = Path("/tmp/pivot-gym-sentinel")
    sentinel.write_text("intact")
    verifier = get_verifier("docker_shell", backend=backend.name, action_timeout=4.0)
    pivot = demo_pivots["ls -la"]
    names = list(ADVERSARIAL)
    verdicts = verifier.verify_batch(pivot, [terminus(ADVERSARIAL[n][0]) for n in names])
    for name, verdict in zip(names, verdicts, strict=True):
        assert verdict.reward == 0.0 and verdict.error is None and verdict.reason, (name, verdict)
        if ADVERSARIAL[name][1]:
            assert ADVERSARIAL[name][1] in verdict.reason, (name, verdict.reason)
    (again,) = verifier.verify_batch(pivot, [terminus("ls -al")])
    assert again.accepted, again.details
    assert sentinel.read_text() == "intact" and not Path("/tmp/owned").exists()


CANDIDATES = {
    "ls -la": ["ls -la", "ls -al", "ls -l -a", "ls", "ls -la; touch x", "ls -la; export X=1", "ls -la; sleep 3 &"],
    "grep TODO notes.txt > todo.txt": [
        "grep TODO notes.txt > todo.txt",
        "cat notes.txt | grep TODO > todo.txt",
        "grep -i todo notes.txt > todo.txt",
        "grep x notes.txt > todo.txt",
        "grep TODO notes.txt > other.txt",
        "rm -rf *",
    ],
    "sed -i 's/draft/final/' notes.txt": [
        "sed -i 's/draft/final/' notes.txt",
        "sed 's/draft/final/' notes.txt > t && mv t notes.txt",
        "sed -i 's/draft/FINAL/' notes.txt",
        "chmod 600 notes.txt; sed -i 's/draft/final/' notes.txt",
    ],
}


@pytest.mark.skipif(len(BACKENDS) < 2, reason="agreement needs both backends (the namespace one: see the test above)")
def test_both_backends_give_the_same_verdicts(demo_pivots):
    scored = differ = 0
    for expert, candidates in CANDIDATES.items():
        pivot = demo_pivots[expert]
        results = {
            name: get_verifier("docker_shell", backend=name).verify_batch(pivot, [terminus(c) for c in candidates])
            for name in BACKENDS
        }
        for i, candidate in enumerate(candidates):
            rewards = {name: results[name][i].reward for name in BACKENDS}
            reasons = {name: results[name][i].reason for name in BACKENDS}
            scored += 1
            differ += len(set(rewards.values())) > 1
            assert len(set(rewards.values())) == 1, (expert, candidate, rewards, reasons)
            # the same effect details too (what matched, what differed, the candidate's effect), bar the name
            details = {
                name: json.dumps({k: v for k, v in (results[name][i].details or {}).items() if k != "backend"})
                for name in BACKENDS
            }
            assert len(set(details.values())) == 1, (expert, candidate, details)
    assert scored == sum(len(c) for c in CANDIDATES.values()) and differ == 0


CHILD = textwrap.dedent("""
    import json, pivot_envs
    from pivot_envs import Message
    from verifiers_plugins import get_verifier
    pivots = {p.id: p for p in pivot_envs.load_pivots(PATH)}
    def msg(keys):
        return Message("assistant", json.dumps({"analysis": "a", "plan": "p", "commands": [{"keystrokes": keys}]}))
    get_verifier("docker_shell", backend="namespace", action_timeout=120.0).verify_batch(
        pivots[PIVOT], [msg("sleep 1000\\n"), msg("sleep 999\\n")]
    )
""")


def _sandbox_processes(folder: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and folder.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.skipif("namespace" not in BACKENDS, reason="the namespace backend cannot run here (see above)")
def test_kill_9_of_the_verifier_leaves_no_process_mount_or_folder(demo_pivots, tmp_path):
    from pivot_envs import write_pivots
    from pivot_sandbox.namespace.root import Cgroups, gc, run_root

    pivot = demo_pivots["ls -la"]
    path = tmp_path / "pivots.jsonl"
    write_pivots([pivot], path)
    script = CHILD.replace("PATH", repr(str(path))).replace("PIVOT", repr(pivot.id))
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    child = subprocess.Popen([sys.executable, "-c", script], env=env)
    folder = f"{run_root()}/{child.pid}-"
    try:
        deadline = time.time() + 120
        # both candidates are sleeping once their two `sleep` processes run under the child's sandboxes
        while time.time() < deadline:
            sleeping = [p for p in _sandbox_processes("sleep 99") if p]
            if len(_sandbox_processes(folder)) >= 2 and len(sleeping) >= 2:
                break
            assert child.poll() is None, "the verifying process ended before it could be killed"
            time.sleep(0.3)
        else:
            pytest.fail("the child never started its candidates")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    deadline = time.time() + 20
    while time.time() < deadline and (_sandbox_processes(folder) or _sandbox_processes("sleep 99")):
        time.sleep(0.2)
    assert _sandbox_processes(folder) == [] and _sandbox_processes("sleep 99") == []
    assert folder not in Path("/proc/self/mountinfo").read_text()  # the overlays were the sandboxes' own
    leftovers = [p for p in run_root().iterdir() if p.name.startswith(f"{child.pid}-")]
    assert leftovers, "SIGKILL left no folder to collect?"
    gc()
    assert not [p for p in run_root().iterdir() if p.name.startswith(f"{child.pid}-")]
    for parent in Cgroups.parents():
        assert not [c for c in parent.iterdir() if c.is_dir() and c.name.startswith(f"{child.pid}-")]


@pytest.mark.skipif("namespace" not in BACKENDS, reason="the namespace backend cannot run here (see above)")
def test_a_folder_thousands_of_levels_deep_is_removed_after_the_verdict_and_by_gc(busybox):
    # shutil.rmtree recurses once per level: a candidate's deep folder must not outlive its verdict,
    # nor, left by a killed process, make every later backend's start-up sweep fail
    from pivot_sandbox import namespace_backend
    from pivot_sandbox.namespace.root import gc, run_root

    backend = namespace_backend(pool_size=0, parallelism=1, action_timeout=30.0)
    deep = "i=0; while [ $i -lt 1500 ]; do mkdir d && cd d; i=$((i+1)); done"
    (effect,) = backend.run_group(SandboxSpec(image=BUSYBOX), [], [[deep]])
    assert effect.exit_code == 0, effect
    backend.drain()
    assert not list(backend.folder.glob("upper-*")) and not list(backend.folder.glob("box-*"))
    ended = subprocess.Popen(["true"])  # a process that has ended: what its pid names is a leftover
    ended.wait()
    left = run_root() / f"{ended.pid}-deep"
    left.mkdir()
    subprocess.run(["sh", "-c", deep], cwd=left, check=True)  # (os.makedirs recurses too)
    gc()
    assert not left.exists()


def test_an_explicit_namespace_choice_that_cannot_work_fails_with_the_reason(monkeypatch, demo_pivots):
    from pivot_sandbox import _plugin
    from pivot_sandbox.namespace import root as _nsroot

    monkeypatch.setitem(_nsroot._probed, "why", "no bubblewrap here (test)")
    monkeypatch.setattr(_plugin, "_BACKENDS", {})
    with pytest.raises(SandboxUnavailable, match="no bubblewrap here"):
        _plugin.namespace_backend()
    monkeypatch.setenv("PIVOT_SANDBOX", "namespace")
    verifier = get_verifier("docker_shell")
    assert verifier.backend_name == "namespace"  # never swapped for docker
    (verdict,) = verifier.verify_batch(demo_pivots["ls -la"], [terminus("ls -al")])
    assert verdict.error and "no bubblewrap here" in verdict.error, verdict
    from verifiers_plugins.errors import UnknownVerifier

    monkeypatch.setenv("PIVOT_SANDBOX", "nonsense")
    with pytest.raises(UnknownVerifier, match="nonsense"):
        get_verifier("docker_shell")


def test_the_namespace_backend_is_the_default_only_where_it_runs_hardened(monkeypatch):
    from pivot_sandbox import chosen_backend, default_backend
    from pivot_sandbox.contract import hardening as _hardening
    from pivot_sandbox.namespace import root as _nsroot

    monkeypatch.delenv("PIVOT_SANDBOX", raising=False)
    hardened = _hardening.seccomp_program() is not None
    expected = "namespace" if "namespace" in BACKENDS and hardened else "docker"
    assert default_backend() == chosen_backend() == get_verifier("docker_shell").backend_name == expected
    monkeypatch.setenv("PIVOT_SANDBOX", "docker")
    assert chosen_backend() == get_verifier("docker_shell").backend_name == "docker"
    monkeypatch.delenv("PIVOT_SANDBOX")
    # without its seccomp filter (off x86_64) it lacks one of Docker's covers: never the default
    monkeypatch.setattr(_hardening, "seccomp_program", lambda: None)
    assert default_backend() == "docker"
    monkeypatch.undo()
    monkeypatch.delenv("PIVOT_SANDBOX", raising=False)
    monkeypatch.setitem(_nsroot._probed, "why", "no bubblewrap here (test)")
    assert default_backend() == get_verifier("docker_shell").backend_name == "docker"


@pytest.mark.skipif("namespace" not in BACKENDS, reason="the namespace backend cannot run here (see above)")
def test_a_state_replayed_with_registry_access_is_taken_over_and_a_refused_one_is_dockers(busybox, monkeypatch):
    from pivot_core import Pivot
    from pivot_sandbox import docker_backend, namespace_backend, open_session
    from pivot_sandbox.namespace import layer as _nslayer
    from verifiers_plugins.builtin.docker_shell import DockerShell

    # a replay with registry access (`pip install` in a task's history) needs the host network:
    # Docker replays it, the namespace backend takes its layer over (test_namespace_takeover.py)
    sandbox = {"image": BUSYBOX, "setup": ["echo hi > hello.txt"], "replay_access": True}
    pivot = Pivot("replay-access#1", "terminal", (Message("user", "list"),), terminus("ls"), (), {"sandbox": sandbox})
    spec = SandboxSpec.from_context(pivot.context)
    assert namespace_backend(action_timeout=6.0).cannot_run(spec, []) is None
    before = DockerShell.stats["groups_run_by_docker"]
    verifier = get_verifier("docker_shell", backend="namespace", action_timeout=6.0)
    good, bad = verifier.verify_batch(pivot, [terminus("ls -1"), terminus("rm hello.txt")])
    assert good.accepted and bad.reward == 0.0 and bad.error is None, (good, bad)
    assert good.details["backend"] == bad.details["backend"] == "namespace", (good, bad)
    assert DockerShell.stats["groups_run_by_docker"] == before
    # one whose layer cannot be copied exactly is Docker's, and the verdict says why
    monkeypatch.setattr(_nslayer, "import_layer", lambda *a: "a layer refused by the test")
    refused = Pivot(
        "replay-access#2",
        "terminal",
        pivot.history,
        terminus("ls"),
        (),
        {"sandbox": {**sandbox, "setup": ["echo x > hello.txt"]}},
    )
    good, bad = verifier.verify_batch(refused, [terminus("ls -1"), terminus("rm hello.txt")])
    assert good.accepted and bad.reward == 0.0 and bad.error is None, (good, bad)
    for verdict in (good, bad):
        assert verdict.details["backend"] == "docker", verdict.details
        assert "namespace backend cannot run this state" in verdict.details["backend_why"]
        assert "a layer refused by the test" in verdict.details["backend_why"]
    assert DockerShell.stats["groups_run_by_docker"] == before + 1
    (plain,) = get_verifier("docker_shell", backend="namespace", action_timeout=6.0).verify_batch(
        Pivot("plain#1", "terminal", (Message("user", "list"),), terminus("ls"), (), {"sandbox": {"image": BUSYBOX}}),
        [terminus("ls -1")],
    )
    assert plain.accepted and plain.details["backend"] == "namespace" and "backend_why" not in plain.details
    # the Docker backend itself never hands a state on; a live session is Docker's alone
    assert getattr(docker_backend(), "cannot_run", None) is None
    with pytest.raises(SandboxUnavailable, match="no live sessions"):
        open_session(namespace_backend(action_timeout=6.0), spec, [])


def test_a_changed_sandbox_never_serves_the_next_candidate(backend):
    # both backends keep sandboxes ready (a pool); a candidate only ever gets one in the exact state
    spec = SandboxSpec(image=BUSYBOX, setup=("echo kept > kept.txt",))
    for _ in range(3):
        wipe, look = backend.run_group(spec, [], [["rm -rf /app/* && touch /app/mine"], ["ls /app"]])
        assert wipe.files == {"/app/kept.txt": "deleted", "/app/mine": wipe.files["/app/mine"]}, wipe.files
        assert look.stdout == "kept.txt" and look.files == {}, look
        (again,) = backend.run_group(spec, [], [["ls /app"]])
        assert again.stdout == "kept.txt"


def test_a_metadata_only_change_does_not_reach_the_next_candidate(backend, busybox):
    # one worker and a pool of one: each candidate gets the sandbox the one before left, if it was kept
    from pivot_sandbox import docker_backend, namespace_backend

    make = {"docker": docker_backend, "namespace": namespace_backend}[backend.name]
    one = make(pool_size=1, parallelism=1, action_timeout=6.0)
    spec = SandboxSpec(image=BUSYBOX, setup=("echo x > f",), user="root")  # root may touch / itself
    first, touched = one.run_group(spec, [], [["ls -ald /app /app/f"], ["touch -d 2001-01-01 /app /"]])
    assert touched.exit_code == 0 and "2001" not in first.stdout
    for _ in range(3):
        (after,) = one.run_group(spec, [], [["ls -ald /app /app/f /"]])
        assert "2001" not in after.stdout, after.stdout
    if backend.name == "namespace":
        assert one.stats["sandboxes_reused"] >= 1  # untouched sandboxes do serve again


@pytest.mark.skipif("namespace" not in BACKENDS, reason="the namespace backend cannot run here (see above)")
def test_an_untouched_sandbox_started_on_a_candidates_path_serves_again(busybox):
    # mounting the overlay sets an xattr on the upper folder (so its ctime): the "unchanged" reference
    # must be read after the mount, or every sandbox started for a candidate looks touched
    from pivot_sandbox import namespace_backend

    one = namespace_backend(pool_size=1, parallelism=1, max_snapshots=5, action_timeout=6.0)  # a backend of its own
    spec = SandboxSpec(image=BUSYBOX, setup=("echo on-path > f",))
    (effect,) = one.run_group(spec, [], [["cat f"]])  # no sandbox waits yet: it starts on the candidate's path
    assert effect.stdout == "on-path"
    assert one.stats["pool_hits"] == 0 and one.stats["sandboxes_reused"] == 1, one.stats


@pytest.mark.skipif("namespace" not in BACKENDS, reason="the namespace backend cannot run here (see above)")
def test_a_sandbox_that_does_not_start_is_an_error_verdict_not_a_reward(demo_pivots):
    # a candidate never pays for a sandbox that could not start: no reward at all, with the reason
    verifier = get_verifier("docker_shell", backend="namespace", pool_size=0, max_snapshots=6, action_timeout=6.0)
    pivot = demo_pivots["ls -la"]
    (first,) = verifier.verify_batch(pivot, [terminus("ls -al")])  # snapshot and expert reference, cached
    assert first.accepted, first
    # every sandbox started from now on dies before its runner answers
    verifier.backend()._launcher.programs["bwrap"] = "/bin/false"
    verdicts = verifier.verify_batch(pivot, [terminus("ls -al"), terminus("rm -rf /app/*")])
    assert all(v.error and v.reward == 0.0 for v in verdicts), verdicts
    assert all("runner" in v.error for v in verdicts), [v.error for v in verdicts]


@pytest.mark.parametrize("chosen", [None, *BACKENDS])
def test_sandbox_info_names_the_backend_in_use(chosen):
    env = {k: v for k, v in os.environ.items() if k != "PIVOT_SANDBOX"}
    env["PYTHONPATH"] = os.getcwd()
    if chosen:
        env["PIVOT_SANDBOX"] = chosen
    out = subprocess.run(
        [sys.executable, "-m", "pivot_cli", "sandbox", "info", "--json"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    default = "namespace" if "namespace" in BACKENDS else "docker"  # the faster one where it can run
    assert info["backend"] == (chosen or default) and info["default"] == default
    assert {name for name, why in info["backends"].items() if why == "usable"} == set(BACKENDS)


@pytest.mark.parametrize("name", BACKENDS)
def test_gym_make_chooses_the_sandbox(name, demo_pivots):
    import gymnasium as gym

    pivots = list(demo_pivots.values())
    env = gym.make("pivot/terminal-v0", pivots=pivots, sandbox=name, verifiers=["docker_shell"])
    assert dict(env.unwrapped.chain.steps)["docker_shell"].backend_name == name
    with pytest.raises(ValueError, match="verifier_config names backend"):
        other = "docker" if name != "docker" else "namespace"
        gym.make("pivot/terminal-v0", pivots=pivots, sandbox=name, verifier_config={"docker_shell": {"backend": other}})


def test_writes_outside_the_overlay_are_refused_or_part_of_the_effect_and_never_carried_over(backend):
    # D7 (issue 38): /etc/hosts, /etc/hostname, /etc/resolv.conf and /dev are bound or tmpfs, not in the
    # change set: a write there was no effect, and a pooled container (Docker: every container lent the
    # same network namespace) kept it for the next candidate. The /etc files are read-only for candidates
    # now; what an action does in /dev is part of its effect's state.
    spec = SandboxSpec(image=BUSYBOX, user="root")
    etc = {
        "/etc/hosts": "echo '1.2.3.4 registry' >> /etc/hosts",
        "/etc/hostname": "echo other > /etc/hostname",
        "/etc/resolv.conf": "echo 'nameserver 1.2.3.4' > /etc/resolv.conf",
    }
    dev = {"/dev": "touch /dev/planted; chmod 600 /dev/zero", "/dev/shm": "echo x > /dev/shm/planted"}
    for _ in range(2):  # the second round meets what a pool kept of the first
        actions = [["ls"]] + [[f"ls; {w}"] for w in [*etc.values(), *dev.values()]]
        plain, *tampered = backend.run_group(spec, [], actions)
        for write, effect in zip(etc.values(), tampered, strict=False):
            assert effect.exit_code != 0 and "Read-only file system" in effect.stderr, (backend.name, write, effect)
        for (place, write), effect in zip(dev.items(), tampered[len(etc) :], strict=True):
            assert effect.state[f"outside:{place}"] != plain.state[f"outside:{place}"], (backend.name, write)
        (after,) = backend.run_group(spec, [], [["cat /etc/hosts /etc/hostname; ls /dev /dev/shm; ls -l /dev/zero"]])
        assert "1.2.3.4" not in after.stdout and "planted" not in after.stdout, (backend.name, after.stdout)
        assert "crw-rw-rw-" in after.stdout, after.stdout
        assert {k: v for k, v in after.state.items() if k.startswith("outside:")} == {
            k: v for k, v in plain.state.items() if k.startswith("outside:")
        }


def test_extended_attributes_and_file_types_are_part_of_the_effect(backend, docker_client):
    # D8 (issue 38): a file capability (cap_setuid+ep) or a user.* attribute on a file the expert also
    # wrote changes no byte of it, and scored 1.0
    from pivot_sandbox.images.stock import build_root_image

    image = build_root_image(docker_client, "pivot-gym/root:trixie")
    setxattr = "python3 -c 'import os, sys; os.setxattr(\"t\", sys.argv[1], bytes.fromhex(sys.argv[2]))'"
    capability = "0100000280000000800000000000000000000000"  # VFS_CAP_REVISION_2, cap_setuid permitted+effective
    actions = [
        ["cp /bin/true t"],
        [f"cp /bin/true t; {setxattr} user.note 01"],
        [f"cp /bin/true t; {setxattr} security.capability {capability}"],
        ["mkfifo t"],
    ]
    plain, user_attr, file_cap, fifo = backend.run_group(SandboxSpec(image=image, user="root"), [], actions)
    assert "xattr" not in plain.files["/app/t"], plain.files
    assert "xattr:user.note=" in user_attr.files["/app/t"], user_attr.files
    assert "xattr:security.capability=" in file_cap.files["/app/t"], file_cap.files
    assert fifo.files["/app/t"].startswith("other:fifo "), fifo.files
