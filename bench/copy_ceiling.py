"""How many held-out tau-bench tool calls a perfect copier could get right under each prompt cut.

The demo's policy sees the last `max_history_messages` messages of a pivot, then the last
`max_prompt_tokens` tokens of their render (`trainers.backends.render_prompt`, then the cut the
transformers backend makes). A call whose argument values are not in that text can only be
guessed (an id) or computed (a date from "May 20"), never copied. For the demo's split (by task,
the same seed) this prints, per prompt cut, the held-out tool calls whose expert turn fits the
completion budget and the share of them with every scalar argument value in the prompt the
policy sees, overall and per tool, and the prompt's length in tokens (what a longer cut costs).

    python bench/copy_ceiling.py [--data FILE] [--cuts 4:256,8:512,all:all] [--budget 96] [--json]

The tokenizer is the demo's kind (a byte-level BPE trained here on the training split, the world's
ids as whole tokens); only token counts depend on it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def scalar_values(arguments: str | dict) -> list[str]:
    """The call's scalar argument values as the text a copier would have to find."""
    args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
    return [str(v) for v in args.values() if not isinstance(v, dict | list)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=None, help="airline pivots (default: the demo's)")
    parser.add_argument("--cuts", default="4:256,8:512,all:all", help="history:tokens pairs ('all': no cut)")
    parser.add_argument("--budget", type=int, default=96, help="completion budget in tokens (the demo's)")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()

    from transformers import AutoTokenizer

    from pivot_core import load_pivots, split_pivots
    from pivot_demo import default_data, expert_tokens
    from pivot_demo.synthetic import world_words
    from pivot_demo.tiny_model import build_tiny_model
    from trainers.backends import render_prompt
    from verifiers_plugins import get_host

    data = opts.data or default_data()
    split = split_pivots(list(load_pivots(data)), heldout=0.2, by="auto", seed=0)
    world = get_host().get("tool_worlds", "tau-airline")()
    with tempfile.TemporaryDirectory() as folder:
        build_tiny_model(folder, pivots=list(split.train), words=world_words(world))
        tokenizer = AutoTokenizer.from_pretrained(folder)
    calls = [p for p in split.heldout if p.expert.tool_calls]
    fitting = [p for p in calls if expert_tokens(tokenizer, p) <= opts.budget]
    rows = []
    for cut in opts.cuts.split(","):
        history, tokens = (None if x == "all" else int(x) for x in cut.split(":"))
        found, per_tool, lengths = 0, Counter(), []
        for pivot in fitting:
            ids = tokenizer(render_prompt(tokenizer, pivot, history), add_special_tokens=False)["input_ids"]
            lengths.append(len(ids))
            seen = tokenizer.decode(ids[-tokens:] if tokens else ids)
            call = pivot.expert.tool_calls[0]
            ok = all(v in seen for v in scalar_values(call.arguments))
            found += ok
            per_tool[call.name, ok] += 1
        tools = sorted({name for name, _ in per_tool})
        rows.append(
            {
                "history": history,
                "tokens": tokens,
                "calls": len(fitting),
                "copyable": found,
                "share": round(found / max(len(fitting), 1), 3),
                "rendered_tokens_median": statistics.median(lengths) if lengths else 0,
                "per_tool": {t: [per_tool[t, True], per_tool[t, True] + per_tool[t, False]] for t in tools},
            }
        )
    if opts.json:
        print(json.dumps({"data": str(data), "heldout_calls": len(calls), "rows": rows}, indent=2))
        return
    print(f"{data.name}: {len(calls)} held-out tool calls, {len(fitting)} fit {opts.budget} tokens")
    print(f"{'history':>8} {'tokens':>7} {'copyable':>9} {'share':>6} {'rendered tokens (median)':>25}")
    for r in rows:
        h, t = r["history"] or "all", r["tokens"] or "all"
        print(f"{h:>8} {t:>7} {r['copyable']:>9} {r['share']:>6.2f} {r['rendered_tokens_median']:>25.0f}")
    for r in rows:
        cells = ", ".join(f"{t} {a}/{n}" for t, (a, n) in r["per_tool"].items())
        print(f"  {r['history'] or 'all'}:{r['tokens'] or 'all'}  {cells}")


if __name__ == "__main__":
    main()
