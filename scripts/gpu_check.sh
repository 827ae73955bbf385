#!/usr/bin/env bash
# The GPU checks of the triton backend on a machine with an NVIDIA GPU. The default run, parts kernel and
# train, is planned to fit 6 minutes on an H200 (the dry run prints each part's plan and minutes):
#   part 1 (kernel): parity against naive on CUDA (head_dim 64 and 128), failures listed, then the attention
#                    table (triton beside sdpa and compiled flex)
#   part 2 (train):  ANDREA-120M trained with attention=triton beside attention=sdpa
#   part 3 (tiles):  each triton kernel timed with candidate tiles beside its own (scripts/bench_tiles.py);
#                    only when named: it picks tiles, it checks nothing
#
#   bash scripts/gpu_check.sh                 # parts kernel and train, one after the other
#   bash scripts/gpu_check.sh tiles           # or one part: kernel | train | tiles
#   bash scripts/gpu_check.sh --dry-run       # the plan only: runs on any machine, no GPU
#
# Every line is also written to $OUT/gpu_check-<part>.log (OUT defaults to ./gpu_check), line by
# line, so a run stopped part-way still leaves what it printed. It needs torch and Triton with CUDA (any
# release from torch 2.5 and Triton 3.2: nothing here names one GPU generation's tools),
# and andrea's pure-Python imports (hydra-core, omegaconf, antlr4): a machine without a package
# registry gets them as wheels in .whl/, which scripts/gpu_wheels.sh builds where pip works.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
OUT=${OUT:-$PWD/gpu_check}
mkdir -p "$OUT"
if [ "${1:-}" = "--dry-run" ]; then
  { "$PY" scripts/bench_gpu.py --dry-run --part all && "$PY" scripts/bench_tiles.py --dry-run; } \
    | tee "$OUT/gpu_check-plan.log"
  exit "${PIPESTATUS[0]}"
fi
if ls .whl/*.whl > /dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/andrea-site .whl/*.whl
  export PYTHONPATH="$PYTHONPATH:/tmp/andrea-site"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
status=0
for part in ${1:-kernel train}; do
  echo "== part: $part"
  if [ "$part" = tiles ]; then
    "$PY" scripts/bench_tiles.py "${@:2}" 2>&1 | tee "$OUT/gpu_check-$part.log" || status=1
  else
    "$PY" scripts/bench_gpu.py --part "$part" "${@:2}" 2>&1 | tee "$OUT/gpu_check-$part.log" || status=1
  fi
done
exit "$status"
