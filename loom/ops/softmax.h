// Softmax and log-sum-exp: the Softmax and LogSumExp primitives
// (primitives/softmax.h) over the last axis, composites of reductions over
// other axes.
#pragma once

#include <vector>

#include "loom/array.h"

namespace loom {

// log(sum(exp(a))) over the axes, without overflow. Integer and bool inputs
// compute in float32. An empty input is an error (there is no identity).
array logsumexp(const array& a, const std::vector<int>& axes, bool keepdims = false,
                StreamOrDevice s = {});
array logsumexp(const array& a, bool keepdims = false, StreamOrDevice s = {});
// exp(a) / sum(exp(a)) over the axes; `precise` computes half-precision
// inputs in float32. Integer and bool inputs give float32.
array softmax(const array& a, const std::vector<int>& axes, bool precise = false,
              StreamOrDevice s = {});
array softmax(const array& a, bool precise = false, StreamOrDevice s = {});
} // namespace loom
