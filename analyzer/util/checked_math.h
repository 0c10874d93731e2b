// Saturating arithmetic on the times, sizes and counts a trace file gives. Every value comes from
// untrusted bytes, and signed overflow is undefined behaviour: a sum, difference or product of two such
// values is taken here, where it stops at the type's limit instead of wrapping (unsigned) or being
// undefined (signed). A saturated figure is still wrong, but finite and ordered: the trace health says
// where a file's values are beyond what the tracer can write (kMaxPlausibleBytes, kMaxPlausibleDeltaNs).
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace memtrace {

// For int64_t and uint64_t (the second operand takes the first's type). Unsigned results stop at 0 and
// UINT64_MAX, signed ones at INT64_MIN and INT64_MAX.
template <typename T>
requires std::same_as<T, int64_t> || std::same_as<T, uint64_t> T saturating_add(T a, std::type_identity_t<T> b) {
  T sum;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  if constexpr (std::is_signed_v<T>) return b > 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
  return std::numeric_limits<T>::max();
}

template <typename T>
requires std::same_as<T, int64_t> || std::same_as<T, uint64_t> T saturating_sub(T a, std::type_identity_t<T> b) {
  T difference;
  if (!__builtin_sub_overflow(a, b, &difference)) return difference;
  if constexpr (std::is_signed_v<T>) return b < 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
  return 0;
}

template <typename T>
requires std::same_as<T, int64_t> || std::same_as<T, uint64_t> T saturating_mul(T a, std::type_identity_t<T> b) {
  T product;
  if (!__builtin_mul_overflow(a, b, &product)) return product;
  if constexpr (std::is_signed_v<T>)
    return (a < 0) != (b < 0) ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
  return std::numeric_limits<T>::max();
}

// The largest size, in bytes, a trace can mean: 1 PiB (2^50). No device holds that much memory (the largest
// hold well under a TiB) and no GPU's virtual address space is that large (49 bits at most), so a size,
// total or reservation above it comes from a damaged or hostile file (counted in TraceHealth).
inline constexpr uint64_t kMaxPlausibleBytes = uint64_t{1} << 50;
// The largest gap between two records a trace can mean: 100 years, in nanoseconds (about 3.2e18; int64_t
// holds 292 years). Larger ones, either way, are counted in TraceHealth.
inline constexpr int64_t kMaxPlausibleDeltaNs = int64_t{36525} * 86400 * 1'000'000'000;  // 36,525 days

// Whether `delta_ns` lies within +-kMaxPlausibleDeltaNs: one addition and one comparison.
inline bool plausible_delta_ns(int64_t delta_ns) {
  return uint64_t(delta_ns) + uint64_t(kMaxPlausibleDeltaNs) <= 2 * uint64_t(kMaxPlausibleDeltaNs);
}

}  // namespace memtrace
