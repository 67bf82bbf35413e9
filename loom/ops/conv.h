// Convolutions in MLX's channels-last layout: input (N, spatial..., C_in),
// weight (C_out, kernel..., C_in / groups); 1 to 3 spatial axes. Floating
// inputs only; the input and weight are promoted to a common type.
#pragma once

#include <string>
#include <vector>

#include "loom/array.h"

namespace loom {

// The general form. Each per-axis argument holds one value per spatial axis,
// or a single value (or none: the default) used for every axis. Negative
// padding crops the input. `flip` turns the kernel around (convolution
// rather than cross-correlation).
array conv_general(const array& input, const array& weight, std::vector<int> stride = {},
                   std::vector<int> padding_lo = {}, std::vector<int> padding_hi = {},
                   std::vector<int> kernel_dilation = {}, std::vector<int> input_dilation = {},
                   int groups = 1, bool flip = false, StreamOrDevice s = {});

array conv1d(const array& input, const array& weight, int stride = 1, int padding = 0,
             int dilation = 1, int groups = 1, StreamOrDevice s = {});
array conv2d(const array& input, const array& weight, const std::vector<int>& stride = {1, 1},
             const std::vector<int>& padding = {0, 0}, const std::vector<int>& dilation = {1, 1},
             int groups = 1, StreamOrDevice s = {});
array conv3d(const array& input, const array& weight, const std::vector<int>& stride = {1, 1, 1},
             const std::vector<int>& padding = {0, 0, 0},
             const std::vector<int>& dilation = {1, 1, 1}, int groups = 1, StreamOrDevice s = {});

// Transposed convolutions (the gradient of conv with respect to its input),
// weight (C_out, kernel..., C_in / groups) as MLX lays it out. Output length
// per axis: (I-1)*stride - 2*padding + dilation*(K-1) + output_padding + 1.
array conv_transpose_general(const array& input, const array& weight, std::vector<int> stride,
                             std::vector<int> padding, std::vector<int> dilation,
                             std::vector<int> output_padding, int groups, StreamOrDevice s = {});
array conv_transpose1d(const array& input, const array& weight, int stride = 1, int padding = 0,
                       int dilation = 1, int output_padding = 0, int groups = 1,
                       StreamOrDevice s = {});
array conv_transpose2d(const array& input, const array& weight,
                       const std::vector<int>& stride = {1, 1},
                       const std::vector<int>& padding = {0, 0},
                       const std::vector<int>& dilation = {1, 1},
                       const std::vector<int>& output_padding = {0, 0}, int groups = 1,
                       StreamOrDevice s = {});
array conv_transpose3d(const array& input, const array& weight,
                       const std::vector<int>& stride = {1, 1, 1},
                       const std::vector<int>& padding = {0, 0, 0},
                       const std::vector<int>& dilation = {1, 1, 1},
                       const std::vector<int>& output_padding = {0, 0, 0}, int groups = 1,
                       StreamOrDevice s = {});

// NumPy's 1-D convolve: mode "full", "same" or "valid".
array convolve(const array& a, const array& v, const std::string& mode = "full",
               StreamOrDevice s = {});

} // namespace loom
