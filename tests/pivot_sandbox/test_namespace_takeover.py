"""The namespace backend on states Docker replayed with registry access (issue 27, `namespace/layer.py`).

Every Terminal-Bench pivot replays with registry access (`replay_access`: `pip install` in the
history needs the host network). The Docker backend replays and commits such a state; the namespace
backend copies only the snapshot's top layer and runs the candidates itself, on Docker's own layer
folders with a copy of a container's init layer. Checked here: on the CI tasks' pivots it runs the
group itself and gives Docker's rewards and effect details; deletions (whiteouts), a folder that
replaced the image's (opaque), hard links, a FIFO, the shell state and the link counts of folders
Docker's overlay merges look the same to both; a layer that cannot be copied exactly is refused
with the reason, and its state is Docker's to run, which the verdict says.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest

from pivot_envs import Message
from pivot_sandbox import SandboxSpec, usable_backends
from verifiers_plugins import get_verifier

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BOTH = all(why is None for why in usable_backends().values())
needs_both = pytest.mark.skipif(not BOTH, reason="needs the namespace backend too (test_backends.py says why not)")
BUNDLED = Path(__file__).resolve().parents[2] / "pivot_core" / "data" / "terminal_tasks"
HELLO = "hello-world"


def terminus(command: str) -> Message:
    keys = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": command + "\n", "duration": 0.1}]}
    return Message("assistant", json.dumps(keys))


@pytest.fixture(scope="module")
def ci_pivots(docker_client):
    """The bundled CI pivots of hello-world and aimo-airline-departures, their images built (or cached)."""
    from pivot_envs import load_pivots
    from pivot_envs._env import bundled_paths
    from pivot_sandbox.tasks import terminal_bench as _tasks

    for task_id in (HELLO, "aimo-airline-departures"):
        report = _tasks.task_image(docker_client, _tasks.load_task(BUNDLED / task_id))
        assert report.status in ("built", "cached"), report
    pivots = {p.id.rsplit("/", 1)[-1]: p for p in load_pivots(bundled_paths(["terminal_tasks.jsonl"])[0])}
    assert pivots[f"{HELLO}#1"].context["sandbox"]["replay_access"] is True
    return pivots


def test_no_docker_candidate_joins_the_network_of_a_replay_with_registry_access(ci_pivots):
    # a retired container lends its network namespace to the next one; the replay of a state with
    # registry access ran in the host's network, and the first candidate after it used to join it
    from pivot_sandbox import docker_backend

    spec = SandboxSpec(image=f"pivot-gym/task:{HELLO}", shell="/bin/bash", user="root", replay_access=True)
    backend = docker_backend(action_timeout=6.0)
    try:
        for history in (["echo a > /app/one"], ["echo b > /app/two"]):
            effects = backend.run_group(spec, history, [["ls /sys/class/net"]] * 3)
            assert [e.stdout.split() for e in effects] == [["lo"]] * 3, [e.stdout for e in effects]
    finally:
        backend.close()


def _details(verdict) -> str:
    return json.dumps({k: v for k, v in (verdict.details or {}).items() if k != "backend"}, sort_keys=True)


@needs_both
def test_ci_task_pivots_run_on_the_namespace_backend_with_dockers_verdicts(ci_pivots):
    from pivot_sandbox import namespace_backend
    from verifiers_plugins.builtin.docker_shell import DockerShell

    expert = 'echo "Hello, world!" > hello.txt'
    groups = {
        f"{HELLO}#1": (
            [
                expert,
                "printf 'Hello, world!\\n' > hello.txt",
                'echo "Hello world" > hello.txt',
                expert + "; rm -rf /app/*",
            ],
            [1.0, 1.0, 0.0, 0.0],
        ),
        # a history command ran in the Docker replay: the script it wrote is in the taken-over layer
        "aimo-airline-departures#3": (
            ["cat airline_analysis.py | head -3", "echo 79 > /app/mathematical_proof.txt", "rm -rf /app/*"],
            [None, 0.0, 0.0],
        ),
    }
    taken_over = namespace_backend().stats["snapshots_taken_over"]
    delegated = DockerShell.stats["groups_run_by_docker"]
    for pivot_id, (commands, expected) in groups.items():
        pivot = ci_pivots[pivot_id]
        candidates = [pivot.expert, *map(terminus, commands)]
        verdicts = {
            name: get_verifier("docker_shell", backend=name).verify_batch(pivot, candidates)
            for name in ("docker", "namespace")
        }
        for i, candidate in enumerate(candidates):
            docker, ns = verdicts["docker"][i], verdicts["namespace"][i]
            assert ns.details["backend"] == "namespace" and "backend_why" not in ns.details, ns
            assert (ns.reward, ns.error) == (docker.reward, docker.error), (pivot_id, candidate, ns, docker)
            assert _details(ns) == _details(docker), (pivot_id, candidate.content)
        rewards = [v.reward for v in verdicts["namespace"]]
        assert rewards[0] == 1.0 and all(e is None or r == e for r, e in zip(rewards[1:], expected, strict=True)), (
            pivot_id,
            [(v.reward, v.reason) for v in verdicts["namespace"]],
        )
    assert namespace_backend().stats["snapshots_taken_over"] >= taken_over + len(groups)
    assert DockerShell.stats["groups_run_by_docker"] == delegated


@needs_both
def test_deletions_an_opaque_folder_links_and_the_shell_state_look_the_same_to_both(ci_pivots):
    from pivot_sandbox import docker_backend, namespace_backend

    spec = SandboxSpec(image=f"pivot-gym/task:{HELLO}", shell="/bin/bash", user="root", replay_access=True)
    history = [
        # a file of the image deleted (a whiteout), a folder of the image replaced (opaque)
        "rm /etc/issue.net && rm -rf /etc/skel && mkdir /etc/skel && echo new > /etc/skel/x",
        "mkfifo /app/fifo && chown 1000:1000 /app/fifo && echo a > /app/h1 && ln /app/h1 /app/h2 && chmod 4750 /app/h1",
        "cd /etc && export FOO=bar",
    ]
    candidates = [
        # no times in listings: each backend replays the history itself, maybe a minute apart under load
        [
            "ls -la --time-style=+ /etc/skel; cat /etc/issue.net; echo FOO=$FOO; pwd; "
            "stat -c '%n %h %F %U %a' /app/h1 /app/fifo"
        ],
        ["ls /etc | grep -c issue; ls -A /etc/skel"],
        ["echo again > /etc/issue.net"],
        ["touch /etc/skel/.bashrc && ls -a /etc/skel"],
        ["rm -rf /etc/skel"],
        ["rm /app/h2; cat /app/h1"],
        ["cd /app && unset FOO"],
        # a folder that several of Docker's layers hold is merged there, and reports 1 link (overlay);
        # left out: /proc's link count (processes), /dev's size (bwrap's has another entry),
        # /etc/resolv.conf (Docker copies the host's, the namespace sandbox binds an empty one), and
        # the sandbox's own runner binary and run folder (each backend mounts its own): differences
        # of every namespace state, not of a taken-over one. One line per entry (`ls -l` pads its
        # columns to the widest entry, so one left-out file would shift every line)
        [
            "find / /app /etc -maxdepth 1 ! -name proc ! -name dev ! -name resolv.conf ! -name '.pivot-run*' "
            "-printf '%M %n %u %g %s %p\\n' | sort; "
            "stat -c '%n %h' /etc /usr /usr/bin /app /root /.dockerenv"
        ],
    ]
    ns = namespace_backend(action_timeout=6.0)
    before = dict(ns.stats)
    effects = {
        name: backend.run_group(spec, history, candidates)
        for name, backend in (("docker", docker_backend(action_timeout=6.0)), ("namespace", ns))
    }
    assert ns.stats["groups_run_by_docker"] == before.get("groups_run_by_docker", 0)
    assert ns.stats["snapshots_taken_over"] == before.get("snapshots_taken_over", 0) + 1
    for i, commands in enumerate(candidates):
        ns_effect, docker_effect = effects["namespace"][i].to_json(), effects["docker"][i].to_json()
        differ = {k: (docker_effect[k], ns_effect[k]) for k in docker_effect if docker_effect[k] != ns_effect.get(k)}
        if "stdout" in differ:  # the lines that differ, not the whole listing
            lines = difflib.unified_diff(*(v.splitlines() for v in differ.pop("stdout")), "docker", "namespace", n=0)
            differ["stdout"] = list(lines)
        if "state" in differ:  # the keys that differ, not the whole shell state
            d, n = differ.pop("state")
            differ["state"] = {k: (d.get(k), n.get(k)) for k in set(d) | set(n) if d.get(k) != n.get(k)}
        assert not differ, (commands, differ)
    seen = effects["namespace"][0]
    assert "No such file" in seen.stderr and "FOO=bar\n/etc\n" in seen.stdout, seen
    assert " x\n" in seen.stdout and ".bashrc" not in seen.stdout and ".profile" not in seen.stdout, seen.stdout
    assert "/app/h1 2 regular file root 4750" in seen.stdout and "/app/fifo 1 fifo" in seen.stdout, seen.stdout
    assert effects["namespace"][2].files == {"/etc/issue.net": effects["docker"][2].files["/etc/issue.net"]}


@needs_both
def test_a_layer_that_cannot_be_copied_exactly_is_dockers_and_the_verdict_says_why(ci_pivots, monkeypatch):
    from pivot_sandbox import namespace_backend
    from pivot_sandbox.namespace import layer as _nslayer

    monkeypatch.setattr(_nslayer, "import_layer", lambda *a: "a refusal staged by the test")
    pivot = ci_pivots[f"{HELLO}#1"]
    context = {**pivot.context, "sandbox": {**pivot.context["sandbox"], "setup": ["echo staged > /tmp/refused"]}}
    pivot = type(pivot)(pivot.id + "-refused", pivot.domain, pivot.history, pivot.expert, pivot.tools, context)
    spec = SandboxSpec.from_context(context)
    backend = namespace_backend(action_timeout=6.0)
    assert backend.cannot_run(spec) is None  # the daemon's layers are readable here
    assert "a refusal staged by the test" in backend.cannot_run(spec, [])
    ran, why = backend.backend_for(spec, [])  # the one routing decision, which docker_shell asks too
    assert ran.name == "docker" and "a refusal staged by the test" in why, (ran, why)
    good, bad = get_verifier("docker_shell", backend="namespace", action_timeout=6.0).verify_batch(
        pivot, [pivot.expert, terminus('echo "Hello world" > hello.txt')]
    )
    assert (good.reward, bad.reward, bad.error) == (1.0, 0.0, None), (good, bad)
    for verdict in (good, bad):
        assert verdict.details["backend"] == "docker", verdict.details
        assert "a refusal staged by the test" in verdict.details["backend_why"], verdict.details


def _image_info(upper: Path, layers: list[str]) -> dict:
    """What `import_layer` reads of the daemon's `inspect_image`: the image's layers and its top layer's folder."""
    return {"GraphDriver": {"Name": "overlay2", "Data": {"UpperDir": str(upper)}}, "RootFS": {"Layers": layers}}


def _layer(folder: Path) -> Path:
    """A layer as the overlay2 driver stores one: a whiteout, an opaque folder, hard links, owners."""
    (folder / "etc/skel").mkdir(parents=True)
    os.mknod(folder / "etc/issue.net", 0o020000, os.makedev(0, 0))  # a whiteout
    os.setxattr(folder / "etc/skel", "trusted.overlay.opaque", b"y")
    (folder / "app").mkdir()
    (folder / "app/h1").write_text("a")
    os.link(folder / "app/h1", folder / "app/h2")
    os.chown(folder / "app/h1", 1000, 1000)
    os.mkfifo(folder / "app/fifo")
    (folder / "app/link").symlink_to("/etc/passwd")
    os.utime(folder / "app", ns=(1, 123456789))
    return folder


@pytest.mark.skipif(os.geteuid() != 0, reason="whiteouts and trusted xattrs need root (as the namespace backend)")
def test_the_copy_is_checked_entry_for_entry_and_overlay_metadata_is_refused(tmp_path, monkeypatch):
    from pivot_sandbox.namespace import layer as _nslayer

    source = _layer(tmp_path / "layer")
    info = _image_info(source, ["base", "top"])
    assert _nslayer.import_layer(info, ("base",), tmp_path / "copy") is None
    expected, _ = _nslayer.manifest(str(source))
    assert _nslayer.manifest(str(tmp_path / "copy")) == (expected, None)
    assert os.getxattr(tmp_path / "copy/etc/skel", "trusted.overlay.opaque") == b"y"
    assert os.stat(tmp_path / "copy/app/h1").st_ino == os.stat(tmp_path / "copy/app/h2").st_ino
    # on another image than the exported root's
    assert "does not lie on the image" in _nslayer.import_layer(info, ("other",), tmp_path / "c2")
    # a copy that keeps less (owners, times, links) is seen, not trusted
    monkeypatch.setattr(_nslayer, "COPY", ["cp", "-R", "--"])
    assert "differs from Docker's" in _nslayer.import_layer(info, ("base",), tmp_path / "c3")
    monkeypatch.undo()
    # overlay metadata whose meaning depends on the mount, and an unconverted whiteout
    os.setxattr(source / "app", "trusted.overlay.redirect", b"/elsewhere")
    assert "overlay metadata trusted.overlay.redirect" in _nslayer.import_layer(info, ("base",), tmp_path / "c4")
    os.removexattr(source / "app", "trusted.overlay.redirect")
    (source / "app/.wh.gone").write_text("")
    assert "unconverted whiteout" in _nslayer.import_layer(info, ("base",), tmp_path / "c5")
    (source / "app/.wh.gone").unlink()
    # a device node: Docker's device cgroup, not the file, decides what opening it does
    os.mknod(source / "app/disk", 0o060600, os.makedev(8, 0))
    assert "device node '/app/disk' (8:0)" in _nslayer.import_layer(info, ("base",), tmp_path / "c6")


@needs_both
def test_a_device_node_the_replay_made_keeps_the_state_with_docker(ci_pivots):
    from pivot_core import Pivot
    from pivot_sandbox import namespace_backend

    # Docker's replay may `mknod` (its default capabilities); what opening the node does is the
    # device cgroup's to say, which only Docker's containers have
    sandbox = {**ci_pivots[f"{HELLO}#1"].context["sandbox"], "setup": ["mknod /app/disk b 8 0"]}
    spec = SandboxSpec.from_context({"sandbox": sandbox})
    assert "device node '/app/disk' (8:0)" in namespace_backend().cannot_run(spec, [])
    pivot = Pivot("device#1", "terminal", ci_pivots[f"{HELLO}#1"].history, terminus("ls"), (), {"sandbox": sandbox})
    (verdict,) = get_verifier("docker_shell", backend="namespace").verify_batch(
        pivot, [terminus("head -c 4 disk | wc -c")]
    )
    assert verdict.details["backend"] == "docker" and "device node" in verdict.details["backend_why"], verdict


@needs_both
def test_a_transcript_with_registry_access_runs_in_the_hosts_network(ci_pivots):
    # `check_replay` replays a run's commands with `transcript`: on the namespace backend only the set-up was
    # handed to Docker, and the commands ran with no network (get-bitcoin-nodes' `pip install Flask`: exit 1)
    from pivot_sandbox import namespace_backend

    backend = namespace_backend(action_timeout=6.0)
    install = "true || apt-get update"  # a command that reaches the registries (`needs_network`), never run here
    try:
        networks = {}
        for access, commands in ((True, [install]), (False, [install]), (True, [])):
            spec = SandboxSpec(image=f"pivot-gym/task:{HELLO}", shell="/bin/bash", user="root", replay_access=access)
            ((raw, _), *_) = backend.transcript(spec, ["ls /sys/class/net", *commands])
            networks[access, bool(commands)] = raw.stdout.decode().split()
    finally:
        backend.close()
    assert set(networks[True, True]) == set(os.listdir("/sys/class/net")) and len(networks[True, True]) > 1
    # no registry access, or no command that reaches the network: a sandbox of its own, run here
    assert set(networks[False, True]) <= {"lo"} and set(networks[True, False]) <= {"lo"}, networks
