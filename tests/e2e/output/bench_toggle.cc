// Recording switched off and on inside one process (preload/measure/bench_toggle.h), as scripts/gpu-toggle-bench does
// between blocks of training steps. Looks memtrace_bench_set_recording up in the global scope; under a tracer
// without it (libmemtrace.so) every call records. Prints "toggle: found" or "toggle: absent".
// Calls, in order: alloc 1 MiB (A), recording off, alloc 2 MiB (B), free B, recording on, alloc 4 MiB (C),
// free A, free C. Recorded with the toggle: alloc 1 MiB, alloc 4 MiB, free 1 MiB, free 4 MiB; without it all six.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "e2e_util.h"

namespace {
using SetRecording = void (*)(int);
SetRecording g_set = nullptr;

void set_recording(int on) {
  if (g_set) g_set(on);
}
}  // namespace

int main() {
  g_set = reinterpret_cast<SetRecording>(dlsym(RTLD_DEFAULT, "memtrace_bench_set_recording"));
  std::printf("toggle: %s\n", g_set ? "found" : "absent");
  void *a, *b, *c;
  E2E_OK(cudaMalloc(&a, 1 * kMiB));
  set_recording(0);
  E2E_OK(cudaMalloc(&b, 2 * kMiB));
  E2E_OK(cudaFree(b));
  set_recording(1);
  E2E_OK(cudaMalloc(&c, 4 * kMiB));
  E2E_OK(cudaFree(a));
  E2E_OK(cudaFree(c));
  return 0;
}
