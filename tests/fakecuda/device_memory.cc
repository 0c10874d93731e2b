#include "device_memory.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace fakecuda {
namespace {

constexpr uint64_t kDefaultTotalBytes = 1ull << 30;  // 1 GiB per device
constexpr int kDefaultDevices = 2;

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 0);
  return (end && *end == '\0' && value > 0) ? value : fallback;
}

struct Allocation {
  int device;
  uint64_t size;
  MemoryKind kind;
  const void* context;
};

bool charged(MemoryKind kind) {
  return kind == MemoryKind::kDevice || kind == MemoryKind::kPool || kind == MemoryKind::kPhysical ||
         kind == MemoryKind::kArray;
}

struct PhysicalAllocation {
  int device;
  uint64_t size;
  bool imported;
};

// One lock for everything: the double is about exact accounting, not speed.
struct State {
  std::mutex lock;
  int devices;
  uint64_t total_bytes;
  std::vector<uint64_t> used_bytes;
  std::map<uintptr_t, Allocation> allocations;
  std::map<uint64_t, PhysicalAllocation> physical;
  uint64_t next_handle = 1;
  // FAKECUDA_REUSE_ADDRESSES=1: a freed range stays mapped and the next allocation of the same size gets
  // it back, as the real driver hands out a just-freed virtual range again. Off: every range is munmap()ed.
  bool reuse_addresses = env_u64("FAKECUDA_REUSE_ADDRESSES", 0) == 1;
  std::multimap<uint64_t, uintptr_t> released_by_size;

  State()
      : devices(static_cast<int>(env_u64("FAKECUDA_DEVICES", kDefaultDevices))),
        total_bytes(env_u64("FAKECUDA_TOTAL_BYTES", kDefaultTotalBytes)),
        used_bytes(devices, 0) {}
};

State& state();

// fork() while another thread holds the lock must not leave the child a lock nobody will release (the
// fork tests allocate in children while other threads of the parent allocate).
void lock_before_fork() { state().lock.lock(); }
void unlock_after_fork() { state().lock.unlock(); }

State& state() {
  static State* s = [] {
    State* created = new State();  // never destroyed: atexit handlers of traced programs may still free
    pthread_atfork(lock_before_fork, unlock_after_fork, unlock_after_fork);
    return created;
  }();
  return *s;
}

bool charge(State& s, int device, uint64_t size) {
  if (size > s.total_bytes - s.used_bytes[device]) return false;
  s.used_bytes[device] += size;
  return true;
}

}  // namespace

int device_count() { return state().devices; }
uint64_t device_total_bytes() { return state().total_bytes; }
bool device_valid(int device) { return device >= 0 && device < state().devices; }

uint64_t device_free_bytes(int device) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  return s.total_bytes - s.used_bytes[device];
}

bool freed_with_context(MemoryKind kind) { return kind != MemoryKind::kPhysical && kind != MemoryKind::kImported; }

uintptr_t memory_allocate(int device, uint64_t size, MemoryKind kind, const void* context) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  bool is_charged = charged(kind);
  if (is_charged && !charge(s, device, size)) return 0;
  auto released = s.released_by_size.find(size);
  if (released != s.released_by_size.end()) {
    uintptr_t address = released->second;
    s.released_by_size.erase(released);
    s.allocations[address] = Allocation{device, size, kind, context};
    return address;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    if (is_charged) s.used_bytes[device] -= size;
    return 0;
  }
  auto address = reinterpret_cast<uintptr_t>(p);
  s.allocations[address] = Allocation{device, size, kind, context};
  return address;
}

namespace {
// Caller holds the lock.
void release_locked(State& s, std::map<uintptr_t, Allocation>::iterator it) {
  if (charged(it->second.kind)) s.used_bytes[it->second.device] -= it->second.size;
  if (s.reuse_addresses) s.released_by_size.emplace(it->second.size, it->first);
  else munmap(reinterpret_cast<void*>(it->first), it->second.size);
  s.allocations.erase(it);
}
}  // namespace

bool memory_free(uintptr_t address) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto it = s.allocations.find(address);
  if (it == s.allocations.end()) return false;
  release_locked(s, it);
  return true;
}

int memory_free_context(const void* context) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  int freed = 0;
  for (auto it = s.allocations.begin(); it != s.allocations.end();) {
    auto next = std::next(it);
    if (it->second.context == context && freed_with_context(it->second.kind)) {
      release_locked(s, it);
      freed++;
    }
    it = next;
  }
  return freed;
}

bool memory_lookup(uintptr_t address, int* device, uintptr_t* start, uint64_t* size, MemoryKind* kind,
                   const void** context) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto it = s.allocations.upper_bound(address);
  if (it == s.allocations.begin()) return false;
  --it;
  if (address >= it->first + it->second.size) return false;
  *device = it->second.device;
  *start = it->first;
  *size = it->second.size;
  *kind = it->second.kind;
  if (context) *context = it->second.context;
  return true;
}

uint64_t physical_create(int device, uint64_t size) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  if (!charge(s, device, size)) return 0;
  uint64_t handle = s.next_handle++;
  s.physical[handle] = PhysicalAllocation{device, size, false};
  return handle;
}

uint64_t physical_import(int device, uint64_t size) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  uint64_t handle = s.next_handle++;
  s.physical[handle] = PhysicalAllocation{device, size, true};
  return handle;
}

bool physical_release(uint64_t handle) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto it = s.physical.find(handle);
  if (it == s.physical.end()) return false;
  if (!it->second.imported) s.used_bytes[it->second.device] -= it->second.size;
  s.physical.erase(it);
  return true;
}

bool physical_lookup(uint64_t handle, int* device, uint64_t* size) {
  State& s = state();
  std::lock_guard<std::mutex> guard(s.lock);
  auto it = s.physical.find(handle);
  if (it == s.physical.end()) return false;
  *device = it->second.device;
  *size = it->second.size;
  return true;
}

}  // namespace fakecuda
