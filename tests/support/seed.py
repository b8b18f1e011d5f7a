"""The seed crash in a few lines of Python, for tests that run it where no probe runs: a Jupyter
kernel, an env's python started without activation."""

# The parent imports MKL through mkl-service, which writes MKL_THREADING_LAYER=INTEL into the
# environment its children inherit where the variable is unset; the child imports torch (its
# libgomp) and then MKL, and mkl-service exits. Prints {"rc": the child's exit code, "stderr": ...}.
SEED_SCENARIO = """
import json, subprocess, sys
import mkl
child = subprocess.run([sys.executable, "-c", "import torch; import mkl"], capture_output=True, text=True)
print(json.dumps({"rc": child.returncode, "stderr": child.stderr[-500:]}))
"""
