"""The hook API is versioned: released hooks and arguments never vanish; impls opt into arguments."""

import inspect

from verifiers_plugins import HOOK_API_VERSION, Verdict, get_verifiers, hookimpl, hookspecs
from verifiers_plugins._host import hook_names

# The hooks and arguments of each released hook API version. Never edit a released entry: a
# hook or argument leaves the spec only after a release in which it warns via `warn_on_impl`.
RELEASED = {
    1: {
        "register_verifiers": ("register",),
        "register_parsers": ("register",),
        "register_sandboxes": ("register",),
        "register_tool_worlds": ("register",),
        "register_categories": ("register",),
    },
    2: {"register_user_simulators": ("register",)},
}


def test_released_hooks_and_arguments_still_exist():
    assert max(RELEASED) <= HOOK_API_VERSION
    for version, hooks in RELEASED.items():
        for name, args in hooks.items():
            assert name in hook_names(), f"hook {name} (API {version}) was removed without a deprecation release"
            params = inspect.signature(getattr(hookspecs, name)).parameters
            missing = set(args) - set(params)
            assert not missing, f"{name} lost argument(s) {missing} of API {version}"


def test_released_hooks_document_their_version_and_arguments():
    for name, args in RELEASED[1].items():
        doc = inspect.getdoc(getattr(hookspecs, name))
        assert "Since hook API 1" in doc and "Args:" in doc, name
        assert all(f"{a}:" in doc for a in args), name


def test_an_impl_may_take_a_subset_of_the_spec_arguments(fresh_host):
    # What lets specs gain arguments without breaking plugins: pluggy passes only what an impl names.
    class NoArgs:
        @hookimpl
        def register_verifiers(self):
            pass

    class Yes:
        def verify(self, pivot, action):
            return Verdict(1.0, True)

    class Full:
        @hookimpl
        def register_verifiers(self, register):
            register("subset_ok", Yes)

    fresh_host.register_plugin(NoArgs(), name="no-args")
    fresh_host.register_plugin(Full(), name="full")
    assert "subset_ok" in get_verifiers()
