#include "samplers/pool_sample_table.h"

namespace memtrace {

PoolSampleTable::Slot* PoolSampleTable::find(uint64_t pool, int device) {
  for (Slot& s : slots_)
    if (s.used && s.pool == pool && s.device == device) return &s;
  return nullptr;
}

const PoolSampleTable::Slot* PoolSampleTable::find(uint64_t pool, int device) const {
  for (const Slot& s : slots_)
    if (s.used && s.pool == pool && s.device == device) return &s;
  return nullptr;
}

bool PoolSampleTable::contains(uint64_t pool, int device) const { return find(pool, device) != nullptr; }

bool PoolSampleTable::update(uint64_t pool, int device, uint64_t bytes, bool add) {
  if (Slot* s = find(pool, device)) {
    if (s->bytes == bytes) return false;
    s->bytes = bytes;
    return true;
  }
  if (!add) return false;
  for (Slot& s : slots_) {
    if (s.used) continue;
    s = Slot{true, pool, device, bytes};
    used_++;
    return true;
  }
  return false;
}

int PoolSampleTable::device_of(uint64_t pool) const {
  for (const Slot& s : slots_)
    if (s.used && s.pool == pool) return s.device;
  return -1;
}

int PoolSampleTable::remove(uint64_t pool) {
  int removed = 0;
  for (Slot& s : slots_) {
    if (!s.used || s.pool != pool) continue;
    s.used = false;
    used_--;
    removed++;
  }
  return removed;
}

int PoolSampleTable::pools(uint64_t* handles, int* devices, int max) const {
  int n = 0;
  for (const Slot& s : slots_) {
    if (!s.used || s.pool == 0 || n == max) continue;
    handles[n] = s.pool;
    devices[n] = s.device;
    n++;
  }
  return n;
}

}  // namespace memtrace
