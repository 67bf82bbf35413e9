// Function transforms on flat lists of arrays. The Python layer flattens
// trees (argnums, argnames, dicts, lists, tuples) onto these.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "loom/array.h"

namespace loom {

using ArrayFn = std::function<std::vector<array>(const std::vector<array>&)>;

// Reverse mode: returns fun(primals) and the cotangents of the primals.
std::pair<std::vector<array>, std::vector<array>> vjp(const ArrayFn& fun,
                                                      const std::vector<array>& primals,
                                                      const std::vector<array>& cotangents);
// Forward mode: returns fun(primals) and the tangents of the outputs.
std::pair<std::vector<array>, std::vector<array>> jvp(const ArrayFn& fun,
                                                      const std::vector<array>& primals,
                                                      const std::vector<array>& tangents);

// fun's first output must be a scalar; returns (outputs, gradients of the
// primals listed in argnums).
using ValueAndGradFn =
    std::function<std::pair<std::vector<array>, std::vector<array>>(const std::vector<array>&)>;
ValueAndGradFn value_and_grad(const ArrayFn& fun, std::vector<int> argnums);

// Vectorises fun: in_axes[i] is the mapped axis of input i (-1: not mapped),
// out_axes[j] where output j's mapped axis goes.
ArrayFn vmap(const ArrayFn& fun, std::vector<int> in_axes, std::vector<int> out_axes);

// vmap with the output axes chosen once the outputs are known (the Python
// layer matches an out_axes tree against the tree fun returned).
using OutAxesFn = std::function<std::vector<int>(const std::vector<array>& outputs)>;
std::vector<array> vmap_apply(const ArrayFn& fun, const std::vector<array>& inputs,
                              const std::vector<int>& in_axes, const OutAxesFn& choose_out_axes);

// Recomputes fun's forward pass during the backward pass instead of keeping
// its intermediates.
ArrayFn checkpoint(const ArrayFn& fun);

// Custom transforms for fun. Any of the rules may be empty: the default
// transform of fun is used then.
//   vjp_rule(primals, cotangents, outputs) -> one cotangent per primal
//   jvp_rule(primals, tangents, argnums)   -> one tangent per output
//   vmap_rule(inputs, axes)                -> (outputs, output axes)
using CustomVjp = std::function<std::vector<array>(
    const std::vector<array>&, const std::vector<array>&, const std::vector<array>&)>;
using CustomJvp = std::function<std::vector<array>(
    const std::vector<array>&, const std::vector<array>&, const std::vector<int>&)>;
using CustomVmap = std::function<std::pair<std::vector<array>, std::vector<int>>(
    const std::vector<array>&, const std::vector<int>&)>;
ArrayFn custom_function(ArrayFn fun, CustomVjp vjp_rule, CustomJvp jvp_rule,
                        CustomVmap vmap_rule);

// Called when a custom_function's outputs depend on an array being
// differentiated that is not one of its inputs (its gradient will be zero).
// The Python layer turns this into a warning.
using CaptureWarningHook = void (*)(const char* message);
void set_capture_warning_hook(CaptureWarningHook hook);

} // namespace loom
