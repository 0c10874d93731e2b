// The live set of a dormant tracer (MEMTRACE_START=dormant): every allocation live now, by layer and address,
// with its size, device, memory and API, and nothing else (no stack, no time). It is what a later attach or
// snapshot opens the trace with (LiveAtAttach records).
//
// The hot path of a dormant process is live_set_note() (or its forms for the commonest events) and nothing else, so it
// must cost little: at most 20 ns an event over no tracer (bench/dormant_event). A plain device allocation is noted
// without its device and context, which the hook would have to ask the driver for; live_set_resolve asks for them
// before the set is read. A fixed-capacity open-addressing table of atomics, mapped once at the first event (virtual
// memory until used), without a lock: an ALLOC claims an empty slot with a compare-and-swap on its key, a FREE clears
// it (a tombstone). Full: the allocation is counted as not kept, and the attach says how many (Notice
// ATTACH_INCOMPLETE), never a wrong size.
//
// The set is kept while the trace runs too (under the recorder's lock, by record_event), so that a detach returns
// to a set that is still exact and a later attach opens with it again.
#pragma once
#include <cstddef>
#include <cstdint>

#include "attach/live_entry.h"
#include "record/recorder.h"

namespace memtrace {

// The device and context of the allocation at `address`, from the driver (hooks/resolver.cc:
// device_and_context_of_pointer; 0: no context); false when it cannot say.
using PointerResolver = bool (*)(uint64_t address, int32_t* device, uint64_t* context);

// Maps the table (`capacity` slots, a power of two); `resolve` gives the device and context of entries noted
// without them. False when the memory could not be mapped. Once.
bool live_set_init(size_t capacity, PointerResolver resolve);

// Applies one event: an allocation (ALLOC, and CU_MEM_CREATE's handle, cuMemAddressReserve's range) is added, the
// matching free removed. Other kinds are ignored. Thread-safe, lock-free, never allocates. An ALLOC of device
// kDeviceUnresolved (record/recorder.h) is kept so until live_set_resolve; a CONTEXT_DESTROY resolves the entries
// it looks at first (the driver is asked before the context goes).
void live_set_note(const MemoryEvent& event);

// live_set_note of the two commonest events, with nothing to work out but the key: a successful plain device
// allocation of the driver layer (`api`, `address`, `size` bytes; device kDeviceUnresolved, no context, no stream),
// and the free of a driver pointer (cudaFree, cuMemFree), which frees the pool block at `address` when no driver
// pointer is live there.
void live_set_note_device_alloc(Api api, uint64_t address, uint64_t size);
void live_set_note_device_free(uint64_t address);
// And a PyTorch block (Api::kTorchAllocator, Layer::kBlock): allocated when `size_delta` > 0 (that many bytes, on
// `device`), freed when it is negative.
void live_set_note_torch_block(uint64_t address, int64_t size_delta, int32_t device);

// Gives every entry noted with kDeviceUnresolved its device and context from the resolver (-1 and none where the
// driver cannot say): before an attach or snapshot lists the set, while the memory is still allocated. One
// driver call per such entry; never under the recorder's lock. Entries noted unresolved while it runs may stay so.
void live_set_resolve();

// Calls `visit(entry, context)` for each live allocation. Concurrent notes may or may not be seen: the caller
// (recorder_attach) makes that exact (docs/attach.md).
void live_set_visit(void (*visit)(const LiveEntry& entry, void* context), void* context);

// Allocations that found the table full and were not kept (since init).
uint64_t live_set_overflow();

// Events the set could not follow (a graph's memory node, an address above 2^60): the attach says how many
// (Notice ATTACH_INCOMPLETE) rather than keep a wrong entry.
uint64_t live_set_not_followed();

// Empties the set (a forked child: the parent's memory is not the child's).
void live_set_clear();

// ---- for recorder_attach's window (record/lifecycle.cc), which must tell entries apart exactly ----------------

// The key of one allocation: its address space (a PyTorch block, a stream-ordered pool block, a driver pointer, a
// driver handle, an address reservation: the analyzer's spaces) and its address. 0 = none.
// What `event` allocates (`*allocated`) and frees (`*freed`, with the pool-block key a cudaFree may free too in
// `*freed_alt`); each 0 when it does not. Needs no table (the injected tracer's window uses it too).
void live_set_keys_of(const MemoryEvent& event, uint64_t* allocated, uint64_t* freed, uint64_t* freed_alt);

// The live entry of `key`: false when the set holds none (or is not mapped).
bool live_set_find(uint64_t key, LiveEntry* out);

// As live_set_visit, with each entry's key.
void live_set_visit_keyed(void (*visit)(uint64_t key, const LiveEntry& entry, void* context), void* context);

}  // namespace memtrace
