"""`python -m pivot_envs` runs the CLI."""

from pivot_envs.cli import main

main()
