// export_function, import_function, exporter and export_to_dot (seed
// §12.6-12.7): argument conventions and the callback records; the tracing,
// the format and the imported call live in loom/io/export.
#include "loom/io/export.h"

#include <nanobind/stl/map.h>

#include <fstream>
#include <sstream>

#include "utils.h"

namespace loom::bindings {

namespace {

// A path given as str or os.PathLike; nullopt for anything else.
std::optional<std::string> path_of(nb::handle file) {
  if (nb::isinstance<nb::str>(file)) return nb::cast<std::string>(file);
  if (!nb::hasattr(file, "__fspath__")) return std::nullopt;
  return nb::cast<std::string>(nb::module_::import_("os").attr("fsdecode")(file));
}

void warn_user(const std::string& message) {
  if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) < 0) throw nb::python_error();
}

const char* kInputsError =
    "[export_function] Inputs can either be a variable number of positional and keyword arrays "
    "or a single tuple and/or dictionary of arrays.";

// MLX's two calling conventions: f(*arrays, **arrays), or f(tuple_or_list)
// / f(tuple_or_list, dict) / f(dict) with no keyword arguments.
std::pair<std::vector<array>, std::map<std::string, array>> split_inputs(const nb::args& args,
                                                                         const nb::kwargs& kwargs,
                                                                         const char* error) {
  std::vector<array> positional;
  std::map<std::string, array> keyword;
  auto take_dict = [&](nb::handle d) {
    for (auto [k, v] : nb::borrow<nb::dict>(d)) {
      if (!nb::isinstance<nb::str>(k) || !is_array(v)) throw std::invalid_argument(error);
      keyword.emplace(nb::cast<std::string>(k), as_array(v));
    }
  };
  size_t n = args.size();
  bool sequence_first =
      n >= 1 && (nb::isinstance<nb::tuple>(args[0]) || nb::isinstance<nb::list>(args[0]));
  bool dict_last = n >= 1 && nb::isinstance<nb::dict>(args[n - 1]);
  if (kwargs.size() == 0 &&
      ((n == 1 && (sequence_first || dict_last)) || (n == 2 && sequence_first && dict_last))) {
    if (sequence_first) {
      for (nb::handle h : args[0]) {
        if (!is_array(h)) throw std::invalid_argument(error);
        positional.push_back(as_array(h));
      }
    }
    if (dict_last) take_dict(args[n - 1]);
    return {positional, keyword};
  }
  for (nb::handle h : args) {
    if (!is_array(h)) throw std::invalid_argument(error);
    positional.push_back(as_array(h));
  }
  take_dict(kwargs);
  return {positional, keyword};
}

// Calls the Python function on traced arrays; its outputs must be an array
// or a tuple/list of arrays.
io::KwFn python_function(nb::object fun) {
  return [fun](const std::vector<array>& args, const std::map<std::string, array>& kwargs) {
    nb::list py_args;
    for (const array& a : args) py_args.append(nb::cast(a));
    nb::dict py_kwargs;
    for (const auto& [k, v] : kwargs) py_kwargs[k.c_str()] = nb::cast(v);
    nb::object out = fun(*nb::tuple(py_args), **py_kwargs);
    const char* error =
        "[export_function] Outputs can be either a single array, a tuple, or a list of arrays.";
    std::vector<array> outputs;
    if (is_array(out)) {
      outputs.push_back(as_array(out));
    } else if (nb::isinstance<nb::tuple>(out) || nb::isinstance<nb::list>(out)) {
      for (nb::handle h : out) {
        if (!is_array(h)) throw std::invalid_argument(error);
        outputs.push_back(as_array(h));
      }
    } else {
      throw std::invalid_argument(error);
    }
    return outputs;
  };
}

// --- the callback records -------------------------------------------------------

nb::object state_value(const StateValue& v) {
  return std::visit(
      [](const auto& x) -> nb::object {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          // Nested encoded states (Compiled's ops) are bytes, not text.
          PyObject* s = PyUnicode_DecodeUTF8(x.data(), static_cast<Py_ssize_t>(x.size()), nullptr);
          if (s) return nb::steal(s);
          PyErr_Clear();
          return nb::bytes(x.data(), x.size());
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>> ||
                             std::is_same_v<T, std::vector<double>>) {
          nb::list l;
          for (auto e : x) l.append(nb::cast(e));
          return nb::tuple(l);
        } else {
          return nb::cast(x);
        }
      },
      v);
}

nb::list value_list(const std::vector<io::ValueInfo>& values) {
  nb::list out;
  for (const auto& v : values) {
    nb::list shape;
    for (int32_t d : v.shape) shape.append(d);
    out.append(nb::make_tuple(v.name, nb::tuple(shape), nb::cast(v.dtype)));
  }
  return out;
}

void report_trace(nb::handle callback, const io::ExportedTrace& trace) {
  io::TraceInfo info = io::describe_trace(trace);
  nb::dict inputs;
  inputs["inputs"] = value_list(info.inputs);
  inputs["type"] = "inputs";
  callback(inputs);
  nb::list keywords;
  for (const auto& [k, name] : info.keywords) keywords.append(nb::make_tuple(k, name));
  nb::dict kw;
  kw["keywords"] = keywords;
  kw["type"] = "keyword_inputs";
  callback(kw);
  nb::dict outputs;
  outputs["outputs"] = value_list(info.outputs);
  outputs["type"] = "outputs";
  callback(outputs);
  nb::list constants;
  for (const auto& [name, a] : info.constants) constants.append(nb::make_tuple(name, nb::cast(a)));
  nb::dict consts;
  consts["constants"] = constants;
  consts["type"] = "constants";
  callback(consts);
  for (const auto& node : info.nodes) {
    nb::list arguments;
    nb::dict state;
    for (const auto& f : node.state) {
      nb::object v = state_value(f.value);
      arguments.append(v);
      state[f.name.c_str()] = v;
    }
    nb::dict d;
    d["arguments"] = arguments;
    d["state"] = state; // Loom: the same values by name
    d["outputs"] = value_list(node.outputs);
    d["inputs"] = value_list(node.inputs);
    d["name"] = node.name;
    d["type"] = "primitive";
    callback(d);
  }
}

// --- Python objects ---------------------------------------------------------------

struct PyImportedFunction {
  std::shared_ptr<io::ImportedFunction> fn;
  nb::tuple call(const nb::args& args, const nb::kwargs& kwargs) const {
    auto [positional, keyword] = split_inputs(
        args, kwargs,
        "[import_function::call] Inputs can either be a variable number of positional and "
        "keyword arrays or a single tuple and/or dictionary of arrays.");
    std::vector<array> outs = (*fn)(positional, keyword);
    nb::list l;
    for (auto& o : outs) l.append(nb::cast(o));
    return nb::tuple(l);
  }
};

struct PyFunctionExporter {
  std::unique_ptr<io::FunctionExporter> exporter;
  void call(const nb::args& args, const nb::kwargs& kwargs) {
    auto [positional, keyword] = split_inputs(args, kwargs, kInputsError);
    (*exporter)(positional, keyword);
  }
  void close() { exporter->close(); }
};

io::ExportedFunction read_file(nb::handle file) {
  if (auto path = path_of(file)) return io::import_function(*path).function();
  if (!nb::hasattr(file, "read")) {
    throw std::invalid_argument("[import_function] Expected a path or a file object, got " +
                                python_type_name(file) + ".");
  }
  nb::bytes data = nb::cast<nb::bytes>(file.attr("read")());
  auto r = io::memory_reader(std::string(static_cast<const char*>(data.data()), data.size()),
                             "<file object>");
  return io::read_function(*r);
}

} // namespace

void init_export(nb::module_& m) {
  nb::class_<PyImportedFunction>(m, "_ImportedFunction",
                                 "A function read by import_function; calls return a tuple.")
      .def("__call__", &PyImportedFunction::call)
      .def_prop_ro("metadata", [](const PyImportedFunction& f) { return f.fn->metadata(); });

  nb::class_<PyFunctionExporter>(
      m, "FunctionExporter",
      "A context managing class for exporting multiple traces of the same function to a file.\n\n"
      "Make an instance of this class by calling :func:`mx.exporter`.")
      .def("__call__", &PyFunctionExporter::call)
      .def("close", &PyFunctionExporter::close)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PyFunctionExporter& self, nb::args) { self.close(); });

  m.def(
      "export_function",
      [](nb::handle target, nb::object fun, nb::args args, bool shapeless,
         std::optional<std::string> metadata, nb::kwargs kwargs) {
        auto [positional, keyword] = split_inputs(args, kwargs, kInputsError);
        io::KwFn f = python_function(fun);
        auto path = path_of(target);
        if (!path && PyCallable_Check(target.ptr())) {
          if (metadata) {
            throw std::invalid_argument(
                "[export_function] The metadata argument is only supported when exporting to a "
                "file, not when using a callback.");
          }
          report_trace(target, io::trace_for_export(f, positional, keyword, shapeless, warn_user));
          return;
        }
        io::ExportedFunction exported;
        exported.metadata = metadata.value_or("");
        exported.traces.push_back(
            io::trace_for_export(f, positional, keyword, shapeless, warn_user));
        if (path) {
          io::AtomicFileWriter w(*path, "export_function");
          io::write_function(w, exported);
          w.commit();
        } else if (nb::hasattr(target, "write")) {
          io::BufferWriter w;
          io::write_function(w, exported);
          target.attr("write")(nb::bytes(w.bytes().data(), w.bytes().size()));
        } else {
          throw std::invalid_argument(
              "[export_function] The first argument must be a path, a file object or a "
              "callback, got " +
              python_type_name(target) + ".");
        }
      },
      nb::arg("file_or_callback"), nb::arg("fun"), nb::arg("args"), nb::kw_only(),
      nb::arg("shapeless") = false, nb::arg("metadata") = nb::none(), nb::arg("kwargs"),
      nb::sig("def export_function(file_or_callback: str | Callable, fun: Callable, *args, "
              "shapeless: bool = False, metadata: str | None = None, **kwargs) -> None"),
      "Export a function: trace it on the example arrays (only their shapes and dtypes\n"
      "matter) and write its graph, with the arrays it captures, to a file, a file object\n"
      "or a callback. Loom's files carry a format version and are refused clearly by an\n"
      "incompatible build; see docs/export.md.");

  m.def(
      "export_mlxfn",
      [](nb::handle file, nb::object fun, nb::args args, bool shapeless,
         std::optional<std::string> metadata, nb::kwargs kwargs) {
        auto [positional, keyword] = split_inputs(args, kwargs, kInputsError);
        auto path = path_of(file);
        if (!path) {
          throw std::invalid_argument("[export_mlxfn] The file must be a path, got " +
                                      python_type_name(file) + ".");
        }
        io::ExportedFunction exported;
        exported.metadata = metadata.value_or("");
        exported.traces.push_back(
            io::trace_for_export(python_function(fun), positional, keyword, shapeless, warn_user));
        io::BufferWriter bytes;
        io::write_mlxfn(bytes, exported); // raises before the file is touched
        io::AtomicFileWriter w(*path, "export_mlxfn");
        w.write(bytes.bytes().data(), bytes.bytes().size());
        w.commit();
      },
      nb::arg("file"), nb::arg("fun"), nb::arg("args"), nb::kw_only(), nb::arg("shapeless") = false,
      nb::arg("metadata") = nb::none(), nb::arg("kwargs"),
      nb::sig("def export_mlxfn(file: str, fun: Callable, *args, shapeless: bool = False, "
              "metadata: str | None = None, **kwargs) -> None"),
      "Loom extra: export_function in MLX 0.32.4's own .mlxfn layout, for MLX's\n"
      "import_function. Only primitives MLX can represent (element-wise, matmul, reductions,\n"
      "softmax, shape ops, slices, casts) are written; any other raises naming it.");

  m.def(
      "import_function",
      [](nb::handle file, bool return_metadata) -> nb::object {
        auto fn = std::make_shared<io::ImportedFunction>(read_file(file));
        nb::object f = nb::cast(PyImportedFunction{fn});
        if (return_metadata) return nb::make_tuple(f, fn->metadata());
        return f;
      },
      nb::arg("file"), nb::arg("return_metadata") = false,
      nb::sig("def import_function(file: str, return_metadata: bool = False) -> Callable | "
              "tuple[Callable, str]"),
      "Import a function exported by export_function. The imported function takes the\n"
      "arguments it was exported with (positional and keyword, or a tuple and a dict) and\n"
      "always returns a tuple of arrays. It can be transformed (grad, vmap, compile).");

  m.def(
      "exporter",
      [](nb::handle file, nb::object fun, bool shapeless, std::optional<std::string> metadata) {
        auto path = path_of(file);
        if (!path) {
          throw std::invalid_argument("[exporter] The file must be a path, got " +
                                      python_type_name(file) + ".");
        }
        PyFunctionExporter e;
        e.exporter = std::make_unique<io::FunctionExporter>(*path, python_function(fun), shapeless,
                                                            metadata.value_or(""), warn_user);
        return e;
      },
      nb::arg("file"), nb::arg("fun"), nb::kw_only(), nb::arg("shapeless") = false,
      nb::arg("metadata") = nb::none(),
      nb::sig("def exporter(file: str, fun: collections.abc.Callable, *, shapeless: bool = False, "
              "metadata: str | None = None) -> FunctionExporter"),
      "Make a callable object to export multiple traces of a function to one file; arrays\n"
      "the traces share are stored once. The file is written when the exporter closes.");

  m.def(
      "export_to_dot",
      [](nb::handle file, nb::args args, nb::kwargs kwargs) {
        std::vector<array> outputs;
        std::vector<nb::handle> stack(args.begin(), args.end());
        std::reverse(stack.begin(), stack.end());
        while (!stack.empty()) {
          nb::handle h = stack.back();
          stack.pop_back();
          if (is_array(h)) {
            outputs.push_back(as_array(h));
          } else if (nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h)) {
            std::vector<nb::handle> items(h.begin(), h.end());
            stack.insert(stack.end(), items.rbegin(), items.rend());
          } else {
            throw std::invalid_argument(
                "[export_to_dot] Expected arrays (or lists of arrays), got " + python_type_name(h) +
                ".");
          }
        }
        std::vector<std::pair<std::string, array>> names;
        for (auto [k, v] : kwargs) {
          if (!is_array(v)) {
            throw std::invalid_argument("[export_to_dot] The name '" + nb::cast<std::string>(k) +
                                        "' must label an array, got " + python_type_name(v) + ".");
          }
          names.emplace_back(nb::cast<std::string>(k), as_array(v));
        }
        std::ostringstream os;
        io::export_to_dot(os, outputs, names);
        if (auto path = path_of(file)) {
          std::ofstream out(*path);
          out << os.str();
          if (!out) throw std::runtime_error("[export_to_dot] Failed to write " + *path + ".");
        } else if (nb::hasattr(file, "write")) {
          file.attr("write")(os.str());
        } else {
          throw std::invalid_argument("[export_to_dot] Expected a path or a file object, got " +
                                      python_type_name(file) + ".");
        }
      },
      nb::arg("file"), nb::arg("args"), nb::arg("kwargs"),
      nb::sig("def export_to_dot(file: object, *args, **kwargs) -> None"),
      "Export the graph of unevaluated arrays producing the given outputs in DOT format;\n"
      "keyword arguments name arrays of the graph.");
}

} // namespace loom::bindings
