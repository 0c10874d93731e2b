// The dormant live set (live_set.h): a fixed-capacity open-addressing table of atomics, mapped once, without a
// lock and without an allocation after init.
//
// A slot's key packs the address space (3 bits, the analyzer's spaces: analyzer/model/memory_model.cc's
// space_of) above the address's low 60 bits, so that a PyTorch block and its segment, which share an address,
// are two entries; 0 is an empty slot and kTombstone a freed one. Bit 63 marks a slot whose fields are being
// written (a small per-slot lock taken with a compare-and-swap): a visit skips it, and a free of that key waits
// the few stores it takes. Lookups probe linearly, at most kMaxProbe slots from the key's home: an insert that
// finds no room there counts an overflow, so no key ever lives further, and a lookup stops there too. Tombstones
// are reused by inserts (the first one on the way, once the key is known not to be present).
#include "attach/live_set.h"

#include <sched.h>
#include <sys/mman.h>

#include <atomic>

namespace memtrace {
namespace {

constexpr uint64_t kBusy = uint64_t{1} << 63;
constexpr uint64_t kTombstone = kBusy;  // space 0: never a real key, busy or not
constexpr int kSpaceShift = 60;
constexpr uint64_t kAddressMask = (uint64_t{1} << kSpaceShift) - 1;
constexpr size_t kMaxProbe = 64;

// The analyzer's address spaces (AddressSpace in analyzer/model): what a free must name to free an entry.
enum Space : uint64_t { kTorchBlock = 1, kPoolBlock = 2, kDriverPointer = 3, kDriverHandle = 4, kReservation = 5 };

struct Slot {
  std::atomic<uint64_t> key;
  std::atomic<uint64_t> size;
  std::atomic<uint64_t> stream;
  std::atomic<uint64_t> context;  // driver-layer ALLOC: the CUcontext (CONTEXT_DESTROY frees by it)
  std::atomic<uint64_t> meta;     // device (low 32 bits), api, memory, layer (8 bits each above)
};

Slot* g_slots = nullptr;
PointerResolver g_resolve = nullptr;
size_t g_mask = 0;
int g_shift = 64;
alignas(64) std::atomic<uint64_t> g_overflow{0};
std::atomic<uint64_t> g_not_followed{0};

bool is_stream_ordered(Api api) {
  switch (api) {
    case Api::kCudaMallocAsync:
    case Api::kCudaFreeAsync:
    case Api::kCudaMallocFromPoolAsync:
    case Api::kCuMemAllocAsync:
    case Api::kCuMemFreeAsync:
    case Api::kCuMemAllocFromPoolAsync: return true;
    default: return false;
  }
}

bool is_handle_api(Api api) {
  return api == Api::kCuMemCreate || api == Api::kCuMemRelease || api == Api::kCuMemImportFromShareableHandle;
}

// As the analyzer's space_of (analyzer/model/memory_model.cc).
Space space_of(const MemoryEvent& e) {
  bool block = e.layer == Layer::kBlock ||
               (e.layer == Layer::kUnknown && (e.api == Api::kTorchAllocator || is_stream_ordered(e.api)));
  if (block) return e.api == Api::kTorchAllocator ? kTorchBlock : kPoolBlock;
  if (is_handle_api(e.api)) return kDriverHandle;
  return kDriverPointer;
}

// 0 when the address does not fit in the key (counted as not followed).
uint64_t make_key(Space space, uint64_t address) {
  if (address & ~kAddressMask) {
    g_not_followed.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  return uint64_t{space} << kSpaceShift | address;
}

size_t home_of(uint64_t key) { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> g_shift); }

uint64_t pack_meta(int32_t device, Api api, Memory memory, Layer layer) {
  return static_cast<uint32_t>(device) | uint64_t{static_cast<uint8_t>(api)} << 32 |
         uint64_t{static_cast<uint8_t>(memory)} << 40 | uint64_t{static_cast<uint8_t>(layer)} << 48;
}

// What a slot holds besides its key: made from the few values the dormant hooks pass (live_set_note_device_alloc,
// live_set_note_torch_block) without a whole MemoryEvent.
struct Fields {
  uint64_t size;
  uint64_t stream;
  uint64_t context;
  uint64_t meta;
};

Fields fields_of(const MemoryEvent& e) {
  return {e.size, e.stream, e.context, pack_meta(e.device, e.api, e.memory, e.layer)};
}

int32_t device_of_meta(uint64_t meta) { return static_cast<int32_t>(static_cast<uint32_t>(meta)); }

void write_fields(Slot& s, const Fields& f) {
  s.size.store(f.size, std::memory_order_relaxed);
  s.stream.store(f.stream, std::memory_order_relaxed);
  s.context.store(f.context, std::memory_order_relaxed);
  s.meta.store(f.meta, std::memory_order_relaxed);
}

// Takes slot `s` holding `expected` for writing (bit 63); false when it holds something else by then.
bool lock_slot(Slot& s, uint64_t expected) {
  return s.key.compare_exchange_strong(expected, expected | kBusy, std::memory_order_acquire);
}

void insert(uint64_t key, const Fields& fields) {
  for (;;) {
    const size_t home = home_of(key);
    Slot* reusable = nullptr;
    uint64_t reusable_key = 0;
    bool retry = false;
    for (size_t i = 0; i < kMaxProbe; i++) {
      Slot& s = g_slots[(home + i) & g_mask];
      uint64_t k = s.key.load(std::memory_order_acquire);
      if ((k & ~kBusy) == key) {
        // Allocated again without the free being seen (the analyzer drops the old one the same way): replace.
        if (k & kBusy || !lock_slot(s, k)) {
          retry = true;
          break;
        }
        write_fields(s, fields);
        s.key.store(key, std::memory_order_release);
        return;
      }
      if (k == kTombstone && !reusable) {
        reusable = &s;
        reusable_key = k;
      } else if (k == 0) {
        if (!reusable) {
          reusable = &s;
          reusable_key = 0;
        }
        break;
      }
    }
    if (retry) {
      sched_yield();
      continue;
    }
    if (!reusable) {
      g_overflow.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    uint64_t expected = reusable_key;
    if (!reusable->key.compare_exchange_strong(expected, key | kBusy, std::memory_order_acquire)) continue;
    write_fields(*reusable, fields);
    reusable->key.store(key, std::memory_order_release);
    return;
  }
}

// The slot holding `key` (not busy), or null.
Slot* find_slot(uint64_t key) {
  const size_t home = home_of(key);
  for (size_t i = 0; i < kMaxProbe; i++) {
    Slot& s = g_slots[(home + i) & g_mask];
    uint64_t k = s.key.load(std::memory_order_acquire);
    if (k == 0) return nullptr;
    if ((k & ~kBusy) != key) continue;
    while (k & kBusy) {  // an insert of the same key is writing its fields: a few stores
      sched_yield();
      k = s.key.load(std::memory_order_acquire);
    }
    return k == key ? &s : nullptr;
  }
  return nullptr;
}

// False when `key` was not live (a free of something allocated before the set existed, or not followed).
bool remove(uint64_t key) {
  for (;;) {
    Slot* s = find_slot(key);
    if (!s) return false;
    uint64_t expected = key;
    if (s->key.compare_exchange_strong(expected, kTombstone, std::memory_order_acq_rel)) return true;
  }
}

LiveEntry entry_of(uint64_t key, uint64_t size, uint64_t stream, uint64_t meta) {
  LiveEntry entry;
  entry.address = key & kAddressMask;
  entry.size = size;
  entry.stream = stream;
  entry.device = device_of_meta(meta);
  entry.api = static_cast<Api>(meta >> 32 & 0xff);
  entry.memory = static_cast<Memory>(meta >> 40 & 0xff);
  entry.layer = static_cast<Layer>(meta >> 48 & 0xff);
  return entry;
}

// Reads a consistent copy of slot `s`; false when it is empty, freed, or changed while read.
bool read_slot(const Slot& s, uint64_t* key, LiveEntry* entry, uint64_t* context) {
  const uint64_t k = s.key.load(std::memory_order_acquire);
  if (k == 0 || (k & kBusy)) return false;
  const uint64_t size = s.size.load(std::memory_order_relaxed);
  const uint64_t stream = s.stream.load(std::memory_order_relaxed);
  const uint64_t meta = s.meta.load(std::memory_order_relaxed);
  *context = s.context.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (s.key.load(std::memory_order_relaxed) != k) return false;
  *key = k;
  *entry = entry_of(k, size, stream, meta);
  return true;
}

// Slot `s`, last seen holding `key` with its device unresolved, gets its device and context from the resolver
// (-1 and none where it cannot say). The driver is asked first, without the slot: when the slot is taken
// afterwards and no longer holds `key` unresolved (freed, or written again meanwhile), nothing is written. Returns
// once the slot is not busy with `key` (another thread resolving it too), so that a read after it sees the slot.
void resolve_slot(Slot& s, uint64_t key) {
  int32_t device = -1;
  uint64_t context = 0;
  if (!g_resolve || !g_resolve(key & kAddressMask, &device, &context)) {
    device = -1;
    context = 0;
  }
  // As the hooks that look them up at once: a driver pointer names the context it was made in, a pool block none.
  if (key >> kSpaceShift != kDriverPointer) context = 0;
  while (!lock_slot(s, key)) {
    const uint64_t k = s.key.load(std::memory_order_acquire);
    if ((k & ~kBusy) != key) return;  // freed, or another key's now
    if (k & kBusy) sched_yield();     // another thread writes it: a few stores
  }
  const uint64_t meta = s.meta.load(std::memory_order_relaxed);
  if (device_of_meta(meta) == kDeviceUnresolved) {
    s.context.store(context, std::memory_order_relaxed);
    s.meta.store((meta & ~uint64_t{0xffffffff}) | static_cast<uint32_t>(device), std::memory_order_relaxed);
  }
  s.key.store(key, std::memory_order_release);
}

// Reads slot `s` as read_slot does, resolving its device and context first where they are unresolved.
bool read_resolved_slot(Slot& s, uint64_t* key, LiveEntry* entry, uint64_t* context) {
  if (!read_slot(s, key, entry, context)) return false;
  if (entry->device != kDeviceUnresolved) return true;
  resolve_slot(s, *key);
  return read_slot(s, key, entry, context);
}

// What the driver frees with a context (the analyzer's freed_with_context): the allocations of its allocation
// calls and the pool blocks; not VMM handles, reservations, imports or registered host memory.
bool freed_with_context(uint64_t key, Memory memory) {
  const uint64_t space = key >> kSpaceShift;
  if (space == kPoolBlock) return true;
  if (space != kDriverPointer) return false;
  return memory == Memory::kDevice || memory == Memory::kArray || memory == Memory::kManaged ||
         memory == Memory::kHostPinned;
}

// CONTEXT_DESTROY: as the analyzer's on_context_destroy. Rare (a context's end), so a scan of the table. An entry
// noted unresolved is resolved first: the event comes before the driver destroys the context (hook_events.h).
void destroy_context(const MemoryEvent& e) {
  const bool primary = e.address == 0 || e.api == Api::kCudaDeviceReset || e.api == Api::kCuDevicePrimaryCtxReset;
  for (size_t i = 0; i <= g_mask; i++) {
    uint64_t key, context;
    LiveEntry entry;
    if (!read_resolved_slot(g_slots[i], &key, &entry, &context)) continue;
    if (entry.device != e.device || !freed_with_context(key, entry.memory)) continue;
    if (context == 0 ? !primary : !(e.address == 0 || context == e.address)) continue;
    uint64_t expected = key;
    g_slots[i].key.compare_exchange_strong(expected, kTombstone, std::memory_order_acq_rel);
  }
}

}  // namespace

bool live_set_init(size_t capacity, PointerResolver resolve) {
  g_resolve = resolve;
  if (g_slots) return true;
  if (capacity < 2 || (capacity & (capacity - 1))) return false;
  void* p = mmap(nullptr, capacity * sizeof(Slot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) return false;
  g_mask = capacity - 1;
  g_shift = 64 - __builtin_ctzll(capacity);
  g_slots = static_cast<Slot*>(p);
  return true;
}

void live_set_keys_of(const MemoryEvent& e, uint64_t* allocated, uint64_t* freed, uint64_t* freed_alt) {
  *allocated = *freed = *freed_alt = 0;
  const bool graph_node = e.graph != 0 || e.capture_id != 0;
  switch (e.kind) {
    case EventKind::kAlloc:
      if (e.result != 0) return;
      if (graph_node) {
        // Memory of a graph: live at each launch, which the set does not follow.
        g_not_followed.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      *allocated = make_key(space_of(e), e.address);
      return;
    case EventKind::kFree: {
      // 4: a teardown free (CUDA_ERROR_DEINITIALIZED), which frees too (memtrace.proto: Event.result).
      if ((e.result != 0 && e.result != 4) || graph_node) return;
      const Space space = space_of(e);
      if (e.address == 0 && space != kDriverHandle) return;
      *freed = make_key(space, e.address);
      // cudaFree of memory from cudaMallocAsync frees the pool block.
      if (space == kDriverPointer) *freed_alt = make_key(kPoolBlock, e.address);
      return;
    }
    case EventKind::kAddressReserve:
      if (e.result == 0) *allocated = make_key(kReservation, e.address);
      return;
    case EventKind::kAddressFree:
      if (e.result == 0) *freed = make_key(kReservation, e.address);
      return;
    default: return;
  }
}

void live_set_note(const MemoryEvent& e) {
  if (!g_slots) return;
  if (e.kind == EventKind::kContextDestroy) {
    destroy_context(e);
    return;
  }
  uint64_t allocated, freed, freed_alt;
  live_set_keys_of(e, &allocated, &freed, &freed_alt);
  if (allocated) insert(allocated, fields_of(e));
  if (freed && !remove(freed) && freed_alt) remove(freed_alt);
}

void live_set_note_device_alloc(Api api, uint64_t address, uint64_t size) {
  if (!g_slots) return;
  if (const uint64_t key = make_key(kDriverPointer, address))
    insert(key, {size, 0, 0, pack_meta(kDeviceUnresolved, api, Memory::kDevice, Layer::kDriver)});
}

void live_set_note_device_free(uint64_t address) {
  if (!g_slots) return;
  const uint64_t key = make_key(kDriverPointer, address);
  const uint64_t pool_key = make_key(kPoolBlock, address);  // as live_set_keys_of: both counted if not followed
  if (key && !remove(key) && pool_key) remove(pool_key);
}

void live_set_note_torch_block(uint64_t address, int64_t size_delta, int32_t device) {
  if (!g_slots) return;
  const uint64_t key = make_key(kTorchBlock, address);
  if (!key) return;
  if (size_delta < 0) {
    remove(key);
    return;
  }
  insert(key, {static_cast<uint64_t>(size_delta), 0, 0,
               pack_meta(device, Api::kTorchAllocator, Memory::kDevice, Layer::kBlock)});
}

void live_set_resolve() {
  if (!g_slots) return;
  for (size_t i = 0; i <= g_mask; i++) {
    uint64_t key, context;
    LiveEntry entry;
    read_resolved_slot(g_slots[i], &key, &entry, &context);
  }
}

bool live_set_find(uint64_t key, LiveEntry* out) {
  if (!g_slots || !key) return false;
  Slot* s = find_slot(key);
  if (!s) return false;
  uint64_t k, context;
  return read_slot(*s, &k, out, &context) && k == key;
}

void live_set_visit_keyed(void (*visit)(uint64_t key, const LiveEntry& entry, void* context), void* context) {
  if (!g_slots) return;
  for (size_t i = 0; i <= g_mask; i++) {
    uint64_t key, cu_context;
    LiveEntry entry;
    if (read_slot(g_slots[i], &key, &entry, &cu_context)) visit(key, entry, context);
  }
}

void live_set_visit(void (*visit)(const LiveEntry& entry, void* context), void* context) {
  struct Forward {
    void (*visit)(const LiveEntry&, void*);
    void* context;
  } forward{visit, context};
  live_set_visit_keyed([](uint64_t, const LiveEntry& entry,
                          void* f) { static_cast<Forward*>(f)->visit(entry, static_cast<Forward*>(f)->context); },
                       &forward);
}

uint64_t live_set_overflow() { return g_overflow.load(std::memory_order_relaxed); }

uint64_t live_set_not_followed() { return g_not_followed.load(std::memory_order_relaxed); }

void live_set_clear() {
  if (g_slots) {
    // Back to untouched pages: the child's table costs no memory until used.
    madvise(g_slots, (g_mask + 1) * sizeof(Slot), MADV_DONTNEED);
  }
  g_overflow.store(0, std::memory_order_relaxed);
  g_not_followed.store(0, std::memory_order_relaxed);
}

}  // namespace memtrace
