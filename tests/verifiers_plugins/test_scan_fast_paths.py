"""Hand-written scanners give exactly what the slower standard tool they replace gives."""

import json
import random
import re
import shlex
import sys

from verifiers_plugins.builtin.parsers import parse_hermes, tool_call_blocks
from verifiers_plugins.builtin.string_similarity import shell_tokens

# The pattern the Hermes parser used before `tool_call_blocks`, and the bench's bare comparison still uses.
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_PIECES = ["<tool_call>", "</tool_call>", "<tool_call", "tool_call>", " ", "\n", "\t", "\u00a0", "\u2028", "\x0b"]
_PIECES += ["x", '{"name": "f"}', "<", "/", ">", "\u00e9"]


def _texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 12))) for _ in range(n)]


def test_tool_call_blocks_finds_what_the_regex_finds():
    texts = _texts(5000) + ["<tool_call>\n{}\n</tool_call>", "<tool_call>a<tool_call>b</tool_call>", "<tool_call> "]
    for text in texts:
        want = [(m.start(), m.end(), m.group(1)) for m in _TOOL_CALL.finditer(text)]
        assert tool_call_blocks(text) == want, text
    # the random texts reach every case: no block, one, several, and an opening tag never closed
    counts = {len(tool_call_blocks(t)) for t in texts}
    assert {0, 1, 2} <= counts
    assert any("<tool_call>" in t and not tool_call_blocks(t) for t in texts)


def test_regex_whitespace_is_str_strip_whitespace_for_every_code_point():
    space = re.compile(r"\s")
    assert [i for i in range(sys.maxunicode + 1) if bool(space.match(chr(i))) != chr(i).isspace()] == []


def _shlex_tokens(line: str) -> list[str]:
    """What `simple_commands` asked shlex for before `shell_tokens` had its fast path."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace = " \t\r"
    return list(iter(lexer.get_token, lexer.eof))


def test_shell_tokens_are_shlex_tokens_on_every_ascii_character_and_random_command_lines():
    rng = random.Random(0)
    words = ["ls", "-la", "cd", "/app", "&&", "||", "|", ";", "&", ">", "2>&1", "$HOME", "a=b", "*.py", "~/x", "(", ")"]
    words += ["\n", " ", "\t", "\r", "\x0b", "{a,b}", "x[0]", "@", "%", "^", "!", ",", ":", "+", "<", "`", "é", "#"]
    lines = [chr(c) for c in range(128)] + [chr(a) + chr(b) for a in range(32, 127) for b in (32, 38, 59, 97, 124)]
    lines += [
        "".join(rng.choice(words) + rng.choice(["", " "]) for _ in range(rng.randint(0, 10))) for _ in range(5000)
    ]
    fast = 0
    for line in lines:
        try:
            want = _shlex_tokens(line)
        except ValueError:
            continue  # unbalanced quotes: shlex itself answers (and raises) for such lines
        assert shell_tokens(line) == want, repr(line)
        fast += line.isascii() and not any(c in line for c in "'\"\\#")
    assert fast > 3000  # most lines took the fast path, so it is what was compared


def test_a_parsed_calls_arguments_are_what_json_dumps_writes():
    # (a string is the arguments text itself, kept as it is, so none is here)
    values = [{}, [], {"s": 'é\u2028\x00"\\'}, 0, -1, 10**30, 1.5, 1e-7, 1e22, True, None, {"a": [1, {"b": None}]}]
    values += [{"k": list(range(3)), "n": {"m": {"o": [True, False, 2.25]}}}, ["\ud7ff", "\U0001f600"], {"é": "x"}]
    for value in values:
        text = "<tool_call>" + json.dumps({"name": "f", "arguments": value}) + "</tool_call>"
        (call,) = parse_hermes(text).tool_calls
        assert call.arguments == json.dumps(value, ensure_ascii=False)
