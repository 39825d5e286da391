"""What a pivot's context says about its sandbox, typed: the converters, `pivot_tasks` and the verifiers share it.

Five keys of `Pivot.context` decide whether and how a pivot's state is rebuilt in a sandbox:

- `context.sandbox` -> `SandboxContext`: the `SandboxSpec` (where actions run) and what is known
  about the expert action there: `expert_needs_network` (`pivot synthesize`, `pivot convert
  --tasks-dir`: no container without a network reproduces it) and `expert_unfinished` (the reason
  the expert's own command never ended in its run);
- `context.replay` -> `ReplayMark`: whether replaying an agent's run reproduced what it recorded
  (`pivot convert --check-replay`);
- `context.exit_codes`, `context.start_dir`, `context.unsandboxed` -> `RunFacts`: what a converter
  read from an agent's run (`pivot_core.convert.openhands` writes the first two as plain keys: the
  ground imports nothing of this floor) and why `pivot_tasks` left a pivot without a sandbox.

Each type has `from_context(context)` (None, or the defaults, when its keys are absent) and
`into(context)`, a new context with it written in the shape pivot files have always held, so a file
written before these types and one written after are interchangeable. A malformed value raises
`SandboxError` naming the key ("context.replay.faithful: expected true or false, got str 'yes'").
A JSON null is the same as an absent key, except `context.replay.faithful`, which is required.

Keys the types do not know:

- `context.sandbox` keeps them in `SandboxContext.extra`, written back as they were: the spec has
  grown keys before (`replay_access`, `start_dir`), and a reader older than a key still loads the
  file and says what it did not read instead of dropping it;
- `context.replay` raises: it is a verdict on the state, written in one place, and a verdict read
  in part (a qualifier of `faithful` left out) could let the sandbox judge a pivot it should not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pivot_sandbox.contract.services import services_of
from pivot_sandbox.contract.spec import Json, SandboxSpec
from pivot_sandbox.errors import SandboxError

SANDBOX = "sandbox"
REPLAY = "replay"
# the keys of `context.sandbox` a `SandboxContext` reads, in the order every writer has written them
_SPEC_KEYS = ("image", "setup", "workdir", "shell", "user", "env", "replay_access", "start_dir", "services")
_FLAG_KEYS = ("expert_needs_network", "expert_unfinished")


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 80 else text[:77] + '...'}"


def _expect(ok: bool, where: str, expected: str, value: Any) -> None:
    if not ok:
        raise SandboxError(f"{where}: expected {expected}, got {_shown(value)}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class SandboxContext:
    """`context.sandbox`: where the pivot's actions run, and what is known about its expert action there.

    Attributes:
        spec: the sandbox (`SandboxSpec`; its `key()` is the snapshot key, flags left out).
        expert_needs_network: the expert action needs the network: no container here reproduces it,
            so `docker_shell` and `task_tests` skip the pivot (the static part of the chain scores it).
        expert_unfinished: why the expert's own command never ended in its run (killed at a timeout,
            still running when the agent moved on); "" when it ended. `docker_shell` skips such a pivot.
        extra: the keys of `context.sandbox` this type does not read, kept and written back as they were.
    """

    spec: SandboxSpec
    expert_needs_network: bool = False
    expert_unfinished: str = ""
    extra: Mapping[str, Json] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _expect(isinstance(self.spec, SandboxSpec), "context.sandbox", "a SandboxSpec", self.spec)
        needs = self.expert_needs_network
        _expect(isinstance(needs, bool), "context.sandbox.expert_needs_network", "true or false", needs)
        unfinished = self.expert_unfinished
        _expect(isinstance(unfinished, str), "context.sandbox.expert_unfinished", "a reason (a string)", unfinished)
        _expect(isinstance(self.extra, Mapping), "context.sandbox", "extra keys as a mapping", self.extra)
        clash = sorted(set(self.extra) & {*_SPEC_KEYS, *_FLAG_KEYS})
        if clash:
            raise SandboxError(f"context.sandbox: extra holds {clash[0]!r}, a key SandboxContext reads itself")
        object.__setattr__(self, "extra", dict(self.extra))

    @classmethod
    def from_context(cls, context: Mapping[str, Json]) -> SandboxContext | None:
        """`context.sandbox`, None when the pivot has none (absent, null, "" or {}); an image name alone is a spec.

        Raises:
            SandboxError: a malformed value; the message names the key.
        """
        raw = context.get(SANDBOX)
        if raw is None or (isinstance(raw, str | Mapping) and not raw):
            return None
        if isinstance(raw, str):
            return cls(SandboxSpec(image=raw))
        _expect(isinstance(raw, Mapping), "context.sandbox", "an object (or an image name)", raw)
        needs = raw.get("expert_needs_network")
        unfinished = raw.get("expert_unfinished")
        return cls(
            spec=_spec_of(raw),
            expert_needs_network=False if needs is None else needs,
            expert_unfinished="" if unfinished is None else unfinished,
            extra={k: v for k, v in raw.items() if k not in _SPEC_KEYS and k not in _FLAG_KEYS},
        )

    def to_context(self) -> dict[str, Json]:
        """The value of `context.sandbox`: the spec's keys, then the flags that are set, then `extra`.

        Defaults the writers never wrote are left out (no `env` when empty, `replay_access` only when
        true, `start_dir` only when set), so the dict is the one written before this type.
        """
        spec = self.spec
        out: dict[str, Json] = {
            "image": spec.image,
            "setup": list(spec.setup),
            "workdir": spec.workdir,
            "shell": spec.shell,
            "user": spec.user,
        }
        if spec.env:
            out["env"] = dict(spec.env)
        if spec.replay_access:
            out["replay_access"] = True
        if spec.start_dir:
            out["start_dir"] = spec.start_dir
        if spec.services:
            out["services"] = [s.to_json() for s in spec.services]
        if self.expert_needs_network:
            out["expert_needs_network"] = True
        if self.expert_unfinished:
            out["expert_unfinished"] = self.expert_unfinished
        return {**out, **self.extra}

    def into(self, context: Mapping[str, Json]) -> dict[str, Json]:
        """A new context: `context` with this as its `sandbox`."""
        return {**context, SANDBOX: self.to_context()}


def _spec_of(raw: Mapping[str, Json]) -> SandboxSpec:
    """The `SandboxSpec` of a `context.sandbox` object, each value's type checked by name."""
    found: dict[str, Any] = {}  # `SandboxSpec`'s keywords
    for key in ("image", "workdir", "user", "shell", "start_dir"):
        if raw.get(key) is not None:
            _expect(isinstance(raw[key], str), f"context.sandbox.{key}", "a string", raw[key])
            found[key] = raw[key]
    if "image" not in found:
        raise SandboxError("context.sandbox.image: expected a non-empty image name, got nothing")
    setup = raw.get("setup")
    if setup is not None:
        setup = [setup] if isinstance(setup, str) else setup
        ok = isinstance(setup, list | tuple) and all(isinstance(s, str) for s in setup)
        _expect(ok, "context.sandbox.setup", "a list of shell commands (strings)", raw["setup"])
        found["setup"] = tuple(setup)
    env = raw.get("env")
    if env is not None:
        ok = isinstance(env, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        _expect(ok, "context.sandbox.env", "an object of names to strings", env)
        found["env"] = env
    access = raw.get("replay_access")
    if access is not None:
        _expect(isinstance(access, bool), "context.sandbox.replay_access", "true or false", access)
        found["replay_access"] = access
    if raw.get("services") is not None:  # each entry's key named ("context.sandbox.services[0].image")
        found["services"] = services_of(raw["services"], "context.sandbox.services")
    return SandboxSpec(**found)  # its own checks name the key too ("sandbox.workdir: expected an absolute path")


@dataclass(frozen=True)
class ReplayMark:
    """`context.replay`: what replaying an agent's run showed (`pivot_tasks.check_replay`).

    `docker_shell` judges a pivot from an agent's run only when its mark is faithful; the others are
    scored by the static part of the chain.

    Attributes:
        faithful: every action up to this pivot's replayed as the run recorded it.
        diverged_at: the turn where the replay first differed from the run (None: it did not, or it
            was not said).
        reason: what differed there ("" for a faithful replay).
        state_faithful: True on the pivot at `diverged_at`: its state is the agent's (an episode may
            start there), only its own action's effect is not; None elsewhere.
    """

    faithful: bool
    diverged_at: int | None = None
    reason: str = ""
    state_faithful: bool | None = None

    def __post_init__(self) -> None:
        _expect(isinstance(self.faithful, bool), "context.replay.faithful", "true or false", self.faithful)
        at = self.diverged_at
        _expect(at is None or (_is_int(at) and at >= 0), "context.replay.diverged_at", "a turn (int >= 0)", at)
        _expect(isinstance(self.reason, str), "context.replay.reason", "a string", self.reason)
        state = self.state_faithful
        _expect(state is None or isinstance(state, bool), "context.replay.state_faithful", "true or false", state)
        if self.faithful and at is not None:
            raise SandboxError(f"context.replay.diverged_at: a faithful replay diverges nowhere, got {at}")

    @classmethod
    def from_context(cls, context: Mapping[str, Json]) -> ReplayMark | None:
        """`context.replay`, None when the pivot's replay was not checked (absent or null).

        Raises:
            SandboxError: a malformed value or a key a mark does not hold; the message names the key.
        """
        raw = context.get(REPLAY)
        if raw is None:
            return None
        _expect(isinstance(raw, Mapping), "context.replay", "an object", raw)
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(str(k) for k in raw if k not in known)
        if unknown:
            raise SandboxError(
                f"context.replay.{unknown[0]}: expected only {', '.join(known)} in a replay mark, got "
                f"{unknown[0]!r} (a verdict on the replay is not read in part)"
            )
        if raw.get("faithful") is None:
            raise SandboxError("context.replay.faithful: expected true or false, got nothing")
        return cls(**{k: v for k, v in raw.items() if v is not None})

    def to_context(self) -> dict[str, Json]:
        """The value of `context.replay`: `faithful`, then the other fields that are set."""
        out: dict[str, Json] = {"faithful": self.faithful}
        if self.diverged_at is not None:
            out["diverged_at"] = self.diverged_at
        if self.reason:
            out["reason"] = self.reason
        if self.state_faithful is not None:
            out["state_faithful"] = self.state_faithful
        return out

    def into(self, context: Mapping[str, Json]) -> dict[str, Json]:
        """A new context: `context` with this as its `replay`."""
        return {**context, REPLAY: self.to_context()}


@dataclass(frozen=True)
class RunFacts:
    """The top-level context keys of a pivot from an agent's run that decide its sandbox.

    Attributes:
        exit_codes: tool call id -> the exit code the run recorded (`context.exit_codes`: OpenHands;
            -1 is a command still running when the agent moved on).
        start_dir: where the harness's shell started (`context.start_dir`; "" when the run does not
            tell); `pivot convert --tasks-dir` moves it into the spec where it differs from `workdir`.
        unsandboxed: why the pivot has no sandbox (`context.unsandboxed`; "" when nothing said so).
    """

    exit_codes: Mapping[str, int] = field(default_factory=dict)
    start_dir: str = ""
    unsandboxed: str = ""

    def __post_init__(self) -> None:
        codes = self.exit_codes
        ok = isinstance(codes, Mapping) and all(isinstance(k, str) and _is_int(v) for k, v in codes.items())
        _expect(ok, "context.exit_codes", "an object of tool call ids to exit codes (ints)", codes)
        _expect(isinstance(self.start_dir, str), "context.start_dir", "a path (a string)", self.start_dir)
        _expect(isinstance(self.unsandboxed, str), "context.unsandboxed", "a reason (a string)", self.unsandboxed)
        object.__setattr__(self, "exit_codes", dict(codes))

    @classmethod
    def from_context(cls, context: Mapping[str, Json]) -> RunFacts:
        """The three keys of `context` (each absent or null key its default).

        Raises:
            SandboxError: a malformed value; the message names the key.
        """
        found = {k: context[k] for k in ("exit_codes", "start_dir", "unsandboxed") if context.get(k) is not None}
        return cls(**found)

    def into(self, context: Mapping[str, Json]) -> dict[str, Json]:
        """A new context: `context` with the fields that are set, and without the keys of those that are not."""
        out = dict(context)
        for key, value in (
            ("exit_codes", dict(self.exit_codes)),
            ("start_dir", self.start_dir),
            ("unsandboxed", self.unsandboxed),
        ):
            if value:
                out[key] = value
            else:
                out.pop(key, None)
        return out


def unsandbox(context: Mapping[str, Json], why: str) -> dict[str, Json]:
    """A new context without `sandbox`, saying why in `unsandboxed` (the static part of the chain scores it)."""
    if not why:
        raise SandboxError("unsandbox: expected the reason the pivot loses its sandbox, got ''")
    facts = dataclasses.replace(RunFacts.from_context(context), unsandboxed=why)
    return {k: v for k, v in facts.into(context).items() if k != SANDBOX}
