// Whether the calling thread is tracing a function whose later calls may have
// other shapes (compile or export with shapeless=True). Ops ask it so as not
// to freeze a traced shape into a value (mean's count: ops/shape_info.h);
// the tracer in compile/ opens the scope. Ops depend on this header, not on
// the compiler.
#pragma once

namespace loom::transforms {

bool in_shapeless_trace();

// Sets the flag for its lifetime: on for a shapeless trace, off for a trace
// with fixed shapes nested in one (its shapes are the ones it will run with).
class ShapelessScope {
 public:
  explicit ShapelessScope(bool shapeless);
  ~ShapelessScope();
  ShapelessScope(const ShapelessScope&) = delete;
  ShapelessScope& operator=(const ShapelessScope&) = delete;

 private:
  bool saved_;
};

} // namespace loom::transforms
