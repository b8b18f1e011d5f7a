"""Channels (condarc, mirrors) and rattler's gateway and solver: a recipe becomes a solved plan."""
