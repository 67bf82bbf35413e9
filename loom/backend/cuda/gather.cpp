// Gather and Scatter on the GPU: one generated kernel per element size (or
// dtype, when updates accumulate), index dtype and mode. Each thread handles
// one element of the gathered output (or of the updates): it finds its index
// tuple, reads the indices through their own layouts (take_along_axis's
// broadcast iotas are never materialised), and moves or combines one element.
// Repeated indices accumulate through atomics (native ones where CUDA has
// them, a compare-and-swap loop on the enclosing word otherwise). A plain
// scatter (x[idx] = v) keeps the last write to a repeated target, as the CPU
// does (MLX's GPU keeps any one, mixing writes within a row): a first pass
// records per target the largest index tuple that writes it (atomicMax in a
// table over the indexed axes), then only that tuple writes.
//
// Out-of-range indices raise at evaluation, as on the CPU. When every index
// array has a valid host copy (indices built from Python or NumPy), they are
// checked on the host before the launch, without waiting for the GPU; indices
// that live only on the device are checked by the kernel itself, which skips
// the bad tuples and sets a flag that is read after a stream synchronisation.
#include "loom/primitives/gather.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"

namespace loom::cuda {

namespace {

constexpr int kMaxIndices = 4;
constexpr int kMaxDims = 8;
// Largest table of targets a plain scatter's last-write-wins pass allocates
// (4 bytes each); beyond it any one write wins.
constexpr unsigned long long kMaxClaimTargets = 1ull << 28;

// The kernels' loom_gather_params, byte for byte.
struct GatherParams {
  const void* idx[kMaxIndices];
  long long n;     // threads' elements: the output (gather) or the updates (scatter)
  long long block; // elements per index tuple
  int nidx;
  int idx_ndim;
  long long idx_shape[kMaxDims];
  long long idx_strides[kMaxIndices][kMaxDims];
  long long dims[kMaxIndices];
  long long axis_strides[kMaxIndices];
  int rest_ndim;
  long long rest_shape[kMaxDims];
  long long rest_strides[kMaxDims];     // the indexed array's (a, or out for scatter)
  long long upd_idx_strides[kMaxDims];  // the updates' strides over the index axes
  long long upd_rest_strides[kMaxDims]; // and over the block
  int* bad;
};

const char* params_source() {
  return R"(
struct loom_gather_params {
  const void* idx[4];
  long long n, block;
  int nidx, idx_ndim;
  long long idx_shape[8];
  long long idx_strides[4][8];
  long long dims[4], axis_strides[4];
  int rest_ndim;
  long long rest_shape[8], rest_strides[8], upd_idx_strides[8], upd_rest_strides[8];
  int* bad;
};
// Element offset of the target of element i (false when an index is out of
// range), and the offset of element i in the updates.
__device__ __forceinline__ bool loom_target(long long i, const loom_gather_params& p,
                                            long long& off, long long& uoff) {
  long long t = i / p.block, r = i - t * p.block;
  off = 0; uoff = 0;
  for (int d = p.rest_ndim - 1; d >= 0; --d) {
    long long q = r / p.rest_shape[d], c = r - q * p.rest_shape[d];
    off += c * p.rest_strides[d];
    uoff += c * p.upd_rest_strides[d];
    r = q;
  }
  long long io[4] = {0, 0, 0, 0};
  for (int d = p.idx_ndim - 1; d >= 0; --d) {
    long long q = t / p.idx_shape[d], c = t - q * p.idx_shape[d];
    for (int j = 0; j < p.nidx; ++j) io[j] += c * p.idx_strides[j][d];
    uoff += c * p.upd_idx_strides[d];
    t = q;
  }
  bool ok = true;
  for (int j = 0; j < p.nidx; ++j) {
    long long v = (long long)((const LOOM_IDX*)p.idx[j])[io[j]];
    if (v < 0) v += p.dims[j];
    ok &= (v >= 0) & (v < p.dims[j]);
    off += v * p.axis_strides[j];
  }
  return ok;
}
// The index tuple t's target among the indexed axes (row-major over dims),
// false when an index is out of range.
__device__ __forceinline__ bool loom_key(long long t, const loom_gather_params& p,
                                         unsigned long long& key) {
  long long io[4] = {0, 0, 0, 0};
  for (int d = p.idx_ndim - 1; d >= 0; --d) {
    long long q = t / p.idx_shape[d], c = t - q * p.idx_shape[d];
    for (int j = 0; j < p.nidx; ++j) io[j] += c * p.idx_strides[j][d];
    t = q;
  }
  bool ok = true;
  key = 0;
  for (int j = 0; j < p.nidx; ++j) {
    long long v = (long long)((const LOOM_IDX*)p.idx[j])[io[j]];
    if (v < 0) v += p.dims[j];
    ok &= (v >= 0) & (v < p.dims[j]);
    key = key * (unsigned long long)p.dims[j] + (unsigned long long)v;
  }
  return ok;
}
)";
}

const char* sized_type(size_t size) {
  switch (size) {
    case 1:
      return "unsigned char";
    case 2:
      return "unsigned short";
    case 4:
      return "unsigned int";
    default:
      return "unsigned long long";
  }
}

bool is_integer_index(Dtype d) { return kind(d) == Dtype::Kind::i || kind(d) == Dtype::Kind::u; }

std::string gather_source(const std::string& name, size_t size, Dtype idx) {
  std::string t = sized_type(size);
  std::string src = std::string("#define LOOM_IDX ") + storage_type(idx) + "\n" + params_source();
  src += "extern \"C\" __global__ void " + name + "(const " + t + "* __restrict__ src, " + t +
         "* __restrict__ out, loom_gather_params p) {\n"
         "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < p.n;\n"
         "       i += (long long)gridDim.x * blockDim.x) {\n"
         "    long long off, uoff;\n"
         "    if (loom_target(i, p, off, uoff)) { out[i] = src[off]; }\n"
         "    else { out[i] = 0; atomicOr(p.bad, 1); }\n  }\n}\n";
  return src;
}

// The combine step of a scatter into `*d` with update `s`.
std::string combine_source(Dtype d, Scatter::ReduceType type) {
  using R = Scatter::ReduceType;
  std::string st = d == complex64 ? "float2" : storage_type(d);
  if (type == R::none) {
    return "__device__ __forceinline__ void loom_combine(" + st + "* d, " + st +
           " s) { *d = s; }\n";
  }
  if (d == complex64) { // sum only (checked by the caller)
    return "__device__ __forceinline__ void loom_combine(float2* d, float2 s) {\n"
           "  atomicAdd(&d->x, s.x); atomicAdd(&d->y, s.y);\n}\n";
  }
  // Native atomics where CUDA has them.
  const bool is_sum = type == R::sum, is_max = type == R::max, is_min = type == R::min;
  if (is_sum && (d == float32 || d == float64))
    return "__device__ __forceinline__ void loom_combine(" + st + "* d, " + st +
           " s) { atomicAdd(d, s); }\n";
  if (is_sum && (d == int32 || d == uint32))
    return "__device__ __forceinline__ void loom_combine(" + st + "* d, " + st +
           " s) { atomicAdd((unsigned int*)d, (unsigned int)s); }\n";
  if (is_sum && (d == int64 || d == uint64))
    return "__device__ __forceinline__ void loom_combine(" + st + "* d, " + st +
           " s) { atomicAdd((unsigned long long*)d, (unsigned long long)s); }\n";
  if ((is_max || is_min) && (d == int32 || d == uint32 || d == int64 || d == uint64))
    return "__device__ __forceinline__ void loom_combine(" + st + "* d, " + st + " s) { " +
           (is_max ? "atomicMax" : "atomicMin") + "(d, s); }\n";
  std::string ct = compute_type(d);
  std::string op;
  if (d == bool_) {
    op = (is_sum || is_max) ? "a || b" : "a && b";
  } else if (is_sum) {
    op = "a + b";
  } else if (type == R::prod) {
    op = "a * b";
  } else if (is_max) {
    op = "(b > a || b != b) ? b : a"; // NaN propagates, as in maximum
  } else {
    op = "(b < a || b != b) ? b : a";
  }
  const size_t size = d.size;
  std::string u = sized_type(size);
  std::string w = size == 8 ? "unsigned long long" : "unsigned int";
  // A compare-and-swap loop on the aligned word holding the element.
  return "__device__ __forceinline__ " + ct + " loom_op(" + ct + " a, " + ct + " b) { return (" +
         ct + ")(" + op +
         "); }\n"
         "__device__ __forceinline__ void loom_combine(" +
         st + "* d, " + st +
         " s) {\n"
         "  typedef " +
         w + " W;\n  typedef " + u +
         " U;\n"
         "  W* w = (W*)((unsigned long long)d & ~(unsigned long long)(sizeof(W) - 1));\n"
         "  const unsigned sh = (unsigned)((unsigned long long)d & (sizeof(W) - 1)) * 8u;\n"
         "  const W mask = (W)(U)~(U)0;\n"
         "  W old = *w, assumed;\n"
         "  do {\n"
         "    assumed = old;\n"
         "    U bits = (U)(assumed >> sh);\n"
         "    union { U u; " +
         st +
         " v; } cv;\n"
         "    cv.u = bits;\n"
         "    loom_st(&cv.v, loom_op((" +
         ct + ")loom_ld(cv.v), (" + ct +
         ")loom_ld(s)));\n"
         "    U nb = cv.u;\n"
         "    W repl = (assumed & ~(mask << sh)) | ((W)nb << sh);\n"
         "    if (repl == assumed) return;\n"
         "    old = atomicCAS(w, assumed, repl);\n"
         "  } while (assumed != old);\n}\n";
}

std::string scatter_source(const std::string& name, Dtype d, Scatter::ReduceType type, Dtype idx) {
  std::string st = d == complex64 ? "float2" : storage_type(d);
  std::string src =
      std::string("#define LOOM_IDX ") + storage_type(idx) + "\n" + jit_prelude() + params_source();
  if (type == Scatter::ReduceType::none) {
    // A plain store moves bytes: one kernel per element size. With `win`,
    // only the last tuple writing a target stores (the claim pass before
    // recorded 1 + the largest tuple per target).
    st = sized_type(d.size);
    src += "extern \"C\" __global__ void " + name +
           "_claim(unsigned* win, loom_gather_params p, long long tuples) {\n"
           "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < tuples;\n"
           "       t += (long long)gridDim.x * blockDim.x) {\n"
           "    unsigned long long key;\n"
           "    if (loom_key(t, p, key)) atomicMax(win + key, (unsigned)(t + 1));\n  }\n}\n";
    src += "extern \"C\" __global__ void " + name + "(const " + st + "* __restrict__ upd, " + st +
           "* out, loom_gather_params p, const unsigned* __restrict__ win) {\n"
           "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < p.n;\n"
           "       i += (long long)gridDim.x * blockDim.x) {\n"
           "    long long off, uoff;\n"
           "    if (!loom_target(i, p, off, uoff)) { atomicOr(p.bad, 1); continue; }\n"
           "    if (win != 0) {\n"
           "      long long t = i / p.block;\n"
           "      unsigned long long key;\n"
           "      loom_key(t, p, key);\n"
           "      if (win[key] != (unsigned)(t + 1)) continue;\n"
           "    }\n"
           "    out[off] = upd[uoff];\n  }\n}\n";
    return src;
  } else {
    src += combine_source(d, type);
  }
  src += "extern \"C\" __global__ void " + name + "(const " + st + "* __restrict__ upd, " + st +
         "* out, loom_gather_params p) {\n"
         "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < p.n;\n"
         "       i += (long long)gridDim.x * blockDim.x) {\n"
         "    long long off, uoff;\n"
         "    if (loom_target(i, p, off, uoff)) loom_combine(out + off, upd[uoff]);\n"
         "    else atomicOr(p.bad, 1);\n  }\n}\n";
  return src;
}

// Whether every index of a dense index array lies in [-dim, dim): one pass
// of minimum and maximum (the element-by-element walk below took ~30 ms for
// 2^22 indices, more than the scatter itself). False also when unsure.
template <typename I>
bool all_in_range(const I* p, size_t n, int64_t dim) {
  int64_t lo = 0, hi = 0;
  if (n > 0) lo = hi = static_cast<int64_t>(p[0]);
  for (size_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(p[i]);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  return lo >= -dim && hi < dim;
}

bool dense_indices_in_range(const array& idx, int64_t dim) {
  if (!idx.flags().row_contiguous || idx.data_size() != idx.size()) return false;
  const char* base = static_cast<const char*>(idx.data_shared_ptr()->ptr()) + idx.offset();
  const size_t n = idx.size();
  const bool is_signed = kind(idx.dtype()) == Dtype::Kind::i;
  switch (idx.itemsize()) {
    case 1:
      return is_signed ? all_in_range(reinterpret_cast<const int8_t*>(base), n, dim)
                       : all_in_range(reinterpret_cast<const uint8_t*>(base), n, dim);
    case 2:
      return is_signed ? all_in_range(reinterpret_cast<const int16_t*>(base), n, dim)
                       : all_in_range(reinterpret_cast<const uint16_t*>(base), n, dim);
    case 4:
      return is_signed ? all_in_range(reinterpret_cast<const int32_t*>(base), n, dim)
                       : all_in_range(reinterpret_cast<const uint32_t*>(base), n, dim);
    default:
      return all_in_range(reinterpret_cast<const int64_t*>(base), n, dim);
  }
}

// Raises the CPU's error for the first out-of-range index, reading the
// indices' host copies (which wait for the kernels that wrote them).
void raise_out_of_range(const std::string& op, const Shape& shape, const std::vector<int>& axes,
                        const std::vector<array>& indices, bool require) {
  for (size_t j = 0; j < indices.size(); ++j) {
    const array& idx = indices[j];
    const int64_t dim = shape[axes[j]];
    if (!require && dense_indices_in_range(idx, dim)) continue;
    const char* base = static_cast<const char*>(idx.data_shared_ptr()->ptr());
    const size_t item = idx.itemsize();
    const bool is_signed = kind(idx.dtype()) == Dtype::Kind::i;
    std::vector<int64_t> pos(idx.ndim(), 0);
    for (size_t e = 0; e < idx.size(); ++e) {
      int64_t off = idx.offset() / static_cast<int64_t>(item);
      for (int d = 0; d < idx.ndim(); ++d) off += pos[d] * idx.strides(d);
      const char* p = base + off * static_cast<int64_t>(item);
      int64_t v = 0;
      switch (item) {
        case 1:
          v = is_signed ? int64_t(*reinterpret_cast<const int8_t*>(p)) : int64_t(uint8_t(*p));
          break;
        case 2:
          v = is_signed ? int64_t(*reinterpret_cast<const int16_t*>(p))
                        : int64_t(*reinterpret_cast<const uint16_t*>(p));
          break;
        case 4:
          v = is_signed ? int64_t(*reinterpret_cast<const int32_t*>(p))
                        : int64_t(*reinterpret_cast<const uint32_t*>(p));
          break;
        default:
          v = *reinterpret_cast<const int64_t*>(p);
      }
      if (v < -dim || v >= dim) {
        std::ostringstream msg;
        msg << "[" << op << "] Index " << v << " is out of bounds for axis " << axes[j]
            << " with size " << dim << ".";
        throw std::out_of_range(msg.str());
      }
      for (int d = idx.ndim() - 1; d >= 0; --d) {
        if (++pos[d] < idx.shape(d)) break;
        pos[d] = 0;
      }
    }
  }
  if (require) throw std::out_of_range("[" + op + "] An index is out of bounds.");
}

} // namespace

bool host_valid(const array& a) {
  return (a.data_shared_ptr()->valid() & allocator::Data::kHost) != 0;
}

// Per thread rather than per launch: a cudaHostAlloc costs far more than the
// kernel it would report for.
int* bad_flag() {
  thread_local int* flag = [] {
    void* p = nullptr;
    check(cudaHostAlloc(&p, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc (index flag)");
    return static_cast<int*>(p);
  }();
  return flag;
}

namespace {

// Fills the index and block parts of `p`; false when the case has no GPU
// path (too many index arrays or dimensions, mixed or non-integer dtypes).
bool fill_params(GatherParams& p, const array& target, const Strides& target_strides,
                 const std::vector<int>& axes, const std::vector<array>& indices) {
  std::memset(&p, 0, sizeof(p));
  if (indices.empty() || indices.size() > kMaxIndices || indices.size() != axes.size())
    return false;
  const Dtype idt = indices[0].dtype();
  if (!is_integer_index(idt)) return false;
  const Shape& ishape = indices[0].shape();
  if (ishape.size() > kMaxDims) return false;
  p.nidx = static_cast<int>(indices.size());
  p.idx_ndim = static_cast<int>(ishape.size());
  for (size_t d = 0; d < ishape.size(); ++d) p.idx_shape[d] = ishape[d];
  for (size_t j = 0; j < indices.size(); ++j) {
    const array& idx = indices[j];
    if (idx.dtype() != idt || idx.shape() != ishape) return false;
    int ax = axes[j];
    if (ax < 0 || ax >= target.ndim()) return false;
    for (size_t d = 0; d < ishape.size(); ++d) p.idx_strides[j][d] = idx.strides(d);
    p.dims[j] = target.shape(ax);
    p.axis_strides[j] = target_strides[ax];
  }
  int r = 0;
  p.block = 1;
  for (int d = 0; d < target.ndim(); ++d) {
    bool indexed = false;
    for (int ax : axes) indexed |= ax == d;
    if (indexed) continue;
    if (r == kMaxDims) return false;
    p.rest_shape[r] = target.shape(d);
    p.rest_strides[r] = target_strides[d];
    p.block *= target.shape(d);
    ++r;
  }
  p.rest_ndim = r;
  return true;
}

// Sets the index pointers and the flag; checks host-resident indices now.
// Returns whether the kernel's flag must be read after the launch.
bool prepare_indices(GatherParams& p, const std::string& op, const array& target,
                     const std::vector<int>& axes, const std::vector<array>& indices,
                     cudaStream_t s) {
  bool all_host = true;
  for (auto& idx : indices) all_host &= host_valid(idx);
  if (all_host) raise_out_of_range(op, target.shape(), axes, indices, false);
  for (size_t j = 0; j < indices.size(); ++j) p.idx[j] = device_data(indices[j], s);
  p.bad = bad_flag();
  *p.bad = 0;
  return !all_host;
}

void after_launch(bool check_flag, const GatherParams& p, const std::string& op,
                  const array& target, const std::vector<int>& axes,
                  const std::vector<array>& indices, cudaStream_t s) {
  if (!check_flag) return;
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize (index check)");
  if (*p.bad != 0) raise_out_of_range(op, target.shape(), axes, indices, true);
}

bool gather_kernel(Primitive& prim, const std::vector<array>& inputs, std::vector<array>& outputs,
                   cudaStream_t s) {
  auto& g = static_cast<Gather&>(prim);
  const array& a = inputs[0];
  array& out = outputs[0];
  std::vector<array> indices(inputs.begin() + 1, inputs.end());
  GatherParams p;
  if (!fill_params(p, a, a.strides(), g.axes(), indices)) return false;
  if (a.itemsize() > 8 || (a.itemsize() & (a.itemsize() - 1)) != 0) return false;
  if (out.size() == 0) {
    alloc_output(out);
    return true;
  }
  if (a.size() == 0) return false; // every index is out of range: the CPU raises
  p.n = static_cast<long long>(out.size());
  const bool check_flag = prepare_indices(p, "gather", a, g.axes(), indices, s);
  const void* src = device_data(a, s);
  void* dst = alloc_output(out);
  std::string name = "loom_gather_" + std::to_string(a.itemsize()) + "_" +
                     std::to_string(static_cast<int>(indices[0].dtype().val));
  cudaKernel_t k =
      jit_kernel(name, [&] { return gather_source(name, a.itemsize(), indices[0].dtype()); });
  void* args[] = {&src, &dst, &p};
  launch_elementwise(k, out.size(), args, s);
  after_launch(check_flag, p, "gather", a, g.axes(), indices, s);
  return true;
}

bool row_dense(const array& a) { return a.flags().row_contiguous && a.data_size() == a.size(); }

bool scatter_kernel(Primitive& prim, const std::vector<array>& inputs, std::vector<array>& outputs,
                    cudaStream_t s) {
  using R = Scatter::ReduceType;
  auto& sc = static_cast<Scatter&>(prim);
  const array& a = inputs[0];
  const array& upd = inputs.back();
  array& out = outputs[0];
  const Dtype d = a.dtype();
  const R type = sc.reduce_type();
  if (upd.dtype() != d || a.itemsize() > 8 || (a.itemsize() & (a.itemsize() - 1)) != 0)
    return false;
  if (type != R::none) {
    if (d == complex64 ? type != R::sum : storage_type(d) == nullptr) return false;
  }
  std::vector<array> indices(inputs.begin() + 1, inputs.end() - 1);
  // The output is row-major: its strides address the targets.
  Strides row(a.ndim(), 1);
  for (int i = a.ndim() - 2; i >= 0; --i) row[i] = row[i + 1] * a.shape(i + 1);
  GatherParams p;
  if (!fill_params(p, a, row, sc.axes(), indices)) return false;
  // The updates have shape I + the block.
  if (upd.ndim() != p.idx_ndim + p.rest_ndim) return false;
  for (int i = 0; i < p.idx_ndim; ++i) {
    if (upd.shape(i) != p.idx_shape[i]) return false;
    p.upd_idx_strides[i] = upd.strides(i);
  }
  for (int i = 0; i < p.rest_ndim; ++i) {
    if (upd.shape(p.idx_ndim + i) != p.rest_shape[i]) return false;
    p.upd_rest_strides[i] = upd.strides(p.idx_ndim + i);
  }
  p.n = static_cast<long long>(upd.size());
  const bool work = upd.size() > 0 && a.size() > 0;
  const bool check_flag = work && prepare_indices(p, sc.name(), a, sc.axes(), indices, s);
  // Donate the input's buffer when only the device holds it (a host copy
  // would go stale under the kernel's writes).
  void* dst = nullptr;
  if (row_dense(a) && a.data_shared_ptr()->valid() == allocator::Data::kDevice &&
      a.is_donatable() && !out.is_tracer()) {
    dst = const_cast<void*>(device_data(a, s));
    out.copy_shared_buffer(a);
  } else {
    dst = alloc_output(out);
    if (a.size() > 0) copy_to_row_major(a, dst, s);
  }
  if (!work) return true;
  const void* u = device_data(upd, s);
  std::string name = "loom_scatter_" + std::to_string(static_cast<int>(type)) + "_" +
                     std::to_string(static_cast<int>(d.val)) + "_" +
                     std::to_string(static_cast<int>(indices[0].dtype().val));
  auto source = [&] { return scatter_source(name, d, type, indices[0].dtype()); };
  cudaKernel_t k = jit_kernel(name, source);
  if (type != R::none) {
    void* args[] = {&u, &dst, &p};
    launch_elementwise(k, upd.size(), args, s);
    after_launch(check_flag, p, sc.name(), a, sc.axes(), indices, s);
    return true;
  }
  // Last write wins: a table over the indexed axes' targets when it is not
  // too large (else any one write wins, as on MLX's GPU).
  const long long tuples = p.n / std::max<long long>(p.block, 1);
  unsigned long long targets = 1;
  // LOOM_CUDA_SCATTER_ANY=1: any one write wins (no claim pass), to measure its cost.
  static const bool any_write = [] {
    const char* v = std::getenv("LOOM_CUDA_SCATTER_ANY");
    return v != nullptr && std::string(v) == "1";
  }();
  bool small = !any_write && tuples > 1 && tuples < 0xffffffffLL;
  for (int j = 0; j < p.nidx && small; ++j) {
    targets *= static_cast<unsigned long long>(p.dims[j]);
    small = targets <= kMaxClaimTargets;
  }
  allocator::Allocator& pool = device_pool(current_device());
  allocator::Buffer table{nullptr, 0};
  if (small) {
    table = pool.malloc(targets * sizeof(unsigned));
    check(cudaMemsetAsync(table.ptr, 0, targets * sizeof(unsigned), s), "cudaMemsetAsync");
    cudaKernel_t claim = jit_kernel(name + "_claim", source);
    long long count = tuples;
    void* cargs[] = {&table.ptr, &p, &count};
    launch_elementwise(claim, static_cast<size_t>(tuples), cargs, s);
  }
  const void* win = table.ptr;
  void* args[] = {&u, &dst, &p, &win};
  launch_elementwise(k, upd.size(), args, s);
  if (table.ptr != nullptr) pool.free(table); // stream-ordered: after the kernels
  after_launch(check_flag, p, sc.name(), a, sc.axes(), indices, s);
  return true;
}

struct Registration {
  Registration() {
    register_kernel(typeid(Gather), &gather_kernel);
    register_kernel(typeid(Scatter), &scatter_kernel);
  }
} registration;

} // namespace

// For the NVRTC build test: the sources the kernels above generate.
std::string gather_kernel_source(const std::string& name, size_t size, Dtype idx) {
  return gather_source(name, size, idx);
}
std::string scatter_kernel_source(const std::string& name, Dtype d, int type, Dtype idx) {
  return scatter_source(name, d, static_cast<Scatter::ReduceType>(type), idx);
}

} // namespace loom::cuda
