// One allocation live at the moment of attach, as the tracer writes it (a LiveAtAttach record of memtrace.proto):
// what the dormant live set (live_set.h) and the injected tracer's PyTorch snapshot (injected_sources.h) both give.
#pragma once
#include <cstdint>

#include "record/schema.h"

namespace memtrace {

struct LiveEntry {
  Layer layer = Layer::kUnknown;
  Api api = Api::kUnknown;
  Memory memory = Memory::kDevice;
  int32_t device = -1;
  uint64_t address = 0;  // device pointer; CU_MEM_CREATE: the allocation handle
  uint64_t size = 0;     // bytes
  uint64_t stream = 0;
  bool blocks_unknown = false;      // `size` bytes of `layer` on `device` not known one by one (LiveAtAttach)
  bool expandable_segment = false;  // a PyTorch segment made of mapped handles
  bool torch_segment = false;       // a segment of PyTorch's caching allocator (its snapshot listed it)
};

// Per device, the totals at attach (an AttachBaseline record of memtrace.proto).
struct DeviceBaseline {
  int32_t device = -1;
  uint64_t device_free_bytes = 0;  // cuMemGetInfo; both 0 when unknown
  uint64_t device_total_bytes = 0;
  bool has_allocator_totals = false;  // PyTorch is loaded and said
  uint64_t allocator_allocated_bytes = 0;
  uint64_t allocator_reserved_bytes = 0;
  bool has_process_used = false;  // NVML answered
  uint64_t process_used_bytes = 0;
};

}  // namespace memtrace
