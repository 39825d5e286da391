"""The verifier plugin host and the built-in verifiers.

Third-party packages add verifiers with an entry point in the group `pivot`:

    from verifiers_plugins import hookimpl, Verdict

    @hookimpl
    def register_verifiers(register):
        register("my_verifier", MyVerifier)
"""

from verifiers_plugins._audit import AUDIT_CASES, AuditCase, adversarial_completions, audit, audit_failures
from verifiers_plugins._chain import ChainResult, VerifierChain, safe_verify
from verifiers_plugins._host import (
    DEFAULT_PLUGINS,
    PluginHost,
    Registration,
    get_host,
    get_parser,
    get_parsers,
    get_verifier,
    get_verifiers,
    load_plugins,
    reset_host,
)
from verifiers_plugins._verdict import Verdict, Verifier, verifier_meta
from verifiers_plugins.errors import DuplicateName, PluginError, UnknownVerifier
from verifiers_plugins.hookspecs import HOOK_API_VERSION, hookimpl, hookspec

__all__ = [
    "AUDIT_CASES",
    "AuditCase",
    "DEFAULT_PLUGINS",
    "HOOK_API_VERSION",
    "ChainResult",
    "DuplicateName",
    "PluginError",
    "PluginHost",
    "Registration",
    "UnknownVerifier",
    "adversarial_completions",
    "audit",
    "audit_failures",
    "Verdict",
    "Verifier",
    "VerifierChain",
    "get_host",
    "get_parser",
    "get_parsers",
    "get_verifier",
    "get_verifiers",
    "hookimpl",
    "hookspec",
    "load_plugins",
    "reset_host",
    "safe_verify",
    "verifier_meta",
]
