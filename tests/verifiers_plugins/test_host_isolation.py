"""A broken installed plugin is left out loudly; every env that does not need it keeps working (issue 19 item 11)."""

import json
import subprocess
import sys

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401  (registers the env ids)
from verifiers_plugins import PluginError, UnknownVerifier, get_verifiers, reset_host
from verifiers_plugins.errors import BrokenPluginWarning

# Every test here uses pip-installed real packages (installed once per module).
pytestmark = pytest.mark.slow

RAISES_HALFWAY = """
from verifiers_plugins import Verdict, hookimpl


class Half:
    def verify(self, pivot, action):
        return Verdict(1.0, True, "half")


@hookimpl
def register_verifiers(register):
    register("half_done", Half)
    raise RuntimeError("config file missing")
"""

IMPORT_FAILS = """
raise ImportError("needs a package that is not installed")
"""

GOOD = """
from verifiers_plugins import Verdict, hookimpl


class Fine:
    def verify(self, pivot, action):
        return Verdict(0.0, False, "fine")


@hookimpl
def register_verifiers(register):
    register("fine_one", Fine)
"""


@pytest.fixture(scope="module")
def site(pip_install_plugins):
    return pip_install_plugins(
        {
            "pivot-halfway": ("0.1", {"pivot_halfway.py": RAISES_HALFWAY}, {"halfway": "pivot_halfway"}),
            "pivot-noimport": ("0.2", {"pivot_noimport.py": IMPORT_FAILS}, {"noimport": "pivot_noimport"}),
            "pivot-fine": ("1.0", {"pivot_fine.py": GOOD}, {"fine": "pivot_fine"}),
        }
    )


@pytest.fixture(autouse=True)
def on_path(site, use_plugin_site, monkeypatch):
    use_plugin_site(site)
    monkeypatch.setenv("PIVOT_PLUGINS", "pivot-halfway,pivot-noimport,pivot-fine")
    reset_host()


def test_a_raising_hook_leaves_only_that_plugin_out_with_a_warning():
    """Before: PluginError from every accessor, so every env and CLI verb failed."""
    with pytest.warns(BrokenPluginWarning) as caught:
        verifiers = get_verifiers()
    messages = " ".join(str(w.message) for w in caught)
    assert "'halfway'" in messages and "config file missing" in messages
    assert "'noimport'" in messages and "needs a package" in messages
    assert "fine_one" in verifiers and "tool_args" in verifiers
    assert "half_done" not in verifiers  # staged before the raise, never kept


def test_envs_work_unless_they_ask_for_the_broken_plugins_verifiers():
    with pytest.warns(BrokenPluginWarning):
        env = gym.make("pivot/tool-use-v0")
    env.reset(seed=0)
    assert env.step("hello")[1] == 0.0
    with pytest.raises(PluginError, match=r"'half_done' comes from plugin 'halfway'.*config file missing"):
        gym.make("pivot/tool-use-v0", verifiers=["half_done"])
    # A name no loaded plugin has: the error names the broken plugins that might provide it.
    with pytest.raises(UnknownVerifier, match=r"noimport.*is broken"):
        gym.make("pivot/tool-use-v0", verifiers=["from_noimport"])


def test_pivot_plugins_lists_the_broken_plugins_and_other_verbs_work():
    out = subprocess.run(
        [sys.executable, "-m", "pivot_cli", "plugins", "--json"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    broken = {b["plugin"]: b for b in payload["broken"]}
    assert set(broken) == {"halfway", "noimport"}
    assert broken["halfway"]["distribution"] == "pivot-halfway" and "RuntimeError" in broken["halfway"]["error"]
    assert "fine_one" in {r["name"] for r in payload["plugins"]}
    assert "halfway" in out.stderr  # the warning reaches the user
    envs = subprocess.run(
        [sys.executable, "-m", "pivot_cli", "envs", "--json"], capture_output=True, text=True, timeout=120
    )
    assert envs.returncode == 0 and len(json.loads(envs.stdout)["envs"]) == 4
