"""Recipes: YAML intent -> validated layers -> merged recipe -> compiled specs and settings."""
