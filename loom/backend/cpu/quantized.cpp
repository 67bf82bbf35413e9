// CPU kernels of Quantize and Dequantize: one group of a row at a time,
// groups split over the intra-op pool. The arithmetic follows MLX's CPU
// kernels step by step (float32 throughout, the scale of fp modes rounded to
// the input's type first), so codes, scales and biases match its wheel bit
// for bit. This file is built without floating-point contraction (CMake):
// an fma in scale * q + bias would change the last bit.
#include "loom/backend/cpu/quantized.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "loom/allocator/allocator.h"
#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/types/dispatch.h"

namespace loom {

namespace cpu::quant {

namespace {

// Round a float to T's precision and back (identity for float).
template <typename T>
inline float to_t(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return static_cast<float>(T(v));
  }
}

template <typename T>
void affine_group(const T* w, int group_size, int bits, uint32_t* codes, T* scale_out,
                  T* bias_out) {
  const float n_bins = static_cast<float>((1 << bits) - 1);
  const float eps = 1e-7f;
  float w_max = -std::numeric_limits<float>::infinity();
  float w_min = std::numeric_limits<float>::infinity();
  for (int j = 0; j < group_size; ++j) {
    const float v = static_cast<float>(w[j]);
    w_max = std::max(w_max, v);
    w_min = std::min(w_min, v);
  }
  float scale, bias;
  if (bits == 1) {
    // One bit: the plain min/max grid (MLX's choice for this width).
    scale = std::max((w_max - w_min) / n_bins, eps);
    bias = w_min;
  } else {
    // The edge of larger magnitude lands exactly on a code, so a group's
    // extreme value (often the one that matters) survives the round trip.
    const bool mask = std::fabs(w_min) > std::fabs(w_max);
    scale = std::max((w_max - w_min) / n_bins, eps);
    scale = mask ? scale : -scale;
    const float edge = mask ? w_min : w_max;
    const float q0 = std::nearbyint(edge / scale);
    bias = 0.0f;
    if (q0 != 0.0f) {
      scale = edge / q0;
      bias = edge;
    }
  }
  BitWriter out{codes};
  for (int j = 0; j < group_size; ++j) {
    float q = std::nearbyint((static_cast<float>(w[j]) - bias) / scale);
    q = std::min(std::max(q, 0.0f), n_bins);
    if (q != q) q = 0.0f; // a NaN input: converting NaN to an integer is undefined
    out.put(static_cast<uint32_t>(q), bits);
  }
  *scale_out = T(scale);
  *bias_out = T(bias);
}

template <typename T>
void fp_group(const T* w, int group_size, QuantizationMode mode, const float* global_scale,
              uint32_t* codes, uint8_t* scale_out) {
  // A NaN propagates through the maximum, as in MLX's reduction.
  float amax = 0.0f;
  for (int j = 0; j < group_size; ++j) {
    const float v = std::fabs(static_cast<float>(w[j]));
    amax = v != v ? v : std::max(amax, v);
  }
  uint32_t byte;
  float scale;
  // With a global scale, MLX divides by the E4M3 scale in the input's type
  // and multiplies the rounded quotient by 448 * 6 / global_scale in float32
  // (measured on its wheel: rounding the quotient to half precision first
  // moves ~1/1000 of the codes that sit near a tie).
  float factor = 1.0f;
  if (mode == QuantizationMode::nvfp4) {
    if (global_scale != nullptr) {
      factor = 448.0f * 6.0f / *global_scale;
      byte = e4m3_code(to_t<T>(amax / 6.0f) * factor);
    } else {
      byte = e4m3_code(to_t<T>(amax / 6.0f));
    }
    scale = e4m3_value(byte);
  } else {
    const float top = mode == QuantizationMode::mxfp4 ? 6.0f : 448.0f;
    const float raw = to_t<T>(amax / top);
    byte = e8m0_code(raw);
    scale = e8m0_value(byte);
    if (!std::isfinite(raw)) {
      // Measured on the wheel: the byte is 128 from float32 input and 0 from
      // half input; mxfp4 divides by the non-finite value itself, mxfp8 by
      // zero (w / 0: +-inf by sign, 0 / 0 the negative default NaN, a NaN
      // stays itself; E4M3 saturates each with its sign).
      if (!std::is_same_v<T, float>) byte = 0;
      if (mode == QuantizationMode::mxfp8) {
        *scale_out = static_cast<uint8_t>(byte);
        BitWriter out{codes};
        for (int j = 0; j < group_size; ++j) {
          const float v = static_cast<float>(w[j]);
          out.put(v != v ? e4m3_code(v) : (v > 0.0f ? 0x7eu : 0xfeu), 8);
        }
        return;
      }
      scale = raw;
    }
  }
  *scale_out = static_cast<uint8_t>(byte);
  const bool fp8 = mode == QuantizationMode::mxfp8;
  const int bits = fp8 ? 8 : 4;
  BitWriter out{codes};
  for (int j = 0; j < group_size; ++j) {
    float x = 0.0f;
    if (scale != 0.0f) {
      x = static_cast<float>(w[j]) / scale;
      if (global_scale != nullptr) x = to_t<T>(x) * factor;
    }
    out.put(fp8 ? e4m3_code(x) : fp4_code(x), bits);
  }
}

} // namespace

namespace {

// The 32 codes of a run of 32 * BITS bits (BITS words); with BITS a constant
// every shift below is one, and the loop unrolls into straight-line code.
template <int BITS>
inline void unpack32(const uint32_t* w, uint32_t* q) {
  constexpr uint32_t mask = (1u << BITS) - 1u;
#pragma GCC unroll 32
  for (int j = 0; j < 32; ++j) {
    const int bit = j * BITS, word = bit >> 5, off = bit & 31;
    uint64_t pair = w[word];
    if (off + BITS > 32) pair |= static_cast<uint64_t>(w[word + 1]) << 32;
    q[j] = static_cast<uint32_t>(pair >> off) & mask;
  }
}

void unpack32(int bits, const uint32_t* w, uint32_t* q) {
  switch (bits) {
    case 1:
      unpack32<1>(w, q);
      break;
    case 2:
      unpack32<2>(w, q);
      break;
    case 3:
      unpack32<3>(w, q);
      break;
    case 4:
      unpack32<4>(w, q);
      break;
    case 5:
      unpack32<5>(w, q);
      break;
    case 6:
      unpack32<6>(w, q);
      break;
    default:
      unpack32<8>(w, q);
      break;
  }
}

} // namespace

// E4M3 values by code (a table: ldexp per element is a library call).
const float* e4m3_table() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (uint32_t b = 0; b < 256; ++b) t[b] = e4m3_value(b);
    return t;
  }();
  return table.data();
}

template <typename S>
void dequantize_rows_f32(const uint32_t* codes, const S* scales, const S* biases,
                         const float* global_scale, int64_t rows, int64_t cols, int64_t code_stride,
                         int group_size, int bits, QuantizationMode mode, float* out) {
  const int64_t groups = cols / group_size;
  const int blocks = group_size / 32; // every group size is a multiple of 16...
  const int tail = group_size % 32;   // ...and nvfp4's 16 is the only one that is not of 32
  const float* fp8 = e4m3_table();
  uint32_t q[32];
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t* w = codes + r * code_stride;
    float* o = out + r * cols;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t sg = r * groups + g;
      if constexpr (std::is_same_v<S, uint8_t>) {
        float scale;
        if (mode == QuantizationMode::nvfp4) {
          scale = e4m3_value(scales[sg]);
          if (global_scale != nullptr) scale = scale * (*global_scale / (448.0f * 6.0f));
        } else {
          scale = e8m0_value(scales[sg]);
        }
        const bool is_fp8 = mode == QuantizationMode::mxfp8;
        const int width = is_fp8 ? 8 : 4;
        for (int b = 0; b < blocks + (tail ? 1 : 0); ++b) {
          const int n = b < blocks ? 32 : tail;
          if (n == 32) {
            unpack32(width, w, q);
          } else {
            for (int j = 0; j < n; ++j) q[j] = (w[j * width / 32] >> ((j * width) % 32)) & 15u;
          }
          for (int j = 0; j < n; ++j) o[j] = (is_fp8 ? fp8[q[j]] : fp4_value(q[j])) * scale;
          w += n * width / 32;
          o += n;
        }
      } else {
        const float scale = static_cast<float>(scales[sg]);
        const float bias = static_cast<float>(biases[sg]);
        for (int b = 0; b < blocks; ++b) {
          unpack32(bits, w, q);
          for (int j = 0; j < 32; ++j) {
            o[j] = to_t<S>(to_t<S>(static_cast<float>(q[j]) * scale) + bias);
          }
          w += bits;
          o += 32;
        }
      }
    }
  }
}

template void dequantize_rows_f32<float>(const uint32_t*, const float*, const float*, const float*,
                                         int64_t, int64_t, int64_t, int, int, QuantizationMode,
                                         float*);
template void dequantize_rows_f32<float16_t>(const uint32_t*, const float16_t*, const float16_t*,
                                             const float*, int64_t, int64_t, int64_t, int, int,
                                             QuantizationMode, float*);
template void dequantize_rows_f32<bfloat16_t>(const uint32_t*, const bfloat16_t*, const bfloat16_t*,
                                              const float*, int64_t, int64_t, int64_t, int, int,
                                              QuantizationMode, float*);
template void dequantize_rows_f32<uint8_t>(const uint32_t*, const uint8_t*, const uint8_t*,
                                           const float*, int64_t, int64_t, int64_t, int, int,
                                           QuantizationMode, float*);

} // namespace cpu::quant

namespace {

// float32, float16 or bfloat16 (what quantize accepts).
template <typename F>
void dispatch_quantizable(Dtype d, const char* op, F&& f) {
  if (d == float32) {
    f(type_tag<float>{});
  } else if (d == float16) {
    f(type_tag<float16_t>{});
  } else if (d == bfloat16) {
    f(type_tag<bfloat16_t>{});
  } else {
    throw std::invalid_argument(std::string("[") + op + "] unsupported dtype " + dtype_name(d) +
                                ".");
  }
}

} // namespace

void Quantize::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array w = cpu::ensure_row_contiguous(inputs[0]);
  float global_scale = 0.0f;
  const bool has_global = inputs.size() > 1;
  if (has_global) global_scale = cpu::ensure_row_contiguous(inputs[1]).data<float>()[0];
  for (auto& o : outputs) o.set_data(allocator::allocate(o.nbytes()));
  const int64_t groups = static_cast<int64_t>(w.size()) / group_size_;
  const int64_t words = int64_t{group_size_} * bits_ / 32;
  uint32_t* codes = outputs[0].data<uint32_t>();
  dispatch_quantizable(w.dtype(), "quantize", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = w.data<T>();
    const int gs = group_size_;
    const int bits = bits_;
    const QuantizationMode mode = mode_;
    if (mode == QuantizationMode::affine) {
      T* scales = outputs[1].data<T>();
      T* biases = outputs[2].data<T>();
      cpu::parallel_for(groups, 1024, [&](size_t b, size_t e) {
        for (size_t g = b; g < e; ++g) {
          cpu::quant::affine_group(src + g * gs, gs, bits, codes + g * words, scales + g,
                                   biases + g);
        }
      });
    } else {
      uint8_t* scales = outputs[1].data<uint8_t>();
      const float* gsp = has_global ? &global_scale : nullptr;
      cpu::parallel_for(groups, 1024, [&](size_t b, size_t e) {
        for (size_t g = b; g < e; ++g) {
          cpu::quant::fp_group(src + g * gs, gs, mode, gsp, codes + g * words, scales + g);
        }
      });
    }
  });
}

void Dequantize::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array w = cpu::ensure_row_contiguous(inputs[0]);
  const array scales = cpu::ensure_row_contiguous(inputs[1]);
  const bool affine = mode_ == QuantizationMode::affine;
  std::optional<array> biases;
  if (affine) biases = cpu::ensure_row_contiguous(inputs[2]);
  float global_scale = 0.0f;
  const bool has_global = !affine && inputs.size() > 2;
  if (has_global) global_scale = cpu::ensure_row_contiguous(inputs[2]).data<float>()[0];
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  const int64_t code_cols = w.shape(-1);
  const int64_t cols = code_cols * 32 / bits_;
  const int64_t rows = cols == 0 ? 0 : static_cast<int64_t>(out.size()) / cols;
  // Rows in chunks through a float buffer, then into the output's type.
  const size_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1));
  auto run = [&](auto scale_tag) {
    using S = typename decltype(scale_tag)::type;
    const S* sp = scales.data<S>();
    const S* bp = affine ? biases->data<S>() : nullptr;
    const int64_t groups = cols / group_size_;
    dispatch(out.dtype(), [&](auto out_tag) {
      using O = typename decltype(out_tag)::type;
      if constexpr (std::is_floating_point_v<O> || std::is_same_v<O, float16_t> ||
                    std::is_same_v<O, bfloat16_t>) {
        O* op = out.data<O>();
        cpu::parallel_for(rows, grain, [&](size_t b, size_t e) {
          std::vector<float> buf(static_cast<size_t>(cols));
          for (size_t r = b; r < e; ++r) {
            cpu::quant::dequantize_rows_f32<S>(w.data<uint32_t>() + r * code_cols, sp + r * groups,
                                               bp != nullptr ? bp + r * groups : nullptr,
                                               has_global ? &global_scale : nullptr, 1, cols,
                                               code_cols, group_size_, bits_, mode_, buf.data());
            for (int64_t j = 0; j < cols; ++j) op[r * cols + j] = O(buf[j]);
          }
        });
      } else {
        throw std::invalid_argument("[dequantize] unsupported output dtype.");
      }
    });
  };
  if (!affine) {
    run(type_tag<uint8_t>{});
  } else {
    dispatch_quantizable(scales.dtype(), "dequantize", run);
  }
}

void ToFP8::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  uint8_t* o = out.data<uint8_t>();
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16_t> ||
                  std::is_same_v<T, bfloat16_t>) {
      const T* src = x.data<T>();
      cpu::parallel_for(x.size(), 1 << 16, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) {
          o[i] = static_cast<uint8_t>(cpu::quant::e4m3_code(static_cast<float>(src[i])));
        }
      });
    } else {
      throw std::invalid_argument("[to_fp8] unsupported dtype.");
    }
  });
}

void FromFP8::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  const array x = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  const uint8_t* src = x.data<uint8_t>();
  const float* table = cpu::quant::e4m3_table();
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16_t> ||
                  std::is_same_v<T, bfloat16_t>) {
      T* o = out.data<T>();
      cpu::parallel_for(x.size(), 1 << 16, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) o[i] = T(table[src[i]]);
      });
    } else {
      throw std::invalid_argument("[from_fp8] unsupported dtype.");
    }
  });
}

} // namespace loom
