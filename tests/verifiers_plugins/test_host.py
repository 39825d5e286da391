import pytest

from verifiers_plugins import DuplicateName, PluginError, UnknownVerifier, Verdict, get_host, get_verifier, hookimpl


class AlwaysYes:
    def verify(self, pivot, action):
        return Verdict.accept("always")


class InlinePlugin:
    @hookimpl
    def register_verifiers(self, register):
        register("always_yes", AlwaysYes)


def test_inline_plugin_registers_and_is_credited(fresh_host):
    fresh_host.register_plugin(InlinePlugin(), name="inline", distribution="my-dist")
    reg = fresh_host.registry("verifiers")["always_yes"]
    assert (reg.plugin, reg.distribution) == ("inline", "my-dist")
    assert get_verifier("always_yes").verify(None, None).accepted


def test_builtins_are_plugins_credited_to_pivot_gym():
    regs = get_host().registry("verifiers")
    assert {"turn_kind", "json_schema", "string_similarity", "tool_name", "tool_args"} <= set(regs)
    assert all(regs[n].distribution == "pivot-gym" for n in ("turn_kind", "tool_args"))


def test_duplicate_name_names_both_plugins_and_leaves_host_usable(fresh_host):
    class Clash:
        @hookimpl
        def register_verifiers(self, register):
            register("tool_args", AlwaysYes)

    with pytest.raises(
        DuplicateName, match=r"tool_args.*verifiers_plugins.builtin.tool_args.*pivot-gym.*clash.*other-dist"
    ):
        fresh_host.register_plugin(Clash(), name="clash", distribution="other-dist")
    assert "clash" not in fresh_host.distributions()
    assert fresh_host.registry("verifiers")["tool_args"].distribution == "pivot-gym"


def test_register_rejects_non_callables(fresh_host):
    class Bad:
        @hookimpl
        def register_verifiers(self, register):
            register("bad", 42)

    with pytest.raises(PluginError, match="expects a callable"):
        fresh_host.register_plugin(Bad(), name="bad")


def test_unknown_verifier_suggests_a_name():
    with pytest.raises(UnknownVerifier, match="Did you mean 'tool_args'"):
        get_verifier("tool_arg")
