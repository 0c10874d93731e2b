// The driver layer of a tracer loaded into a running process: CUPTI's driver-API callbacks for the memory
// functions (cuMemAlloc/Free, pitch, managed, stream-ordered, VMM, page-locked host memory, arrays). A subscriber
// made after the job created its context still gets every later call (measured on the H200: docs/injected-attach.md).
// Each callback runs on the thread that made the call and records what the call did exactly as the driver hook of
// the same function would (hooks/driver_events.h): allocations at API exit with their result, frees at API entry
// (before the memory can be handed out again) carrying the size and device the driver gives for the address,
// since the allocation may predate attach. CUPTI allows one subscriber per process: with another one (Kineto,
// Nsight) the source stays off and says so.
#pragma once
#include <cstddef>

namespace memtrace {

enum class CuptiStart {
  kOn,           // subscribed; the memory callbacks are enabled
  kBusy,         // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: another tool is subscribed
  kUnavailable,  // no libcupti, or it refused
};

// Loads CUPTI (cupti_loader.h), subscribes and enables the callbacks. Anything but kOn writes one line into
// `why`. From the control thread; not while on.
CuptiStart cupti_source_start(char* why, size_t why_size);

// Disables the callbacks and unsubscribes; returns once no callback of ours runs on any thread (one that CUPTI
// had already started finishes first; one that starts later records nothing). Call it without the recorder's
// lock (a callback in flight may be waiting for it). A no-op when not on.
void cupti_source_stop();

}  // namespace memtrace
