// CPU kernels of the shape primitives: views and conversions.
#include "loom/primitives/shape.h"

#include <cmath>
#include <complex>
#include <limits>
#include <type_traits>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/strided.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"

namespace loom {

namespace {

constexpr size_t kGrain = 1 << 16;

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>;

// Float to integer with C's truncation where the value fits. Where it does
// not (and for NaN) C leaves the result undefined; Loom pins it to what the
// x86 conversion instructions give, which is what MLX's CPU build returns:
// the "integer indefinite" minimum for 32- and 64-bit signed targets, the low
// bits of the 32-bit (narrow targets) or 64-bit (uint32) conversion otherwise.
template <typename To, typename F>
inline To float_to_integer(F v) {
  if constexpr (std::is_same_v<To, int64_t>) {
    constexpr F lo = static_cast<F>(-9223372036854775808.0);
    if (v >= lo && v < -lo) return static_cast<int64_t>(v);
    return std::numeric_limits<int64_t>::min();
  } else if constexpr (std::is_same_v<To, int32_t>) {
    if (v >= F(-2147483648.0) && v < F(2147483648.0)) return static_cast<int32_t>(v);
    return std::numeric_limits<int32_t>::min();
  } else if constexpr (std::is_same_v<To, uint32_t>) {
    return static_cast<uint32_t>(float_to_integer<int64_t>(v));
  } else if constexpr (std::is_same_v<To, uint64_t>) {
    constexpr F two63 = static_cast<F>(9223372036854775808.0);
    if (v >= two63) return v < two63 * F(2) ? static_cast<uint64_t>(v) : uint64_t{0};
    return static_cast<uint64_t>(float_to_integer<int64_t>(v));
  } else {
    // int8, int16, uint8, uint16: wrap the 32-bit result.
    return static_cast<To>(float_to_integer<int32_t>(v));
  }
}

template <typename To, typename From>
inline To cast_value(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, complex64_t>) {
    if constexpr (std::is_same_v<To, bool>)
      return v != complex64_t(0.0f);
    else
      return cast_value<To>(v.real());
  } else if constexpr (is_half_v<From>) {
    return cast_value<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, complex64_t>) {
    return complex64_t(static_cast<float>(v), 0.0f);
  } else if constexpr (is_half_v<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return float_to_integer<To>(v);
  } else {
    return static_cast<To>(v); // integer wrap-around (C++20) or exact widening
  }
}

// out[i] = cast(in[i]) for a dense range; `out` may alias `in` exactly.
template <typename S, typename D>
void convert_dense(const S* in, D* out, size_t n) {
  cpu::parallel_for(n, kGrain, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) out[i] = cast_value<D>(in[i]);
  });
}

} // namespace

// Views -------------------------------------------------------------------------

void Reshape::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  if (auto strides = reshape_strides(in.shape(), in.strides(), out.shape())) {
    make_view(in, out, std::move(*strides));
  } else {
    // Row-major order of the input is the output's order.
    out.set_data(allocator::allocate(out.nbytes()));
    cpu::copy_strided(in, out, row_major_strides(in.shape()), 0);
  }
}

void Transpose::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  Strides strides(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) strides[i] = in.strides()[axes_[i]];
  make_view(in, outputs[0], std::move(strides));
}

void Broadcast::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  make_view(inputs[0], outputs[0], cpu::broadcast_strides(inputs[0], outputs[0].shape()));
}

void ExpandDims::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  const Shape& shape = outputs[0].shape();
  Strides strides(shape.size());
  size_t next_in = in.ndim();
  size_t next_axis = axes_.size();
  // Walk from the back so an inserted axis gets the stride a packed layout
  // would give it (any stride is valid for a size-1 axis).
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (next_axis > 0 && axes_[next_axis - 1] == d) {
      --next_axis;
      strides[d] = d + 1 < static_cast<int>(shape.size())
                       ? strides[d + 1] * std::max<int64_t>(shape[d + 1], 1)
                       : 1;
    } else {
      strides[d] = in.strides()[--next_in];
    }
  }
  make_view(in, outputs[0], std::move(strides));
}

void Squeeze::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  Strides strides;
  size_t next_axis = 0;
  for (int d = 0; d < in.ndim(); ++d) {
    if (next_axis < axes_.size() && axes_[next_axis] == d) {
      ++next_axis;
    } else {
      strides.push_back(in.strides()[d]);
    }
  }
  make_view(in, outputs[0], std::move(strides));
}

// Copies ------------------------------------------------------------------------

void AsType::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array& in = inputs[0];
  array& out = outputs[0];
  if (in.dtype() == out.dtype()) {
    out.copy_shared_buffer(in);
    return;
  }
  dispatch(in.dtype(), [&](auto stag) {
    using S = typename decltype(stag)::type;
    dispatch(out.dtype(), [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      if (in.flags().contiguous) {
        // Dense input: convert its block in order and keep its layout.
        if (in.is_donatable() && in.itemsize() == out.itemsize() && !out.is_tracer()) {
          out.copy_shared_buffer(in);
        } else {
          out.set_data(allocator::allocate(in.data_size() * out.itemsize()), in.data_size(),
                       in.strides(), in.flags());
        }
        convert_dense(in.data<S>(), out.data<D>(), in.data_size());
        return;
      }
      out.set_data(allocator::allocate(out.nbytes()));
      auto layout = cpu::collapse<2>(
          in.shape(), {cpu::broadcast_strides(in, in.shape()), row_major_strides(in.shape())});
      const S* src = in.data<S>();
      D* dst = out.data<D>();
      cpu::parallel_for(in.size(), kGrain, [&](size_t b, size_t e) {
        cpu::for_each_run<2>(layout, b, e, [&](auto off, int64_t n, auto st) {
          const S* s = src + off[0];
          D* d = dst + off[1];
          for (int64_t i = 0; i < n; ++i) d[i * st[1]] = cast_value<D>(s[i * st[0]]);
        });
      });
    });
  });
}

void Copy::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  cpu::copy_contiguous(inputs[0], outputs[0]);
}

} // namespace loom
