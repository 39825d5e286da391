"""Use a pivot env served by `pivot serve` from another process or host.

`RemoteEnv(url)` is a `gymnasium.Env`; `AsyncVerifyClient(url)` scores many groups concurrently.
Needs the `server` extra (httpx); `import pivot_envs` does not import this module.
"""

from pivot_envs._remote import AsyncVerifyClient, RemoteEnv, RetryPolicy
from pivot_envs.errors import RemoteError

__all__ = ["AsyncVerifyClient", "RemoteEnv", "RemoteError", "RetryPolicy"]
