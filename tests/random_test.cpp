// Random numbers: Threefry known answers, MLX-identical keys and samples,
// determinism, independence, moments, errors and speed-relevant paths.
#include "loom/ops/random.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "loom/backend/cpu/thread_pool.h"
#include "loom/ops/creation.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"
#include "loom/ops/slice.h"
#include "loom/primitives/random.h"
#include "loom/transforms/transforms.h"

using namespace loom;

namespace {

template <typename T>
std::vector<T> values(array a) {
  a = copy(a);
  a.eval();
  return std::vector<T>(a.data<T>(), a.data<T>() + a.size());
}

std::vector<uint32_t> float_bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * 4);
  return out;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no exception";
}

struct Moments {
  double mean = 0, var = 0, skew = 0, kurt = 0;
};

Moments moments(const std::vector<float>& v) {
  Moments m;
  for (float x : v) m.mean += x;
  m.mean /= v.size();
  for (float x : v) {
    double d = x - m.mean;
    m.var += d * d;
    m.skew += d * d * d;
    m.kurt += d * d * d * d;
  }
  m.var /= v.size();
  m.skew /= v.size() * std::pow(m.var, 1.5);
  m.kurt /= v.size() * m.var * m.var;
  return m;
}

} // namespace

TEST(RandomThreefry, KnownAnswers) {
  // Random123's known-answer vectors for threefry2x32 with 20 rounds.
  auto a = threefry::hash(0, 0, 0, 0);
  EXPECT_EQ(a.first, 0x6b200159u);
  EXPECT_EQ(a.second, 0x99ba4efeu);
  auto b = threefry::hash(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(b.first, 0x1cb996fcu);
  EXPECT_EQ(b.second, 0xbb002be7u);
  auto c = threefry::hash(0x13198a2eu, 0x03707344u, 0x243f6a88u, 0x85a308d3u);
  EXPECT_EQ(c.first, 0xc4923a9cu);
  EXPECT_EQ(c.second, 0x483df7a0u);
}

TEST(RandomKey, KeysAndSplitsMatchMlx) {
  EXPECT_EQ(values<uint32_t>(random::key(0)), (std::vector<uint32_t>{0, 0}));
  EXPECT_EQ(values<uint32_t>(random::key(1)), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(values<uint32_t>(random::key((1ull << 32) + 5)), (std::vector<uint32_t>{1, 5}));
  array k = random::key(0);
  array s = random::split(k);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(values<uint32_t>(s),
            (std::vector<uint32_t>{4146024105u, 967050713u, 2718843009u, 1272950319u}));
  EXPECT_EQ(values<uint32_t>(random::split(k, 3)),
            (std::vector<uint32_t>{2467461003u, 428148500u, 3186719485u, 3840466878u, 2562233961u,
                                   1946702221u}));
  EXPECT_EQ(values<uint32_t>(random::split(k, 1)),
            (std::vector<uint32_t>{928981903u, 3453687069u}));
  EXPECT_EQ(random::split(k, 0).shape(), (Shape{0, 2}));
  EXPECT_EQ(values<uint32_t>(random::split(random::key(42), 3)),
            (std::vector<uint32_t>{3134548294u, 3733159049u, 3746501087u, 894150801u, 801545058u,
                                   2363201431u}));
}

TEST(RandomUniform, MatchesMlxBitForBit) {
  array k = random::key(0);
  EXPECT_EQ(values<float>(random::uniform(array(0.0f), array(1.0f), {4}, float32, k)),
            (std::vector<float>{0.9653214812278748f, 0.22515903413295746f, 0.6330299973487854f,
                                0.2963818311691284f}));
  // Odd counts take the middle word from counter (h, 0).
  EXPECT_EQ(values<float>(random::uniform(array(0.0f), array(1.0f), {3}, float32, k)),
            (std::vector<float>{0.9653214812278748f, 0.3146817088127136f, 0.6330299973487854f}));
  EXPECT_EQ(values<float>(random::uniform(array(0.0f), array(1.0f), {1}, float32, k)),
            (std::vector<float>{0.41845712065696716f}));
  EXPECT_EQ(float_bits(values<float>(
                random::uniform(array(0.0f), array(1.0f), {5}, float32, random::key(42)))),
            (std::vector<uint32_t>{0x3f3ad569, 0x3f5e837d, 0x3e49270e, 0x3e552ea2, 0x3e3f1a6e}));
  auto u =
      values<float>(random::uniform(array(0.0f), array(1.0f), {1001}, float32, random::key(1)));
  EXPECT_EQ((std::vector<uint32_t>{bits_of(u[0]), bits_of(u[499]), bits_of(u[500]), bits_of(u[501]),
                                   bits_of(u[1000])}),
            (std::vector<uint32_t>{0x3efc4be0, 0x3eb665d6, 0x3f2c4646, 0x3db3e64d, 0x3c56885c}));
  // The layout depends on the element count only, not on the shape.
  auto m =
      values<float>(random::uniform(array(0.0f), array(1.0f), {10, 100}, float32, random::key(1)));
  EXPECT_EQ(
      (std::vector<uint32_t>{bits_of(m[0]), bits_of(m[499]), bits_of(m[500]), bits_of(m[999])}),
      (std::vector<uint32_t>{0x3e1c2da5, 0x3e5e8260, 0x3f0ab441, 0x3ede41c8}));
  // float16 rounds the float32 sample once.
  auto h = values<float16_t>(random::uniform(array(0.0f), array(1.0f), {4}, float16, k));
  EXPECT_EQ((std::vector<uint16_t>{h[0].bits, h[1].bits, h[2].bits, h[3].bits}),
            (std::vector<uint16_t>{15289, 13109, 14608, 13502}));
}

TEST(RandomNormal, MatchesMlx) {
  array k = random::key(0);
  auto n = values<float>(random::normal({4}, float32, array(0.0f), array(1.0f), k));
  std::vector<float> mlx{1.8160871267318726f, -0.7548847794532776f, 0.339889258146286f,
                         -0.5348353385925293f};
  EXPECT_EQ(n, mlx);
  auto n5 = float_bits(
      values<float>(random::normal({5}, float32, array(0.0f), array(1.0f), random::key(42))));
  std::vector<uint32_t> mlx5{0x3f1cbd6d, 0x3f8fb0fc, 0xbf5abad0, 0xbf500f3b, 0xbf63f190};
  EXPECT_EQ(n5, mlx5);
  auto big =
      values<float>(random::normal({2000}, float32, array(0.0f), array(1.0f), random::key(5)));
  std::vector<uint32_t> mlx_big{0x3fe0bd2c, 0x3c61481f, 0x3ebaec75, 0x3db658b3, 0x3f959f30};
  std::vector<size_t> at{0, 1, 999, 1000, 1999};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(bits_of(big[at[i]]), mlx_big[i]) << at[i];
  // complex64: two normals per element, each scaled by 1/sqrt(2).
  auto c = values<complex64_t>(random::normal({2}, complex64, array(0.0f), array(1.0f), k));
  EXPECT_NEAR(c[0].real(), 1.2841675281524658f, 1e-6f);
  EXPECT_NEAR(c[0].imag(), -0.5337841510772705f, 1e-6f);
  EXPECT_NEAR(c[1].real(), 0.24033799767494202f, 1e-6f);
  EXPECT_NEAR(c[1].imag(), -0.3781857192516327f, 1e-6f);
  // float64: the same uniforms, inverted in double precision (MLX evaluates
  // the float polynomial in double, about 1e-7 away from the exact inverse).
  auto d = values<double>(random::normal({3}, float64, array(0.0f), array(1.0f), k));
  std::vector<double> mlx_d{1.8160871346723506, -0.48262301438921695, 0.3398892558654964};
  std::vector<float> u3{0.9653214812278748f, 0.3146817088127136f, 0.6330299973487854f};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(d[i], mlx_d[i], 3e-7 * std::fabs(mlx_d[i]));
    const double symmetric = 2.0f * u3[i] - 0x1.fffffep-1f;
    EXPECT_NEAR(std::erf(d[i] / std::sqrt(2.0)), symmetric, 1e-15);
  }
}

TEST(RandomDefaultKey, SeedAndSequenceMatchMlx) {
  random::seed(123);
  auto a = float_bits(values<float>(random::uniform(array(0.0f), array(1.0f), {3})));
  auto b = float_bits(values<float>(random::uniform(array(0.0f), array(1.0f), {3})));
  EXPECT_EQ(a, (std::vector<uint32_t>{0x3e91965d, 0x3e850067, 0x3f1ce011}));
  EXPECT_EQ(b, (std::vector<uint32_t>{0x3f6a6e0f, 0x3e42e430, 0x3da27519}));
  // next_key hands out split(state)[1] and keeps split(state)[0].
  random::seed(0);
  array handed = random::next_key();
  EXPECT_EQ(values<uint32_t>(handed), (std::vector<uint32_t>{2718843009u, 1272950319u}));
  EXPECT_EQ(values<uint32_t>(random::default_key()),
            (std::vector<uint32_t>{4146024105u, 967050713u}));
  // Reseeding replays the sequence.
  random::seed(7);
  auto first = values<float>(random::normal({16}));
  random::seed(7);
  EXPECT_EQ(values<float>(random::normal({16})), first);
  EXPECT_NE(values<float>(random::normal({16})), first);
}

TEST(RandomDefaultKey, ThreadLocalState) {
  random::seed(99);
  array main_key = random::default_key();
  std::vector<uint32_t> other;
  std::thread t([&] {
    random::seed(5);
    other = values<uint32_t>(random::default_key());
  });
  t.join();
  EXPECT_EQ(other, (std::vector<uint32_t>{0, 5}));
  EXPECT_EQ(values<uint32_t>(random::default_key()), values<uint32_t>(main_key));
}

TEST(RandomDefaultKey, LazyStateStaysLazy) {
  // A state that is not evaluated (as under compile) advances through the graph.
  array lazy_state_source = random::split(random::key(0), 1);
  random::default_key() = reshape(lazy_state_source, {2});
  array handed = random::next_key();
  EXPECT_TRUE(handed.has_node() || !handed.is_available());
  // Same words as the eager split of that key.
  auto src = values<uint32_t>(lazy_state_source);
  auto pair = values<uint32_t>(random::split(array(src.data(), {2}, uint32)));
  EXPECT_EQ(values<uint32_t>(handed), (std::vector<uint32_t>{pair[2], pair[3]}));
  EXPECT_EQ(values<uint32_t>(random::default_key()), (std::vector<uint32_t>{pair[0], pair[1]}));
}

TEST(RandomBitsWidths, BytesAreTheWordsPrefix) {
  array k = random::key(11);
  auto words = values<uint32_t>(random::bits({3}, 4, k));
  auto bytes = values<uint8_t>(random::bits({6}, 1, k)); // 6 bytes = 2 words
  auto two_words = values<uint32_t>(random::bits({2}, 4, k));
  EXPECT_EQ(std::memcmp(bytes.data(), two_words.data(), 6), 0);
  auto halves = values<uint16_t>(random::bits({3}, 2, k)); // 6 bytes as well
  EXPECT_EQ(std::memcmp(halves.data(), two_words.data(), 6), 0);
  EXPECT_EQ(random::bits({2, 3}, 1, k).dtype(), uint8);
  EXPECT_EQ(random::bits({2, 3}, 2, k).dtype(), uint16);
  EXPECT_EQ(words.size(), 3u);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { random::bits({2}, 3, k); }),
            "[bits] Bit width must be in {1, 2, 4} but got 3.");
}

TEST(RandomBitsWidths, DeterministicAcrossThreadsAndChunks) {
  // 4M words computed by the pool equal a single-threaded reference.
  array k = random::key(2024);
  const size_t n = 1 << 22;
  auto got = values<uint32_t>(random::bits({static_cast<int32_t>(n)}, 4, k));
  const size_t half = n / 2;
  for (size_t j : {size_t{0}, size_t{1}, half - 1, n / 3, size_t{123457}}) {
    auto [x0, x1] =
        threefry::hash(0, 2024, static_cast<uint32_t>(j), static_cast<uint32_t>(j + half));
    ASSERT_EQ(got[j], x0) << j;
    ASSERT_EQ(got[j + half], x1) << j;
  }
  EXPECT_EQ(values<uint32_t>(random::bits({static_cast<int32_t>(n)}, 4, k)), got);
}

TEST(RandomSplit, IndependentStreams) {
  array keys = random::split(random::key(3), 2);
  array k0 = reshape(slice(keys, {0, 0}, {1, 2}, {1, 1}), {2});
  array k1 = reshape(slice(keys, {1, 0}, {2, 2}, {1, 1}), {2});
  const int n = 1 << 20;
  auto a = values<float>(random::normal({n}, float32, array(0.0f), array(1.0f), k0));
  auto b = values<float>(random::normal({n}, float32, array(0.0f), array(1.0f), k1));
  EXPECT_NE(a, b);
  double corr = 0;
  for (int i = 0; i < n; ++i) corr += double(a[i]) * b[i];
  corr /= n;
  EXPECT_LT(std::fabs(corr), 5.0 / std::sqrt(double(n))); // ~5 sigma
  // Lagged self-correlation is also absent.
  double lag = 0;
  for (int i = 0; i + 1 < n; ++i) lag += double(a[i]) * a[i + 1];
  lag /= n - 1;
  EXPECT_LT(std::fabs(lag), 5.0 / std::sqrt(double(n)));
  // Same key, same values.
  EXPECT_EQ(values<float>(random::normal({n}, float32, array(0.0f), array(1.0f), k0)), a);
}

TEST(RandomMoments, UniformAndNormalOnAMillion) {
  const int n = 1 << 20;
  auto u = values<float>(random::uniform(array(0.0f), array(1.0f), {n}, float32, random::key(8)));
  Moments mu = moments(u);
  EXPECT_NEAR(mu.mean, 0.5, 0.002);
  EXPECT_NEAR(mu.var, 1.0 / 12, 0.001);
  EXPECT_NEAR(mu.skew, 0.0, 0.01);
  EXPECT_NEAR(mu.kurt, 1.8, 0.01);
  float lo = 1, hi = 0;
  for (float x : u) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_GE(lo, 0.0f);
  EXPECT_LT(hi, 1.0f);
  // Histogram: 10 bins, each within 5 sigma of n / 10.
  std::vector<int> bins(10, 0);
  for (float x : u) bins[std::min(9, static_cast<int>(x * 10))]++;
  for (int c : bins) EXPECT_NEAR(c, n / 10.0, 5 * std::sqrt(n * 0.09));

  auto z = values<float>(random::normal({n}, float32, array(0.0f), array(1.0f), random::key(9)));
  Moments mz = moments(z);
  EXPECT_NEAR(mz.mean, 0.0, 0.005);
  EXPECT_NEAR(mz.var, 1.0, 0.005);
  EXPECT_NEAR(mz.skew, 0.0, 0.01);
  EXPECT_NEAR(mz.kurt, 3.0, 0.03);
  int beyond = 0;
  for (float x : z) beyond += std::fabs(x) > 1.959964f;
  EXPECT_NEAR(beyond / double(n), 0.05, 0.002);
  for (float x : z) ASSERT_TRUE(std::isfinite(x));

  auto h =
      values<bfloat16_t>(random::uniform(array(0.0f), array(1.0f), {n}, bfloat16, random::key(10)));
  for (auto x : h) ASSERT_LT(static_cast<float>(x), 1.0f); // stays in [0, 1) after rounding
}

TEST(RandomErrors, MatchMlx) {
  array k = random::key(0);
  EXPECT_EQ(error_of<std::invalid_argument>(
                [&] { random::uniform(array(0.0f), array(1.0f), {2}, int32, k); }),
            "[uniform] Can only generate uniform numbers with real floating point type.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              random::uniform(array({0.0f, 10.0f}), array(11.0f), {3}, float32, k);
            }),
            "[broadcast_shapes] Shapes (3) and (2) cannot be broadcast.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              random::uniform(array({0.0f, 10.0f}), array(11.0f), {}, float32, k);
            }),
            "[uniform] Cannot generate random values of shape () from broadcasted shape (2).");
  EXPECT_EQ(error_of<std::invalid_argument>(
                [&] { random::uniform(array(0.0f), array(1.0f), {-1}, float32, k); }),
            "[bits] Negative dimensions not allowed.");
  EXPECT_EQ(error_of<std::invalid_argument>(
                [&] { random::normal({2}, int32, array(0.0f), array(1.0f), k); }),
            "[normal] Only floating point and complex64 types are supported.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              random::split(array({1u, 2u, 3u}, {3}, uint32));
            }),
            "[bits] Expected key shape (2) but received (3).");
  EXPECT_EQ(error_of<std::invalid_argument>([&] {
              random::split(array({1, 2}));
            }),
            "[bits] Expected key type uint32 but received int32.");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { random::split(k, -1); }),
            "[bits] Negative dimensions not allowed.");
}

TEST(RandomSpeed, ThirtyTwoMillionValuesUseThePool) {
  // Not a timing assertion: checks that a large request is correct at the
  // ends and in the middle (the pool splits it by counter range).
  const int n = 32 << 20;
  array u = random::uniform(array(0.0f), array(1.0f), {n}, float32, random::key(1));
  auto t0 = std::chrono::steady_clock::now();
  u.eval();
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);
  const float* p = u.data<float>();
  const size_t half = n / 2;
  for (size_t j : {size_t{0}, half - 1, size_t{777777}}) {
    auto [x0, x1] = threefry::hash(0, 1, static_cast<uint32_t>(j), static_cast<uint32_t>(j + half));
    ASSERT_EQ(p[j], std::min(static_cast<float>(x0) * 0x1p-32f, 0x1.fffffep-1f));
    ASSERT_EQ(p[j + half], std::min(static_cast<float>(x1) * 0x1p-32f, 0x1.fffffep-1f));
  }
  RecordProperty("uniform_32M_ms", std::to_string(ms.count()));
  std::printf("uniform 32M float32: %.1f ms on %d threads\n", ms.count(), cpu::num_threads());
  array z = random::normal({n}, float32, array(0.0f), array(1.0f), random::key(1));
  t0 = std::chrono::steady_clock::now();
  z.eval();
  ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);
  std::printf("normal 32M float32: %.1f ms on %d threads\n", ms.count(), cpu::num_threads());
  EXPECT_TRUE(std::isfinite(z.data<float>()[n - 1]));
}

namespace {

// The element-wise family may not be linked yet while families land in
// parallel; tests that compose with it skip until it is.
} // namespace

TEST(RandomVmap, BatchOfKeysGivesOneSamplePerKey) {
  array keys = random::split(random::key(3), 3); // (3, 2)
  auto f = [](const std::vector<array>& in) {
    return std::vector<array>{random::uniform(array(0.0f), array(1.0f), {2}, float32, in[0]),
                              random::normal({2, 2}, float32, array(0.0f), array(1.0f), in[0])};
  };
  auto batched = vmap(f, {0}, {0, 0})({keys});
  EXPECT_EQ(batched[0].shape(), (Shape{3, 2}));
  EXPECT_EQ(batched[1].shape(), (Shape{3, 2, 2}));
  auto kv = values<uint32_t>(keys);
  std::vector<float> want_u, want_n;
  for (int i = 0; i < 3; ++i) {
    array k(std::vector<uint32_t>{kv[2 * i], kv[2 * i + 1]}, {2}, uint32);
    auto u = values<float>(random::uniform(array(0.0f), array(1.0f), {2}, float32, k));
    auto n = values<float>(random::normal({2, 2}, float32, array(0.0f), array(1.0f), k));
    want_u.insert(want_u.end(), u.begin(), u.end());
    want_n.insert(want_n.end(), n.begin(), n.end());
  }
  // MLX: vmap over keys equals separate calls (0.09900643, 0.48963368, ...).
  EXPECT_EQ(values<float>(batched[0]), want_u);
  EXPECT_NEAR(values<float>(batched[0])[0], 0.09900642931461334f, 0);
  EXPECT_EQ(values<float>(batched[1]), want_n);
  // Keys batched along their second axis.
  auto by_column = vmap(f, {1}, {0, 0})({transpose(keys)});
  EXPECT_EQ(values<float>(by_column[0]), want_u);
  // split under vmap.
  auto splits =
      vmap([](const std::vector<array>& in) { return std::vector<array>{random::split(in[0], 2)}; },
           {0}, {0})({keys});
  EXPECT_EQ(splits[0].shape(), (Shape{3, 2, 2}));
}

TEST(RandomBounds, LowHighLocScaleMatchMlx) {
  array k = random::key(0);
  auto u = float_bits(
      values<float>(random::uniform(array({0.0f, 10.0f}), array(11.0f), {3, 2}, float32, k)));
  EXPECT_EQ(u, (std::vector<uint32_t>{0x40ca3965, 0x41219850, 0x41029605, 0x412e4e8e, 0x40d1fdce,
                                      0x41274085}));
  auto n = float_bits(values<float>(random::normal({2}, float32, array(1.0f), array(2.0f), k)));
  EXPECT_EQ(n, (std::vector<uint32_t>{0xbf11cccc, 0x402d9ffe}));
  // low > high is allowed: the samples lie in (high, low].
  auto r = values<float>(random::uniform(array(2.0f), array(1.0f), {3}, float32, k));
  EXPECT_NEAR(r[0], 1.0346784591674805f, 1e-6f);
}

TEST(RandomBounds, GradientsFlowThroughBounds) {
  array k = random::key(0);
  // d/dlow sum(low + (high - low) u) = sum(1 - u); MLX gives 1.08697 for this key.
  auto fn = [&](const std::vector<array>& in) {
    return std::vector<array>{sum(random::uniform(in[0], array(5.0f), {3}, float32, k))};
  };
  auto [outs, grads] = vjp(fn, {array(1.0f)}, {array(1.0f)});
  EXPECT_NEAR(values<float>(grads[0])[0], 1.08697f, 1e-5f);
  auto scale_fn = [&](const std::vector<array>& in) {
    return std::vector<array>{sum(random::normal({3}, float32, array(0.0f), in[0], k))};
  };
  auto [o2, g2] = vjp(scale_fn, {array(2.0f)}, {array(1.0f)});
  EXPECT_NEAR(values<float>(g2[0])[0], 1.67335f, 1e-5f); // sum of the standard normals, as MLX
}
