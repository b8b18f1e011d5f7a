#!/usr/bin/env bash
# The whole test job on a fresh machine: system packages, a venv with dev deps, lint, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for tool in bash dash zsh fish tcsh shellcheck git pypy3; do
    command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
# LLVM's OpenMP runtime: the audit's EK001 test loads a real libomp.so.5 before mkl-service.
ldconfig -p | grep -q 'libomp\.so\.5 ' || need+=(libomp5-14)
# Lmod: tests/cluster/test_modulefiles.py loads envkit's module exports with the real Lmod
[ -f /usr/share/lmod/lmod/init/bash ] || need+=(lmod)
# Slurm and munge: tests/cluster/test_slurm.py runs jobs on a one-node cluster (tools/slurm.sh)
{ command -v sbatch && command -v slurmctld && command -v munged; } >/dev/null 2>&1 || need+=(slurm-wlm munge)
# buildah (podman's engine) builds the Dockerfile export for real, daemonless: tests/support/buildah.py
command -v buildah >/dev/null 2>&1 || need+=(buildah)
# the system's python3 with venv: tests/test_shared_env.py runs envkit as another user from it
/usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
# Wine's cmd.exe runs the cmd.exe activation scripts (tests/activation/test_cmd.py)
wine=0; [ -x /usr/lib/wine/wine64 ] || wine=1
if [ "${#need[@]}" -gt 0 ] || [ "$wine" -eq 1 ]; then
    echo "installing from Debian: ${need[*]}$([ "$wine" -eq 1 ] && echo " wine64")"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    # pypy3 is Python 3.9: the in-env probe's floor, run for real by the tests
    [ "${#need[@]}" -eq 0 ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq zsh fish tcsh dash shellcheck git libomp5-14 pypy3 python3-venv buildah lmod slurm-wlm munge >/dev/null
    # wine64 alone: its recommends are a desktop's worth of packages cmd.exe does not need
    [ "$wine" -eq 0 ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends wine64 >/dev/null
fi

PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"

# A real conda (26.7.1, from ../shared/conda) for the tests that run conda's own commands on
# envkit's envs and envkit on conda's. Elsewhere, ENVKIT_TEST_CONDA or CONDA_EXE names one; with
# neither, those tests fail and say how to get one.
if [ -z "${ENVKIT_TEST_CONDA:-}" ] && [ -f ../shared/conda/install.sh ]; then
    bash ../shared/conda/install.sh "$PWD/.conda-test" >/dev/null
    # conda's csh hook sources ROOT/etc/profile.d/conda.csh: conda's installer ships it, a pip-installed conda lacks it
    mkdir -p .conda-test/etc/profile.d
    cp .conda-test/lib/python3*/site-packages/conda/shell/etc/profile.d/conda.csh .conda-test/etc/profile.d/
    # envkit in that conda's base, as a user installs it: conda finds the plugin by its entry point;
    # conda's reader of rattler (pixi) lock files, for the test of what conda makes of envkit's locks
    .conda-test/bin/python -m pip install --quiet --disable-pip-version-check -e . conda-lockfiles==0.2.2
    export ENVKIT_TEST_CONDA="$PWD/.conda-test/bin/conda"
fi
echo "conda for the tests: ${ENVKIT_TEST_CONDA:-${CONDA_EXE:-none (those tests will fail)}}"

# Other tools envkit's envs and exports meet, as their users run them: conda-lock (installs the
# conda-lock export), conda-pack (moves an env to a machine without conda), pixi-sbom (an SBOM
# from a lock or an env, reading rattler's lock format with pixi's own Rust code), ipykernel and
# jupyter_client (install a notebook kernel for an env, and start it as Jupyter does). In a venv of
# their own: their dependencies (pydantic, conda-lock's vendored conda) are not envkit's.
if [ -z "${ENVKIT_TEST_TOOLS:-}" ]; then
    if [ ! -x .test-tools/bin/conda-lock ] || [ ! -x .test-tools/bin/conda-pack ] || [ ! -x .test-tools/bin/pixi-sbom ] \
        || [ ! -x .test-tools/bin/jupyter-kernelspec ]; then
        "$PY" -m venv .test-tools
        .test-tools/bin/python -m pip install --quiet --disable-pip-version-check conda-lock==4.0.3 conda-pack==0.9.2 pixi-sbom==1.15.0 \
            jupyter_client==8.10.0 ipykernel==7.4.0
    fi
    export ENVKIT_TEST_TOOLS="$PWD/.test-tools/bin"
fi
