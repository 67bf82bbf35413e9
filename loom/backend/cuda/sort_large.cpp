// Sorts of any row length and the selections built on them (argpartition,
// topk) on the GPU. sort.cpp's one-block bitonic kernel keeps rows of up to
// 4096 elements for Sort/ArgSort; it hands longer rows, ArgPartition and
// ArgTopK to sort_large_kernel here.
//
// Tiles of 2048 elements of each row are sorted in shared memory (bitonic,
// over (value, index) pairs); merge passes then double the sorted runs until
// one covers the row: merge-path blocks, each finding its slice of the two
// runs by a binary search along the diagonal and ranking the staged elements
// in shared memory (runs not a multiple of the tile, topk's candidates, rank
// each element by a binary search in global memory); a last kernel writes the
// wanted part (values, indices, or topk's last k indices)
// through the output's layout. The order is a strict total order, (value with
// NaN last, then original index), so ranks are unique, the result is the
// stable sort (what the CPU's argsort gives), and ArgPartition's full sort is
// a valid partition. For topk, ties are broken by the index descending, so
// among equal values at the cut the first occurrences are kept, as the CPU's
// selection keeps the first it met. complex64 stays on the CPU.
#include <algorithm>
#include <string>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"
#include "loom/primitives/sort.h"

namespace loom::cuda {

namespace {

constexpr unsigned kTile = 2048;
constexpr unsigned kThreads = 1024;

std::string sort_large_source(const std::string& name, Dtype d, bool desc_ties) {
  std::string src = jit_prelude();
  src += "typedef " + std::string(storage_type(d)) + " ST;\ntypedef " + compute_type(d) + " CT;\n";
  src += std::string("#define LOOM_DESC_TIES ") + (desc_ties ? "1" : "0") + "\n";
  src += "#define LOOM_TILE " + std::to_string(kTile) + "u\n";
  src += R"(
// Whether (a, ia) goes before (b, ib): NaN after numbers, then by value, then
// by index (descending for topk's ties).
__device__ __forceinline__ bool loom_before(CT a, unsigned ia, CT b, unsigned ib) {
  const bool na = a != a, nb = b != b;
  if (na != nb) return nb;
  if (!na && a != b) return a < b;
#if LOOM_DESC_TIES
  return ia > ib;
#else
  return ia < ib;
#endif
}
// Tile (blockIdx.x) of row (blockIdx.y + gridDim.y * blockIdx.z) sorted into
// the dense (rows, n) buffers keys/idx. Padding slots carry index ~0u and go last.
extern "C" __global__ void NAME_tile(const ST* __restrict__ in, ST* __restrict__ keys,
                                     unsigned* __restrict__ idx, long long n, long long inner,
                                     long long rows) {
  __shared__ CT sk[LOOM_TILE];
  __shared__ unsigned si[LOOM_TILE];
  const long long r = (long long)blockIdx.z * gridDim.y + blockIdx.y;
  if (r >= rows) return;
  const long long base = (r / inner) * n * inner + r % inner;
  const long long t0 = (long long)blockIdx.x * LOOM_TILE;
  const unsigned count = n - t0 < (long long)LOOM_TILE ? (unsigned)(n - t0) : LOOM_TILE;
  for (unsigned i = threadIdx.x; i < LOOM_TILE; i += blockDim.x) {
    if (i < count) { sk[i] = (CT)loom_ld(in[base + (t0 + i) * inner]); si[i] = (unsigned)(t0 + i); }
    else { sk[i] = (CT)0; si[i] = 0xffffffffu; }
  }
  __syncthreads();
  for (unsigned k = 2; k <= LOOM_TILE; k <<= 1) {
    for (unsigned j = k >> 1; j > 0; j >>= 1) {
      for (unsigned i = threadIdx.x; i < LOOM_TILE; i += blockDim.x) {
        const unsigned p = i ^ j;
        if (p > i) {
          const bool up = (i & k) == 0;
          bool after;
          if (si[i] == 0xffffffffu || si[p] == 0xffffffffu) after = si[p] != 0xffffffffu;
          else after = loom_before(sk[p], si[p], sk[i], si[i]);
          if (after == up) {
            CT t = sk[i]; sk[i] = sk[p]; sk[p] = t;
            unsigned u = si[i]; si[i] = si[p]; si[p] = u;
          }
        }
      }
      __syncthreads();
    }
  }
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) {
    loom_st(keys + r * n + t0 + i, sk[i]);
    idx[r * n + t0 + i] = si[i];
  }
}
// One merge pass: sorted runs of width w become runs of 2w. Each element's
// place is its offset in its run plus the number of partner-run elements
// before it (a binary search; the order is strict, so places are unique).
extern "C" __global__ void NAME_merge(const ST* __restrict__ ka, const unsigned* __restrict__ ia,
                                      ST* __restrict__ kb, unsigned* __restrict__ ib, long long n,
                                      long long total, long long w) {
  for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < total;
       g += (long long)gridDim.x * blockDim.x) {
    const long long r = g / n, p = g % n;
    const long long start = (p / (2 * w)) * 2 * w;
    const long long off = p - start;
    const bool left = off < w;
    const long long ps = left ? start + w : start;           // partner run
    const long long pe = left ? (start + 2 * w < n ? start + 2 * w : n) : start + w;
    const long long row = r * n;
    const CT v = (CT)loom_ld(ka[row + p]);
    const unsigned vi = ia[row + p];
    long long lo = ps, hi = pe > ps ? pe : ps;
    while (lo < hi) { // first partner element not before v
      const long long mid = (lo + hi) >> 1;
      if (loom_before((CT)loom_ld(ka[row + mid]), ia[row + mid], v, vi)) lo = mid + 1;
      else hi = mid;
    }
    const long long dst = start + (left ? off : off - w) + (lo - ps);
    kb[row + dst] = ka[row + p];
    ib[row + dst] = vi;
  }
}
// One merge pass, merge-path form: block x of a row writes outputs
// [x * TILE, (x + 1) * TILE) of its pair of runs (2w is a multiple of TILE).
// Two threads find where that output range starts and ends in each run (a
// binary search along the diagonal), the block stages those elements in
// shared memory and each element finds its rank among the other run's there.
extern "C" __global__ void NAME_mergep(const ST* __restrict__ ka, const unsigned* __restrict__ ia,
                                       ST* __restrict__ kb, unsigned* __restrict__ ib, long long n,
                                       long long rows, long long w) {
  __shared__ CT sk[LOOM_TILE];
  __shared__ unsigned si[LOOM_TILE];
  __shared__ long long split[2];
  const long long r = (long long)blockIdx.z * gridDim.y + blockIdx.y;
  const long long dg = (long long)blockIdx.x * LOOM_TILE;
  if (r >= rows || dg >= n) return;
  const long long start = (dg / (2 * w)) * 2 * w;
  const long long aend = start + w < n ? start + w : n;
  const long long bend = start + 2 * w < n ? start + 2 * w : n;
  const long long la = aend - start, lb = bend - aend;
  const long long d0 = dg - start;
  const long long d1 = d0 + LOOM_TILE < la + lb ? d0 + LOOM_TILE : la + lb;
  const ST* K = ka + r * n;
  const unsigned* I = ia + r * n;
  if (threadIdx.x < 2) {
    const long long d = threadIdx.x == 0 ? d0 : d1;
    long long lo = d - lb > 0 ? d - lb : 0, hi = d < la ? d : la;
    while (lo < hi) { // A[mid] is among the first d outputs when it goes before B[d - 1 - mid]
      const long long mid = (lo + hi) >> 1, b = aend + d - 1 - mid;
      if (loom_before((CT)loom_ld(K[start + mid]), I[start + mid], (CT)loom_ld(K[b]), I[b])) lo = mid + 1;
      else hi = mid;
    }
    split[threadIdx.x] = lo;
  }
  __syncthreads();
  const long long i0 = split[0], j0 = d0 - split[0];
  const int na = (int)(split[1] - split[0]), nt = (int)(d1 - d0);
  for (int t = threadIdx.x; t < nt; t += blockDim.x) {
    const long long src = t < na ? start + i0 + t : aend + j0 + (t - na);
    sk[t] = (CT)loom_ld(K[src]);
    si[t] = I[src];
  }
  __syncthreads();
  for (int t = threadIdx.x; t < nt; t += blockDim.x) {
    const CT v = sk[t];
    const unsigned vi = si[t];
    int lo = t < na ? na : 0, hi = t < na ? nt : na;
    const int ps = lo, own = t < na ? t : t - na;
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (loom_before(sk[mid], si[mid], v, vi)) lo = mid + 1;
      else hi = mid;
    }
    const long long dst = r * n + start + d0 + own + (lo - ps);
    loom_st(kb + dst, v);
    ib[dst] = vi;
  }
}
// topk's candidates: the last k of each tile-sorted row's tiles, each a
// sorted run of k (the last tile's run may be shorter), rows of `len`.
extern "C" __global__ void NAME_cand(const ST* __restrict__ ka, const unsigned* __restrict__ ia,
                                     ST* __restrict__ kb, unsigned* __restrict__ ib, long long n,
                                     long long len, long long k, long long total) {
  for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < total;
       g += (long long)gridDim.x * blockDim.x) {
    const long long r = g / len, c = g % len, t = c / k, j = c % k;
    const long long t0 = t * LOOM_TILE;
    const long long count = n - t0 < (long long)LOOM_TILE ? n - t0 : (long long)LOOM_TILE;
    const long long run = count < k ? count : k;
    const long long src = r * n + t0 + count - run + j;
    kb[r * len + c] = ka[src];
    ib[r * len + c] = ia[src];
  }
}
// The last m of each sorted row (m = n, or k for topk) written through the
// output's layout: values (want_values) or indices.
extern "C" __global__ void NAME_out(const ST* __restrict__ keys, const unsigned* __restrict__ idx,
                                    void* __restrict__ out, long long n, long long m,
                                    long long inner, long long total, int want_values) {
  for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < total;
       g += (long long)gridDim.x * blockDim.x) {
    const long long r = g / m, j = g % m;
    const long long src = r * n + (n - m) + j;
    const long long dst = (r / inner) * m * inner + r % inner + j * inner;
    if (want_values) ((ST*)out)[dst] = keys[src];
    else ((unsigned*)out)[dst] = idx[src];
  }
}
)";
  for (size_t pos; (pos = src.find("NAME_")) != std::string::npos;) src.replace(pos, 4, name);
  return src;
}

void launch_grid(cudaKernel_t k, long long total, void** args, cudaStream_t s, const char* what) {
  if (total <= 0) return;
  const long long blocks = std::min<long long>((total + 255) / 256, 132LL * 64);
  check(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(static_cast<unsigned>(blocks)),
                         dim3(256), args, 0, s),
        what);
}

} // namespace

std::string sort_large_kernel_source(const std::string& name, Dtype d, bool desc_ties) {
  return sort_large_source(name, d, desc_ties);
}

// Sort, ArgSort, ArgPartition and ArgTopK along any axis, any row length
// below 2^32; false (the CPU runs it) for complex64 and unknown dtypes.
bool sort_large_kernel(Primitive& prim, const std::vector<array>& inputs,
                       std::vector<array>& outputs, cudaStream_t s) {
  const std::string pname = prim.name();
  const bool values = pname == "Sort";
  const bool topk = pname == "ArgTopK";
  if (!values && !topk && pname != "ArgSort" && pname != "ArgPartition") return false;
  const array& in = inputs[0];
  array& out = outputs[0];
  const Dtype d = in.dtype();
  if (d == complex64 || storage_type(d) == nullptr || in.ndim() == 0) return false;
  if (values ? out.dtype() != d : out.dtype() != uint32) return false;
  const PrimitiveState st = prim.state();
  int axis = static_cast<int>(state_get<int64_t>(st, pname, "axis"));
  if (axis < 0) axis += in.ndim();
  if (axis < 0 || axis >= in.ndim()) return false;
  const long long n = in.shape(axis);
  if (n >= 0xffffffffLL) return false;
  long long inner = 1;
  for (int i = axis + 1; i < in.ndim(); ++i) inner *= in.shape(i);
  const long long m = topk ? static_cast<long long>(out.shape(axis)) : n;
  if (m > n) return false;
  void* y = alloc_output(out);
  if (out.size() == 0 || in.size() == 0) return true;
  const long long rows = static_cast<long long>(in.size()) / n;

  auto& pool = device_pool(current_device());
  allocator::Buffer dense{nullptr, 0};
  const void* x = dense_data(in, dense, s);
  const size_t count = static_cast<size_t>(rows * n);
  allocator::Buffer keys[2] = {pool.malloc(count * d.size), pool.malloc(count * d.size)};
  allocator::Buffer idx[2] = {pool.malloc(count * 4), pool.malloc(count * 4)};

  const std::string name = std::string(topk ? "loom_sortl_top_" : "loom_sortl_") +
                           std::to_string(static_cast<int>(d.val));
  auto source = [&] { return sort_large_source(name, d, topk); };
  cudaKernel_t tile = jit_kernel(name + "_tile", source);
  cudaKernel_t merge = jit_kernel(name + "_merge", source);
  cudaKernel_t write = jit_kernel(name + "_out", source);
  cudaKernel_t merge_path = jit_kernel(name + "_mergep", source);

  const long long tiles = (n + kTile - 1) / kTile;
  const long long ylim = 65535;
  const unsigned gy = static_cast<unsigned>(std::min(rows, ylim));
  const unsigned gz = static_cast<unsigned>((rows + gy - 1) / gy);
  {
    void* k0 = keys[0].ptr;
    void* i0 = idx[0].ptr;
    void* args[] = {
        &x, &k0, &i0, const_cast<long long*>(&n), &inner, const_cast<long long*>(&rows)};
    check(cudaLaunchKernel(reinterpret_cast<const void*>(tile),
                           dim3(static_cast<unsigned>(tiles), gy, gz), dim3(kThreads), args, 0, s),
          "cudaLaunchKernel (sort tiles)");
  }
  int cur = 0;
  long long len = n;   // the row length the merges work on
  long long w = kTile; // the sorted runs' width
  if (topk && tiles > 1 && m <= kTile / 2) {
    // topk: the k largest of a row are among the k largest of its tiles, so
    // only those (a sorted run of k per tile) are merged.
    len = (tiles - 1) * m + std::min<long long>(m, n - (tiles - 1) * kTile);
    w = m;
    long long cand_total = rows * len;
    void* k0 = keys[0].ptr;
    void* i0 = idx[0].ptr;
    void* k1 = keys[1].ptr;
    void* i1 = idx[1].ptr;
    long long mm = m;
    void* args[] = {&k0, &i0, &k1, &i1, const_cast<long long*>(&n), &len, &mm, &cand_total};
    launch_grid(jit_kernel(name + "_cand", source), cand_total, args, s,
                "cudaLaunchKernel (topk candidates)");
    cur = 1;
  }
  long long total = rows * len;
  for (; w < len; w *= 2) {
    void* ka = keys[cur].ptr;
    void* ia = idx[cur].ptr;
    void* kb = keys[1 - cur].ptr;
    void* ib = idx[1 - cur].ptr;
    if ((2 * w) % kTile == 0) {
      void* args[] = {&ka, &ia, &kb, &ib, &len, const_cast<long long*>(&rows), &w};
      const unsigned gx = static_cast<unsigned>((len + kTile - 1) / kTile);
      check(cudaLaunchKernel(reinterpret_cast<const void*>(merge_path), dim3(gx, gy, gz), dim3(256),
                             args, 0, s),
            "cudaLaunchKernel (sort merge)");
    } else {
      void* args[] = {&ka, &ia, &kb, &ib, &len, &total, &w};
      launch_grid(merge, total, args, s, "cudaLaunchKernel (sort merge)");
    }
    cur = 1 - cur;
  }
  {
    void* kc = keys[cur].ptr;
    void* ic = idx[cur].ptr;
    long long out_total = rows * m;
    int want_values = values ? 1 : 0;
    long long mm = m;
    void* args[] = {&kc, &ic, &y, &len, &mm, &inner, &out_total, &want_values};
    launch_grid(write, out_total, args, s, "cudaLaunchKernel (sort output)");
  }
  // Stream-ordered frees: after the kernels above.
  for (auto& b : keys) pool.free(b);
  for (auto& b : idx) pool.free(b);
  if (dense.ptr != nullptr) pool.free(dense);
  return true;
}

} // namespace loom::cuda
