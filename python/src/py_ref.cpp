#include "py_ref.h"

#include <mutex>
#include <vector>

namespace loom::python {

namespace {

std::mutex g_mutex;
std::vector<PyObject*> g_pending;
bool g_scheduled = false;

int drain_pending(void*) {
  std::vector<PyObject*> batch;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    batch.swap(g_pending);
    g_scheduled = false;
  }
  for (PyObject* p : batch) Py_DECREF(p);
  return 0;
}

} // namespace

void release_python_object(PyObject* object) {
  if (object == nullptr) return;
  if (Py_IsInitialized() == 0) return; // interpreter gone: nothing to free into
  if (PyGILState_Check()) {
    Py_DECREF(object);
    return;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_pending.push_back(object);
  if (!g_scheduled && Py_AddPendingCall(&drain_pending, nullptr) == 0) g_scheduled = true;
}

} // namespace loom::python
