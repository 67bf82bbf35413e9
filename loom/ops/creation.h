// Arrays from nothing: constants, ranges, identities.
#pragma once

#include "loom/array.h"

namespace loom {

array full(Shape shape, const array& value, Dtype dtype, StreamOrDevice s = {});
array full(Shape shape, const array& value, StreamOrDevice s = {});
array zeros(const Shape& shape, Dtype dtype = float32, StreamOrDevice s = {});
array ones(const Shape& shape, Dtype dtype = float32, StreamOrDevice s = {});
array zeros_like(const array& a, StreamOrDevice s = {});
array ones_like(const array& a, StreamOrDevice s = {});
array full_like(const array& a, const array& value, StreamOrDevice s = {});
// NumPy semantics: ceil((stop - start) / step) elements.
array arange(double start, double stop, double step, Dtype dtype, StreamOrDevice s = {});
array linspace(double start, double stop, int num = 50, Dtype dtype = float32,
               StreamOrDevice s = {});
array eye(int n, int m, int k = 0, Dtype dtype = float32, StreamOrDevice s = {});
array identity(int n, Dtype dtype = float32, StreamOrDevice s = {});
// A new array with the same values in a fresh buffer.
array copy(const array& a, StreamOrDevice s = {});
array astype(const array& a, Dtype dtype, StreamOrDevice s = {});

// --- Composites ---

// The dtype arange infers, as MLX: float32 when any bound is a float, else
// int32, or int64 when a value does not fit in int32.
Dtype arange_dtype(bool any_float, bool needs_int64);
// Integer bounds: int32 (int64 when a bound needs it).
array arange(int64_t start, int64_t stop, int64_t step = 1, StreamOrDevice s = {});
// Without `endpoint` the range stops one step short of `stop`.
array linspace(double start, double stop, int num, bool endpoint, Dtype dtype = float32,
               StreamOrDevice s = {});
// Ones at and below the k-th diagonal of an n x m matrix (empty for n or m <= 0).
array tri(int n, int m, int k = 0, Dtype dtype = float32, StreamOrDevice s = {});
// A row-major copy (`allow_col_major` accepts a column-major input as it is).
array contiguous(const array& a, bool allow_col_major = false, StreamOrDevice s = {});
// Window functions of `m` points (float32).
array hanning(int m, StreamOrDevice s = {});
array hamming(int m, StreamOrDevice s = {});
array blackman(int m, StreamOrDevice s = {});
array bartlett(int m, StreamOrDevice s = {});

} // namespace loom
