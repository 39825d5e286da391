"""Adapters that let other RL trainers (TRL, verl, OpenRLHF, SkyRL, NeMo-RL) and OpenEnv clients use the pivot envs.

The verl and OpenRLHF modules are reward files those trainers load by path and need neither library;
`skyrl` and `openenv` import skyrl-gym and openenv-core (an ImportError says what to install). This
package imports none of them.
"""
