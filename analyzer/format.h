// Number formatting for the human-readable reports.
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace memtrace
