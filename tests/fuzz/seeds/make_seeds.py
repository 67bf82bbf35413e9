"""Writes small .mlxfn seed files for the fuzz corpus (scripts/fuzz_all.sh)
with MLX 0.32.4 (the wheel of the peers environment), for reader cases whose
test fixtures are larger than the fuzzer's -max_len:

    /work/peers/bin/python tests/fuzz/seeds/make_seeds.py

A seed named <parser>-<case> joins corpus_<parser>. GatherQMM's fixture
(python/tests/fixtures/mlxfn/gather_qmm.mlxfn) holds 20 KB of weights.
"""

from __future__ import annotations

import os

import mlx.core as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(0)


def arr(*shape: int) -> mx.array:
    return mx.array(rng.uniform(-2.0, 2.0, size=shape).astype(np.float32))


w = arr(2, 32, 32)
wq, ws, wb = mx.quantize(w, group_size=32, bits=4)
fq, fs = mx.quantize(w, group_size=32, bits=4, mode="mxfp4")
mx.eval(wq, ws, wb, fq, fs)


def gather_qmm(a: mx.array, i: mx.array, j: mx.array) -> list[mx.array]:
    return [
        mx.gather_qmm(a, wq, ws, wb, rhs_indices=i, transpose=True, group_size=32, bits=4),
        mx.gather_qmm(a, wq, ws, wb, lhs_indices=j, rhs_indices=i, transpose=False,
                      group_size=32, bits=4),
        mx.gather_qmm(a, fq, fs, None, rhs_indices=i, transpose=True, group_size=32, bits=4,
                      mode="mxfp4"),
    ]


mx.export_function(os.path.join(HERE, "mlxfn-gather_qmm_small"), gather_qmm, arr(2, 1, 32),
                   mx.array([0, 1]), mx.array([1, 0]))
