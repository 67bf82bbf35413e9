"""Matrix products run the CPU's best BLAS kernels without any setting: on a
CPU with AVX2 or better, the OpenBLAS Loom loads must not report a generic
core (Debian's OpenBLAS 0.3.21 falls back to Prescott on CPUs it does not know,
such as Sapphire Rapids, and runs matmul 4-8x slower)."""

import pytest

from _backend import mx

VECTOR_CORES = {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"}


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@pytest.mark.loom_only
def test_blas_core_is_not_generic_on_avx2_cpus():
    core = mx._blas_core()
    assert core
    flags = _cpu_flags()
    if not {"avx2", "fma"} <= flags:
        pytest.skip(f"CPU without AVX2/FMA: OpenBLAS picks its own core ({core})")
    assert core.lower() in VECTOR_CORES, f"generic BLAS core {core} on a CPU with AVX2"
