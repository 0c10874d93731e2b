#include "stack_capture.h"

#include <dlfcn.h>
#include <link.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "intern_table.h"
#include "schema.h"

namespace memtrace {
namespace {

uintptr_t g_self_begin = 0;
uintptr_t g_self_end = 0;

int find_self(dl_phdr_info* info, size_t, void* data) {
  uintptr_t probe = reinterpret_cast<uintptr_t>(data);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (probe >= begin && probe < begin + ph.p_memsz) {
      g_self_begin = begin;
      g_self_end = begin + ph.p_memsz;
      return 1;
    }
  }
  return 0;
}

bool is_self(uintptr_t pc) { return pc >= g_self_begin && pc < g_self_end; }

// Emits the Python frames of one evaluation-loop call (up to and including the frame marked
// ends_eval_call) in place of the native frame of that call.
int splice_one_eval_call(CapturedStack* out, int next_python) {
  while (next_python < out->python_count) {
    out->frames[out->frame_count++] = kPythonFrameBit | static_cast<uint64_t>(next_python);
    if (out->python[next_python++].ends_eval_call) break;
  }
  return next_python;
}

// libunwind is loaded at run time with RTLD_LOCAL, never linked: libunwind.so.8 exports _Unwind_* and a weak
// backtrace(), and as a dependency of a preloaded library those would come first in the traced process's
// symbol lookup, replacing libgcc's unwinder for C++ exceptions and thread cancellation (a pthread_exit
// through C++ frames then crashes) and glibc's backtrace(). Loaded locally, only we see them.
using UnwBacktraceFn = int (*)(void**, int);
UnwBacktraceFn g_unw_backtrace = nullptr;

bool load_libunwind() {
  void* handle = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!handle) return false;
  g_unw_backtrace = reinterpret_cast<UnwBacktraceFn>(dlsym(handle, "unw_backtrace"));
  using CachingFn = int (*)(unw_addr_space_t, unw_caching_policy_t);
  auto set_caching = reinterpret_cast<CachingFn>(dlsym(handle, "_ULx86_64_set_caching_policy"));
  auto* local_space = static_cast<unw_addr_space_t*>(dlsym(handle, "_ULx86_64_local_addr_space"));
  // A per-thread cache of unwind info: 0.68 us instead of 1.13 us per ~31-frame stack (measured, see
  // ../shared/notes/cuda-interception.md).
  if (set_caching && local_space) set_caching(*local_space, UNW_CACHE_PER_THREAD);
  return g_unw_backtrace != nullptr;
}

}  // namespace

bool stack_capture_init() {
  dl_iterate_phdr(find_self, reinterpret_cast<void*>(&find_self));
  return load_libunwind();
}

void capture_stack(CapturedStack* out, int max_native, bool with_python) {
  void* pcs[kMaxNativeFrames + 8];
  int native = 0;
  if (max_native > 0) {
    int limit = max_native + 8;  // room for our own frames, dropped below
    if (limit > kMaxNativeFrames + 8) limit = kMaxNativeFrames + 8;
    native = g_unw_backtrace ? g_unw_backtrace(pcs, limit) : 0;
    if (native < 0) native = 0;
  }
  out->python_count = with_python ? python_frames_read(out->python, kMaxPythonFrames) : 0;
  for (int i = 0; i < out->python_count; i++) out->python_keys[i] = out->python[i].key;

  out->frame_count = 0;
  int next_python = 0;
  int kept_native = 0;
  uintptr_t eval_begin = 0, eval_end = 0;
  if (out->python_count) python_eval_range(&eval_begin, &eval_end);
  for (int i = 0; i < native && kept_native < max_native; i++) {
    uintptr_t pc = reinterpret_cast<uintptr_t>(pcs[i]);
    if (is_self(pc)) continue;
    if (next_python < out->python_count && pc >= eval_begin && pc < eval_end) {
      next_python = splice_one_eval_call(out, next_python);
      continue;
    }
    out->frames[out->frame_count++] = pc;
    kept_native++;
  }
  // Frames the native unwind did not reach (a capped depth) still belong to the stack: append them outermost.
  while (next_python < out->python_count)
    out->frames[out->frame_count++] = kPythonFrameBit | static_cast<uint64_t>(next_python++);

  // One multiply per frame and a full mix at the end: the per-frame hash_u64 chain cost about a tenth of
  // the whole hook on a 52-frame stack (callgrind, bench/hot_path).
  uint64_t h = kHashSeed;
  for (int i = 0; i < out->frame_count; i++) {
    uint64_t f = out->frames[i];
    h = hash_step(h, (f & kPythonFrameBit) ? out->python_keys[f & ~kPythonFrameBit] : f);
  }
  out->key = out->frame_count ? nonzero_key(hash_u64(h, static_cast<uint64_t>(out->frame_count))) : 0;
}

}  // namespace memtrace
