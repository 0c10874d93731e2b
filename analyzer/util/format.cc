#include "util/format.h"

#include <cstdio>
#include <ctime>

namespace memtrace {

std::string with_thousands(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string ordinal(uint64_t n) {
  const uint64_t last_two = n % 100, last = n % 10;
  const char* suffix = last_two >= 11 && last_two <= 13 ? "th"
                       : last == 1                      ? "st"
                       : last == 2                      ? "nd"
                       : last == 3                      ? "rd"
                                                        : "th";
  return std::to_string(n) + suffix;
}

std::string count_of(uint64_t count, const std::string& singular) {
  return with_thousands(count) + " " + singular + (count == 1 ? "" : "s");
}

std::string format_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = double(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.2f %s", value, kUnits[unit]);
  return std::string(text) + " (" + with_thousands(bytes) + " B)";
}

std::string format_seconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", seconds);
  return text;
}

std::string format_interval(double seconds) {
  if (seconds >= 0.001) return format_seconds(seconds);
  char text[32];
  std::snprintf(text, sizeof text, "%.0f us", seconds * 1e6);
  return text;
}

std::string format_utc(uint64_t unix_ns) {
  std::time_t seconds = std::time_t(unix_ns / 1'000'000'000);
  std::tm utc{};
  if (!gmtime_r(&seconds, &utc)) return "?";
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02d %02d:%02d:%02d.%03d UTC", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, int(unix_ns / 1'000'000 % 1000));
  return text;
}

std::string format_python_version(uint32_t hex_version) {
  const unsigned major = hex_version >> 24, minor = hex_version >> 16 & 0xFF, micro = hex_version >> 8 & 0xFF;
  const unsigned level = hex_version >> 4 & 0xF, serial = hex_version & 0xF;
  const char* suffix = level == 0xA ? "a" : level == 0xB ? "b" : level == 0xC ? "rc" : nullptr;
  char text[32];
  if (level == 0xF) std::snprintf(text, sizeof text, "%u.%u.%u", major, minor, micro);
  else if (suffix) std::snprintf(text, sizeof text, "%u.%u.%u%s%u", major, minor, micro, suffix, serial);
  else std::snprintf(text, sizeof text, "0x%08X", hex_version);
  return text;
}

std::string gpu_uuid_name(std::string_view uuid) {
  if (uuid.size() != 16) return "";
  static const char kHex[] = "0123456789abcdef";
  std::string name = "GPU-";
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) name += '-';
    name += kHex[uint8_t(uuid[i]) >> 4];
    name += kHex[uint8_t(uuid[i]) & 15];
  }
  return name;
}

}  // namespace memtrace
