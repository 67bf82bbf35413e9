#!/usr/bin/env bash
# One device call for the fused attention backward (session 11, not yet run
# on a GPU when written): build with CUDA (scripts/gpu_ops.sh, the CudaCodegen
# tests included), run test_cuda_attention.py, then time attention forward and
# forward + backward next to PyTorch (gpu_bench.py attention) three ways: the
# fused backward (opt-in, LOOM_CUDA_ATTN_FUSED_VJP=1), the composite and the forward
# built for three blocks per multiprocessor (LOOM_CUDA_ATTN_MIN_BLOCKS=3).
# Logs under $OUT (default /tmp/loom-gpu-attn).
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/loom-gpu-attn}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
SITE=${LOOM_GPU_SITE:-/tmp/loom-site}
LOOM_GPU_OPS_CTEST=1 LOOM_GPU_OPS_SKIP_BENCH=1 LOOM_GPU_OPS_FILES=test_cuda_attention.py \
  OPS_TEST_TIMEOUT=${OPS_TEST_TIMEOUT:-240} bash scripts/gpu_ops.sh || exit $?
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for v in LOOM_CUDA_ATTN_FUSED_VJP=1 LOOM_CUDA_ATTN_FUSED_VJP=0 LOOM_CUDA_ATTN_MIN_BLOCKS=3; do
  echo "== attention ${v:-(fused backward)}" | tee -a "$OUT/bench.txt"
  env $v timeout 150 $PY scripts/gpu_bench.py attention 2>&1 | tee -a "$OUT/bench.txt"
done
