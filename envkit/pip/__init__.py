"""Wheels inside envs: resolving, installing and reading what pip put there."""
