// What the FFT and Hadamard primitives compute, and how they differentiate.
// Both are linear. Loom follows MLX's convention for complex gradients: the
// vjp of a linear map A is A^H applied to the cotangent (for y = x * c it is
// ct * conj(c)); for real inputs the real part of that is kept.
#include "loom/primitives/fft.h"

#include <typeinfo>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/shape.h"

namespace loom {

namespace {

std::vector<int64_t> to_i64(const std::vector<int>& v) { return {v.begin(), v.end()}; }

} // namespace

std::vector<Shape> FFT::output_shapes(const std::vector<array>& inputs) {
  Shape shape = inputs[0].shape();
  if (real_) {
    int last = axes_.back();
    shape[last] = inverse_ ? n_ : shape[last] / 2 + 1;
  }
  return {shape};
}

std::vector<array> FFT::vjp(const std::vector<array>& primals, const std::vector<array>& cotangents,
                            const std::vector<int>&, const std::vector<array>&) {
  const array& x = primals[0];
  const array& ct = cotangents[0];
  const Stream& s = stream();
  if (!real_) {
    // (s D)^H = s D with the opposite sign; a real input takes its real part.
    array back(ct.shape(), complex64, std::make_shared<FFT>(s, axes_, !inverse_, false, 0, scale_),
               {astype(ct, complex64, s)});
    return {is_complex(x.dtype()) ? back : real(back, s)};
  }
  int last = axes_.back();
  if (!inverse_) {
    // rfft keeps the first n/2 + 1 rows of D: D^H of the zero-extended
    // cotangent, real part (the input is real).
    int n = x.shape(last);
    std::vector<std::pair<int, int>> widths(ct.ndim(), {0, 0});
    widths[last].second = n - ct.shape(last);
    array full = pad(ct, widths, array(0.0f), "constant", s);
    array back(full.shape(), complex64, std::make_shared<FFT>(s, axes_, true, false, 0, scale_),
               {full});
    return {real(back, s)};
  }
  // irfft reads each interior bin twice (as itself and as its conjugate
  // mirror): the transposed map is rfft with those bins doubled.
  Shape shape = x.shape();
  array fwd(shape, complex64, std::make_shared<FFT>(s, axes_, false, true, 0, scale_), {ct});
  int h = shape[last];
  std::vector<float> weights(h, 2.0f);
  weights[0] = 1.0f;
  if (n_ % 2 == 0 && h > 1) weights[h - 1] = 1.0f;
  Shape wshape(shape.size(), 1);
  wshape[last] = h;
  array w(weights.data(), wshape, float32);
  return {multiply(fwd, w, s)};
}

std::vector<array> FFT::jvp(const std::vector<array>& primals, const std::vector<array>& tangents,
                            const std::vector<int>&) {
  const array& t = tangents[0];
  Shape shape = output_shapes(primals)[0];
  Dtype dtype = real_ && inverse_ ? float32 : complex64;
  // The tangent takes the primal's type (a real input's c2c stays real).
  const bool real_in = (real_ && !inverse_) || !is_complex(primals[0].dtype());
  array tin = real_in ? astype(t, float32, stream()) : astype(t, complex64, stream());
  return {array(shape, dtype, std::make_shared<FFT>(stream(), axes_, inverse_, real_, n_, scale_),
                {tin})};
}

std::pair<std::vector<array>, std::vector<int>> FFT::vmap(const std::vector<array>& inputs,
                                                          const std::vector<int>& axes) {
  int b = axes[0];
  std::vector<int> shifted = axes_;
  if (b >= 0) {
    for (int& a : shifted) a += a >= b ? 1 : 0;
  }
  auto prim = std::make_shared<FFT>(stream(), shifted, inverse_, real_, n_, scale_);
  Shape shape = prim->output_shapes(inputs)[0];
  Dtype dtype = real_ && inverse_ ? float32 : complex64;
  return {{array(shape, dtype, prim, {inputs[0]})}, {b}};
}

bool FFT::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(*this) && other.state() == state();
}

PrimitiveState FFT::state() const {
  return {{"axes", to_i64(axes_)},
          {"inverse", inverse_},
          {"real", real_},
          {"n", static_cast<int64_t>(n_)},
          {"scale", scale_}};
}

LOOM_REGISTER_PRIMITIVE(FFT, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<FFT>(s, state_get<std::vector<int>>(st, "FFT", "axes"),
                               state_get<bool>(st, "FFT", "inverse"),
                               state_get<bool>(st, "FFT", "real"), state_get<int>(st, "FFT", "n"),
                               state_get<double>(st, "FFT", "scale"));
});

// --- Hadamard --------------------------------------------------------------

int hadamard_m(int64_t n) {
  for (int m : {28, 20, 12, 1}) {
    if (n % m != 0) continue;
    int64_t k = n / m;
    if ((k & (k - 1)) == 0) return m;
  }
  return 0;
}

std::vector<array> Hadamard::vjp(const std::vector<array>&, const std::vector<array>& cotangents,
                                 const std::vector<int>&, const std::vector<array>&) {
  const array& ct = cotangents[0];
  return {array(ct.shape(), ct.dtype(), std::make_shared<Hadamard>(stream(), scale_, !transpose_),
                {ct})};
}

std::vector<array> Hadamard::jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents, const std::vector<int>&) {
  array t = astype(tangents[0], primals[0].dtype(), stream());
  return {
      array(t.shape(), t.dtype(), std::make_shared<Hadamard>(stream(), scale_, transpose_), {t})};
}

std::pair<std::vector<array>, std::vector<int>> Hadamard::vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes) {
  array x = inputs[0];
  int b = axes[0];
  if (b >= 0 && b == x.ndim() - 1) {
    x = moveaxis(x, b, 0, stream());
    b = 0;
  }
  return {
      {array(x.shape(), x.dtype(), std::make_shared<Hadamard>(stream(), scale_, transpose_), {x})},
      {b}};
}

bool Hadamard::is_equivalent(const Primitive& other) const {
  return typeid(other) == typeid(*this) && other.state() == state();
}

LOOM_REGISTER_PRIMITIVE(Hadamard, [](Stream s, const PrimitiveState& st) {
  return std::make_shared<Hadamard>(s, state_get<double>(st, "Hadamard", "scale"),
                                    state_get<bool>(st, "Hadamard", "transpose"));
});

} // namespace loom
