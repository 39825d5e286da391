"""Shared replay and runner code, on a neutral box: a state rebuilt from its history, an action's effect read back."""
