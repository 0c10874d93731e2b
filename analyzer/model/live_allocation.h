// One allocation the memory model holds live, and the address namespaces allocations are looked up in.
#pragma once

#include <cstdint>

#include "memtrace.pb.h"

namespace memtrace {

// Which table an address is looked up in. Driver pointers and VMM handles (cuMemCreate returns a
// handle, not a pointer) are different namespaces; PyTorch blocks and stream-ordered pool blocks are
// kept apart so that the same address reported by both never collides.
enum class AddressSpace : uint8_t { kDriverPointer, kDriverHandle, kTorchBlock, kPoolBlock };

// LAYER_BLOCK allocations (PyTorch blocks, pool blocks) as opposed to memory obtained from the driver.
inline bool is_block_space(AddressSpace space) {
  return space == AddressSpace::kTorchBlock || space == AddressSpace::kPoolBlock;
}

struct LiveAllocation {
  AddressSpace space = AddressSpace::kDriverPointer;
  // Where the memory lives (Event.memory, or what the API implies for traces that leave it unset).
  // Only MEMORY_DEVICE and MEMORY_ARRAY are charged to `device`.
  proto::Memory memory = proto::MEMORY_DEVICE;
  bool graph = false;  // a graph's memory node made live by a GRAPH_LAUNCH (a pool block)
  // A driver-layer allocation that has held a PyTorch block: one of the allocator's segments.
  bool held_blocks = false;
  // Live when the trace began by attach (a LiveAtAttach record): made before the tracer recorded, so with no
  // stack (stack_id 0) and live from the moment of attach.
  bool before_attach = false;
  int32_t device = -1;
  uint64_t size_bytes = 0;
  uint64_t stack_id = 0;
  int64_t time_ns = 0;  // since trace start
  uint64_t event_index = 0;
  uint64_t address = 0;  // the pointer (or handle) it was allocated at
  uint64_t context = 0;  // Event.context: the CUcontext current at a driver-layer ALLOC, 0 = not known
  bool charged_to_device() const { return memory == proto::MEMORY_DEVICE || memory == proto::MEMORY_ARRAY; }
};

}  // namespace memtrace
