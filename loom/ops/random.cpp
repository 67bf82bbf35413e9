#include "loom/ops/random.h"

#include <chrono>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/linalg.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/ops/sort.h"
#include "loom/ops/utils.h"
#include "loom/primitives/random.h"

namespace loom::random {

namespace {

void check_shape(const Shape& shape) {
  for (auto d : shape) {
    if (d < 0) throw std::invalid_argument("[bits] Negative dimensions not allowed.");
  }
}

// The given key, validated, or the next one from the thread's sequence.
array resolve_key(const std::optional<array>& key) {
  if (!key) return next_key();
  if (key->dtype() != uint32) {
    std::ostringstream msg;
    msg << "[bits] Expected key type uint32 but received " << key->dtype() << ".";
    throw std::invalid_argument(msg.str());
  }
  if (key->shape() != Shape{2}) {
    throw std::invalid_argument("[bits] Expected key shape (2) but received " +
                                shape_to_string(key->shape()) + ".");
  }
  return *key;
}

array sample(const Shape& shape, RandomDistribution dist, Dtype dtype,
             const std::optional<array>& key, StreamOrDevice s) {
  check_shape(shape);
  array k = resolve_key(key);
  return array(shape, dtype, std::make_shared<RandomBits>(to_stream(s), shape, dist, dtype), {k});
}

// True for a plain 0-d constant equal to `value`, so the affine step after a
// standard sample can be skipped. Arrays inside transforms (tracers) and
// unevaluated arrays never count: they may be differentiated or batched.
bool is_constant(const array& a, double value) {
  if (a.ndim() != 0 || !a.is_available() || a.is_tracer() || a.has_node()) return false;
  if (is_complex(a.dtype())) {
    return cast_element<complex64_t>(a.data<char>(), a.dtype()) ==
           complex64_t(static_cast<float>(value), 0.0f);
  }
  return cast_element<double>(a.data<char>(), a.dtype()) == value;
}

uint64_t time_seed() {
  return static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
}

// Both halves of split(key, 2), computed on the spot (no graph): the first
// becomes the new state, the second is handed out.
std::pair<array, array> split_now(const array& key) {
  const uint32_t* p = key.data<uint32_t>();
  const int64_t stride = key.strides()[0];
  const uint32_t k0 = p[0];
  const uint32_t k1 = p[stride];
  // Four words: counters (0, 2) and (1, 3).
  auto [w0, w2] = threefry::hash(k0, k1, 0, 2);
  auto [w1, w3] = threefry::hash(k0, k1, 1, 3);
  uint32_t first[2] = {w0, w1};
  uint32_t second[2] = {w2, w3};
  return {array(first, {2}, uint32), array(second, {2}, uint32)};
}

} // namespace

array key(uint64_t seed) {
  uint32_t words[2] = {static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed)};
  return array(words, {2}, uint32);
}

void seed(uint64_t s) { default_key() = key(s); }

array& default_key() {
  thread_local array state = key(time_seed());
  return state;
}

array next_key() {
  array& state = default_key();
  if (state.is_available() && !state.has_node()) {
    auto [kept, handed] = split_now(state);
    state = kept;
    return handed;
  }
  // A traced or unevaluated state (e.g. captured by compile) stays lazy.
  array pair = random::split(state, 2);
  state = reshape(slice(pair, Shape{0, 0}, Shape{1, 2}, Shape{1, 1}), {2});
  return reshape(slice(pair, Shape{1, 0}, Shape{2, 2}, Shape{1, 1}), {2});
}

array split(const array& key, int num, StreamOrDevice s) {
  return sample({num, 2}, RandomDistribution::bits, uint32, key, s);
}

array bits(const Shape& shape, int width, const std::optional<array>& key, StreamOrDevice s) {
  Dtype dtype = uint32;
  switch (width) {
    case 1:
      dtype = uint8;
      break;
    case 2:
      dtype = uint16;
      break;
    case 4:
      dtype = uint32;
      break;
    default:
      throw std::invalid_argument("[bits] Bit width must be in {1, 2, 4} but got " +
                                  std::to_string(width) + ".");
  }
  return sample(shape, RandomDistribution::bits, dtype, key, s);
}

array uniform(const array& low, const array& high, const Shape& shape, Dtype dtype,
              const std::optional<array>& key, StreamOrDevice s) {
  if (!is_floating_point(dtype)) {
    throw std::invalid_argument(
        "[uniform] Can only generate uniform numbers with real floating point type.");
  }
  Shape range_shape = broadcast_shapes(high.shape(), low.shape());
  Shape out_shape = broadcast_shapes(shape, range_shape);
  if (out_shape != shape) {
    throw std::invalid_argument("[uniform] Cannot generate random values of shape " +
                                shape_to_string(shape) + " from broadcasted shape " +
                                shape_to_string(out_shape) + ".");
  }
  array u = sample(shape, RandomDistribution::uniform, dtype, key, s);
  if (is_constant(low, 0.0) && is_constant(high, 1.0)) return u;
  Stream stream = to_stream(s);
  array lo = astype(low, dtype, stream);
  array hi = astype(high, dtype, stream);
  return add(multiply(subtract(hi, lo, stream), u, stream), lo, stream);
}

array normal(const Shape& shape, Dtype dtype, const array& loc, const array& scale,
             const std::optional<array>& key, StreamOrDevice s) {
  if (!is_floating_point(dtype) && dtype != complex64) {
    throw std::invalid_argument("[normal] Only floating point and complex64 types are supported.");
  }
  array samples = sample(shape, RandomDistribution::normal, dtype, key, s);
  Stream stream = to_stream(s);
  if (!is_constant(scale, 1.0)) samples = multiply(astype(scale, dtype, stream), samples, stream);
  if (!is_constant(loc, 0.0)) samples = add(astype(loc, dtype, stream), samples, stream);
  return samples;
}

// --- distributions built from uniform ---

array bernoulli(const array& p, const std::optional<Shape>& shape, const std::optional<array>& key,
                StreamOrDevice s) {
  array prob = is_floating_point(p.dtype()) ? p : astype(p, float32, s);
  Shape sh = shape ? *shape : prob.shape();
  return less(uniform(array(0.0f), array(1.0f), sh, float32, key, s), prob, s);
}

array randint(const array& low, const array& high, const Shape& shape, Dtype dtype,
              const std::optional<array>& key, StreamOrDevice s) {
  if (!is_integral(dtype) && dtype != bool_) {
    throw std::invalid_argument("[randint] randint only accepts integer dtypes and bool (got " +
                                dtype_name(dtype) + ").");
  }
  array u = uniform(astype(low, float32, s), astype(high, float32, s), shape, float32, key, s);
  return astype(floor(u, s), dtype, s);
}

namespace {

array standard_gumbel(const Shape& shape, Dtype dtype, const std::optional<array>& key,
                      StreamOrDevice s) {
  array u = uniform(array(0.0f), array(1.0f), shape, dtype, key, s);
  return negative(log(negative(log(u, s), s), s), s);
}

} // namespace

array gumbel(const Shape& shape, Dtype dtype, const std::optional<array>& key, StreamOrDevice s) {
  return standard_gumbel(shape, dtype, key, s);
}

array categorical(const array& logits, int axis, const std::optional<Shape>& shape,
                  std::optional<int> num_samples, const std::optional<array>& key,
                  StreamOrDevice s) {
  if (shape && num_samples) {
    throw std::invalid_argument(
        "[categorical] At most one of shape or num_samples can be specified.");
  }
  int ax = normalize_axis(axis, logits.ndim(), "categorical");
  Dtype d = is_floating_point(logits.dtype()) ? logits.dtype() : float32;
  array l = astype(logits, d, s);
  // The Gumbel-max trick: argmax(logits + Gumbel noise) samples the softmax.
  if (num_samples) {
    Shape sh = l.shape();
    sh.push_back(*num_samples);
    return argmax(add(expand_dims(l, -1, s), standard_gumbel(sh, d, key, s), s), ax, false, s);
  }
  if (shape) {
    Shape sh = *shape;
    int at = static_cast<int>(sh.size()) - l.ndim() + 1 + ax;
    if (at < 0 || at > static_cast<int>(sh.size())) {
      throw std::invalid_argument("[categorical] shape " + shape_to_string(*shape) +
                                  " does not broadcast with the logits of shape " +
                                  shape_to_string(logits.shape()) + ".");
    }
    sh.insert(sh.begin() + at, l.shape(ax));
    return argmax(add(l, standard_gumbel(sh, d, key, s), s), at, false, s);
  }
  return argmax(add(l, standard_gumbel(l.shape(), d, key, s), s), ax, false, s);
}

array laplace(const Shape& shape, Dtype dtype, float loc, float scale,
              const std::optional<array>& key, StreamOrDevice s) {
  // Inverse CDF: loc - scale * sign(u - 1/2) * log(1 - 2 |u - 1/2|).
  array u = uniform(array(0.0f), array(1.0f), shape, dtype, key, s);
  array c = subtract(u, array(0.5, dtype), s);
  array x = multiply(
      sign(c, s), log(subtract(array(1.0, dtype), multiply(array(2.0, dtype), abs(c, s), s), s), s),
      s);
  return add(multiply(x, array(scale, dtype), s), array(loc, dtype), s);
}


array multivariate_normal(const array& mean, const array& cov, const Shape& shape, Dtype dtype,
                          const std::optional<array>& key, StreamOrDevice s) {
  if (dtype != float32) {
    throw std::invalid_argument("[multivariate_normal] dtype must be float32.");
  }
  if (mean.ndim() < 1) {
    throw std::invalid_argument("[multivariate_normal] mean must have at least one dimension.");
  }
  if (cov.ndim() < 2) {
    throw std::invalid_argument("[multivariate_normal] cov must have at least two dimensions.");
  }
  if (cov.shape(-1) != cov.shape(-2)) {
    throw std::invalid_argument("[multivariate_normal] last two dimensions of cov must be equal.");
  }
  const int n = mean.shape(-1);
  if (cov.shape(-1) != n) {
    throw std::invalid_argument("[multivariate_normal] mean and cov must have compatible shapes.");
  }
  Shape batch = broadcast_shapes(Shape(mean.shape().begin(), mean.shape().end() - 1),
                                 Shape(cov.shape().begin(), cov.shape().end() - 2));
  if (!shape.empty()) batch = broadcast_shapes(shape, batch);
  // sqrt(cov) = U diag(sqrt(S)) Vᵀ: symmetric for a PSD cov, and defined
  // (unlike the Cholesky factor) for singular ones.
  std::vector<array> usv = linalg::svd(astype(cov, float32, s), true, Device(Device::cpu));
  array root = matmul(multiply(usv[0], expand_dims(sqrt(usv[1], s), -2, s), s), usv[2], s);
  Shape sample_shape = batch;
  sample_shape.push_back(n);
  array z = normal(sample_shape, dtype, array(0.0f), array(1.0f), key, s);
  array x = squeeze(matmul(expand_dims(z, -2, s), root, s), std::vector<int>{-2}, s);
  return add(x, astype(mean, dtype, s), s);
}

} // namespace loom::random

namespace loom::random {

// MLX's permutation: the order that sorts one batch of random bits.
array permutation(int n, const std::optional<array>& key, StreamOrDevice s) {
  if (n < 0) throw std::invalid_argument("[permutation] Negative size " + std::to_string(n) + ".");
  return argsort(bits({n}, 4, key, s), 0, s);
}

array permutation(const array& x, int axis, const std::optional<array>& key, StreamOrDevice s) {
  if (x.ndim() == 0) {
    throw std::invalid_argument("[permutation] Cannot permute a 0-dimensional array.");
  }
  const int ax = normalize_axis(axis, x.ndim(), "permutation");
  return take(x, permutation(x.shape(ax), key, s), ax, s);
}

// Inverse-CDF sampling between the bounds' normal CDFs (MLX's draws for a key).
array truncated_normal(const array& lower, const array& upper, const std::optional<Shape>& shape,
                       Dtype dtype, const std::optional<array>& key, StreamOrDevice s) {
  if (!is_floating_point(dtype)) {
    throw std::invalid_argument("[trunc_normal] trunc_normal only accepts floating point dtypes.");
  }
  Shape out_shape = shape ? *shape : broadcast_shapes(lower.shape(), upper.shape());
  array sqrt2 = array(std::sqrt(2.0), dtype);
  array lo = astype(lower, dtype, s);
  array hi = astype(upper, dtype, s);
  array a = erf(divide(lo, sqrt2, s), s);
  array b = erf(divide(hi, sqrt2, s), s);
  array u = uniform(a, b, out_shape, dtype, key, s);
  array out = multiply(sqrt2, erfinv(u, s), s);
  return maximum(minimum(hi, out, s), lo, s);
}

} // namespace loom::random
