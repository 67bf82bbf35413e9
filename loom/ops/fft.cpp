// The mx.fft functions and hadamard_transform: argument checks with MLX's
// messages, sizes (pad or crop each axis), dtypes and the norm's scale, then
// one FFT (or Hadamard) node. stft/istft are composites of take, the
// transforms and scatter_add_axis, so they differentiate for free.
#include "loom/ops/fft.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/primitives/fft.h"

namespace loom {

namespace fft {

namespace {

template <typename T>
std::string join(const std::vector<T>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  return os.str();
}

void check_norm(const std::string& norm, const char* op) {
  if (norm != "backward" && norm != "ortho" && norm != "forward") {
    throw std::invalid_argument(
        std::string("[") + op +
        "] Invalid norm. Expected one of {'backward', 'ortho', 'forward'}.");
  }
}

int normalize_axis(int axis, int ndim, const char* op) {
  int ax = axis < 0 ? axis + ndim : axis;
  if (ax < 0 || ax >= ndim) {
    std::ostringstream msg;
    msg << "[" << op << "] Invalid axis " << axis << " for array with " << ndim << " dimensions.";
    throw std::out_of_range(msg.str());
  }
  return ax;
}

// Crops or zero-pads `a` along `axis` to `target` elements.
array fit_axis(const array& a, int axis, int target, const Stream& s) {
  int have = a.shape(axis);
  if (have == target) return a;
  if (have > target) {
    Shape start(a.ndim(), 0), stop = a.shape(), step(a.ndim(), 1);
    stop[axis] = target;
    return slice(a, start, stop, step, s);
  }
  std::vector<std::pair<int, int>> widths(a.ndim(), {0, 0});
  widths[axis].second = target - have;
  return pad(a, widths, array(0.0f), "constant", s);
}

// The general transform: `n` holds the logical length of each axis in
// `axes` (for irfft the output length of the last one).
array transform(const array& a, Shape n, std::vector<int> axes, bool real, bool inverse,
                const std::string& norm, const char* op, StreamOrDevice sd) {
  check_norm(norm, op);
  Stream s = to_stream(sd);
  std::vector<int> given = axes;
  for (int& ax : axes) ax = normalize_axis(ax, a.ndim(), "fftn");
  std::vector<int> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw std::invalid_argument("[fftn] Duplicated axis received (" + join(given) + ")");
  }
  if (n.size() != axes.size()) {
    throw std::invalid_argument("[fftn] Shape and axes have different sizes.");
  }
  if (axes.empty()) return a; // as MLX: nothing to transform
  if (std::any_of(n.begin(), n.end(), [](int v) { return v <= 0; })) {
    throw std::invalid_argument("[fftn] Invalid FFT output size requested (" + join(n) + ")");
  }
  array x = a;
  if (real && !inverse) {
    if (is_complex(x.dtype())) x = loom::real(x, s);
    if (x.dtype() != float32) x = astype(x, float32, s);
  } else if (!is_complex(x.dtype()) && !(real && inverse)) {
    // A real input stays real: the kernel transforms it at about half the
    // cost of its complex form (and the complex form would be one more pass).
    if (x.dtype() != float32) x = astype(x, float32, s);
  } else if (x.dtype() != complex64) {
    x = astype(x, complex64, s);
  }
  double total = 1.0;
  for (size_t i = 0; i < axes.size(); ++i) {
    total *= n[i];
    bool half = real && inverse && i + 1 == axes.size();
    x = fit_axis(x, axes[i], half ? n[i] / 2 + 1 : n[i], s);
  }
  double scale = 1.0;
  if (norm == "ortho") {
    scale = 1.0 / std::sqrt(total);
  } else if ((norm == "backward") == inverse) {
    scale = 1.0 / total;
  }
  auto prim = std::make_shared<FFT>(s, axes, inverse, real, real && inverse ? n.back() : 0, scale);
  Shape shape = prim->output_shapes({x})[0];
  return array(std::move(shape), real && inverse ? float32 : complex64, std::move(prim), {x});
}

array transform_1d(const array& a, std::optional<int> n, int axis, bool real, bool inverse,
                   const std::string& norm, const char* op, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "fftn");
  int len = n ? *n : (real && inverse ? 2 * (a.shape(ax) - 1) : a.shape(ax));
  return transform(a, {len}, {axis}, real, inverse, norm, op, s);
}

array transform_nd(const array& a, const std::optional<Shape>& shape,
                   const std::optional<std::vector<int>>& axes, bool real, bool inverse,
                   const std::string& norm, const char* op, StreamOrDevice s) {
  std::vector<int> ax;
  if (axes) {
    ax = *axes;
  } else {
    if (shape) {
      throw std::invalid_argument(std::string("[") + op +
                                  "] `axes` should not be `None` if `s` is not `None`.");
    }
    for (int i = 0; i < a.ndim(); ++i) ax.push_back(i);
  }
  if (shape) return transform(a, *shape, ax, real, inverse, norm, op, s);
  Shape n;
  for (size_t i = 0; i < ax.size(); ++i) {
    int d = a.shape(normalize_axis(ax[i], a.ndim(), "fftn"));
    n.push_back(real && inverse && i + 1 == ax.size() ? 2 * (d - 1) : d);
  }
  return transform(a, n, ax, real, inverse, norm, op, s);
}

} // namespace

array fft(const array& a, std::optional<int> n, int axis, const std::string& norm,
          StreamOrDevice s) {
  return transform_1d(a, n, axis, false, false, norm, "fft", s);
}
array ifft(const array& a, std::optional<int> n, int axis, const std::string& norm,
           StreamOrDevice s) {
  return transform_1d(a, n, axis, false, true, norm, "ifft", s);
}
array rfft(const array& a, std::optional<int> n, int axis, const std::string& norm,
           StreamOrDevice s) {
  return transform_1d(a, n, axis, true, false, norm, "rfft", s);
}
array irfft(const array& a, std::optional<int> n, int axis, const std::string& norm,
            StreamOrDevice s) {
  return transform_1d(a, n, axis, true, true, norm, "irfft", s);
}

array fftn(const array& a, const std::optional<Shape>& shape,
           const std::optional<std::vector<int>>& axes, const std::string& norm, StreamOrDevice s) {
  return transform_nd(a, shape, axes, false, false, norm, "fftn", s);
}
array ifftn(const array& a, const std::optional<Shape>& shape,
            const std::optional<std::vector<int>>& axes, const std::string& norm,
            StreamOrDevice s) {
  return transform_nd(a, shape, axes, false, true, norm, "ifftn", s);
}
array rfftn(const array& a, const std::optional<Shape>& shape,
            const std::optional<std::vector<int>>& axes, const std::string& norm,
            StreamOrDevice s) {
  return transform_nd(a, shape, axes, true, false, norm, "rfftn", s);
}
array irfftn(const array& a, const std::optional<Shape>& shape,
             const std::optional<std::vector<int>>& axes, const std::string& norm,
             StreamOrDevice s) {
  return transform_nd(a, shape, axes, true, true, norm, "irfftn", s);
}

array fft2(const array& a, const std::optional<Shape>& shape,
           const std::optional<std::vector<int>>& axes, const std::string& norm, StreamOrDevice s) {
  return transform_nd(a, shape, axes, false, false, norm, "fft2", s);
}
array ifft2(const array& a, const std::optional<Shape>& shape,
            const std::optional<std::vector<int>>& axes, const std::string& norm,
            StreamOrDevice s) {
  return transform_nd(a, shape, axes, false, true, norm, "ifft2", s);
}
array rfft2(const array& a, const std::optional<Shape>& shape,
            const std::optional<std::vector<int>>& axes, const std::string& norm,
            StreamOrDevice s) {
  return transform_nd(a, shape, axes, true, false, norm, "rfft2", s);
}
array irfft2(const array& a, const std::optional<Shape>& shape,
             const std::optional<std::vector<int>>& axes, const std::string& norm,
             StreamOrDevice s) {
  return transform_nd(a, shape, axes, true, true, norm, "irfft2", s);
}

// --- frequencies and shifts -----------------------------------------------

namespace {

void check_freq_args(int n, double d, const char* op) {
  if (n <= 0) throw std::invalid_argument(std::string("[") + op + "] `n` must be greater than 0.");
  if (d == 0.0) throw std::invalid_argument(std::string("[") + op + "] `d` must be non-zero.");
}

array shift(const array& a, const std::optional<std::vector<int>>& axes, bool inverse,
            const char* op, StreamOrDevice s) {
  std::vector<int> ax;
  if (axes) {
    for (int v : *axes) ax.push_back(normalize_axis(v, a.ndim(), op));
  } else {
    for (int i = 0; i < a.ndim(); ++i) ax.push_back(i);
  }
  if (ax.empty()) return a;
  std::vector<int> shifts;
  for (int v : ax) shifts.push_back(inverse ? -(a.shape(v) / 2) : a.shape(v) / 2);
  return roll(a, shifts, ax, s);
}

} // namespace

array fftfreq(int n, double d, StreamOrDevice) {
  check_freq_args(n, d, "fftfreq");
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) {
    int k = i <= (n - 1) / 2 ? i : i - n;
    v[i] = static_cast<float>(k / (d * n));
  }
  return array(v.data(), {n}, float32);
}

array rfftfreq(int n, double d, StreamOrDevice) {
  check_freq_args(n, d, "rfftfreq");
  int m = n / 2 + 1;
  std::vector<float> v(m);
  for (int i = 0; i < m; ++i) v[i] = static_cast<float>(i / (d * n));
  return array(v.data(), {m}, float32);
}

array fftshift(const array& a, const std::optional<std::vector<int>>& axes, StreamOrDevice s) {
  return shift(a, axes, false, "fftshift", s);
}

array ifftshift(const array& a, const std::optional<std::vector<int>>& axes, StreamOrDevice s) {
  return shift(a, axes, true, "ifftshift", s);
}

// --- short-time transforms --------------------------------------------------

namespace {

// The window centred in n_fft zeros, and its length checked.
array full_window(const std::optional<array>& window, std::optional<int> win_length, int n_fft,
                  const char* op, const Stream& s) {
  array w = window ? *window : ones({win_length.value_or(n_fft)}, float32, s);
  if (w.ndim() != 1) {
    throw std::invalid_argument(std::string("[") + op +
                                "] window must be a one-dimensional array.");
  }
  int win = w.shape(0);
  if (win > n_fft) {
    throw std::invalid_argument(std::string("[") + op + "] window length must not exceed n_fft.");
  }
  int left = (n_fft - win) / 2;
  return pad(w, {{left, n_fft - win - left}}, array(0.0f), "constant", s);
}

// frame_index[i, j] = i * hop + j.
array frame_index(int frames, int n_fft, int hop, const Stream& s) {
  array i = reshape(arange(0, frames, 1, int32, s), {frames, 1}, s);
  array j = reshape(arange(0, n_fft, 1, int32, s), {1, n_fft}, s);
  return add(multiply(i, array(hop, int32), s), j, s);
}

array slice_last(const array& a, int start, int stop, const Stream& s) {
  Shape b(a.ndim(), 0), e = a.shape(), step(a.ndim(), 1);
  b.back() = start;
  e.back() = stop;
  return slice(a, b, e, step, s);
}

} // namespace

array stft(const array& x, int n_fft, std::optional<int> hop_length, std::optional<int> win_length,
           const std::optional<array>& window, bool center, const std::string& pad_mode,
           const std::string& norm, std::optional<bool> onesided, StreamOrDevice sd) {
  Stream s = to_stream(sd);
  if (n_fft <= 0) throw std::invalid_argument("[stft] n_fft must be positive.");
  int hop = hop_length.value_or(n_fft / 4);
  if (hop <= 0) throw std::invalid_argument("[stft] hop_length must be positive.");
  if (x.ndim() == 0) throw std::invalid_argument("[stft] Input must have at least one dimension.");
  check_norm(norm, "stft");
  if (pad_mode != "reflect" && pad_mode != "constant" && pad_mode != "edge") {
    throw std::invalid_argument("[stft] Invalid pad_mode '" + pad_mode +
                                "'; expected 'reflect', 'constant' or 'edge'.");
  }
  array w = full_window(window, win_length, n_fft, "stft", s);
  bool one = onesided.value_or(!is_complex(x.dtype()));
  array signal = x;
  if (center) {
    std::vector<std::pair<int, int>> widths(x.ndim(), {0, 0});
    widths.back() = {n_fft / 2, n_fft / 2};
    signal = pad(x, widths, array(0.0f), pad_mode, s);
  }
  int len = signal.shape(-1);
  if (len < n_fft) throw std::invalid_argument("[stft] Input is too short for the given n_fft.");
  int frames = 1 + (len - n_fft) / hop;
  array framed = take(signal, frame_index(frames, n_fft, hop, s), signal.ndim() - 1, s);
  framed = multiply(framed, w, s);
  array spec = one ? rfft(framed, n_fft, -1, norm, s) : fft(framed, n_fft, -1, norm, s);
  return swapaxes(spec, -1, -2, s);
}

array istft(const array& stft_matrix, std::optional<int> n_fft_arg, std::optional<int> hop_length,
            std::optional<int> win_length, const std::optional<array>& window, bool center,
            const std::string& norm, std::optional<bool> onesided, std::optional<int> length,
            StreamOrDevice sd) {
  Stream s = to_stream(sd);
  const array& S = stft_matrix;
  if (S.ndim() < 2) {
    throw std::invalid_argument("[istft] Input must have at least two dimensions (freq, frames).");
  }
  check_norm(norm, "istft");
  bool one = onesided.value_or(true);
  int n_freq = S.shape(-2), frames = S.shape(-1);
  int n_fft = n_fft_arg.value_or(one ? 2 * (n_freq - 1) : n_freq);
  if (n_fft <= 0) throw std::invalid_argument("[istft] n_fft must be positive.");
  int hop = hop_length.value_or(n_fft / 4);
  if (hop <= 0) throw std::invalid_argument("[istft] hop_length must be positive.");
  array w = full_window(window, win_length, n_fft, "istft", s);
  array spec = swapaxes(S, -1, -2, s); // (..., frames, n_freq)
  array framed = one ? irfft(spec, n_fft, -1, norm, s) : real(ifft(spec, n_fft, -1, norm, s), s);
  framed = multiply(framed, w, s);
  const int total = n_fft + hop * (frames - 1);
  Shape lead(S.shape().begin(), S.shape().end() - 2);
  Shape flat_shape = lead;
  flat_shape.push_back(frames * n_fft);
  array index = reshape(frame_index(frames, n_fft, hop, s), {frames * n_fft}, s);
  Shape out_shape = lead;
  out_shape.push_back(total);
  array flat = reshape(framed, flat_shape, s);
  array y = scatter_add_axis(zeros(out_shape, flat.dtype(), s), broadcast_to(index, flat_shape, s),
                             flat, -1, s);
  array w2 = reshape(broadcast_to(square(w, s), {frames, n_fft}, s), {frames * n_fft}, s);
  array env = scatter_add_axis(zeros({total}, w2.dtype(), s), index, w2, 0, s);
  array nonzero = greater(env, array(1e-11f), s);
  y = where(nonzero, divide(y, where(nonzero, env, array(1.0f), s), s), y, s);
  int start = center ? n_fft / 2 : 0;
  if (length) {
    int stop = std::min(total, start + *length);
    y = slice_last(y, std::min(start, total), stop, s);
    if (y.shape(-1) < *length) {
      std::vector<std::pair<int, int>> widths(y.ndim(), {0, 0});
      widths.back().second = *length - y.shape(-1);
      y = pad(y, widths, array(0.0f), "constant", s);
    }
    return y;
  }
  if (center) y = slice_last(y, start, std::max(start, total - n_fft / 2), s);
  return y;
}

} // namespace fft

array hadamard_transform(const array& a, std::optional<float> scale, StreamOrDevice sd) {
  Stream s = to_stream(sd);
  if (a.dtype() == float64) {
    throw std::invalid_argument("[hadamard] Unsupported type float64; use float32.");
  }
  if (a.size() == 0) {
    throw std::invalid_argument("[hadamard_transform] Does not support empty arrays.");
  }
  array x = a;
  if (x.dtype() != float32 && x.dtype() != float16 && x.dtype() != bfloat16) {
    x = astype(x, float32, s);
  }
  int64_t n = x.ndim() == 0 ? 1 : x.shape(-1);
  if (hadamard_m(n) == 0) {
    throw std::invalid_argument(
        "[hadamard] Only supports n = m*2^k where m in (1, 12, 20, 28); got n = " +
        std::to_string(n) + ".");
  }
  double sc = scale ? static_cast<double>(*scale) : 1.0 / std::sqrt(static_cast<double>(n));
  return array(x.shape(), x.dtype(), std::make_shared<Hadamard>(s, sc, false), {x});
}

} // namespace loom
