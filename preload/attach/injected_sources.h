// The event sources of a tracer loaded into a running process (`memtrace attach PID` without MEMTRACE_START=dormant):
// none of the LD_PRELOAD hooks is reached there, since every CUDA entry point was bound before we were loaded. So:
//   - the driver layer from CUPTI's driver-API callbacks for the memory functions (cuMemAlloc/Free, cuMemCreate/
//     Map/Unmap/Release, cuMemAllocAsync/FreeAsync...): a subscriber created after the job's context still gets
//     every later call (measured on the H200, docs/injected-attach.md). libcupti.so is loaded with dlopen at attach.
//   - PyTorch's block layer by patching the GOT entries of c10::reportMemoryUsageToProfiler and
//     reportOutOfMemoryToProfiler in every loaded library that imports them (libc10_cuda.so), so that they reach
//     the hooks of hooks/c10_hooks.cc, which forward to libc10.so's own.
//   - what is live at attach: PyTorch's live blocks and segments from its allocator's own snapshot
//     (torch.cuda.memory_snapshot(), through the interpreter with the GIL, from the control thread, never a
//     hook), and per device free/total with PyTorch's allocated/reserved totals.
// Each function runs on the control thread only. The pieces: cupti_source.h (with cupti_loader.h), got_patch.h,
// torch_snapshot.h; docs/injected-attach.md says what each sees and what it cannot.
#pragma once
#include <cstddef>
#include <cstdint>

#include "attach/live_entry.h"

namespace memtrace {

// What injected_sources_enable turned on.
struct InjectedSources {
  bool driver_layer = false;  // CUPTI callbacks subscribed
  bool torch_layer = false;   // the c10 hook's GOT entries patched
  bool cupti_busy = false;    // CUPTI has another subscriber (Kineto, Nsight): the driver layer is off
  char why_not[256] = {};     // one line when a layer could not be turned on
};

// Turns the sources on: events reach record_event from now on. False when neither layer could be turned on.
bool injected_sources_enable(InjectedSources* out);

// Turns them off: unsubscribes CUPTI, restores every patched GOT entry to what it held. After it no event of ours
// is made, and the process runs exactly as before attach.
void injected_sources_disable();

// Lists what is live now: `live(entry, context)` for each of PyTorch's live blocks (LAYER_BLOCK) and segments
// (LAYER_DRIVER), then `device(baseline, context)` for each device with a context (free/total and PyTorch's
// allocated/reserved; NVML's per-process figure is not filled in here). True when all of PyTorch's allocated memory
// was listed one by one. False with `why` (one line, for Notice ATTACH_INCOMPLETE) otherwise: no Python, no torch,
// torch.cuda not initialized (nothing listed, no baselines either), the cudaMallocAsync backend (its allocated
// bytes come as one blocks_unknown entry per device), or blocks that do not add up to memory_allocated() (what was
// listed stands). `pool_events(context)` (may be null) counts the stream-ordered pool events recorded so far: under
// the cudaMallocAsync backend the snapshot is taken again until it reads the same count before and after
// memory_allocated() (torch_snapshot.h). Runs Python under the GIL (torch_snapshot.h): call it without the
// recorder's lock.
bool injected_live_list(void (*live)(const LiveEntry& entry, void* context),
                        void (*device)(const DeviceBaseline& baseline, void* context),
                        uint64_t (*pool_events)(void* context), void* context, char* why, size_t why_size);

}  // namespace memtrace
