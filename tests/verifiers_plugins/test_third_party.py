"""A third-party verifier package, pip-installed in the test, found through its entry point."""

import json
import subprocess
import sys

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401  (registers the env ids)
from verifiers_plugins import DuplicateName, get_verifiers

# Every test here pip-installs real packages (once per module: about 10-20 s on 2 cores).
pytestmark = pytest.mark.slow

SHOUTY = '''
from verifiers_plugins import Verdict, hookimpl


class Shouty:
    """Accepts a completion written in capitals (a toy rule any test can check by eye)."""

    version = "2"

    def verify(self, pivot, action):
        text = (action.content or "").strip()
        if text and text.isupper():
            return Verdict(1.0, True, "all caps")
        return Verdict(0.0, False, "not all caps")


@hookimpl
def register_verifiers(register):
    register("shouty", Shouty)
'''


def dup_plugin(verifier_name: str) -> str:
    return f'''
from verifiers_plugins import Verdict, hookimpl


class Yes:
    def verify(self, pivot, action):
        return Verdict(1.0, True, "yes")


@hookimpl
def register_verifiers(register):
    register("{verifier_name}", Yes)
'''


@pytest.fixture(scope="module")
def site(pip_install_plugins):
    """All of this module's packages, installed once; each test's allow-list picks what loads."""
    return pip_install_plugins(
        {
            "pivot-shouty": ("1.2.3", {"pivot_shouty.py": SHOUTY}, {"shouty": "pivot_shouty"}),
            "pivot-dup-a": ("1.0", {"pivot_dup_a.py": dup_plugin("same_name")}, {"dup_a": "pivot_dup_a"}),
            "pivot-dup-b": ("2.0", {"pivot_dup_b.py": dup_plugin("same_name")}, {"dup_b": "pivot_dup_b"}),
            "pivot-dup-c": ("1.0", {"pivot_dup_c.py": dup_plugin("tool_args")}, {"dup_c": "pivot_dup_c"}),
        }
    )


@pytest.fixture(autouse=True)
def on_path(site, use_plugin_site):
    use_plugin_site(site)


def pivot_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pivot_cli", *args], capture_output=True, text=True, timeout=120)


def test_installed_plugin_is_listed_with_its_distribution_and_used_by_gym_make(monkeypatch):
    monkeypatch.setenv("PIVOT_PLUGINS", "pivot-shouty")

    out = pivot_cli("plugins", "--json")
    assert out.returncode == 0, out.stderr
    rows = [r for r in json.loads(out.stdout)["plugins"] if r["name"] == "shouty"]
    assert len(rows) == 1
    assert (rows[0]["distribution"], rows[0]["version"], rows[0]["plugin"]) == ("pivot-shouty", "1.2.3", "shouty")
    assert rows[0]["verifier_version"] == "2"

    env = gym.make("pivot/terminal-v0", verifiers=["shouty"])
    env.reset(seed=0)
    _, reward, _, _, info = env.step("LS -LA")
    assert (reward, info["decided_by"], list(info["verdicts"])) == (1.0, "shouty", ["shouty"])
    _, reward, _, _, info = env.step("ls -la")
    assert reward == 0.0 and info["verdicts"]["shouty"]["reason"] == "not all caps"


def test_allow_list_decides_what_loads(monkeypatch):
    from verifiers_plugins import reset_host

    monkeypatch.setenv("PIVOT_PLUGINS", "")
    reset_host()
    assert "shouty" not in get_verifiers()
    # Distribution names match in PEP 503 form; entry-point names match too.
    for allow in ("Pivot_Shouty", "shouty", "other, pivot.shouty"):
        monkeypatch.setenv("PIVOT_PLUGINS", allow)
        reset_host()
        assert get_verifiers()["shouty"].distribution == "pivot-shouty", allow
    monkeypatch.setenv("PIVOT_PLUGINS", "pivot-shouty,pivot-dup-a")
    reset_host()
    assert {"shouty", "same_name"} <= set(get_verifiers())


def test_duplicate_verifier_name_fails_naming_both_distributions(monkeypatch):
    monkeypatch.setenv("PIVOT_PLUGINS", "pivot-dup-a,pivot-dup-b")

    for _ in range(2):  # a failed load fails again: the registries are never left half-filled
        with pytest.raises(DuplicateName, match=r"'same_name'.*pivot-dup-(a|b).*pivot-dup-(a|b)") as err:
            get_verifiers()
        assert "pivot-dup-a" in str(err.value) and "pivot-dup-b" in str(err.value)
    with pytest.raises(DuplicateName):
        gym.make("pivot/terminal-v0", verifiers=["same_name"])

    out = pivot_cli("plugins")
    assert out.returncode == 1
    assert "pivot-dup-a" in out.stderr and "pivot-dup-b" in out.stderr and "Traceback" not in out.stderr


def test_duplicate_of_a_builtin_name_names_pivot_gym(monkeypatch):
    monkeypatch.setenv("PIVOT_PLUGINS", "pivot-dup-c")
    with pytest.raises(DuplicateName, match=r"'tool_args'.*distribution pivot-gym.*distribution pivot-dup-c"):
        get_verifiers()
