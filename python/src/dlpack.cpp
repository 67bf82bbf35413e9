// DLPack in both directions: importing any producer's capsule (NumPy,
// PyTorch, JAX, ...) by copying its CPU memory, and exporting an array's
// memory to consumers (np.from_dlpack, torch.from_dlpack / torch.as_tensor).
#include <nanobind/ndarray.h>

#include <string>
#include <vector>

#include "utils.h"

namespace loom::bindings {

namespace {

// The DLPack ABI (dlpack.h, versions 0.x and 1.x): only the fields read here.
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides; // in elements; null for C order
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};

constexpr int32_t kDLCPU = 1;
constexpr int32_t kDLCUDAHost = 3; // pinned host memory: readable from the CPU
constexpr int32_t kDLROCMHost = 11;

// The PEP 3118 element code strided_to_array reads for a DLPack dtype.
const char* element_format(DLDataType t) {
  if (t.lanes != 1) return nullptr;
  switch (t.code) {
    case 0: // int
      return t.bits == 8    ? "b"
             : t.bits == 16 ? "h"
             : t.bits == 32 ? "i"
             : t.bits == 64 ? "q"
                            : nullptr;
    case 1: // uint
      return t.bits == 8    ? "B"
             : t.bits == 16 ? "H"
             : t.bits == 32 ? "I"
             : t.bits == 64 ? "Q"
                            : nullptr;
    case 2: // float
      return t.bits == 16 ? "e" : t.bits == 32 ? "f" : t.bits == 64 ? "d" : nullptr;
    case 4: // bfloat
      return t.bits == 16 ? "bfloat16" : nullptr;
    case 5: // complex
      return t.bits == 64 ? "Zf" : t.bits == 128 ? "Zd" : nullptr;
    case 6: // bool
      return t.bits == 8 ? "?" : nullptr;
    default:
      return nullptr;
  }
}

std::string describe(DLDataType t) {
  return "code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
         std::to_string(t.lanes) + " lanes";
}

array copy_tensor(const DLTensor& t, std::optional<Dtype> dtype) {
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost &&
      t.device.device_type != kDLROCMHost) {
    throw std::invalid_argument("[from_dlpack] Cannot import memory on DLPack device type " +
                                std::to_string(t.device.device_type) +
                                ": Loom reads CPU memory only (move the tensor to the CPU first).");
  }
  const char* format = element_format(t.dtype);
  if (format == nullptr) {
    throw std::invalid_argument("[from_dlpack] Unsupported DLPack element type (" +
                                describe(t.dtype) + ").");
  }
  Shape shape;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] > INT32_MAX) {
      throw std::overflow_error("[from_dlpack] Shape dimension " + std::to_string(t.shape[d]) +
                                " is outside the supported range [-2147483648, 2147483647].");
    }
    shape.push_back(static_cast<int32_t>(t.shape[d]));
  }
  int64_t itemsize = t.dtype.bits / 8;
  std::vector<int64_t> byte_strides;
  if (t.strides != nullptr) {
    for (int d = 0; d < t.ndim; ++d) byte_strides.push_back(t.strides[d] * itemsize);
  }
  const char* base = static_cast<const char*>(t.data) + t.byte_offset;
  return strided_to_array(base, format, itemsize, shape,
                          t.strides != nullptr ? byte_strides.data() : nullptr, dtype);
}

} // namespace

array array_from_dlpack(nb::handle v, std::optional<Dtype> dtype) {
  // Ask for a versioned (1.x) capsule; producers predating max_version
  // reject the keyword with TypeError and get the plain call.
  nb::object cap;
  try {
    cap = v.attr("__dlpack__")(nb::arg("max_version") = nb::make_tuple(1, 0));
  } catch (nb::python_error& e) {
    if (!e.matches(PyExc_TypeError)) throw;
    cap = v.attr("__dlpack__")();
  }
  PyObject* c = cap.ptr();
  // Renaming the capsule marks it consumed: its destructor then leaves the
  // tensor to us, and we call the producer's deleter once the copy is made.
  if (PyCapsule_IsValid(c, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
    if (m->version.major > 1) {
      throw std::invalid_argument("[from_dlpack] Unsupported DLPack version " +
                                  std::to_string(m->version.major) + "." +
                                  std::to_string(m->version.minor) + ".");
    }
    PyCapsule_SetName(c, "used_dltensor_versioned");
    struct Release {
      DLManagedTensorVersioned* m;
      ~Release() {
        if (m->deleter) m->deleter(m);
      }
    } release{m};
    return copy_tensor(m->dl_tensor, dtype);
  }
  if (PyCapsule_IsValid(c, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    PyCapsule_SetName(c, "used_dltensor");
    struct Release {
      DLManagedTensor* m;
      ~Release() {
        if (m->deleter) m->deleter(m);
      }
    } release{m};
    return copy_tensor(m->dl_tensor, dtype);
  }
  throw std::invalid_argument("[from_dlpack] __dlpack__ of " + python_type_name(v) +
                              " did not return an unused DLPack capsule.");
}

namespace {

nb::dlpack::dtype export_dtype(Dtype d) {
  using C = nb::dlpack::dtype_code;
  auto make = [](C code, size_t size) {
    return nb::dlpack::dtype{static_cast<uint8_t>(code), static_cast<uint8_t>(size * 8), 1};
  };
  switch (d.val) {
    case Dtype::Val::bool_:
      return make(C::Bool, 1);
    case Dtype::Val::uint8:
    case Dtype::Val::uint16:
    case Dtype::Val::uint32:
    case Dtype::Val::uint64:
      return make(C::UInt, d.size);
    case Dtype::Val::int8:
    case Dtype::Val::int16:
    case Dtype::Val::int32:
    case Dtype::Val::int64:
      return make(C::Int, d.size);
    case Dtype::Val::float16:
    case Dtype::Val::float32:
    case Dtype::Val::float64:
      return make(C::Float, d.size);
    case Dtype::Val::bfloat16:
      return make(C::Bfloat, 2);
    case Dtype::Val::complex64:
      return make(C::Complex, 8);
  }
  throw std::invalid_argument("[__dlpack__] Unsupported dtype.");
}

} // namespace

void warn_if_traced(const array& a) {
  if (!a.is_tracer()) return;
  if (PyErr_WarnEx(PyExc_UserWarning,
                   "[array] Converting an array that a transform (grad, vjp, jvp, vmap) is "
                   "tracing to NumPy or a Python value: the transform does not see through "
                   "the conversion, so no gradient flows through the result.",
                   1) != 0) {
    throw nb::python_error(); // the warning was turned into an error
  }
}

nb::object array_to_dlpack(array& a, nb::handle max_version, nb::handle dl_device,
                           nb::handle copy) {
  // copy=True hands out fresh memory; nanobind's exporter only shares.
  bool want_copy = !copy.is_none() && nb::cast<bool>(nb::bool_(copy));
  warn_if_traced(a);
  array src = want_copy ? loom::copy(a) : a;
  eval_nogil(src); // waits: no consumer may read memory still being written
  std::vector<size_t> shape(src.shape().begin(), src.shape().end());
  std::vector<int64_t> strides(src.strides().begin(), src.strides().end());
  auto* owner = new array(src);
  nb::capsule keep_alive(owner, [](void* p) noexcept { delete static_cast<array*>(p); });
  static char empty_data = 0;
  void* data = src.has_data() ? src.data<void>() : &empty_data;
  nb::object view;
  // An array being differentiated is exported read-only: writes through the
  // consumer would change values behind autodiff's back (seed 12.4).
  if (src.is_tracer()) {
    view = nb::ndarray<nb::ro>(data, shape.size(), shape.data(), keep_alive, strides.data(),
                               export_dtype(src.dtype()))
               .cast();
  } else {
    view = nb::ndarray<>(data, shape.size(), shape.data(), keep_alive, strides.data(),
                         export_dtype(src.dtype()))
               .cast();
  }
  nb::dict kwargs;
  if (!max_version.is_none()) kwargs["max_version"] = max_version;
  if (!dl_device.is_none()) kwargs["dl_device"] = dl_device;
  return view.attr("__dlpack__")(**kwargs);
}

} // namespace loom::bindings
