"""A turn's commands as its run's harness ran them (`harness_action`): what every replay runs.

mini-swe-agent ran each command as `subprocess.run(command, shell=True, timeout=...)`: a fresh
`/bin/sh` from its working directory, killed at its timeout (the shell alone).
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from pivot_core import (
    KILLED_STATUS,
    InvalidTrajectory,
    Message,
    Pivot,
    harness_action,
    history_commands,
    mini_swe_agent_command,
)

MINI = {"harness": "mini-swe-agent", "command_timeout": 1}
KILLED = "The last command <command>sleep 9</command> timed out and has been killed.\n"


def _turn(*blocks: str) -> Message:
    return Message("assistant", "THOUGHT: go.\n\n" + "\n\n".join(f"```bash\n{b}\n```" for b in blocks))


def test_a_mini_swe_agent_command_runs_in_a_fresh_subshell_and_other_harnesses_as_written():
    (command,) = harness_action(_turn("cd /tmp && ls"), MINI).commands
    assert command == mini_swe_agent_command("cd /tmp && ls") and "/bin/sh -c 'cd /tmp && ls'" in command
    assert harness_action(_turn("cd /tmp && ls"), {"harness": "openhands"}).commands == ("cd /tmp && ls",)
    # a reply mini-swe-agent rejected for its format ran nothing
    assert harness_action(_turn("ls", "pwd"), MINI).commands == ()
    assert harness_action(Message("assistant", "no block"), MINI).commands == ()


def test_history_runs_a_killed_command_for_the_harnesss_timeout():
    history = (Message("user", "task"), _turn("sleep 9"), Message("user", KILLED), _turn("ls"))
    pivot = Pivot(
        "r#5", "terminal", (*history, Message("user", "<returncode>0</returncode>")), _turn("pwd"), context=MINI
    )
    assert history_commands(pivot) == [mini_swe_agent_command("sleep 9", 1.0), mini_swe_agent_command("ls")]
    with pytest.raises(InvalidTrajectory, match="context.command_timeout"):
        history_commands(
            Pivot("r#5", "terminal", pivot.history, pivot.expert, context={**MINI, "command_timeout": "x"})
        )


def _shell(command: str) -> subprocess.CompletedProcess[str]:
    """`command` as the sandbox's wrapper evaluates it: in bash, output to a file, no input."""
    return subprocess.run(["/bin/bash", "-c", command], capture_output=True, text=True, stdin=subprocess.DEVNULL)


def test_a_killed_command_is_killed_as_the_harness_killed_it():
    # nothing it does reaches the next command; a read waits on a terminal nobody types into
    ran = _shell(mini_swe_agent_command("cd /tmp && export X=1 && exit 3") + '; echo "$? $PWD x$X"')
    assert ran.stdout == f"3 {os.getcwd()} x\n"
    started = time.monotonic()
    ran = _shell(mini_swe_agent_command("echo asked; read answer; echo never", 1))
    assert ran.returncode == KILLED_STATUS and ran.stdout == "asked\n"
    assert 1 <= time.monotonic() - started < 10
    # what it started outlives the shell, and its next write meets a pipe nobody reads (nor holds it open)
    started = time.monotonic()
    ran = _shell(mini_swe_agent_command("(sleep 2; echo late) & echo early; sleep 9", 1))
    assert ran.returncode == KILLED_STATUS and ran.stdout == "early\n" and time.monotonic() - started < 2


def test_a_server_left_holding_the_output_times_out_as_it_did_for_the_harness():
    # solana-data: `python3 solana_server.py &` came back as a timeout in the run (subprocess.run reads the
    # pipe to its end, which the server holds); the replay's shell ended at once with 0 and diverged there
    started = time.monotonic()
    ran = _shell(mini_swe_agent_command("sleep 4 & echo started", 1))  # ends by itself later
    assert ran.returncode == KILLED_STATUS and ran.stdout == "started\n"
    assert 1 <= time.monotonic() - started < 10
    # one that lets go of the output ends when its shell ends, with its shell's status
    started = time.monotonic()
    ran = _shell(mini_swe_agent_command("sleep 4 >/dev/null 2>&1 & echo detached; exit 4", 1))
    assert ran.returncode == 4 and ran.stdout == "detached\n" and time.monotonic() - started < 1
