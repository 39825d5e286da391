"""What every backend promises and every caller reads.

The spec, effects and their comparison, the isolation defaults, the backend protocol and its checker.
"""
