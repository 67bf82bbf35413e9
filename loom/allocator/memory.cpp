#include "loom/allocator/memory.h"

#include "loom/allocator/allocator.h"

namespace loom {

size_t get_active_memory() { return allocator::host_allocator().stats().active; }
size_t get_peak_memory() { return allocator::host_allocator().stats().peak; }
void reset_peak_memory() { allocator::host_allocator().reset_peak(); }
size_t get_cache_memory() { return allocator::host_allocator().stats().cache; }
size_t set_memory_limit(size_t limit) {
  return allocator::host_allocator().set_memory_limit(limit);
}
size_t get_memory_limit() { return allocator::host_allocator().memory_limit(); }
size_t set_cache_limit(size_t limit) { return allocator::host_allocator().set_cache_limit(limit); }
size_t set_wired_limit(size_t limit) { return allocator::host_allocator().set_wired_limit(limit); }
void clear_cache() { allocator::host_allocator().clear_cache(); }

} // namespace loom
