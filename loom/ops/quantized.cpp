// Argument checks (MLX 0.32.4's messages, in its order) and node building
// for the quantization ops; gather_qmm flattens the batch axes and gathers
// by index inside one node; qqmm quantizes x on the fly.
#include "loom/ops/quantized.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/linalg.h"
#include "loom/ops/shape.h"
#include "loom/ops/utils.h"
#include "loom/primitives/quantized.h"

namespace loom {

namespace {

struct QuantParams {
  int group_size;
  int bits;
  QuantizationMode mode;
};

std::string op_tag(const char* op) { return std::string("[") + op + "] "; }

// The defaults of a mode for the values not given.
QuantParams default_params(std::optional<int> group_size, std::optional<int> bits,
                           const std::string& mode_name, const char* op) {
  QuantizationMode mode = parse_quantization_mode(mode_name, op);
  QuantParams p{64, 4, mode};
  switch (mode) {
    case QuantizationMode::affine:
      p = {group_size.value_or(64), bits.value_or(4), mode};
      break;
    case QuantizationMode::mxfp4:
      p = {group_size.value_or(32), bits.value_or(4), mode};
      break;
    case QuantizationMode::mxfp8:
      p = {group_size.value_or(32), bits.value_or(8), mode};
      break;
    case QuantizationMode::nvfp4:
      p = {group_size.value_or(16), bits.value_or(4), mode};
      break;
  }
  return p;
}

// MLX's checks of the requested values.
void check_params(const QuantParams& p, const char* op) {
  const QuantizationMode mode = p.mode;
  if (mode == QuantizationMode::affine) {
    if (p.group_size != 32 && p.group_size != 64 && p.group_size != 128) {
      throw std::invalid_argument(op_tag(op) + "The requested group size " +
                                  std::to_string(p.group_size) +
                                  " is not supported. The supported group sizes are 32, 64, "
                                  "and 128.");
    }
    if (p.bits < 1 || p.bits > 8 || p.bits == 7) {
      throw std::invalid_argument(op_tag(op) + "The requested number of bits " +
                                  std::to_string(p.bits) +
                                  " is not supported. The supported bits are 1, 2, 3, 4, 5, 6 "
                                  "and 8.");
    }
    return;
  }
  const int want_group = mode == QuantizationMode::nvfp4 ? 16 : 32;
  const int want_bits = mode == QuantizationMode::mxfp8 ? 8 : 4;
  const std::string name = quantization_mode_name(mode);
  if (p.group_size != want_group) {
    throw std::invalid_argument(op_tag(op) + name + " quantization requires group size " +
                                std::to_string(want_group) + " but got " +
                                std::to_string(p.group_size) + ".");
  }
  if (p.bits != want_bits) {
    throw std::invalid_argument(op_tag(op) + name + " quantization requires bits to be " +
                                std::to_string(want_bits) + " but got " + std::to_string(p.bits) +
                                ".");
  }
}

// Defaults per mode, then the checks (affine's only with `check_affine`).
QuantParams resolve_params(std::optional<int> group_size, std::optional<int> bits,
                           const std::string& mode_name, const char* op, bool check_affine) {
  QuantParams p = default_params(group_size, bits, mode_name, op);
  if (p.mode != QuantizationMode::affine || check_affine) check_params(p, op);
  return p;
}

void check_biases(const QuantParams& p, const std::optional<array>& biases, const char* op) {
  if (p.mode == QuantizationMode::affine && !biases) {
    throw std::invalid_argument(op_tag(op) + "Biases must be provided for affine quantization.");
  }
  if (p.mode != QuantizationMode::affine && biases) {
    throw std::invalid_argument(op_tag(op) + "Biases must be null for quantization mode '" +
                                quantization_mode_name(p.mode) + "'.");
  }
}

void check_global_scale(const QuantParams& p, const std::optional<array>& global_scale,
                        const char* op) {
  if (!global_scale) return;
  if (p.mode != QuantizationMode::nvfp4) {
    throw std::invalid_argument(op_tag(op) +
                                "Global scale is only supported for 'nvfp4' quantization mode.");
  }
  if (global_scale->size() != 1) {
    throw std::invalid_argument(op_tag(op) + "The global scale must hold one value but has shape " +
                                shape_to_string(global_scale->shape()) + ".");
  }
}

void check_scale_dtype(const QuantParams& p, const array& scales, const char* op) {
  if (p.mode != QuantizationMode::affine && scales.dtype() != uint8) {
    throw std::invalid_argument(op_tag(op) + "Scale type must be uint8 but received type " +
                                dtype_name(scales.dtype()) + ".");
  }
}

bool is_half_or_single(Dtype d) { return d == float32 || d == float16 || d == bfloat16; }

array as_float32_scalar(const array& g, StreamOrDevice s) {
  return reshape(astype(g, float32, s), {}, s);
}

} // namespace

std::vector<array> quantize(const array& w, std::optional<int> group_size, std::optional<int> bits,
                            const std::string& mode, const std::optional<array>& global_scale,
                            StreamOrDevice s) {
  // MLX's order: the matrix (rank, type, divisibility), then the parameters.
  QuantParams p = default_params(group_size, bits, mode, "quantize");
  if (w.ndim() < 2) {
    throw std::invalid_argument(
        "[quantize] The matrix to be quantized must have at least 2 dimension but it has only " +
        std::to_string(w.ndim()) + ".");
  }
  if (!is_floating_point(w.dtype())) {
    throw std::invalid_argument(
        "[quantize] Only real floating types can be quantized but w has "
        "type " +
        dtype_name(w.dtype()) + ".");
  }
  if (!is_half_or_single(w.dtype())) {
    throw std::invalid_argument(
        "[quantize] Only float32, float16 and bfloat16 can be quantized "
        "but w has type " +
        dtype_name(w.dtype()) + ".");
  }
  if (w.shape(-1) % p.group_size != 0) {
    throw std::invalid_argument(
        "[quantize] The last dimension of the matrix needs to be divisible by the quantization "
        "group size " +
        std::to_string(p.group_size) + ". However the provided  matrix has shape " +
        shape_to_string(w.shape()));
  }
  check_params(p, "quantize");
  check_global_scale(p, global_scale, "quantize");
  std::vector<array> inputs = {w};
  if (global_scale) inputs.push_back(as_float32_scalar(*global_scale, s));
  auto prim = std::make_shared<Quantize>(to_stream(s), p.group_size, p.bits, p.mode);
  auto shapes = prim->output_shapes(inputs);
  std::vector<Dtype> dtypes = {uint32, p.mode == QuantizationMode::affine ? w.dtype() : uint8};
  if (p.mode == QuantizationMode::affine) dtypes.push_back(w.dtype());
  return array::make_arrays(std::move(shapes), dtypes, prim, std::move(inputs));
}

array dequantize(const array& w, const array& scales, const std::optional<array>& biases,
                 std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
                 const std::optional<array>& global_scale, std::optional<Dtype> dtype,
                 StreamOrDevice s) {
  QuantParams p = resolve_params(group_size, bits, mode, "dequantize", false);
  check_scale_dtype(p, scales, "dequantize");
  check_biases(p, biases, "dequantize");
  check_global_scale(p, global_scale, "dequantize");
  if (w.dtype() != uint32) {
    throw std::invalid_argument("[dequantize] The matrix should be given as a uint32");
  }
  if (w.ndim() < 2) {
    throw std::invalid_argument(
        "[dequantize] The matrix to be dequantized must have at least 2 "
        "dimension but it has only " +
        std::to_string(w.ndim()) + ".");
  }
  Dtype out_dtype = bfloat16;
  if (dtype) {
    out_dtype = *dtype;
  } else if (p.mode == QuantizationMode::affine) {
    out_dtype = promote_types(scales.dtype(), biases->dtype());
  }
  if (!is_floating_point(out_dtype)) {
    throw std::invalid_argument(
        "[dequantize] Only real floating types are supported but output dtype == " +
        dtype_name(out_dtype) + ".");
  }
  // MLX 0.32.4 promotes the result with the float32 global scale: a half
  // dtype request still returns float32 (the values of dtype=float32).
  if (global_scale) out_dtype = promote_types(out_dtype, float32);
  Shape expect = w.shape();
  const bool bits_ok = (static_cast<int64_t>(w.shape(-1)) * 32) % p.bits == 0;
  expect.back() =
      bits_ok ? static_cast<int>(int64_t{w.shape(-1)} * 32 / p.bits / p.group_size) : -1;
  if (scales.shape() != expect || (biases && biases->shape() != expect) || !bits_ok ||
      (int64_t{w.shape(-1)} * 32 / p.bits) % p.group_size != 0) {
    throw std::invalid_argument(
        "[dequantize] Shape of scales and biases does not match the matrix given the "
        "quantization parameters. Provided matrix of shape " +
        shape_to_string(w.shape()) + " and scales/biases of shape " +
        shape_to_string(scales.shape()) + " with group_size=" + std::to_string(p.group_size) +
        " and bits=" + std::to_string(p.bits) + ".");
  }
  std::vector<array> inputs = {w, scales};
  if (biases) {
    if (!is_floating_point(scales.dtype())) {
      throw std::invalid_argument(
          "[dequantize] Scales must be floating point for affine "
          "quantization but have type " +
          dtype_name(scales.dtype()) + ".");
    }
    // The kernel computes in the scales' type (float64 through float32, which
    // holds every value a code times a scale can take to float32's precision);
    // biases follow it.
    Dtype compute = scales.dtype() == float64 ? float32 : scales.dtype();
    if (compute != scales.dtype()) inputs[1] = astype(scales, compute, s);
    inputs.push_back(biases->dtype() == compute ? *biases : astype(*biases, compute, s));
  }
  if (global_scale) inputs.push_back(as_float32_scalar(*global_scale, s));
  auto prim = std::make_shared<Dequantize>(to_stream(s), p.group_size, p.bits, p.mode, out_dtype);
  Shape out_shape = prim->output_shapes(inputs)[0];
  return array(std::move(out_shape), out_dtype, prim, std::move(inputs));
}

namespace {

// The checks quantized_matmul and gather_qmm share; returns the output dtype.
Dtype check_qmm(const array& x, const array& w, const array& scales,
                const std::optional<array>& biases, bool transpose, const QuantParams& p,
                const char* op) {
  if (w.dtype() != uint32) {
    throw std::invalid_argument(op_tag(op) + "The weight matrix should be uint32 but received " +
                                dtype_name(w.dtype()));
  }
  check_biases(p, biases, op);
  check_scale_dtype(p, scales, op);
  if (biases && biases->shape() != scales.shape()) {
    throw std::invalid_argument(op_tag(op) +
                                "Scales and biases should have the same shape. Received scales "
                                "with shape " +
                                shape_to_string(scales.shape()) + " and biases with " +
                                shape_to_string(biases->shape()));
  }
  if (w.ndim() < 2 || scales.ndim() != w.ndim() ||
      !std::equal(w.shape().begin(), w.shape().end() - 2, scales.shape().begin())) {
    throw std::invalid_argument(op_tag(op) +
                                "Weight and scales should have the same batch shape. Received "
                                "weight with shape " +
                                shape_to_string(w.shape()) + ", scales with " +
                                shape_to_string(scales.shape()) + ".");
  }
  if (int64_t{w.shape(-1)} * 32 != int64_t{scales.shape(-1)} * p.group_size * p.bits ||
      w.shape(-2) != scales.shape(-2)) {
    throw std::invalid_argument(
        op_tag(op) +
        "The shapes of the weight and scales are incompatible based on bits and group_size. "
        "w.shape() == " +
        shape_to_string(w.shape()) + " and scales.shape() == " + shape_to_string(scales.shape()) +
        " with group_size=" + std::to_string(p.group_size) + " and bits=" + std::to_string(p.bits));
  }
  if (x.ndim() == 0) {
    throw std::invalid_argument(op_tag(op) + "The input must have at least 1 dimension.");
  }
  const int64_t wk = int64_t{w.shape(-1)} * 32 / p.bits;
  const int64_t K = transpose ? wk : w.shape(-2);
  const int64_t N = transpose ? w.shape(-2) : wk;
  if (x.shape(-1) != K) {
    throw std::invalid_argument(
        op_tag(op) + "Last dimension of first input with shape (..., " +
        std::to_string(x.shape(-1)) + ") does not match the expanded quantized matrix (" +
        std::to_string(K) + ", " + std::to_string(N) + ") computed from shape " +
        shape_to_string(w.shape()) + " with group_size=" + std::to_string(p.group_size) +
        ", bits=" + std::to_string(p.bits) + " and transpose=" + (transpose ? "true" : "false"));
  }
  Dtype dtype = x.dtype();
  if (p.mode == QuantizationMode::affine) {
    dtype = promote_types(promote_types(x.dtype(), scales.dtype()), biases->dtype());
  }
  if (!is_floating_point(dtype)) {
    throw std::invalid_argument(
        op_tag(op) +
        "Only real floating types are supported but x.dtype() == " + dtype_name(x.dtype()) + ".");
  }
  if (!is_half_or_single(dtype)) {
    throw std::invalid_argument(op_tag(op) +
                                "Only float32, float16 and bfloat16 are supported "
                                "but the product would have type " +
                                dtype_name(dtype) + ".");
  }
  return dtype;
}

std::vector<array> qmm_inputs(const array& x, const array& w, const array& scales,
                              const std::optional<array>& biases, Dtype dtype, const QuantParams& p,
                              StreamOrDevice s) {
  auto cast = [&](const array& a) { return a.dtype() == dtype ? a : astype(a, dtype, s); };
  std::vector<array> in = {cast(x), w, p.mode == QuantizationMode::affine ? cast(scales) : scales};
  if (biases) in.push_back(cast(*biases));
  return in;
}

} // namespace

array quantized_matmul(const array& x_in, const array& w, const array& scales,
                       const std::optional<array>& biases, bool transpose,
                       std::optional<int> group_size, std::optional<int> bits,
                       const std::string& mode, StreamOrDevice s) {
  QuantParams p = resolve_params(group_size, bits, mode, "quantized_matmul", true);
  Dtype dtype = check_qmm(x_in, w, scales, biases, transpose, p, "quantized_matmul");
  // A vector is one row; a stack of rows against one matrix is one tall matrix.
  array x = x_in.ndim() == 1 ? reshape(x_in, {1, x_in.shape(0)}, s) : x_in;
  Shape lead(x.shape().begin(), x.shape().end() - 1);
  const bool fold = w.ndim() == 2 && x.ndim() > 2;
  if (fold) x = reshape(x, {-1, x.shape(-1)}, s);
  std::vector<Shape> batches = {Shape(x.shape().begin(), x.shape().end() - 2),
                                Shape(w.shape().begin(), w.shape().end() - 2)};
  broadcast_shapes(batches); // raises MLX's broadcast error
  auto prim =
      std::make_shared<QuantizedMatmul>(to_stream(s), p.group_size, p.bits, p.mode, transpose);
  std::vector<array> in = qmm_inputs(x, w, scales, biases, dtype, p, s);
  Shape out_shape = prim->output_shapes(in)[0];
  array out(out_shape, dtype, prim, std::move(in));
  if (fold) {
    lead.push_back(out.shape(-1));
    out = reshape(out, lead, s);
  }
  if (x_in.ndim() == 1) out = reshape(out, {out.shape(-1)}, s);
  return out;
}

array gather_qmm(const array& x, const array& w, const array& scales,
                 const std::optional<array>& biases, const std::optional<array>& lhs_indices,
                 const std::optional<array>& rhs_indices, bool transpose,
                 std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
                 const std::optional<array>& global_scale, bool sorted_indices, StreamOrDevice s) {
  if (!lhs_indices && !rhs_indices) {
    return quantized_matmul(x, w, scales, biases, transpose, group_size, bits, mode, s);
  }
  QuantParams p = resolve_params(group_size, bits, mode, "gather_qmm", true);
  check_global_scale(p, global_scale, "gather_qmm");
  if (global_scale) {
    throw std::invalid_argument("[gather_qmm] A global scale is not supported on the CPU.");
  }
  for (const auto* idx : {&lhs_indices, &rhs_indices}) {
    if (*idx && !is_integral((*idx)->dtype())) {
      throw std::invalid_argument(
          "[gather_qmm] Got indices with invalid dtype. Indices must be integral.");
    }
  }
  if (x.ndim() < 2) {
    throw std::invalid_argument(
        "[gather_qmm] The input must have at least 2 dimensions but has "
        "shape " +
        shape_to_string(x.shape()) + ".");
  }
  Dtype dtype = check_qmm(x, w, scales, biases, transpose, p, "gather_qmm");
  Shape x_batch(x.shape().begin(), x.shape().end() - 2);
  Shape w_batch(w.shape().begin(), w.shape().end() - 2);
  auto batch_size = [](const Shape& b) {
    int64_t n = 1;
    for (auto d : b) n *= d;
    return n;
  };
  auto default_indices = [&](const Shape& batch) {
    return reshape(arange(int64_t{0}, batch_size(batch), int64_t{1}, s), batch, s);
  };
  array lhs = lhs_indices ? *lhs_indices : default_indices(x_batch);
  array rhs = rhs_indices ? *rhs_indices : default_indices(w_batch);
  Shape out_batch = broadcast_shapes(lhs.shape(), rhs.shape());
  lhs = astype(flatten(broadcast_to(lhs, out_batch, s), 0, -1, s), uint32, s);
  rhs = astype(flatten(broadcast_to(rhs, out_batch, s), 0, -1, s), uint32, s);
  if (out_batch.empty()) {
    lhs = reshape(lhs, {1}, s);
    rhs = reshape(rhs, {1}, s);
  }
  auto flat3 = [&](const array& a) {
    return reshape(a,
                   {static_cast<int>(batch_size(Shape(a.shape().begin(), a.shape().end() - 2))),
                    a.shape(-2), a.shape(-1)},
                   s);
  };
  std::vector<array> in =
      qmm_inputs(flat3(x), flat3(w), flat3(scales),
                 biases ? std::optional<array>(flat3(*biases)) : std::nullopt, dtype, p, s);
  in.push_back(lhs);
  in.push_back(rhs);
  auto prim = std::make_shared<GatherQMM>(to_stream(s), p.group_size, p.bits, p.mode, transpose);
  Shape flat_shape = prim->output_shapes(in)[0];
  array out(flat_shape, dtype, prim, std::move(in));
  Shape out_shape = out_batch;
  out_shape.push_back(flat_shape[1]);
  out_shape.push_back(flat_shape[2]);
  (void)sorted_indices; // order does not change the CPU kernel's work
  return reshape(out, out_shape, s);
}

namespace {

QuantParams check_qq_mode(std::optional<int> group_size, std::optional<int> bits,
                          const std::string& mode, const char* op) {
  return resolve_params(group_size, bits, mode, op, true);
}

void check_qq_input(const array& a, const char* which, const char* op) {
  if (!is_half_or_single(a.dtype())) {
    throw std::invalid_argument(op_tag(op) +
                                "Only real floating types except float64 are supported but " +
                                which + " argument dtype == " + dtype_name(a.dtype()) + ".");
  }
}

// a quantized and dequantized (the rounding the low-precision product sees),
// with a straight-through gradient: d/da is the identity, so a weight given
// in full precision trains through qqmm (MLX's QQLinear relies on it).
array round_trip(const array& a, const QuantParams& p, const std::optional<array>& global_scale,
                 StreamOrDevice s) {
  auto q = quantize(a, p.group_size, p.bits, quantization_mode_name(p.mode), global_scale, s);
  std::optional<array> b;
  if (q.size() > 2) b = q[2];
  array r = dequantize(q[0], q[1], b, p.group_size, p.bits, quantization_mode_name(p.mode),
                       global_scale, a.dtype(), s);
  return add(a, stop_gradient(subtract(r, a, s), s), s);
}

} // namespace

array qqmm(const array& x, const array& w, const std::optional<array>& scales,
           std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
           const std::optional<array>& global_scale_x, const std::optional<array>& global_scale_w,
           StreamOrDevice s) {
  QuantParams p = check_qq_mode(group_size, bits, mode, "qqmm");
  check_qq_input(x, "first", "qqmm");
  array xq = round_trip(x, p, global_scale_x, s);
  if (scales) {
    if (p.mode == QuantizationMode::affine) {
      throw std::invalid_argument(
          "[qqmm] Affine quantization needs biases: use "
          "quantized_matmul for a quantized affine weight.");
    }
    if (global_scale_w) {
      array wd = dequantize(w, *scales, std::nullopt, p.group_size, p.bits, mode, global_scale_w,
                            x.dtype(), s);
      return matmul(xq, swapaxes(wd, -1, -2, s), s);
    }
    return quantized_matmul(xq, w, *scales, std::nullopt, true, p.group_size, p.bits, mode, s);
  }
  check_qq_input(w, "second", "qqmm");
  array wq = round_trip(w, p, global_scale_w, s);
  return matmul(xq, swapaxes(astype(wq, x.dtype(), s), -1, -2, s), s);
}

array gather_qqmm(const array& x, const array& w, const std::optional<array>& scales,
                  const std::optional<array>& lhs_indices, const std::optional<array>& rhs_indices,
                  std::optional<int> group_size, std::optional<int> bits, const std::string& mode,
                  const std::optional<array>& global_scale_x,
                  const std::optional<array>& global_scale_w, bool sorted_indices,
                  StreamOrDevice s) {
  QuantParams p = check_qq_mode(group_size, bits, mode, "gather_qqmm");
  check_qq_input(x, "first", "gather_qqmm");
  array xq = round_trip(x, p, global_scale_x, s);
  if (global_scale_w) {
    throw std::invalid_argument("[gather_qqmm] A global scale for w is not supported on the CPU.");
  }
  if (scales) {
    return gather_qmm(xq, w, *scales, std::nullopt, lhs_indices, rhs_indices, true, p.group_size,
                      p.bits, mode, std::nullopt, sorted_indices, s);
  }
  check_qq_input(w, "second", "gather_qqmm");
  auto q = quantize(w, p.group_size, p.bits, mode, std::nullopt, s);
  std::optional<array> b;
  if (q.size() > 2) b = q[2];
  return gather_qmm(xq, q[0], q[1], b, lhs_indices, rhs_indices, true, p.group_size, p.bits, mode,
                    std::nullopt, sorted_indices, s);
}

array to_fp8(const array& x, StreamOrDevice s) {
  if (!is_floating_point(x.dtype())) {
    throw std::invalid_argument(
        "[to_fp8] Only real floating types are supported but x.dtype() == " +
        dtype_name(x.dtype()) + ".");
  }
  return array(x.shape(), uint8, std::make_shared<ToFP8>(to_stream(s)), {x});
}

array from_fp8(const array& x, Dtype dtype, StreamOrDevice s) {
  if (x.dtype() != uint8) {
    throw std::invalid_argument(
        "[from_fp8] Input must have type uint8 but x.dtype() == " + dtype_name(x.dtype()) + ".");
  }
  if (!is_floating_point(dtype)) {
    throw std::invalid_argument("[from_fp8] Only real floating types are supported but dtype == " +
                                dtype_name(dtype) + ".");
  }
  return array(x.shape(), dtype, std::make_shared<FromFP8>(to_stream(s), dtype), {x});
}

} // namespace loom
