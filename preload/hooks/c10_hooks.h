// PyTorch's allocator report hooks (c10_hooks.cc), by mangled name and by our definition's address: what the
// injected tracer's GOT patch (attach/got_patch.h) stores in the import slots of the libraries that call
// libc10.so's own (libc10_cuda.so), so that a tracer loaded into a running job gets the block layer too.
#pragma once

namespace memtrace {

// c10::reportMemoryUsageToProfiler(void*, int64_t, size_t, size_t, c10::Device)
inline constexpr const char kC10ReportUsageSymbol[] = "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE";
// c10::reportOutOfMemoryToProfiler(int64_t, size_t, size_t, c10::Device)
inline constexpr const char kC10ReportOomSymbol[] = "_ZN3c1027reportOutOfMemoryToProfilerElmmNS_6DeviceE";

// Our definitions of the two (they record, then forward to libc10.so's own).
void* c10_report_usage_hook();
void* c10_report_oom_hook();

}  // namespace memtrace
