// A fragmentation OOM inside PyTorch's allocator layer: the fake libc10_cuda.so (rules in
// tests/fakecuda/c10_cuda_allocator.h) on a device of 8 MiB. Four 2 MiB tensors take four 2 MiB segments and
// fill the device; the first and the third are freed (their blocks stay cached in their segments); then
// 3 MiB are asked for: no cached block has that size and no segment has a free tail, so the allocator asks
// cudaMalloc for a 4 MiB segment, which fails, and reports the OOM.
#include <dlfcn.h>

#include "../../fakecuda/c10_cuda_allocator.h"
#include "e2e_util.h"

template <typename Fn>
Fn must_find(void* handle, const char* name) {
  void* fn = dlsym(handle, name);
  if (!fn) {
    std::fprintf(stderr, "dlsym(libc10_cuda.so, %s) failed\n", name);
    std::exit(3);
  }
  return reinterpret_cast<Fn>(fn);
}

__attribute__((noinline)) void* tensor(decltype(&fake_c10_cuda_malloc) malloc_block, size_t bytes) {
  return malloc_block(bytes, 0);
}

int main() {
  void* c10_cuda = dlopen("libc10_cuda.so", RTLD_NOW | RTLD_LOCAL);
  if (!c10_cuda) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 3;
  }
  auto malloc_block = must_find<decltype(&fake_c10_cuda_malloc)>(c10_cuda, "fake_c10_cuda_malloc");
  auto free_block = must_find<decltype(&fake_c10_cuda_free)>(c10_cuda, "fake_c10_cuda_free");
  void* held[4];
  for (void*& p : held)
    if (!(p = tensor(malloc_block, 2 * kMiB))) return 3;
  free_block(held[0]);
  free_block(held[2]);
  if (tensor(malloc_block, 3 * kMiB)) return 3;  // must fail
  std::printf("3 MiB refused with 4 MiB reserved but unallocated\n");
  return 0;
}
