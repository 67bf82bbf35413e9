// Pieces shared by the fused region's CPU paths: compiled.cpp (the kernel's
// entry and the general tiled path) and compiled_f32.cpp (the float32 path).
// Private to backend/cpu: the core sees only the Compiled primitive
// (loom/compile/compiled.h).
#pragma once

#include <vector>

#include "loom/array.h"
#include "loom/backend/cpu/strided.h"

namespace loom::compile_detail {

class Compiled;

// How one input of the region is read, element i of the region at a time.
struct InputPlan {
  enum Kind { dense, scalar, strided } kind = dense;
  cpu::StridedLayout<1> layout; // for strided: the input read as the region's shape
};

// Copies region elements [start, start + n) of a strided input into dst.
void gather_into(const array& in, const InputPlan& plan, size_t start, size_t n, void* dst);

// Runs the region when every value is float32 and every op is a unary or
// binary table entry defined on float (or a broadcast), giving the outputs
// their storage; returns false (having done nothing, the outputs still
// without storage) otherwise.
bool eval_f32_chain(const Compiled& c, const std::vector<array>& inputs,
                    std::vector<array>& outputs, const std::vector<InputPlan>& plans);

} // namespace loom::compile_detail
