"""Activation: settings -> per-shell script text -> files in etc/conda/{activate,deactivate}.d."""

# envkit's activation files are etc/conda/{activate,deactivate}.d/envkit-RECIPE.{sh,fish,...}
FILE_PREFIX = "envkit-"

# Which text the generators write for given settings: bump it whenever one writes other text (a
# mend in some shell), and `envkit sync` rewrites the scripts of envs an older envkit made (their
# records carry an older number, or none). tests/activation/test_generators.py holds each
# number's digest, and fails when the text moves without it.
SCRIPTS_FORMAT = 6  # 2: fish scripts end with `true`, cmd.exe ones leave by `EXIT /B 0`; 3: cmd.exe sets no value with a double quote and dedupes path lists; 4: startup files in site-packages; 5: which take the user site out where they set PYTHONNOUSERSITE; 6: csh removes an entry holding a single quote before adding it again
