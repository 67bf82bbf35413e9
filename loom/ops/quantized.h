// Quantization ops with MLX 0.32.4's signatures, defaults and errors.
// Defaults per mode: affine group 64, 4 bits; mxfp4 32/4; mxfp8 32/8; nvfp4 16/4.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loom/array.h"
#include "loom/stream.h"

namespace loom {

// (codes, scales[, biases]): biases only for affine.
std::vector<array> quantize(const array& w, std::optional<int> group_size = std::nullopt,
                            std::optional<int> bits = std::nullopt,
                            const std::string& mode = "affine",
                            const std::optional<array>& global_scale = std::nullopt,
                            StreamOrDevice s = {});

array dequantize(const array& w, const array& scales,
                 const std::optional<array>& biases = std::nullopt,
                 std::optional<int> group_size = std::nullopt,
                 std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                 const std::optional<array>& global_scale = std::nullopt,
                 std::optional<Dtype> dtype = std::nullopt, StreamOrDevice s = {});

array quantized_matmul(const array& x, const array& w, const array& scales,
                       const std::optional<array>& biases = std::nullopt, bool transpose = true,
                       std::optional<int> group_size = std::nullopt,
                       std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                       StreamOrDevice s = {});

// quantized_matmul with matrix-level gather over the batch axes of x and w.
array gather_qmm(const array& x, const array& w, const array& scales,
                 const std::optional<array>& biases = std::nullopt,
                 const std::optional<array>& lhs_indices = std::nullopt,
                 const std::optional<array>& rhs_indices = std::nullopt, bool transpose = true,
                 std::optional<int> group_size = std::nullopt,
                 std::optional<int> bits = std::nullopt, const std::string& mode = "affine",
                 const std::optional<array>& global_scale = std::nullopt,
                 bool sorted_indices = false, StreamOrDevice s = {});

// x quantized on the fly, times w (quantized already when scales are given).
array qqmm(const array& x, const array& w, const std::optional<array>& scales = std::nullopt,
           std::optional<int> group_size = std::nullopt, std::optional<int> bits = std::nullopt,
           const std::string& mode = "nvfp4",
           const std::optional<array>& global_scale_x = std::nullopt,
           const std::optional<array>& global_scale_w = std::nullopt, StreamOrDevice s = {});

array gather_qqmm(const array& x, const array& w, const std::optional<array>& scales = std::nullopt,
                  const std::optional<array>& lhs_indices = std::nullopt,
                  const std::optional<array>& rhs_indices = std::nullopt,
                  std::optional<int> group_size = std::nullopt,
                  std::optional<int> bits = std::nullopt, const std::string& mode = "nvfp4",
                  const std::optional<array>& global_scale_x = std::nullopt,
                  const std::optional<array>& global_scale_w = std::nullopt,
                  bool sorted_indices = false, StreamOrDevice s = {});

// E4M3 codes (uint8) of a floating array, and back.
array to_fp8(const array& x, StreamOrDevice s = {});
array from_fp8(const array& x, Dtype dtype = bfloat16, StreamOrDevice s = {});

} // namespace loom
