#include "loom/transforms/shapeless.h"

namespace loom::transforms {

namespace {
thread_local bool t_shapeless = false;
} // namespace

bool in_shapeless_trace() { return t_shapeless; }

ShapelessScope::ShapelessScope(bool shapeless) : saved_(t_shapeless) { t_shapeless = shapeless; }
ShapelessScope::~ShapelessScope() { t_shapeless = saved_; }

} // namespace loom::transforms
