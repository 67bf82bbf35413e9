// Python bindings of the transforms: eval, grad, value_and_grad, vjp, jvp,
// vmap, checkpoint and the custom_function class.
#include <nanobind/nanobind.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <sstream>

#include "loom/ops.h"
#include "py_ref.h"
#include "trees.h"
#include "utils.h"

namespace nb = nanobind;
using namespace nb::literals;
using namespace loom;
using loom::python::tree_fill;
using loom::python::tree_flatten;

namespace {

std::string python_type_name(nb::handle h);

// argnums/argnames of grad and value_and_grad: MLX's binding rejects other
// types with a TypeError, duplicates and negative indices with a ValueError.
std::vector<int> to_argnums(nb::handle h, const char* op) {
  auto bad_type = [&](nb::handle v) {
    return nb::type_error(("[" + std::string(op) +
                           "] argnums must be an int or a sequence of ints, but got " +
                           python_type_name(v) + ".")
                              .c_str());
  };
  std::vector<int> out;
  auto add = [&](nb::handle v) {
    if (!nb::isinstance<nb::int_>(v) || nb::isinstance<nb::bool_>(v)) throw bad_type(v);
    int a = nb::cast<int>(v);
    if (a < 0) {
      throw nb::value_error(("[" + std::string(op) +
                             "] Can't compute the gradient of negative argument index " +
                             std::to_string(a))
                                .c_str());
    }
    if (std::find(out.begin(), out.end(), a) != out.end()) {
      throw nb::value_error(("[" + std::string(op) + "] Duplicate argument index " +
                             std::to_string(a) + " is not allowed.")
                                .c_str());
    }
    out.push_back(a);
  };
  if (nb::isinstance<nb::int_>(h)) {
    add(h);
  } else if (nb::isinstance<nb::sequence>(h) && !nb::isinstance<nb::str>(h)) {
    for (nb::handle item : h) add(item);
  } else {
    throw bad_type(h);
  }
  return out;
}

std::vector<std::string> to_argnames(nb::handle h, const char* op) {
  auto bad_type = [&](nb::handle v) {
    return nb::type_error(("[" + std::string(op) +
                           "] argnames must be a str or a sequence of str, but got " +
                           python_type_name(v) + ".")
                              .c_str());
  };
  std::vector<std::string> out;
  if (nb::isinstance<nb::str>(h)) {
    out.push_back(nb::cast<std::string>(h));
  } else if (nb::isinstance<nb::sequence>(h)) {
    for (nb::handle item : h) {
      if (!nb::isinstance<nb::str>(item)) throw bad_type(item);
      out.push_back(nb::cast<std::string>(item));
    }
  } else {
    throw bad_type(h);
  }
  return out;
}

std::string python_type_name(nb::handle h) { return nb::cast<std::string>(h.type().attr("__name__")); }

// The argument handling shared by grad and value_and_grad.
struct GradSpec {
  std::vector<int> argnums;
  std::vector<std::string> argnames;
  bool single_argnum = false;
};

GradSpec make_grad_spec(nb::handle argnums, nb::handle argnames, const char* op) {
  GradSpec spec;
  spec.argnames = to_argnames(argnames, op);
  if (argnums.is_none()) {
    if (spec.argnames.empty()) spec.argnums = {0};
  } else {
    spec.argnums = to_argnums(argnums, op);
  }
  spec.single_argnum = spec.argnums.size() == 1;
  if (spec.argnums.empty() && spec.argnames.empty()) {
    throw std::invalid_argument("[grad] Must specify at least one argument.");
  }
  return spec;
}

// Returns (value, grads) in MLX's structure. `scalar_only` is grad's rule:
// the function must return one array.
std::pair<nb::object, nb::object> value_and_grad_call(nb::callable fun, const GradSpec& spec,
                                                      nb::args args, nb::kwargs kwargs,
                                                      bool scalar_only) {
  int nargs = static_cast<int>(args.size());
  for (int a : spec.argnums) {
    if (a < 0 || a >= nargs) {
      std::ostringstream msg;
      msg << "[grad] Can't compute the gradient of argument index " << a
          << " because the function is called with only " << nargs << " positional arguments.";
      throw std::invalid_argument(msg.str());
    }
  }
  for (auto& name : spec.argnames) {
    if (!kwargs.contains(name.c_str())) {
      std::ostringstream msg;
      msg << "[grad] Can't compute the gradient of keyword argument '" << name
          << "' because the function is called with the following keyword arguments {";
      bool first = true;
      for (auto [k, v] : kwargs) {
        msg << (first ? "" : ", ") << nb::cast<std::string>(k);
        first = false;
      }
      msg << "}";
      throw std::invalid_argument(msg.str());
    }
  }
  std::vector<array> primals;
  for (int a : spec.argnums) {
    auto leaves = tree_flatten(args[a], true);
    primals.insert(primals.end(), leaves.begin(), leaves.end());
  }
  for (auto& name : spec.argnames) {
    auto leaves = tree_flatten(kwargs[name.c_str()], true);
    primals.insert(primals.end(), leaves.begin(), leaves.end());
  }

  nb::object result;
  ArrayFn loss_fn = [&](const std::vector<array>& ps) {
    size_t index = 0;
    nb::list new_args;
    for (int i = 0; i < nargs; ++i) new_args.append(args[i]);
    for (int a : spec.argnums) new_args[a] = tree_fill(args[a], ps, index, true);
    nb::dict new_kwargs;
    for (auto [k, v] : kwargs) new_kwargs[k] = v;
    for (auto& name : spec.argnames) {
      new_kwargs[name.c_str()] = tree_fill(kwargs[name.c_str()], ps, index, true);
    }
    result = fun(*nb::tuple(new_args), **new_kwargs);
    if (python::is_array(result)) return std::vector<array>{nb::cast<array>(result)};
    bool sequence = nb::isinstance<nb::tuple>(result) || nb::isinstance<nb::list>(result);
    if (scalar_only || !sequence || nb::len(result) == 0 ||
        !python::is_array(nb::borrow<nb::sequence>(result)[0])) {
      std::ostringstream msg;
      if (scalar_only) {
        msg << "[grad] The return value of the function whose gradient we want to compute "
               "should be a scalar array; but "
            << python_type_name(result) << " was returned.";
      } else {
        msg << "[value_and_grad] The return value of the function whose gradient we want to "
               "compute should be either a scalar array or a tuple with the first value being a "
               "scalar array (Union[array, tuple[array, Any, ...]]); but "
            << python_type_name(result) << " was returned.";
      }
      throw std::invalid_argument(msg.str());
    }
    return std::vector<array>{nb::cast<array>(nb::borrow<nb::sequence>(result)[0])};
  };

  auto [outputs, grads] = vjp(loss_fn, primals, {array(1.0f)});

  nb::object value;
  if (python::is_array(result)) {
    value = nb::cast(outputs[0]);
  } else {
    nb::list items;
    items.append(nb::cast(outputs[0]));
    nb::sequence seq = nb::borrow<nb::sequence>(result);
    for (size_t i = 1; i < nb::len(seq); ++i) items.append(seq[i]);
    value = nb::isinstance<nb::tuple>(result) ? nb::object(nb::tuple(items)) : nb::object(items);
  }

  size_t index = 0;
  nb::list positional;
  for (int a : spec.argnums) positional.append(tree_fill(args[a], grads, index, true));
  nb::object positional_grads = nb::none();
  if (spec.argnums.size() == 1) {
    positional_grads = positional[0];
  } else if (!spec.argnums.empty()) {
    positional_grads = nb::tuple(positional);
  }
  nb::object grad_tree = positional_grads;
  if (!spec.argnames.empty()) {
    nb::dict named;
    for (auto& name : spec.argnames) {
      named[name.c_str()] = tree_fill(kwargs[name.c_str()], grads, index, true);
    }
    grad_tree = nb::make_tuple(positional_grads, named);
  }
  return {value, grad_tree};
}

// fun(*primals) flattened: one array or a list/tuple of arrays.
std::vector<array> call_flat(nb::callable fun, const std::vector<array>& inputs) {
  nb::list args;
  for (auto& a : inputs) args.append(nb::cast(a));
  nb::object out = fun(*nb::tuple(args));
  return tree_flatten(out, true);
}

nb::list to_list(const std::vector<array>& arrays) {
  nb::list out;
  for (auto& a : arrays) out.append(nb::cast(a));
  return out;
}

int axis_value(nb::handle h) { return h.is_none() ? -1 : nb::cast<int>(h); }

// --- custom_function and checkpoint ---

// The shape of a Python tree with its leaves dropped, to rebuild outputs.
nb::object structure_of(nb::handle tree) {
  return python::tree_map(tree, [](nb::handle) { return nb::none(); });
}

// An ArrayFn over a Python callable: flat arrays go into the array leaves of
// `args`; the output tree's structure is recorded in `*structure`. Everything
// is held through PyRef because the function may live inside a graph.
ArrayFn make_tree_fn(nb::handle fun, nb::handle args, nb::handle kwargs,
                     std::shared_ptr<python::PyRef> structure) {
  return [fun = python::PyRef(fun), args = python::PyRef(args), kwargs = python::PyRef(kwargs),
          structure](const std::vector<array>& flat) {
    size_t index = 0;
    nb::object new_args = tree_fill(args.get(), flat, index, false);
    nb::object out = fun.get()(*new_args, **kwargs.get());
    *structure = python::PyRef(structure_of(out));
    return tree_flatten(out, true);
  };
}

nb::object fill_structure(const python::PyRef& structure, const std::vector<array>& flat) {
  size_t index = 0;
  return tree_fill(structure.get(), flat, index, true);
}

// A rule's argument tuple: the single argument itself when the function
// takes one, else the tuple (MLX's convention).
nb::object pack(nb::handle items) {
  if (nb::len(items) == 1) return nb::borrow<nb::sequence>(items)[0];
  return nb::tuple(items);
}

struct PyCustomFunction {
  python::PyRef fun;
  python::PyRef vjp_fn;
  python::PyRef jvp_fn;
  python::PyRef vmap_fn;

  explicit PyCustomFunction(nb::callable f) : fun(f) {}

  nb::object call(nb::args args, nb::kwargs kwargs) {
    std::vector<array> inputs = tree_flatten(args, false);
    auto structure = std::make_shared<python::PyRef>();
    ArrayFn body = make_tree_fn(fun.get(), args, kwargs, structure);
    python::PyRef arg_tree(args);
    auto rebuild_args = [arg_tree](const std::vector<array>& flat) {
      size_t index = 0;
      return tree_fill(arg_tree.get(), flat, index, false);
    };

    CustomVjp vjp_rule;
    if (!vjp_fn.is_none()) {
      vjp_rule = [rule = vjp_fn, rebuild_args, structure](const std::vector<array>& primals,
                                                          const std::vector<array>& cotans,
                                                          const std::vector<array>& outs) {
        nb::object r = rule.get()(pack(rebuild_args(primals)), fill_structure(*structure, cotans),
                                  fill_structure(*structure, outs));
        return tree_flatten(r, true);
      };
    }
    CustomJvp jvp_rule;
    if (!jvp_fn.is_none()) {
      jvp_rule = [rule = jvp_fn, rebuild_args](const std::vector<array>& primals,
                                               const std::vector<array>& tangents,
                                               const std::vector<int>& argnums) {
        nb::list t;
        for (size_t i = 0; i < primals.size(); ++i) t.append(nb::none());
        for (size_t j = 0; j < argnums.size(); ++j) t[argnums[j]] = nb::cast(tangents[j]);
        nb::object r = rule.get()(pack(rebuild_args(primals)), pack(t));
        return tree_flatten(r, true);
      };
    }
    CustomVmap vmap_rule;
    if (!vmap_fn.is_none()) {
      vmap_rule = [rule = vmap_fn, rebuild_args](const std::vector<array>& inputs,
                                                 const std::vector<int>& axes) {
        nb::list ax;
        for (int a : axes) ax.append(a < 0 ? nb::none() : nb::object(nb::int_(a)));
        nb::object r = rule.get()(pack(rebuild_args(inputs)), pack(ax));
        if (!nb::isinstance<nb::tuple>(r) || nb::len(r) != 2) {
          throw std::invalid_argument(
              "[custom_function] The vmap function must return (outputs, out_axes).");
        }
        nb::tuple pair = nb::borrow<nb::tuple>(r);
        auto outs = tree_flatten(pair[0], true);
        std::vector<int> out_axes;
        if (nb::isinstance<nb::list>(pair[1]) || nb::isinstance<nb::tuple>(pair[1])) {
          for (nb::handle h : pair[1]) out_axes.push_back(axis_value(h));
        } else {
          out_axes.assign(outs.size(), axis_value(pair[1]));
        }
        return std::make_pair(outs, out_axes);
      };
    }
    auto wrapped = custom_function(body, vjp_rule, jvp_rule, vmap_rule)(inputs);
    return fill_structure(*structure, wrapped);
  }
};

void warn_capture(const char* message) {
  if (PyErr_WarnEx(PyExc_UserWarning, message, 1) < 0) throw nb::python_error();
}

} // namespace

void init_transforms(nb::module_& m) {
  set_capture_warning_hook(&warn_capture);

  m.def(
      "eval", [](nb::args args) { bindings::eval_nogil(tree_flatten(args, false)); },
      nb::sig("def eval(*args) -> None"),
      "Evaluate an array or tree of arrays. Leaves which are not arrays are ignored.");
  m.def(
      "async_eval", [](nb::args args) { bindings::async_eval_nogil(tree_flatten(args, false)); },
      nb::sig("def async_eval(*args) -> None"),
      "Schedule the evaluation of arrays or trees of arrays and return at once. A later eval, "
      "or any read of the data (item, printing, NumPy conversion), waits for completion.");

  m.def(
      "value_and_grad",
      [](nb::callable fun, nb::object argnums, nb::object argnames) {
        GradSpec spec = make_grad_spec(argnums, argnames, "value_and_grad");
        return nb::cpp_function([fun, spec](nb::args args, nb::kwargs kwargs) {
          auto [value, grads] = value_and_grad_call(fun, spec, args, kwargs, false);
          return nb::make_tuple(value, grads);
        });
      },
      "fun"_a, "argnums"_a = nb::none(), "argnames"_a = nb::list(),
      nb::sig("def value_and_grad(fun: Callable[P, R], argnums: int | Sequence[int] | None = "
              "None, argnames: str | Sequence[str] = []) -> Callable[P, tuple[R, Any]]"),
      "Returns a function which computes the value and gradient of fun.");
  m.def(
      "grad",
      [](nb::callable fun, nb::object argnums, nb::object argnames) {
        GradSpec spec = make_grad_spec(argnums, argnames, "grad");
        return nb::cpp_function([fun, spec](nb::args args, nb::kwargs kwargs) {
          return value_and_grad_call(fun, spec, args, kwargs, true).second;
        });
      },
      "fun"_a, "argnums"_a = nb::none(), "argnames"_a = nb::list(),
      nb::sig("def grad(fun: Callable[P, R], argnums: int | Sequence[int] | None = None, "
              "argnames: str | Sequence[str] = []) -> Callable[P, Any]"),
      "Returns a function which computes the gradient of fun.");
  m.def(
      "vjp",
      [](nb::callable fun, const std::vector<array>& primals,
         const std::vector<array>& cotangents) {
        auto [outs, vjps] = vjp([&](const std::vector<array>& in) { return call_flat(fun, in); },
                                primals, cotangents);
        return nb::make_tuple(to_list(outs), to_list(vjps));
      },
      "fun"_a, "primals"_a, "cotangents"_a,
      nb::sig("def vjp(fun: Callable, primals: list[array], cotangents: list[array]) -> "
              "tuple[list[array], list[array]]"),
      "Compute the vector-Jacobian product of fun at primals.");
  m.def(
      "jvp",
      [](nb::callable fun, const std::vector<array>& primals,
         const std::vector<array>& tangents) {
        auto [outs, jvps] = jvp([&](const std::vector<array>& in) { return call_flat(fun, in); },
                                primals, tangents);
        return nb::make_tuple(to_list(outs), to_list(jvps));
      },
      "fun"_a, "primals"_a, "tangents"_a,
      nb::sig("def jvp(fun: Callable, primals: list[array], tangents: list[array]) -> "
              "tuple[list[array], list[array]]"),
      "Compute the Jacobian-vector product of fun at primals.");
  m.def(
      "vmap",
      [](nb::callable fun, nb::object in_axes, nb::object out_axes) {
        return nb::cpp_function([fun, in_axes, out_axes](nb::args args, nb::kwargs kwargs) {
          if (nb::len(kwargs) > 0) {
            throw nb::type_error("[vmap] Keyword arguments are not supported.");
          }
          auto inputs = tree_flatten(args, false);
          std::vector<int> axes;
          nb::object prefix = in_axes;
          if (nb::isinstance<nb::list>(in_axes)) prefix = nb::tuple(in_axes);
          if (nb::isinstance<nb::tuple>(prefix) && nb::len(prefix) != nb::len(args)) {
            std::ostringstream msg;
            msg << "[vmap] The number of in axes (" << nb::len(prefix)
                << ") must match the number of positional arguments (" << nb::len(args) << ").";
            throw std::invalid_argument(msg.str());
          }
          for (auto& ax : python::tree_broadcast_prefix(prefix, args, "vmap")) {
            axes.push_back(axis_value(ax));
          }
          nb::object output_tree = nb::none();
          ArrayFn inner = [&](const std::vector<array>& flat) {
            size_t index = 0;
            nb::object new_args = tree_fill(args, flat, index, false);
            output_tree = fun(*new_args);
            return tree_flatten(output_tree, true);
          };
          auto choose = [&](const std::vector<array>& outs) {
            std::vector<int> result;
            for (auto& ax : python::tree_broadcast_prefix(out_axes, output_tree, "vmap")) {
              result.push_back(axis_value(ax));
            }
            return result;
          };
          auto results = vmap_apply(inner, inputs, axes, choose);
          size_t index = 0;
          return tree_fill(output_tree, results, index, true);
        });
      },
      "fun"_a, "in_axes"_a = 0, "out_axes"_a = 0,
      nb::sig("def vmap(fun: Callable[P, R], in_axes: object = 0, out_axes: object = 0) -> "
              "Callable[P, R]"),
      "Returns a vectorized version of fun.");
  m.def(
      "checkpoint",
      [](nb::callable fun) {
        return nb::cpp_function([fun](nb::args args, nb::kwargs kwargs) {
          auto inputs = tree_flatten(args, false);
          auto structure = std::make_shared<python::PyRef>();
          auto outs = checkpoint(make_tree_fn(fun, args, kwargs, structure))(inputs);
          return fill_structure(*structure, outs);
        });
      },
      "fun"_a, nb::sig("def checkpoint(fun: Callable[P, R]) -> Callable[P, R]"),
      "Transform fun into one that performs gradient checkpointing with respect to its inputs.");

  nb::class_<PyCustomFunction>(m, "custom_function",
                               "Set up a function for custom gradient and vmap definitions.")
      .def(nb::init<nb::callable>(), "f"_a)
      .def("__call__", &PyCustomFunction::call)
      .def(
          "vjp",
          [](nb::handle self, nb::callable f) {
            nb::cast<PyCustomFunction&>(self).vjp_fn = python::PyRef(f);
            return nb::borrow(self);
          },
          "f"_a, "Define a custom vjp for the wrapped function.")
      .def(
          "jvp",
          [](nb::handle self, nb::callable f) {
            nb::cast<PyCustomFunction&>(self).jvp_fn = python::PyRef(f);
            return nb::borrow(self);
          },
          "f"_a, "Define a custom jvp for the wrapped function.")
      .def(
          "vmap",
          [](nb::handle self, nb::callable f) {
            nb::cast<PyCustomFunction&>(self).vmap_fn = python::PyRef(f);
            return nb::borrow(self);
          },
          "f"_a, "Define a custom vectorization transformation for the wrapped function.");
}
