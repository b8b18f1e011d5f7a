#!/usr/bin/env bash
# The probe's GPU path on a real CUDA machine. Not part of CI (CI has no GPU): run it by hand on a
# GPU node with a CUDA build of torch, or through the workplace's lent device machine.
#
#   tools/gpu-check.sh [PYTHON]     # PYTHON: an interpreter whose torch is a CUDA build (default python3)
#
# What it does, each step logged with its exit status and time:
#   1. takes PYTHON's environment (a venv or conda env with CUDA torch) as the env under test; a venv
#      gets an empty conda-meta/ so conda and envkit treat it as an env (pip-only), or, when it is
#      read-only, a thin venv beside it that sees its site-packages;
#   2. envkit probe (expects: gpu pass, with devices, CUDA build vs driver, NCCL all_reduce);
#   3. the same with CUDA_VISIBLE_DEVICES="" (expects: gpu warn naming CUDA_VISIBLE_DEVICES);
#   4. envkit audit, audit --fix, and the probe again (expects: activation written, probe healthy);
#   5. bench/run.py probe --prefix: full probe vs the 2-rank gloo job alone on this machine
#      (ROUNDS rounds, default 3; ROUNDS=0 skips it);
#   6. envkit create of a CUDA recipe over PYTHON's torch (tools/gpu_channel.py builds the channel;
#      CREATE=0 skips it): expects the driver's __cuda detected (nothing assumed), gpu pass and a
#      record with gpu proven; the same env made as on a login node (CONDA_OVERRIDE_CUDA= and
#      CUDA_VISIBLE_DEVICES= hide the driver) expects __cuda assumed from the recipe, gpu warn and
#      proven false, then `envkit probe` on the GPU expects proven true; a recipe for a CUDA newer
#      than the driver expects a solve error naming __cuda (exit 3); the created env's audit. GPU
#      variants (CEP 46): the node's create expects the build for its detected __cuda_arch; the
#      login-node env expects the newest GPUs' build with EK039 in its plan and EK038 in its audit
#      on the node; a recipe declaring cuda_arch "9.0" made as on a login node expects the 9.0 build.
# Reports go to $OUT (default: a temp dir): probe-*.json, audit.json, bench.txt, log.txt.
# py-rattler must be importable; put its wheel in .whl/ and this installs it into /tmp/site.
set -u -o pipefail
PYTHON=${1:-python3}
OUT=${OUT:-$(mktemp -d)}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
export PYTHONUNBUFFERED=1
LOG=$OUT/log.txt
: >"$LOG"

if ls .whl/*.whl >/dev/null 2>&1; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
    export PYTHONPATH=/tmp/site:$ROOT
else
    export PYTHONPATH=$ROOT
fi

step() { # step NAME SECONDS CMD...: stdout to $OUT/NAME, stderr and status to the log
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s%N)
    timeout "$limit" "$@" >"$OUT/$name" 2>>"$LOG"
    rc=$?
    echo "== $name: rc=$rc $((($(date +%s%N) - start) / 1000000)) ms" | tee -a "$LOG"
}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    "$PYTHON" -c 'import sys, torch; print(sys.version.split()[0], sys.prefix, torch.__version__, torch.version.cuda, torch.cuda.is_available())'
    nproc
} 2>&1 | tee -a "$LOG"

PREFIX=$("$PYTHON" -c 'import sys; print(sys.prefix)')
if ! { mkdir -p "$PREFIX/conda-meta" && touch "$PREFIX/conda-meta/history"; } 2>/dev/null; then
    SITE=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    PREFIX=/tmp/envkit-gpu-env
    "$PYTHON" -m venv --without-pip "$PREFIX"
    OWN=$("$PREFIX/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$SITE" >"$OWN/envkit-gpu-check.pth"
    ln -s "$SITE"/torch-*.dist-info "$SITE"/numpy-*.dist-info "$OWN"/
    mkdir -p "$PREFIX/conda-meta" && touch "$PREFIX/conda-meta/history"
fi
echo "env under test: $PREFIX" | tee -a "$LOG"

ENVKIT=("$PYTHON" -m envkit)
step probe-plain.json 150 "${ENVKIT[@]}" probe -p "$PREFIX" --json
step probe-hidden.json 150 env CUDA_VISIBLE_DEVICES= "${ENVKIT[@]}" probe -p "$PREFIX" --json
step audit.json 150 "${ENVKIT[@]}" audit "$PREFIX" --json
step audit-fix.txt 150 "${ENVKIT[@]}" audit "$PREFIX" --fix --yes
step probe-fixed.json 150 "${ENVKIT[@]}" probe -p "$PREFIX" --json
if [ "${ROUNDS:-3}" -gt 0 ]; then
    step bench.txt 240 "$PYTHON" bench/run.py probe --prefix "$PREFIX" --rounds "${ROUNDS:-3}"
    cat "$OUT/bench.txt"
fi
cat "$OUT/audit-fix.txt" >>"$LOG"
rm -f "$OUT/audit-fix.txt"

if [ "${CREATE:-1}" -gt 0 ]; then
    WORK=/tmp/envkit-gpu-create
    rm -rf "$WORK" && mkdir -p "$WORK/envs"
    export ENVKIT_PKGS_DIR=$WORK/pkgs ENVKIT_ENVS_DIR=$WORK/envs
    step channel.txt 120 "$PYTHON" tools/gpu_channel.py "$WORK"
    tee -a "$LOG" <"$OUT/channel.txt"
    record() { cp "$WORK/envs/$1/etc/envkit/record.json" "$OUT/$2" 2>>"$LOG" || echo "no record for $1" | tee -a "$LOG"; }
    step create.json 400 "${ENVKIT[@]}" create "$WORK/recipes/gpu-node.yaml" -p "$WORK/envs/node" --yes --json
    record node record-node.json
    step create-login.json 400 env CONDA_OVERRIDE_CUDA= CUDA_VISIBLE_DEVICES= "${ENVKIT[@]}" create \
        "$WORK/recipes/gpu-node.yaml" -p "$WORK/envs/login" --yes --json
    record login record-login-made.json
    step probe-login.json 150 "${ENVKIT[@]}" probe -p "$WORK/envs/login" --json
    record login record-login-probed.json
    step create-newer.json 120 "${ENVKIT[@]}" create "$WORK/recipes/gpu-node-newer.yaml" -p "$WORK/envs/newer" --dry-run --json
    step audit-node.json 150 "${ENVKIT[@]}" audit "$WORK/envs/node" --json
    step audit-login.json 150 "${ENVKIT[@]}" audit "$WORK/envs/login" --json
    step create-declared.json 400 env CONDA_OVERRIDE_CUDA= CUDA_VISIBLE_DEVICES= "${ENVKIT[@]}" create \
        "$WORK/recipes/gpu-node-h200.yaml" -p "$WORK/envs/declared" --yes --no-probe --json
fi

"$PYTHON" - "$OUT" <<'EOF'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for name in ("probe-plain.json", "probe-hidden.json", "probe-fixed.json"):
    try:
        doc = json.loads((out / name).read_text())
    except (OSError, ValueError) as exc:
        print(f"{name}: unreadable ({exc})")
        continue
    print(f"--- {name}: ok={doc.get('ok')} exit={doc.get('exit_code')} errors={doc.get('errors')}")
    for c in (doc.get("data") or {}).get("checks", []):
        print(f"  {c['status']:5} {c['id']:24} {str(c.get('evidence', '')).splitlines()[0][:150] if c.get('evidence') else ''}")
        if c["status"] in ("warn", "fail"):
            print(f"        remedy: {c.get('remedy')}")
for name in ("create.json", "create-login.json", "probe-login.json", "create-newer.json", "create-declared.json"):
    try:
        doc = json.loads((out / name).read_text())
    except (OSError, ValueError):
        continue
    data = doc.get("data") or {}
    plan = data.get("plan") or {}
    print(f"--- {name}: ok={doc.get('ok')} exit={doc.get('exit_code')} errors={doc.get('errors')} hint={doc.get('hint')}")
    if plan:
        cuda = [v for v in plan.get("virtual_packages", []) if v.startswith("__cuda")]
        print(f"  virtual {cuda} assumed {plan.get('assumed')}")
        print("  packages " + ", ".join(f"{p['name']} {p['version']} {p['build']}" for p in plan.get("packages", [])))
    for f in data.get("findings") or []:
        print(f"  plan {f['rule_id']} {f['severity']}: {str(f['evidence'])[:160]}")
    probe = data.get("probe") if name != "probe-login.json" else data
    for c in (probe or {}).get("checks", []):
        print(f"  {c['status']:5} {c['id']:24} {str(c.get('evidence') or '').splitlines()[0][:150] if c.get('evidence') else ''}")
for name in ("record-node.json", "record-login-made.json", "record-login-probed.json"):
    try:
        probe = json.loads((out / name).read_text()).get("probe") or {}
    except (OSError, ValueError) as exc:
        print(f"{name}: unreadable ({exc})")
        continue
    print(f"--- {name}: status={probe.get('status')} gpu={probe.get('gpu')}")
for name in ("audit.json", "audit-node.json", "audit-login.json"):
    try:
        for env in (json.loads((out / name).read_text()).get("data") or {}).get("audits", []):
            for f in env.get("findings", []):
                print(f"  {name[:-5]} {f['rule_id']} {f['severity']}: {f['title']}: {str(f['evidence'])[:150]}")
    except (OSError, ValueError) as exc:
        print(f"{name}: unreadable ({exc})")
EOF
