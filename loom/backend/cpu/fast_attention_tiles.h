// float32 register tiles for the CPU attention kernels (fast_attention.cpp).
//
// OpenBLAS packs both operands of every call again: an attention block of
// 128 query rows against 1024 keys repacked the head's whole K (or V) for
// each of its products, and P or dS (512 KiB) for the products that read
// them transposed. These tiles read K and V packed once per head, and P and
// dS where they lie (a row-major block reads as A or as A^T by its strides),
// so a block's products run at the FMA rate without copies between them.
// AVX-512 only (compiled in where the build targets it); elsewhere
// available() is false and the kernels take the BLAS path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::cpu::attention_tiles {

// Whether the tiles are compiled in and the CPU runs them; tests can turn
// them off to compare against the BLAS path (returns the previous setting).
bool available();
bool set_enabled(bool enabled);

// Floats that pack() writes for n rows of width d.
size_t packed_size(int64_t n, int64_t d);

// Packs rows [0, n) of the row-major matrix x (n x d, leading dimension ldx)
// as panels of 16 rows stored column by column (zero rows pad the last
// panels), the layout product_nt reads.
void pack(const float* x, int64_t n, int64_t d, int64_t ldx, float* out);

// c[i][j] = alpha * sum_t a[i][t] x[j][t] for i < M, j < N, with x packed by
// pack() (its first N rows are used; N <= the packed n).
void product_nt(int64_t M, int64_t N, int64_t D, float alpha, const float* a, int64_t lda,
                const float* packed, float* c, int64_t ldc);

// c[i][:N] = alpha * scale_i * sum_t A(i, t) b[t][:N] (+ c[i][:N] when
// accumulate), where A(i, t) = a[i * si + t * st]: si = lda, st = 1 reads a
// row-major A; si = 1, st = lda reads it transposed. scale_i = rowscale[i],
// or 1 when rowscale is null.
void product_nn(int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t si,
                int64_t st, const float* b, int64_t ldb, const float* rowscale, bool accumulate,
                float* c, int64_t ldc);

// The largest element of x[0, n) (NaN ignored; -inf for n == 0).
float row_max(const float* x, int64_t n);

// x[j] = exp(x[j] - shift) for j < n (0 below e^-87, NaN kept), returning
// the sum.
float exp_sum(float* x, int64_t n, float shift);

} // namespace loom::cpu::attention_tiles
