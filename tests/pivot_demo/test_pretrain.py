"""Synthetic airline conversations: every call runs in the world, and its ids are copyable from the context."""

import json
import os

import pytest

from pivot_demo.pretrain import PretrainConfig
from pivot_demo.synthetic import last_turns, synthetic_pivots
from pivot_tool_worlds import tau_airline, tau_airline_demo


def test_synthetic_calls_copy_their_ids_from_the_history_and_run_in_the_world():
    world = tau_airline()  # the full database when ../shared/data is present, else the bundled subset
    pivots = synthetic_pivots(world, 40, seed=3)
    calls = [p for p in pivots if p.expert.tool_calls]
    assert len(calls) >= 60 and {c.expert.tool_calls[0].name for c in calls} >= {
        "get_user_details",
        "get_reservation_details",
        "cancel_reservation",
    }
    for p in calls:
        call = p.expert.tool_calls[0]
        args = json.loads(call.arguments)
        seen = " ".join(m.text or "" for m in p.history)
        for key in ("user_id", "reservation_id"):
            if key in args:
                # the value the agent writes is in the conversation: a policy can copy it, not recall it
                assert args[key] in seen, (p.id, key)
        outcome, _ = world.step(world.initial_state(), call.name, args)
        if call.name != "cancel_reservation":  # cancelling needs no earlier state; every call must run
            assert not outcome.error, (p.id, outcome.output)
    # the previous call's output is the next tool message, produced by the world (not made up)
    tool_msgs = [m for p in pivots for m in p.history if m.role == "tool"]
    assert tool_msgs and all(m.content for m in tool_msgs if m.name != "think")
    # seeded: the same conversations again
    assert [p.id for p in synthetic_pivots(world, 40, seed=3)] == [p.id for p in pivots]
    assert len(last_turns(pivots)) == 40


def test_quick_config_is_smaller_and_saves_its_settings_shape():
    full, quick = PretrainConfig(), PretrainConfig().quick()
    assert quick.steps < full.steps and quick.conversations < full.conversations
    assert quick.model.split_spaces and full.model.split_spaces


def test_copy_drills_call_with_an_id_the_user_just_said_and_are_fresh():
    from pivot_demo.synthetic import copy_drills

    world = tau_airline()
    drills = copy_drills(world, 300, seed=2)
    values = []
    for p in drills:
        (call,) = p.expert.tool_calls
        ((key, value),) = json.loads(call.arguments).items()
        assert key == ("user_id" if call.name == "get_user_details" else "reservation_id")
        assert value in p.history[-1].content  # the last user message says it: copy, not recall
        table = world.tables["users" if key == "user_id" else "reservations"]
        assert value in table  # a real id, so the call runs in the world
        values.append(value)
    # drawn from the whole database, not a few ids (the bundled subset holds only 18 ids in all)
    n_ids = len(world.tables["users"]) + len(world.tables["reservations"])
    assert len(set(values)) > 0.8 * min(len(values), n_ids)
    assert any(len(p.history) > 1 for p in drills)  # some carry a distractor id of the other kind
    assert [p.id for p in copy_drills(world, 300, seed=2)] == [p.id for p in drills]


def test_world_ids_are_whole_tokens_with_a_shared_direction_per_kind(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pivot_demo.pretrain import QUICK_MODEL
    from pivot_demo.synthetic import world_words
    from pivot_demo.tiny_model import build_tiny_model

    world = tau_airline()
    words = world_words(world)
    pivots = synthetic_pivots(world, 4, seed=0)
    build_tiny_model(tmp_path, pivots=last_turns(pivots), config=QUICK_MODEL, words=words)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    uid, rid = words["users"][0], words["reservations"][0]
    text = f'Hi, I\'m {uid}. {{"reservation_id": "{rid}"}} x{rid}'
    ids = tok(text, add_special_tokens=False)["input_ids"]
    pieces = [tok.decode([i]) for i in ids]
    assert uid in pieces and rid in pieces and tok.decode(ids) == text
    assert pieces.count(rid) == 1  # inside "x<id>" it is not a word: BPE pieces there
    emb = AutoModelForCausalLM.from_pretrained(tmp_path).get_input_embeddings().weight.detach()
    users = emb[tok.convert_tokens_to_ids(words["users"][:50])]
    others = emb[:50]
    cos = torch.nn.functional.cosine_similarity
    assert cos(users[0], users[1:], dim=-1).mean() > 0.3 > cos(users[0], others, dim=-1).abs().mean()


def test_drill_steps_split_into_runs_that_each_restart_the_learning_rate(tmp_path):
    from dataclasses import replace

    from pivot_demo.pretrain import cycle_steps, pretrain

    assert cycle_steps(1200, 2) == [600, 600] and cycle_steps(7, 3) == [3, 2, 2] and cycle_steps(1, 3) == [1]
    config = replace(PretrainConfig().quick(), conversations=6, drill_steps=20, drill_cycles=2, steps=2)
    lrs: dict[int, float] = {}
    info = pretrain(tmp_path / "m", config, log=lambda step, m: lrs.setdefault(step, m["perf/lr"]))
    drill = [lrs[s] for s in sorted(lrs)][:20]
    # the first run decays, then the second one starts again where the first one started
    assert drill[10] > 5 * drill[9] and drill[10] == drill[0] and drill[19] == drill[9]
    assert len(info["drill_cycle_losses"]) == 2 and info["drill_last_loss"] == info["drill_cycle_losses"][1]
    skill = info["copy_skill"]  # greedy, through the env's scoring path, on calls never trained on
    assert set(skill) == {"drills", "conversations"} and all(0.0 <= v <= 1.0 for v in skill.values())
    saved = json.loads((tmp_path / "m" / "pivot_pretrain.json").read_text())
    assert saved["copy_skill"] == skill


def test_drills_go_on_while_the_copy_skill_is_below_the_bar_up_to_the_maximum(tmp_path):
    from dataclasses import replace

    from pivot_demo.pretrain import pretrain

    tiny = replace(PretrainConfig().quick(), conversations=4, drill_steps=2, drill_cycles=1, steps=1)
    # a bar no 2-step model reaches: one run, then one more per failed check, 3 runs in all
    info = pretrain(tmp_path / "m", replace(tiny, drill_bar=1.0, max_drill_cycles=3))
    assert len(info["drill_cycle_losses"]) == len(info["drill_cycle_skills"]) == 3
    assert info["drill_steps_run"] == 6 and all(s < 1.0 for s in info["drill_cycle_skills"])
    # no bar: the fixed schedule alone, no check
    info = pretrain(tmp_path / "n", replace(tiny, drill_bar=0.0, max_drill_cycles=3))
    assert len(info["drill_cycle_losses"]) == 1 and "drill_cycle_skills" not in info
    with pytest.raises(ValueError, match="drill_bar"):
        replace(tiny, drill_bar=1.5)


def _reference_record():
    from pivot_demo import bundled_reference

    return json.loads((bundled_reference() / "pivot_reference.json").read_text())


def test_the_bundled_reference_loads_and_passes_copy_skills_bar():
    # no shared data needed: the reference was made in the `tau-airline-demo` world, bundled
    from pivot_demo import bundled_reference
    from pivot_demo.pretrain import copy_skill
    from trainers.settings import settings_of

    ref, record = bundled_reference(), _reference_record()
    assert (ref / "model.safetensors").stat().st_size < 5_000_000  # package data: small
    assert settings_of(ref).max_prompt_tokens == 160  # it carries the settings the demo samples with
    # its pretraining drilled until the drill skill passed the bar (the run that made it, recorded)
    assert record["pretrain"]["drill_cycle_skills"][-1] >= record["bar"]["pretrain_drills"]
    # the shipped policy, greedy through the env's scoring path, on synthetic calls it never trained
    # on: the SFT erodes the drill skill, and gives the conversation skill the demo relies on
    skill = copy_skill(ref, tau_airline_demo(), kinds=("conversations",))
    assert skill["conversations"] >= record["bar"]["conversations"], skill
    # what its README says it scores (greedy is deterministic; the tolerance covers another CPU's rounding)
    assert abs(skill["conversations"] - record["copy_skill"]["conversations"]) <= record["tolerance"]["copy_skill"]


def test_the_reference_readme_lists_the_commands_that_made_it():
    from pivot_demo import bundled_reference

    readme = (bundled_reference() / "README.md").read_text()
    for command in _reference_record()["commands"]:
        assert command.replace("{work}", "WORK") in readme


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("PIVOT_REBUILD_REFERENCE", "") in ("", "0"),
    reason="on demand (about 6 minutes on an idle core): PIVOT_REBUILD_REFERENCE=1 pytest -k rebuild",
)
def test_rebuild_the_bundled_reference_from_its_commands(tmp_path):
    import shlex

    from typer.testing import CliRunner

    from pivot_cli import app
    from pivot_demo.pretrain import copy_skill

    record = _reference_record()
    out = {}
    for command in record["commands"]:
        args = shlex.split(command.format(work=tmp_path))[1:]  # drop "pivot"
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (command, result.output)
        out[args[0]] = result.stdout
    tol = record["tolerance"]
    sft = json.loads(out["sft"][out["sft"].index("{") :])  # --json: the summary is the output's one object
    assert abs(sft["last_loss"] - record["sft"]["last_loss"]) <= tol["sft_last_loss"], sft
    skill = copy_skill(tmp_path / "reference", tau_airline_demo(), drill_prompt_tokens=64)
    for kind in ("drills", "conversations"):
        assert abs(skill[kind] - record["copy_skill"][kind]) <= tol["copy_skill"], (kind, skill, record["copy_skill"])
