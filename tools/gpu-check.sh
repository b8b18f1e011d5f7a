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
#      (ROUNDS rounds, default 3; ROUNDS=0 skips it).
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
try:
    audit = json.loads((out / "audit.json").read_text())
    for env in (audit.get("data") or {}).get("audits", []):
        for f in env.get("findings", []):
            print(f"  audit {f['rule_id']} {f['severity']}: {f['title']}: {str(f['evidence'])[:150]}")
except (OSError, ValueError) as exc:
    print(f"audit.json: unreadable ({exc})")
EOF
