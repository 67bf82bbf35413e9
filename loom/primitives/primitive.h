// The Primitive interface: what every operation in the graph must provide.
// One file per family under primitives/ implements the subclasses; their
// kernels live beside them in backend/<device>/.
#pragma once

#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "loom/array.h"
#include "loom/primitives/state.h"
#include "loom/stream.h"

namespace loom {

// Traits compile and the scheduler query instead of inspecting types.
struct PrimitiveTraits {
  bool elementwise = false; // output element i depends only on input elements i
  bool broadcast = false;   // a pure broadcast/reshape-like view
  bool reduction = false;
  bool noop = false; // identity at execution (Copy, StopGradient)
  bool multi_output = false;
  // Element-wise, but dearer per element than a pass over memory (exp, erf,
  // tanh, ...): compile reads such a value from where it was computed
  // rather than computing it again in another region.
  bool costly = false;
};

enum class TransformKind { vjp, jvp, vmap };

class Primitive {
 public:
  explicit Primitive(Stream stream) : stream_(stream) {}
  virtual ~Primitive() = default;
  Primitive(const Primitive&) = delete;
  Primitive& operator=(const Primitive&) = delete;

  const Stream& stream() const { return stream_; }
  Device device() const { return stream_.device; }

  // Evaluation per backend. Inputs are evaluated; outputs have shape and
  // dtype and receive their data here.
  virtual void eval_cpu(const std::vector<array>& inputs, std::vector<array>& outputs) = 0;
  virtual void eval_gpu(const std::vector<array>& inputs, std::vector<array>& outputs);

  // Output shapes from input shapes alone (shapeless compile, export).
  virtual std::vector<Shape> output_shapes(const std::vector<array>& inputs);

  // Reverse mode: cotangents for inputs listed in argnums.
  virtual std::vector<array> vjp(const std::vector<array>& primals,
                                 const std::vector<array>& cotangents,
                                 const std::vector<int>& argnums,
                                 const std::vector<array>& outputs);
  // Forward mode: one tangent per output, given tangents of inputs in argnums.
  virtual std::vector<array> jvp(const std::vector<array>& primals,
                                 const std::vector<array>& tangents,
                                 const std::vector<int>& argnums);
  // Batched form: axes[i] is the mapped axis of inputs[i], or -1 if unmapped.
  // Returns the outputs and their mapped axes.
  virtual std::pair<std::vector<array>, std::vector<int>> vmap(const std::vector<array>& inputs,
                                                               const std::vector<int>& axes);

  // Same computation on the same inputs (for CSE in compile).
  virtual bool is_equivalent(const Primitive& other) const { return false; }
  virtual const char* name() const = 0;
  // Every constructor parameter as a named field (printing, CSE, export);
  // a primitive with a registered factory (state.h) is rebuilt from it.
  virtual PrimitiveState state() const { return {}; }
  // Parameters for printing, e.g. "axes=(0, 1)"; defaults to the state.
  virtual void print_params(std::ostream& os) const { print_state(os, state()); }
  virtual PrimitiveTraits traits() const { return {}; }

  std::string describe() const; // "Name(params)"

  // How many leading inputs a transform of this kind must follow through;
  // the rest are carried but not transformed (custom_function's body).
  virtual int transform_input_count(TransformKind, int num_inputs) const { return num_inputs; }

 protected:
  [[noreturn]] void not_implemented(const char* transform) const;

 private:
  Stream stream_;
};

} // namespace loom
