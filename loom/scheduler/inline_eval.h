// Evaluating a small graph on the calling thread, bypassing the scheduler:
// how a kernel runs a composite it built from its own (evaluated) inputs
// (the convolution gradients' composite: primitives/conv.h).
#pragma once

#include <functional>
#include <vector>

#include "loom/array.h"
#include "loom/primitives/primitive.h"

namespace loom {

using InlineEval = std::function<void(Primitive&, const std::vector<array>&, std::vector<array>&)>;

// Evaluates the unscheduled nodes under `roots`, inputs first (an iterative
// walk), each by `eval` on the calling thread.
void evaluate_inline(const std::vector<array>& roots, const InlineEval& eval);

} // namespace loom
