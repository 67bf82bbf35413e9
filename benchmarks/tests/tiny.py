"""Tiny workloads for the runner's tests: fast, and one of each outcome."""

import os

from benchmarks.workloads import Workload

N = 256


def _add(fw):
    a, b = fw.rand((N,)), fw.rand((N,))
    add = fw.m.add
    return lambda: add(a, b)


def _matmul(fw):
    a = fw.rand((32, 32))
    matmul = fw.m.matmul
    return lambda: matmul(a, a)


def _copy(fw):
    x = fw.rand((N,))
    return lambda: fw.copy_op(x)


def _erf(fw):
    x = fw.rand((N,))
    return lambda: fw.erf(x)


def _error(fw):
    def call():
        raise RuntimeError("tiny workload failed on purpose")

    return call


def _crash(fw):
    return lambda: os._exit(3)


def _dispatch(fw):
    x0 = fw.input(fw.np.array(1.0, dtype=fw.np.float32))

    def call():
        x = x0
        for _ in range(10):
            x = x + x0
        return x

    return call


def workloads(quick=False):
    return [
        Workload("tiny copy", "limits", _copy, bytes=2 * N * 4, limit="copy", always=True),
        Workload("tiny dispatch", "dispatch", _dispatch, ops=10),
        Workload("tiny add", "memory", _add, bytes=3 * N * 4),
        Workload("tiny erf", "memory", _erf, bytes=2 * N * 4),
        Workload("tiny error", "memory", _error),
        Workload("tiny crash", "memory", _crash),
        Workload("tiny matmul", "compute", _matmul, flops=2 * 32**3, limit="gemm"),
    ]
