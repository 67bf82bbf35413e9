// Pieces of generated device code shared by the eager element-wise kernels
// (elementwise.cpp) and compile's fused regions (compiled.cpp): the storage
// and compute types of a dtype, and an op table entry's code form written
// over named operands.
#pragma once

#include <string>
#include <vector>

#include "loom/dtype.h"
#include "loom/primitives/elementwise_table.h"

namespace loom::compile_detail {
class Compiled;
}

namespace loom::cuda {

// Storage type in generated code, or null when the dtype has no GPU path.
const char* storage_type(Dtype d);
// The type arithmetic happens in (float16/bfloat16 compute as float).
const char* compute_type(Dtype d);
bool is_float(Dtype d);
// The op table's code form with operand k written as `args[k]`, for operands
// of compute dtype `compute_dtype`; empty when it has no device form there.
std::string device_expr(const ew::OpInfo& info, Dtype compute_dtype,
                        const std::vector<std::string>& args);
// The cast expression AsType(from -> to) applies to `x`, empty when the GPU
// does not do this cast (float to integer: the CPU's conventions apply).
std::string cast_expr(Dtype from, Dtype to, const std::string& x);

// The source of the kernel running fused region `c` in one pass, its name
// written `NAME`: inputs of these dtypes read as modes[k] ('c' dense, 's' one
// element for all, 'g' strided through the layout argument), outputs of these
// dtypes written dense, four elements per access with `vec` (`unroll` such
// accesses per thread and loop step, all loaded before the first is used).
// Empty when an op of the region has no device code form.
std::string fused_kernel_source(const compile_detail::Compiled& c,
                                const std::vector<Dtype>& input_dtypes, const std::string& modes,
                                const std::vector<Dtype>& output_dtypes, bool vec, int unroll = 1);

// The source of kernel `name`: softmax (or, with `logsumexp`, logsumexp) of
// each row of the last axis, one block per row.
std::string row_softmax_source(const std::string& name, Dtype d, bool logsumexp);

// Block-wide reductions for one-block-per-row kernels:
// loom_block_reduce<C, kMax>(v, sh) over a __shared__ C sh[33]; loom_max_nan.
const char* row_reduce_prelude();

// mx.fast kernels (fast.cpp): RMSNorm (or, with `layer`, LayerNorm) of each
// row of the last axis, one block per row; RoPE, one thread per rotated pair.
std::string norm_kernel_source(const std::string& name, Dtype d, bool layer);
std::string rope_kernel_source(const std::string& name, Dtype d);
// Attention (attention.cpp): head sizes D and Dv, mask 0 none, 1 boolean,
// 2 additive; with `sinks`, a per-head sink logit.
std::string attention_kernel_source(const std::string& name, Dtype d, int D, int Dv, int mask,
                                    bool sinks);
// The tensor-core forward (float16/bfloat16, D == Dv of 64 or 128), blocks of
// `warps` (4 or 8) warps of 16 query rows; `min_blocks` > 0 asks ptxas for
// that many blocks per multiprocessor (__launch_bounds__).
std::string attention_mma_kernel_source(const std::string& name, Dtype d, int D, int mask,
                                        bool sinks, int warps, int min_blocks = 0);
// The tensor-core backward's passes: the softmax statistics (and delta =
// sum(dO * O), the sinks' gradients) per query row; dK, dV and dQ (float,
// by atomics) per block of 64 keys; dQ (and the sinks' gradients) rounded.
std::string attention_mma_stats_kernel_source(const std::string& name, Dtype d, int D, int mask,
                                              bool sinks);
std::string attention_mma_bwd_kernel_source(const std::string& name, Dtype d, int D, int mask,
                                            bool sinks);
std::string attention_bwd_finish_kernel_source(const std::string& name, Dtype d);

// The source of kernel `name`: the index (uint32) of the maximum (`is_max`)
// or minimum of each row, one block per row.
std::string arg_reduce_source(const std::string& name, Dtype d, bool is_max);

// The sources of the Gather kernel for elements of `size` bytes and of the
// Scatter kernel (Scatter::ReduceType `type` as an int), indices of dtype `idx`.
std::string gather_kernel_source(const std::string& name, size_t size, Dtype idx);
std::string scatter_kernel_source(const std::string& name, Dtype d, int type, Dtype idx);

// The source of the RandomBits kernel (RandomDistribution `dist` as an int;
// `byte_mode`: bits whose bytes per key are not a multiple of four).
std::string random_kernel_source(const std::string& name, int dist, Dtype d, bool byte_mode);

// The sources of the Scan kernels (op 0 sum, 1 prod, 2 max, 3 min; kernels
// `name`_rows and `name`_cols) and of the Sort/ArgSort row kernel.
std::string scan_kernel_source(const std::string& name, Dtype d, int op);
std::string sort_kernel_source(const std::string& name, Dtype d, bool indices);

// The source of the strided copy kernel (SliceUpdate, Scatter's input).
std::string strided_copy_kernel_source(const std::string& name, size_t size);

// Builds `source` with NVRTC for sm_`arch` (no GPU needed) and returns the
// cubin; raises a RuntimeError with NVRTC's log when it does not build.
std::string nvrtc_build(const std::string& source, int arch);

} // namespace loom::cuda
