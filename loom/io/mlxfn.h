// Pieces shared by the .mlxfn reader (mlxfn.cpp) and its table of MLX
// primitives (mlxfn_ops.cpp): one tape entry as read from MLX's file.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "loom/array.h"

namespace loom::io::mlx {

// A value of a primitive's state.
using MlxValue =
    std::variant<int64_t, double, std::vector<int>, Dtype, std::string, std::vector<int64_t>>;
using MlxState = std::vector<MlxValue>;

struct MlxType {
  Shape shape;
  Dtype dtype = float32;
};

struct MlxEntry {
  enum Kind { input, constant, node } kind = input;
  uint64_t id = 0;
  array value{0.0f}; // constant
  std::string name;  // node
  MlxState state;
  std::vector<uint64_t> inputs;
  std::vector<uint64_t> outputs; // all output ids (the entry's id when one)
  std::vector<MlxType> types;
};

// The state layout of MLX primitive `name`, one letter per field (see
// mlxfn_ops.cpp), or null when Loom's reader does not know it.
const char* state_layout(const std::string& name);

// Computes MLX primitive `e` with Loom ops on `in`; false when Loom maps no
// op onto it. Raises for states Loom cannot follow, naming the primitive.
bool run_primitive(const MlxEntry& e, const std::vector<array>& in, std::vector<array>& out);

} // namespace loom::io::mlx
