"""Check what `pip install pivot-gym` (no extras) gives: working envs, and a clear word where Docker is needed.

    python3 -m venv /tmp/bare && /tmp/bare/bin/pip install . && /tmp/bare/bin/python scripts/check_minimal_install.py

- `pivot/tool-use-v0`, `pivot/swe-v0`, `pivot/browse-v0`: every bundled pivot resets, and the
  expert's own completion (`render_completion(p.expert, p.domain)`) scores 1.
- `pivot/terminal-v0` on a sandboxed pivot, with a completion only the sandbox can judge: an error
  verdict (reward 0, `info["error"]` set) saying to `pip install 'pivot-gym[sandbox]'` and start a
  Docker engine; never a crash and never a silent 0.
- None of the extras' modules (torch, docker, the server's) was imported on the way.

`--simulate-bare` blocks the extras' modules in this process first, so the same checks run in a
development venv that has them (the test suite does this; `.ci/run` also runs it in a real bare venv).
Exit 0 when every check holds, 1 with the failed checks listed.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

EXTRAS = ("docker", "torch", "transformers", "ray", "uvicorn", "fastapi", "h11", "httpx", "pyarrow", "trl")


class _Blocker(importlib.abc.MetaPathFinder):
    """Makes `import docker` (and the other extras) fail as it does where they are not installed."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201 - the finder protocol
        if name.split(".")[0] in EXTRAS:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def check_static_envs(problems: list[str]) -> None:
    import gymnasium as gym

    import pivot_envs

    for env_id in ("pivot/tool-use-v0", "pivot/swe-v0", "pivot/browse-v0"):
        env = gym.make(env_id)
        for p in env.unwrapped.pivots:
            _, info = env.reset(options={"pivot_id": p.id})
            _, reward, terminated, _, info = env.step(pivot_envs.render_completion(p.expert, p.domain))
            if reward != 1.0 or not terminated:
                problems.append(f"{env_id} {p.id}: the expert's completion scored {reward} ({info['error']})")
        print(f"{env_id}: {len(env.unwrapped.pivots)} pivots, the expert scores 1 on each")
        env.close()


def check_terminal_without_docker(problems: list[str]) -> None:
    import gymnasium as gym

    env = gym.make("pivot/terminal-v0")
    sandboxed = [p for p in env.unwrapped.pivots if p.context.get("sandbox")]
    if not sandboxed:
        problems.append("pivot/terminal-v0: no bundled pivot has a sandbox context to check")
        return
    pivot = sandboxed[0]
    env.reset(options={"pivot_id": pivot.id})
    # a command the static verifiers cannot accept: only the sandbox could say whether it does the same
    completion = '{"analysis": "", "plan": "", "commands": [{"keystrokes": "ls /\\n", "duration": 1}]}'
    try:
        _, reward, _, _, info = env.step(completion)
    except Exception as e:  # noqa: BLE001 - the check reports a crash as a failure, with its type
        problems.append(f"pivot/terminal-v0: step raised {type(e).__name__}: {e}")
        return
    error = info.get("error") or ""
    if reward != 0.0 or "pip install 'pivot-gym[sandbox]'" not in error or "Docker engine" not in error:
        problems.append(f"pivot/terminal-v0 without docker: expected an error verdict naming the extra, got {info}")
    else:
        print(f"pivot/terminal-v0 without docker: error verdict, {error!r}")


def main(argv: list[str]) -> int:
    if "--simulate-bare" in argv:
        sys.meta_path.insert(0, _Blocker())
    elif importlib.util.find_spec("docker") is not None:
        print("the docker SDK is installed here: run this in a venv with no extras, or pass --simulate-bare")
        return 1
    problems: list[str] = []
    check_static_envs(problems)
    check_terminal_without_docker(problems)
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(EXTRAS))
    if loaded:
        problems.append(f"the minimal install imported modules of the extras: {loaded}")
    for p in problems:
        print("FAIL", p)
    print("minimal install: ok" if not problems else f"minimal install: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
