"""`python -m pivot_cli` runs the CLI."""

from pivot_cli import main

main()
