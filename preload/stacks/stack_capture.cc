#include "stacks/stack_capture.h"

#include <dlfcn.h>
#include <link.h>
#include <time.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <atomic>

#include "measure/phase_cycles.h"
#include "record/schema.h"
#include "stacks/intern_table.h"

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
  // docs/cuda-interception.md).
  if (set_caching && local_space) set_caching(*local_space, UNW_CACHE_PER_THREAD);
  return g_unw_backtrace != nullptr;
}

// fork() and unwinding. libunwind finds a frame's unwind table through dl_iterate_phdr when its cache misses
// (a thread's first stacks, a new code path), and dl_iterate_phdr holds the loader's write lock while it runs.
// glibc resets the loader's other lock in a forked child but not that one (glibc 2.36, elf/dl-iteratephdr.c,
// posix/fork.c), so a child forked while one of our unwinds is inside it waits forever in its first
// dl_iterate_phdr: its own unwinds, any C++ exception it throws, dlopen. The fork handler therefore waits for
// the unwinds in flight to end and holds new ones back until fork() has returned (tests/e2e/
// lifecycle/fork_during_unwind.cc). A counter, not a lock: an unwind never waits for another unwind, only for a fork.
std::atomic<int> g_unwinds_in_flight{0};
std::atomic<bool> g_fork_pending{false};

void pause_briefly() {
  timespec pause{0, 50 * 1000};
  nanosleep(&pause, nullptr);
}

// Counts the caller's unwind in, once no fork is pending (waits while one is: fork() takes milliseconds).
void begin_unwind() {
  for (;;) {
    g_unwinds_in_flight.fetch_add(1);
    if (!g_fork_pending.load()) return;
    g_unwinds_in_flight.fetch_sub(1);
    while (g_fork_pending.load(std::memory_order_acquire)) pause_briefly();
  }
}

void end_unwind() { g_unwinds_in_flight.fetch_sub(1, std::memory_order_release); }

// Room for our own frames (dropped by capture_stack) on a path not yet seen: in an optimized build at most 5 on
// any hook's path (the cudaMalloc and resolver paths; 3 on PyTorch's), counted over the e2e suite with gcc
// -O2; without optimization the helpers between hook and recorder are frames too, 7 at most.
#ifdef __OPTIMIZE__
constexpr int kOwnFramesRoom = 5;
#else
constexpr int kOwnFramesRoom = 7;
#endif

// How many of our frames the unwind meets first on each hook path (the event's Api), learned from the path's
// first stack: 0 until then. Asking for exactly that many beyond the frames kept matters because where a stack is
// deeper than what is kept, every frame asked for beyond it is unwound for nothing, and those outer frames are the
// dearest (44 ns each in the H200's training loop, docs/performance.md): on PyTorch's path, 2 frames an
// allocation. A path with more of our frames than learned (two hooks of one Api) raises the figure and unwinds
// that stack again, so that no stack keeps fewer native frames than asked for (tests/e2e/cuda_apis/check_deep_stack.py
// checks every path). The interpreter's evaluation-loop frames, which Python frames replace, also take unwind
// slots, as before.
std::atomic<uint8_t> g_own_frames_by_path[256];

int leading_own_frames(void* const* pcs, int count) {
  const uintptr_t self_begin = g_self_begin, self_size = g_self_end - g_self_begin;
  int own = 0;
  while (own < count && reinterpret_cast<uintptr_t>(pcs[own]) - self_begin < self_size) own++;
  return own;
}

// Unwinds the caller's stack into pcs (room for kMaxNativeFrames + kOwnFramesRoom), asking for `max_native`
// frames beyond our own; returns the count (our own frames included). `*full`: the unwind returned as many
// frames as it asked for, so it stopped at its limit rather than at the stack's bottom.
__attribute__((always_inline)) inline int unwind_native(void** pcs, int max_native, uint8_t path, bool* full) {
  if (max_native > kMaxNativeFrames) max_native = kMaxNativeFrames;
  const int learned = g_own_frames_by_path[path].load(std::memory_order_relaxed);
  const int room = learned != 0 ? learned : kOwnFramesRoom;
  begin_unwind();
  int asked = max_native + room;
  int native = g_unw_backtrace(pcs, asked);
  int own = leading_own_frames(pcs, native);
  // Cut short: again, with the whole room. Not with `own` as counted: where the unwind stopped inside our own
  // frames (all it returned were ours), that count is short of the real one, and a room of it would keep fewer
  // frames than asked for, none when 1 is asked for (tests/preload/stack_capture_test.cc).
  if (own > room && native == asked && room < kOwnFramesRoom) {
    asked = max_native + kOwnFramesRoom;
    native = g_unw_backtrace(pcs, asked);
    own = leading_own_frames(pcs, native);
  }
  end_unwind();
  *full = native == asked;
  // The largest count seen wins: two threads learning one path at once must not leave the lower one stored.
  uint8_t stored = static_cast<uint8_t>(learned);
  while (own > stored && own <= kOwnFramesRoom &&
         !g_own_frames_by_path[path].compare_exchange_weak(stored, static_cast<uint8_t>(own))) {
  }
  MEMTRACE_PHASE_NATIVE_FRAMES(native);
  return native;
}

}  // namespace

bool stack_capture_init() {
  // A forked child inherits both from the process that started tracing: running dl_iterate_phdr and dlopen
  // again there would be the very calls that can find the loader's lock held (above).
  if (g_self_end == 0) dl_iterate_phdr(find_self, reinterpret_cast<void*>(&find_self));
  return g_unw_backtrace != nullptr || load_libunwind();
}

void stack_capture_fork_prepare() {
  g_fork_pending.store(true);
  // Bounded: a fork from a signal handler that interrupted one of our unwinds would otherwise wait for itself.
  // Two seconds is far beyond any unwind; past it the fork goes on with the old hazard.
  for (int waited = 0; g_unwinds_in_flight.load() != 0 && waited < 40000; waited++) pause_briefly();
}

void stack_capture_fork_parent() { g_fork_pending.store(false, std::memory_order_release); }

void stack_capture_fork_child() {
  g_unwinds_in_flight.store(0);  // the threads that were counted in do not exist here
  g_fork_pending.store(false, std::memory_order_release);
}

namespace {

// capture_stack past the Python read: `python_count` views in out->python (the thread's own, or with kBorrowed those
// of the thread waiting in backward), `max_native` the depth that applies. A template so that the path of a thread
// with its own frames compiles to what it was before borrowing existed (the borrowed path's two differences are
// constants there): callgrind counts the same instructions an event.
template <bool kBorrowed>
__attribute__((always_inline)) inline void capture_native_and_key(CapturedStack* out, int max_native, uint8_t path,
                                                                  const int python_count, const bool python_cut) {
  const PythonFrameView* python = out->python;
  out->python_count = python_count;
  void* pcs[kMaxNativeFrames + kOwnFramesRoom];
  bool unwind_full = false;
  const int native = max_native > 0 && g_unw_backtrace ? unwind_native(pcs, max_native, path, &unwind_full) : 0;

  // One pass: drop our own frames, put each eval-loop call's Python frames (up to and including the one marked
  // ends_eval_call) in place of its native frame, and fold each frame into the stack's key: one multiply per
  // frame and a full mix at the end (a second pass over the frames cost a tenth of the hook, callgrind). An
  // address range is one unsigned comparison (pc - begin < size). Once the Python frames are placed (at once
  // without any), the second loop tests only our own range.
  const uintptr_t self_begin = g_self_begin, self_size = g_self_end - g_self_begin;
  uintptr_t eval_begin = 0, eval_end = 0;
  // Borrowed frames have no evaluation loop on this thread's stack: appended outermost, below.
  if (!kBorrowed && python_count) python_eval_range(&eval_begin, &eval_end);
  const uintptr_t eval_size = eval_end - eval_begin;
  uint64_t* frame = out->frames;
  int next_python = 0;
  int native_left = max_native;  // native frames still to keep: > 0 whenever native > 0
  uint64_t h = kHashSeed;
  const void* const* const end = pcs + native;
  const void* const* p = pcs;
  if (eval_size != 0) {
    for (; p < end; ++p) {  // until the Python frames are placed
      const uintptr_t pc = reinterpret_cast<uintptr_t>(*p);
      if (pc - self_begin < self_size) continue;
      if (pc - eval_begin < eval_size) {
        do {
          *frame++ = kPythonFrameBit | static_cast<uint64_t>(next_python);
          h = hash_step(h, python[next_python].key);
        } while (!python[next_python++].ends_eval_call && next_python < python_count);
        if (next_python < python_count) continue;
        ++p;  // the eval frames beyond are kept as native frames
        break;
      }
      *frame++ = pc;
      h = hash_step(h, pc);
      if (--native_left == 0) {
        ++p;  // past the last frame kept: below, p < end means frames were left out
        break;
      }
    }
  }
  for (; p < end && native_left > 0; ++p) {  // the rest (without Python, all): only our own range to drop
    const uintptr_t pc = reinterpret_cast<uintptr_t>(*p);
    if (pc - self_begin < self_size) continue;
    *frame++ = pc;
    h = hash_step(h, pc);
    --native_left;
  }
  // Cut: the frames kept reached the depth with frames of the unwind left over, or the unwind itself stopped at
  // the depth it asked for (where the evaluation-loop frames, which Python frames replace, took unwind slots,
  // fewer than the depth are kept, and the stack is cut all the same).
  const bool native_cut = (native_left == 0 && p < end) || unwind_full;
  // Frames the native unwind did not reach (a capped depth) still belong to the stack: append them outermost.
  for (; next_python < python_count; next_python++) {
    *frame++ = kPythonFrameBit | static_cast<uint64_t>(next_python);
    h = hash_step(h, python[next_python].key);
  }
  const int count = static_cast<int>(frame - out->frames);
  out->frame_count = count;
  out->native_cut = native_cut;
  out->python_cut = python_cut;
  out->python_from_backward = kBorrowed;
  // The flags ride in the high bits of the count mixed in last (a count is below 2^9): the same frames cut and
  // not cut, or borrowed and not, are two stacks, and a stack without any flag keeps the key it had before the
  // flags existed.
  const uint64_t count_and_cuts = static_cast<uint64_t>(count) | uint64_t{kBorrowed} << 61 |
                                  uint64_t{native_cut} << 62 | uint64_t{python_cut} << 63;
  out->key = count ? nonzero_key(hash_u64(h, count_and_cuts)) : 0;
}

// A thread without Python frames of its own (an autograd device thread, another C++ thread): the frames of the
// thread waiting in backward, if any (python_frames_read_backward); false, with `out` untouched, when there is none.
// The thread's native frames are kept as deep as on any thread without Python frames: the autograd node that
// allocated (AddmmBackward0::apply...) lies ~20 frames down, past the Python threads' depth. Out of line: the path
// of a thread with its own frames stays as it was.
__attribute__((noinline)) bool capture_borrowed(CapturedStack* out, int max_native, uint8_t path) {
  bool python_cut = false;
  const int borrowed = python_frames_read_backward(out->python, kMaxPythonFrames, &python_cut);
  if (borrowed == 0) return false;
  capture_native_and_key<true>(out, max_native, path, borrowed, python_cut);
  return true;
}

}  // namespace

void capture_stack(CapturedStack* out, int max_native, int max_native_with_python, bool with_python, uint8_t path) {
  if (max_native <= 0 && !with_python) {
    out->frame_count = out->python_count = 0;
    out->native_cut = out->python_cut = out->python_from_backward = false;
    out->key = 0;
    return;
  }
  // The Python frames first: whether there are any decides how deep the native unwind goes. Where the thread
  // runs Python, its Python frames (kept in full) name the call site, and the native frames past the innermost
  // ones are the dispatcher's layers and the interpreter's glue, the dearest to unwind (config.h).
  bool python_cut = false;
  const int python_count = with_python ? python_frames_read(out->python, kMaxPythonFrames, &python_cut) : 0;
  if (python_count == 0 && with_python && capture_borrowed(out, max_native, path)) return;
  capture_native_and_key<false>(out, python_count > 0 ? max_native_with_python : max_native, path, python_count,
                                python_cut);
}

}  // namespace memtrace
