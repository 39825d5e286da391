"""json_schema's compiled fast path (fastjsonschema) never calls valid what jsonschema calls invalid."""

import copy
import json

import gymnasium as gym
import jsonschema
import pytest

import pivot_envs  # noqa: F401  (registers the env ids)
from verifiers_plugins.builtin.json_schema import schema_errors


def _variants(args: dict) -> list:
    """The expert's arguments and near-misses of each: a key dropped, a value of another type, an extra key."""
    out = [args, {}, {**args, "unexpected_extra": 1}, [args], "x", None, 3]
    for key, value in args.items():
        out.append({k: v for k, v in args.items() if k != key})
        for other in ("1", 1, 1.5, True, None, [value], {"v": value}):
            out.append({**args, key: other})
    return out


# swe's bundled pivots are shell turns (no tool schemas)
@pytest.mark.parametrize("env_id", ["pivot/tool-use-v0", "pivot/browse-v0"])
def test_fast_path_agrees_with_jsonschema_on_every_bundled_schema(env_id):
    env = gym.make(env_id).unwrapped
    checked = 0
    for pivot in env.pivots:
        for call in pivot.expert.tool_calls:
            schema = pivot.tool_schema(call.name)
            args = call.parsed_arguments()
            if not schema or not isinstance(args, dict):
                continue
            for instance in _variants(copy.deepcopy(args)):
                want = jsonschema.validators.validator_for(schema)(schema).is_valid(instance)
                assert (schema_errors(instance, schema) == []) == want, (pivot.id, json.dumps(instance)[:200])
                checked += 1
    assert checked > 50
