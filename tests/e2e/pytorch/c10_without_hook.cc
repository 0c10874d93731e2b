// A libc10.so whose torch version changed the profiler hook: it exports c10::reportMemoryUsageToProfiler
// with one more parameter, so the mangled name memtrace looks for
// (_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE) is absent while a near miss
// (..._6DeviceEm) is present. Built into a directory of its own (not on LD_LIBRARY_PATH), with the
// SONAME libc10.so, and loaded by torch_hook_load.cc with dlopen(RTLD_LOCAL) as Python loads torch.
#include <cstddef>
#include <cstdint>

namespace c10 {

struct Device {
  int8_t type_;
  int8_t index_;
};

__attribute__((visibility("default"))) void reportMemoryUsageToProfiler(void*, int64_t, size_t, size_t, Device,
                                                                        uint64_t /*stream_id*/) {}

}  // namespace c10
