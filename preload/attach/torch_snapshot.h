// What PyTorch's CUDA caching allocator holds at attach, from its own snapshot, for a tracer loaded into a running
// job (injected_sources.h: injected_live_list). Runs a short Python snippet under the GIL (PyGILState_Ensure) from
// the control thread, never from a hook: torch.cuda.memory_snapshot()'s segments and their blocks in state
// active_allocated (the state memory_allocated() counts: a block freed while a stream still uses it,
// active_pending_free, was already taken off memory_allocated() and reported freed), and per device
// memory_allocated(), memory_reserved(), torch.cuda.mem_get_info() and the allocator backend. The snippet sends
// back one bytes object of text lines (torch_snapshot.cc: the format), which is copied into one bounded buffer and
// parsed after the GIL is released.
#pragma once
#include <cstddef>
#include <cstdint>

#include "attach/live_entry.h"

namespace memtrace {

// Callbacks for what the snapshot lists (injected_sources.h).
struct SnapshotSink {
  void (*live)(const LiveEntry& entry, void* context);
  void (*device)(const DeviceBaseline& baseline, void* context);
  // May be null. The count of stream-ordered pool events recorded so far, read with the GIL held just before and
  // just after the snippet runs. Under the cudaMallocAsync backend memory_allocated() is the pool's used bytes,
  // read under PyTorch's allocator mutex, which every cudaMallocAsync/cudaFreeAsync of PyTorch's holds across the
  // driver call and so across the event's recording: equal counts mean the bytes read belong to that point of the
  // event stream. The snippet is run again (up to kSnapshotAttempts times) until they are equal.
  uint64_t (*pool_events)(void* context);
  void* context;
};

// How many times the snapshot is taken under the cudaMallocAsync backend before it settles for counts that differ
// (and says so in `why`); 1 ms apart, the GIL released in between.
constexpr int kSnapshotAttempts = 200;

// Takes the snapshot and lists it: every live entry first (blocks as LAYER_BLOCK / TORCH_ALLOCATOR, segments as
// LAYER_DRIVER with CU_MEM_ALLOC, or expandable_segment set and api UNKNOWN for an expandable one; for the
// cudaMallocAsync backend one blocks_unknown LAYER_BLOCK entry per device of memory_allocated()'s bytes), then one
// DeviceBaseline per device with a context. True when all of PyTorch's allocated memory was listed one by one;
// false with `why` (one line) otherwise: no Python, no torch, torch.cuda not initialized, the snippet failed, or
// the listed blocks do not add up to memory_allocated() (what was listed stands).
bool torch_snapshot_list(const SnapshotSink& sink, char* why, size_t why_size);

// Parses the snippet's text (`size` bytes) and lists it as above; exposed for tests. Returns what
// torch_snapshot_list returns, `why` included.
bool torch_snapshot_parse(const char* text, size_t size, const SnapshotSink& sink, char* why, size_t why_size);

}  // namespace memtrace
