"""docker_shell in the Debian image (python3, bash, GNU coreutils): a `python -c` edit equals a `sed` edit.

The image is built once with debootstrap (about a minute on an idle machine) and cached by tag.
"""

from __future__ import annotations

import json

import pytest

from pivot_core import action_commands
from pivot_envs import Message, extract_pivots
from verifiers_plugins import get_verifier

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = {
    "task_id": "demo-python-edit",
    "instruction": "Mark the draft final in /app/notes.txt.",
    "setup": ["printf 'alpha TODO one\\nbeta draft\\ngamma draft too\\n' > notes.txt"],
    "solution_commands": ["cat notes.txt", "sed -i 's/draft/final/' notes.txt", "ls -la"],
}


@pytest.fixture(scope="module")
def debian_pivots(docker_client):
    from pivot_sandbox.images.stock import DEBIAN_TAG, build_debian_image
    from pivot_tasks import synthesize

    build_debian_image(docker_client, DEBIAN_TAG)
    (row,) = synthesize([TASK], DEBIAN_TAG)
    assert row["status"] == "ok", row
    return {action_commands(p.expert)[0]: p for p in extract_pivots(row["trajectory"]) if action_commands(p.expert)}


def terminus(command: str) -> Message:
    return Message(
        "assistant",
        json.dumps({"analysis": "a", "plan": "p", "commands": [{"keystrokes": command + "\n", "duration": 0.1}]}),
    )


def test_python_edit_equals_sed_edit(debian_pivots):
    pivot = debian_pivots["sed -i 's/draft/final/' notes.txt"]
    assert pivot.context["sandbox"]["shell"] == "/bin/bash"
    good = (
        "python3 -c \"import re,pathlib; p=pathlib.Path('notes.txt'); "
        "p.write_text('\\n'.join(re.sub('draft','final',l,count=1) for l in p.read_text().split('\\n')))\""
    )
    wrong = "python3 -c \"import pathlib; p=pathlib.Path('notes.txt'); p.write_text(p.read_text().upper())\""
    verdicts = get_verifier("docker_shell").verify_batch(pivot, [terminus(good), terminus(wrong)])
    assert verdicts[0].accepted, verdicts[0].details
    assert not verdicts[1].accepted and "files" in verdicts[1].details["differed"]


def test_gnu_ls_flag_order(debian_pivots):
    (verdict,) = get_verifier("docker_shell").verify_batch(debian_pivots["ls -la"], [terminus("ls -al")])
    assert verdict.accepted, verdict.details


def test_system_v_ipc_does_not_reach_the_next_candidate(debian_pivots):
    from pivot_core import history_commands
    from pivot_sandbox import SandboxSpec
    from pivot_sandbox.docker.backend import DockerBackend

    pivot = debian_pivots["ls -la"]
    spec, history = SandboxSpec.from_context(pivot.context), history_commands(pivot)
    probe = "ipcs -m -s -q | grep -c '^0x' || true"
    # one worker, a pool of one: each action runs in the container the one before left (it writes no file)
    backend = DockerBackend(pool_size=1, parallelism=1)
    try:
        before, made, after = backend.run_group(
            spec, history, [[probe], ["ipcmk -M 4096 && ipcmk -S 2 && ipcmk -Q"], [probe]]
        )
        assert backend.stats["containers_reused"] >= 2
    finally:
        backend.close()
    assert made.exit_code == 0 and made.stdout.count("id:") == 3, made
    assert before.stdout == after.stdout == "0"
