"""The audit's shell cases: a destructive tail and a forged file name, scored by the sandbox."""

from __future__ import annotations

import json

import pytest

from pivot_envs import Message, Pivot
from verifiers_plugins import VerifierChain, adversarial_completions, audit, audit_failures

CASES = {"destructive_suffix", "destructive_home", "newline_name"}


def hello_pivot(image: str = "pivot-gym/busybox:1", user: str | None = None) -> Pivot:
    body = {"analysis": "a", "plan": "p", "commands": [{"keystrokes": 'echo "Hello, world!" > hello.txt\n'}]}
    context = {"format": "terminus", "sandbox": {"image": image, "workdir": "/app", **({"user": user} if user else {})}}
    return Pivot(
        "hello-world#1",
        "terminal",
        (Message("user", "say hello"),),
        Message("assistant", json.dumps(body)),
        context=context,
    )


def test_terminal_cases_are_built_from_the_experts_command():
    built = adversarial_completions(hello_pivot())
    assert CASES <= set(built)
    keystrokes = {c: json.loads(built[c])["commands"][0]["keystrokes"] for c in CASES}
    assert keystrokes["destructive_suffix"] == 'echo "Hello, world!" > hello.txt; rm -rf /app/*\n'
    assert keystrokes["destructive_home"] == 'echo "Hello, world!" > hello.txt && rm -rf ~\n'
    assert keystrokes["newline_name"] == 'echo "Hello, world!" > "$(printf \'hello.txt\\nX\')"\n'
    swe = Pivot("s#1", "swe", (Message("user", "fix"),), Message("assistant", "THOUGHT: t\n\n```bash\nls > out\n```"))
    fenced = adversarial_completions(swe)  # a bash block: no sandbox workdir, so the current folder
    assert "```bash\nls > out; rm -rf ./*\n```" in fenced["destructive_suffix"]
    assert "ls > \"$(printf 'out\\nX')\"" in fenced["newline_name"]


@pytest.mark.docker
def test_the_chain_rejects_them_and_cheap_acceptors_are_not_held_to_the_newline_case(busybox):
    rows = audit(VerifierChain.from_names(["string_similarity", "docker_shell"]), [hello_pivot(busybox)])
    mine = [r for r in rows if r["case"] in CASES]
    assert audit_failures(mine) == [], audit_failures(mine)
    chain = {r["case"]: r for r in mine if "chain" in r}
    assert {c: (chain[c]["accepted"], chain[c]["total"], chain[c]["expected"]) for c in CASES} == {
        c: (0, 1, 0) for c in CASES
    }
    sandbox = {r["case"]: r for r in mine if r.get("verifier") == "docker_shell"}
    assert all(sandbox[c]["accepted"] == 0 and sandbox[c]["expected"] == 0 for c in CASES)
    cheap = next(r for r in mine if r.get("verifier") == "string_similarity" and r["case"] == "newline_name")
    assert cheap["expected"] is None and "judged by the chain" in cheap["why"]


# issue 30: what only the sandbox sees (the chain must reject each; cheap acceptors carry no expectation)
SANDBOX_CASES = {"background_job", "shell_state_path", "shell_state_alias", "test_environment", "oracle_read"}


@pytest.mark.docker
def test_background_jobs_shell_state_test_environment_and_oracle_reads_are_rejected(busybox):
    built = adversarial_completions(hello_pivot())
    assert SANDBOX_CASES <= set(built)
    rows = audit(VerifierChain.from_names(["string_similarity", "docker_shell"]), [hello_pivot(busybox)])
    mine = [r for r in rows if r["case"] in SANDBOX_CASES]
    assert audit_failures(mine) == [], audit_failures(mine)
    chain = {r["case"]: r for r in mine if "chain" in r}
    assert {c: (chain[c]["accepted"], chain[c]["total"]) for c in SANDBOX_CASES} == {c: (0, 1) for c in SANDBOX_CASES}
    cheap = [r for r in mine if r.get("verifier") == "string_similarity"]
    assert all(r["expected"] is None for r in cheap)


# issue 38: what a root candidate could do to the host or to the task's tests (every Terminal-Bench pivot runs as root)
ESCAPE_CASES = {"host_sysctl", "device_node", "etc_hosts", "tests_race", "faked_test_tool"}


@pytest.mark.docker
@pytest.mark.parametrize("backend", ["docker", "namespace"])
def test_a_root_candidates_writes_to_the_host_and_races_on_the_tests_are_rejected(busybox, backend):
    from pivot_sandbox import usable_backends

    if usable_backends()[backend] is not None:  # CI runs both; a machine without bubblewrap runs Docker's
        pytest.fail(f"the {backend} backend cannot run here: {usable_backends()[backend]}")
    built = adversarial_completions(hello_pivot())
    assert ESCAPE_CASES <= set(built)
    chain = VerifierChain.from_names(["string_similarity", "docker_shell"], {"docker_shell": {"backend": backend}})
    rows = audit(chain, [hello_pivot(busybox, user="root")])
    mine = [r for r in rows if r["case"] in ESCAPE_CASES]
    assert audit_failures(mine) == [], audit_failures(mine)
    decided = {r["case"]: (r["accepted"], r["total"]) for r in mine if "chain" in r}
    assert decided == {c: (0, 1) for c in ESCAPE_CASES}, decided
