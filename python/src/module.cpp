// The loom.core extension module: assembles the parts, constants and the
// LOOM_DEBUG origin hook.
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "loom/backend/cpu/blas_info.h"
#include "utils.h"

// Transforms, eval/async_eval and tree utilities (python/src/transforms.cpp).
void init_transforms(nb::module_& m);
// mx.compile and the compile switches (python/src/compile.cpp).
void init_compile(nb::module_& m);

namespace loom::bindings {

// save/load of npy, npz, safetensors and gguf (python/src/io.cpp).
void init_io(nb::module_& m);
// quantize, dequantize and the quantized products (python/src/quantized.cpp).
void init_quantized(nb::module_& m);
// take/sort/scan bindings and array.at (python/src/indexing_ops.cpp).
void init_indexing_ops(nb::module_& m);
// diag/einsum/view/depends/fp8 and random.permutation (python/src/ops_more.cpp).
void init_ops_more(nb::module_& m);
// The mx.fast submodule (python/src/fast.cpp).
void init_fast(nb::module_& m);
// mx.linalg, the matmul family, random.multivariate_normal (python/src/linalg.cpp).
void init_linalg(nb::module_& m);
// conv1d/2d/3d, conv_general, conv_transpose*, convolve (python/src/conv.cpp).
void init_conv(nb::module_& m);
// export_function, import_function, exporter, export_to_dot (python/src/export.cpp).
void init_export(nb::module_& m);

namespace {

PyObject* g_core = nullptr; // the module lives as long as the process

// --- LOOM_DEBUG: the Python line that built each node ----------------------

// Directories of the loom package: frames inside them are skipped.
std::vector<std::string>& package_dirs() {
  static std::vector<std::string> dirs = [] {
    std::vector<std::string> out;
    nb::object modules = nb::module_::import_("sys").attr("modules");
    if (!nb::cast<bool>(modules.attr("__contains__")("loom"))) return out;
    nb::object loom_pkg = modules["loom"];
    nb::object path = nb::getattr(loom_pkg, "__path__", nb::none());
    if (path.is_none()) return out;
    nb::object os_path = nb::module_::import_("os.path");
    for (auto p : path) {
      std::string dir = nb::cast<std::string>(os_path.attr("realpath")(p));
      out.push_back(dir + "/");
    }
    return out;
  }();
  return dirs;
}

bool in_package(const std::string& file) {
  for (const auto& dir : package_dirs()) {
    if (file.rfind(dir, 0) == 0) return true;
  }
  return false;
}

// realpath of a source file, cached (every node built under LOOM_DEBUG asks).
const std::string& resolved_path(const std::string& file) {
  static std::unordered_map<std::string, std::string> cache;
  auto it = cache.find(file);
  if (it != cache.end()) return it->second;
  std::string real = file;
  if (char* resolved = realpath(file.c_str(), nullptr)) {
    real = resolved;
    std::free(resolved);
  }
  return cache.emplace(file, std::move(real)).first->second;
}

std::string python_origin() {
  // Nodes may be built by C++ code running without the GIL (eval workers);
  // they have no Python line.
  if (!Py_IsInitialized() || !PyGILState_Check()) return {};
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  std::string origin;
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    PyObject* name = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_filename");
    std::string file;
    if (name != nullptr && PyUnicode_Check(name)) {
      const char* utf8 = PyUnicode_AsUTF8(name);
      if (utf8 != nullptr) file = utf8;
    }
    Py_XDECREF(name);
    Py_DECREF(code);
    if (!file.empty() && !in_package(resolved_path(file))) {
      origin = file + ":" + std::to_string(PyFrame_GetLineNumber(frame));
      Py_DECREF(frame);
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  PyErr_Clear();
  PyErr_Restore(type, value, trace);
  return origin;
}

bool debug_enabled() {
  const char* v = std::getenv("LOOM_DEBUG");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

} // namespace

nb::module_ core_module() { return nb::borrow<nb::module_>(g_core); }

} // namespace loom::bindings

NB_MODULE(core, m) {
  using namespace loom::bindings;
  g_core = m.ptr();
  // Functions returned by grad/vmap/custom_function hold Python callables in
  // C++ closures that Python's collector cannot see into; a cycle through
  // one is reported by nanobind at exit although nothing leaks while running.
  nb::set_leak_warnings(false);

  m.doc() = "Loom's array API, matching MLX's mlx.core.";
  m.attr("__version__") = "0.1.0";

  init_dtypes(m);
  init_devices(m);
  init_memory(m);
  init_printing(m);
  init_array(m);
  init_ops(m);
  init_composites(m);
  init_indexing_ops(m);
  init_random(m);
  init_fft(m);
  init_conv(m);
  init_transforms(m);
  init_compile(m);
  init_io(m);
  init_ops_more(m);
  init_fast(m);
  init_linalg(m);
  init_quantized(m);
  init_export(m);

  m.attr("pi") = M_PI;
  m.attr("e") = M_E;
  m.attr("euler_gamma") = 0.5772156649015329;
  m.attr("inf") = INFINITY;
  m.attr("nan") = NAN;
  m.attr("newaxis") = nb::none();

  // The OpenBLAS kernels matmul runs on (the benchmark runner prints it).
  m.def("_blas_core", [] { return loom::cpu::blas::core_name(); });

  if (debug_enabled()) loom::set_origin_hook(&python_origin);
}
