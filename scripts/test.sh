#!/usr/bin/env bash
# The README's test command, and CI's (.ci/run calls it): on a fresh Debian machine it installs what
# the tests need (system packages, the Docker engine, a venv with the project and the trainer
# libraries), builds the CI task images, runs the static checks, then the test suite.
# Re-running it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== system packages"
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
[ -x /bin/busybox ] || need+=(busybox-static)
# the sandbox's in-container runner is compiled here with `cc -static` (needs libc.a)
command -v cc >/dev/null 2>&1 || need+=(gcc)
[ -f "/usr/lib/$(gcc -dumpmachine 2>/dev/null || uname -m)/libc.a" ] || need+=(libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

echo "== docker engine"
if ! docker info >/dev/null 2>&1; then
  setsid dockerd --iptables=false >/tmp/dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
docker info --format 'docker {{.ServerVersion}} ready'

echo "== python environment"
[ -x .venv/bin/python ] || python3 -m venv .venv
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# torch is pinned exactly in the extras: a range would pull a multi-GB CUDA build.
python -m pip install -q -e '.[dev]'
# The other trainers, tested through their own entry points (tests/trainers/adapters). --no-deps: their
# full installs pull CUDA stacks (flash-attn, deepspeed, vllm) and pin older transformers; the light
# packages they really import follow, with torch pinned in the same call (about 45 s here).
python -m pip install -q --no-deps verl==0.9.1 openrlhf==0.11.2 skyrl-gym==0.4.0 skyrl==0.3.0 openenv-core==0.3.0
python -m pip install -q torch==2.13.0 omegaconf hydra-core 'tensordict>=0.8,<=0.10.0' codetiming pylatexenc \
  func_timeout jsonlines aiohttp loguru multiprocess websockets fastmcp
# The example third-party verifier package, installed the way its users install it.
python -m pip install -q ./examples/pivot-verifier-ast

echo "== Terminal-Bench CI task images (debootstrapped bases cached by tag; the other tasks: bench/terminal_tasks.py)"
pivot sandbox build-tasks pivot_core/data/terminal_tasks

echo "== static checks: ruff, the import layers"
ruff check .
ruff format --check .
lint-imports

echo "== tests"
set +e
python -m pytest -q
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure of this suite"
  exit 1
fi

echo "== example plugin's own tests (examples/pivot-verifier-ast, run against the installed copy)"
set +e
(cd examples/pivot-verifier-ast && python -m pytest -q)
erc=$?
set -e
[ "$rc" -ne 0 ] && exit "$rc"
exit "$erc"
