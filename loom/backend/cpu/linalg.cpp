// CPU kernel of Matmul through OpenBLAS (loaded by backend/cpu/blas.cpp).
//
// Each operand's matrix dimensions go to BLAS as they lie in memory: a
// row-major matrix as is, a column-major one (a transposed view) as a
// transpose, so neither is copied; any other layout is copied to row-major
// first. Batches whose second operand is shared and whose first operand's
// rows are evenly spaced become one tall product. Products run through
// cpu::gemm (panels over the intra-op pool); bfloat16 and float16 through
// cpu::gemm_bf16_rounded/gemm_f16 (float32 accumulation, one rounding at the
// end).
#include "loom/primitives/linalg.h"

#include <algorithm>
#include <complex>
#include <cstring>
#include <mutex>
#include <vector>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/gemm.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"

namespace loom {

namespace {

// Products up to this many multiply-adds gain little from being split into
// panels (cpu::gemm), so a batch of them is spread over the pool instead,
// one whole product per chunk.
constexpr double kSmallProduct = 65536.0 * 64;
// Multiply-adds a chunk of such a batch should hold to pay for waking the pool.
constexpr double kChunkWork = 65536.0 * 4;

// How one operand's matrix lies in memory, in BLAS terms.
struct BlasMatrix {
  bool ok = false;    // representable without a copy
  bool trans = false; // stored column-major
  int64_t ld = 0;
};

BlasMatrix blas_view(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= std::max<int64_t>(1, cols))) {
    return {true, false, rows == 1 ? std::max<int64_t>(1, cols) : row_stride};
  }
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= std::max<int64_t>(1, rows))) {
    return {true, true, cols == 1 ? std::max<int64_t>(1, rows) : col_stride};
  }
  return {};
}

template <typename T>
void gemm(const BlasMatrix& a, const BlasMatrix& b, int64_t M, int64_t N, int64_t K, const T* pa,
          const T* pb, T* pc) {
  cpu::gemm<T>(a.trans, b.trans, M, N, K, T(1), pa, a.ld, pb, b.ld, T(0), pc, N);
}

// An operand seen as a batch of matrices broadcast to the output's batch.
struct Operand {
  array data;
  int64_t rows, cols, row_stride, col_stride;
  Strides batch_strides; // per output batch dimension, 0 where broadcast
};

// `first`: a 1-D operand is a row (1, K); otherwise a column (K, 1).
Operand make_operand(const array& x, bool first, const Shape& batch_shape) {
  Operand op{x, 0, 0, 0, 0, Strides(batch_shape.size(), 0)};
  const int nd = x.ndim();
  if (nd == 1) {
    op.rows = first ? 1 : x.shape(0);
    op.cols = first ? x.shape(0) : 1;
    op.row_stride = first ? 0 : x.strides()[0];
    op.col_stride = first ? x.strides()[0] : 0;
    return op;
  }
  op.rows = x.shape(nd - 2);
  op.cols = x.shape(nd - 1);
  op.row_stride = x.strides()[nd - 2];
  op.col_stride = x.strides()[nd - 1];
  const int offset = static_cast<int>(batch_shape.size()) - (nd - 2);
  for (int d = 0; d < nd - 2; ++d) {
    if (x.shape(d) != 1) op.batch_strides[d + offset] = x.strides()[d];
  }
  return op;
}

// A BLAS-compatible view of the operand, copying it to row-major if needed.
BlasMatrix prepare(Operand& op, bool first, const Shape& batch_shape) {
  BlasMatrix m = blas_view(op.rows, op.cols, op.row_stride, op.col_stride);
  if (m.ok) return m;
  op = make_operand(cpu::ensure_row_contiguous(op.data), first, batch_shape);
  return blas_view(op.rows, op.cols, op.row_stride, op.col_stride);
}

// When b is the same matrix for every batch entry and a's rows are evenly
// spaced across the whole batch, the batch is one product with batch*M rows.
bool folds_into_rows(const Operand& a, const BlasMatrix& av, const Operand& b,
                     const Shape& batch_shape) {
  if (av.trans) return false;
  for (int64_t s : b.batch_strides) {
    if (s != 0) return false;
  }
  int64_t expected = av.ld * a.rows;
  for (int d = static_cast<int>(batch_shape.size()) - 1; d >= 0; --d) {
    if (batch_shape[d] == 1) continue;
    if (a.batch_strides[d] != expected) return false;
    expected *= batch_shape[d];
  }
  return true;
}

// Runs out[i] = a[i] b[i] over the batch: `In` is the operands' element
// type, `product(av, bv, M, N, K, pa, pb, pc)` one product.
template <typename In, typename Out, typename Product>
void matmul_batched(const array& a_in, const array& b_in, Out* out, const Shape& batch_shape,
                    Product&& product) {
  Operand a = make_operand(a_in, true, batch_shape);
  Operand b = make_operand(b_in, false, batch_shape);
  const int64_t M = a.rows;
  const int64_t K = a.cols;
  const int64_t N = b.cols;
  const int64_t batch = static_cast<int64_t>(shape_size(batch_shape));
  if (K == 0) {
    std::fill(out, out + batch * M * N, Out(0));
    return;
  }
  BlasMatrix av = prepare(a, true, batch_shape);
  BlasMatrix bv = prepare(b, false, batch_shape);
  const In* pa = a.data.data<In>();
  const In* pb = b.data.data<In>();
  if (batch == 1 || folds_into_rows(a, av, b, batch_shape)) {
    product(av, bv, batch * M, N, K, pa, pb, out);
    return;
  }
  // Offsets of batch entry i in a and b.
  auto offsets = [&](int64_t i) {
    int64_t oa = 0;
    int64_t ob = 0;
    for (int d = static_cast<int>(batch_shape.size()) - 1; d >= 0; --d) {
      const int64_t idx = i % batch_shape[d];
      i /= batch_shape[d];
      oa += idx * a.batch_strides[d];
      ob += idx * b.batch_strides[d];
    }
    return std::pair<int64_t, int64_t>{oa, ob};
  };
  auto run = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      auto [oa, ob] = offsets(static_cast<int64_t>(i));
      product(av, bv, M, N, K, pa + oa, pb + ob, out + static_cast<int64_t>(i) * M * N);
    }
  };
  const double work = static_cast<double>(M) * N * K;
  if (work <= kSmallProduct && batch >= cpu::num_threads()) {
    cpu::parallel_for(batch, static_cast<size_t>(std::max(1.0, kChunkWork / work)), run);
  } else {
    run(0, batch);
  }
}

template <typename T>
void matmul_typed(const array& a_in, const array& b_in, T* out, const Shape& batch_shape) {
  matmul_batched<T>(a_in, b_in, out, batch_shape, gemm<T>);
}

// float16 operands, float32 accumulation and result.
void matmul_f16(const array& a_in, const array& b_in, float* out, const Shape& batch_shape) {
  auto product = [&](const BlasMatrix& av, const BlasMatrix& bv, int64_t M, int64_t N, int64_t K,
                     const uint16_t* pa, const uint16_t* pb, float* pc) {
    cpu::gemm_f16(av.trans, bv.trans, M, N, K, pa, av.ld, pb, bv.ld, pc, N);
  };
  matmul_batched<uint16_t>(a_in, b_in, out, batch_shape, product);
}

// Rounds a float32 result to the (half-precision) output, once.
void round_into(const float* src, array& out) {
  char* dst = out.data<char>();
  const Dtype dtype = out.dtype();
  cpu::parallel_for(out.size(), 1 << 16, [&](size_t b, size_t e) {
    cpu::convert_buffer(src + b, float32, dst + b * out.itemsize(), dtype, e - b);
  });
}

} // namespace

void Matmul::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& a = inputs[0];
  const array& b = inputs[1];
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  // The output batch: everything but the matrix axes that are present.
  const int matrix_axes = (a.ndim() > 1) + (b.ndim() > 1);
  const Shape batch_shape(out.shape().begin(), out.shape().end() - matrix_axes);
  const Dtype dtype = out.dtype();
  if (dtype == float32) {
    matmul_typed<float>(a, b, out.data<float>(), batch_shape);
  } else if (dtype == float64) {
    matmul_typed<double>(a, b, out.data<double>(), batch_shape);
  } else if (dtype == complex64) {
    matmul_typed<std::complex<float>>(a, b, out.data<std::complex<float>>(), batch_shape);
  } else if (dtype == bfloat16) {
    // Rounded to bfloat16 inside the product (in the tile writes where the
    // native kernel runs it): no float32 copy of C.
    matmul_batched<uint16_t>(a, b, out.data<uint16_t>(), batch_shape,
                             [](const BlasMatrix& av, const BlasMatrix& bv, int64_t M, int64_t N,
                                int64_t K, const uint16_t* pa, const uint16_t* pb, uint16_t* pc) {
                               cpu::gemm_bf16_rounded(av.trans, bv.trans, M, N, K, pa, av.ld, pb,
                                                      bv.ld, pc, N);
                             });
  } else if (dtype == float16) {
    array result = array::empty(out.shape(), float32);
    result.set_data(allocator::allocate(result.nbytes()));
    matmul_f16(a, b, result.data<float>(), batch_shape);
    round_into(result.data<float>(), out);
  } else {
    throw std::invalid_argument("[matmul] Only inexact types are supported.");
  }
}

} // namespace loom

// --- GatherMM and SegmentedMM ------------------------------------------------------

namespace loom {

namespace {

// Runs `body(ins, out)` with row-contiguous inputs and the output allocated.
template <typename F>
void with_contiguous(std::vector<array> ins, array& out, F&& body) {
  out.set_data(allocator::allocate(out.nbytes()));
  for (auto& x : ins) x = cpu::ensure_row_contiguous(x);
  body(ins, out);
}

template <typename F>
void dispatch_gemm_type(Dtype d, const char* op, F&& f) {
  if (d == float32) {
    f(float{});
  } else if (d == float64) {
    f(double{});
  } else if (d == complex64) {
    f(std::complex<float>{});
  } else {
    throw std::invalid_argument(std::string("[") + op + "] Unsupported dtype " + dtype_name(d) +
                                ".");
  }
}

} // namespace

void GatherMM::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  const int64_t M = inputs[0].shape(-2);
  const int64_t K = inputs[0].shape(-1);
  const int64_t N = inputs[1].shape(-1);
  const int64_t na = inputs[0].shape(0);
  const int64_t nb = inputs[1].shape(0);
  array li = cpu::ensure_row_contiguous(inputs[2]);
  array ri = cpu::ensure_row_contiguous(inputs[3]);
  const uint32_t* pl = li.data<uint32_t>();
  const uint32_t* pr = ri.data<uint32_t>();
  const int64_t count = static_cast<int64_t>(li.size());
  for (int64_t i = 0; i < count; ++i) {
    if (pl[i] >= na || pr[i] >= nb) {
      throw std::out_of_range("[gather_mm] Index (" + std::to_string(pl[i]) + ", " +
                              std::to_string(pr[i]) + ") out of range for batches of " +
                              std::to_string(na) + " and " + std::to_string(nb) + " matrices.");
    }
  }
  const double work = static_cast<double>(M) * N * K;
  const size_t grain = static_cast<size_t>(std::max(1.0, kChunkWork / std::max(work, 1.0)));
  if (out.dtype() == float16 || out.dtype() == bfloat16) {
    // Both operands are of the output's type: the half-precision products
    // read them as they are (float32 accumulation), no float32 copies.
    const Dtype dtype = out.dtype();
    out.set_data(allocator::allocate(out.nbytes()));
    if (out.size() == 0) return;
    const array a = cpu::ensure_row_contiguous(inputs[0]);
    const array b = cpu::ensure_row_contiguous(inputs[1]);
    const uint16_t* pa = a.data<uint16_t>();
    const uint16_t* pb = b.data<uint16_t>();
    std::vector<float> res(static_cast<size_t>(out.size()));
    auto run = [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const uint16_t* ai = pa + pl[i] * M * K;
        const uint16_t* bi = pb + pr[i] * K * N;
        float* ci = res.data() + i * M * N;
        if (dtype == bfloat16) {
          cpu::gemm_bf16(false, false, M, N, K, ai, K, bi, N, ci, N);
        } else {
          cpu::gemm_f16(false, false, M, N, K, ai, K, bi, N, ci, N);
        }
      }
    };
    if (work <= kSmallProduct && count >= cpu::num_threads()) {
      cpu::parallel_for(count, grain, run);
    } else {
      run(0, count);
    }
    round_into(res.data(), out);
    return;
  }
  Dtype compute = out.dtype();
  with_contiguous({inputs[0], inputs[1]}, out, [&](std::vector<array>& ins, array& res) {
    if (res.size() == 0) return;
    dispatch_gemm_type(compute, "gather_mm", [&](auto tag) {
      using T = decltype(tag);
      const T* pa = ins[0].data<T>();
      const T* pb = ins[1].data<T>();
      T* pc = res.data<T>();
      if (K == 0) {
        std::fill(pc, pc + count * M * N, T(0));
        return;
      }
      const BlasMatrix av{true, false, K}, bv{true, false, N};
      auto run = [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) {
          gemm<T>(av, bv, M, N, K, pa + pl[i] * M * K, pb + pr[i] * K * N, pc + i * M * N);
        }
      };
      if (work <= kSmallProduct && count >= cpu::num_threads()) {
        cpu::parallel_for(count, grain, run);
      } else {
        run(0, count);
      }
    });
  });
}

void SegmentedMM::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array& out = outputs[0];
  const int64_t M = inputs[0].shape(0);
  const int64_t K = inputs[0].shape(1);
  const int64_t N = inputs[1].shape(1);
  array seg = cpu::ensure_row_contiguous(inputs[2]);
  const int32_t* ps = seg.data<int32_t>();
  const int64_t count = static_cast<int64_t>(seg.size()) / 2;
  for (int64_t i = 0; i < count; ++i) {
    const int32_t s0 = ps[2 * i], s1 = ps[2 * i + 1];
    if (s0 < s1 && (s0 < 0 || s1 > K)) {
      throw std::out_of_range("[segmented_mm] Segment [" + std::to_string(s0) + ", " +
                              std::to_string(s1) + ") is out of range for the inner dimension " +
                              std::to_string(K) + ".");
    }
  }
  if (out.dtype() == float16 || out.dtype() == bfloat16) {
    // As gather_mm: half-precision operands read as they are.
    const Dtype dtype = out.dtype();
    out.set_data(allocator::allocate(out.nbytes()));
    if (out.size() == 0) return;
    const array a = cpu::ensure_row_contiguous(inputs[0]);
    const array b = cpu::ensure_row_contiguous(inputs[1]);
    const uint16_t* pa = a.data<uint16_t>();
    const uint16_t* pb = b.data<uint16_t>();
    std::vector<float> res(static_cast<size_t>(out.size()));
    for (int64_t i = 0; i < count; ++i) {
      const int32_t s0 = ps[2 * i], s1 = ps[2 * i + 1];
      float* c = res.data() + i * M * N;
      if (s1 <= s0) {
        std::fill(c, c + M * N, 0.0f);
      } else if (dtype == bfloat16) {
        cpu::gemm_bf16(false, false, M, N, s1 - s0, pa + s0, K, pb + int64_t{s0} * N, N, c, N);
      } else {
        cpu::gemm_f16(false, false, M, N, s1 - s0, pa + s0, K, pb + int64_t{s0} * N, N, c, N);
      }
    }
    round_into(res.data(), out);
    return;
  }
  Dtype compute = out.dtype();
  with_contiguous({inputs[0], inputs[1]}, out, [&](std::vector<array>& ins, array& res) {
    if (res.size() == 0) return;
    dispatch_gemm_type(compute, "segmented_mm", [&](auto tag) {
      using T = decltype(tag);
      const T* pa = ins[0].data<T>();
      const T* pb = ins[1].data<T>();
      T* pc = res.data<T>();
      auto run = [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) {
          const int32_t s0 = ps[2 * i], s1 = ps[2 * i + 1];
          T* c = pc + i * M * N;
          if (s1 <= s0) {
            std::fill(c, c + M * N, T(0));
            continue;
          }
          // Columns [s0, s1) of a (row stride K) times rows [s0, s1) of b.
          const BlasMatrix av{true, false, K}, bv{true, false, N};
          gemm<T>(av, bv, M, N, s1 - s0, pa + s0, pb + static_cast<int64_t>(s0) * N, c);
        }
      };
      run(0, count);
    });
  });
}

} // namespace loom
