// MLX's primitives as Loom ops, for the .mlxfn reader (mlxfn.cpp): the
// layout of each one's serialized state (MLX writes the fields back to back,
// with no length, so an unknown primitive stops the read), and the Loom ops
// that compute it from its inputs, its state and its recorded outputs.
#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "loom/io/mlxfn.h"
#include "loom/ops.h"
#include "loom/ops/shape_info.h"

namespace loom::io::mlx {

namespace {

// The state layout of each MLX primitive Loom reads, one letter per field:
// i int32 (and enums), f float32, d float64, b bool, V vector<int32>,
// U vector<uint64> (read as ints), L vector<int64>, Q uint64, D dtype,
// s string. (MLX's fast primitives store a leading
// nullptr, which is no bytes.)
const std::unordered_map<std::string, const char*>& layouts_table() {
  static const std::unordered_map<std::string, const char*> layouts = [] {
    std::unordered_map<std::string, const char*> m;
    for (const char* n :
         {"Abs",       "Add",          "ArcCos",     "ArcCosh",       "ArcSin",      "ArcSinh",
          "ArcTan",    "ArcTan2",      "ArcTanh",    "BitwiseInvert", "Ceil",        "Conjugate",
          "Copy",      "Cos",          "Cosh",       "Divide",        "DivMod",      "Erf",
          "ErfInv",    "Exp",          "Expm1",      "Floor",         "FloorDivide", "Full",
          "Greater",   "GreaterEqual", "Imag",       "Less",          "LessEqual",   "Log1p",
          "LogAddExp", "LogicalAnd",   "LogicalNot", "LogicalOr",     "LogSumExp",   "Matmul",
          "Maximum",   "Minimum",      "Multiply",   "Negative",      "NotEqual",    "Power",
          "Real",      "Remainder",    "Round",      "Select",        "Sigmoid",     "Sign",
          "Sin",       "Sinh",         "Square",     "StopGradient",  "Subtract",    "Tan",
          "Tanh",      "Contiguous"}) {
      m[n] = "";
    }
    m["Log"] = "i";
    m["Sqrt"] = "b";
    m["Equal"] = "b";
    m["BitwiseBinary"] = "i";
    m["AsType"] = "D";
    m["Arange"] = "ddd";
    m["Broadcast"] = "V";
    m["BroadcastAxes"] = "V";
    m["Reshape"] = "V";
    m["Flatten"] = "ii";
    m["Unflatten"] = "iV";
    m["ExpandDims"] = "V";
    m["Squeeze"] = "V";
    m["Transpose"] = "V";
    m["Concatenate"] = "i";
    m["Split"] = "Vi";
    m["Slice"] = "VVV";
    m["SliceUpdate"] = "iVVV";
    m["DynamicSlice"] = "VV";
    m["DynamicSliceUpdate"] = "V";
    m["Pad"] = "VVV";
    m["Reduce"] = "iV";
    m["ArgReduce"] = "ii";
    m["Scan"] = "iibb";
    m["Sort"] = "i";
    m["ArgSort"] = "i";
    m["Partition"] = "ii";
    m["ArgPartition"] = "ii";
    m["Softmax"] = "b";
    m["AddMM"] = "ff";
    m["Gather"] = "VV";
    m["GatherAxis"] = "i";
    m["Scatter"] = "iV";
    m["ScatterAxis"] = "ii";
    m["Convolution"] = "VVVVVib";
    m["QuantizedMatmul"] = "iiib";
    m["Hadamard"] = "f";
    m["RMSNorm"] = "f";
    m["LayerNorm"] = "f";
    m["RoPE"] = "ibffb";
    m["ScaledDotProductAttention"] = "fbbbb";
    m["Quantize"] = "iiib";
    m["GatherMM"] = "bb";
    m["FFT"] = "Ubbb";
    m["RandomBits"] = "Vi";
    m["Inverse"] = "bb";
    m["Cholesky"] = "b";
    m["QRF"] = "";
    m["SVD"] = "b";
    m["Eigh"] = "sb";
    m["Eig"] = "b";
    m["View"] = "D";
    m["AsStrided"] = "VLQ";
    m["Depends"] = "";
    m["BlockMaskedMM"] = "i";
    m["GatherQMM"] = "iiibbb";
    m["NumberOfElements"] = "VbD";
    m["RMSNormVJP"] = "f";
    m["LayerNormVJP"] = "f";
    return m;
  }();
  return layouts;
}

int64_t int_at(const MlxState& st, size_t i) { return std::get<int64_t>(st.at(i)); }
double real_at(const MlxState& st, size_t i) { return std::get<double>(st.at(i)); }
const std::vector<int>& ints_at(const MlxState& st, size_t i) {
  return std::get<std::vector<int>>(st.at(i));
}

using Op = std::function<std::vector<array>(const std::vector<array>& in, const MlxEntry& e)>;

[[noreturn]] void unsupported(const MlxEntry& e, const std::string& what) {
  throw std::runtime_error("[import_function] The MLX primitive " + e.name + " " + what +
                           " has no Loom equivalent.");
}

Shape to_shape(const std::vector<int>& v) { return Shape(v.begin(), v.end()); }

// MLX's Gather: indices for `axes`, then a slice of `slice_sizes` (one per
// axis of a) at each; output = index shape + slice_sizes. Loom's gather
// takes whole slices of the other axes, so partial slices of non-indexed
// axes are cut first; indexed axes must have slice size 1.
array mlx_gather(const std::vector<array>& in, const MlxEntry& e) {
  const std::vector<int>& axes = ints_at(e.state, 0);
  const std::vector<int>& sizes = ints_at(e.state, 1);
  array a = in[0];
  std::vector<array> indices(in.begin() + 1, in.end());
  if (static_cast<int>(sizes.size()) != a.ndim()) unsupported(e, "with mismatched slice sizes");
  Shape start(a.ndim(), 0), stop = a.shape(), strides(a.ndim(), 1);
  bool cut = false;
  for (int d = 0; d < a.ndim(); ++d) {
    bool indexed = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (indexed && sizes[d] != 1) unsupported(e, "with slices wider than 1 on an indexed axis");
    if (!indexed && sizes[d] != a.shape(d)) {
      stop[d] = sizes[d];
      cut = true;
    }
  }
  if (cut) a = slice(a, start, stop, strides);
  if (axes.empty()) return reshape(a, e.types[0].shape);
  return reshape(gather(a, indices, axes), e.types[0].shape);
}

// MLX's Scatter: updates have the index shape followed by a's rank in
// slice sizes (1 on the indexed axes); Loom's take index shape + the other
// axes.
array mlx_scatter(const std::vector<array>& in, const MlxEntry& e) {
  int type = static_cast<int>(int_at(e.state, 0));
  const std::vector<int>& axes = ints_at(e.state, 1);
  const array& a = in[0];
  std::vector<array> indices(in.begin() + 1, in.end() - 1);
  array updates = in.back();
  Shape upd_shape;
  int index_rank = updates.ndim() - a.ndim();
  for (int d = 0; d < index_rank; ++d) upd_shape.push_back(updates.shape(d));
  for (int d = 0; d < a.ndim(); ++d) {
    bool indexed = std::find(axes.begin(), axes.end(), d) != axes.end();
    int size = updates.shape(index_rank + d);
    if (indexed) {
      if (size != 1) unsupported(e, "with update slices wider than 1 on an indexed axis");
    } else {
      if (size != a.shape(d)) unsupported(e, "with partial update slices");
      upd_shape.push_back(size);
    }
  }
  updates = reshape(updates, upd_shape);
  // MLX's Scatter::ReduceType: Max, Min, Sum, Prod, None.
  switch (type) {
    case 0:
      return scatter_max(a, indices, updates, axes);
    case 1:
      return scatter_min(a, indices, updates, axes);
    case 2:
      return scatter_add(a, indices, updates, axes);
    case 3:
      return scatter_prod(a, indices, updates, axes);
    case 4:
      return scatter(a, indices, updates, axes);
  }
  unsupported(e, "with reduction code " + std::to_string(type));
}

// MLX stores a slice's normalised start and stride; the stop Loom needs is
// derived from the output length recorded in the file.
void slice_bounds(const MlxEntry& e, const Shape& region, Shape& start, Shape& stop,
                  Shape& strides) {
  start = to_shape(ints_at(e.state, e.name == "Slice" ? 0 : 1));
  strides = to_shape(ints_at(e.state, e.name == "Slice" ? 2 : 3));
  if (start.size() != region.size() || strides.size() != region.size()) {
    unsupported(e, "with bounds of the wrong rank");
  }
  stop.resize(region.size());
  for (size_t d = 0; d < region.size(); ++d) {
    // In 64 bits: a corrupt start or stride must not overflow (fuzzing found it).
    int64_t n = region[d];
    int64_t end =
        n == 0 ? start[d]
               : int64_t{start[d]} + int64_t{strides[d]} * (n - 1) + (strides[d] > 0 ? 1 : -1);
    if (strides[d] == 0 || end < INT32_MIN || end > INT32_MAX) {
      unsupported(e, "with a start " + std::to_string(start[d]) + " and stride " +
                         std::to_string(strides[d]) + " out of range");
    }
    stop[d] = static_cast<int32_t>(end);
  }
}

const std::unordered_map<std::string, Op>& mlx_ops() {
  static const std::unordered_map<std::string, Op> ops = [] {
    std::unordered_map<std::string, Op> m;
    using A = const std::vector<array>&;
    using E = const MlxEntry&;
    auto unary = [&m](const char* name, array (*f)(const array&, StreamOrDevice)) {
      m[name] = [f](A in, E) { return std::vector<array>{f(in[0], {})}; };
    };
    auto binary = [&m](const char* name, array (*f)(const array&, const array&, StreamOrDevice)) {
      m[name] = [f](A in, E) { return std::vector<array>{f(in[0], in[1], {})}; };
    };
    unary("Abs", abs);
    unary("Negative", negative);
    unary("Sign", sign);
    unary("Square", square);
    unary("Exp", exp);
    unary("Expm1", expm1);
    unary("Log1p", log1p);
    unary("Sin", sin);
    unary("Cos", cos);
    unary("Tan", tan);
    unary("Sinh", sinh);
    unary("Cosh", cosh);
    unary("Tanh", tanh);
    unary("ArcSin", arcsin);
    unary("ArcCos", arccos);
    unary("ArcTan", arctan);
    unary("ArcSinh", arcsinh);
    unary("ArcCosh", arccosh);
    unary("ArcTanh", arctanh);
    unary("Erf", erf);
    unary("ErfInv", erfinv);
    unary("Sigmoid", sigmoid);
    unary("Floor", floor);
    unary("Ceil", ceil);
    unary("LogicalNot", logical_not);
    unary("BitwiseInvert", bitwise_invert);
    unary("Conjugate", conjugate);
    unary("Real", real);
    unary("Imag", imag);
    unary("Copy", copy);
    unary("StopGradient", stop_gradient);
    m["Contiguous"] = [](A in, E) { return std::vector<array>{contiguous(in[0])}; };
    m["Round"] = [](A in, E) { return std::vector<array>{round(in[0], 0)}; };
    binary("Add", add);
    binary("Subtract", subtract);
    binary("Multiply", multiply);
    binary("Divide", divide);
    binary("Remainder", remainder);
    binary("Power", power);
    binary("Maximum", maximum);
    binary("Minimum", minimum);
    binary("Greater", greater);
    binary("GreaterEqual", greater_equal);
    binary("Less", less);
    binary("LessEqual", less_equal);
    binary("NotEqual", not_equal);
    binary("LogicalAnd", logical_and);
    binary("LogicalOr", logical_or);
    binary("LogAddExp", logaddexp);
    binary("ArcTan2", arctan2);
    binary("FloorDivide", floor_divide);
    binary("Matmul", matmul);
    m["DivMod"] = [](A in, E) { return divmod(in[0], in[1]); };
    m["Equal"] = [](A in, E e) {
      array eq = equal(in[0], in[1]);
      if (int_at(e.state, 0)) eq = logical_or(eq, logical_and(isnan(in[0]), isnan(in[1])));
      return std::vector<array>{eq};
    };
    m["BitwiseBinary"] = [](A in, E e) {
      // MLX's BitwiseBinary::Op: And, Or, Xor, LeftShift, RightShift.
      switch (int_at(e.state, 0)) {
        case 0:
          return std::vector<array>{bitwise_and(in[0], in[1])};
        case 1:
          return std::vector<array>{bitwise_or(in[0], in[1])};
        case 2:
          return std::vector<array>{bitwise_xor(in[0], in[1])};
        case 3:
          return std::vector<array>{left_shift(in[0], in[1])};
        case 4:
          return std::vector<array>{right_shift(in[0], in[1])};
      }
      unsupported(e, "with operation code " + std::to_string(int_at(e.state, 0)));
    };
    m["Select"] = [](A in, E) { return std::vector<array>{where(in[0], in[1], in[2])}; };
    m["Log"] = [](A in, E e) {
      // MLX's Log::Base: two, ten, e.
      switch (int_at(e.state, 0)) {
        case 0:
          return std::vector<array>{log2(in[0])};
        case 1:
          return std::vector<array>{log10(in[0])};
        default:
          return std::vector<array>{log(in[0])};
      }
    };
    m["Sqrt"] = [](A in, E e) {
      return std::vector<array>{int_at(e.state, 0) ? rsqrt(in[0]) : sqrt(in[0])};
    };
    m["AsType"] = [](A in, E e) {
      return std::vector<array>{astype(in[0], std::get<Dtype>(e.state.at(0)))};
    };
    m["Arange"] = [](A, E e) {
      return std::vector<array>{
          arange(real_at(e.state, 0), real_at(e.state, 1), real_at(e.state, 2), e.types[0].dtype)};
    };
    m["Full"] = [](A in, E e) {
      return std::vector<array>{astype(broadcast_to(in[0], e.types[0].shape), e.types[0].dtype)};
    };
    m["Broadcast"] = [](A in, E e) {
      if (in.size() == 1) {
        return std::vector<array>{broadcast_to(in[0], to_shape(ints_at(e.state, 0)))};
      }
      // A shapeless trace's broadcast takes the arrays it broadcasts against
      // as extra inputs, so that its shape follows theirs on new inputs; the
      // element-wise op it feeds broadcasts its operands anyway. Loom leaves
      // in[0] as it is and lets that op broadcast (run_tape skips the shape
      // check): an explicit broadcast would freeze the traced shape.
      return std::vector<array>{in[0]};
    };
    m["BroadcastAxes"] = [](A in, E e) {
      return std::vector<array>{broadcast_to(in[0], e.types[0].shape)};
    };
    m["Reshape"] = [](A in, E e) {
      return std::vector<array>{reshape(in[0], to_shape(ints_at(e.state, 0)))};
    };
    m["Flatten"] = [](A in, E e) {
      return std::vector<array>{flatten(in[0], static_cast<int>(int_at(e.state, 0)),
                                        static_cast<int>(int_at(e.state, 1)))};
    };
    m["Unflatten"] = [](A in, E e) {
      return std::vector<array>{
          unflatten(in[0], static_cast<int>(int_at(e.state, 0)), to_shape(ints_at(e.state, 1)))};
    };
    m["ExpandDims"] = [](A in, E e) {
      return std::vector<array>{expand_dims(in[0], ints_at(e.state, 0))};
    };
    m["Squeeze"] = [](A in, E e) {
      return std::vector<array>{squeeze(in[0], ints_at(e.state, 0))};
    };
    m["Transpose"] = [](A in, E e) {
      return std::vector<array>{transpose(in[0], ints_at(e.state, 0))};
    };
    m["Concatenate"] = [](A in, E e) {
      return std::vector<array>{concatenate(in, static_cast<int>(int_at(e.state, 0)))};
    };
    m["Split"] = [](A in, E e) {
      return split(in[0], to_shape(ints_at(e.state, 0)), static_cast<int>(int_at(e.state, 1)));
    };
    m["Slice"] = [](A in, E e) {
      Shape start, stop, strides;
      slice_bounds(e, e.types[0].shape, start, stop, strides);
      return std::vector<array>{slice(in[0], start, stop, strides)};
    };
    m["SliceUpdate"] = [](A in, E e) {
      Shape start, stop, strides;
      slice_bounds(e, in[1].shape(), start, stop, strides);
      array update = in[1];
      // MLX's SliceUpdate::ReduceType: Max, Min, Sum, Prod, None (a.at[...].add
      // and friends): the region is combined with the update, then written.
      int64_t type = int_at(e.state, 0);
      if (type != 4) {
        array region = slice(in[0], start, stop, strides);
        switch (type) {
          case 0:
            update = maximum(region, update);
            break;
          case 1:
            update = minimum(region, update);
            break;
          case 2:
            update = add(region, update);
            break;
          case 3:
            update = multiply(region, update);
            break;
          default:
            unsupported(e, "with reduction code " + std::to_string(type));
        }
      }
      return std::vector<array>{slice_update(in[0], update, start, stop, strides)};
    };
    m["DynamicSlice"] = [](A in, E e) {
      return std::vector<array>{
          slice(in[0], in[1], ints_at(e.state, 0), to_shape(ints_at(e.state, 1)))};
    };
    m["DynamicSliceUpdate"] = [](A in, E e) {
      return std::vector<array>{slice_update(in[0], in[1], in[2], ints_at(e.state, 0))};
    };
    m["Pad"] = [](A in, E e) {
      const auto& axes = ints_at(e.state, 0);
      const auto& lo = ints_at(e.state, 1);
      const auto& hi = ints_at(e.state, 2);
      if (lo.size() != axes.size() || hi.size() != axes.size())
        unsupported(e, "with ragged widths");
      std::vector<std::pair<int, int>> widths(in[0].ndim(), {0, 0});
      for (size_t k = 0; k < axes.size(); ++k) {
        int ax = axes[k] < 0 ? axes[k] + in[0].ndim() : axes[k];
        if (ax < 0 || ax >= in[0].ndim()) unsupported(e, "with an axis out of range");
        widths[ax] = {lo[k], hi[k]};
      }
      return std::vector<array>{pad(in[0], widths, in[1])};
    };
    m["Reduce"] = [](A in, E e) {
      const auto& axes = ints_at(e.state, 1);
      // MLX's Reduce::ReduceType: And, Or, Sum, Prod, Min, Max; the
      // primitive keeps the reduced axes.
      switch (int_at(e.state, 0)) {
        case 0:
          return std::vector<array>{all(in[0], axes, true)};
        case 1:
          return std::vector<array>{any(in[0], axes, true)};
        case 2:
          return std::vector<array>{astype(sum(in[0], axes, true), e.types[0].dtype)};
        case 3:
          return std::vector<array>{astype(prod(in[0], axes, true), e.types[0].dtype)};
        case 4:
          return std::vector<array>{min(in[0], axes, true)};
        case 5:
          return std::vector<array>{max(in[0], axes, true)};
      }
      unsupported(e, "with reduction code " + std::to_string(int_at(e.state, 0)));
    };
    m["ArgReduce"] = [](A in, E e) {
      int axis = static_cast<int>(int_at(e.state, 1));
      return std::vector<array>{int_at(e.state, 0) == 0 ? argmin(in[0], axis, true)
                                                        : argmax(in[0], axis, true)};
    };
    m["Scan"] = [](A in, E e) {
      int axis = static_cast<int>(int_at(e.state, 1));
      bool reverse = int_at(e.state, 2), inclusive = int_at(e.state, 3);
      // MLX's Scan::ReduceType: Max, Min, Sum, Prod, LogAddExp.
      switch (int_at(e.state, 0)) {
        case 0:
          return std::vector<array>{cummax(in[0], axis, reverse, inclusive)};
        case 1:
          return std::vector<array>{cummin(in[0], axis, reverse, inclusive)};
        case 2:
          return std::vector<array>{
              astype(cumsum(in[0], axis, reverse, inclusive), e.types[0].dtype)};
        case 3:
          return std::vector<array>{
              astype(cumprod(in[0], axis, reverse, inclusive), e.types[0].dtype)};
        case 4:
          return std::vector<array>{logcumsumexp(in[0], axis, reverse, inclusive)};
      }
      unsupported(e, "with scan code " + std::to_string(int_at(e.state, 0)));
    };
    m["Sort"] = [](A in, E e) {
      return std::vector<array>{sort(in[0], static_cast<int>(int_at(e.state, 0)))};
    };
    m["ArgSort"] = [](A in, E e) {
      return std::vector<array>{argsort(in[0], static_cast<int>(int_at(e.state, 0)))};
    };
    m["Partition"] = [](A in, E e) {
      return std::vector<array>{partition(in[0], static_cast<int>(int_at(e.state, 0)),
                                          static_cast<int>(int_at(e.state, 1)))};
    };
    m["ArgPartition"] = [](A in, E e) {
      return std::vector<array>{argpartition(in[0], static_cast<int>(int_at(e.state, 0)),
                                             static_cast<int>(int_at(e.state, 1)))};
    };
    m["Softmax"] = [](A in, E e) {
      return std::vector<array>{softmax(in[0], std::vector<int>{-1}, int_at(e.state, 0) != 0)};
    };
    m["LogSumExp"] = [](A in, E) {
      return std::vector<array>{logsumexp(in[0], std::vector<int>{-1}, true)};
    };
    m["AddMM"] = [](A in, E e) {
      return std::vector<array>{addmm(in[2], in[0], in[1], static_cast<float>(real_at(e.state, 0)),
                                      static_cast<float>(real_at(e.state, 1)))};
    };
    m["Gather"] = [](A in, E e) { return std::vector<array>{mlx_gather(in, e)}; };
    m["GatherAxis"] = [](A in, E e) {
      return std::vector<array>{
          take_along_axis(in[0], in[1], static_cast<int>(int_at(e.state, 0)))};
    };
    m["Scatter"] = [](A in, E e) { return std::vector<array>{mlx_scatter(in, e)}; };
    m["ScatterAxis"] = [](A in, E e) {
      int axis = static_cast<int>(int_at(e.state, 1));
      // MLX's ScatterAxis::ReduceType: Sum, None.
      if (int_at(e.state, 0) == 0) {
        return std::vector<array>{scatter_add_axis(in[0], in[1], in[2], axis)};
      }
      return std::vector<array>{put_along_axis(in[0], in[1], in[2], axis)};
    };
    m["Convolution"] = [](A in, E e) {
      return std::vector<array>{
          conv_general(in[0], in[1], ints_at(e.state, 0), ints_at(e.state, 1), ints_at(e.state, 2),
                       ints_at(e.state, 3), ints_at(e.state, 4),
                       static_cast<int>(int_at(e.state, 5)), int_at(e.state, 6) != 0)};
    };
    m["QuantizedMatmul"] = [](A in, E e) {
      // MLX's QuantizationMode: affine, mxfp4, mxfp8, nvfp4.
      static const char* modes[] = {"affine", "mxfp4", "mxfp8", "nvfp4"};
      int64_t mode = int_at(e.state, 2);
      if (mode < 0 || mode > 3) unsupported(e, "with quantization mode " + std::to_string(mode));
      std::optional<array> biases;
      if (in.size() >= 4) biases = in[3];
      return std::vector<array>{quantized_matmul(
          in[0], in[1], in[2], biases, int_at(e.state, 3) != 0,
          static_cast<int>(int_at(e.state, 0)), static_cast<int>(int_at(e.state, 1)), modes[mode])};
    };
    m["Hadamard"] = [](A in, E e) {
      return std::vector<array>{hadamard_transform(in[0], static_cast<float>(real_at(e.state, 0)))};
    };
    // --- MLX's fast primitives (in files exported with Metal; the CPU build
    // decomposes them) ---
    m["RMSNorm"] = [](A in, E e) {
      std::optional<array> w;
      if (in.size() > 1) w = in[1];
      return std::vector<array>{fast::rms_norm(in[0], w, static_cast<float>(real_at(e.state, 0)))};
    };
    m["LayerNorm"] = [](A in, E e) {
      std::optional<array> w, b;
      if (in.size() > 1) w = in[1];
      if (in.size() > 2) b = in[2];
      return std::vector<array>{
          fast::layer_norm(in[0], w, b, static_cast<float>(real_at(e.state, 0)))};
    };
    m["RoPE"] = [](A in, E e) {
      // Inputs: x, the offset (an integer array) and, when given, freqs.
      if (in.size() < 2) unsupported(e, "without an offset input");
      std::optional<float> base;
      std::optional<array> freqs;
      if (in.size() > 2) {
        freqs = in[2];
      } else {
        base = static_cast<float>(real_at(e.state, 2));
      }
      int dims = static_cast<int>(int_at(e.state, 0));
      bool traditional = int_at(e.state, 1) != 0;
      float scale = static_cast<float>(real_at(e.state, 3));
      auto f = [&](const std::vector<array>& p) {
        return std::vector<array>{fast::rope(p[0], dims, traditional, base, scale, in[1], freqs)};
      };
      if (int_at(e.state, 4)) return f({in[0]});
      // forward=False: the backward pass, whose input is the cotangent (the
      // rotation is linear, so the cotangent serves as the primal too).
      return vjp(f, {in[0]}, {in[0]}).second;
    };
    m["ScaledDotProductAttention"] = [](A in, E e) {
      // Inputs: q, k, v, then the mask (an array mask) and the sinks.
      bool causal = int_at(e.state, 1) != 0, sinks = int_at(e.state, 2) != 0;
      if (int_at(e.state, 3)) unsupported(e, "returning the log-sum-exp (a training pass)");
      if (in.size() < 3) unsupported(e, "with fewer than 3 inputs");
      std::optional<array> mask, sink;
      size_t extra = in.size() - 3;
      if (sinks) {
        if (extra == 0) unsupported(e, "declaring sinks without a sinks input");
        sink = in.back();
        --extra;
      }
      if (extra > 1) unsupported(e, "with " + std::to_string(in.size()) + " inputs");
      if (extra == 1) mask = in[3];
      return std::vector<array>{fast::scaled_dot_product_attention(
          in[0], in[1], in[2], static_cast<float>(real_at(e.state, 0)), causal ? "causal" : "",
          mask, sink)};
    };
    m["Quantize"] = [](A in, E e) {
      static const char* modes[] = {"affine", "mxfp4", "mxfp8", "nvfp4"};
      int64_t mode = int_at(e.state, 2);
      if (mode < 0 || mode > 3) unsupported(e, "with quantization mode " + std::to_string(mode));
      int group = static_cast<int>(int_at(e.state, 0)), bits = static_cast<int>(int_at(e.state, 1));
      if (int_at(e.state, 3)) {
        std::optional<array> biases;
        if (in.size() > 2) biases = in[2];
        return std::vector<array>{dequantize(in[0], in[1], biases, group, bits, modes[mode],
                                             std::nullopt, e.types[0].dtype)};
      }
      return quantize(in[0], group, bits, modes[mode]);
    };
    m["GatherMM"] = [](A in, E e) {
      if (in.size() != 4) unsupported(e, "with " + std::to_string(in.size()) + " inputs");
      return std::vector<array>{gather_mm(in[0], in[1], in[2], in[3],
                                          int_at(e.state, 0) != 0 || int_at(e.state, 1) != 0)};
    };
    m["FFT"] = [](A in, E e) {
      const std::vector<int>& axes = ints_at(e.state, 0);
      bool inverse = int_at(e.state, 1) != 0, real_fft = int_at(e.state, 2) != 0;
      // The transform sizes: the output's along the axes for irfft, else
      // the input's.
      const Shape& sized = real_fft && inverse ? e.types[0].shape : in[0].shape();
      Shape n;
      for (int ax : axes) {
        int a = ax < 0 ? ax + static_cast<int>(sized.size()) : ax;
        if (a < 0 || a >= static_cast<int>(sized.size()))
          unsupported(e, "with an axis out of range");
        n.push_back(sized[a]);
      }
      if (real_fft) {
        return std::vector<array>{inverse ? fft::irfftn(in[0], n, axes)
                                          : fft::rfftn(in[0], n, axes)};
      }
      return std::vector<array>{inverse ? fft::ifftn(in[0], n, axes) : fft::fftn(in[0], n, axes)};
    };
    m["RandomBits"] = [](A in, E e) {
      return std::vector<array>{
          random::bits(to_shape(ints_at(e.state, 0)), static_cast<int>(int_at(e.state, 1)), in[0])};
    };
    m["BlockMaskedMM"] = [](A in, E e) {
      // Inputs: a, b, then the output mask and/or the pair of operand masks.
      std::optional<array> out_mask, lhs_mask, rhs_mask;
      if (in.size() == 3 || in.size() == 5) out_mask = in[2];
      if (in.size() >= 4) {
        lhs_mask = in[in.size() - 2];
        rhs_mask = in[in.size() - 1];
      }
      if (in.size() < 2 || in.size() > 5) {
        unsupported(e, "with " + std::to_string(in.size()) + " inputs");
      }
      return std::vector<array>{block_masked_mm(in[0], in[1], static_cast<int>(int_at(e.state, 0)),
                                                out_mask, lhs_mask, rhs_mask)};
    };
    m["GatherQMM"] = [](A in, E e) {
      // Inputs: x, w, scales[, biases (affine)], lhs_indices, rhs_indices.
      static const char* modes[] = {"affine", "mxfp4", "mxfp8", "nvfp4"};
      int64_t mode = int_at(e.state, 2);
      if (mode < 0 || mode > 3) unsupported(e, "with quantization mode " + std::to_string(mode));
      size_t want = mode == 0 ? 6 : 5;
      if (in.size() != want) unsupported(e, "with " + std::to_string(in.size()) + " inputs");
      std::optional<array> biases;
      if (mode == 0) biases = in[3];
      return std::vector<array>{gather_qmm(
          in[0], in[1], in[2], biases, in[want - 2], in[want - 1], int_at(e.state, 3) != 0,
          static_cast<int>(int_at(e.state, 0)), static_cast<int>(int_at(e.state, 1)), modes[mode],
          std::nullopt, int_at(e.state, 5) != 0)};
    };
    m["NumberOfElements"] = [](A in, E e) {
      // MLX's shapeless mean and var; Loom's op counts at run time under the
      // shapeless trace the import runs in.
      return std::vector<array>{number_of_elements(
          in[0], ints_at(e.state, 0), int_at(e.state, 1) != 0, std::get<Dtype>(e.state.at(2)))};
    };
    // --- MLX's backward fast primitives: Loom's gradient of the forward op ---
    m["RMSNormVJP"] = [](A in, E e) {
      // Inputs: x, w (a scalar 1 when the norm had no weight), cotangent;
      // outputs: dx, dw.
      if (in.size() != 3) unsupported(e, "with " + std::to_string(in.size()) + " inputs");
      float eps = static_cast<float>(real_at(e.state, 0));
      auto f = [eps](const std::vector<array>& p) {
        if (p[1].ndim() == 0)
          return std::vector<array>{multiply(fast::rms_norm(p[0], {}, eps), p[1])};
        return std::vector<array>{fast::rms_norm(p[0], p[1], eps)};
      };
      auto grads = vjp(f, {in[0], in[1]}, {in[2]}).second;
      if (grads.size() > e.outputs.size())
        grads.erase(grads.begin() + e.outputs.size(), grads.end());
      return grads;
    };
    m["LayerNormVJP"] = [](A in, E e) {
      // Inputs: x, w, b (scalars 1 and 0 when absent), cotangent; outputs:
      // dx, dw, db.
      if (in.size() != 4) unsupported(e, "with " + std::to_string(in.size()) + " inputs");
      float eps = static_cast<float>(real_at(e.state, 0));
      auto f = [eps](const std::vector<array>& p) {
        std::optional<array> w, b;
        if (p[1].ndim() > 0) w = p[1];
        if (p[2].ndim() > 0) b = p[2];
        array y = fast::layer_norm(p[0], w, b, eps);
        if (!w) y = multiply(y, p[1]);
        if (!b) y = add(y, p[2]);
        return std::vector<array>{y};
      };
      auto grads = vjp(f, {in[0], in[1], in[2]}, {in[3]}).second;
      if (grads.size() > e.outputs.size())
        grads.erase(grads.begin() + e.outputs.size(), grads.end());
      return grads;
    };
    // --- linear algebra ---
    m["Inverse"] = [](A in, E e) {
      bool tri = int_at(e.state, 0) != 0, upper = int_at(e.state, 1) != 0;
      return std::vector<array>{tri ? linalg::tri_inv(in[0], upper) : linalg::inv(in[0])};
    };
    m["Cholesky"] = [](A in, E e) {
      return std::vector<array>{linalg::cholesky(in[0], int_at(e.state, 0) != 0)};
    };
    m["QRF"] = [](A in, E) { return linalg::qr(in[0]); };
    m["SVD"] = [](A in, E e) { return linalg::svd(in[0], int_at(e.state, 0) != 0); };
    m["Eigh"] = [](A in, E e) {
      const std::string& uplo = std::get<std::string>(e.state.at(0));
      if (!int_at(e.state, 1)) return std::vector<array>{linalg::eigvalsh(in[0], uplo)};
      return linalg::eigh(in[0], uplo);
    };
    m["Eig"] = [](A in, E e) {
      if (!int_at(e.state, 0)) return std::vector<array>{linalg::eigvals(in[0])};
      return linalg::eig(in[0]);
    };
    // --- views and ordering ---
    m["View"] = [](A in, E e) {
      return std::vector<array>{view(in[0], std::get<Dtype>(e.state.at(0)))};
    };
    m["AsStrided"] = [](A in, E e) {
      const auto& strides = std::get<std::vector<int64_t>>(e.state.at(1));
      return std::vector<array>{as_strided(in[0], to_shape(ints_at(e.state, 0)),
                                           Strides(strides.begin(), strides.end()),
                                           int_at(e.state, 2))};
    };
    m["Depends"] = [](A in, E e) {
      // Outputs: the first inputs, evaluated after the rest.
      size_t n = e.outputs.size();
      if (n > in.size()) unsupported(e, "with more outputs than inputs");
      return depends(std::vector<array>(in.begin(), in.begin() + n),
                     std::vector<array>(in.begin() + n, in.end()));
    };
    return m;
  }();
  return ops;
}

} // namespace

const char* state_layout(const std::string& name) {
  auto it = layouts_table().find(name);
  return it == layouts_table().end() ? nullptr : it->second;
}

bool run_primitive(const MlxEntry& e, const std::vector<array>& in, std::vector<array>& out) {
  auto it = mlx_ops().find(e.name);
  if (it == mlx_ops().end()) return false;
  out = it->second(in, e);
  return true;
}

} // namespace loom::io::mlx
