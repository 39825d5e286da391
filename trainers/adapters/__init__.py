"""Adapters that let other RL trainers (TRL, verl, OpenRLHF, SkyRL, NeMo-RL) use the pivot envs."""
