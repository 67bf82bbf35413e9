#include "loom/backend/cpu/copy.h"

#include <cstring>

#include "loom/backend/cpu/strided.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"

namespace loom::cpu {

namespace {
constexpr size_t kGrain = 1 << 16;
} // namespace

Strides broadcast_strides(const array& a, const Shape& shape) {
  Strides out(shape.size(), 0);
  int offset = static_cast<int>(shape.size()) - a.ndim();
  for (int d = 0; d < a.ndim(); ++d) {
    out[d + offset] = a.shape(d) == 1 ? 0 : a.strides()[d];
  }
  return out;
}

void convert_buffer(const void* src, Dtype src_dtype, void* dst, Dtype dst_dtype, size_t n) {
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, n * src_dtype.size);
    return;
  }
  dispatch(src_dtype, [&](auto stag) {
    using S = typename decltype(stag)::type;
    dispatch(dst_dtype, [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      const S* s = static_cast<const S*>(src);
      D* d = static_cast<D*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = convert<D>(s[i]);
    });
  });
}

void copy_strided(const array& src, array& dst, const Strides& dst_strides, int64_t dst_offset) {
  if (src.size() == 0) return;
  auto layout = collapse<2>(src.shape(), {broadcast_strides(src, src.shape()), dst_strides});
  dispatch(src.dtype(), [&](auto stag) {
    using S = typename decltype(stag)::type;
    dispatch(dst.dtype(), [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      const S* in = src.data<S>();
      D* out = dst.data<D>() + dst_offset;
      parallel_for(src.size(), kGrain, [&](size_t b, size_t e) {
        for_each_run<2>(layout, b, e, [&](auto off, int64_t n, auto st) {
          const S* s = in + off[0];
          D* d = out + off[1];
          if (st[0] == 1 && st[1] == 1) {
            if constexpr (std::is_same_v<S, D>) {
              std::memcpy(d, s, n * sizeof(S));
            } else {
              for (int64_t i = 0; i < n; ++i) d[i] = convert<D>(s[i]);
            }
          } else {
            for (int64_t i = 0; i < n; ++i) d[i * st[1]] = convert<D>(s[i * st[0]]);
          }
        });
      });
    });
  });
}

void copy_contiguous(const array& src, array& dst) {
  dst.set_data(allocator::allocate(dst.nbytes()));
  copy_strided(src, dst, row_major_strides(dst.shape()), 0);
}

array ensure_row_contiguous(const array& a) {
  if (a.flags().row_contiguous) return a;
  array out = array::empty(a.shape(), a.dtype());
  copy_contiguous(a, out);
  out.set_status(Status::available);
  return out;
}

} // namespace loom::cpu
