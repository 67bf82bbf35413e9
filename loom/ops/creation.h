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

} // namespace loom
