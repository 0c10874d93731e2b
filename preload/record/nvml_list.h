// The other processes NVML lists on a device (NvmlProcesses records, proto/memtrace.proto): the list as the
// recorder writes it, and the table of the lists last written per device, so that a list is written only when it
// changed. Header-only and free of CUDA, so that tests/preload/sampler_test.cc drives the very code the tracer runs.
// Not thread-safe: the recorder uses the table under its lock.
#pragma once
#include <cstdint>
#include <cstring>

#include "record/proto_writer.h"

namespace memtrace {

// At most this many processes of one device are looked at (a longer NVML list leaves the per-process figures
// out of that sample, see samplers/device_usage.cc), so at most this many others are written.
constexpr unsigned kMaxNvmlProcesses = 64;

// One other process on a device: NvmlProcesses.processes' element.
struct NvmlOtherProcess {
  uint32_t pid = 0;
  bool used_known = false;  // NVML gave a figure (not NVML_VALUE_NOT_AVAILABLE)
  uint64_t used_bytes = 0;  // its usedGpuMemory, summed over its entries; 0 when !used_known
  bool operator==(const NvmlOtherProcess&) const = default;
};

// The most bytes of an NvmlProcesses record's fields: the device (a tag and a 5-byte varint), and per process
// a tag, a 1-byte length, and inside it a pid (tag + 5) and used_bytes (tag + 10).
constexpr size_t kMaxNvmlProcessesRecordBytes = 6 + kMaxNvmlProcesses * (2 + 6 + 11);

// Writes the NvmlProcesses fields of `device`'s list `others` (`count` <= kMaxNvmlProcesses, ascending pids) into
// `w`. On overflow `w` turns !ok().
inline void encode_nvml_processes(int device, const NvmlOtherProcess* others, unsigned count, ProtoWriter& w) {
  w.uint(1, static_cast<uint64_t>(device));
  for (unsigned i = 0; i < count; i++) {
    uint8_t buf[17];
    ProtoWriter inner(buf, buf + sizeof buf);
    inner.uint(1, others[i].pid);
    inner.optional_uint(2, others[i].used_known, others[i].used_bytes);
    w.message(2, inner);
  }
}

// The list last written for each device ordinal 0 .. kDevices-1 in the current trace (`generation`: the
// recorder's trace generation, which a forked child's new trace bumps). Before a device's first record its list
// is empty, as a reader holds it. 64 devices x 64 processes x 16 bytes: 64 KiB of zero-initialized memory, touched
// only for the devices sampled.
class NvmlListTable {
 public:
  static constexpr int kDevices = 64;

  // Whether `device`'s list differs from the one last written (a device out of range always does).
  bool changed(int device, const NvmlOtherProcess* others, unsigned count, uint32_t generation) const {
    if (device < 0 || device >= kDevices) return true;
    const Slot& slot = slots_[device];
    const unsigned written = slot.generation == generation ? slot.count : 0;
    if (written != count) return true;
    for (unsigned i = 0; i < count; i++)
      if (!(slot.others[i] == others[i])) return true;
    return false;
  }

  // `device`'s list was written.
  void remember(int device, const NvmlOtherProcess* others, unsigned count, uint32_t generation) {
    if (device < 0 || device >= kDevices || count > kMaxNvmlProcesses) return;
    Slot& slot = slots_[device];
    slot.generation = generation;
    slot.count = count;
    for (unsigned i = 0; i < count; i++) slot.others[i] = others[i];
  }

 private:
  struct Slot {
    uint32_t generation = 0;
    unsigned count = 0;
    NvmlOtherProcess others[kMaxNvmlProcesses];
  };
  Slot slots_[kDevices];
};

}  // namespace memtrace
