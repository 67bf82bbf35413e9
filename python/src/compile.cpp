// Python bindings of compile: argument trees onto the C++ cache key (arrays
// into the inputs, int/float/str/None into the constants), inputs=/outputs=
// state capture (mx.random.state included), the compile switches and the
// cache inspection Loom adds.
#include "loom/compile/compile.h"

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "loom/ops.h"
#include "py_ref.h"
#include "trees.h"

namespace nb = nanobind;
using namespace nb::literals;
using namespace loom;
using compile_detail::Constant;

namespace {

std::string py_type_name(nb::handle h) { return nb::cast<std::string>(h.type().attr("__name__")); }

bool is_random_state(nb::handle h) { return py_type_name(h) == "_RandomState"; }

// The arguments' leaves in order: arrays into `inputs`, everything into
// `constants` (arrays as a marker), MLX's accepted types only.
void flatten_arguments(nb::handle tree, std::vector<array>& inputs,
                       std::vector<Constant>& constants) {
  std::vector<nb::handle> stack{tree};
  while (!stack.empty()) {
    nb::handle h = stack.back();
    stack.pop_back();
    if (nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h)) {
      nb::sequence seq = nb::borrow<nb::sequence>(h);
      for (size_t i = nb::len(seq); i-- > 0;) stack.push_back(seq[i]);
    } else if (nb::isinstance<nb::dict>(h)) {
      nb::list values = nb::borrow<nb::dict>(h).values();
      for (size_t i = nb::len(values); i-- > 0;) stack.push_back(values[i]);
    } else if (python::is_array(h)) {
      inputs.push_back(nb::cast<array>(h));
      constants.push_back(Constant{});
    } else if (nb::isinstance<nb::str>(h)) {
      constants.push_back(Constant{Constant::str, 0, 0, nb::cast<std::string>(h)});
    } else if (nb::isinstance<nb::int_>(h)) {
      // Python ints beyond 64 bits still key by value.
      int64_t v = PyLong_AsLongLong(h.ptr());
      if (PyErr_Occurred()) {
        PyErr_Clear();
        v = nb::cast<int64_t>(h.attr("__hash__")());
      }
      constants.push_back(Constant{Constant::int_, v, 0, {}});
    } else if (nb::isinstance<nb::float_>(h)) {
      constants.push_back(Constant{Constant::float_, 0, nb::cast<double>(h), {}});
    } else if (h.is_none()) {
      constants.push_back(Constant{Constant::none, 0, 0, {}});
    } else {
      throw std::invalid_argument(
          "[compile] Function arguments must be trees of arrays or constants (floats, ints, "
          "strings, or None), but received type " +
          py_type_name(h) + ".");
    }
  }
}

// Visits the array leaves of an inputs=/outputs= state tree with a setter
// for each (lists, dicts and dict subclasses such as nn.Module, random.state;
// tuples are read but cannot be written). Other leaves are ignored.
using StateVisit = std::function<void(nb::handle leaf, const std::function<void(nb::handle)>&)>;
void walk_state(nb::handle tree, const StateVisit& visit) {
  if (tree.is_none()) return;
  auto child = [&](nb::handle value, std::function<void(nb::handle)> set) {
    if (python::is_array(value)) {
      visit(value, set);
    } else {
      walk_state(value, visit);
    }
  };
  if (nb::isinstance<nb::list>(tree)) {
    nb::list l = nb::borrow<nb::list>(tree);
    for (size_t i = 0; i < nb::len(l); ++i) {
      child(l[i], [l, i](nb::handle v) mutable { l[i] = v; });
    }
  } else if (nb::isinstance<nb::tuple>(tree)) {
    nb::tuple t = nb::borrow<nb::tuple>(tree);
    for (size_t i = 0; i < nb::len(t); ++i) child(t[i], [](nb::handle) {});
  } else if (nb::isinstance<nb::dict>(tree)) {
    nb::dict d = nb::borrow<nb::dict>(tree);
    nb::list keys = d.keys();
    for (nb::handle k : keys) {
      nb::object key = nb::borrow(k);
      child(d[key], [d, key](nb::handle v) mutable { d[key] = v; });
    }
  } else if (is_random_state(tree)) {
    nb::object s = nb::borrow(tree);
    child(s[0], [s](nb::handle v) mutable { s[0] = v; });
  }
}

bool captures_random_state(nb::handle tree) {
  if (tree.is_none()) return false;
  if (is_random_state(tree)) return true;
  if (nb::isinstance<nb::list>(tree) || nb::isinstance<nb::tuple>(tree)) {
    for (nb::handle item : tree) {
      if (captures_random_state(item)) return true;
    }
  } else if (nb::isinstance<nb::dict>(tree)) {
    for (auto [k, v] : nb::borrow<nb::dict>(tree)) {
      if (captures_random_state(v)) return true;
    }
  }
  return false;
}

std::vector<array> flatten_state(nb::handle tree) {
  std::vector<array> out;
  walk_state(tree, [&](nb::handle leaf, const auto&) { out.push_back(nb::cast<array>(leaf)); });
  return out;
}

void assign_state(nb::handle tree, const std::vector<array>& values, size_t& index) {
  walk_state(tree, [&](nb::handle, const std::function<void(nb::handle)>& set) {
    if (index < values.size()) set(nb::cast(values[index]));
    ++index;
  });
}

// An array the trace captured through a closure cell, a global, or one level
// inside a list/dict reached from them: if the slot is later rebound, the
// compiled function still uses the old value (seed §7.1).
struct CapturedSlot {
  python::PyRef holder; // cell, list or dict
  python::PyRef key;    // index or key (None for a cell)
  python::PyRef value;  // the array at trace time
  std::string label;    // "state[0]"
  bool is_cell = false;

  bool replaced() const {
    nb::object h = holder.get();
    try {
      nb::object now = is_cell ? nb::object(h.attr("cell_contents")) : nb::object(h[key.get()]);
      return !now.is(value.get());
    } catch (nb::python_error&) {
      return true;
    }
  }
};

// What a trace leaves on its cache entry: the returned tree with its arrays
// replaced by stand-ins, how many arrays it holds, and the captured slots.
struct TraceInfo {
  python::PyRef tree;
  size_t num_outputs = 0;
  std::vector<CapturedSlot> slots;
};

// The slots of `fun`'s closure and globals that hold arrays the entry uses
// as constants.
std::vector<CapturedSlot> captured_slots(nb::handle fun,
                                         const std::vector<const ArrayDesc*>& constants) {
  std::vector<CapturedSlot> out;
  if (constants.empty() || !nb::hasattr(fun, "__code__")) return out;
  auto is_constant = [&](nb::handle v) {
    if (!python::is_array(v)) return false;
    const ArrayDesc* id = nb::cast<const array&>(v).id();
    return std::find(constants.begin(), constants.end(), id) != constants.end();
  };
  auto consider = [&](nb::handle v, nb::handle holder, nb::handle key, bool is_cell,
                      const std::string& name) {
    if (is_constant(v)) {
      out.push_back({python::PyRef(holder), python::PyRef(key), python::PyRef(v), name, is_cell});
    } else if (nb::isinstance<nb::list>(v)) {
      nb::list l = nb::borrow<nb::list>(v);
      for (size_t i = 0; i < nb::len(l); ++i) {
        if (is_constant(l[i])) {
          out.push_back({python::PyRef(l), python::PyRef(nb::int_(i)), python::PyRef(l[i]),
                         name + "[" + std::to_string(i) + "]", false});
        }
      }
    } else if (nb::isinstance<nb::dict>(v)) {
      for (auto [k, item] : nb::borrow<nb::dict>(v)) {
        if (is_constant(item)) {
          out.push_back({python::PyRef(v), python::PyRef(k), python::PyRef(item),
                         name + "[" + nb::cast<std::string>(nb::repr(k)) + "]", false});
        }
      }
    }
  };
  nb::object code = fun.attr("__code__");
  nb::object closure = nb::getattr(fun, "__closure__", nb::none());
  if (!closure.is_none()) {
    nb::tuple names = nb::borrow<nb::tuple>(code.attr("co_freevars"));
    size_t i = 0;
    for (nb::handle cell : closure) {
      std::string name = i < nb::len(names) ? nb::cast<std::string>(names[i]) : "?";
      ++i;
      try {
        consider(cell.attr("cell_contents"), cell, nb::none(), true, name);
      } catch (nb::python_error&) {
      }
    }
  }
  nb::object globals = nb::getattr(fun, "__globals__", nb::none());
  if (nb::isinstance<nb::dict>(globals)) {
    nb::dict g = nb::borrow<nb::dict>(globals);
    for (nb::handle n : code.attr("co_names")) {
      if (g.contains(n)) consider(g[n], g, n, false, nb::cast<std::string>(n));
    }
  }
  return out;
}

bool check_from_env() {
  const char* v = std::getenv("LOOM_COMPILE_CHECK");
  return v && *v && std::string(v) != "0";
}

class CompiledFunction {
 public:
  CompiledFunction(nb::callable fun, nb::object inputs, nb::object outputs, bool shapeless,
                   bool check)
      : fun_(fun),
        inputs_(inputs),
        outputs_(outputs),
        shapeless_(shapeless),
        check_(check),
        fun_id_(reinterpret_cast<std::uintptr_t>(fun.ptr())) {
    nb::object name = nb::getattr(fun, "__qualname__", nb::none());
    if (name.is_none()) name = nb::getattr(fun, "__name__", nb::none());
    if (name.is_none()) name = nb::repr(fun);
    name_ = "'" + nb::cast<std::string>(nb::str(name)) + "'";
    compile_detail::set_function_name(fun_id_, nb::cast<std::string>(nb::str(name)));
  }
  ~CompiledFunction() { compile_detail::erase(fun_id_); }

  // The Python objects it holds, for the cycle collector: a closure of `fun`
  // that refers back to the compiled function forms a cycle through them.
  std::vector<PyObject*> held() const {
    std::vector<PyObject*> out;
    for (auto* r : {&fun_, &inputs_, &outputs_}) {
      if (!r->is_none()) out.push_back(r->get().ptr());
    }
    return out;
  }
  void clear() {
    fun_ = python::PyRef();
    inputs_ = python::PyRef();
    outputs_ = python::PyRef();
  }

  // An attribute of the wrapped function (its name, as MLX forwards it).
  nb::object attr(const char* name) const { return nb::getattr(fun_.get(), name, nb::none()); }
  CompiledFunction(const CompiledFunction&) = delete;
  CompiledFunction& operator=(const CompiledFunction&) = delete;

  nb::object call(nb::args args, nb::kwargs kwargs) {
    nb::object fun = fun_.get();
    if (fun.is_none()) throw std::runtime_error("[compile] The compiled function was cleared.");
    if (!compile_enabled()) return fun(*args, **kwargs);
    nb::object in_state = inputs_.get();
    nb::object out_state = outputs_.get();

    std::vector<array> inputs;
    std::vector<Constant> constants;
    flatten_arguments(args, inputs, constants);
    flatten_arguments(kwargs, inputs, constants);
    size_t num_arg_arrays = inputs.size();
    for (auto& a : flatten_state(in_state)) inputs.push_back(a);

    auto trace = [&](const std::vector<array>& placeholders, std::shared_ptr<void>& user_data) {
      size_t index = 0;
      std::vector<array> arg_ph(placeholders.begin(), placeholders.begin() + num_arg_arrays);
      nb::object traced_args = python::tree_fill(args, arg_ph, index, false);
      nb::object traced_kwargs = python::tree_fill(kwargs, arg_ph, index, false);
      // Captured inputs read the placeholders while tracing, then get their
      // values back.
      std::vector<array> saved = flatten_state(in_state);
      std::vector<array> state_ph(placeholders.begin() + num_arg_arrays, placeholders.end());
      size_t state_index = 0;
      assign_state(in_state, state_ph, state_index);
      const ArrayDesc* key_before = random::default_key().id();
      nb::object result;
      std::vector<array> outs;
      try {
        result = fun(*nb::borrow<nb::tuple>(traced_args), **nb::borrow<nb::dict>(traced_kwargs));
        outs = python::tree_flatten(result, false);
        for (auto& a : flatten_state(out_state)) outs.push_back(a);
      } catch (...) {
        size_t restore = 0;
        assign_state(in_state, saved, restore);
        throw;
      }
      size_t restore = 0;
      assign_state(in_state, saved, restore);
      if (random::default_key().id() != key_before && !captures_random_state(in_state) &&
          !warned_random_) {
        warned_random_ = true;
        compile_detail::warn(
            "[compile] " + name_ +
            " draws random numbers without capturing mx.random.state: the key is frozen "
            "into the trace and every call returns the same numbers. Capture it with "
            "inputs=[..., mx.random.state] and outputs=[..., mx.random.state], or pass a key.");
      }
      auto info = std::make_shared<TraceInfo>();
      info->num_outputs = python::tree_flatten(result, false).size();
      // Stand-ins, so the entry does not keep the traced graph alive.
      info->tree = python::PyRef(python::tree_map(result, [](nb::handle leaf) -> nb::object {
        return python::is_array(leaf) ? nb::cast(array(0.0f)) : nb::borrow(leaf);
      }));
      user_data = info;
      return outs;
    };

    ArrayFn eager;
    bool check = check_ || check_from_env();
    if (check) {
      eager = [&](const std::vector<array>&) {
        std::vector<array> saved = flatten_state(out_state);
        nb::object result = fun(*args, **kwargs);
        std::vector<array> outs = python::tree_flatten(result, false);
        for (auto& a : flatten_state(out_state)) outs.push_back(a);
        size_t restore = 0;
        assign_state(out_state, saved, restore);
        return outs;
      };
    }
    auto result = compile_detail::call(fun_id_, trace, inputs, constants, shapeless_, check, eager);
    auto& info = *std::static_pointer_cast<TraceInfo>(result.user_data);
    if (result.traced) {
      info.slots = captured_slots(fun, result.constant_ids);
    } else if (!warned_frozen_) {
      for (auto& slot : info.slots) {
        if (!slot.replaced()) continue;
        warned_frozen_ = true;
        compile_detail::warn(
            "[compile] " + name_ + " captured the array at '" + slot.label +
            "' when it was traced; that slot now holds another value, but the compiled "
            "function still uses the old one. Pass the array as an argument, or capture "
            "its container with inputs= (and outputs=).");
        break;
      }
    }
    size_t index = 0;
    nb::object out = python::tree_fill(info.tree.get(), result.outputs, index, false);
    assign_state(out_state, result.outputs, index);
    return out;
  }

 private:
  python::PyRef fun_;
  python::PyRef inputs_;
  python::PyRef outputs_;
  bool shapeless_;
  bool check_;
  std::uintptr_t fun_id_;
  std::string name_;
  bool warned_frozen_ = false;
  bool warned_random_ = false;
};

int compiled_traverse(PyObject* self, visitproc visit, void* arg) {
  if (!nb::inst_ready(self)) return 0;
  for (PyObject* o : nb::inst_ptr<CompiledFunction>(self)->held()) Py_VISIT(o);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int compiled_clear(PyObject* self) {
  if (nb::inst_ready(self)) nb::inst_ptr<CompiledFunction>(self)->clear();
  return 0;
}

PyType_Slot compiled_slots[] = {
    {Py_tp_traverse, (void*)compiled_traverse}, {Py_tp_clear, (void*)compiled_clear}, {0, nullptr}};

void warn_python(const std::string& message) {
  // A C++ caller on a thread without the GIL gets no Python warning.
  if (!PyGILState_Check()) return;
  if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) < 0) throw nb::python_error();
}

CompileMode parse_mode(const std::string& mode) {
  if (mode == "disabled") return CompileMode::disabled;
  if (mode == "no_simplify") return CompileMode::no_simplify;
  if (mode == "no_fuse") return CompileMode::no_fuse;
  if (mode == "enabled") return CompileMode::enabled;
  throw std::invalid_argument("[set_compile_mode] Unknown mode '" + mode +
                              "'; expected 'disabled', 'no_simplify', 'no_fuse' or 'enabled'.");
}

const char* mode_name(CompileMode m) {
  switch (m) {
    case CompileMode::disabled:
      return "disabled";
    case CompileMode::no_simplify:
      return "no_simplify";
    case CompileMode::no_fuse:
      return "no_fuse";
    default:
      return "enabled";
  }
}

} // namespace

void init_compile(nb::module_& m) {
  compile_detail::set_warning_hook(&warn_python);

  nb::class_<CompiledFunction>(m, "_CompiledFunction", nb::type_slots(compiled_slots),
                               "A function compiled by loom.core.compile.")
      .def("__call__", &CompiledFunction::call)
      // Attributes the wrapper lacks (__name__, __doc__...) are the function's.
      .def("__getattr__", [](const CompiledFunction& f, const std::string& name) {
        nb::object v = f.attr(name.c_str());
        if (v.is_none()) throw nb::attribute_error(name.c_str());
        return v;
      });

  m.def(
      "compile",
      [](nb::callable fun, nb::object inputs, nb::object outputs, bool shapeless, bool check) {
        return new CompiledFunction(fun, inputs, outputs, shapeless, check);
      },
      "fun"_a, "inputs"_a = nb::none(), "outputs"_a = nb::none(), "shapeless"_a = false,
      nb::kw_only(), "check"_a = false, nb::rv_policy::take_ownership,
      nb::sig("def compile(fun: Callable[P, R], inputs: object | None = None, outputs: object | "
              "None = None, shapeless: bool = False, *, check: bool = False) -> Callable[P, R]"),
      R"(Returns a compiled function which produces the same output as ``fun``.

Args:
    fun (Callable): A function which takes a variable number of arrays (or trees of arrays
        and int, float, str or None) and returns a variable number of arrays.
    inputs (list or dict, optional): These inputs will be captured during the function
        compilation along with the inputs to ``fun``. Leaf nodes that are not arrays are
        ignored. Default: None
    outputs (list or dict, optional): These outputs will be captured and updated in a
        compiled function. Leaf nodes that are not arrays are ignored. Default: None
    shapeless (bool, optional): A function compiled with the shapeless option enabled will
        not be recompiled when the input shape changes. Changing the number of dimensions or
        type of any input will result in a recompilation. Default: False
    check (bool, optional): Loom only. Run the uncompiled function beside the compiled one on
        the first call of each cache entry and raise if they disagree. Default: False

Returns:
    Callable: A compiled function with the same signature as ``fun``.)");

  m.def("disable_compile", &disable_compile,
        "Globally disable compilation. Setting the environment variable "
        "``MLX_DISABLE_COMPILE`` (or ``LOOM_DISABLE_COMPILE``) can also be used.");
  m.def("enable_compile", &enable_compile,
        "Globally enable compilation. This will override the environment variable "
        "``MLX_DISABLE_COMPILE``.");
  m.def(
      "set_compile_mode", [](const std::string& mode) { set_compile_mode(parse_mode(mode)); },
      "mode"_a,
      "Loom only: 'enabled', 'no_fuse' (CSE only), 'no_simplify' (fusion only) or 'disabled'.");
  m.def(
      "get_compile_mode", []() { return std::string(mode_name(compile_mode())); },
      "Loom only: the current compile mode.");
  m.def("clear_compile_cache", &compile_detail::clear_cache,
        "Loom only: drop every compiled entry (the compiled functions stay usable and retrace).");
  m.def(
      "compile_cache_info",
      []() {
        nb::list out;
        for (auto& f : compile_detail::cache_info()) {
          nb::dict d;
          d["function"] = f.name;
          d["id"] = f.fun_id;
          d["entries"] = f.entries;
          d["hits"] = f.hits;
          d["misses"] = f.misses;
          d["bytes"] = f.bytes;
          nb::list reasons;
          for (auto& r : f.retrace_reasons) reasons.append(r);
          d["retrace_reasons"] = reasons;
          out.append(d);
        }
        return out;
      },
      "Loom only: one dict per compiled function: entries, hits, misses, bytes of captured "
      "constants held, and the latest retrace reasons.");
  m.def("set_compile_cache_max_entries", &compile_detail::set_max_entries, "n"_a,
        "Loom only: cap the compile cache (all functions together); least recently used "
        "entries are evicted. Also LOOM_COMPILE_CACHE_MAX_ENTRIES.");
  m.def("get_compile_cache_max_entries", &compile_detail::max_entries);

  // Entries hold Python objects: drop them before the interpreter goes.
  nb::module_::import_("atexit").attr("register")(
      nb::cpp_function([]() { compile_detail::clear_cache(); }));
}
