"""Issue 30 item 13: loading never hangs and never exhausts memory.

Each risky load runs in a fresh interpreter under a wall-clock timeout and an address-space limit
(`RLIMIT_AS`), so a regression fails the test instead of hanging it or taking the machine's
memory: before the fixes a FIFO hung `gym.make` forever, `/dev/zero` named `.json` was read until
memory ran out, a 100,000-message chat took 7.7 GB, and a YAML alias bomb loaded and then
expanded in `Pivot.content_hash()`.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

from pivot_core import (
    AliasBudgetExceeded,
    DataFileError,
    History,
    InvalidTrajectory,
    Message,
    Pivot,
    Trajectory,
    extract_pivots,
    iter_jsonl,
    load_pivots,
    load_yaml,
    max_data_bytes,
    read_bounded,
)

MEMORY_LIMIT = 3 << 30  # bytes of address space for a child: the interpreter, numpy and gymnasium fit easily


def run_bounded(code: str, timeout: float = 120.0, env: dict[str, str] | None = None) -> dict:
    """Run `code` in a child limited to `timeout` seconds and `MEMORY_LIMIT` bytes; its last stdout line is JSON."""
    prelude = f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT}))\n"
    try:
        done = subprocess.run(
            [sys.executable, "-c", prelude + textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still loading after {timeout:g} s: the load hangs")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


LOAD_ERRORS = """
import json
from pivot_core import DataFileError, load_pivots

def error_of(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as e:  # the type and message are the test's to check
        return f"{type(e).__name__}: {e}"
    return None
"""


# -- not a regular file ------------------------------------------------------------------------


def test_a_fifo_as_the_dataset_is_an_error_naming_it_not_a_hang(tmp_path):
    fifo = tmp_path / "pivots.jsonl"
    os.mkfifo(fifo)
    as_document = tmp_path / "pivots.json"
    os.mkfifo(as_document)
    db = tmp_path / "airline.json"
    os.mkfifo(db)
    got = run_bounded(
        LOAD_ERRORS
        + textwrap.dedent(
            f"""
        import gymnasium as gym
        import pivot_envs
        from pivot_core import iter_jsonl, read_bounded
        from pivot_tool_worlds import tau_airline
        print(json.dumps({{
            "load": error_of(load_pivots, {str(fifo)!r}),
            "explicit": error_of(load_pivots, {str(fifo)!r}, format="openai"),
            "document": error_of(load_pivots, {str(as_document)!r}),
            "jsonl": error_of(lambda: list(iter_jsonl({str(fifo)!r}))),
            "read": error_of(read_bounded, {str(fifo)!r}),
            "make": error_of(gym.make, "pivot/tool-use-v0", dataset={str(fifo)!r}),
            "db": error_of(tau_airline, {str(db)!r}),
        }}))
        """
        ),
        timeout=60,
    )
    for case, error in got.items():
        assert error and "FIFO" in error and "expected a regular file" in error, (case, error)
        assert "DataFileError" in error or case == "db", (case, error)
    assert str(fifo) in got["make"] and str(db) in got["db"]


def test_an_endless_device_named_json_is_refused_not_read_until_memory_runs_out(tmp_path):
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    lines = tmp_path / "zero.jsonl"
    lines.symlink_to("/dev/zero")
    got = run_bounded(
        LOAD_ERRORS
        + textwrap.dedent(
            f"""
        print(json.dumps({{"json": error_of(load_pivots, {str(zero)!r}),
                           "jsonl": error_of(load_pivots, {str(lines)!r}, format="openai")}}))
        """
        ),
        timeout=60,
    )
    for error in got.values():
        assert error and error.startswith("DataFileError") and "character device" in error, error
    assert str(zero) in got["json"]


def test_a_directory_is_named_as_one(tmp_path):
    with pytest.raises(DataFileError, match="expected a regular file, got a directory"):
        load_pivots(tmp_path)


# -- size caps ---------------------------------------------------------------------------------


def test_documents_and_records_past_the_size_cap_are_errors_naming_the_file(tmp_path, monkeypatch):
    record = {"id": "t", "domain": "tool-use", "messages": [{"role": "user", "content": "x" * 3000}]}
    document = tmp_path / "big.json"
    document.write_text(json.dumps([record]))
    lines = tmp_path / "big.jsonl"
    lines.write_text(json.dumps({**record, "id": "small", "messages": []}) + "\n" + json.dumps(record) + "\n")
    monkeypatch.setenv("PIVOT_MAX_DATA_BYTES", "2000")
    assert max_data_bytes() == 2000
    with pytest.raises(DataFileError, match=r"big\.json: file larger than 2,000 bytes.*PIVOT_MAX_DATA_BYTES"):
        load_pivots(document)
    with pytest.raises(DataFileError, match=r"big\.jsonl:2: a record larger than 2,000 bytes"):
        list(iter_jsonl(lines))
    with pytest.raises(DataFileError, match="larger than 2,000 bytes"):
        read_bounded(document)
    monkeypatch.setenv("PIVOT_MAX_DATA_BYTES", "lots")
    with pytest.raises(ValueError, match="PIVOT_MAX_DATA_BYTES"):
        max_data_bytes()
    monkeypatch.delenv("PIVOT_MAX_DATA_BYTES")
    assert len(load_pivots(document, format="openai")) == 0  # within the default cap it reads (no assistant turn)
    assert read_bounded(document, limit=10**6) == document.read_bytes()


# -- a long chat -------------------------------------------------------------------------------


def _long_chat(path, messages: int) -> None:
    rows = [{"role": "system", "content": "be brief"}]
    for i in range((messages - 1) // 2):
        rows += [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
    path.write_text(json.dumps({"id": "long", "domain": "tool-use", "messages": rows}) + "\n")


def test_a_100000_message_chat_loads_steps_and_scores_in_bounded_memory(tmp_path):
    """Its 50,000 pivots share one message tuple: before, each copied its prefix (7.7 GB, then MemoryError)."""
    data = tmp_path / "long.jsonl"
    _long_chat(data, 100_000)
    got = run_bounded(
        f"""
        import json
        import gymnasium as gym
        import pivot_envs
        from verifiers_plugins import RewardCache
        env = gym.make("pivot/tool-use-v0", dataset={str(data)!r},
                       reward_cache=RewardCache({str(tmp_path / "r.sqlite")!r}))
        pivots = env.unwrapped.pivots
        last = pivots[-1]
        env.reset(options={{"pivot_id": last.id}})
        _, reward, *_ = env.step(last.expert.content)
        shared = len({{id(p.history._messages) for p in pivots}})
        print(json.dumps({{"pivots": len(pivots), "last": len(last.history), "reward": reward, "tuples": shared}}))
        """,
        timeout=300,
    )
    assert got == {"pivots": 49_999, "last": 99_998, "reward": 1.0, "tuples": 1}


def test_pivot_histories_are_views_that_read_as_the_tuples_they_replace():
    messages = tuple(Message("user" if i % 2 else "assistant", f"m{i}") for i in range(1, 2001))
    trajectory = Trajectory("t", "tool-use", messages)
    pivots = list(extract_pivots(trajectory))
    assert len(pivots) == 1000
    assert all(p.history._messages is trajectory.messages for p in pivots)  # shared, not copied
    p = pivots[10]
    prefix = messages[:21]
    assert len(p.history) == 21 and p.history == prefix and prefix == p.history and list(p.history) == list(prefix)
    assert p.history[-1] == messages[20] and p.history[3:6] == messages[3:6] and p.history[::-5] == prefix[::-5]
    assert (
        p.history + (messages[0],) == prefix + (messages[0],) and (messages[0],) + p.history == (messages[0],) + prefix
    )
    assert tuple(reversed(p.history)) == prefix[::-1] and messages[20] in p.history and messages[21] not in p.history
    assert hash(p.history) == hash(prefix) and repr(p.history) == repr(prefix) and p.history != pivots[11].history
    with pytest.raises(IndexError):
        p.history[21]
    again = pickle.loads(pickle.dumps(p))
    assert again == p and again.history._messages == prefix  # only the prefix travels
    assert Pivot.from_json(p.to_json()) == p and p.content_hash() == Pivot.from_json(p.to_json()).content_hash()
    assert not pivots[0].history.__bool__() or len(pivots[0].history) == 1
    with pytest.raises(InvalidTrajectory, match=r"history\[1\]"):
        Pivot("x#1", "tool-use", [Message("user", "a"), "not a message"], Message("assistant", "b"))
    assert isinstance(Pivot("x#1", "tool-use", [Message("user", "a")], Message("assistant", "b")).history, History)


# -- YAML aliases ------------------------------------------------------------------------------


def _alias_bomb(path) -> None:
    """A SWE-agent demonstration whose user turn carries nine levels of nine aliases (9^9 strings), 511 bytes."""
    lines = ['lol: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"{name}{name}: &{name} [" + ",".join(f"*{prev}" for _ in range(9)) + "]")
        prev = name
    lines += [
        "history:",
        "  - {role: system, content: hi}",
        "  - {role: user, content: fix it, thought: *i}",
        "  - {role: assistant, content: 'ls', agent: primary}",
        "replay_config: {}",
    ]
    path.write_text("\n".join(lines) + "\n")


def test_a_yaml_alias_bomb_is_refused_at_load_not_expanded_later(tmp_path):
    bomb = tmp_path / "demo.yaml"
    _alias_bomb(bomb)
    assert bomb.stat().st_size < 800
    got = run_bounded(
        LOAD_ERRORS
        + textwrap.dedent(
            f"""
        def load_and_hash():
            for p in load_pivots({str(bomb)!r}):
                p.content_hash()  # where the old code ran out of memory
        print(json.dumps({{"error": error_of(load_and_hash)}}))
        """
        ),
        timeout=120,
    )
    assert got["error"] and got["error"].startswith("DataFileError") and "alias" in got["error"], got
    assert str(bomb) in got["error"]


def test_yaml_with_a_few_aliases_still_loads_and_a_cycle_is_refused(tmp_path):
    demo = tmp_path / "demo.yaml"
    demo.write_text(
        "note: &n 'look at the tests first'\n"
        "history:\n"
        "  - {role: system, content: hi}\n"
        "  - {role: user, content: *n}\n"
        "  - {role: assistant, content: ls}\n"
        "replay_config: {}\n"
    )
    [pivot] = load_pivots(demo)
    assert pivot.history[-1].content == "look at the tests first"
    cycle = tmp_path / "cycle.yaml"
    cycle.write_text("history: &h\n  - {role: user, content: x}\n  - *h\nreplay_config: {}\n")
    with pytest.raises(DataFileError, match="alias"):
        load_pivots(cycle)
    bomb = tmp_path / "bomb.yaml"
    _alias_bomb(bomb)
    with pytest.raises(AliasBudgetExceeded, match="alias bomb"):  # the loader other YAML readers use
        load_yaml(bomb.read_text())
    assert load_yaml("a: &x [1, 2]\nb: *x\n") == {"a": [1, 2], "b": [1, 2]}
