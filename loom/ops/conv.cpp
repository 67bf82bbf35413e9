// Convolution ops: MLX's argument rules and messages, then one Convolution
// primitive (primitives/conv.h) for every form.
#include "loom/ops/conv.h"

#include <stdexcept>
#include <string>

#include "loom/dtype.h"
#include "loom/ops/creation.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/primitives/conv.h"

namespace loom {

namespace {

// "(1,2)": the tuple form MLX's messages use.
std::string tuple_string(const std::vector<int>& v) {
  std::string out = "(";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + ")";
}

std::string dims_string(int nd) { return std::to_string(nd) + "D convolution."; }

// An empty or single-value argument stands for every spatial axis.
void broadcast_arg(std::vector<int>& v, int nd, int fill) {
  if (v.size() <= 1) v = std::vector<int>(nd, v.empty() ? fill : v[0]);
}

void check_positive(const std::vector<int>& v, const char* what, const char* plural) {
  for (int x : v) {
    if (x <= 0) {
      throw std::invalid_argument(std::string("[conv] ") + what + " sizes must be positive. Got " +
                                  plural + " " + tuple_string(v) + ".");
    }
  }
}

int64_t dilated(int64_t n, int64_t d) { return n == 0 ? 0 : (n - 1) * d + 1; }

} // namespace

array conv_general(const array& input, const array& weight, std::vector<int> stride,
                   std::vector<int> padding_lo, std::vector<int> padding_hi,
                   std::vector<int> kernel_dilation, std::vector<int> input_dilation, int groups,
                   bool flip, StreamOrDevice s) {
  if (input.ndim() == 5 && groups != 1) {
    throw std::invalid_argument("[conv] Can only handle groups != 1 in 1D or 2D convolutions.");
  }
  if (groups < 1) {
    // MLX divides by it unchecked (a floating point exception).
    throw std::invalid_argument("[conv] The number of groups must be positive. Got " +
                                std::to_string(groups) + " groups.");
  }
  if (groups != 1 && input.ndim() > 0 && input.shape(-1) % groups != 0) {
    throw std::invalid_argument(
        "[conv] The input channels must be divisible by the number of groups. Got input with "
        "shape " +
        shape_to_string(input.shape()) + " and " + std::to_string(groups) + " groups.");
  }
  const int nd = input.ndim() - 2;
  if (nd < 1 || nd > 3) {
    throw std::invalid_argument(
        "[conv] Only works for inputs with 1-3 spatial dimensions. The inputs must be in the "
        "format [N, ..., C_in]");
  }
  broadcast_arg(stride, nd, 1);
  broadcast_arg(padding_lo, nd, 0);
  broadcast_arg(padding_hi, nd, 0);
  broadcast_arg(kernel_dilation, nd, 1);
  broadcast_arg(input_dilation, nd, 1);
  if (static_cast<int>(stride.size()) != nd) {
    throw std::invalid_argument("[conv] Invalid strides " + tuple_string(stride) + " for " +
                                dims_string(nd));
  }
  if (static_cast<int>(padding_lo.size()) != nd || static_cast<int>(padding_hi.size()) != nd) {
    throw std::invalid_argument("[conv] Invalid padding " + tuple_string(padding_lo) + " | " +
                                tuple_string(padding_hi) + " for " + dims_string(nd));
  }
  if (static_cast<int>(kernel_dilation.size()) != nd) {
    throw std::invalid_argument("[conv] Invalid kernel dilation " + tuple_string(kernel_dilation) +
                                " for " + dims_string(nd));
  }
  if (static_cast<int>(input_dilation.size()) != nd) {
    throw std::invalid_argument("[conv] Invalid input dilation " + tuple_string(input_dilation) +
                                " for " + dims_string(nd));
  }
  // Negative padding crops the input, as MLX does, before anything else
  // looks at its shape.
  array in = input;
  bool crop = false;
  Shape start(in.ndim(), 0), stop = in.shape(), steps(in.ndim(), 1);
  for (int i = 0; i < nd; ++i) {
    if (padding_lo[i] < 0) {
      start[i + 1] = std::min<int64_t>(-padding_lo[i], in.shape(i + 1));
      padding_lo[i] = 0;
      crop = true;
    }
    if (padding_hi[i] < 0) {
      stop[i + 1] = std::max<int64_t>(start[i + 1], in.shape(i + 1) + padding_hi[i]);
      padding_hi[i] = 0;
      crop = true;
    }
  }
  if (crop) in = slice(in, start, stop, steps, s);
  if (!is_floating_point(in.dtype())) {
    throw std::invalid_argument("[conv] Invalid input array with type " + dtype_name(in.dtype()) +
                                ". Convolution currently only supports floating point types");
  }
  if (weight.ndim() != in.ndim()) {
    throw std::invalid_argument(
        "[conv] Invalid weight array with " + std::to_string(weight.ndim()) + " dimensions for " +
        std::to_string(nd) + "D convolution. Expected an array with " + std::to_string(nd + 2) +
        " dimensions following the format [C_out, ..., C_in].");
  }
  if (in.shape(-1) != weight.shape(-1) * groups) {
    throw std::invalid_argument(
        "[conv] Expect the input channels in the input and weight array to match but got "
        "shapes - input: " +
        shape_to_string(in.shape()) + " and weight: " + shape_to_string(weight.shape()));
  }
  if (groups > 1 && weight.shape(0) % groups != 0) {
    throw std::invalid_argument(
        "[conv] If groups > 1, the output channels must be divisible by the number of groups. "
        "Got " +
        std::to_string(weight.shape(0)) + " output channels and " + std::to_string(groups) +
        " groups.");
  }
  const Dtype dtype = promote_types(in.dtype(), weight.dtype());
  if (!is_floating_point(dtype)) {
    throw std::invalid_argument("[conv] Invalid weight array with type " +
                                dtype_name(weight.dtype()) +
                                ". Convolution currently only supports floating point types");
  }
  check_positive(stride, "Stride", "strides");
  check_positive(kernel_dilation, "Kernel dilation", "kernel dilation");
  check_positive(input_dilation, "Input dilation", "input dilation");
  for (int i = 0; i < nd; ++i) {
    const int64_t span =
        dilated(in.shape(i + 1), input_dilation[i]) + padding_lo[i] + padding_hi[i];
    if (span < dilated(weight.shape(i + 1), kernel_dilation[i])) {
      throw std::invalid_argument(
          "[conv] Spatial dimensions of input after padding cannot be smaller than weight "
          "spatial dimensions. Got error at axis " +
          std::to_string(i + 1) + " for input with shape " + shape_to_string(in.shape()) +
          ", padding low " + tuple_string(padding_lo) + ", padding high " +
          tuple_string(padding_hi) + ", and weight of shape " + shape_to_string(weight.shape()) +
          ".");
    }
  }
  array x = in.dtype() == dtype ? in : astype(in, dtype, s);
  array w = weight.dtype() == dtype ? weight : astype(weight, dtype, s);
  ConvParams p{std::move(stride),
               std::move(padding_lo),
               std::move(padding_hi),
               std::move(kernel_dilation),
               std::move(input_dilation),
               groups,
               flip};
  return make_convolution(x, w, std::move(p), to_stream(s));
}

array conv1d(const array& input, const array& weight, int stride, int padding, int dilation,
             int groups, StreamOrDevice s) {
  return conv_general(input, weight, {stride}, {padding}, {padding}, {dilation}, {1}, groups, false,
                      s);
}

array conv2d(const array& input, const array& weight, const std::vector<int>& stride,
             const std::vector<int>& padding, const std::vector<int>& dilation, int groups,
             StreamOrDevice s) {
  return conv_general(input, weight, stride, padding, padding, dilation, {1}, groups, false, s);
}

array conv3d(const array& input, const array& weight, const std::vector<int>& stride,
             const std::vector<int>& padding, const std::vector<int>& dilation, int groups,
             StreamOrDevice s) {
  return conv_general(input, weight, stride, padding, padding, dilation, {1}, groups, false, s);
}

array conv_transpose_general(const array& input, const array& weight, std::vector<int> stride,
                             std::vector<int> padding, std::vector<int> dilation,
                             std::vector<int> output_padding, int groups, StreamOrDevice s) {
  if (input.ndim() == 5 && groups != 1) {
    throw std::invalid_argument("[conv] Can only handle groups != 1 in 1D or 2D convolutions.");
  }
  const int nd = input.ndim() - 2;
  if (nd < 1 || nd > 3) {
    throw std::invalid_argument(
        "[conv] Only works for inputs with 1-3 spatial dimensions. The inputs must be in the "
        "format [N, ..., C_in]");
  }
  if (weight.ndim() != input.ndim()) {
    throw std::invalid_argument(
        "[conv] Invalid weight array with " + std::to_string(weight.ndim()) + " dimensions for " +
        std::to_string(nd) + "D convolution. Expected an array with " + std::to_string(nd + 2) +
        " dimensions following the format [C_out, ..., C_in].");
  }
  broadcast_arg(stride, nd, 1);
  broadcast_arg(padding, nd, 0);
  broadcast_arg(dilation, nd, 1);
  broadcast_arg(output_padding, nd, 0);
  std::vector<int> lo(nd), hi(nd);
  for (int i = 0;
       i < nd && i < static_cast<int>(padding.size()) && i < static_cast<int>(dilation.size()) &&
       i < static_cast<int>(output_padding.size());
       ++i) {
    // The transposed convolution is a convolution of the stride-dilated input
    // with the flipped kernel, padded by the kernel's reach less `padding`.
    const int reach = dilation[i] * static_cast<int>(weight.shape(i + 1) - 1);
    lo[i] = reach - padding[i];
    hi[i] = reach - padding[i] + output_padding[i];
  }
  return conv_general(input, weight, {1}, lo, hi, dilation, stride, groups, true, s);
}

array conv_transpose1d(const array& input, const array& weight, int stride, int padding,
                       int dilation, int output_padding, int groups, StreamOrDevice s) {
  return conv_transpose_general(input, weight, {stride}, {padding}, {dilation}, {output_padding},
                                groups, s);
}

array conv_transpose2d(const array& input, const array& weight, const std::vector<int>& stride,
                       const std::vector<int>& padding, const std::vector<int>& dilation,
                       const std::vector<int>& output_padding, int groups, StreamOrDevice s) {
  return conv_transpose_general(input, weight, stride, padding, dilation, output_padding, groups,
                                s);
}

array conv_transpose3d(const array& input, const array& weight, const std::vector<int>& stride,
                       const std::vector<int>& padding, const std::vector<int>& dilation,
                       const std::vector<int>& output_padding, int groups, StreamOrDevice s) {
  return conv_transpose_general(input, weight, stride, padding, dilation, output_padding, groups,
                                s);
}

array convolve(const array& a, const array& v, const std::string& mode, StreamOrDevice s) {
  if (a.ndim() != 1 || v.ndim() != 1) {
    throw std::invalid_argument("[convolve] Inputs must be 1D.");
  }
  if (a.size() == 0 || v.size() == 0) {
    throw std::invalid_argument("[convolve] Inputs cannot be empty.");
  }
  // NumPy slides the shorter input over the longer one.
  const bool swap = a.size() < v.size();
  const array& in = swap ? v : a;
  const array& k = swap ? a : v;
  const int n = static_cast<int>(k.size());
  int lo = 0;
  int hi = 0;
  if (mode == "full") {
    lo = hi = n - 1;
  } else if (mode == "same") {
    // An even kernel puts its extra tap on the left, as NumPy does.
    lo = n / 2;
    hi = n % 2 ? n / 2 : std::max(0, n / 2 - 1);
  } else if (mode != "valid") {
    throw std::invalid_argument("[convolve] Invalid mode.");
  }
  array x = reshape(in, {1, static_cast<int>(in.size()), 1}, s);
  array w = reshape(k, {1, n, 1}, s);
  array out = conv_general(x, w, {1}, {lo}, {hi}, {1}, {1}, 1, /*flip=*/true, s);
  return reshape(out, {out.shape(1)}, s);
}

} // namespace loom
