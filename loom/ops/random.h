// Counter-based random numbers (Threefry-2x32): a key plus a counter gives
// the same bits on every device and thread.
#pragma once

#include <optional>

#include "loom/array.h"

namespace loom::random {

void seed(uint64_t seed);
// A PRNG key: uint32 array of shape (2,).
array key(uint64_t seed);
// `num` new keys from `key`, shape (num, 2).
array split(const array& key, int num = 2, StreamOrDevice s = {});
// The thread-local default key (the seed state); each use advances it.
array& default_key();
array next_key();

array bits(const Shape& shape, int width = 4, const std::optional<array>& key = std::nullopt,
           StreamOrDevice s = {});
array uniform(const array& low, const array& high, const Shape& shape, Dtype dtype = float32,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
array normal(const Shape& shape, Dtype dtype = float32, const array& loc = array(0.0f),
             const array& scale = array(1.0f), const std::optional<array>& key = std::nullopt,
             StreamOrDevice s = {});

// --- Distributions built from uniform (the same draws as MLX for a key) ---

// True with probability p (shape: that of p unless given).
array bernoulli(const array& p, const std::optional<Shape>& shape = std::nullopt,
                const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
// Integers in [low, high) of an integer (or bool) dtype.
array randint(const array& low, const array& high, const Shape& shape, Dtype dtype = int32,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
array gumbel(const Shape& shape, Dtype dtype = float32,
             const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
// Category indices (uint32) from unnormalised log-probabilities along `axis`;
// at most one of `shape` and `num_samples` may be given.
array categorical(const array& logits, int axis = -1,
                  const std::optional<Shape>& shape = std::nullopt,
                  std::optional<int> num_samples = std::nullopt,
                  const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
array laplace(const Shape& shape, Dtype dtype = float32, float loc = 0.0f, float scale = 1.0f,
              const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

// A random order of arange(n) (uint32), or of x along `axis`.
array permutation(int n, const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});
array permutation(const array& x, int axis = 0, const std::optional<array>& key = std::nullopt,
                  StreamOrDevice s = {});
// Normal samples truncated to [lower, upper] (shape: the bounds' broadcast
// unless given).
array truncated_normal(const array& lower, const array& upper,
                       const std::optional<Shape>& shape = std::nullopt, Dtype dtype = float32,
                       const std::optional<array>& key = std::nullopt, StreamOrDevice s = {});

// Jointly normal samples with mean (..., n) and positive semi-definite
// covariance (..., n, n): mean + z @ sqrt(cov), the square root from the SVD
// (computed on the CPU). Output shape: shape (or the broadcast batch of mean
// and cov) + (n,). float32 only, as MLX.
array multivariate_normal(const array& mean, const array& cov, const Shape& shape = {},
                          Dtype dtype = float32, const std::optional<array>& key = std::nullopt,
                          StreamOrDevice s = {});

} // namespace loom::random
