"""Audit: static inventory of an env -> rule catalog -> findings; safe fixes via the activation writer."""
