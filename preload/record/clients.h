// What the trace's lifecycle and hot path need from the tracer's other rooms, declared here and defined
// there: the samplers (samplers/device_usage.cc), the resolver and the process hooks (hooks/) include
// record/ to record, and record/ includes neither of them, so dependencies point one way. The functions
// are bound at link time (a direct call on the hot path, as cheap as before the rooms were split).
#pragma once
#include <cstdint>

namespace memtrace {

// ---- defined by samplers/device_usage.cc ----

// At trace start (inside the first hook that records): loads NVML unless MEMTRACE_NVML=0, and forgets which
// devices were seen (a forked child's trace describes its devices again).
void device_usage_start();

// Every recorded event's device: the first time a device is seen in the trace, writes its Device record (UUID,
// name, total memory: record_device) and, when NVML is loaded, reads its PCI bus id. One relaxed atomic load
// otherwise. On the hook's thread.
void device_usage_note_device(int device);

// One DEVICE_USAGE (api NVML_SAMPLE) per device seen, from NVML. Returns how many were recorded (0 without
// NVML). Called from the writer thread and the exit path only: NVML calls can take milliseconds.
int device_usage_sample_all();

// For an attach's AttachBaseline, from the control thread: `device`'s free and total bytes and this process's use
// from NVML (`has_process_used` false where NVML does not list it). False without NVML or when NVML does not know
// the device.
bool device_usage_baseline(int device, uint64_t* free_bytes, uint64_t* total_bytes, bool* has_process_used,
                           uint64_t* process_used_bytes);

// ---- defined by hooks/resolver.cc ----

// The device and context of the allocation at `address` (cuPointerGetAttribute: DEVICE_ORDINAL, CONTEXT; context 0
// when the driver names none), for the live set's entries a dormant hook noted without them
// (attach/live_set.h: live_set_resolve). False when the driver cannot say. Not for a hook's own event.
bool device_and_context_of_pointer(uint64_t address, int32_t* device, uint64_t* context);

// ---- defined by hooks/process_hooks.cc ----

// Installs our handler for each signal that ends the process (crash signals, SIGTERM, SIGINT, SIGHUP, ...: the
// table kEndingSignals in process_hooks.cc), keeping whatever the program had installed as the handler to chain
// to; a signal the program ignores stays ignored, with nothing of ours in front. Called when tracing starts; a
// later call (a forked child's start) keeps the table it inherited.
void ending_signals_install();

}  // namespace memtrace
