// CPU kernels of the view family: buffer sharing for View, AsStrided and
// Depends; table-free bit manipulation for the float8 conversions.
#include "loom/primitives/view.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/shape.h"
#include "loom/types/dispatch.h"

namespace loom {

void View::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  const size_t bytes = in.data_size() * in.itemsize();
  Flags flags;
  out.copy_shared_buffer(in, row_major_strides(out.shape()), flags, bytes / out.itemsize(), 0);
}

void AsStrided::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  make_view(in, outputs[0], strides_, offset_);
}

void Depends::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  for (int i = 0; i < count_; ++i) outputs[i].copy_shared_buffer(inputs[i]);
}

namespace {

// float32 -> e4m3 (bias 7, no infinities, 0x7F the NaN): round to nearest
// even on the float's bits; magnitudes past 448 saturate to 448 and NaN
// becomes 448 too, MLX's results.
uint8_t fp8_from_float(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  uint32_t mag = bits & 0x7FFFFFFF;
  if (mag >= 0x43E00000u) return sign | 0x7E; // >= 448 (and inf, NaN): saturate
  if (mag < 0x3C800000u) {
    // Below 2^-6: subnormal e4m3, a multiple of 2^-9; round |x| * 2^9.
    float scaled = std::fabs(x) * 512.0f;
    float r = std::nearbyint(scaled); // the default mode rounds half to even
    return sign | static_cast<uint8_t>(r);
  }
  // Normal: keep 3 mantissa bits, round half to even on the 20 dropped.
  const uint32_t lsb = (mag >> 20) & 1;
  mag += 0x7FFFF + lsb;
  const uint32_t exp = (mag >> 23) - 127 + 7;
  const uint32_t man = (mag >> 20) & 7;
  uint32_t code = (exp << 3) | man;
  if (code > 0x7E) code = 0x7E;
  return sign | static_cast<uint8_t>(code);
}

float fp8_to_float(uint8_t v) {
  const float sign = (v & 0x80) ? -1.0f : 1.0f;
  const int exp = (v >> 3) & 0xF;
  const int man = v & 7;
  if (exp == 0xF && man == 7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), -9);
  return sign * std::ldexp(1.0f + man / 8.0f, exp - 7);
}

} // namespace

void ToFP8::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  uint8_t* dst = out.data<uint8_t>();
  const size_t n = out.size();
  dispatch(in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16_t> ||
                  std::is_same_v<T, bfloat16_t>) {
      const T* src = in.data<T>();
      cpu::parallel_for(n, 1 << 16, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) dst[i] = fp8_from_float(static_cast<float>(src[i]));
      });
    }
  });
}

void FromFP8::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  float table[256];
  for (int i = 0; i < 256; ++i) table[i] = fp8_to_float(static_cast<uint8_t>(i));
  const uint8_t* src = in.data<uint8_t>();
  const size_t n = out.size();
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16_t> ||
                  std::is_same_v<T, bfloat16_t>) {
      T* dst = out.data<T>();
      cpu::parallel_for(n, 1 << 16, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) dst[i] = static_cast<T>(table[src[i]]);
      });
    }
  });
}

} // namespace loom
