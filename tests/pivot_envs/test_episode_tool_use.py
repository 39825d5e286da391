"""`pivot/tool-use-episode-v0` on the real tau-bench airline trajectories and database."""

import json
import time

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import pivot_envs  # noqa: F401  (registers the env ids)
from pivot_core._model import Message
from pivot_core._render import render_completion
from pivot_envs.episodes import ToolUseEpisodeEnv, tau_bench_outcome
from pivot_tool_worlds import same_output, tau_airline
from verifiers_plugins import hookimpl
from verifiers_plugins.builtin.user_simulators import STOP_TOKEN, UserReply, user_view

AIRLINE = "tool_use/tau_bench_airline_gpt4o.jsonl"
WRITES = ("book_reservation", "cancel_reservation", "send_certificate", "update_reservation_flights")


@pytest.fixture(scope="module")
def airline(shared_data):
    return gym.make("pivot/tool-use-episode-v0", dataset=shared_data / AIRLINE, user_simulator="recorded").unwrapped


def first_pivots(env):
    firsts = {}
    for p in env.pivots:
        firsts.setdefault(p.context["trajectory_id"], p)
    return firsts


def replay(env, pivot, insert=None):
    """Step the recorded agent's turns from `pivot`; `insert(k)` may return an extra completion before turn k."""
    recorded = env.recorded_messages(pivot)
    agent = [i for i, m in enumerate(recorded) if m.role == "assistant" and i >= len(pivot.history)]
    env.reset(options={"pivot_id": pivot.id})
    for k, i in enumerate(agent):
        extra = insert(k) if insert else None
        for text in ([extra] if extra else []) + [render_completion(recorded[i], "tool-use")]:
            _, reward, terminated, truncated, info = env.step(text)
            if terminated or truncated:
                return reward, terminated, truncated, info
    raise AssertionError(f"{pivot.id}: the recorded turns ran out before the episode ended")


def test_fidelity_recorded_agent_from_first_pivot_ends_with_the_recorded_reward(airline):
    matched, total, ends = 0, 0, {}
    for tid, pivot in first_pivots(airline).items():
        reward, _, truncated, info = replay(airline, pivot)
        total += 1
        matched += reward == pivot.context["trajectory_reward"]
        ends[info["outcome"]["ended_by"]] = ends.get(info["outcome"]["ended_by"], 0) + 1
        # On the recorded path every observation is the recorded one: the whole record is reproduced.
        recorded = airline.recorded_messages(pivot)
        assert len(airline.conversation) == len(recorded), tid
        for got, want in zip(airline.conversation, recorded, strict=True):
            assert got.role == want.role and same_output(got.content or "", want.content or ""), tid
    print(f"tau-bench airline fidelity: {matched}/{total} matched, ended by {ends}")
    assert (matched, total) == (192, 192)
    # The 5 runs cut at tau-bench's 30 steps carry reward 0 and no reward_info, as tau-bench records them.
    assert ends["max_turns"] == 5


def test_a_wrong_write_mid_episode_changes_the_database_and_fails(airline):
    pivot = next(
        p
        for p in first_pivots(airline).values()
        if p.context["trajectory_reward"] == 1.0
        and any(a["name"] != "get_user_details" for a in p.context["task"]["actions"])
    )
    user = pivot.context["task"]["user_id"]
    wrong = render_completion(
        Message(
            "assistant",
            None,
            (pivot_envs.ToolCall("send_certificate", json.dumps({"user_id": user, "amount": 500}), "c1"),),
        ),
        "tool-use",
    )
    reward, terminated, _, info = replay(airline, pivot, insert=lambda k: wrong if k == 1 else None)
    assert terminated and reward == 0.0
    assert info["outcome"]["details"]["r_actions"] is False
    assert f"users/{user}" in info["outcome"]["details"]["db_differs"]
    # The same episode without the wrong call is a success (the control).
    assert replay(airline, pivot)[0] == 1.0


def test_transfer_at_once_ends_the_episode_and_fails_a_task_with_writes(airline):
    pivot = next(
        p
        for p in first_pivots(airline).values()
        if p.context["trajectory_reward"] == 1.0 and any(a["name"] in WRITES for a in p.context["task"]["actions"])
    )
    airline.reset(options={"pivot_id": pivot.id})
    call = {"name": "transfer_to_human_agents", "arguments": {"summary": "done"}}
    _, reward, terminated, truncated, info = airline.step(f"<tool_call>{json.dumps(call)}</tool_call>")
    assert (terminated, truncated, reward) == (True, False, 0.0)
    assert info["outcome"]["ended_by"] == "transfer" and info["new_messages"][0]["role"] == "tool"
    with pytest.raises(gym.error.ResetNeeded):
        airline.step("hello")


def test_truncation_at_max_turns_scores_zero_even_with_the_right_database(shared_data):
    env = ToolUseEpisodeEnv(shared_data / AIRLINE, max_turns=1)
    pivot = next(
        p
        for p in env.pivots
        if p.context["trajectory_reward"] == 1.0
        and p.expert.tool_calls
        and p.expert.tool_calls[0].name == "book_reservation"
    )
    _, info = env.reset(options={"pivot_id": pivot.id})
    assert info["max_turns"] == 1
    _, reward, terminated, truncated, info = env.step(render_completion(pivot.expert, "tool-use"))
    assert (terminated, truncated, reward) == (False, True, 0.0)
    assert info["outcome"]["ended_by"] == "max_turns" and "step limit" in info["outcome"]["details"]["why"]


def test_a_turn_after_a_time_limit_does_not_run_and_scores_zero(shared_data):
    # tau-bench has no wall-clock limit (time_limit None by default); one given is a cut like the step limit
    env = ToolUseEpisodeEnv(shared_data / AIRLINE, time_limit=0.05)
    pivot = next(p for p in env.pivots if p.expert.tool_calls and p.expert.tool_calls[0].name == "book_reservation")
    _, info = env.reset(options={"pivot_id": pivot.id})
    assert info["time_limit"] == 0.05
    time.sleep(0.1)
    _, reward, terminated, truncated, info = env.step(render_completion(pivot.expert, "tool-use"))
    assert (terminated, truncated, reward, info["new_messages"]) == (False, True, 0.0, [])
    assert info["outcome"]["ended_by"] == "time_limit" and "step limit" in info["outcome"]["details"]["why"]
    assert ToolUseEpisodeEnv(shared_data / AIRLINE).reset(options={"pivot_id": pivot.id})[1]["time_limit"] is None
    with pytest.raises(ValueError, match="time_limit"):
        ToolUseEpisodeEnv(shared_data / AIRLINE, time_limit=0)


def test_default_budget_is_the_tasks_thirty_steps_less_the_history(airline):
    pivot = airline.pivots[5]
    _, info = airline.reset(options={"pivot_id": pivot.id})
    assert info["max_turns"] == 30 - sum(m.role == "assistant" for m in pivot.history)
    assert info["restore"]["diverged"] == [] and info["restore"]["database"].startswith("full:")


def test_outputs_rule_matches_tau_bench_case_and_commas():
    world = tau_airline()
    task = {"actions": [], "outputs": ["1000", "Gold"]}
    said = [Message("assistant", "Your balance is $1,000 and you are a GOLD member.")]
    outcome = tau_bench_outcome(world, world.initial_state(), task, said, "user_stop")
    assert outcome.reward == 1.0 and outcome.details["outputs"] == {"1000": True, "Gold": True}
    # A text inside a tool-calling message is not said to the user (tau-bench's respond actions only).
    hidden = [Message("assistant", "1000 gold", (pivot_envs.ToolCall("think", '{"thought": "x"}', "c"),))]
    assert tau_bench_outcome(world, world.initial_state(), task, hidden, "user_stop").reward == 0.0


def test_check_env_on_the_bundled_sample():
    env = gym.make("pivot/tool-use-episode-v0").unwrapped
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    # Random text is said to the user; the recorded user answers, nothing raises.
    _, reward, *_ = env.step(env.action_space.sample())
    assert reward == 0.0


def test_non_airline_data_is_refused_naming_the_pivot(shared_data):
    with pytest.raises(ValueError, match="expected tau-bench airline pivots.*tau2"):
        gym.make("pivot/tool-use-episode-v0", dataset=shared_data / "tool_use/tau2_telecom_gpt4o.jsonl")


def test_recorded_user_runs_out_and_ends_the_conversation(airline):
    pivot = next(p for p in airline.pivots if p.context["trajectory_id"].endswith("task0/trial0"))
    recorded = airline.recorded_messages(pivot)
    reply = airline.user.reply(list(recorded), task=pivot.context["task"], recorded=recorded)
    assert reply == UserReply(None, True, "the recorded conversation has no further user message")


def test_a_failed_write_on_the_subset_database_is_an_error_not_a_reward(shared_data):
    from pivot_tool_worlds._tau_airline import SUBSET_FILE, _bundled

    env = gym.make("pivot/tool-use-episode-v0", db_path=_bundled(SUBSET_FILE)).unwrapped
    pivot = env.pivots[0]
    env.reset(options={"pivot_id": pivot.id})
    call = {"name": "cancel_reservation", "arguments": {"reservation_id": "ZZZZZZ"}}
    env.step(f"<tool_call>{json.dumps(call)}</tool_call>")
    bye = {"name": "transfer_to_human_agents", "arguments": {"summary": "bye"}}
    *_, info = env.step(f"<tool_call>{json.dumps(bye)}</tool_call>")
    assert info["outcome"]["error"] and "subset" in info["outcome"]["error"] and info["outcome"]["reward"] == 0.0


def test_every_bundled_trajectory_replays_to_its_reward_on_the_bundled_subset():
    # a fresh clone's episodes: the subset holds what each task's gold actions need, and a write
    # that fails there for another reason than a missing record (a price that does not add up) is
    # the full database's failure too, not a reason to refuse the outcome
    from pivot_tool_worlds._tau_airline import SUBSET_FILE, _bundled

    env = gym.make("pivot/tool-use-episode-v0", db_path=_bundled(SUBSET_FILE)).unwrapped
    firsts = first_pivots(env)
    assert len(firsts) == 10
    for pivot in firsts.values():
        reward, terminated, _, info = replay(env, pivot)
        assert (reward, info["outcome"]["error"]) == (1.0, None), (pivot.id, info["outcome"])


# -- user simulators -------------------------------------------------------------------------------


class ScriptedUser:
    """A loopback OpenAI-compatible server that plays the user from a script and records requests."""

    def __init__(self):
        self.script, self.requests, self.down = [], [], False


@pytest.fixture(scope="module")
def user_server():
    from fastapi import FastAPI, HTTPException

    from trainers.backends._server import ServerThread

    state = ScriptedUser()
    app = FastAPI()

    @app.post("/v1/chat/completions")
    def complete(body: dict):
        if state.down:
            raise HTTPException(status_code=503, detail="down")
        state.requests.append(body)
        text = state.script.pop(0) if state.script else STOP_TOKEN
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}

    with ServerThread(app) as server:
        state.url = server.url
        yield state


def test_llm_user_plays_the_task_instruction_with_roles_flipped(user_server):
    user_server.script[:], user_server.requests[:], user_server.down = ["My user id is mia_li_3668."], [], False
    env = gym.make(
        "pivot/tool-use-episode-v0",
        user_simulator="llm",
        user_simulator_config={"url": user_server.url, "model": "sim", "retries": 0},
    ).unwrapped
    pivot = env.pivots[0]
    env.reset(options={"pivot_id": pivot.id})
    _, _, terminated, _, info = env.step("Could you give me your user id?")
    assert not terminated
    assert [(m["role"], m["content"]) for m in info["new_messages"]] == [("user", "My user id is mia_li_3668.")]
    body = user_server.requests[0]
    assert body["model"] == "sim" and pivot.context["task"]["instruction"] in body["messages"][0]["content"]
    assert body["messages"][-1] == {"role": "user", "content": "Could you give me your user id?"}
    first_user = next(m for m in pivot.history if m.role == "user")
    assert body["messages"][1] == {"role": "assistant", "content": first_user.content}
    _, reward, terminated, _, info = env.step("Anything else?")
    assert terminated and info["outcome"]["ended_by"] == "user_stop" and info["outcome"]["error"] is None
    assert reward in (0.0, 1.0)


def test_llm_user_down_is_an_error_outcome(user_server):
    user_server.down = True
    try:
        env = gym.make(
            "pivot/tool-use-episode-v0",
            user_simulator="llm",
            user_simulator_config={"url": user_server.url, "retries": 1},
        ).unwrapped
        env.reset(options={"pivot_id": env.pivots[0].id})
        _, reward, terminated, truncated, info = env.step("Hello?")
    finally:
        user_server.down = False
    assert (terminated, truncated, reward) == (False, True, 0.0)
    assert "user simulator" in info["outcome"]["error"] and "503" in info["outcome"]["error"]


def test_user_view_hides_tool_traffic():
    conv = [
        Message("system", "policy"),
        Message("user", "hi"),
        Message("assistant", None, (pivot_envs.ToolCall("think", "{}", "c"),)),
        Message("tool", "", tool_call_id="c"),
        Message("assistant", "Sure."),
    ]
    roles = [m["role"] for m in user_view(conv, "task")]
    assert roles == ["system", "assistant", "user"]


def test_a_plugin_user_simulator_is_used_by_name(fresh_host):
    class Echo:
        def reply(self, conversation, *, task, recorded):
            return UserReply(f"{STOP_TOKEN} ({conversation[-1].content})", True, "echo")

    class Plugin:
        @hookimpl
        def register_user_simulators(self, register):
            register("echo", Echo)

    fresh_host.register_plugin(Plugin(), name="echo-users")
    env = gym.make("pivot/tool-use-episode-v0", user_simulator="echo").unwrapped
    env.reset(options={"pivot_id": env.pivots[0].id})
    _, _, terminated, _, info = env.step("bye")
    assert terminated and STOP_TOKEN in info["new_messages"][0]["content"]
    assert {"recorded", "llm", "echo"} <= set(fresh_host.registry("user_simulators"))


def test_a_simulator_that_raises_is_an_error_outcome_not_a_crash(fresh_host):
    class Broken:
        def reply(self, conversation, *, task, recorded):
            raise RuntimeError("simulator bug")

    class Plugin:
        @hookimpl
        def register_user_simulators(self, register):
            register("broken", Broken)

    fresh_host.register_plugin(Plugin(), name="broken-users")
    env = gym.make("pivot/tool-use-episode-v0", user_simulator="broken").unwrapped
    env.reset(options={"pivot_id": env.pivots[0].id})
    _, reward, terminated, truncated, info = env.step("hello")
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["outcome"]["error"] == "RuntimeError: simulator bug"
