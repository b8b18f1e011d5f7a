"""Activation: settings -> per-shell script text -> files in etc/conda/{activate,deactivate}.d."""
