"""The agent harnesses whose recorded runs become pivots, named once for the whole project.

A converted run's pivots carry `context.harness`: the converters write these names, the episode env
answers a turn the way that harness did, the trainer adapters give the policy that harness's tools,
and the `harness_format` verifier checks a completion against that harness's parser.
"""

from __future__ import annotations

import re

OPENHANDS = "openhands"
MINI_SWE_AGENT = "mini-swe-agent"
TERMINUS = "terminus"
# harnesses whose turns are not Terminus JSON: each has its own tools or action format
HARNESSES = (OPENHANDS, MINI_SWE_AGENT)

# mini-swe-agent's own `action_regex`: exactly what the harness parses from a reply (one block is an
# action, none or several a format error). Stricter than `bash_blocks`, which reads any shell fence.
MINI_SWE_AGENT_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
# what mini-swe-agent answers about a command it killed at its timeout ("The last command <command>...
# </command> timed out and has been killed."): the command did not finish, its effect is partial
MINI_SWE_AGENT_TIMED_OUT = "timed out and has been killed"
