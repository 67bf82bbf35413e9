// Function export and import (seed §12.6-12.7): a function traced once by
// compile's tracer (loom/compile/graph.h), written as its graph of primitives
// (name + state, registered factories rebuild them) with its captured arrays,
// and read back as a function that replays that graph on new inputs.
//
// One file holds several traces of one function (positional count, keyword
// names, input shapes and dtypes tell them apart) and stores each captured
// array once. The file starts with a format version and the primitive set's
// version; a file of another format or of a newer primitive set is refused
// with a message saying so (MLX's .mlxfn has no version: seed §12.6).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "loom/array.h"
#include "loom/compile/graph.h"
#include "loom/io/io.h"

namespace loom::io {

// The layout of the file; bumped when it changes.
inline constexpr uint32_t kExportFormatVersion = 1;
// The meaning of primitive names and state fields; bumped when a primitive's
// state changes incompatibly (files of an older set stay readable as long as
// the fields they name still exist).
inline constexpr uint32_t kPrimitiveSetVersion = 1;

// One trace: inputs are the positional arrays, then the keyword arrays in
// the order of `keywords` (sorted).
struct ExportedTrace {
  int num_positional = 0;
  std::vector<std::string> keywords;
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  bool shapeless = false;
  compile_detail::Graph graph; // constants point into ExportedFunction::constants
};

struct ExportedFunction {
  std::vector<ExportedTrace> traces;
  std::string metadata;
};

// A function of positional and keyword arrays.
using KwFn = std::function<std::vector<array>(const std::vector<array>& args,
                                              const std::map<std::string, array>& kwargs)>;

// Called with each warning of export (the bindings raise a UserWarning).
using ExportWarning = std::function<void(const std::string& message)>;

// Traces `fun` on arrays of the shapes and dtypes of `args` and `kwargs`
// (their data is not read). Captured arrays are evaluated; when one was still
// produced by a random primitive, `warn` says so (seed §12.7). A nonzero
// `max_folded_bytes` bounds what evaluating them may allocate (imports of
// untrusted files), else it raises.
ExportedTrace trace_for_export(const KwFn& fun, const std::vector<array>& args,
                               const std::map<std::string, array>& kwargs, bool shapeless,
                               const ExportWarning& warn = nullptr, uint64_t max_folded_bytes = 0);

// Traces of one function in one file, constants stored once; the file is
// written atomically by close() (or the destructor).
class FunctionExporter {
 public:
  FunctionExporter(std::string path, KwFn fun, bool shapeless, std::string metadata = {},
                   ExportWarning warn = nullptr);
  ~FunctionExporter();
  FunctionExporter(const FunctionExporter&) = delete;
  FunctionExporter& operator=(const FunctionExporter&) = delete;

  void operator()(const std::vector<array>& args, const std::map<std::string, array>& kwargs);
  void close();
  bool closed() const { return closed_; }

 private:
  std::string path_;
  KwFn fun_;
  bool shapeless_;
  ExportWarning warn_;
  ExportedFunction function_;
  bool closed_ = false;
};

void export_function(const std::string& path, const KwFn& fun, const std::vector<array>& args,
                     const std::map<std::string, array>& kwargs, bool shapeless = false,
                     const std::string& metadata = {}, const ExportWarning& warn = nullptr);

// The bytes of the format, and back. read_function checks every count,
// length, reference and dtype against the bytes it has before allocating,
// and raises "[import_function] Invalid function file <name>: <what>." or a
// version / unknown-primitive message naming the file.
void write_function(Writer& w, const ExportedFunction& f);
ExportedFunction read_function(Reader& r);

// A function read back: calls pick the trace whose positional count,
// keywords, dtypes and (unless shapeless) shapes match.
class ImportedFunction {
 public:
  explicit ImportedFunction(ExportedFunction f) : f_(std::move(f)) {}
  std::vector<array> operator()(const std::vector<array>& args,
                                const std::map<std::string, array>& kwargs) const;
  const ExportedFunction& function() const { return f_; }
  const std::string& metadata() const { return f_.metadata; }

 private:
  ExportedFunction f_;
};

ImportedFunction import_function(const std::string& path);

// MLX's .mlxfn files (MLX 0.32.4's export_function / exporter): read_function
// reads them too (by their header); each MLX trace is replayed through Loom's
// ops into a Loom trace. An MLX primitive Loom cannot map raises an error
// naming it. Implemented in mlxfn.cpp.
bool is_mlxfn(Reader& r);
ExportedFunction read_mlxfn(Reader& r);
// Replays shapeless trace `t` on inputs of its ranks and dtypes but any
// shapes (export_replay.cpp): broadcasts follow the new shapes; a call
// needing a broadcast the trace did not have raises, naming the inputs.
std::vector<array> replay_shapeless(const ExportedTrace& t, const std::vector<array>& inputs);
// Writes `f` in MLX's .mlxfn layout, for MLX 0.32.4's import_function: the
// primitives MLX can represent that mlxfn_write.cpp maps (element-wise,
// matmul, reductions, softmax, shape ops, slices, casts); any other raises
// naming it, before anything is written. Non-shapeless traces only.
void write_mlxfn(Writer& w, const ExportedFunction& f);

// --- the callback form: the graph as records ----------------------------------

// An input, output or intermediate value: a generated name ("A", "B", ...,
// "AA"), its shape and dtype.
struct ValueInfo {
  std::string name;
  Shape shape;
  Dtype dtype;
};
struct NodeInfo {
  std::string name; // the primitive's name
  PrimitiveState state;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
};
// Everything the callback form of export_function reports about one trace.
struct TraceInfo {
  std::vector<ValueInfo> inputs;
  std::vector<std::pair<std::string, std::string>> keywords; // keyword -> input name
  std::vector<ValueInfo> outputs;
  std::vector<std::pair<std::string, array>> constants;
  std::vector<NodeInfo> nodes;
};
TraceInfo describe_trace(const ExportedTrace& t);

// --- DOT ------------------------------------------------------------------------

// The graph of the unevaluated arrays that produce `outputs`, as Graphviz DOT;
// `names` labels some arrays (others get "A", "B", ...).
void export_to_dot(std::ostream& os, const std::vector<array>& outputs,
                   const std::vector<std::pair<std::string, array>>& names = {});

} // namespace loom::io
