// Prints a generated attention kernel's source (attention_emulate.py builds
// this with the few backend files that generate sources, the rest of the
// library left unresolved: only the generators run).
#include <cstdio>
#include <string>
#include <typeindex>

#include "loom/backend/cuda/codegen.h"
#include "loom/backend/cuda/cuda.h"
#include "loom/backend/cuda/jit.h"

namespace loom::cuda {
// attention.cpp registers its kernels at load time.
void register_kernel(std::type_index, Kernel) {}
} // namespace loom::cuda

using namespace loom;

int main(int argc, char** argv) {
  if (argc < 6) return 2;
  const std::string which = argv[1];
  const Dtype d = std::string(argv[2]) == "bf16" ? bfloat16 : float16;
  const int D = std::stoi(argv[3]), mask = std::stoi(argv[4]);
  const bool sinks = std::stoi(argv[5]) != 0;
  std::string src;
  if (which == "prelude") src = cuda::jit_prelude();
  if (which == "fwd") src = cuda::attention_mma_kernel_source("kfwd", d, D, mask, sinks, 4);
  if (which == "stats") src = cuda::attention_mma_stats_kernel_source("kstats", d, D, mask, sinks);
  if (which == "bwd") src = cuda::attention_mma_bwd_kernel_source("kbwd", d, D, mask, sinks);
  if (which == "fin") src = cuda::attention_bwd_finish_kernel_source("kfin", d);
  std::fwrite(src.data(), 1, src.size(), stdout);
  return src.empty() ? 1 : 0;
}
