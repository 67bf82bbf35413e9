#!/usr/bin/env python3
"""Checks the tensor-core attention kernels (backend/cuda/attention.cpp:
forward and the fused backward's passes) without a GPU: their generated
sources run under a host emulation of CUDA (emu.h: a std::thread per CUDA
thread, warp operations through shared slots) against a float64 reference
(attention_harness.cpp). Each case runs twice: cp.async copies landing at
once, then only when their wait retires them (a missing barrier or wait
shows in one of the two). Slow (about a minute for all cases) but exact in
the fragment layouts and indexing; timing and the PTX itself are not
checked (CudaCodegen's NVRTC tests build them).

  python3 scripts/cuda_emulate/attention_emulate.py [--quick]
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CUDA_INC = os.environ.get("CUDA_INCLUDE", "/usr/local/cuda/include")


def build_dumper(work):
    exe = os.path.join(work, "dump")
    srcs = [os.path.join(HERE, "dump_sources.cpp")] + [
        os.path.join(ROOT, "loom", p)
        for p in ("backend/cuda/attention.cpp", "backend/cuda/jit.cpp", "backend/cuda/codegen.cpp",
                  "dtype.cpp")
    ]
    subprocess.run(["g++", "-std=c++20", "-O0", "-w", "-fPIC", "-no-pie", "-I" + ROOT,
                    "-I" + CUDA_INC, "-DLOOM_HAVE_CUDA=1", *srcs, "-o", exe,
                    "-Wl,--unresolved-symbols=ignore-all"], check=True)
    return exe


def dump(exe, which, dtype, D, mask, sinks):
    return subprocess.run([exe, which, dtype, str(D), str(mask), str(int(sinks))], check=True,
                          capture_output=True, text=True).stdout


PARAMS = re.compile(r"\nstruct loom_attn_params \{.*?\n\};\n", re.S)
HELPERS = re.compile(r"__device__ __forceinline__ unsigned loom_smem.*?"
                     r"__device__ __forceinline__ unsigned loom_pack\(.*?\n\}\n", re.S)


def host_source(src, prelude, ns):
    assert src.startswith(prelude)
    src = src[len(prelude):]
    src = PARAMS.sub("\n", src)
    src, n = HELPERS.subn("EMU_MMA_HELPERS\n", src)
    src = re.sub(r'extern "C" __global__ void (__launch_bounds__\([^)]*\) )?', "void ", src)
    src = src.replace("__shared__ __align__(128)", "alignas(128) static")
    src = src.replace("__shared__", "static")
    src = src.replace("__device__ __forceinline__", "static inline")
    macros = sorted(set(re.findall(r"#define (LOOM_\w+)", src)))
    undef = "".join("#undef %s\n" % m for m in macros)
    return "namespace %s {\n%s\n} // namespace %s\n%s" % (ns, src, ns, undef)


def run_case(exe, work, dtype, D, mask, sinks, causal, B, NQ, NK, TQ, TK):
    prelude = dump(exe, "prelude", dtype, D, mask, sinks)
    parts = [host_source(dump(exe, w, dtype, D, mask, sinks), prelude, "k%s_ns" % w)
             for w in ("fwd", "stats", "bwd", "fin")]
    with open(os.path.join(work, "kernels.h"), "w") as f:
        f.write("\n".join(parts))
    binary = os.path.join(work, "harness")
    flags = dict(CFG_BF16=int(dtype == "bf16"), CFG_D=D, CFG_MASK=mask, CFG_SINKS=int(sinks),
                 CFG_CAUSAL=int(causal), CFG_B=B, CFG_NQ=NQ, CFG_NK=NK, CFG_TQ=TQ, CFG_TK=TK)
    subprocess.run(["g++", "-std=c++20", "-O1", "-w", "-pthread", "-I" + HERE, "-I" + work,
                    *["-D%s=%d" % kv for kv in flags.items()],
                    os.path.join(HERE, "attention_harness.cpp"), "-o", binary], check=True)
    ok = True
    for late in ("0", "1"):
        print("%s D=%d mask=%d sinks=%d causal=%d B=%d Nq=%d Nk=%d Tq=%d Tk=%d, cp.async %s" %
              (dtype, D, mask, sinks, causal, B, NQ, NK, TQ, TK,
               "late" if late == "1" else "early"), flush=True)
        r = subprocess.run([binary], env=dict(os.environ, EMU_LATE_COPIES=late))
        ok &= r.returncode == 0
    return ok


CASES = [
    # dtype, D, mask, sinks, causal, B, Nq, Nk, Tq, Tk
    ("bf16", 64, 0, False, False, 1, 2, 1, 70, 130),
    ("f16", 128, 0, False, True, 1, 1, 1, 100, 100),
    ("bf16", 128, 1, True, False, 1, 2, 2, 33, 65),
    ("f16", 64, 2, False, False, 1, 1, 1, 65, 40),
    ("bf16", 64, 0, True, True, 1, 2, 1, 130, 70),
    ("f16", 64, 0, False, True, 1, 1, 1, 40, 140),
    # Rows that see no key weigh every key equally (no sink to take the weight).
    ("bf16", 64, 1, False, False, 2, 2, 1, 50, 100),
    ("f16", 128, 0, False, True, 1, 1, 1, 130, 70),
]


def main():
    quick = "--quick" in sys.argv
    work = tempfile.mkdtemp(prefix="attn_emu_")
    exe = build_dumper(work)
    ok = True
    for case in CASES[:2] if quick else CASES:
        ok &= run_case(exe, work, *case)
    print("all passed" if ok else "FAILURES")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
