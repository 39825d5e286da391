"""OpenRLHF's `--train.agent_func_path`: pivot episode envs played turn by turn.

OpenRLHF loads this file by path and takes `AgentExecutor`; rows come from
`trainers.adapters.openrlhf_agent.write_openrlhf_episode_jsonl` (see docs/trainers.md).
"""

from trainers.adapters.openrlhf_agent import AgentExecutor, AgentInstance

__all__ = ["AgentExecutor", "AgentInstance"]
