"""Activation: settings -> per-shell script text -> files in etc/conda/{activate,deactivate}.d."""

# envkit's activation files are etc/conda/{activate,deactivate}.d/envkit-RECIPE.{sh,fish,...}
FILE_PREFIX = "envkit-"
