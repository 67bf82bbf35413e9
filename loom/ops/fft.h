// Discrete Fourier transforms (MLX's mlx.core.fft, NumPy's conventions) and
// the Walsh-Hadamard transform. `n` / `s` pad with zeros or crop each
// transformed axis before the transform (irfft: the output length); `norm`
// is "backward" (1/N on the inverse), "ortho" (1/sqrt(N) both ways) or
// "forward" (1/N on the forward transform). Inputs are computed in single
// precision: complex transforms return complex64, irfft* float32.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loom/array.h"

namespace loom {

namespace fft {

array fft(const array& a, std::optional<int> n = std::nullopt, int axis = -1,
          const std::string& norm = "backward", StreamOrDevice s = {});
array ifft(const array& a, std::optional<int> n = std::nullopt, int axis = -1,
           const std::string& norm = "backward", StreamOrDevice s = {});
array rfft(const array& a, std::optional<int> n = std::nullopt, int axis = -1,
           const std::string& norm = "backward", StreamOrDevice s = {});
array irfft(const array& a, std::optional<int> n = std::nullopt, int axis = -1,
            const std::string& norm = "backward", StreamOrDevice s = {});

// `axes` absent: every axis (then `shape` must be absent too).
array fftn(const array& a, const std::optional<Shape>& shape = std::nullopt,
           const std::optional<std::vector<int>>& axes = std::nullopt,
           const std::string& norm = "backward", StreamOrDevice s = {});
array ifftn(const array& a, const std::optional<Shape>& shape = std::nullopt,
            const std::optional<std::vector<int>>& axes = std::nullopt,
            const std::string& norm = "backward", StreamOrDevice s = {});
array rfftn(const array& a, const std::optional<Shape>& shape = std::nullopt,
            const std::optional<std::vector<int>>& axes = std::nullopt,
            const std::string& norm = "backward", StreamOrDevice s = {});
array irfftn(const array& a, const std::optional<Shape>& shape = std::nullopt,
             const std::optional<std::vector<int>>& axes = std::nullopt,
             const std::string& norm = "backward", StreamOrDevice s = {});

// The 2-D forms: fftn over `axes` (default the last two).
array fft2(const array& a, const std::optional<Shape>& shape = std::nullopt,
           const std::optional<std::vector<int>>& axes = std::vector<int>{-2, -1},
           const std::string& norm = "backward", StreamOrDevice s = {});
array ifft2(const array& a, const std::optional<Shape>& shape = std::nullopt,
            const std::optional<std::vector<int>>& axes = std::vector<int>{-2, -1},
            const std::string& norm = "backward", StreamOrDevice s = {});
array rfft2(const array& a, const std::optional<Shape>& shape = std::nullopt,
            const std::optional<std::vector<int>>& axes = std::vector<int>{-2, -1},
            const std::string& norm = "backward", StreamOrDevice s = {});
array irfft2(const array& a, const std::optional<Shape>& shape = std::nullopt,
             const std::optional<std::vector<int>>& axes = std::vector<int>{-2, -1},
             const std::string& norm = "backward", StreamOrDevice s = {});

// Sample frequencies (float32): [0, 1, ..., -1] / (d n) and [0, ..., n/2] / (d n).
array fftfreq(int n, double d = 1.0, StreamOrDevice s = {});
array rfftfreq(int n, double d = 1.0, StreamOrDevice s = {});
// Rolls the zero frequency to the centre (and back); axes absent: all.
array fftshift(const array& a, const std::optional<std::vector<int>>& axes = std::nullopt,
               StreamOrDevice s = {});
array ifftshift(const array& a, const std::optional<std::vector<int>>& axes = std::nullopt,
                StreamOrDevice s = {});

// Short-time transform of the last axis: (..., n_freq, n_frames).
array stft(const array& x, int n_fft = 2048, std::optional<int> hop_length = std::nullopt,
           std::optional<int> win_length = std::nullopt,
           const std::optional<array>& window = std::nullopt, bool center = true,
           const std::string& pad_mode = "reflect", const std::string& norm = "backward",
           std::optional<bool> onesided = std::nullopt, StreamOrDevice s = {});
// Overlap-add inverse of stft, normalised by the squared-window envelope.
array istft(const array& stft_matrix, std::optional<int> n_fft = std::nullopt,
            std::optional<int> hop_length = std::nullopt,
            std::optional<int> win_length = std::nullopt,
            const std::optional<array>& window = std::nullopt, bool center = true,
            const std::string& norm = "backward", std::optional<bool> onesided = std::nullopt,
            std::optional<int> length = std::nullopt, StreamOrDevice s = {});

} // namespace fft

// The Walsh-Hadamard transform of the last axis (n = m 2^k, m in 1, 12, 20,
// 28), scaled by `scale` (default 1/sqrt(n)); float16/bfloat16/float32 keep
// their dtype, other non-float64 inputs become float32.
array hadamard_transform(const array& a, std::optional<float> scale = std::nullopt,
                         StreamOrDevice s = {});

} // namespace loom
