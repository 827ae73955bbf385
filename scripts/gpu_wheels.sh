#!/usr/bin/env bash
# The pure-Python wheels a GPU machine without a package registry lacks (hydra-core, omegaconf,
# antlr4), built here into .whl/ (ignored by git) for scripts/gpu_check.sh to install from there.
# Pure Python: one wheel serves any Python 3 (the lent GPU machines run 3.12).
#
#   bash scripts/gpu_wheels.sh               # then carry .whl/ with the working tree
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
rm -rf .whl && mkdir -p .whl
"$PY" -m pip wheel -q --no-deps -w .whl hydra-core==1.3.8 omegaconf==2.3.1 antlr4-python3-runtime==4.9.3
for wheel in .whl/*.whl; do
  case "$wheel" in *-py3-none-any.whl|*-py2.py3-none-any.whl) ;; *) echo "not pure Python: $wheel" >&2; exit 1;; esac
done
ls .whl
