// Internal to the allocator: sums over the registered pools without
// building registered_allocators()'s vector (the evaluator reads the active
// memory once per scheduled node).
#pragma once

#include <cstddef>

namespace loom::allocator {

size_t active_memory_of_all_pools();

} // namespace loom::allocator
