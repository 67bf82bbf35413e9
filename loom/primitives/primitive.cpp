#include "loom/primitives/primitive.h"

#include <sstream>

namespace loom {

void Primitive::not_implemented(const char* transform) const {
  throw std::invalid_argument(std::string("Primitive's ") + transform + " not implemented for " +
                              name() + ".");
}

void Primitive::eval_gpu(const std::vector<array>&, std::vector<array>&) {
  throw std::runtime_error(std::string("[") + name() +
                           "] has no GPU kernel in this build of Loom.");
}

std::vector<Shape> Primitive::output_shapes(const std::vector<array>&) {
  not_implemented("output_shapes");
}

std::vector<array> Primitive::vjp(const std::vector<array>&, const std::vector<array>&,
                                  const std::vector<int>&, const std::vector<array>&) {
  not_implemented("vjp");
}

std::vector<array> Primitive::jvp(const std::vector<array>&, const std::vector<array>&,
                                  const std::vector<int>&) {
  not_implemented("jvp");
}

std::pair<std::vector<array>, std::vector<int>> Primitive::vmap(const std::vector<array>&,
                                                                const std::vector<int>&) {
  not_implemented("vmap");
}

std::string Primitive::describe() const {
  std::ostringstream os;
  os << name();
  std::ostringstream params;
  print_params(params);
  if (!params.str().empty()) os << "(" << params.str() << ")";
  return os.str();
}

} // namespace loom
