// A job that was started without memtrace: it makes CUDA and (fake) PyTorch allocations, then loads the tracer with
// dlopen as `memtrace attach` would (argv[1]: libmemtrace-injected-test.so), switches its injected sources on through
// the test entry points, makes a known sequence of calls, switches them off and makes more. None of the tracer's
// hooks can be reached (every entry point was bound before it was loaded): every event of the trace comes from the
// fake CUPTI's callbacks or from the c10 hook's patched GOT slot in libc10_cuda.so.
// Prints its addresses and what it saw of the GOT slot as one JSON object, the last line; check_injected_sources.py
// works out the exact events from them.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "e2e_util.h"

namespace {

using C10Malloc = void* (*)(size_t, int);
using C10Free = void (*)(void*);
using Enable = int (*)(char*, size_t);
using Disable = void (*)();
using LiveList = int (*)(char*, size_t, char*, size_t);
using CuptiCallbacks = uint64_t (*)();
struct FakeC10Counters {  // tests/fakecuda/c10_profiler_hooks.h
  uint64_t memory_usage_calls;
  uint64_t out_of_memory_calls;
  int64_t net_alloc_bytes;
};
using C10Counters = FakeC10Counters (*)();

constexpr const char kUsageHook[] = "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE";

// The JUMP_SLOT of the c10 usage hook in libc10_cuda.so, read with the ELF structures (the slot the tracer patches).
void** g_slot = nullptr;

int find_slot(dl_phdr_info* info, size_t, void*) {
  if (!strstr(info->dlpi_name, "libc10_cuda.so")) return 0;
  const ElfW(Dyn)* dynamic = nullptr;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  uintptr_t jmprel = 0, symtab = 0, strtab = 0, bytes = 0;
  for (const ElfW(Dyn)* d = dynamic; d && d->d_tag != DT_NULL; d++) {
    if (d->d_tag == DT_JMPREL) jmprel = d->d_un.d_ptr;
    if (d->d_tag == DT_PLTRELSZ) bytes = d->d_un.d_val;
    if (d->d_tag == DT_SYMTAB) symtab = d->d_un.d_ptr;
    if (d->d_tag == DT_STRTAB) strtab = d->d_un.d_ptr;
  }
  auto fix = [&](uintptr_t p) { return p < info->dlpi_addr ? p + info->dlpi_addr : p; };
  const auto* relas = reinterpret_cast<const ElfW(Rela)*>(fix(jmprel));
  const auto* symbols = reinterpret_cast<const ElfW(Sym)*>(fix(symtab));
  const char* strings = reinterpret_cast<const char*>(fix(strtab));
  for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); i++)
    if (strcmp(strings + symbols[ELF64_R_SYM(relas[i].r_info)].st_name, kUsageHook) == 0)
      g_slot = reinterpret_cast<void**>(info->dlpi_addr + relas[i].r_offset);
  return 0;
}

// The file of the function a slot holds ("?" when none).
const char* file_of(void* fn) {
  Dl_info info{};
  if (!dladdr(fn, &info) || !info.dli_fname) return "?";
  const char* slash = strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

template <typename Fn>
Fn symbol(void* handle, const char* name) {
  auto fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (!fn) {
    std::fprintf(stderr, "%s\n", dlerror());
    std::exit(4);
  }
  return fn;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s LIBMEMTRACE_INJECTED_TEST_SO\n", argv[0]);
    return 2;
  }
  // ---- before attach: a cudaMalloc and a PyTorch block (its 2 MiB segment is a cudaMalloc too) ----
  void *before = nullptr, *during = nullptr, *after = nullptr;
  E2E_OK(cudaSetDevice(0));
  E2E_OK(cudaMalloc(&before, 4 * kMiB));
  void* c10 = dlopen("libc10_cuda.so", RTLD_NOW | RTLD_LOCAL);  // as Python loads torch
  if (!c10) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 4;
  }
  auto c10_malloc = symbol<C10Malloc>(c10, "fake_c10_cuda_malloc");
  auto c10_free = symbol<C10Free>(c10, "fake_c10_cuda_free");
  void* block_before = c10_malloc(kMiB, 0);  // a 1 MiB block of a new 2 MiB small segment
  dl_iterate_phdr(find_slot, nullptr);
  if (!g_slot) return 5;
  void* slot_before = *g_slot;

  // ---- attach ----
  void* tracer = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!tracer) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 4;
  }
  auto enable = symbol<Enable>(tracer, "memtrace_test_injected_enable");
  auto disable = symbol<Disable>(tracer, "memtrace_test_injected_disable");
  auto live_list = symbol<LiveList>(tracer, "memtrace_test_injected_live_list");
  char why[256] = {}, live_why[256] = {}, live[1024] = {};
  int layers = enable(why, sizeof why);
  int complete = live_list(live, sizeof live, live_why, sizeof live_why);
  const char* slot_during = file_of(*g_slot);

  E2E_OK(cudaMalloc(&during, 8 * kMiB));
  E2E_OK(cudaFree(before));  // allocated before attach: the free carries its size
  E2E_OK(cudaFree(during));
  void* block_during = c10_malloc(512 * 1024, 0);  // from the small segment's tail: no cudaMalloc
  c10_free(block_before);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr range = 0, async_block = 0;
  E2E_OK(cuMemCreate(&handle, 2 * kMiB, &prop, 0));
  E2E_OK(cuMemAddressReserve(&range, 2 * kMiB, 0, 0, 0));
  E2E_OK(cuMemMap(range, 2 * kMiB, 0, handle, 0));
  E2E_OK(cuMemUnmap(range, 2 * kMiB));
  E2E_OK(cuMemAddressFree(range, 2 * kMiB));
  E2E_OK(cuMemRelease(handle));
  E2E_OK(cuMemAllocAsync(&async_block, kMiB, nullptr));
  E2E_OK(cuMemFreeAsync(async_block, nullptr));
  void* host = nullptr;
  E2E_OK(cuMemHostAlloc(&host, 64 * 1024, 0));
  E2E_OK(cuMemFreeHost(host));

  // ---- detach: nothing is recorded after it, and libc10_cuda.so calls libc10.so's hook directly again ----
  disable();
  const bool slot_restored = *g_slot == slot_before;
  const char* slot_after = file_of(*g_slot);
  void* cupti = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  uint64_t callbacks_at_detach =
      cupti ? symbol<CuptiCallbacks>(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), "fakecuda_cupti_callbacks")() : 0;
  E2E_OK(cudaMalloc(&after, 2 * kMiB));
  E2E_OK(cudaFree(after));
  c10_free(block_during);
  uint64_t callbacks_after =
      cupti ? symbol<CuptiCallbacks>(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), "fakecuda_cupti_callbacks")() : 0;
  // libc10.so's own hook got every report, through our hook while attached (it forwards) and directly after.
  FakeC10Counters reports = symbol<C10Counters>(dlopen("libc10.so", RTLD_NOW | RTLD_NOLOAD), "fake_c10_counters")();
  for (char* p = live; *p; p++)
    if (*p == '\n') *p = ';';
  std::printf(
      "{\"layers\": %d, \"why\": \"%s\", \"live_complete\": %d, \"live_why\": \"%s\", \"live\": \"%s\", "
      "\"before\": %llu, \"during\": %llu, \"block_before\": %llu, \"block_during\": %llu, \"handle\": %llu, "
      "\"range\": %llu, \"async_block\": %llu, \"host\": %llu, \"slot_during\": \"%s\", \"slot_after\": \"%s\", "
      "\"slot_restored\": %s, \"cupti_loaded\": %s, \"callbacks_after_detach\": %llu, \"libc10_reports\": %llu, "
      "\"libc10_net_bytes\": %lld}\n",
      layers, why, complete, live_why, live, (unsigned long long)(uintptr_t)before,
      (unsigned long long)(uintptr_t)during, (unsigned long long)(uintptr_t)block_before,
      (unsigned long long)(uintptr_t)block_during, (unsigned long long)handle, (unsigned long long)range,
      (unsigned long long)async_block, (unsigned long long)(uintptr_t)host, slot_during, slot_after,
      slot_restored ? "true" : "false", cupti ? "true" : "false",
      (unsigned long long)(callbacks_after - callbacks_at_detach), (unsigned long long)reports.memory_usage_calls,
      (long long)reports.net_alloc_bytes);
  return 0;
}
