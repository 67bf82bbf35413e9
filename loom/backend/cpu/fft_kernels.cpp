// CPU evaluation of the FFT and Hadamard primitives: FFT runs one axis at a
// time through the engines of backend/cpu/fft.h (the first axis out of
// place, the rest in place in the output); Hadamard runs per row in float.
#include <algorithm>
#include <array>
#include <complex>
#include <vector>

#include "loom/backend/cpu/copy.h"
#include "loom/backend/cpu/fft.h"
#include "loom/backend/cpu/thread_pool.h"
#include "loom/primitives/fft.h"

namespace loom {

namespace {

using cpu::fft::cfloat;

struct Lines {
  int64_t outer, n, inner;
};

Lines lines_of(const Shape& shape, int axis) {
  Lines l{1, shape[axis], 1};
  for (int d = 0; d < axis; ++d) l.outer *= shape[d];
  for (int d = axis + 1; d < static_cast<int>(shape.size()); ++d) l.inner *= shape[d];
  return l;
}

template <typename T>
void scale_all(T* data, size_t count, float scale) {
  cpu::parallel_for(count, 1 << 16, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) data[i] *= scale;
  });
}

// After a forward transform of a real array over `axes` (the last axis
// among them) has filled bins 0..n/2 of every row, the other bins follow by
// Hermitian symmetry: X[k] = conj(X[-k]), indices negated modulo the length
// on every transformed axis. Rows only read bins below n/2 + 1 and only
// write those above, so they fill in parallel.
void hermitian_fill(cfloat* dst, const Shape& shape, const std::vector<int>& axes) {
  const int d = static_cast<int>(shape.size());
  const int64_t n = shape[d - 1], h = n / 2 + 1;
  int64_t rows = 1;
  for (int i = 0; i + 1 < d; ++i) rows *= shape[i];
  std::vector<bool> flip(d, false);
  for (int a : axes) flip[a] = true;
  cpu::parallel_for(static_cast<size_t>(rows), 16, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      int64_t rest = static_cast<int64_t>(r), mirror = 0, stride = 1;
      for (int i = d - 2; i >= 0; --i) {
        const int64_t idx = rest % shape[i];
        rest /= shape[i];
        mirror += (flip[i] ? (shape[i] - idx) % shape[i] : idx) * stride;
        stride *= shape[i];
      }
      cfloat* row = dst + static_cast<int64_t>(r) * n;
      const cfloat* from = dst + mirror * n;
      for (int64_t k = h; k < n; ++k) row[k] = std::conj(from[n - k]);
    }
  });
}

// The forward complex transform of a real input over `axes`, the array's
// last axis among them: r2c rows and column passes over bins 0..n/2 only
// (about half the work of the complex transform), then the symmetry above.
// False (nothing done) when the engine has no such path.
bool real_input_forward(const float* src, cfloat* dst, const Shape& shape,
                        const std::vector<int>& axes) {
  const int d = static_cast<int>(shape.size());
  const int64_t n = shape[d - 1], h = n / 2 + 1;
  int64_t rows = 1;
  for (int i = 0; i + 1 < d; ++i) rows *= shape[i];
  if (!cpu::fft::r2c_full_rows(src, dst, rows, n)) return false;
  std::vector<int> order = axes;
  std::sort(order.rbegin(), order.rend());
  size_t i = 1;
  for (; i < order.size(); ++i) {
    Lines l = lines_of(shape, order[i]);
    if (!cpu::fft::c2c_partial_columns(dst, dst, l.outer, l.n, l.inner, n, h, false)) break;
  }
  // Symmetric over the axes done so far; any left run over every column.
  hermitian_fill(dst, shape, std::vector<int>(order.begin(), order.begin() + i));
  for (; i < order.size(); ++i) {
    Lines l = lines_of(shape, order[i]);
    cpu::fft::c2c(dst, dst, l.outer, l.n, l.inner, false);
  }
  return true;
}

} // namespace

void FFT::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  const int last = axes_.back();
  if (!real_ && in.dtype() == float32) {
    // A real input (the op passes float32 rather than casting to complex).
    const float* src = in.data<float>();
    cfloat* dst = out.data<cfloat>();
    const bool last_transformed =
        std::find(axes_.begin(), axes_.end(), out.ndim() - 1) != axes_.end();
    const bool done =
        !inverse_ && last_transformed && real_input_forward(src, dst, out.shape(), axes_);
    if (!done) {
      cpu::parallel_for(out.size(), 1 << 16, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) dst[i] = cfloat(src[i], 0.0f);
      });
      std::vector<int> order = axes_;
      std::sort(order.rbegin(), order.rend());
      for (int ax : order) {
        Lines l = lines_of(out.shape(), ax);
        cpu::fft::c2c(dst, dst, l.outer, l.n, l.inner, inverse_);
      }
    }
  } else if (!real_) {
    const cfloat* src = in.data<cfloat>();
    cfloat* dst = out.data<cfloat>();
    // Innermost axis first: the out-of-place pass reads contiguous lines.
    std::vector<int> order = axes_;
    std::sort(order.rbegin(), order.rend());
    for (size_t i = 0; i < order.size(); ++i) {
      Lines l = lines_of(out.shape(), order[i]);
      cpu::fft::c2c(i == 0 ? src : dst, dst, l.outer, l.n, l.inner, inverse_);
    }
  } else if (!inverse_) {
    Lines l = lines_of(in.shape(), last);
    cfloat* dst = out.data<cfloat>();
    cpu::fft::r2c(in.data<float>(), dst, l.outer, l.n, l.inner);
    for (size_t i = 0; i + 1 < axes_.size(); ++i) {
      Lines m = lines_of(out.shape(), axes_[i]);
      cpu::fft::c2c(dst, dst, m.outer, m.n, m.inner, false);
    }
  } else {
    // The complex axes first, into a scratch spectrum, then the real one.
    const cfloat* spectrum = in.data<cfloat>();
    std::vector<cfloat> scratch;
    if (axes_.size() > 1) {
      scratch.resize(in.size());
      for (size_t i = 0; i + 1 < axes_.size(); ++i) {
        Lines m = lines_of(in.shape(), axes_[i]);
        cpu::fft::c2c(i == 0 ? spectrum : scratch.data(), scratch.data(), m.outer, m.n, m.inner,
                      true);
      }
      spectrum = scratch.data();
    }
    Lines l = lines_of(out.shape(), last);
    cpu::fft::c2r(spectrum, out.data<float>(), l.outer, l.n, l.inner);
  }
  if (scale_ != 1.0) {
    if (real_ && inverse_) {
      scale_all(out.data<float>(), out.size(), static_cast<float>(scale_));
    } else {
      scale_all(out.data<cfloat>(), out.size(), static_cast<float>(scale_));
    }
  }
}

// --- Hadamard --------------------------------------------------------------

namespace {

// The Hadamard matrices of orders 12, 20 and 28 from N. J. A. Sloane's
// library, in the row order MLX uses (row i is the transform of e_i), so
// that Loom's transform agrees with MLX's element for element.
constexpr const char* kT12[] = {"+-++++++++++", "--+-+-+-+-+-", "+++-++----++", "+---+--+-++-",
                                "+++++-++----", "+-+---+--+-+", "++--+++-++--", "+--++---+--+",
                                "++----+++-++", "+--+-++---+-", "++++----+++-", "+-+--+-++---"};
constexpr const char* kT20[] = {
    "+-----++++--++--+--+", "-+---+-+++---+++-+--", "--+--++-+++---+-+-+-", "---+-+++-+++-----+-+",
    "----+++++--++--+--+-", "+----+----+-++---++-", "-+----+----+-++---++", "--+----+--+-+-++---+",
    "---+----+-++-+-++---", "----+----+-++-+-++--", "++--+-+--++----+----", "+++--+-+---+----+---",
    "-+++--+-+---+----+--", "--+++--+-+---+----+-", "+--+++--+-----+----+", "+-++-++--+-+++++----",
    "-+-+++++--+-+++-+---", "+-+-+-+++-++-++--+--", "++-+---++++++-+---+-", "-++-++--++++++-----+"};
constexpr const char* kT28[] = {
    "+--------++++--+-++-+-++--++", "-+--------+++++-+-++-+-++--+", "--+----+---+++-+-+-++++-++--",
    "---+---++---+++-+-+-+-++-++-", "----+--+++---+++-+-+---++-++", "-----+-++++----++-+-++--++-+",
    "------+-++++--+-++-+-++--++-", "++----++------+--++---+-++-+", "+++-----+------+--++-+-+-++-",
    "-+++-----+------+--++-+-+-++", "--+++-----+---+--+--++-+-+-+", "---+++-----+--++--+--++-+-+-",
    "----+++-----+--++--+--++-+-+", "+----++------+--++--++-++-+-", "+-+--+--++--+++------++----+",
    "-+-+--++-++--+-+-----+++----", "+-+-+--++-++----+-----+++---", "-+-+-+--++-++----+-----+++--",
    "--+-+-+--++-++----+-----+++-", "+--+-+-+--++-+-----+-----+++", "-+--+-+++--++-------++----++",
    "+--++--+-+--+---++++-+------", "-+--++--+-+--+---++++-+-----", "--+--+++-+-+--+---+++--+----",
    "+--+--+-+-+-+-++---++---+---", "++--+----+-+-++++---+----+--", "-++--+-+--+-+-++++--------+-",
    "--++--+-+--+-+-++++--------+"};

std::vector<float> small_matrix(int m) {
  const char* const* rows = m == 12 ? kT12 : m == 20 ? kT20 : kT28;
  std::vector<float> t(static_cast<size_t>(m) * m);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < m; ++j) t[i * m + j] = rows[i][j] == '+' ? 1.0f : -1.0f;
  }
  return t;
}

// x <- x @ kron(T_m, H_p) (or its transpose), p = n / m a power of two.
void hadamard_row(float* x, int64_t n, int m, const std::vector<float>& t, bool transpose,
                  float* tmp) {
  const int64_t p = n / m;
  for (int64_t b = 0; b < m; ++b) {
    float* blk = x + b * p;
    for (int64_t h = 1; h < p; h *= 2) {
      for (int64_t i = 0; i < p; i += 2 * h) {
        for (int64_t j = i; j < i + h; ++j) {
          float u = blk[j], v = blk[j + h];
          blk[j] = u + v;
          blk[j + h] = u - v;
        }
      }
    }
  }
  if (m == 1) return;
  for (int64_t j = 0; j < p; ++j) {
    for (int a = 0; a < m; ++a) {
      float acc = 0.0f;
      for (int i = 0; i < m; ++i) acc += x[i * p + j] * (transpose ? t[a * m + i] : t[i * m + a]);
      tmp[a] = acc;
    }
    for (int a = 0; a < m; ++a) x[a * p + j] = tmp[a];
  }
}

} // namespace

void Hadamard::eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) {
  array in = cpu::ensure_row_contiguous(inputs[0]);
  array& out = outputs[0];
  out.set_data(allocator::allocate(out.nbytes()));
  if (out.size() == 0) return;
  const int64_t n = in.ndim() == 0 ? 1 : in.shape(-1);
  const int64_t rows = static_cast<int64_t>(in.size()) / n;
  const int m = hadamard_m(n);
  const std::vector<float> t = m > 1 ? small_matrix(m) : std::vector<float>{};
  const float scale = static_cast<float>(scale_);
  const Dtype dtype = in.dtype();
  const size_t item = dtype.size;
  const auto* src = in.data<char>();
  auto* dst = out.data<char>();
  size_t grain = static_cast<size_t>(std::max<int64_t>(1, (1 << 14) / n));
  cpu::parallel_for(static_cast<size_t>(rows), grain, [&](size_t b, size_t e) {
    std::vector<float> row(n), tmp(m);
    for (size_t r = b; r < e; ++r) {
      cpu::convert_buffer(src + r * n * item, dtype, row.data(), float32, n);
      hadamard_row(row.data(), n, m, t, transpose_, tmp.data());
      for (float& v : row) v *= scale;
      cpu::convert_buffer(row.data(), float32, dst + r * n * item, dtype, n);
    }
  });
}

} // namespace loom
