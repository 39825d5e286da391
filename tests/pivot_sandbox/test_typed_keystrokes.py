"""Keystrokes without Enter are typed, not run (issue 30 item 5): the sandbox verifier sees what the terminal runs."""

from __future__ import annotations

import json

import pytest

from pivot_envs import Message, Pivot
from verifiers_plugins import get_verifier

HELLO = 'echo "Hello, world!" > hello.txt'


def terminus(*keystrokes: str) -> Message:
    body = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": k, "duration": 0.1} for k in keystrokes]}
    return Message("assistant", json.dumps(body))


def hello_pivot(image: str, *history: Message) -> Pivot:
    context = {"format": "terminus", "sandbox": {"image": image, "workdir": "/app"}}
    return Pivot(
        "typed#1", "terminal", (Message("user", "say hello"), *history), terminus(HELLO + "\n"), context=context
    )


@pytest.mark.docker
def test_docker_shell_runs_only_what_the_terminal_would(busybox):
    pivot = hello_pivot(busybox)
    verdicts = get_verifier("docker_shell").verify_batch(
        pivot,
        [
            terminus(HELLO + "\n"),
            terminus(HELLO),  # typed at the prompt, never run: no file
            terminus('echo "Hello, world!" ', "> hello.txt", "Enter"),  # the Enter key runs the whole line
            terminus(HELLO + "\n", "rm -rf /app"),  # the expert's line, then a command left waiting
            terminus('echo "Hello, world!" \\> hello.txt\n'),  # escaped: prints, writes nothing
        ],
    )
    assert [v.accepted for v in verdicts] == [True, False, True, False, False], [v.reason for v in verdicts]
    assert "runs no shell command" in verdicts[1].reason
    assert "typed at the prompt" in verdicts[3].reason


@pytest.mark.docker
def test_text_a_history_turn_leaves_typed_starts_the_next_line(busybox):
    # `echo "Hello, world!" ` typed without Enter, then the pivot's turn types the rest and presses Enter
    typed = terminus('echo "Hello, world!" ')
    pivot = hello_pivot(busybox, typed, Message("user", "typed"))
    (verdict,) = get_verifier("docker_shell").verify_batch(pivot, [terminus("> hello.txt\n")])
    assert verdict.accepted is False  # it completes the typed line; the expert's turn types a whole line after it
    (same,) = get_verifier("docker_shell").verify_batch(pivot, [terminus(HELLO + "\n")])
    assert same.accepted, same.reason
