"""The verifier plugin host and the built-in verifiers.

Third-party packages add verifiers with an entry point in the group `pivot` (guide: docs/plugins.md):

    from verifiers_plugins import hookimpl, Verdict

    @hookimpl
    def register_verifiers(register):
        register("my_verifier", MyVerifier)
"""

from verifiers_plugins._async import DEFAULT_TIMEOUT_S, is_async_verifier
from verifiers_plugins._audit import AUDIT_CASES, AuditCase, adversarial_completions, audit, audit_failures
from verifiers_plugins._cache import CachedChain, RewardCache, default_cache_path
from verifiers_plugins._chain import ChainResult, Scorer, VerifierChain, as_verdict, safe_verify, safe_verify_batch
from verifiers_plugins._check import CheckReport, Problem, check_plugins
from verifiers_plugins._host import (
    DEFAULT_PLUGINS,
    EntryPointPlugin,
    PluginHost,
    Registration,
    entry_point_plugins,
    get_host,
    get_parser,
    get_parsers,
    get_user_simulator,
    get_verifier,
    get_verifiers,
    load_plugins,
    reset_host,
)
from verifiers_plugins._sandboxes import sandbox_backend
from verifiers_plugins._scaffold import write_scaffold
from verifiers_plugins._verdict import UNSTABLE, Verdict, Verifier, is_unstable, verifier_fingerprint, verifier_meta
from verifiers_plugins.errors import (
    BrokenPluginWarning,
    DuplicateName,
    JudgeAnswerError,
    PluginError,
    RewardCacheError,
    UnknownVerifier,
    VerifierTimeout,
)
from verifiers_plugins.hookspecs import HOOK_API_VERSION, hookimpl, hookspec

__all__ = [
    "sandbox_backend",
    "BrokenPluginWarning",
    "JudgeAnswerError",
    "get_user_simulator",
    "is_async_verifier",
    "write_scaffold",
    "AUDIT_CASES",
    "AuditCase",
    "DEFAULT_PLUGINS",
    "DEFAULT_TIMEOUT_S",
    "HOOK_API_VERSION",
    "CachedChain",
    "ChainResult",
    "CheckReport",
    "DuplicateName",
    "EntryPointPlugin",
    "PluginError",
    "PluginHost",
    "Problem",
    "Registration",
    "RewardCache",
    "RewardCacheError",
    "Scorer",
    "UnknownVerifier",
    "adversarial_completions",
    "as_verdict",
    "audit",
    "audit_failures",
    "Verdict",
    "UNSTABLE",
    "is_unstable",
    "verifier_fingerprint",
    "Verifier",
    "VerifierChain",
    "VerifierTimeout",
    "check_plugins",
    "default_cache_path",
    "entry_point_plugins",
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
    "safe_verify_batch",
    "verifier_meta",
]
