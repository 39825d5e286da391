"""`pivot plugins --check` and `check_plugins`: every problem found, named, and a non-zero exit."""

import json
import subprocess
import sys
import types

import pluggy
import pytest

from verifiers_plugins import PluginError, Verdict, check_plugins, get_host, get_verifiers, hookimpl, hookspecs
from verifiers_plugins._host import hook_names

TYPO = """
from verifiers_plugins import Verdict, hookimpl


class Fine:
    def verify(self, pivot, action):
        return Verdict(1.0, True)


@hookimpl
def register_verifier(register):  # misspelled: the spec is register_verifiers
    register("typo_verifier", Fine)
"""

CLASH = """
from verifiers_plugins import Verdict, hookimpl


class Yes:
    def verify(self, pivot, action):
        return Verdict(1.0, True)


@hookimpl
def register_verifiers(register):
    register("clash_name", Yes)
"""

SIGNATURE = """
from verifiers_plugins import hookimpl


@hookimpl
def register_verifiers(register, config):  # `config` is no argument of the spec
    pass
"""


@pytest.fixture(scope="module")
def site(pip_install_plugins):
    return pip_install_plugins(
        {
            "pivot-typo": ("0.1", {"pivot_typo.py": TYPO}, {"typo": "pivot_typo"}),
            "pivot-clash-one": ("1.0", {"pivot_clash_one.py": CLASH}, {"clash_one": "pivot_clash_one"}),
            "pivot-clash-two": ("3.1", {"pivot_clash_two.py": CLASH}, {"clash_two": "pivot_clash_two"}),
            "pivot-badsig": ("0.2", {"pivot_badsig.py": SIGNATURE}, {"badsig": "pivot_badsig"}),
        }
    )


@pytest.fixture
def on_path(site, use_plugin_site):
    use_plugin_site(site)


# These tests pip-install real packages once per module (about 10-20 s on 2 cores).
installed = [pytest.mark.slow, pytest.mark.usefixtures("on_path")]


def with_installed(test):
    for mark in installed:
        test = mark(test)
    return test


def check_cli(allow: str) -> tuple[int, dict]:
    import os

    env = {**os.environ, "PIVOT_PLUGINS": allow}
    out = subprocess.run(
        [sys.executable, "-m", "pivot_cli", "plugins", "--check", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    return out.returncode, json.loads(out.stdout)


@with_installed
def test_check_passes_on_builtins_only():
    code, report = check_cli("")
    assert code == 0 and report["ok"] and report["problems"] == []
    assert {p["distribution"] for p in report["plugins"]} == {"pivot-gym"}


@with_installed
def test_check_catches_a_misspelled_hook_and_exits_non_zero():
    code, report = check_cli("pivot-typo")
    assert code == 1 and not report["ok"]
    [problem] = report["problems"]
    assert (problem["plugin"], problem["distribution"], problem["hook"]) == ("typo", "pivot-typo", "register_verifier")
    assert "Did you mean 'register_verifiers'" in problem["message"]


@with_installed
def test_check_catches_a_duplicate_name_naming_both_distributions():
    code, report = check_cli("pivot-clash-one,pivot-clash-two")
    assert code == 1
    [problem] = report["problems"]
    assert "'clash_name'" in problem["message"]
    assert "pivot-clash-one 1.0" in problem["message"] and "pivot-clash-two 3.1" in problem["message"]


@with_installed
def test_check_names_plugin_and_hook_of_a_signature_error_and_reports_everything_at_once():
    code, report = check_cli("pivot-badsig,pivot-typo,pivot-clash-one,pivot-clash-two")
    assert code == 1
    by_plugin = {p["plugin"]: p for p in report["problems"]}
    assert set(by_plugin) == {"badsig", "typo", "clash_two"}  # entry points load sorted by distribution
    assert by_plugin["badsig"]["hook"] == "register_verifiers" and "config" in by_plugin["badsig"]["message"]


@with_installed
def test_host_refuses_the_misspelled_hook_with_a_clear_error(monkeypatch):
    monkeypatch.setenv("PIVOT_PLUGINS", "pivot-typo")
    with pytest.raises(
        PluginError,
        match=r"'typo' \(distribution pivot-typo\).*register_verifier.*--check|"
        r"'typo' \(distribution pivot-typo\).*unknown hook",
    ):
        get_verifiers()


@with_installed
def test_host_refuses_a_signature_error_naming_plugin_and_hook(monkeypatch):
    monkeypatch.setenv("PIVOT_PLUGINS", "pivot-badsig")
    with pytest.raises(PluginError, match=r"'badsig' \(distribution pivot-badsig\).*register_verifiers"):
        get_verifiers()


def test_inline_plugin_with_unknown_hook_is_refused_and_not_kept():
    class Typo:
        @hookimpl
        def register_verifierz(self, register):
            pass

    with pytest.raises(PluginError, match="register_verifierz.*Did you mean 'register_verifiers'"):
        get_host().register_plugin(Typo(), name="typo-inline")
    assert "typo-inline" not in get_host().distributions()


def test_check_validates_third_party_verifier_objects():
    class BadCost:
        cost = "expensive"

        def verify(self, pivot, action):
            return Verdict(1.0, True)

    class NoVerify:
        pass

    class Plugin:
        @hookimpl
        def register_verifiers(self, register):
            register("bad_cost", BadCost)
            register("no_verify", NoVerify)
            register("not_callable", 3)

    report = check_plugins(load_entrypoints=False, extra=[(Plugin(), "inline", "my-dist")])
    messages = [p.message for p in report.problems]
    assert not report.ok
    assert any("bad_cost" in m and "expected cost in" in m for m in messages)
    assert any("no_verify" in m and "no callable verify" in m for m in messages)
    assert any("expects a callable" in m for m in messages)


def test_deprecated_hook_is_a_warning_through_warn_on_impl():
    # A spec module as it would look after renaming a hook: the old name warns on impl.
    specs = types.ModuleType("future_specs")
    spec = pluggy.HookspecMarker(hookspecs.PROJECT)
    for name in hook_names():  # every current hook: the built-ins implement them all
        setattr(specs, name, spec(getattr(hookspecs, name)))

    def register_checkers(register):
        """Old name of register_verifiers."""

    specs.register_checkers = spec(
        warn_on_impl=DeprecationWarning("register_checkers is deprecated since hook API 2: use register_verifiers")
    )(register_checkers)

    class Old:
        @hookimpl
        def register_checkers(self, register):
            pass

    report = check_plugins(load_entrypoints=False, extra=[(Old(), "old", "old-dist")], specs=specs)
    [problem] = [p for p in report.problems if p.plugin == "old"]
    assert (problem.severity, problem.hook) == ("warning", "register_checkers")
    assert "use register_verifiers" in problem.message
    assert report.ok  # a deprecation warns; it does not fail the check
