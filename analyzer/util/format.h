// Number formatting for the human-readable reports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memtrace {

// "1,234,567"
std::string with_thousands(uint64_t value);
// "1st", "2nd", "3rd", "11th", "16th", "22nd", "128th"
std::string ordinal(uint64_t n);
// "1 allocation", "1,024 allocations"
std::string count_of(uint64_t count, const std::string& singular);
// "9.31 GiB (9,999,999,999 B)"; below 1 KiB just "512 B".
std::string format_bytes(uint64_t bytes);
// "12.345 s"
std::string format_seconds(double seconds);
// A time between two events: as format_seconds from a millisecond up, in whole microseconds below it
// ("14 us"), where "0.000 s" would say nothing.
std::string format_interval(double seconds);
// "2026-11-29 17:15:38.123 UTC" for nanoseconds since the Unix epoch.
std::string format_utc(uint64_t unix_ns);
// CPython's PY_VERSION_HEX (TraceStart.python_frames; CPython's patchlevel.h: major << 24 | minor << 16 |
// micro << 8 | release level << 4 | serial) as CPython writes its version: "3.12.3" (level 0xF, final),
// "3.13.0rc1" (0xC), "3.14.0b1" (0xB), "3.14.0a2" (0xA). A level CPython does not use gives the number
// itself, "0x030C0350", rather than a version that was never released. 0 ("no Python frames read") is the
// caller's to say.
std::string format_python_version(uint32_t hex_version);

// A GPU as nvidia-smi names it: "GPU-" and a 16-byte CUDA UUID (cuDeviceGetUuid_v2, the trace's Device.uuid) as
// 8-4-4-4-12 lower-case hex digits ("GPU-2aa2d2cf-da92-4986-7826-f98120b2d410"); "" for bytes of another length.
std::string gpu_uuid_name(std::string_view uuid);

}  // namespace memtrace
