// save, savez, savez_compressed, save_safetensors, save_gguf and load: the formats live
// in loom/io; these bindings turn paths, pathlib.Path and file objects into
// its readers and writers.
#include "loom/io/io.h"

#include <nanobind/stl/pair.h>

#include <cstring>

#include "utils.h"

namespace loom::bindings {

namespace {

// A path given as str, bytes or os.PathLike; nullopt for anything else (a
// file object).
std::optional<std::string> as_path(nb::handle file) {
  if (nb::isinstance<nb::str>(file)) return nb::cast<std::string>(file);
  if (!nb::hasattr(file, "__fspath__")) return std::nullopt;
  nb::object p = nb::module_::import_("os").attr("fsdecode")(file);
  return nb::cast<std::string>(p);
}

// Writes through `save` to a path (atomically) or to a file object.
template <typename Save>
void save_to(nb::handle file, const char* op, const char* ext, Save&& save) {
  if (auto path = as_path(file)) {
    if (path->size() < std::strlen(ext) ||
        path->compare(path->size() - std::strlen(ext), std::strlen(ext), ext) != 0)
      *path += ext;
    nb::gil_scoped_release release;
    io::AtomicFileWriter w(*path, op);
    save(w);
    w.commit();
    return;
  }
  if (!nb::hasattr(file, "write")) {
    throw std::invalid_argument(std::string("[") + op +
                                "] Input must be a file-like object, or string (got " +
                                python_type_name(file) + ").");
  }
  io::BufferWriter w;
  {
    nb::gil_scoped_release release;
    save(w);
  }
  file.attr("write")(nb::bytes(w.bytes().data(), w.bytes().size()));
}

io::NamedArrays named_arrays(const nb::dict& d, const char* op) {
  io::NamedArrays out;
  for (auto [k, v] : d) {
    if (!nb::isinstance<nb::str>(k))
      throw nb::type_error((std::string("[") + op + "] Array names must be strings, got " +
                            python_type_name(k) + ".")
                               .c_str());
    if (!is_array(v))
      throw nb::type_error((std::string("[") + op + "] Expected an array for '" +
                            nb::cast<std::string>(k) + "', got " + python_type_name(v) + ".")
                               .c_str());
    out.emplace_back(nb::cast<std::string>(k), as_array(v));
  }
  return out;
}

void savez_impl(nb::handle file, const nb::args& args, const nb::kwargs& kwargs, bool compressed) {
  const char* op = compressed ? "savez_compressed" : "savez";
  io::NamedArrays arrays;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = "arr_" + std::to_string(i);
    if (kwargs.contains(name.c_str()))
      throw std::invalid_argument(std::string("[") + op +
                                  "] Cannot use un-named variables and keyword " + name);
    if (!is_array(args[i]))
      throw nb::type_error((std::string("[") + op + "] Expected an array for positional argument " +
                            std::to_string(i) + ", got " + python_type_name(args[i]) + ".")
                               .c_str());
    arrays.emplace_back(name, as_array(args[i]));
  }
  for (auto& item : named_arrays(kwargs, op)) arrays.push_back(std::move(item));
  for (auto& [name, a] : arrays) eval_nogil(a);
  save_to(file, op, ".npz", [&](io::Writer& w) { io::save_npz(w, arrays, compressed); });
}

nb::dict to_dict(io::NamedArrays& arrays) {
  nb::dict d;
  for (auto& [name, a] : arrays) d[nb::str(name.data(), name.size())] = nb::cast(a);
  return d;
}

} // namespace

void init_io(nb::module_& m) {
  m.def(
      "save",
      [](nb::handle file, const array& a) {
        array x = a;
        eval_nogil(x);
        save_to(file, "save", ".npy", [&](io::Writer& w) { io::save_npy(w, x); });
      },
      nb::arg("file"), nb::arg("arr"),
      nb::sig("def save(file: Union[file, str, pathlib.Path], arr: array) -> None"),
      "Save the array to a binary file in ``.npy`` format.\n\n"
      "The ``.npy`` extension is appended when the path lacks it. Saving evaluates the\n"
      "array. A path is written atomically: a temp file in the same folder is flushed\n"
      "and renamed over the target.\n\n"
      "Args:\n"
      "    file (str, pathlib.Path, file): File to which the array is saved.\n"
      "    arr (array): Array to be saved.");

  m.def(
      "savez",
      [](nb::handle file, nb::args args, nb::kwargs kwargs) {
        savez_impl(file, args, kwargs, false);
      },
      nb::arg("file"), nb::arg("args"), nb::arg("kwargs"),
      nb::sig("def savez(file: Union[file, str, pathlib.Path], *args, **kwargs)"),
      "Save several arrays to a binary file in uncompressed ``.npz`` format.\n\n"
      "Positional arrays are named ``arr_0``, ``arr_1``, ...; keyword arrays take\n"
      "their keyword. The ``.npz`` extension is appended when the path lacks it.\n\n"
      "Args:\n"
      "    file (str, pathlib.Path, file): Path to file to which the arrays are saved.\n"
      "    *args (arrays): Arrays to be saved.\n"
      "    **kwargs (arrays): Arrays to be saved, under their keyword.");

  m.def(
      "savez_compressed",
      [](nb::handle file, nb::args args, nb::kwargs kwargs) {
        savez_impl(file, args, kwargs, true);
      },
      nb::arg("file"), nb::arg("args"), nb::arg("kwargs"),
      nb::sig("def savez_compressed(file: Union[file, str, pathlib.Path], *args, **kwargs)"),
      "Save several arrays to a binary file in compressed ``.npz`` format.\n\n"
      "Like :func:`savez`, with each member deflated.");

  m.def(
      "save_safetensors",
      [](nb::handle file, nb::dict arrays, std::optional<nb::dict> metadata) {
        io::NamedArrays named = named_arrays(arrays, "save_safetensors");
        io::StringMap meta;
        if (metadata) {
          for (auto [k, v] : *metadata) {
            if (!nb::isinstance<nb::str>(k) || !nb::isinstance<nb::str>(v))
              throw std::invalid_argument(
                  "[save_safetensors] Metadata must be a dictionary with string keys and values");
            meta.emplace_back(nb::cast<std::string>(k), nb::cast<std::string>(v));
          }
        }
        for (auto& [name, a] : named) eval_nogil(a);
        save_to(file, "save_safetensors", ".safetensors",
                [&](io::Writer& w) { io::save_safetensors(w, named, meta); });
      },
      nb::arg("file"), nb::arg("arrays"), nb::arg("metadata") = nb::none(),
      nb::sig("def save_safetensors(file: Union[file, str, pathlib.Path], arrays: "
              "dict[str, array], metadata: Optional[dict[str, str]] = None)"),
      "Save arrays to a binary file in ``.safetensors`` format.\n\n"
      "See the `Safetensors documentation <https://huggingface.co/docs/safetensors/index>`_\n"
      "for the format. The extension is appended when the path lacks it.\n\n"
      "Args:\n"
      "    file (str, pathlib.Path, file): File in which the arrays are saved.\n"
      "    arrays (dict(str, array)): The dictionary of names to arrays to be saved.\n"
      "    metadata (dict(str, str), optional): The dictionary of metadata to be saved.");

  m.def(
      "save_gguf",
      [](nb::handle file, nb::dict arrays, std::optional<nb::dict> metadata) {
        io::NamedArrays named = named_arrays(arrays, "save_gguf");
        io::GgufMetadata meta;
        if (metadata) {
          for (auto [k, v] : *metadata) {
            if (!nb::isinstance<nb::str>(k))
              throw nb::type_error("[save_gguf] Metadata keys must be strings.");
            std::string key = nb::cast<std::string>(k);
            if (nb::isinstance<nb::str>(v)) {
              meta.emplace_back(key, nb::cast<std::string>(v));
            } else if (is_array(v)) {
              array a = as_array(v);
              eval_nogil(a);
              meta.emplace_back(key, a);
            } else if (nb::isinstance<nb::list>(v)) {
              std::vector<std::string> strings;
              for (auto item : nb::borrow<nb::list>(v)) {
                if (!nb::isinstance<nb::str>(item))
                  throw nb::type_error(("[save_gguf] Metadata list '" + key +
                                        "' must hold only strings, got " + python_type_name(item) +
                                        ".")
                                           .c_str());
                strings.push_back(nb::cast<std::string>(item));
              }
              meta.emplace_back(key, std::move(strings));
            } else {
              throw nb::type_error(("[save_gguf] Metadata '" + key +
                                    "' must be an array, a str or a list of str, got " +
                                    python_type_name(v) + ".")
                                       .c_str());
            }
          }
        }
        for (auto& [name, a] : named) eval_nogil(a);
        save_to(file, "save_gguf", ".gguf", [&](io::Writer& w) { io::save_gguf(w, named, meta); });
      },
      nb::arg("file"), nb::arg("arrays"), nb::arg("metadata") = nb::none(),
      nb::sig("def save_gguf(file: Union[file, str, pathlib.Path], arrays: dict[str, array], "
              "metadata: dict[str, Union[array, str, list[str]]])"),
      "Save array(s) to a binary file in ``.gguf`` format.\n\n"
      "See the `GGUF documentation <https://github.com/ggerganov/ggml/blob/master/docs/gguf.md>`_\n"
      "for the format. Tensors may be float32, float16, bfloat16, int8, int16 or int32.\n\n"
      "Args:\n"
      "    file (file, str, pathlib.Path): File in which the array is saved.\n"
      "    arrays (dict(str, array)): The dictionary of names to arrays to be saved.\n"
      "    metadata (dict(str, Union[array, str, list(str)])): The dictionary of\n"
      "       metadata to be saved. The values can be a scalar or 1D array, a ``str``,\n"
      "       or a ``list`` of ``str``.");

  m.def(
      "load",
      [](nb::handle file, std::optional<std::string> format, bool return_metadata,
         const StreamArg& stream) -> nb::object {
        // Loaded arrays live in host memory; the stream is validated (a GPU
        // stream without a GPU backend raises MLX's error) and not otherwise used.
        StreamOrDevice s = stream;
        (void)s;
        std::unique_ptr<io::Reader> reader;
        io::Format f;
        if (auto path = as_path(file)) {
          f = format ? io::format_from_string(*format) : io::format_from_path(*path);
          // npy and safetensors load lazily from a mapping (loom/io/io.h).
          reader = f == io::Format::npy || f == io::Format::safetensors
                       ? io::map_file(*path, "load")
                       : io::open_file(*path, "load");
        } else {
          if (!nb::hasattr(file, "read"))
            throw std::invalid_argument(
                "[load] Input must be a file-like object opened in binary "
                "mode, or string (got " +
                python_type_name(file) + ").");
          std::string name = "<" + python_type_name(file) + ">";
          if (nb::hasattr(file, "name") && nb::isinstance<nb::str>(file.attr("name")))
            name = nb::cast<std::string>(file.attr("name"));
          if (format)
            f = io::format_from_string(*format);
          else if (!name.empty() && name[0] != '<')
            f = io::format_from_path(name);
          else
            throw std::invalid_argument(
                "[load] Could not infer file format from a file object "
                "without a name; pass format=.");
          nb::object data = file.attr("read")();
          if (!nb::isinstance<nb::bytes>(data))
            throw std::invalid_argument(
                "[load] Input must be a file-like object opened in binary "
                "mode, or string (its read() returned " +
                python_type_name(data) + ").");
          nb::bytes b = nb::borrow<nb::bytes>(data);
          reader = io::memory_reader(std::string(b.c_str(), b.size()), name);
        }
        if (return_metadata && f != io::Format::safetensors && f != io::Format::gguf) {
          throw std::invalid_argument(std::string("[load] metadata not supported for format ") +
                                      (f == io::Format::npy ? "npy" : "npz"));
        }
        io::Loaded loaded = [&] {
          nb::gil_scoped_release release;
          return io::load(*reader, f);
        }();
        for (const auto& message : io::take_load_warnings()) {
          if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) < 0) throw nb::python_error();
        }
        if (loaded.single) return nb::cast(*loaded.single);
        nb::dict arrays = to_dict(loaded.arrays);
        if (!return_metadata) return arrays;
        nb::dict meta;
        for (auto& [k, v] : loaded.metadata)
          meta[nb::str(k.data(), k.size())] = nb::str(v.data(), v.size());
        for (auto& [k, v] : loaded.gguf_metadata) {
          nb::str key(k.data(), k.size());
          if (auto* str = std::get_if<std::string>(&v)) {
            meta[key] = nb::str(str->data(), str->size());
          } else if (auto* a = std::get_if<array>(&v)) {
            meta[key] = nb::cast(*a);
          } else {
            nb::list l;
            for (auto& item : std::get<std::vector<std::string>>(v))
              l.append(nb::str(item.data(), item.size()));
            meta[key] = l;
          }
        }
        return nb::make_tuple(arrays, meta);
      },
      nb::arg(), nb::arg("format") = nb::none(), nb::arg("return_metadata") = false, nb::kw_only(),
      nb::arg("stream") = nb::none(),
      nb::sig("def load(file: Union[file, str, pathlib.Path], /, format: Optional[str] = None, "
              "return_metadata: bool = False, *, stream: StreamOrDevice = None) -> "
              "Union[array, dict[str, array], tuple[dict[str, array], dict[str, Any]]]"),
      "Load array(s) from a binary file.\n\n"
      "The supported formats are ``.npy``, ``.npz``, ``.safetensors`` and ``.gguf``.\n\n"
      "Args:\n"
      "    file (file, str, pathlib.Path): File in which the array is saved.\n"
      "    format (str, optional): Format of the file. If ``None``, the format is inferred\n"
      "      from the file extension. Supported formats: ``npy``, ``npz``, and\n"
      "      ``safetensors``. Default: ``None``.\n"
      "    return_metadata (bool, optional): Load the metadata for formats which support\n"
      "      metadata. The metadata will be returned as an additional dictionary.\n"
      "      Default: ``False``.\n\n"
      "Returns:\n"
      "    array or dict: A single array if loading from a ``.npy`` file or a dict mapping\n"
      "    names to arrays if loading from a ``.npz`` or ``.safetensors`` file. If\n"
      "    ``return_metadata`` is ``True`` an additional dictionary of metadata is returned.\n\n"
      "A malformed file raises an error naming the file, the format and what is wrong;\n"
      "no size the file declares is allocated before it is checked against the file.");
}

} // namespace loom::bindings
