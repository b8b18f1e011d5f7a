"""Child: import the modules named on the command line, in that order (import:MOD, import-order)."""

import importlib
import sys

for _module in sys.argv[1:]:
    importlib.import_module(_module)
