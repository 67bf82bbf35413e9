// Trees of arrays: arbitrarily nested lists, tuples and dicts. One
// implementation, used by eval, the transforms and the Python package.
#pragma once

#include <nanobind/nanobind.h>

#include <functional>
#include <string>
#include <vector>

#include "loom/array.h"

namespace loom::python {

namespace nb = nanobind;

bool is_array(nb::handle h);

// Calls `visit` on every leaf, depth first, lists/tuples in order and dicts in
// insertion order.
void tree_visit(nb::handle tree, const std::function<void(nb::handle)>& visit);

// A tree of the same structure with every leaf replaced by fn(leaf).
nb::object tree_map(nb::handle tree, const std::function<nb::object(nb::handle)>& fn);

// The array leaves in order. With strict, any other leaf raises
// "[tree_flatten] The argument should contain only arrays".
std::vector<array> tree_flatten(nb::handle tree, bool strict = true);

// A copy of `tree` whose array leaves (with strict: all leaves) are replaced,
// in order, by values[index], values[index+1], ...; advances `index`.
nb::object tree_fill(nb::handle tree, const std::vector<array>& values, size_t& index,
                     bool strict = true);

// For each array leaf of `tree`, the leaf of `prefix` whose subtree holds it
// (e.g. vmap's in_axes against the arguments). Raises naming `op` when
// `prefix` is not a prefix of `tree`.
std::vector<nb::object> tree_broadcast_prefix(nb::handle prefix, nb::handle tree,
                                              const char* op);

} // namespace loom::python
