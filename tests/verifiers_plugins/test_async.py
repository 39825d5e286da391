"""Coroutine verifiers: awaited by the host with a per-call timeout that yields an error verdict."""

import asyncio
import threading
import time

import gymnasium as gym
import pytest

import pivot_envs  # noqa: F401  (registers the env ids)
from verifiers_plugins import Verdict, VerifierChain, get_host, hookimpl


class Hangs:
    """An HTTP verifier whose service never answers."""

    timeout = 0.2

    async def verify(self, pivot, action):
        await asyncio.sleep(3600)


class BlocksTheLoop:
    """A badly written coroutine: a synchronous sleep inside `async def` holds the event loop."""

    timeout = 0.2

    async def verify(self, pivot, action):
        time.sleep(1.5)
        return Verdict(1.0, True, "too late")


class EchoLoop:
    """Accepts completions that say "yes"; hangs on "hang"; raises on "boom"; records its loop."""

    timeout = 0.5
    loops: list = []

    async def verify(self, pivot, action):
        EchoLoop.loops.append(asyncio.get_running_loop())
        text = (action.content or "").strip()
        if text == "hang":
            await asyncio.sleep(3600)
        if text == "boom":
            raise RuntimeError("service said 500")
        await asyncio.sleep(0.01)
        return Verdict(1.0 if text == "yes" else 0.0, text == "yes", f"service read {text!r}")


class HangingBatch:
    timeout = 0.2

    def verify(self, pivot, action):
        return Verdict(1.0, True)

    async def verify_batch(self, pivot, actions):
        await asyncio.sleep(3600)


@pytest.fixture(autouse=True)
def async_plugin(fresh_host):
    class Plugin:
        @hookimpl
        def register_verifiers(self, register):
            register("hangs", Hangs)
            register("blocks", BlocksTheLoop)
            register("echo_loop", EchoLoop)
            register("hanging_batch", HangingBatch)
            register("sleeps_forever", SleepsForever)
            register("sleeps_forever_in_batch", SleepsForeverInBatch)

    fresh_host.register_plugin(Plugin(), name="async-test", distribution="async-dist")
    yield
    fresh_host.unregister_plugin("async-test")


def test_hanging_async_verifier_gives_an_error_verdict_after_its_timeout():
    env = gym.make("pivot/terminal-v0", verifiers=["hangs"])
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("ls")
    assert (reward, terminated, info["accepted"]) == (0.0, True, False)
    verdict = info["verdicts"]["hangs"]
    assert verdict["error"] == "hangs timed out after 0.2s"
    assert info["error"] == verdict["error"]  # "could not decide" is never a plain 0


def test_a_coroutine_that_blocks_the_loop_times_out_and_the_next_call_gets_a_fresh_loop():
    env = gym.make("pivot/terminal-v0", verifiers=["blocks"])
    env.reset(seed=0)
    _, reward, _, _, info = env.step("ls")
    assert reward == 0.0 and "blocked the event loop" in info["verdicts"]["blocks"]["error"]
    env2 = gym.make("pivot/terminal-v0", verifiers=["echo_loop"])
    env2.reset(seed=0)
    _, reward, _, _, info = env2.step("yes")
    assert reward == 1.0 and info["error"] is None


def test_group_scoring_runs_coroutines_concurrently_each_with_its_own_timeout():
    env = gym.make("pivot/terminal-v0", verifiers=["echo_loop"])
    pivot_id = env.unwrapped.pivots[0].id
    results = env.unwrapped.score(env.unwrapped.pivot(pivot_id), ["yes", "no", "hang", "boom", "yes"])
    assert [r.reward for r in results] == [1.0, 0.0, 0.0, 0.0, 1.0]
    assert [r.error for r in results][:2] == [None, None]
    assert results[2].error == "echo_loop timed out after 0.5s"
    assert "service said 500" in results[3].error


def test_one_loop_serves_every_call_so_clients_bound_to_it_keep_working():
    EchoLoop.loops.clear()
    chain = VerifierChain.from_names(["echo_loop"])
    env = gym.make("pivot/terminal-v0", verifiers=["echo_loop"])
    pivot = env.unwrapped.pivots[0]
    from pivot_envs import Message

    for _ in range(3):
        assert chain(pivot, Message(role="assistant", content="yes")).accepted
    assert len({id(loop) for loop in EchoLoop.loops}) == 1


def test_async_verify_batch_that_hangs_gives_every_action_an_error_verdict():
    env = gym.make("pivot/terminal-v0", verifiers=["hanging_batch"])
    pivot_id = env.unwrapped.pivots[0].id
    results = env.unwrapped.score(env.unwrapped.pivot(pivot_id), ["a", "b"])
    # a group call may take the per-call timeout for each of its actions
    assert [r.error for r in results] == ["hanging_batch timed out after 0.4s"] * 2


def test_async_verifiers_are_flagged_in_pivot_plugins_listing():
    rows = {name: reg for name, reg in get_host().registry("verifiers").items()}
    from verifiers_plugins._async import is_async_verifier

    assert is_async_verifier(rows["hangs"].obj) and not is_async_verifier(rows["tool_args"].obj)


class SleepsForever:
    """A synchronous plugin verifier that never returns (a socket read with no timeout)."""

    timeout = 0.3

    def verify(self, pivot, action):
        threading.Event().wait()


class SleepsForeverInBatch(SleepsForever):
    def verify_batch(self, pivot, actions):
        threading.Event().wait()


@pytest.mark.parametrize("name", ["sleeps_forever", "sleeps_forever_in_batch"])
def test_a_sync_verifier_that_never_returns_becomes_an_error_verdict_and_step_goes_on(name):
    env = gym.make("pivot/terminal-v0", verifiers=[name])
    env.reset(seed=0)
    started = time.monotonic()
    _, reward, terminated, _, info = env.step("ls")
    assert time.monotonic() - started < 30  # not forever (the bound itself is 0.3 s)
    assert reward == 0.0 and terminated and "timed out after 0.3s" in info["error"]
    # the env goes on: the next step is answered too
    assert env.step("ls")[4]["error"]


def test_a_hung_sync_verifier_off_the_main_thread_is_abandoned_on_its_worker():
    # servers and executors score on other threads, where no timer signal can reach: a worker thread bounds the call
    env = gym.make("pivot/terminal-v0", verifiers=["sleeps_forever"])
    env.reset(seed=0)
    out = {}
    thread = threading.Thread(target=lambda: out.update(info=env.step("ls")[4]))
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and "timed out after 0.3s" in out["info"]["error"]
