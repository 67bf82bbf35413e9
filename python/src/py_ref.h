// A Python object held from C++ state that may die on a worker thread (a
// primitive inside a graph). Dropping the last reference without the GIL
// defers the decref to the interpreter's main loop instead of crashing or
// deadlocking against a thread that waits for the worker while holding it.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>

namespace loom::python {

namespace nb = nanobind;

void release_python_object(PyObject* object);

class PyRef {
 public:
  PyRef() = default;
  explicit PyRef(nb::handle h)
      : ptr_(h.inc_ref().ptr(), [](PyObject* p) { release_python_object(p); }) {}
  nb::object get() const { return ptr_ ? nb::borrow(ptr_.get()) : nb::none(); }
  bool is_none() const { return !ptr_ || ptr_.get() == Py_None; }

 private:
  std::shared_ptr<PyObject> ptr_;
};

} // namespace loom::python
