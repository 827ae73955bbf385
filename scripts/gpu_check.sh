#!/usr/bin/env bash
# The GPU checks of the triton backend, in one run on a machine with an NVIDIA GPU (a few minutes
# on an H200): scripts/bench_gpu.py's parity against naive on CUDA, the attention table (triton
# beside sdpa and compiled flex) and ANDREA-120M trained with attention=triton beside sdpa.
#
#   bash scripts/gpu_check.sh                 # from the repository root, andrea installed or not
#
# It needs torch and Triton with CUDA, and andrea's pure-Python imports (hydra-core, omegaconf,
# antlr4). A machine without them gets them as wheels in .whl/, made where pip works:
#   pip wheel --no-deps -w .whl hydra-core==1.3.8 omegaconf==2.3.1 antlr4-python3-runtime==4.9.3
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
if ls .whl/*.whl > /dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/andrea-site .whl/*.whl
  export PYTHONPATH="$PYTHONPATH:/tmp/andrea-site"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
"$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
"$PY" scripts/bench_gpu.py "$@"
