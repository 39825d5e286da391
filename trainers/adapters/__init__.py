"""Adapters that let other RL trainers (TRL, verl, OpenRLHF, SkyRL, NeMo-RL) and OpenEnv clients use the pivot envs.

The verl and OpenRLHF modules are reward files those trainers load by path and need neither library;
`skyrl`, `openenv` and `verl_agent_loop` import skyrl-gym, openenv-core and verl (an ImportError says
what to install), `trl`'s `pivot_environment` needs `datasets`. This package imports none of them.
Multi-turn episodes through each trainer's own path: docs/trainers.md.
"""
