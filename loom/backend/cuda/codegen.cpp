#include "loom/backend/cuda/codegen.h"

namespace loom::cuda {

namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

// Ops whose code form computes the CPU functor's result on integers (C
// integer arithmetic, wrapped on store) and on bools.
bool int_safe(const std::string& name, bool boolean) {
  static const char* both[] = {"LogicalNot", "Equal",      "NotEqual",     "Less",
                               "LessEqual",  "Greater",    "GreaterEqual", "LogicalAnd",
                               "LogicalOr",  "BitwiseAnd", "BitwiseOr",    "BitwiseXor",
                               "Maximum",    "Minimum",    "Select"};
  static const char* ints[] = {"Negative", "Square",   "Sign",    "BitwiseInvert",
                               "Add",      "Subtract", "Multiply"};
  for (auto* n : both)
    if (name == n) return true;
  if (boolean) return false;
  for (auto* n : ints)
    if (name == n) return true;
  return false;
}

} // namespace

const char* storage_type(Dtype d) {
  switch (d.val) {
    case Dtype::Val::bool_:
      return "bool";
    case Dtype::Val::uint8:
      return "unsigned char";
    case Dtype::Val::uint16:
      return "unsigned short";
    case Dtype::Val::uint32:
      return "unsigned int";
    case Dtype::Val::uint64:
      return "unsigned long long";
    case Dtype::Val::int8:
      return "signed char";
    case Dtype::Val::int16:
      return "short";
    case Dtype::Val::int32:
      return "int";
    case Dtype::Val::int64:
      return "long long";
    case Dtype::Val::float16:
      return "loom_half";
    case Dtype::Val::bfloat16:
      return "loom_bf16";
    case Dtype::Val::float32:
      return "float";
    case Dtype::Val::float64:
      return "double";
    case Dtype::Val::complex64:
      return nullptr;
  }
  return nullptr;
}

const char* compute_type(Dtype d) {
  if (d == float16 || d == bfloat16) return "float";
  return storage_type(d);
}

bool is_float(Dtype d) { return d == float16 || d == bfloat16 || d == float32 || d == float64; }

std::string device_expr(const ew::OpInfo& info, Dtype compute_dtype,
                        const std::vector<std::string>& args) {
  if (!info.fusable || info.code == nullptr) return {};
  std::string name = info.name;
  if (!is_float(compute_dtype) && !int_safe(name, compute_dtype == bool_)) return {};
  if (is_float(compute_dtype) &&
      (info.accepts == ew::Accepts::integral || info.accepts == ew::Accepts::integer)) {
    return {};
  }
  std::string e = info.code;
  // The table's 1 / (1 + exp(-x)) flushes to 0 below x = -88 where the
  // result is still a subnormal float; exp(x) / (1 + exp(x)) keeps it.
  if (name == "Sigmoid") e = "({0} < 0 ? exp({0}) / (1 + exp({0})) : 1 / (1 + exp(-{0})))";
  if (e.find("std::") != std::string::npos || e.find("loom::") != std::string::npos) return {};
  e = replace_all(e, "isnan(", "loom_isnan(");
  e = replace_all(e, "isinf(", "loom_isinf(");
  // Operands are parenthesised: the code form may apply an operator to them.
  for (size_t k = 0; k < args.size(); ++k)
    e = replace_all(e, "{" + std::to_string(k) + "}", "(" + args[k] + ")");
  return e;
}

std::string cast_expr(Dtype from, Dtype to, const std::string& x) {
  if (to == bool_ && from != bool_) return "(" + x + " != 0)";
  if (is_float(from) && !is_float(to) && to != bool_) return {};
  return x;
}

} // namespace loom::cuda
